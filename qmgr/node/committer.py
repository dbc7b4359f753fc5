"""Group commit: whoever needs durability waits; one writer thread commits all that has
accumulated, so many persistent messages share one fsync."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor

from qmgr.store.sqlite import SqliteStore


class Committer:
    def __init__(self, store: SqliteStore, idle_interval: float = 0.05) -> None:
        self._store = store
        self._idle = idle_interval
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="qmgr-commit")
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def durable(self, target: int | None = None) -> None:
        """Return once every change collected so far (or up to position ``target``, see
        ``position``) is on disk."""
        if target is None:
            target = self._store.appended
        if self._store.committed >= target:
            return
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
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._idle)
            self._wake.clear()
            await self._commit_once(loop)

    async def _commit_once(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._store.has_pending:
            return
        ops, upto = self._store.take()
        try:
            await loop.run_in_executor(self._executor, self._store.commit, ops)
        except Exception as exc:  # the store is broken: fail everyone waiting
            for _, fut in self._waiters:
                if not fut.done():
                    fut.set_exception(exc)
            self._waiters.clear()
            raise
        self._store.committed = upto
        still: list[tuple[int, asyncio.Future[None]]] = []
        for target, fut in self._waiters:
            if target <= upto:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._commit_once(asyncio.get_running_loop())
        self._executor.shutdown(wait=True)
