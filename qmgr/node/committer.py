"""Group commit: whoever needs durability waits; one writer thread commits all that has
accumulated, so many persistent messages share one fsync.

A group is taken at the end of the event-loop turn in which the first waiter asked, so
changes made by every connection served in that turn share the commit; while a commit is under
way, changes keep accumulating and form the next group (one transaction, one flush for all of
them), taken as soon as it is done: the group's size follows the commit's latency, with no
timer.

A commit has two parts. Writing the group's rows into the transaction is Python and SQLite work
that holds the interpreter's lock row by row: it is done on the event loop, because in a thread
it would run no faster and would trade the lock with the loop for every row (a group of a
thousand rows took several times as long that way on a busy node). Committing the transaction
(the write-ahead log written and flushed to the disk) holds no lock and is the part that waits:
from a fraction of a millisecond on a quiet disk to 10 ms and more on a busy one. On the event
loop it would stop the node for that long (no publication read, no channel batch sent or
acknowledged), so it goes to a dedicated writer thread (handed over directly, no executor) and
the loop goes on serving and collecting the next group, unless the commits of its kind (with a
flush, or only Service Bus completions and lock marks, written without one) have lately measured
cheap (at most ``cheap_commit`` seconds): then it is done on the loop, because handing it to the
thread and back (two thread wake-ups, a self-pipe write and read) costs more than it does. The
estimate of each kind rises at once with a slow commit and falls slowly with fast ones, so one
slow flush sends the next ones to the thread; until a kind has been measured, its commits go to
the thread. Changes that nobody waits for are committed within ``idle_interval``.

A commit that fails is fail-stop: nothing collected since the last commit is durable, so every
waiter gets ``StoreFailed``, so does every later ``durable`` call, no further commit is tried
(a later one could write removals of messages whose arrival was lost) and ``on_failure`` is told
once, so the node stops.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable

from qmgr.store import StoreFailed
from qmgr.store.sqlite import RELAXED, SqliteStore

log = logging.getLogger("qmgr.store")

_Job = tuple[int | None, int, bool] | None  # a written group to commit (see
# ``SqliteStore.finish``), the position it reaches, whether it flushes; None: stop
CHEAP_COMMIT = 0.0005  # seconds: a commit of a kind measured this fast is made on the loop
FALL = 0.125  # how far a faster commit moves the estimate of its kind towards it


class Committer:
    def __init__(
        self,
        store: SqliteStore,
        idle_interval: float = 0.05,
        on_failure: Callable[[StoreFailed], None] | None = None,
        cheap_commit: float = CHEAP_COMMIT,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._store = store
        self._idle = idle_interval
        self._cheap = cheap_commit
        self._clock = clock
        # seconds a commit is expected to take, by kind (True: with a flush); none until one
        # was measured
        self._cost: dict[bool, float] = {}
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, Callable[[StoreFailed | None], None]]] = []
        self._busy = False  # a group is with the writer
        self._scheduled = False  # a take is scheduled for the end of this loop turn
        self._idle_handle: asyncio.TimerHandle | None = None
        self._settled: asyncio.Future[None] | None = None  # stop() waits for the writer
        self._stopping = False
        self.on_failure = on_failure
        self.failure: StoreFailed | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._writer, name="qmgr-commit", daemon=True)
        self._thread.start()
        self._idle_handle = self._loop.call_later(self._idle, self._idle_tick)

    async def durable(self, target: int | None = None) -> None:
        """Return once every change collected so far (or up to position ``target``, see
        ``position``) is on disk; raise ``StoreFailed`` if it never will be."""
        if target is None:
            target = self._store.appended
        if self._store.committed >= target:
            return
        if self.failure is not None:
            raise StoreFailed(str(self.failure))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(error: StoreFailed | None) -> None:
            if fut.done():
                return
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(error)

        self.when_durable(done, target)
        await fut

    def when_durable(
        self, callback: Callable[[StoreFailed | None], None], target: int | None = None
    ) -> None:
        """Call ``callback(None)`` (on the event loop) once every change collected so far (or
        up to ``target``) is on disk, ``callback(StoreFailed)`` if it never will be; at once
        when that is known already. Callbacks waiting for one commit are called in the order
        they were given."""
        if target is None:
            target = self._store.appended
        if self._store.committed >= target:
            callback(None)
            return
        if self.failure is not None:
            callback(StoreFailed(str(self.failure)))
            return
        self._waiters.append((target, callback))
        self._kick()

    @property
    def position(self) -> int:
        """How many changes have been collected so far (a target for ``durable``)."""
        return self._store.appended

    # -- event-loop side --------------------------------------------------------------------

    def _kick(self) -> None:
        if not self._busy and not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._take)

    def _take(self) -> None:
        """Commit what has accumulated (if no commit is under way and anything is pending)."""
        self._scheduled = False
        if self._busy or self.failure is not None or not self._store.has_pending:
            return
        self._busy = True
        ops, upto = self._store.take()
        flushes = any(kind not in RELAXED for kind, _ in ops)
        try:
            written = self._store.write(ops)
        except Exception as exc:
            self._done(upto, flushes, 0.0, exc)
            return
        if self._thread is not None and not self._cheap_enough(flushes):
            self._jobs.put((written, upto, flushes))
            return
        self._done(upto, flushes, *self._finish(written))

    def _cheap_enough(self, flushes: bool) -> bool:
        """Whether committing on the event loop costs less than the thread would."""
        cost = self._cost.get(flushes)
        return cost is not None and cost <= self._cheap

    def _measured(self, flushes: bool, seconds: float) -> None:
        cost = self._cost.get(flushes)
        if cost is None or seconds >= cost:
            self._cost[flushes] = seconds
        else:
            self._cost[flushes] = cost + (seconds - cost) * FALL

    def _idle_tick(self) -> None:
        self._take()
        if not self._stopping and self._loop is not None:
            self._idle_handle = self._loop.call_later(self._idle, self._idle_tick)

    def _done(self, upto: int, flushes: bool, seconds: float, error: BaseException | None) -> None:
        """A group was committed in ``seconds`` (on the event loop, or by the writer thread
        and told on the event loop)."""
        self._busy = False
        if error is not None:  # the store is broken: fail everyone waiting, stop committing
            self._failed(error)
        else:
            self._measured(flushes, seconds)
            self._store.committed = upto
            ready = [cb for target, cb in self._waiters if target <= upto]
            self._waiters = still = [(t, cb) for t, cb in self._waiters if t > upto]
            for callback in ready:
                _call(callback, None)
            if still:  # what accumulated meanwhile is the next group
                self._take()
        if not self._busy and self._settled is not None and not self._settled.done():
            self._settled.set_result(None)

    def _failed(self, exc: BaseException) -> None:
        failure = StoreFailed(f"store commit failed: {type(exc).__name__}: {exc}")
        failure.__cause__ = exc
        self.failure = failure
        waiters, self._waiters = self._waiters, []
        for _, callback in waiters:
            _call(callback, StoreFailed(str(failure)))
        if self.on_failure is not None:
            self.on_failure(failure)

    def _finish(self, written: int | None) -> tuple[float, BaseException | None]:
        """Commit a written group (on either side): how long it took, and what it raised."""
        start = self._clock()
        try:
            self._store.finish(written)
        except Exception as exc:
            return self._clock() - start, exc
        return self._clock() - start, None

    # -- writer thread ----------------------------------------------------------------------

    def _writer(self) -> None:
        loop = self._loop
        assert loop is not None
        while True:
            job = self._jobs.get()
            if job is None:
                return
            written, upto, flushes = job
            seconds, error = self._finish(written)
            try:
                loop.call_soon_threadsafe(self._done, upto, flushes, seconds, error)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                return

    async def stop(self) -> None:
        """Commit what is pending, then end the writer thread."""
        self._stopping = True
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        loop = asyncio.get_running_loop()
        while self._busy or (self.failure is None and self._store.has_pending):
            self._settled = loop.create_future()
            if not self._busy:
                self._take()
            await self._settled
        self._jobs.put(None)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)


def _call(callback: Callable[[StoreFailed | None], None], error: StoreFailed | None) -> None:
    try:
        callback(error)
    except Exception:
        log.exception("a callback waiting for a commit failed")
