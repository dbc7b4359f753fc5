"""Wake-ups for consumers waiting on a queue."""

from __future__ import annotations

import asyncio


class QueueSignals:
    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def notify(self, queue: str) -> None:
        waiters = self._waiters.pop(queue, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait(self, queue: str, timeout: float | None) -> bool:
        """Wait until a message may have arrived on ``queue``; False on time-out."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(queue, []).append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiters.get(queue)
            if waiters and fut in waiters:
                waiters.remove(fut)
