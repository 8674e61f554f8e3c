"""This mount's own writes, told apart from changes made elsewhere without asking the store.

Every write commits with a change event (store.provenance; a side file's on its user's channel,
sql/032), and the events of this mount's own writes come back through the change feed like anyone
else's. The kernel already holds what such a write committed (the pages the writer wrote, the
name the rename gave), so dropping it would make the next read or save ask the store again for
nothing. The feed names a path, not a version, so an event cannot say whose it is; what tells
them apart is the order: PostgreSQL delivers notifications in commit order, so for each of our
writes whose event has not come yet, the next event for its path is either that write's own or
one that committed before it, and either way the kernel holds the newer bytes. The count is kept
per path:

- while one of our writes to a path is running, an event for that path may be its own (committed,
  not returned yet) or one from elsewhere committed just after: it cannot be told, so the write,
  when it ends, has the path dropped (after its rename or commit, so the kernel forgets the new
  bytes too) and counts nothing;
- a write that ended with no event in the meantime, the kernel holding exactly what it committed
  (``kept``), owes one event: the next event for the path is taken as paid by it;
- any other event is a change from elsewhere: dropped, and every debt of the path is forgiven
  (after a drop the kernel reads the store afresh, so a late event of ours only drops once more).

Debts expire after ``seconds`` (an event lost with a broken connection is then not waited for:
after a reconnect, ``clear`` forgets every debt anyway). Dropping is always safe, never wrong;
only taking a stranger's event for ours would leave old bytes, and the order above rules it out.
Used from the event loop only, so it takes no lock.
"""
from __future__ import annotations

import time

from store.paths import nfc


class Flight:
    """One write of ours to a path, while it runs: how many events for the path came meanwhile,
    and (set by the writer once it committed) whether the kernel holds exactly what it wrote."""

    __slots__ = ("events", "kept")

    def __init__(self) -> None:
        self.events = 0
        self.kept = False


class _Path:
    __slots__ = ("flights", "owed", "until")

    def __init__(self) -> None:
        self.flights: list[Flight] = []
        self.owed = 0
        self.until = 0.0


class OwnWrites:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._paths: dict[str, _Path] = {}

    def begin(self, path: str) -> Flight:
        """A write of ours to ``path`` is about to run (before its transaction can commit)."""
        flight = Flight()
        self._paths.setdefault(nfc(path), _Path()).flights.append(flight)
        return flight

    def end(self, path: str, flight: Flight) -> bool:
        """The write ``flight`` ended. True when ``path`` must be dropped now: an event came
        while it ran."""
        key = nfc(path)
        entry = self._paths.get(key)
        if entry is None or flight not in entry.flights:
            return flight.events > 0
        entry.flights.remove(flight)
        if flight.events:
            entry.owed = 0
            self._forget_if_idle(key, entry)
            return True
        if flight.kept:
            now = time.monotonic()
            entry.owed = entry.owed + 1 if entry.until > now else 1
            entry.until = now + self.seconds
        self._forget_if_idle(key, entry)
        return False

    def event(self, path: str) -> bool:
        """An event for ``path`` came: True when it is accounted for (a write of ours is running,
        which will decide when it ends, or the event pays one of our debts), False when it is a
        change from elsewhere and the path must be dropped."""
        key = nfc(path)
        entry = self._paths.get(key)
        if entry is None:
            return False
        if entry.flights:
            for flight in entry.flights:
                flight.events += 1
            return True
        if entry.owed and entry.until > time.monotonic():
            entry.owed -= 1
            self._forget_if_idle(key, entry)
            return True
        del self._paths[key]
        return False

    def clear(self) -> None:
        """Events may have been missed: no event can be taken for ours any more. Writes still
        running will see their paths dropped when they end."""
        for entry in self._paths.values():
            entry.owed = 0
            for flight in entry.flights:
                flight.events += 1
        self._paths = {k: e for k, e in self._paths.items() if e.flights}

    def _forget_if_idle(self, key: str, entry: _Path) -> None:
        if not entry.flights and (not entry.owed or entry.until <= time.monotonic()):
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
