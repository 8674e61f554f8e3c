"""The mount when the store stops answering, and when writers race: a save the store did not
answer is kept and saved once it answers again (never dropped, never mixed with the old text),
and two appenders opening a note at the same moment share its body. Real PostgreSQL (stopped and
started under the mount), real kernel mount."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store import admin
from store.db import Database
from test_fuse import Mount, eventually, mounted
from test_gateway_outage import private_pg  # noqa: F401 - a fixture, used by outage_mount


@pytest.fixture
def outage_mount(private_pg, tmp_path: Path) -> Iterator[tuple[Any, Mount]]:  # noqa: F811
    """A mount of a PostgreSQL of the test's own, which the test stops and starts."""
    pg, url = private_pg
    db = Database(url, min_size=1, max_size=4).open()
    try:
        boot = admin.bootstrap(db, email="ada@example.com", password="correct horse battery")
        with mounted(db, url, boot, tmp_path) as mount:
            yield pg, mount
    finally:
        db.close()


def close_during_an_outage(pg: Any, note: Path, before: bytes, text: bytes) -> None:
    """``note`` holds ``before``; a writer truncates it, writes ``text``, and closes it while the
    store is down: the close says EIO (the store is left down)."""
    note.write_bytes(before)
    fd = os.open(note, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, text)
    pg.stop()
    with pytest.raises(OSError) as exc:
        os.close(fd)
    assert exc.value.errno == errno.EIO


def test_a_save_the_store_did_not_answer_is_kept_for_the_next_try(outage_mount) -> None:
    """fsync during an outage says EIO; the writer's bytes stay, and its next write and close
    save the whole text (the body was dropped: the note became the old text with the new bytes
    written over parts of it)."""
    pg, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/seq.md"
    note = mount.org / "seq.md"
    note.write_bytes(b"OLD-CONTENT-LINE-1\nOLD-CONTENT-LINE-2\n")
    fd = os.open(note, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"new line A\n")
        pg.stop()
        with pytest.raises(OSError) as exc:
            os.fsync(fd)
        assert exc.value.errno == errno.EIO
        pg.start()
        os.write(fd, b"new line B\n")
    finally:
        os.close(fd)
    assert mount.tree.read(path) == b"new line A\nnew line B\n"


def test_a_close_the_store_did_not_answer_is_saved_once_it_answers(outage_mount) -> None:
    """A close can report the failure (EIO) but nobody can try again: the mount holds the bytes
    and saves them when the store is back, instead of dropping them."""
    pg, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/late.md"
    close_during_an_outage(pg, mount.org / "late.md", b"before\n", b"written during the outage\n")
    time.sleep(3)   # the mount tries again every 2 s meanwhile
    pg.start()
    eventually(lambda: mount.tree.read(path) == b"written during the outage\n", 15)


def test_an_editors_temp_file_outlives_an_outage_and_its_rename_goes_through(outage_mount) -> None:
    """Write a temp file, close it, rename it over the note: the rename met the outage (EIO),
    and the closed temp file, whose own save failed too, was gone when the editor tried again."""
    pg, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/r.md"
    (mount.org / "r.md").write_bytes(b"orig\n")
    fd, tmp = tempfile.mkstemp(dir=mount.org)
    os.write(fd, b"saved by the editor\n")
    os.close(fd)
    pg.stop()
    try:
        with pytest.raises(OSError) as exc:
            os.replace(tmp, mount.org / "r.md")
        assert exc.value.errno == errno.EIO
        time.sleep(3)   # past the 2 s a closed temp file is held before its own save
    finally:
        pg.start()
    os.replace(tmp, mount.org / "r.md")
    assert mount.tree.read(path) == b"saved by the editor\n"


def test_two_appenders_opening_at_once_keep_every_line(outage_mount) -> None:
    """Two opens of one note in flight at once got bodies of their own, so the second close
    saved over the first: lines were lost (as two shell loops of `echo ... >> note` lose some).
    Each appender here opens, appends a line and closes, 100 times, as such a loop does."""
    _, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/ap.md"
    note = mount.org / "ap.md"
    for round_ in range(2):
        note.write_bytes(b"")
        gate = threading.Barrier(2)

        def append(name: str) -> None:
            gate.wait()
            for i in range(100):
                fd = os.open(note, os.O_WRONLY | os.O_APPEND)
                try:
                    os.write(fd, f"{name}{i}\n".encode())
                finally:
                    os.close(fd)

        workers = [threading.Thread(target=append, args=(n,)) for n in ("A", "B")]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        lines = mount.tree.read(path).decode().splitlines()
        assert sorted(lines) == sorted([f"A{i}" for i in range(100)] + [f"B{i}" for i in range(100)]), \
            (round_, len(lines))


def _store_write(mount: Mount, path: str, data: bytes) -> Any:
    """A write from elsewhere right after the store came back (the test's own pool may still be
    reconnecting)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return mount.tree.write(path, data)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_a_held_save_never_overwrites_a_change_made_elsewhere_after_it(outage_mount) -> None:
    """A save held through an outage was tried again without a condition: a change made from
    WebDAV or the web app once the store was back was overwritten by the older close. The held
    text now goes to a copy beside the note, and the log says so."""
    pg, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/s.md"
    close_during_an_outage(pg, mount.org / "s.md", b"v1\n", b"mount edit, closed during the outage\n")
    # The change elsewhere lands before the mount's next try (the mount is paused meanwhile).
    mount.proc.send_signal(signal.SIGSTOP)
    try:
        pg.start()
        _store_write(mount, path, b"web edit, made after the store came back\n")
    finally:
        mount.proc.send_signal(signal.SIGCONT)
    copies = lambda: [n for n in os.listdir(mount.org) if n.startswith("s-conflicted-copy-")]  # noqa: E731
    eventually(lambda: copies(), 15)
    assert mount.tree.read(path) == b"web edit, made after the store came back\n"
    assert mount.tree.read(f"org/{mount.boot['org_id']}/{copies()[0]}") == b"mount edit, closed during the outage\n"
    assert "changed elsewhere while this mount could not save it" in mount.log()


def test_a_held_save_is_taken_over_by_the_next_writer_of_the_file(outage_mount) -> None:
    """A writer that opened the note through a reader's description (not the held one) shared
    the held body, and the held save then committed that writer's unfinished, empty body."""
    pg, mount = outage_mount
    path = f"org/{mount.boot['org_id']}/t.md"
    note = mount.org / "t.md"
    close_during_an_outage(pg, note, b"v1\n", b"held text\n")
    reader = os.open(note, os.O_RDONLY)   # shares the held body
    pg.start()
    try:
        writer = os.open(note, os.O_WRONLY | os.O_TRUNC)
        seen = set()
        started = time.monotonic()
        while time.monotonic() - started < 5:   # past two of the held save's tries
            with contextlib.suppress(Exception):
                seen.add(mount.tree.read(path))
            time.sleep(0.2)
        os.write(writer, b"final text\n")
        os.close(writer)
    finally:
        os.close(reader)
    assert b"" not in seen, seen
    assert mount.tree.read(path) == b"final text\n"
