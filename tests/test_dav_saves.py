"""Editors' saves over WebDAV, request by request as the clients send them (issue 13): a
rename-away save keeps the text and the note's identity, a note moved over a note is the
destination's next version, and programs' temporary names go to the scratch area."""
from __future__ import annotations

from typing import Any

import pytest
import requests

from store.db import Database
from tests.test_dav import Dav, artifact, changes

LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
             b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>davfs2</D:owner></D:lockinfo>')


@pytest.fixture
def dav(server: Any, operator: requests.Session, boot: dict[str, Any]) -> Dav:
    return Dav(server, operator, boot)


def created_at(db: Database, path: str) -> Any:
    with db.connection() as conn:
        return conn.execute("SELECT created_at FROM artifacts WHERE display_path = %s AND deleted_at IS NULL",
                            (path,)).fetchone()["created_at"]


def embed(dav: Dav, note: str) -> None:
    assert dav.put(f"{dav.a}/task.md", f"Follow ![[{note}]] daily.\n").status_code in (201, 204)


@pytest.mark.parametrize("embedded", [False, True], ids=["plain", "embedded"])
def test_davfs2_rename_away_save_keeps_the_text_and_the_note(dav: Dav, db: Database, embedded: bool) -> None:
    note = f"{dav.g}/K.md"
    assert dav.put(note, "old text\n").status_code == 201
    if embedded:
        embed(dav, note)
    before = artifact(db, note)
    born = created_at(db, note)
    # What davfs2 sends for vim backupcopy=no / Emacs: MOVE away, LOCK the name, PUT it new.
    assert dav.move(note, f"{dav.g}/K.md~").status_code in (201, 204)
    assert dav.get(note).status_code == 404          # gone, as far as this client can tell
    assert "K.md" not in dav.names(dav.g) and "K.md~" in dav.names(dav.g)
    r = dav.req("LOCK", note, data=LOCK_BODY, headers={"Timeout": "Second-300", "Depth": "0"})
    assert r.status_code in (200, 201), r.text
    token = r.headers["Lock-Token"]
    r = dav.put(note, "new text\n", **{"If-None-Match": "*", "If": f"({token})"})
    assert r.status_code in (201, 204), r.text
    assert dav.req("UNLOCK", note, headers={"Lock-Token": token}).status_code == 204
    assert dav.req("DELETE", f"{dav.g}/K.md~").status_code == 204
    after = artifact(db, note)
    assert after["id"] == before["id"] and after["content"] == "new text\n" and after["version"] == 2
    assert created_at(db, note) == born
    assert [c[0] for c in changes(db, note)] == ["create", "update"]
    assert dav.get(note).text == "new text\n"
    assert sorted(n for n in dav.names(dav.g) if not n.startswith(".")) == ["K.md"]
    if embedded:
        r = dav.s.get(dav.base.replace("/dav", "") + f"/api/agents/{dav.agent}/state")
        assert r.status_code == 200 and "new text" in r.text


def test_a_rename_away_hides_the_note_from_that_user_only(dav: Dav, server: Any, db: Database,
                                                          boot: dict[str, Any]) -> None:
    from store import admin
    note = f"{dav.g}/shared.md"
    dav.put(note, "v1")
    admin.create_user(db, email="bea@example.com", password="another long password")
    admin.add_member(db, org_id=dav.org, email="bea@example.com")
    bea = Dav(server, server.session(basic=("bea@example.com", "another long password")), boot)
    assert dav.move(note, f"{dav.g}/shared.md~").status_code in (201, 204)
    assert dav.get(note).status_code == 404
    assert bea.get(note).text == "v1" and "shared.md" in bea.names(dav.g)
    # Restoring the backup (the editor gave up) is the note again, one version on.
    assert dav.move(f"{dav.g}/shared.md~", note).status_code in (201, 204)
    assert dav.get(note).text == "v1" and artifact(db, note)["version"] == 2


LOCK = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
        b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>davfs2</D:owner></D:lockinfo>')


def test_a_lock_on_a_side_file_concerns_its_holder_alone(dav: Dav, server: Any, db: Database,
                                                         boot: dict[str, Any]) -> None:
    """Side files are each user's own (vim's .x.md.swp, Office's ~$x.md): davfs2 locks every file
    it holds open, and the lock on one user's swap file made another's 423 on a file of the same
    name that does not exist for the first, and showed it in their PROPFIND."""
    from store import admin
    admin.create_user(db, email="bea@example.com", password="another long password")
    admin.add_member(db, org_id=dav.org, email="bea@example.com")
    bea = Dav(server, server.session(basic=("bea@example.com", "another long password")), boot)
    swap, note = f"{dav.g}/.plan.md.swp", f"{dav.g}/plan.md"
    dav.put(note, "the plan")
    assert dav.put(swap, "ada's swap").status_code == 201
    for path in (swap, note):
        r = dav.req("LOCK", path, data=LOCK, headers={"Timeout": "Second-600", "Depth": "0"})
        assert r.status_code == 200, r.text
    assert bea.req("PROPFIND", swap, headers={"Depth": "0"}).status_code == 404
    assert bea.put(swap, "bea's swap").status_code == 201
    assert bea.get(swap).text == "bea's swap" and dav.get(swap).text == "ada's swap"
    r = bea.req("LOCK", swap, data=LOCK, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code == 200, r.text
    # A note is everyone's: its lock still stops her, and Ada's swap file stays locked for others
    # of Ada's clients without the token.
    assert bea.put(note, "hers").status_code == 423
    assert dav.put(swap, "no token").status_code == 423


def test_a_stale_rename_away_save_does_not_overwrite_a_newer_version(dav: Dav, db: Database) -> None:
    note = f"{dav.g}/race.md"
    dav.put(note, "v1")
    assert dav.move(note, f"{dav.g}/race.md~").status_code in (201, 204)
    with db.transaction() as conn:  # someone else saves meanwhile (an agent, another client)
        from store import notes
        from store.access import Actor
        notes.write_note(conn, dav.org, "guild", dav.guild, "race.md", "theirs", Actor("agent", None, "scout"))
    r = dav.put(note, "mine", **{"If-None-Match": "*"})
    assert r.status_code == 412 and "version" in r.text
    assert artifact(db, note)["content"] == "theirs"
    # Word's save ends with a MOVE of its temp file over the name it moved away; Overwrite: F
    # is that MOVE's "it is not there", and holds only if nobody saved the note since.
    assert dav.put(f"{dav.g}/~WRL0005.tmp", "mine").status_code == 201
    assert dav.move(f"{dav.g}/~WRL0005.tmp", note, overwrite="F").status_code == 412
    assert artifact(db, note)["content"] == "theirs"
    assert dav.get(f"{dav.g}/~WRL0005.tmp").text == "mine"  # the temp file stays for the editor
    assert dav.move(f"{dav.g}/~WRL0005.tmp", note, overwrite="T").status_code in (201, 204)  # a replace
    assert artifact(db, note)["content"] == "mine"


def test_a_rename_away_save_completed_by_a_move_without_overwrite(dav: Dav, db: Database) -> None:
    """Nobody saved the note meanwhile: Overwrite: F completes the save as the note's next version."""
    note = f"{dav.g}/calm.md"
    dav.put(note, "v1")
    assert dav.move(note, f"{dav.g}/~WRL0006.tmp").status_code in (201, 204)
    assert dav.put(f"{dav.g}/~WRL0007.tmp", "v2").status_code == 201
    assert dav.move(f"{dav.g}/~WRL0007.tmp", note, overwrite="F").status_code in (201, 204)
    assert artifact(db, note)["content"] == "v2" and artifact(db, note)["version"] == 2


def test_words_save_of_a_note_it_holds_locked(dav: Dav, db: Database) -> None:
    """Word locks the document, writes its temp file, moves the document away, moves the temp file
    back with Overwrite: F (its lock token in the If header) and deletes the moved-away copy: the
    save is the note's next version, and the name can be locked again."""
    note, temp, away = f"{dav.g}/word.md", f"{dav.g}/~WRD0001.tmp", f"{dav.g}/~WRL0003.tmp"
    dav.put(note, "v1")
    r = dav.req("LOCK", note, data=LOCK, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code == 200, r.text
    token = r.headers["Lock-Token"]
    tagged = {"If": f"<{dav.url(note)}> ({token})"}
    assert dav.put(temp, "v2 from Word").status_code == 201
    r = dav.req("MOVE", note, headers={"Destination": dav.url(away), "Overwrite": "T", **tagged})
    assert r.status_code in (201, 204), r.text
    r = dav.req("MOVE", temp, headers={"Destination": dav.url(note), "Overwrite": "F", **tagged})
    assert r.status_code in (201, 204), r.text
    assert dav.req("DELETE", away).status_code == 204
    assert artifact(db, note)["content"] == "v2 from Word" and artifact(db, note)["version"] == 2
    assert dav.get(note).text == "v2 from Word"
    r = dav.req("LOCK", note, data=LOCK, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("embedded", [False, True], ids=["plain", "embedded"])
def test_a_note_moved_over_a_note_is_its_next_version(dav: Dav, db: Database, embedded: bool) -> None:
    note, tmp = f"{dav.g}/a.md", f"{dav.g}/a-tmp-save.md"
    for text in ("1", "2", "3"):
        dav.put(note, text)
    if embedded:
        embed(dav, note)
    before, born = artifact(db, note), created_at(db, note)
    assert dav.put(tmp, "4").status_code == 201
    assert dav.move(tmp, note).status_code == 204
    after = artifact(db, note)
    assert after["id"] == before["id"] and after["version"] == 4 and after["content"] == "4"
    assert created_at(db, note) == born
    assert [(c[0], c[1]) for c in changes(db, note)] == [("create", 1), ("update", 2), ("update", 3), ("update", 4)]
    assert [c[0] for c in changes(db, tmp)] == ["create", "delete"]
    assert artifact(db, tmp) is None
    if embedded:
        # Moving the embedded note away stays refused.
        r = dav.move(note, f"{dav.g}/elsewhere.md")
        assert r.status_code == 409 and "task.md" in r.text
        assert artifact(db, note)["version"] == 4


def test_a_script_moved_over_a_script_is_its_next_version(dav: Dav, db: Database) -> None:
    """As for notes: the destination's version goes on (an ETag never names two contents), and
    the source's end is a 'delete'."""
    script, other = f"{dav.a}/scripts/fetch.py", f"{dav.a}/scripts/draft.py"
    for text in ("1", "2", "3"):
        dav.put(script, f"print({text})\n")
    before = artifact(db, script)
    dav.put(other, "print(4)\n")
    assert dav.move(other, script).status_code == 204
    after = artifact(db, script)
    assert after["id"] == before["id"] and after["version"] == 4 and after["content"] == "print(4)\n"
    assert [(c[0], c[1]) for c in changes(db, script)] == [("create", 1), ("update", 2), ("update", 3), ("update", 4)]
    assert [c[0] for c in changes(db, other)] == ["create", "delete"]
    assert artifact(db, other) is None


@pytest.mark.parametrize("name", ["tmpab12cd34", "tmp_k3j9x0a", "tmpq8w7e6r5.md", ".___atomic_writeab12cd34",
                                  "sedAb12Cd"])
def test_program_temporary_names_go_to_scratch(dav: Dav, db: Database, name: str) -> None:
    note = f"{dav.g}/plain.md"
    dav.put(note, "one")
    before = artifact(db, note)
    assert dav.put(f"{dav.g}/{name}", "two").status_code == 201
    assert dav.move(f"{dav.g}/{name}", note).status_code == 204
    after = artifact(db, note)
    assert after["id"] == before["id"] and after["content"] == "two"
    assert artifact(db, f"{dav.g}/{name}") is None
    assert changes(db, f"{dav.g}/{name}") == []


@pytest.mark.parametrize("name", ["tmp_backlog.md", "tmp_summary.md", "tmpabcdefgh.md"])
def test_a_note_named_like_tmp_and_a_word_is_a_note(dav: Dav, db: Database, name: str) -> None:
    """Python's temporary names have random characters; tmp_backlog.md is a person's name for a
    note. It used to be kept as a side file: 201, listed for its author for a day, then gone,
    never seen by an agent. (Python draws no digit for about 8 % of its names: tmpabcdefgh.md is
    then a note for a moment, and its rename over the note below is the note's next version.)"""
    path = f"{dav.g}/{name}"
    assert dav.put(path, "kept\n").status_code == 201
    assert artifact(db, path)["content"] == "kept\n"
    assert [c[0] for c in changes(db, path)] == ["create"]
    note = f"{dav.g}/target.md"
    dav.put(note, "one")
    assert dav.move(path, note).status_code == 204
    assert artifact(db, note)["content"] == "kept\n" and artifact(db, path) is None


def test_documents_of_another_kind_are_still_refused(dav: Dav) -> None:
    for name in ("photo.png", "paper.pdf", "notes.txt"):
        r = dav.put(f"{dav.g}/{name}", "x")
        assert r.status_code == 403 and ".md" in r.text, (name, r.status_code, r.text)
    # A layout folder's name is not a side file.
    assert dav.put(f"org/{dav.org}/agents/{dav.agent}", "x").status_code in (403, 405, 409)
