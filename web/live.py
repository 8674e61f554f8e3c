"""Live refresh: change events (``guild.files.changed``) as Server-Sent Events for a table page.

One LISTEN connection per process (store.events.ChangeListener) feeds every open stream, so an
agent's record_add through any gateway reaches every browser watching that table. A stream lasts
STREAM_SECONDS and then ends with a ``retry`` hint: each stream holds one of the server's worker
threads, and EventSource reconnects by itself (the page reloads its rows on reconnect, so nothing
that happened in between is missed). A stopping gateway ends its streams first (``end_streams``):
otherwise each open tab would hold the server's stop until its worker's next heartbeat failed.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from store.db import lost_connection
from store.errors import Unavailable
from store.events import ChangeListener, Event

log = logging.getLogger(__name__)

STREAM_SECONDS = 55.0
# Each open stream holds one of the server's worker threads (16 by default). Past this many, a
# page is told to stop (204) and its script polls instead, so live pages never starve WebDAV or
# the API of threads.
MAX_STREAMS = 4
# A comment line this often keeps proxies from closing a quiet stream, and ends the stream of a
# closed page where the server cannot tell it closed (the door tells at once: client_gone).
HEARTBEAT_SECONDS = 3.0
# A page told to poll asks for a stream again this often: other pages may have closed theirs.
REASK_SECONDS = 60.0
RETRY_MS = 1500
# Put in a stream's queue by end_streams: the stream ends at once (its page reconnects later).
_END: Event = {"operation": "end of stream"}


class _Hub:
    """Per database: one LISTEN follower thread and the queues of its open streams. The follower
    ends when its last stream closes, so an idle gateway holds no extra connection."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, set[queue.SimpleQueue[Event]]] = {}
        self.streams = 0

    def reserve(self) -> bool:
        """Take a stream slot; False when MAX_STREAMS are open."""
        with self._lock:
            if self.streams >= MAX_STREAMS:
                return False
            self.streams += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.streams -= 1

    def subscribe(self, conninfo: str) -> queue.SimpleQueue[Event]:
        q: queue.SimpleQueue[Event] = queue.SimpleQueue()
        with self._lock:
            subscribers = self._queues.get(conninfo)
            start = subscribers is None
            if start:
                subscribers = self._queues[conninfo] = set()
            subscribers.add(q)
        if start:
            ready = threading.Event()
            threading.Thread(target=self._follow, args=(conninfo, subscribers, ready), daemon=True,
                             name="web-live-listen").start()
            ready.wait(5)  # LISTEN is in place before the page's first change can happen
        return q

    def end(self, conninfo: str) -> None:
        """End every open stream of this database now."""
        with self._lock:
            for q in self._queues.get(conninfo, ()):
                q.put(_END)

    def unsubscribe(self, conninfo: str, q: queue.SimpleQueue[Event]) -> None:
        with self._lock:
            self._queues.get(conninfo, set()).discard(q)

    def _follow(self, conninfo: str, subscribers: set[queue.SimpleQueue[Event]], ready: threading.Event) -> None:
        """Follow the change channel for this database's open streams, reconnecting once a second
        while it is down. An outage (PostgreSQL down or restarting) is logged once as it begins
        and once as it ends, in a line each; an unexpected error with its traceback, once per
        kind in a row (each was a traceback a second per process while a table page was open)."""
        listener = ChangeListener(conninfo)
        failing: str | None = None   # what the reconnections in a row have met: logged once
        try:
            while True:
                try:
                    listener.connect()
                    if failing is not None:
                        log.info("live refresh: following table changes again")
                        failing = None
                    ready.set()
                    while True:
                        events = listener.wait(1.0)
                        with self._lock:
                            if not subscribers:
                                # Under the lock: a new stream now starts a new follower.
                                del self._queues[conninfo]
                                return
                            targets = list(subscribers)
                        for event in events:
                            for q in targets:
                                q.put(event)
                except Exception as exc:  # the database restarted or the connection dropped: follow again
                    outage = isinstance(exc, Unavailable) or lost_connection(exc)
                    seen = "outage" if outage else f"{type(exc).__name__}: {exc}"
                    if seen != failing:
                        if outage:
                            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                            log.warning("live refresh: the database cannot be reached (%s); open table pages "
                                        "show changes again once it is back (retrying every second)", first)
                        else:
                            log.warning("live refresh: lost the LISTEN connection; reconnecting", exc_info=True)
                    failing = seen
                    ready.set()
                    with self._lock:
                        if not subscribers:
                            del self._queues[conninfo]
                            return
                    time.sleep(1.0)
        finally:
            listener.close()


_hub = _Hub()


def _concerns(event: Event, org_id: int, collection_path: str) -> bool:
    path = str(event.get("display_path") or "")
    return event.get("org_id") == org_id and (path == collection_path or path.startswith(collection_path + "/"))


def open_stream(conninfo: str, org_id: int, collection_path: str,
                client_gone: Callable[[], bool] | None = None) -> Iterable[str] | None:
    """The SSE body for one table, or None when MAX_STREAMS are already open (answer 204).
    ``client_gone`` (the door's, gateway/door.py CLIENT_GONE) ends the stream within a second of
    its page closing, so a person clicking through table pages does not use up the slots."""
    if not _hub.reserve():
        return None
    return _Stream(_stream(conninfo, org_id, collection_path, client_gone))


def end_streams(conninfo: str) -> None:
    """End the open streams of this database, as a gateway stops: each holds a worker thread that
    the server's stop would otherwise wait for (up to its shutdown timeout, five seconds)."""
    _hub.end(conninfo)


class _Stream:
    """The body with a ``close`` the WSGI server calls however the response ends, even if it never
    began (a generator's ``finally`` would not run then): the stream slot is given back once."""

    def __init__(self, events: Iterator[str]) -> None:
        self._events = events
        self._open = True

    def __iter__(self) -> Iterator[str]:
        return self._events

    def close(self) -> None:
        try:
            self._events.close()  # type: ignore[attr-defined]
        finally:
            if self._open:
                self._open = False
                _hub.release()


def _stream(conninfo: str, org_id: int, collection_path: str,
            client_gone: Callable[[], bool] | None) -> Iterator[str]:
    """A ``ready`` event, then a ``change`` event per change, for STREAM_SECONDS."""
    q = _hub.subscribe(conninfo)
    try:
        yield f"retry: {RETRY_MS}\nevent: ready\ndata: {{}}\n\n"
        now = time.monotonic()
        deadline, last_beat, next_look = now + STREAM_SECONDS, now, now + 1.0
        while now < deadline:
            try:
                event: Event | None = q.get(timeout=max(0.0, next_look - now))
            except queue.Empty:
                event = None
            if event is _END:
                return
            if event is not None and _concerns(event, org_id, collection_path):
                data = {k: event.get(k) for k in ("display_path", "operation", "version", "change_id")}
                yield f"id: {event.get('change_id', '')}\nevent: change\ndata: {json.dumps(data)}\n\n"
                last_beat = time.monotonic()
            now = time.monotonic()
            # Once a second by the clock, not only when the queue is quiet: every change of the
            # database reaches every stream, and on a busy store the queue is never quiet.
            if now >= next_look:
                next_look = now + 1.0
                if client_gone is not None and client_gone():
                    return
                if now - last_beat > HEARTBEAT_SECONDS:
                    last_beat = now
                    yield ": keep-alive\n\n"
    finally:
        _hub.unsubscribe(conninfo, q)
