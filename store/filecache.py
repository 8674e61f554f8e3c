"""A process-wide cache of file contents for the Host tree, kept exact by change events.

A WebDAV GET or a FUSE read of a note is one query; this cache makes a repeated read none, which
is what lets a database-backed tree answer reads as fast as plain files. It is correct, not merely
fresh-ish, because of two rules:

- Every write in this process empties the entries it touched right after its commit
  (store.events.publish_local via store.db.after_commit), and writes in other processes reach us
  through LISTEN guild.files.changed, normally within a millisecond of their commit.
- A read that raced with any invalidation does not store its result: ``generation`` is taken
  before the query and ``put`` drops the entry if an invalidation happened meanwhile.

A write made in this process arrives twice: first in-process, then as its NOTIFY copy. The copy
carries nothing new (every read that started after the first one saw the commit), so it is
skipped by its change id; otherwise it would evict what a listing fetched in between and turn the
next read into a query for no reason.

While the LISTEN connection is down (its own, or the FUSE mount's change feed, which hands the
cache its events: ``start(listen=False)``) the cache is off (every read goes to the database), and
it starts empty again when the connection comes back, so missed events cannot leave stale entries.
Entries also expire after ``max_age`` seconds as a backstop for changes that publish no event
(an organisation deleted by hand in SQL). Only families whose every change publishes an event on
the file's own path are cached: those that say so (``Family.cacheable`` in store.families)."""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

import psycopg

from store.events import ChangeListener, Event, subscribe_local, tree_paths
from store.layout import folder_of, split

log = logging.getLogger(__name__)

class FileCache:
    def __init__(self, conninfo: str, *, max_entries: int = 20_000, max_bytes: int = 64 << 20,
                 max_age: float = 60.0) -> None:
        self.conninfo = conninfo
        self.max_entries, self.max_bytes, self.max_age = max_entries, max_bytes, max_age
        self._entries: OrderedDict[str, tuple[float, Any, bytes]] = OrderedDict()
        self._bytes = 0
        self._generation = 0
        self._live = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe = None
        # Change ids of this process's own writes, already applied, whose NOTIFY copy is still to
        # come. Bounded: a copy that never comes (the LISTEN connection was down) ages out.
        self._applied_here: OrderedDict[int, None] = OrderedDict()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, *, listen: bool = True) -> FileCache:
        """Follow change events: in a daemon thread on a LISTEN connection of its own, the cache
        turning on once LISTEN is in place; or, ``listen=False``, from a caller that follows them
        already (the FUSE mount's change feed), which hands over each event (``apply``) and says
        when its feed is up or lost (``following``). One LISTEN connection instead of two spares
        the mount a second thread waking for every change, its own saves' included (about 10 % of
        a save's time on 2 cores)."""
        self._unsubscribe = subscribe_local(self._on_local_event)
        if listen:
            self._thread = threading.Thread(target=self._follow, name="hostfinder-filecache", daemon=True)
            self._thread.start()
        return self

    def following(self, up: bool) -> None:
        """For a cache started with ``listen=False``: the caller's feed is in place (the cache
        turns on, empty) or lost (it turns off: events may be missed until the feed is back)."""
        self._set_live(up)


    def wait_live(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self._live and time.monotonic() < deadline:
            time.sleep(0.01)
        return self._live

    def stop(self) -> None:
        """Turn the cache off now; the follower thread closes its connection within half a
        second (not joined: shutting down should not wait for its LISTEN timeout)."""
        self._stop.set()
        if self._unsubscribe:
            self._unsubscribe()
        self._set_live(False)

    def _follow(self) -> None:
        listener = ChangeListener(self.conninfo)
        while not self._stop.is_set():
            try:
                listener.connect()
                if self._stop.is_set():
                    break
                self._set_live(True)
                while not self._stop.is_set():
                    for event in listener.wait(0.5):
                        self.apply(event)
            except psycopg.Error as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                if self._live:
                    log.warning("file cache off: change events lost (%s); retrying", first)
                self._set_live(False)
                self._stop.wait(2.0)
        listener.close()

    def _set_live(self, live: bool) -> None:
        with self._lock:
            self._live = live
            self._generation += 1
            self._entries.clear()
            self._bytes = 0

    # -- the cache ---------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Take this before reading from the database; hand it to ``put``."""
        return self._generation

    def get(self, path: str) -> tuple[Any, bytes] | None:
        with self._lock:
            hit = self._entries.get(path)
            if hit is None or not self._live:
                return None
            if time.monotonic() - hit[0] > self.max_age:
                self._drop(path)
                return None
            self._entries.move_to_end(path)
            return hit[1], hit[2]

    def put(self, path: str, node: Any, content: bytes, generation: int) -> None:
        if len(content) > self.max_bytes // 16:
            return
        with self._lock:
            if not self._live or generation != self._generation:
                return  # an invalidation happened while this was read: it may be stale
            self._drop(path)
            self._entries[path] = (time.monotonic(), node, content)
            self._bytes += len(content)
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                oldest = next(iter(self._entries))
                self._drop(oldest)

    def invalidate(self, path: str) -> None:
        with self._lock:
            self._generation += 1
            self._drop(path)

    def invalidate_below(self, folder: str) -> None:
        """Forget ``folder`` and everything kept under it."""
        prefix = folder.rstrip("/") + "/"
        with self._lock:
            self._generation += 1
            for path in [p for p in self._entries if p.startswith(prefix) or p == folder]:
                self._drop(path)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()
            self._bytes = 0

    def _drop(self, path: str) -> None:
        old = self._entries.pop(path, None)
        if old is not None:
            self._bytes -= len(old[2])

    _APPLIED_MAX = 4096

    def _on_local_event(self, event: Event) -> None:
        change_id = event.get("change_id")
        if isinstance(change_id, int):
            with self._lock:
                self._applied_here[change_id] = None
                while len(self._applied_here) > self._APPLIED_MAX:
                    self._applied_here.popitem(last=False)
        self._invalidate_event(event)

    def apply(self, event: Event) -> None:
        """A change event as NOTIFY delivered it: from this cache's own LISTEN connection, or from
        the caller's feed when it was started with ``listen=False``."""
        change_id = event.get("change_id")
        if isinstance(change_id, int):
            with self._lock:
                if change_id in self._applied_here:
                    del self._applied_here[change_id]
                    return  # the NOTIFY copy of a write this process already applied
        self._invalidate_event(event)

    def _invalidate_event(self, event: Event) -> None:
        for path in tree_paths(event):
            if event.get("operation") == "delete" and folder_of(split(path)) is not None:
                self.invalidate_below(path)  # a deleted guild or agent (sql/070): its files went with it
            else:
                self.invalidate(path)
