"""SIGINT and SIGTERM ask a gateway process to stop: recorded in a way a signal cannot deadlock.

A Python signal handler runs in the main thread between two of its bytecodes, wherever that
thread happens to be. The serving loops wait with ``threading.Event.wait``, which holds the
event's internal lock for a moment each time round; a handler calling ``Event.set()`` at that
moment waits for the same lock for ever, and every further signal nests another waiting handler.
The supervisor of ``serve --workers`` was seen hung that way after a burst of SIGTERMs, its
workers gone and its port still bound, answering nobody. So the handler here only sets an
attribute (no lock), and the waiting side polls it.
"""
from __future__ import annotations

import signal
import time
from typing import Any

POLL_SECONDS = 0.05   # how soon a waiting loop notices a stop request


class StopSignal:
    """Installs itself as the SIGINT and SIGTERM handler of this process when made."""

    def __init__(self) -> None:
        self._requested = False
        signal.signal(signal.SIGINT, self._record)
        signal.signal(signal.SIGTERM, self._record)

    def _record(self, signum: int, frame: Any) -> None:
        self._requested = True

    def is_set(self) -> bool:
        return self._requested

    def wait(self, timeout: float) -> bool:
        """Whether a stop has been asked for, after waiting at most ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while not self._requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, POLL_SECONDS))
        return True
