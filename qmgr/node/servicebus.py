"""The Service Bus namespace a node hosts (``qmgr start --servicebus``): restored from the
node's store at start, journaled to it on the same group commit as the MQ side, entities from a
Config.json applied at start, and the timer that drives lock expiry, scheduled messages, TTL and
duplicate-detection history.

The timer asks the namespace when it next has something to do (``next_deadline``) and calls
``tick`` then; whoever changes the namespace calls :meth:`ServiceBusHost.changed` so an earlier
deadline is seen at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from qmgr.core.clock import Clock
from qmgr.node.config import DEFAULT_NAMESPACE
from qmgr.servicebus import config_json
from qmgr.servicebus.config_json import Config
from qmgr.servicebus.errors import ServiceBusError
from qmgr.servicebus.message import NullSbJournal, SbJournal
from qmgr.servicebus.namespace import Namespace, NamespaceLimits
from qmgr.store.servicebus import SbLoaded, SbStoreJournal

if TYPE_CHECKING:
    from qmgr.store.sqlite import SqliteStore

log = logging.getLogger("qmgr.servicebus")

NAMESPACE_KEY = "namespace"  # sb_values: the name the namespace was created with
RETRY_AFTER_FAILURE = 1.0  # seconds the timer waits after a tick that raised


class ServiceBusStartError(Exception):
    """The namespace cannot be hosted as asked (a bad Config.json, a store it cannot read)."""


def read_config_file(path: Path) -> Config:
    """Read and check the emulator's Config.json at ``path``; ServiceBusStartError names the
    file, the JSON path and the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceBusStartError(f"cannot read {path}: {exc}") from None
    try:
        return config_json.loads(text)
    except ServiceBusError as exc:
        raise ServiceBusStartError(f"{path}: {exc}") from None


def namespace_name(
    given: str | None, config: Config | None, stored: str | None, path: Path | None
) -> str:
    """The namespace to host: ``--servicebus NAME``, else the one Config.json names, else the
    one the store holds, else ``sbemulatorns``. A Config.json for another namespace than the
    one named is refused."""
    if config is not None:
        named = config.namespace.name
        if given is not None and given.lower() != named.lower():
            raise ServiceBusStartError(
                f"{path}: UserConfig.Namespaces[0].Name: the file defines namespace "
                f"'{named}' but --servicebus names '{given}'"
            )
        return given or named
    return given or stored or DEFAULT_NAMESPACE


class ServiceBusHost:
    def __init__(
        self,
        name: str,
        clock: Clock,
        store: SqliteStore | None = None,
        loaded: SbLoaded | None = None,
        limits: NamespaceLimits | None = None,
    ) -> None:
        journal: SbJournal = SbStoreJournal(store) if store is not None else NullSbJournal()
        self.clock = clock
        self.namespace = Namespace(name, clock=clock, journal=journal, limits=limits)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # told at every change (the node's bridges that read from the namespace wake up)
        self.listeners: list[Callable[[], None]] = []
        # told when something inside the node (a bridge) sent messages: receivers look again
        self.on_arrival: list[Callable[[], None]] = []
        if loaded is not None and not loaded.empty:
            self._restore(loaded)
        if store is not None:
            journal.value_saved(NAMESPACE_KEY, name)

    def _restore(self, loaded: SbLoaded) -> None:
        ns = self.namespace
        previous = loaded.values.get(NAMESPACE_KEY)
        if previous and previous != ns.name:
            log.warning("the store holds namespace %s; it is hosted as %s now", previous, ns.name)
        try:
            for path, data in loaded.entities:
                ns.restore_entity(path, data)
            for entity, stored in loaded.messages:
                ns.restore_message(entity, stored)
            for entity, session_id, state in loaded.sessions:
                ns.restore_session_state(entity, session_id, state)
            for key, value in loaded.values.items():
                if key != NAMESPACE_KEY:
                    ns.restore_value(key, value)
            ns.finish_restore()
        except ServiceBusError as exc:
            raise ServiceBusStartError(f"cannot restore the Service Bus namespace: {exc}") from exc

    def apply(self, config: Config) -> list[str]:
        """Make the namespace hold what a checked Config.json defines (create or update to
        match; nothing changed if the namespace refuses any of it). Returns what changed."""
        changes = config_json.apply(self.namespace, config)
        self.changed()
        return changes

    def apply_text(self, text: str) -> list[str]:
        """Check and apply a Config.json text (ServiceBusError naming the JSON path if bad)."""
        return self.apply(config_json.loads(text))

    def export_config(self) -> str:
        """The namespace as a Config.json text."""
        return json.dumps(config_json.export(self.namespace), indent=2)

    # -- the timer --------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._timer())

    def changed(self) -> None:
        """Something may have moved the next deadline earlier: look again."""
        self._wake.set()
        for listener in self.listeners:
            listener()

    def arrived(self) -> None:
        """Messages were sent from inside the node: the timer and the receivers look again."""
        self.changed()
        for listener in self.on_arrival:
            listener()

    async def _timer(self) -> None:
        ns = self.namespace
        while True:
            deadline = ns.next_deadline()
            wait = None if deadline is None else max(0.0, deadline - self.clock.now())
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
            else:
                await asyncio.sleep(0)  # due at once: let the calls waiting go first
            self._wake.clear()
            deadline = ns.next_deadline()
            if deadline is None or deadline > self.clock.now():
                continue
            try:
                ns.tick()
            except Exception:
                log.exception("Service Bus timer failed; retrying in %s s", RETRY_AFTER_FAILURE)
                await asyncio.sleep(RETRY_AFTER_FAILURE)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
