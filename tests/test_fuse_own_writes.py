"""The mount's own change events told apart from changes made elsewhere (fuse_mount/own_writes.py),
order by order: taking a stranger's event for ours would leave old bytes in the kernel, so every
order in which the two can arrive is played here. (test_fuse.py plays the same through a mount.)
True from ``event`` means nothing is dropped; True from ``end`` means the path is dropped. The first
tests play events without change ids (a side file's), placed by count."""
from __future__ import annotations

import time

from fuse_mount.own_writes import OwnWrites, Written

NOTE = "org/1/plan.md"


def saved(own: OwnWrites, path: str = NOTE) -> None:
    flight = own.begin(path)
    flight.kept = True
    assert own.end(path, flight) is False


def test_a_saves_own_event_drops_nothing_and_the_next_event_is_a_change() -> None:
    own = OwnWrites(5.0)
    saved(own)
    assert own.event(NOTE) is True        # ours (or one committed before it: ours is newer)
    assert own.event(NOTE) is False       # a write from elsewhere after it: dropped
    assert own.event(NOTE) is False


def test_each_save_pays_for_one_event_only() -> None:
    own = OwnWrites(5.0)
    saved(own)
    saved(own)
    assert [own.event(NOTE) for _ in range(3)] == [True, True, False]


def test_an_event_while_a_save_runs_drops_the_path_when_it_ends() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    assert own.event(NOTE) is True        # whose? decided when the save ends
    flight.kept = True
    assert own.end(NOTE, flight) is True  # could have been elsewhere's, after ours: dropped
    assert own.event(NOTE) is False       # and nothing is owed: our late event drops again


def test_a_refused_save_owes_nothing_and_drops_what_came_meanwhile() -> None:
    own = OwnWrites(5.0)
    quiet = own.begin(NOTE)
    assert own.end(NOTE, quiet) is False  # refused (kept not set), nothing came
    assert own.event(NOTE) is False
    flight = own.begin(NOTE)
    assert own.event(NOTE) is True
    assert own.end(NOTE, flight) is True


def test_two_saves_at_once_both_drop_after_an_event_that_came_while_they_ran() -> None:
    own = OwnWrites(5.0)
    first, second = own.begin(NOTE), own.begin(NOTE)
    first.kept = second.kept = True
    assert own.end(NOTE, first) is False
    assert own.event(NOTE) is True        # second still running
    assert own.end(NOTE, second) is True
    # The first save's debt is forgiven with the drop: a later change is never taken for it.
    assert own.event(NOTE) is False


def test_other_paths_and_lost_events() -> None:
    own = OwnWrites(0.05)
    saved(own)
    assert own.event("org/1/other.md") is False
    time.sleep(0.1)                       # our event never came (a lost connection): not waited for
    assert own.event(NOTE) is False
    saved(own)
    own.clear()                           # the feed reconnected: every debt is forgotten
    assert own.event(NOTE) is False
    flight = own.begin(NOTE)
    own.clear()
    flight.kept = True
    assert own.end(NOTE, flight) is True  # a save running across a reconnect is dropped


# With change ids: the mount hears each of its writes' ids as the write commits (``committed``,
# in the writing thread), so an event is placed against the write's own.

def saved_as(own: OwnWrites, change_id: int, path: str = NOTE) -> None:
    """A save whose own event (``change_id``) has not come back when the save returns."""
    flight = own.begin(path)
    own.committed(path, change_id)
    flight.kept = True
    assert own.end(path, flight) is False


def test_a_saves_own_event_while_it_runs_drops_nothing_and_owes_nothing() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    own.committed(NOTE, 41)               # the write committed; it has not returned yet
    assert own.event(NOTE, 41) is True    # its own event, back before the write returned
    flight.kept = True
    assert own.end(NOTE, flight) is False
    assert own.event(NOTE, 42) is False   # the next change is from elsewhere: dropped


def test_an_own_event_that_came_before_its_id_was_heard_is_placed_when_the_write_ends() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    assert own.event(NOTE, 41) is True    # whose? not known yet
    own.committed(NOTE, 41)
    flight.kept = True
    assert own.end(NOTE, flight) is False  # ours: the kernel holds it
    assert own.event(NOTE, 42) is False


def test_a_change_after_the_saves_own_event_drops_the_path() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    own.committed(NOTE, 41)
    assert own.event(NOTE, 41) is True
    assert own.event(NOTE, 43) is True    # committed after ours: the kernel's bytes are older
    flight.kept = True
    assert own.end(NOTE, flight) is True


def test_changes_committed_before_the_save_drop_nothing_before_or_after_it_ends() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    assert own.event(NOTE, 39) is True    # from elsewhere, committed before our write
    own.committed(NOTE, 41)
    flight.kept = True
    assert own.end(NOTE, flight) is False  # our event is still to come: 39 came before it
    assert own.event(NOTE, 40) is True    # also before ours (events come in commit order)
    assert own.event(NOTE, 41) is True    # ours: paid
    assert own.event(NOTE, 44) is False   # after ours: dropped


def test_an_event_that_cannot_be_placed_drops_the_path() -> None:
    own = OwnWrites(5.0)
    flight = own.begin(NOTE)
    assert own.event(NOTE, 39) is True
    flight.kept = True                    # but no id of ours at this path: nothing to place 39 against
    assert own.end(NOTE, flight) is True
    refused = own.begin(NOTE)
    own.committed(NOTE, 45)               # (committed, yet the kernel does not hold what it wrote)
    assert own.event(NOTE, 45) is True
    assert own.end(NOTE, refused) is True


def test_an_earlier_saves_event_during_a_later_save_is_not_a_debt_left_open() -> None:
    own = OwnWrites(5.0)
    saved_as(own, 41)                     # owes 41
    second = own.begin(NOTE)
    assert own.event(NOTE, 41) is True    # the first save's event, during the second
    own.committed(NOTE, 46)
    second.kept = True
    assert own.end(NOTE, second) is False
    assert own.event(NOTE, 46) is True
    assert own.event(NOTE, 47) is False   # nothing is owed any more: a change is dropped


def test_two_saves_at_once_place_nothing_by_id() -> None:
    own = OwnWrites(5.0)
    first, second = own.begin(NOTE), own.begin(NOTE)
    own.committed(NOTE, 41)
    own.committed(NOTE, 42)
    assert own.event(NOTE, 41) is True
    first.kept = second.kept = True
    assert own.end(NOTE, first) is True   # whose bytes the kernel holds cannot be told: dropped
    assert own.end(NOTE, second) is True


def test_a_reconnect_forgets_the_ids_heard() -> None:
    own = OwnWrites(5.0)
    saved_as(own, 41)
    own.clear()
    assert own.event(NOTE, 41) is False   # after missed events nothing is taken for ours


def test_written_keeps_bounded_bytes() -> None:
    written = Written(max_entries=2, max_bytes=64)
    written.put("a.md", "node a", b"x" * 3)
    written.put("b.md", "node b", None)
    assert written.get("a.md") == ("node a", b"xxx") and written.get("b.md") is None
    assert written.node("b.md") == "node b"
    written.put("c.md", "node c", b"y" * 5)
    assert written.node("a.md") is None   # the oldest went first
    written.put("d.md", "node d", b"z" * 40)  # larger than a sixteenth of the room: node only
    assert written.get("d.md") is None and written.node("d.md") == "node d"
    written.pop("d.md")
    assert written.node("d.md") is None
    written.put("org/1/guilds/2/x.md", "node x", b"x")
    written.pop_below("org/1/guilds/2")
    assert written.node("org/1/guilds/2/x.md") is None and written.node("c.md") == "node c"
