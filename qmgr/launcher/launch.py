"""Starting one ``qmgr start`` process and waiting for its READY line (:func:`start_node`), a
node that is killed and started again on the same data and address (:class:`NodeProcess`),
several started at once (:func:`start_together`), and a throw-away QMGR_HOME for the nodes of
a demo or load run (:func:`home_for_nodes`). The READY line is read from the child's stdout on a
thread, so the wait ends the moment it is printed rather than at the next poll."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from qmgr.client import QueueManagerClient
from qmgr.launcher.errors import NodeStartError


def qmgr_command() -> list[str]:
    exe = Path(sys.executable).parent / "qmgr"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("qmgr")
    return [found] if found else [sys.executable, "-m", "qmgr.cli.main"]


@dataclass
class Launched:
    name: str
    proc: subprocess.Popen[str]
    address: str
    log: Path
    servicebus: str = ""  # HOST:PORT of its Service Bus port (sb= on the READY line), if any


def start_node(
    name: str,
    *,
    data_dir: Path | None,
    log: Path,
    listen: str = "127.0.0.1:0",
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Launched:
    """Start ``qmgr start`` as a child process; return once it printed READY (NodeStartError,
    with the end of its log, when it exits or prints none within ``timeout``). A node hosting
    Service Bus gets a free port for it unless ``--servicebus-port`` is among ``extra_args``
    (several nodes on one machine cannot all have 5672)."""
    args = [*qmgr_command(), "start", "--name", name, "--listen", listen]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    extra = list(extra_args or [])
    if any(a.startswith("--servicebus") for a in extra) and not any(
        a.startswith("--servicebus-port") for a in extra
    ):
        extra += ["--servicebus-port", "127.0.0.1:0"]
    args += extra
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as log_file:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=log_file, text=True, env=env or dict(os.environ)
        )
    ready: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        with proc.stdout:  # closed at the child's end, so no descriptor outlives it
            for line in proc.stdout:
                if line.startswith("READY ") and not ready:
                    ready.append(line)
                    done.set()
        done.set()

    threading.Thread(target=read, daemon=True).start()
    if not done.wait(timeout) or not ready:
        proc.kill()
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise NodeStartError(f"node {name} did not become ready:\n{tail}")
    fields = dict(part.split("=", 1) for part in ready[0].split()[1:])
    return Launched(name, proc, fields["addr"], log, fields.get("sb", ""))


@contextlib.contextmanager
def home_for_nodes(home: Path | None) -> Iterator[None]:
    """Nodes register themselves under QMGR_HOME; point a throw-away cluster's nodes at their
    own home so they do not replace the entries of a cluster the user runs."""
    if home is None:
        yield
        return
    old = os.environ.get("QMGR_HOME")
    os.environ["QMGR_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("QMGR_HOME", None)
        else:
            os.environ["QMGR_HOME"] = old


class NodeProcess:
    """One ``qmgr start`` child that is killed and started again on the same data, log and
    listen address: the node the integration tests and the benchmarks drive. ``address`` and
    ``servicebus`` are those of its last READY line."""

    def __init__(
        self,
        name: str,
        *,
        log: Path,
        data_dir: Path | None = None,
        listen: str = "127.0.0.1:0",
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.name = name
        self.log = log
        self.data_dir = data_dir
        self.listen = listen
        self.extra_args = list(extra_args or [])  # more `qmgr start` options, kept across starts
        self.env = env
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""
        self.servicebus = ""
        self._client: QueueManagerClient | None = None

    def start(self, timeout: float | None = None) -> str:
        """Start the node (NodeStartError when it does not become ready); its address."""
        self._drop_client()  # a client of the previous start is not reused
        launched = start_node(
            self.name,
            data_dir=self.data_dir,
            log=self.log,
            listen=self.listen,
            extra_args=self.extra_args,
            env=self.env,
            timeout=self.start_timeout if timeout is None else timeout,
        )
        self.proc = launched.proc
        self.address = launched.address
        self.servicebus = launched.servicebus
        return self.address

    @property
    def c(self) -> QueueManagerClient:
        """A client of the node, made at first use after each start and kept."""
        if self._client is None:
            self._client = QueueManagerClient(self.address, timeout=20)
        return self._client

    def mqsc(self, command: str) -> list[dict[str, str]]:
        """Attributes of each record a successful command returned."""
        return [r.attrs for r in self.c.mqsc(command)]

    def proxies(self) -> set[tuple[str, str]]:
        """(origin queue manager, topic string) of every proxy subscription held here."""
        ok, records = self.c.mqsc_ok("DISPLAY SUB(*) SUBTYPE(PROXY)")
        return {(r.attrs["DESTQMGR"], r.attrs["TOPICSTR"]) for r in records} if ok else set()

    def chstatus(self) -> dict[str, dict[str, str]]:
        """Its sending cluster channels by remote queue manager (STATUS, MSGS, XQMSGSA...)."""
        ok, records = self.c.mqsc_ok("DISPLAY CHSTATUS(*)")
        if not ok:
            return {}
        return {r.attrs["RQMNAME"]: r.attrs for r in records if r.attrs.get("CHLTYPE") == "CLUSSDR"}

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9: the node gets no chance to flush anything."""
        self._drop_client()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, then its exit code once it has exited (a client of it stays open: a test
        may watch what the client sees of the stop)."""
        assert self.proc is not None, f"node {self.name} was never started"
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def start_together(nodes: Iterable[NodeProcess]) -> None:
    """Start ``nodes`` at the same time (full repositories wait for each other's Raft, so one
    at a time would not do) and return once all are ready; the first failure is raised after
    every start has ended."""
    errors: list[BaseException] = []

    def run(node: NodeProcess) -> None:
        try:
            node.start()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
