"""This mount's own writes, told apart from changes made elsewhere without asking the store.

Every write commits with a change event (store.provenance; a side file's on its user's channel,
sql/032), and the events of this mount's own writes come back through the change feed like anyone
else's. The kernel already holds what such a write committed (the pages the writer wrote, the
name the rename gave), so dropping it would make the next read or save ask the store again for
nothing. Two facts tell them apart:

- a file's event carries its change id (file_changes.id), and this process hears the ids of its
  own writes in the writing thread as each commits (store.events.publish_local, ``committed``),
  before the write returns to the event loop;
- PostgreSQL delivers notifications in commit order, so an event that comes before one of our
  write's own committed before that write (the kernel holds the newer bytes: nothing to drop),
  and one that comes after it committed after it.

So, per path:

- while one of our writes to a path is running, its events are noted in the order they come,
  and placed when it ends (its own ids are known by then): one that came after the write's own
  event is a change made after it, and the path is dropped (after the rename or commit, so the
  kernel forgets the new bytes too); one that came before is older and drops nothing. What cannot
  be placed drops the path: an event without an id (a side file's), an event while a write runs
  that has no event of its own on the path to place it against (the count below decides that
  write's debt), and any event while a write runs that left the kernel not holding its bytes
  (refused, or written beside other open descriptions) or ran beside another of ours to the
  same path (whose id is whose cannot be told);
- a write that ended before its own event came, the kernel holding exactly what it committed
  (``kept``), owes that event: it is paid by its own id, and events committed before it (any
  other id, while it is owed) drop nothing. A write whose own id is not known on the path owes
  one event by count instead, paid by whichever event for the path comes next (ours, or one that
  committed before it: either way the kernel holds the newer bytes);
- any other event is a change from elsewhere: dropped, and every debt of the path is forgiven
  (after a drop the kernel reads the store afresh, so a late event of ours only drops once more).

Debts expire after ``seconds`` (an event lost with a broken connection is then not waited for:
after a reconnect, ``clear`` forgets every debt anyway). Dropping is always safe, never wrong;
only taking a stranger's later event for an older one would leave old bytes, and the order above
rules it out. Used from the event loop, except ``committed`` (any thread; it takes the lock).
"""
from __future__ import annotations

import threading
import time

from store.paths import nfc

# A Flight's note of an event that turned out to be its write's own.
OURS = "ours"
# Own ids whose events never came (a lost connection) are forgotten past this many.
_MAX_PUBLISHED = 4096


class Flight:
    """One write of ours to a path, while it runs: the events for the path that came meanwhile,
    in order (each its change id, OURS once known to be ours, or None for an event without one),
    and (set by the writer once it committed) whether the kernel holds exactly what it wrote."""

    __slots__ = ("events", "kept", "since", "alone")

    def __init__(self, since: int = 0, alone: bool = True) -> None:
        self.events: list[int | str | None] = []
        self.kept = False
        self.since = since   # our ids heard after this one are this write's (OwnWrites.committed)
        self.alone = alone   # no other write of ours to the path ran beside it


class _Path:
    __slots__ = ("flights", "owed", "owed_ids", "until")

    def __init__(self) -> None:
        self.flights: list[Flight] = []
        self.owed = 0                     # events owed by count (no id known for them)
        self.owed_ids: set[int] = set()   # our own events still to come, by change id
        self.until = 0.0

    def owes(self) -> bool:
        return bool(self.owed or self.owed_ids)


class OwnWrites:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._paths: dict[str, _Path] = {}
        self._lock = threading.Lock()
        # (change id, path) -> when heard (a count), for this process's committed writes whose
        # events have not come back.
        self._published: dict[tuple[int, str], int] = {}
        self._heard = 0

    def committed(self, path: str, change_id: int) -> None:
        """A write of this process committed change ``change_id`` at ``path`` (called in the
        writing thread, before the write returns)."""
        with self._lock:
            self._heard += 1
            self._published[(change_id, nfc(path))] = self._heard
            while len(self._published) > _MAX_PUBLISHED:
                del self._published[next(iter(self._published))]

    def _mine(self, change_id: int | None, key: str) -> bool:
        """Whether ``change_id`` at ``key`` is one of our writes' (forgotten once asked: each
        event comes once)."""
        if change_id is None:
            return False
        with self._lock:
            if (change_id, key) not in self._published:
                return False
            del self._published[(change_id, key)]
            return True

    def _coming(self, key: str, flight: Flight) -> set[int]:
        """The change ids at ``key`` of the write ``flight`` whose events have not come yet."""
        with self._lock:
            return {change_id for (change_id, path), heard in self._published.items()
                    if path == key and heard > flight.since}

    def begin(self, path: str) -> Flight:
        """A write of ours to ``path`` is about to run (before its transaction can commit)."""
        with self._lock:
            heard = self._heard
        entry = self._paths.setdefault(nfc(path), _Path())
        for other in entry.flights:   # (two at once: whose id is whose cannot be told)
            other.alone = False
        flight = Flight(heard, alone=not entry.flights)
        entry.flights.append(flight)
        return flight

    def end(self, path: str, flight: Flight) -> bool:
        """The write ``flight`` ended. True when ``path`` must be dropped now: an event came
        while it ran that committed after it, or that cannot be placed."""
        key = nfc(path)
        entry = self._paths.get(key)
        if entry is None or flight not in entry.flights:
            return bool(flight.events)
        entry.flights.remove(flight)
        # Events that came while it ran, before it returned: those now known to be ours. (A write
        # that ran beside another of ours is not alone: any event drops it, whoever's it was.)
        events = [OURS if isinstance(e, int) and self._mine(e, key) else e for e in flight.events]
        coming = self._coming(key, flight) if flight.kept and flight.alone else set()
        last_own = max((n for n, e in enumerate(events) if e == OURS), default=-1)
        if events and not self._older(events, last_own, flight.kept and flight.alone, bool(coming)):
            entry.owed = 0
            entry.owed_ids.clear()
            self._forget_if_idle(key, entry)
            return True
        if flight.kept:
            now = time.monotonic()
            if entry.until <= now:
                entry.owed, entry.owed_ids = 0, set()
            if coming:
                entry.owed_ids |= coming
            elif last_own < 0:
                entry.owed += 1
            entry.until = now + self.seconds
        self._forget_if_idle(key, entry)
        return False

    @staticmethod
    def _older(events: list[int | str | None], last_own: int, kept: bool, coming: bool) -> bool:
        """Whether the events that came while a write ran all committed before it or were its
        own, so that the kernel, holding what it wrote (``kept``: and no other write of ours to
        the path ran beside it), holds the newest bytes."""
        if not kept or None in events:
            return False
        if last_own >= 0:
            return all(e == OURS for e in events[last_own + 1:])
        return coming   # its own event is still to come: whatever came first is older

    def event(self, path: str, change_id: int | None = None) -> bool:
        """An event for ``path`` came (``change_id``: its id, when it has one): True when it is
        accounted for (a write of ours is running, which places it when it ends; or it is ours,
        or older than ours, while one is owed), False when it is a change from elsewhere and the
        path must be dropped."""
        key = nfc(path)
        mine = self._mine(change_id, key)
        entry = self._paths.get(key)
        if entry is None:
            return False
        paid = mine and change_id in entry.owed_ids
        if mine:
            entry.owed_ids.discard(change_id)   # type: ignore[arg-type]
        if entry.flights:
            for flight in entry.flights:
                flight.events.append(OURS if mine else change_id)
            return True
        if paid:
            self._forget_if_idle(key, entry)
            return True
        if entry.owes() and entry.until > time.monotonic():
            if entry.owed_ids and change_id is not None and not mine:
                return True   # committed before our write, whose own event is still to come
            if entry.owed:
                entry.owed -= 1
                self._forget_if_idle(key, entry)
                return True
        del self._paths[key]
        return False

    def clear(self) -> None:
        """Events may have been missed: no event can be taken for ours any more. Writes still
        running will see their paths dropped when they end."""
        with self._lock:
            self._published.clear()
        for entry in self._paths.values():
            entry.owed = 0
            entry.owed_ids.clear()
            for flight in entry.flights:
                flight.events.append(None)
        self._paths = {k: e for k, e in self._paths.items() if e.flights}

    def _forget_if_idle(self, key: str, entry: _Path) -> None:
        if not entry.flights and (not entry.owes() or entry.until <= time.monotonic()):
            self._paths.pop(key, None)
        if len(self._paths) > 4096:  # debts whose events never came (a lost connection) age out
            now = time.monotonic()
            self._paths = {k: e for k, e in self._paths.items() if e.flights or e.until > now}


class Written:
    """path -> (node, bytes or None): what this mount's last write there gave, until anything
    else changes the path (the operations layer forgets a path on every change it makes or hears
    of). After a save the kernel asks for the file's attributes again, and reads its pages again
    when it did not keep the ones the writer wrote, while the save's own event has just emptied
    the content cache: this answers both without a query. Bounded in entries and in bytes (the
    oldest go first); bytes are kept only when the write's body is known exactly."""

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 16 << 20) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: dict[str, tuple[object, bytes | None]] = {}
        self._bytes = 0

    def put(self, path: str, node: object, data: bytes | None) -> None:
        self.pop(path)
        if data is not None and len(data) > self.max_bytes // 16:
            data = None  # a large body is not worth the room: the node alone still answers stat
        self._entries[nfc(path)] = (node, data)
        self._bytes += len(data) if data is not None else 0
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self.pop(next(iter(self._entries)))

    def node(self, path: str) -> object | None:
        entry = self._entries.get(nfc(path))
        return entry[0] if entry is not None else None

    def get(self, path: str) -> tuple[object, bytes] | None:
        """(node, bytes) when both are kept, as the content cache's peek answers."""
        entry = self._entries.get(nfc(path))
        return entry if entry is not None and entry[1] is not None else None  # type: ignore[return-value]

    def pop(self, path: str) -> None:
        entry = self._entries.pop(nfc(path), None)
        if entry is not None and entry[1] is not None:
            self._bytes -= len(entry[1])

    def pop_below(self, folder: str) -> None:
        """``folder`` changed as a whole (a collection, a folder that went): what was kept below
        it is unsure too."""
        prefix = nfc(folder) + "/"
        for key in [k for k in self._entries if k.startswith(prefix)]:
            self.pop(key)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
