"""Group commit: whoever needs durability waits; one writer thread commits all that has
accumulated, so many persistent messages share one fsync.

A commit that fails is fail-stop: nothing collected since the last commit is durable, so every
waiter gets ``StoreFailed``, so does every later ``durable`` call, no further commit is tried
(a later one could write removals of messages whose arrival was lost) and ``on_failure`` is told
once, so the node stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from qmgr.store import StoreFailed
from qmgr.store.sqlite import SqliteStore


class Committer:
    def __init__(
        self,
        store: SqliteStore,
        idle_interval: float = 0.05,
        on_failure: Callable[[StoreFailed], None] | None = None,
    ) -> None:
        self._store = store
        self._idle = idle_interval
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="qmgr-commit")
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.on_failure = on_failure
        self.failure: StoreFailed | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

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
        self._waiters.append((target, fut))
        self._wake.set()
        await fut

    @property
    def position(self) -> int:
        """How many changes have been collected so far (a target for ``durable``)."""
        return self._store.appended

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping and self.failure is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._idle)
            self._wake.clear()
            await self._commit_once(loop)

    async def _commit_once(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.failure is not None or not self._store.has_pending:
            return
        ops, upto = self._store.take()
        try:
            await loop.run_in_executor(self._executor, self._store.commit, ops)
        except Exception as exc:  # the store is broken: fail everyone waiting, stop committing
            self._failed(exc)
            return
        self._store.committed = upto
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, fut in self._waiters:
            if target <= upto:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still

    def _failed(self, exc: Exception) -> None:
        failure = StoreFailed(f"store commit failed: {type(exc).__name__}: {exc}")
        failure.__cause__ = exc
        self.failure = failure
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(StoreFailed(str(failure)))
        self._waiters.clear()
        if self.on_failure is not None:
            self.on_failure(failure)

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._commit_once(asyncio.get_running_loop())
        self._executor.shutdown(wait=True)
