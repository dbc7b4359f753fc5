"""One partition of ``df.write.format("qmgr")``: its rows published on one stream publisher,
batched, paced to the partition's rate, each acknowledgement recorded in the ack log."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from qmgr.client import MQClientError, QueueManagerClient
from qmgr.spark.options import QmgrSourceError, Security, WriteOptions

PUBLISHER_PROPERTY = "LoadPublisher"
SEQ_PROPERTY = "LoadSeq"
RATE_BATCH_SECONDS = 0.01  # with a rate, a batch holds at most this long's worth of messages


class QmgrWriteError(RuntimeError):
    """A partition could not publish everything (the node failed or refused a message)."""


@dataclass(frozen=True)
class Columns:
    """Where the written DataFrame's columns are in each row (None: no such column)."""

    body: int
    topic: int | None
    properties: int | None
    persistent: int | None

    @classmethod
    def of(cls, names: Sequence[str]) -> Columns:
        where = {n.lower(): i for i, n in enumerate(names)}
        if "body" not in where:
            raise QmgrSourceError(
                f"the DataFrame needs a body column (binary or string); it has {list(names)}"
            )
        return cls(
            where["body"], where.get("topic"), where.get("properties"), where.get("persistent")
        )


@dataclass
class WriteResult:
    """What a partition did (the commit message sent back to the driver)."""

    partition: int
    attempt: int
    sent: int
    acknowledged: int


def client(address: str, security: Security, timeout: float = 30.0) -> QueueManagerClient:
    return QueueManagerClient(address, timeout, **asdict(security))


class AckLog:
    """``ack-<partition>-<attempt>.jsonl``: one line per acknowledged message, written as each
    acknowledgement arrives (so it holds what was acknowledged even when the task fails)."""

    def __init__(self, directory: str | None, partition: int, attempt: int) -> None:
        self._file: IO[str] | None = None
        if directory is not None:
            Path(directory).mkdir(parents=True, exist_ok=True)
            path = os.path.join(directory, f"ack-{partition}-{attempt}.jsonl")
            self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._batches: dict[int, list[tuple[str | None, int | None, str, int]]] = {}
        self.acknowledged = 0

    def sending(
        self, batch_id: int, publisher: str | None, seq: int | None, topic: str, sent_ns: int
    ) -> None:
        if self._file is None:
            return
        with self._lock:
            self._batches.setdefault(batch_id, []).append((publisher, seq, topic, sent_ns))

    def acked(self, batch_id: int, accepted: int) -> None:
        """The node answered batch ``batch_id``: its first ``accepted`` messages are published."""
        ack_ns = time.time_ns()
        self.acknowledged += accepted
        if self._file is None:
            return
        with self._lock:
            entries = self._batches.pop(batch_id, [])[:accepted]
        self._file.write(
            "".join(
                json.dumps(
                    {"publisher": p, "seq": s, "topic": t, "ack_ns": ack_ns, "sent_ns": sent}
                )
                + "\n"
                for p, s, t, sent in entries
            )
        )
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _seq(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _body(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise QmgrSourceError(f"a row's body is {type(value).__name__}, not binary or string")


def publish_rows(
    opts: WriteOptions, columns: Columns, rows: Iterable[Any], partition: int, attempt: int
) -> WriteResult:
    """Publish every row; raises :class:`QmgrWriteError` (after recording what was
    acknowledged) when the node fails."""
    batch_size = opts.batch_size
    if opts.rate > 0:
        batch_size = max(1, min(batch_size, int(opts.rate * RATE_BATCH_SECONDS)))
    log = AckLog(opts.ack_log, partition, attempt)
    sent = 0
    qm = client(opts.address, opts.security)
    try:
        pub = qm.stream_publisher(batch_size, opts.window, on_ack=log.acked)
        start = 0.0  # when the first message went: the n-th goes n / rate seconds after it
        for row in rows:
            topic = row[columns.topic] if columns.topic is not None else None
            topic = topic or opts.topic
            if not topic:
                raise QmgrSourceError(
                    f"row {sent + 1} of partition {partition} has no topic and there is no "
                    "topic option"
                )
            props = dict(row[columns.properties] or {}) if columns.properties is not None else {}
            persistent = row[columns.persistent] if columns.persistent is not None else None
            if persistent is None:
                persistent = opts.persistent
            body = _body(row[columns.body])
            if opts.rate > 0:
                if sent == 0:
                    start = time.monotonic()
                delay = start + sent / opts.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            sent_ns = time.time_ns()
            if opts.sent_property:
                props[opts.sent_property] = str(sent_ns)
            log.sending(
                pub.pending_batch_id,
                props.get(PUBLISHER_PROPERTY),
                _seq(props.get(SEQ_PROPERTY)),
                topic,
                sent_ns,
            )
            pub.publish(topic, body, properties=props, persistent=bool(persistent))
            sent += 1
        pub.flush()
    except MQClientError as exc:
        raise QmgrWriteError(
            f"qmgr data source: partition {partition} (attempt {attempt}) publishing to node "
            f"{opts.node} ({opts.address}) failed after {sent} messages sent, "
            f"{log.acknowledged} acknowledged: {exc}"
        ) from exc
    except QmgrSourceError:
        raise
    except ValueError as exc:  # a property the node cannot carry
        raise QmgrSourceError(f"row {sent + 1} of partition {partition}: {exc}") from exc
    finally:
        qm.close()
        log.close()
    return WriteResult(partition, attempt, sent, log.acknowledged)
