"""The Service Bus namespace a node hosts (``qmgr start --servicebus``): restored from the
node's store at start, journaled to it on the same group commit as the MQ side, entities from a
Config.json applied at start, and the timer that drives lock expiry, scheduled messages, TTL and
duplicate-detection history.

The timer asks the namespace when it next has something to do (``next_deadline``) and calls
``tick`` then; whoever changes the namespace calls :meth:`ServiceBusHost.changed` so an earlier
deadline is seen at once and the listeners (the AMQP receivers that wait for messages) look
again; whoever only takes a lock calls :meth:`ServiceBusHost.deadline_moved`. Nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for = math.inf  # the deadline the timer is set for
        self._listeners: list[Callable[[], None]] = []
        self._notify_scheduled = False
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
            locked = loaded.locked
            for entity, stored in loaded.messages:
                lost = (entity, stored.sequence_number) in locked
                ns.restore_message(entity, stored, lock_lost=lost)
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

    # -- the timer and the listeners ---------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._arm()

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the event loop) whenever messages may have become available:
        after :meth:`changed` and after the timer expired locks or activated messages."""
        self._listeners.append(listener)

    def unlisten(self, listener: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def changed(self) -> None:
        """The namespace changed: look at the next deadline again, and tell the listeners
        (once per event-loop turn, however often this is called in it)."""
        self.deadline_moved()
        if self._loop is not None and not self._notify_scheduled:
            self._notify_scheduled = True
            self._loop.call_soon(self._notify)

    def deadline_moved(self) -> None:
        """A deadline may now come earlier than the one the timer waits for (a lock taken,
        a message scheduled): look again. Cheap when it does not."""
        if self._loop is None:
            return
        deadline = self.namespace.next_deadline()
        if deadline is not None and deadline < self._armed_for:
            self._arm()

    def _notify(self) -> None:
        self._notify_scheduled = False
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                log.exception("Service Bus: a listener failed")

    def _arm(self, delay: float | None = None) -> None:
        """Schedule the timer for the namespace's next deadline (or after ``delay``)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = math.inf
        if self._loop is None:
            return
        if delay is None:
            deadline = self.namespace.next_deadline()
            if deadline is None:
                return
            self._armed_for = deadline
            delay = max(0.0, deadline - self.clock.now())
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = math.inf
        ns = self.namespace
        deadline = ns.next_deadline()
        if deadline is not None and deadline <= self.clock.now():
            try:
                ns.tick()
            except Exception:
                log.exception("Service Bus timer failed; retrying in %s s", RETRY_AFTER_FAILURE)
                self._arm(RETRY_AFTER_FAILURE)
                return
            self.changed()  # locks expired, messages activated: receivers may look again
        self._arm()

    def clock_moved(self) -> None:
        """The clock jumped forward (a test moved it): do at once what is now due (locks
        expired, messages activated or expired by their time to live) and wait for the next
        deadline as the moved clock sees it."""
        if self._loop is None:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._fire()

    async def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._loop = None
        self._listeners.clear()
