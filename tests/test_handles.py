"""store.handles: a file written in pieces through a handle is one version when committed."""
from __future__ import annotations

from typing import Any

import pytest

from store import errors
from store.access import Door
from store.db import Database
from store.handles import WriteHandle
from store.host import HostTree
from store.storage import MAX_CONTENT_BYTES


@pytest.fixture
def tree(db: Database, boot: dict[str, Any]) -> HostTree:
    return HostTree(db, Door(db).basic(boot["email"], boot["password"]))


@pytest.fixture
def folder(boot: dict[str, Any]) -> str:
    return f"org/{boot['org_id']}/guilds/{boot['guild_id']}"


def _changes(db: Database, path: str) -> list[tuple[str, int]]:
    with db.connection() as conn:
        rows = conn.execute("SELECT operation, version FROM file_changes WHERE display_path = %s ORDER BY id",
                            (path,)).fetchall()
    return [(r["operation"], r["version"]) for r in rows]


def test_a_file_written_in_chunks_is_one_version(tree: HostTree, folder: str, db: Database) -> None:
    h = WriteHandle(tree, f"{folder}/cp.md", new=True)
    assert h.flush() is None and _changes(db, f"{folder}/cp.md") == []  # created, nothing written yet
    for chunk in (b"# One\n", b"two\n", b"three\n"):
        h.append(chunk)
    assert tree.stat(folder) and _changes(db, f"{folder}/cp.md") == []  # the store has not seen it
    node = h.flush()
    assert node.version == 1 and tree.read(f"{folder}/cp.md") == b"# One\ntwo\nthree\n"
    assert h.commit() is None and h.flush() is None  # nothing new: no second version
    assert _changes(db, f"{folder}/cp.md") == [("create", 1)]


def test_a_created_file_left_empty_is_created_at_release(tree: HostTree, folder: str) -> None:
    h = WriteHandle(tree, f"{folder}/empty.md", new=True)
    assert h.flush() is None
    assert h.commit().version == 1 and tree.read(f"{folder}/empty.md") == b""


def test_writing_into_an_existing_file_reads_its_body_first(tree: HostTree, folder: str) -> None:
    tree.write(f"{folder}/n.md", b"hello world")
    h = WriteHandle(tree, f"{folder}/n.md")
    h.write(6, b"there")
    h.write(11, b"!")  # at the end: the body grows
    assert h.read(0, 5) == b"hello" and h.size == 12
    assert h.commit().version == 2 and tree.read(f"{folder}/n.md") == b"hello there!"
    h.truncate(5)
    assert h.commit().version == 3 and tree.read(f"{folder}/n.md") == b"hello"


def test_a_body_never_grows_past_the_cap_and_a_refused_body_is_never_saved(tree: HostTree, folder: str) -> None:
    """A save whose bytes pass the cap is refused as they come, and what arrived before is not
    saved either: half a file is not the file its writer meant (the note keeps its version)."""
    tree.write(f"{folder}/big.md", b"the note as it was")
    h = WriteHandle(tree, f"{folder}/big.md", data=b"")
    h.truncate(0)
    h.append(b"x" * MAX_CONTENT_BYTES)
    with pytest.raises(errors.TooLarge, match="at most 262,144 bytes"):
        h.append(b"y")
    with pytest.raises(errors.TooLarge):
        h.append(b"z")  # the writer carries on: still refused
    with pytest.raises(errors.TooLarge):
        h.commit()      # close reports it, once, and writes nothing
    assert h.commit() is None
    assert tree.read(f"{folder}/big.md") == b"the note as it was"
    h = WriteHandle(tree, f"{folder}/new.md", new=True)
    with pytest.raises(errors.TooLarge):
        h.truncate(MAX_CONTENT_BYTES + 1)
    with pytest.raises(errors.TooLarge):
        h.commit()
    assert [n.name for n in tree.list(folder)] == ["big.md"]
    h = WriteHandle(tree, f"{folder}/exact.md", new=True)
    h.append(b"x" * MAX_CONTENT_BYTES)
    assert h.commit().size == MAX_CONTENT_BYTES


def test_a_refused_commit_is_reported_once(tree: HostTree, folder: str) -> None:
    first = tree.write(f"{folder}/race.md", b"one")
    tree.write(f"{folder}/race.md", b"someone else")
    h = WriteHandle(tree, f"{folder}/race.md", data=b"one")
    h.append(b" and mine")
    with pytest.raises(errors.PreconditionFailed):
        h.commit(if_match=first.etag)
    assert not h.needs_commit and h.commit() is None  # release does not write it after all
    assert tree.read(f"{folder}/race.md") == b"someone else"


def test_an_orphaned_handle_writes_nowhere(tree: HostTree, folder: str) -> None:
    tree.write(f"{folder}/gone.md", b"x")
    h = WriteHandle(tree, f"{folder}/gone.md")
    h.append(b"y")
    tree.delete(f"{folder}/gone.md")
    h.orphan()
    assert h.commit() is None
    with pytest.raises(errors.NotFound):
        tree.stat(f"{folder}/gone.md")


class _WriteDuringCommit:
    """The Host tree, with one more write on the same descriptor landing while a commit is in
    the store (the FUSE mount commits in a worker thread while its event loop takes the next
    WRITE of a multi-threaded writer)."""

    def __init__(self, tree: HostTree) -> None:
        self.tree, self.handle, self.late = tree, None, None

    def read(self, path: str) -> bytes:
        return self.tree.read(path)

    def write(self, path: str, data: bytes, **conditions: Any) -> object:
        node = self.tree.write(path, data, **conditions)
        if self.late is not None:
            late, self.late = self.late, None
            self.handle.append(late)  # type: ignore[union-attr]
        return node


def test_a_write_landing_during_a_commit_is_committed_later_not_lost(tree: HostTree, folder: str) -> None:
    racing = _WriteDuringCommit(tree)
    h = WriteHandle(racing, f"{folder}/racing.md", new=True)  # type: ignore[arg-type]
    racing.handle = h
    h.append(b"first part\n")
    racing.late = b"second part\n"
    first = h.commit()
    assert tree.read(f"{folder}/racing.md") == b"first part\n"
    assert h.needs_commit, "the bytes written during the commit are still to be saved"
    second = h.commit()   # (the next flush or the release)
    assert tree.read(f"{folder}/racing.md") == b"first part\nsecond part\n"
    assert (first.version, second.version) == (1, 2) and not h.needs_commit  # type: ignore[attr-defined]
