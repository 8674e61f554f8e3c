"""Spreading client connections evenly over the worker processes of `serve --workers N`.

A connection stays with the worker that accepted it for as long as the client keeps it open, and
a worker is one Python process: one core at most. With one SO_REUSEPORT socket per worker the
kernel chose the worker by a hash of the client's address, so 16 connections over 2 workers split
like coin tosses: 8/8 one time in five, 11/5 or worse one time in five (`ss` during a run showed
6/10, 8/8, 6/10, 12/4, 7/9, 9/7), and the clients of the fuller worker waited longest: 16 clients
each reading 375 notes ran at 1 835-2 468 GETs/s that way, 2 370-2 624 spread evenly (curl, two
workers, this 2-core machine). The workers now share one listening socket, and each knows how many
connections every worker holds (``Balance``, in memory shared across the fork): a worker holding
more than another leaves a newcomer ``YIELD_SECONDS`` for the emptier one to take, and takes it
itself only if it is still waiting then (the emptier one may be busy, stopping, or gone).

Nothing here is a rule about requests: it only decides which process accepts.
"""
from __future__ import annotations

import mmap
import threading

# How long a worker holding more connections than another leaves a newcomer to it: long enough
# for an idle front to wake and accept (well under a millisecond), short enough that a client
# whose connection no emptier worker takes barely notices.
YIELD_SECONDS = 0.005

# The count of a worker that accepts nothing (not started yet, stopping, or dead): no worker
# yields a newcomer to it.
_NOT_ACCEPTING = 2 ** 31 - 1


class Balance:
    """Every worker's number of open connections, in an anonymous shared mapping made by the
    supervisor before it forks, so every worker reads every other's count without a message.
    Each worker writes only its own slot (``serve_as``), under a lock of its own for its threads."""

    def __init__(self, workers: int) -> None:
        self._shared = mmap.mmap(-1, 4 * workers)   # MAP_SHARED | MAP_ANONYMOUS: survives fork()
        self._counts = memoryview(self._shared).cast("i")
        for number in range(workers):
            self._counts[number] = _NOT_ACCEPTING
        self._mine: int | None = None
        self._lock = threading.Lock()

    def serve_as(self, number: int) -> None:
        """In a worker (``number`` from 0), when it begins accepting: it holds no connection yet."""
        self._mine = number
        self._counts[number] = 0

    def stop_accepting(self, number: int | None = None) -> None:
        """A worker that stops, or (in the supervisor) one that died: no newcomer waits for it."""
        target = self._mine if number is None else number
        if target is not None:
            self._counts[target] = _NOT_ACCEPTING

    def opened(self) -> None:
        self._add(1)

    def closed(self) -> None:
        self._add(-1)

    def _add(self, delta: int) -> None:
        if self._mine is None:
            return
        with self._lock:
            if self._counts[self._mine] != _NOT_ACCEPTING:
                self._counts[self._mine] += delta

    def crowded(self) -> bool:
        """Whether another worker that accepts holds fewer connections than this one."""
        if self._mine is None:
            return False
        mine = self._counts[self._mine]
        return any(count < mine for number, count in enumerate(self._counts) if number != self._mine)
