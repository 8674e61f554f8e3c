"""The Host tree under concurrent writers: what one client was told was saved stays saved, and
two requests that each need the other's rows queue rather than deadlock (a 500 for one of them)."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from store import embeds, notes
from store.access import SYSTEM, Door
from store.db import Database
from store.host import HostTree
from tests.conftest import wait_for_lock_waiters


@pytest.fixture
def tree(db: Database, boot: dict[str, Any]) -> HostTree:
    return HostTree(db, Door(db).basic(boot["email"], boot["password"]))


def live(db: Database, path: str) -> str | None:
    with db.connection() as conn:
        row = conn.execute("SELECT content FROM artifacts WHERE display_path = %s AND deleted_at IS NULL",
                           (path,)).fetchone()
    return row["content"] if row else None


def test_a_move_over_a_note_carries_the_save_it_waited_for(tree: HostTree, db: Database, db_url: str,
                                                           boot: dict[str, Any]) -> None:
    """A PUT of the source is being committed while a MOVE of it over another note arrives: the
    move waits for it and carries its text. It read the source before waiting, and moved the old
    text, so the PUT, already answered 204, was lost."""
    org, guild = boot["org_id"], boot["guild_id"]
    src, dst = f"org/{org}/guilds/{guild}/draft.md", f"org/{org}/guilds/{guild}/final.md"
    tree.write(src, b"OLD")
    tree.write(dst, b"the final text")
    failures: list[BaseException] = []

    def move() -> None:
        try:
            tree.move(src, dst)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    mover = threading.Thread(target=move)
    with db.transaction() as conn:  # the PUT, between its write and its commit
        notes.write_note(conn, org, "guild", guild, "draft.md", "NEW", SYSTEM)
        mover.start()
        wait_for_lock_waiters(db_url, 1)  # the move is now waiting for the source
    mover.join(timeout=30)
    assert not failures, failures
    assert live(db, dst) == "NEW" and live(db, src) is None


def test_a_move_waits_for_a_delete_of_its_note_instead_of_deadlocking(tree: HostTree, db: Database, db_url: str,
                                                                      boot: dict[str, Any]) -> None:
    """A delete (the API, an agent, the web app) takes the note's embed lock, then its row; a move
    that took the row first and then waited for the embed lock deadlocked with it."""
    org, guild = boot["org_id"], boot["guild_id"]
    src, dst = f"org/{org}/guilds/{guild}/x.md", f"org/{org}/guilds/{guild}/y.md"
    tree.write(src, b"X")
    outcome: list[object] = []

    def move() -> None:
        try:
            tree.move(src, dst)
            outcome.append("moved")
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome.append(exc)

    mover = threading.Thread(target=move)
    with db.transaction() as conn:  # notes.delete_note, as every front end runs it
        embeds.lock_for_removal(conn, [src])
        mover.start()
        wait_for_lock_waiters(db_url, 1)
        notes.delete_note(conn, org, "guild", guild, "x.md", SYSTEM)
    mover.join(timeout=30)
    assert [type(o).__name__ for o in outcome] == ["NotFound"], outcome  # the note was gone when it ran
    assert live(db, src) is None and live(db, dst) is None


def test_two_moves_in_opposite_directions_queue_instead_of_deadlocking(tree: HostTree, db: Database,
                                                                       boot: dict[str, Any]) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    other = HostTree(db, Door(db).basic(boot["email"], boot["password"]))
    for rnd in range(8):
        a, b = f"org/{org}/guilds/{guild}/swap{rnd}a.md", f"org/{org}/guilds/{guild}/swap{rnd}b.md"
        tree.write(a, b"A")
        tree.write(b, b"B")
        start, outcomes = threading.Barrier(2), []

        def move(t: HostTree, src: str, dst: str) -> None:
            start.wait()
            try:
                t.move(src, dst)
                outcomes.append("moved")
            except BaseException as exc:  # noqa: BLE001 - collected and checked below
                outcomes.append(exc)

        threads = [threading.Thread(target=move, args=(tree, a, b)), threading.Thread(target=move, args=(other, b, a))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        # One moved; the other found its source gone (NotFound), never a deadlock.
        assert sorted(map(str, outcomes)).count("moved") >= 1, outcomes
        assert all(o == "moved" or type(o).__name__ == "NotFound" for o in outcomes), outcomes
        assert [live(db, a), live(db, b)].count(None) == 1
