"""The Host tree's rules, written once and run on every surface (issue 12): the tree itself, WebDAV
and the FUSE mount (tests/rules/drivers.py). Each test sets the scene through the store, acts
through the surface under test, and checks what a user would notice through the API and the store:
the History (one `update` per save), the note's identity and creation time, no stray notes.

A rule one surface breaks fails as test_<rule>[<surface>]."""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from store import admin
from store.access import Door
from store.host import HostTree
from tests.rules.drivers import Refusal, Surface
from tests.rules.fixtures import (Place, Store, ada_http, ada_tree, fuse_mount, gateway, place,  # noqa: F401
                                  rules_db, rules_db_url, store, surface, world)

CAP = 262_144  # 256 KB: the most one write may carry
_collections = itertools.count(1)


# --- create, read, overwrite ---------------------------------------------------------------------

def test_create(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/créé.md"
    surface.write(path, "# Créé\nfirst words\n".encode())
    assert surface.read(path) == "# Créé\nfirst words\n".encode()
    assert store.history(path) == [("create", 1)]
    assert store.note(path)["content"] == "# Créé\nfirst words\n"
    assert surface.names(place.g) == ["créé.md"] and store.notes_in(place.g) == ["créé.md"]
    # The same at the agent's and the organisation's level.
    mine, ours = f"{place.a}/mine.md", f"org/{place.org}/ours-{place.guild}.md"
    surface.write(mine, b"agent level\n")
    surface.write(ours, b"organisation level\n")
    assert store.history(mine) == [("create", 1)] and store.history(ours) == [("create", 1)]
    assert store.notes_in(place.a) == ["mine.md"] and f"ours-{place.guild}.md" in surface.names(f"org/{place.org}")


def test_read(surface: Surface, place: Place, store: Store) -> None:
    body = "# Plan\n\nship ✓\n".encode()
    store.arrange.write(f"{place.g}/plan.md", body)
    store.arrange.write(f"{place.a}/task.md", b"Watch the plan.\n")
    assert surface.read(f"{place.g}/plan.md") == body
    assert surface.read(f"{place.a}/task.md") == b"Watch the plan.\n"
    assert surface.read(f"{place.a}/memory.md") == b""   # no memory yet: an empty file
    assert surface.names(place.a) == ["history-archive", "memory.md", "scripts", "task.md"]
    with surface.refuses(Refusal.NOT_FOUND):
        surface.read(f"{place.g}/never-written.md")


def test_overwrite_is_the_next_version_of_the_same_note(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/plan.md"
    store.arrange.write(path, b"one\n")
    before = store.note(path)
    surface.write(path, b"two\n")
    after = store.note(path)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 2, "two\n")
    assert after["created_at"] == before["created_at"]
    assert store.history(path) == [("create", 1), ("update", 2)]
    assert surface.read(path) == b"two\n"


# --- renames -------------------------------------------------------------------------------------

def test_rename_to_a_free_name_keeps_the_note(surface: Surface, place: Place, store: Store) -> None:
    src, dst = f"{place.g}/draft.md", f"{place.g}/final.md"
    store.arrange.write(src, b"draft\n")
    before = store.note(src)
    surface.rename(src, dst)
    after = store.note(dst)
    assert (after["id"], after["content"], after["created_at"]) == (before["id"], "draft\n", before["created_at"])
    assert store.note(src) is None
    assert surface.names(place.g) == ["final.md"] and store.notes_in(place.g) == ["final.md"]


def test_rename_over_a_note_is_the_destinations_next_version(surface: Surface, place: Place, store: Store) -> None:
    """An editor saving through a temporary .md name: the destination keeps its identity and
    history and gets one `update`; the source's end is recorded as a delete."""
    src, dst = f"{place.g}/save-in-progress.md", f"{place.g}/plan.md"
    store.arrange.write(dst, b"v1\n")
    store.arrange.write(dst, b"v2\n")
    store.arrange.write(src, b"v3\n")
    before = store.note(dst)
    surface.rename(src, dst)
    after = store.note(dst)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 3, "v3\n")
    assert after["created_at"] == before["created_at"]
    assert store.history(dst) == [("create", 1), ("update", 2), ("update", 3)]
    assert [op for op, _ in store.history(src)] == ["create", "delete"]
    assert store.note(src) is None
    assert surface.names(place.g) == ["plan.md"] and store.notes_in(place.g) == ["plan.md"]
    assert surface.read(dst) == b"v3\n"


def test_rename_away_then_write_anew_keeps_the_notes_identity(surface: Surface, place: Place,
                                                              store: Store) -> None:
    """Emacs' save (vim's with backupcopy=no): K.md -> K.md~, write K.md, remove K.md~. The new
    K.md is the note's next version, not a new note; others saw the note all along."""
    note, backup = f"{place.g}/K.md", f"{place.g}/K.md~"
    store.arrange.write(note, b"old text\n")
    before = store.note(note)
    surface.rename(note, backup)
    assert surface.names(place.g) == ["K.md~"]
    with surface.refuses(Refusal.NOT_FOUND):
        surface.read(note)
    assert surface.read(backup) == b"old text\n"
    assert store.note(note)["version"] == 1 and store.notes_in(place.g) == ["K.md"]  # everyone else still sees it
    surface.write(note, b"new text\n")
    surface.delete(backup)
    after = store.note(note)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 2, "new text\n")
    assert after["created_at"] == before["created_at"]
    assert store.history(note) == [("create", 1), ("update", 2)]
    assert store.history(backup) == []
    assert surface.names(place.g) == ["K.md"] and store.notes_in(place.g) == ["K.md"]


def test_rename_away_and_back_is_the_same_note(surface: Surface, place: Place, store: Store) -> None:
    """An editor that gave up restores its backup: the note again, one version on."""
    note, backup = f"{place.g}/K.md", f"{place.g}/K.md~"
    store.arrange.write(note, b"kept\n")
    before = store.note(note)
    surface.rename(note, backup)
    surface.rename(backup, note)
    after = store.note(note)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 2, "kept\n")
    assert after["created_at"] == before["created_at"]
    assert [op for op, _ in store.history(note)] == ["create", "update"]
    assert surface.names(place.g) == ["K.md"] and surface.read(note) == b"kept\n"


# --- delete and the embed rules ------------------------------------------------------------------

def test_delete(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/old.md"
    store.arrange.write(path, b"bye\n")
    surface.delete(path)
    assert store.note(path) is None
    assert [op for op, _ in store.history(path)] == ["create", "delete"]
    assert surface.names(place.g) == [] and store.notes_in(place.g) == []
    with surface.refuses(Refusal.NOT_FOUND):
        surface.read(path)
    with surface.refuses(Refusal.NOT_FOUND):
        surface.delete(path)


def test_a_note_a_task_embeds_cannot_be_deleted_or_moved_away(surface: Surface, place: Place,
                                                               store: Store) -> None:
    note, task = f"{place.g}/facts.md", f"{place.a}/task.md"
    store.arrange.write(note, b"the facts\n")
    store.arrange.write(task, f"Use ![[{note}]] daily.\n".encode())
    with surface.refuses(Refusal.EMBEDDED, says=task):
        surface.delete(note)
    with surface.refuses(Refusal.EMBEDDED, says=task):
        surface.rename(note, f"{place.g}/elsewhere.md")
    assert store.note(note)["content"] == "the facts\n" and store.history(note) == [("create", 1)]
    assert store.notes_in(place.g) == ["facts.md"]
    # Saving it stays allowed: the task keeps embedding the same note.
    surface.write(note, b"newer facts\n")
    assert store.history(note) == [("create", 1), ("update", 2)]


def test_a_task_cannot_embed_a_memory(surface: Surface, place: Place, store: Store) -> None:
    task, memory = f"{place.a}/task.md", f"{place.a}/memory.md"
    store.arrange.write(memory, b"private thoughts\n")
    store.arrange.write(task, b"Plain task.\n")
    with surface.refuses(Refusal.PRIVATE_EMBED, says="private"):
        surface.write(task, f"Remember ![[{memory}]]\n".encode())
    assert store.arrange.read(task) == b"Plain task.\n"
    assert store.history(task) == [("create", 1)]
    assert surface.read(task) == b"Plain task.\n"


# --- read-only families --------------------------------------------------------------------------

def test_the_history_archive_is_read_only(surface: Surface, place: Place, store: Store) -> None:
    memory, archive = f"{place.a}/memory.md", f"{place.a}/history-archive"
    store.arrange.write(memory, b"first memory\n")
    store.arrange.write(memory, b"second memory\n")
    [kept] = [n.name for n in store.arrange.list(archive)]
    old = f"{archive}/{kept}"
    assert surface.read(old) == b"first memory\n"
    with surface.refuses(Refusal.READ_ONLY, says="read-only"):
        surface.write(old, b"rewritten\n")
    with surface.refuses(Refusal.READ_ONLY):
        surface.write(f"{archive}/new.md", b"planted\n")
    with surface.refuses(Refusal.READ_ONLY, says="read-only"):
        surface.delete(old)
    assert surface.read(old) == b"first memory\n"
    assert [n.name for n in store.arrange.list(archive)] == [kept]
    assert store.arrange.read(memory) == b"second memory\n"


def test_collections_and_records_are_read_only(surface: Surface, place: Place, store: Store) -> None:
    name = f"rules-{next(_collections)}"
    r = store.http.post(f"{store.api}/api/collections", json={
        "name": name, "purpose": "Rule suite", "columns": [{"name": "email", "type": "text", "description": "who"}]})
    assert r.status_code == 201, r.text
    r = store.http.post(f"{store.api}/api/collections/{r.json()['id']}/records", json={"body": {"email": "a@x"}})
    assert r.status_code == 201, r.text
    folder = f"org/{place.org}/collections/{name}"
    assert surface.names(folder) == ["1.json", "collection.json"]
    record = surface.read(f"{folder}/1.json")
    assert b'"email": "a@x"' in record
    with surface.refuses(Refusal.READ_ONLY, says="read-only"):
        surface.write(f"{folder}/1.json", b'{"email": "b@x"}')
    with surface.refuses(Refusal.READ_ONLY):
        surface.write(f"{folder}/collection.json", b"{}")
    with surface.refuses(Refusal.READ_ONLY):
        surface.write(f"{folder}/2.json", b'{"email": "c@x"}')
    with surface.refuses(Refusal.READ_ONLY, says="read-only"):
        surface.delete(f"{folder}/1.json")
    assert surface.read(f"{folder}/1.json") == record
    assert surface.names(folder) == ["1.json", "collection.json"]


# --- side files and refused names ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["._plan.md", ".DS_Store", ".plan.md.swp", "~$plan.md", "4913", "plan.md~",
                                  "tmpab12cd34"])
def test_side_files_go_to_scratch_never_to_notes(surface: Surface, place: Place, store: Store,
                                                 name: str) -> None:
    path = f"{place.g}/{name}"
    surface.write(path, b"side bytes")
    assert surface.read(path) == b"side bytes"
    assert surface.names(place.g) == [name]
    # Never a note: not in the store, not in History, not seen by another member.
    assert store.note(path) is None and store.notes_in(place.g) == [] and store.history(path) == []
    bea = HostTree(store.db, Door(store.db).principal_for_email("bea@example.com"))  # type: ignore[arg-type]
    assert [n.name for n in bea.list(place.g)] == []
    surface.delete(path)
    assert surface.names(place.g) == []


@pytest.mark.parametrize("name", ["notes.txt", "photo.png", ".hidden.md"])
def test_names_that_cannot_be_notes_are_refused(surface: Surface, place: Place, store: Store, name: str) -> None:
    with surface.refuses(Refusal.NOT_A_NOTE, says=".md"):
        surface.write(f"{place.g}/{name}", b"x")
    assert name not in surface.names(place.g) and store.notes_in(place.g) == []


def test_a_note_cannot_be_renamed_to_a_name_that_is_not_a_note(surface: Surface, place: Place,
                                                               store: Store) -> None:
    store.arrange.write(f"{place.g}/plan.md", b"plan\n")
    with surface.refuses(Refusal.NOT_A_NOTE, says=".md"):
        surface.rename(f"{place.g}/plan.md", f"{place.g}/plan.txt")
    assert surface.names(place.g) == ["plan.md"] and store.history(f"{place.g}/plan.md") == [("create", 1)]


def test_task_and_memory_are_reserved(surface: Surface, place: Place, store: Store) -> None:
    task, memory = f"{place.a}/task.md", f"{place.a}/memory.md"
    store.arrange.write(task, b"the task\n")
    store.arrange.write(memory, b"the memory\n")
    for path in (task, memory):
        with surface.refuses(Refusal.RESERVED, says="reserved"):
            surface.delete(path)
        with surface.refuses(Refusal.RESERVED, says="reserved"):
            surface.rename(path, f"{place.a}/renamed.md")
    assert surface.read(task) == b"the task\n" and surface.read(memory) == b"the memory\n"
    assert store.notes_in(place.a) == [] and store.history(task) == [("create", 1)]


def test_layout_folders_take_no_files_and_notes_are_flat(surface: Surface, place: Place, store: Store) -> None:
    agents = f"org/{place.org}/agents"
    with surface.refuses(Refusal.NO_FILES_HERE):
        surface.write(f"{agents}/stray.md", b"x")
    assert "stray.md" not in surface.names(agents)
    with surface.refuses(Refusal.NO_FOLDERS, says="flat"):
        surface.mkdir(f"{place.g}/drafts")
    assert surface.names(place.g) == [] and store.notes_in(place.g) == []


# --- conditional writes, the size cap, text only ---------------------------------------------

def test_if_match_refuses_a_stale_write(surface: Surface, place: Place, store: Store) -> None:
    surface.skip_unless_applies("if_match")
    path = f"{place.g}/shared.md"
    store.arrange.write(path, b"v1\n")
    seen = surface.etag(path)
    store.arrange.write(path, b"theirs\n")          # someone else saves meanwhile
    with surface.refuses(Refusal.STALE, says="If-Match"):
        surface.write_if_match(path, b"mine\n", seen)
    assert store.note(path)["content"] == "theirs\n"
    assert store.history(path) == [("create", 1), ("update", 2)]
    surface.write_if_match(path, b"mine\n", surface.etag(path))   # read again, then save
    assert store.note(path)["content"] == "mine\n" and store.history(path)[-1] == ("update", 3)


def test_a_write_is_at_most_256_kb(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/big.md"
    surface.write(path, b"x" * CAP)
    with surface.refuses(Refusal.TOO_LARGE, says="256 KB"):
        surface.write(path, b"y" * (CAP + 1))
    assert store.note(path)["content"] == "x" * CAP
    assert store.history(path) == [("create", 1)]
    with surface.refuses(Refusal.TOO_LARGE, says="256 KB"):
        surface.write(f"{place.g}/bigger.md", b"z" * (CAP + 1))
    assert store.notes_in(place.g) == ["big.md"]


def test_a_body_that_is_not_utf8_is_refused(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/plan.md"
    store.arrange.write(path, b"text\n")
    with surface.refuses(Refusal.NOT_TEXT, says="UTF-8"):
        surface.write(path, b"caf\xe9\n")        # Latin-1
    assert store.note(path)["content"] == "text\n" and store.history(path) == [("create", 1)]


# --- more editors' saves -------------------------------------------------------------------------

def test_a_create_only_write_leaves_an_existing_note(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/plan.md"
    store.arrange.write(path, b"theirs\n")
    with surface.refuses(Refusal.TAKEN):
        surface.create_new(path, b"mine\n")
    assert store.note(path)["content"] == "theirs\n" and store.history(path) == [("create", 1)]
    surface.create_new(f"{place.g}/new.md", b"mine\n")
    assert store.history(f"{place.g}/new.md") == [("create", 1)]


def test_a_stale_rename_away_save_does_not_overwrite_a_newer_version(surface: Surface, place: Place,
                                                                     store: Store) -> None:
    """The editor moved K.md away and creates it anew expecting it gone (If-None-Match: *, or
    O_EXCL); someone saved K.md meanwhile: the save is refused, theirs stays."""
    note, backup = f"{place.g}/K.md", f"{place.g}/K.md~"
    store.arrange.write(note, b"v1\n")
    surface.rename(note, backup)
    bea = HostTree(store.db, Door(store.db).principal_for_email("bea@example.com"))  # type: ignore[arg-type]
    bea.write(note, b"theirs\n")
    with surface.refuses(Refusal.STALE):
        surface.create_new(note, b"mine\n")
    assert store.note(note)["content"] == "theirs\n"
    assert store.history(note) == [("create", 1), ("update", 2)]


def test_a_side_file_renamed_over_a_note_is_its_next_version(surface: Surface, place: Place,
                                                             store: Store) -> None:
    """Python's mkstemp + os.replace, vim's swap: the temporary never becomes a note."""
    note, tmp = f"{place.g}/plan.md", f"{place.g}/tmpab12cd34"
    store.arrange.write(note, b"one\n")
    before = store.note(note)
    surface.write(tmp, b"two\n")
    surface.rename(tmp, note)
    after = store.note(note)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 2, "two\n")
    assert after["created_at"] == before["created_at"]
    assert store.history(note) == [("create", 1), ("update", 2)] and store.history(tmp) == []
    assert surface.names(place.g) == ["plan.md"] and store.notes_in(place.g) == ["plan.md"]


def test_a_note_renamed_over_an_embedded_note_keeps_the_embed(surface: Surface, place: Place,
                                                              store: Store) -> None:
    note, tmp, task = f"{place.g}/facts.md", f"{place.g}/facts-save.md", f"{place.a}/task.md"
    store.arrange.write(note, b"old facts\n")
    store.arrange.write(task, f"Use ![[{note}]]\n".encode())
    before = store.note(note)
    surface.write(tmp, b"new facts\n")
    surface.rename(tmp, note)
    after = store.note(note)
    assert (after["id"], after["version"], after["content"]) == (before["id"], 2, "new facts\n")
    assert store.history(note) == [("create", 1), ("update", 2)]
    assert [op for op, _ in store.history(tmp)] == ["create", "delete"]
    r = store.http.get(f"{store.api}/api/agents/{place.agent}/state", timeout=30)
    assert r.status_code == 200 and "new facts" in r.text


def test_a_name_in_nfd_is_stored_and_listed_in_nfc(surface: Surface, place: Place, store: Store) -> None:
    """Finder spells é as e + U+0301; every surface stores and lists the NFC name, one note."""
    nfd, nfc = f"{place.g}/cafe\u0301.md", f"{place.g}/caf\u00e9.md"
    surface.write(nfd, b"espresso\n")
    assert store.note(nfc)["content"] == "espresso\n" and store.notes_in(place.g) == ["caf\u00e9.md"]
    assert surface.names(place.g) == ["caf\u00e9.md"]
    surface.write(nfd, b"ristretto\n")
    assert store.history(nfc) == [("create", 1), ("update", 2)]
    assert surface.read(nfc) == b"ristretto\n"


# --- levels, scripts, task and memory, the layout, other organisations ---------------------------

def test_a_note_moved_between_levels_keeps_its_identity(surface: Surface, place: Place, store: Store) -> None:
    src, dst = f"{place.a}/finding.md", f"{place.g}/finding.md"
    store.arrange.write(src, b"shared now\n")
    before = store.note(src)
    surface.rename(src, dst)
    after = store.note(dst)
    assert (after["id"], after["content"], after["created_at"]) == (before["id"], "shared now\n", before["created_at"])
    assert store.notes_in(place.a) == [] and store.notes_in(place.g) == ["finding.md"]
    assert surface.names(place.g) == ["finding.md"] and "finding.md" not in surface.names(place.a)


def test_an_empty_file_is_an_empty_note(surface: Surface, place: Place, store: Store) -> None:
    path = f"{place.g}/empty.md"
    surface.write(path, b"")
    surface.settles(lambda: store.note(path) is not None)
    assert store.note(path)["content"] == "" and store.history(path) == [("create", 1)]
    assert surface.read(path) == b""


def test_task_and_memory_saves_are_versions_and_memory_keeps_its_past(surface: Surface, place: Place,
                                                                      store: Store) -> None:
    task, memory = f"{place.a}/task.md", f"{place.a}/memory.md"
    surface.write(task, b"first task\n")
    surface.write(task, b"second task\n")
    assert store.history(task) == [("create", 1), ("update", 2)]
    surface.write(memory, b"first memory\n")
    surface.write(memory, b"second memory\n")
    assert store.history(memory) == [("create", 1), ("update", 2)]
    assert store.note(memory)["content"] == "second memory\n"
    [kept] = surface.names(f"{place.a}/history-archive")
    assert surface.read(f"{place.a}/history-archive/{kept}") == b"first memory\n"
    assert store.notes_in(place.a) == []


def test_scripts_live_in_scripts_and_stay_scripts(surface: Surface, place: Place, store: Store) -> None:
    scripts = f"{place.a}/scripts"
    surface.write(f"{scripts}/fetch.py", b"print('hi')\n")
    surface.write(f"{scripts}/fetch.py", b"print('hello')\n")
    assert store.history(f"{scripts}/fetch.py") == [("create", 1), ("update", 2)]
    assert surface.read(f"{scripts}/fetch.py") == b"print('hello')\n"
    with surface.refuses(Refusal.NOT_A_NOTE, says=".py"):
        surface.write(f"{scripts}/notes.md", b"# not a script\n")
    with surface.refuses(Refusal.NOT_A_NOTE):
        surface.rename(f"{scripts}/fetch.py", f"{place.a}/fetch.md")
    surface.rename(f"{scripts}/fetch.py", f"{scripts}/get.py")
    assert surface.names(scripts) == ["get.py"] and store.notes_in(place.a) == []
    surface.delete(f"{scripts}/get.py")
    assert surface.names(scripts) == [] and store.note(f"{scripts}/get.py") is None


def test_folders_of_the_layout_cannot_be_deleted_or_moved(surface: Surface, place: Place, store: Store) -> None:
    store.arrange.write(f"{place.g}/keep.md", b"kept\n")
    with surface.refuses(Refusal.LAYOUT, says="folder"):
        surface.rmdir(place.g)
    with surface.refuses(Refusal.LAYOUT, says="folder"):
        surface.rename(place.g, f"org/{place.org}/guilds/{place.guild}-old")
    assert store.notes_in(place.g) == ["keep.md"] and surface.names(place.g) == ["keep.md"]


def test_another_organisation_is_not_there(surface: Surface, place: Place, store: Store) -> None:
    other = admin.create_org(store.db, name=f"Elsewhere {place.guild}")
    theirs = f"org/{other['id']}/secret.md"
    cy = admin.create_user(store.db, email=f"cy{place.guild}@example.com", password="a third long password")
    admin.add_member(store.db, org_id=other["id"], email=cy["email"])
    cy_tree = HostTree(store.db, Door(store.db).principal_for_email(cy["email"]))  # type: ignore[arg-type]
    cy_tree.write(theirs, b"theirs\n")
    with surface.refuses(Refusal.NOT_FOUND):
        surface.read(theirs)
    with surface.refuses(Refusal.NOT_FOUND):
        surface.write(theirs, b"mine\n")
    with surface.refuses(Refusal.NOT_FOUND):
        surface.delete(theirs)
    store.arrange.write(f"{place.g}/mine.md", b"mine\n")
    with surface.refuses(Refusal.NOT_FOUND):
        surface.rename(f"{place.g}/mine.md", f"org/{other['id']}/mine.md")
    assert surface.names("org") == [str(place.org)]
    with store.db.connection() as conn:
        rows = conn.execute("SELECT key, content, version FROM artifacts WHERE org_id = %s AND deleted_at IS NULL",
                            (other["id"],)).fetchall()
    assert rows == [{"key": "secret.md", "content": "theirs\n", "version": 1}]
    assert store.notes_in(place.g) == ["mine.md"]


# --- renames that must not replace, and other clients' locks -------------------------------------

def test_a_rename_that_must_not_replace_leaves_the_destination(surface: Surface, place: Place,
                                                               store: Store) -> None:
    src, dst = f"{place.g}/a.md", f"{place.g}/b.md"
    store.arrange.write(src, b"alpha\n")
    store.arrange.write(dst, b"beta\n")
    with surface.refuses(Refusal.EXISTS):
        surface.rename_noreplace(src, dst)
    assert store.note(dst)["content"] == "beta\n" and store.note(src)["content"] == "alpha\n"
    assert store.history(dst) == [("create", 1)] and store.history(src) == [("create", 1)]
    surface.rename_noreplace(src, f"{place.g}/c.md")
    assert surface.names(place.g) == ["b.md", "c.md"]


LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
             b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>Word</D:owner></D:lockinfo>')


def test_a_note_another_client_has_locked_refuses_changes(surface: Surface, place: Place, store: Store,
                                                          gateway: Any) -> None:
    """Bea has the note open in Word over WebDAV (an exclusive write lock). README: "while a client
    holds a lock, a change without its token answers 423 and changes nothing": on every surface
    (the Host tree honours leases for callers without tokens, store/locks.py)."""
    path = f"{place.g}/locked.md"
    store.arrange.write(path, b"Bea's draft\n")
    bea = gateway.session(basic=("bea@example.com", "another long password"))
    r = bea.request("LOCK", f"{gateway.url}/dav/{path}", data=LOCK_BODY,
                    headers={"Timeout": "Second-300", "Depth": "0"})
    assert r.status_code == 200, r.text
    try:
        with surface.refuses(Refusal.LOCKED):
            surface.write(path, b"overwritten\n")
        assert surface.read(path) == b"Bea's draft\n"   # not the refused bytes, even from a cache
        with surface.refuses(Refusal.LOCKED):
            surface.rename(path, f"{place.g}/moved.md")
        with surface.refuses(Refusal.LOCKED):
            surface.delete(path)
        assert store.note(path)["content"] == "Bea's draft\n" and store.history(path) == [("create", 1)]
    finally:
        bea.request("UNLOCK", f"{gateway.url}/dav/{path}", headers={"Lock-Token": r.headers["Lock-Token"]})


# --- the task through an editor, and changes made elsewhere --------------------------------------

@pytest.mark.parametrize("name", ["task.md", "memory.md"])
def test_a_rename_away_save_of_task_or_memory_is_its_next_version(surface: Surface, place: Place,
                                                                  store: Store, name: str) -> None:
    """vim (backupcopy=no) and Emacs save task.md the way they save any file: moving it to a
    backup name is not a move of the task, and the new file is the task's next version."""
    path, backup = f"{place.a}/{name}", f"{place.a}/{name}~"
    store.arrange.write(path, b"first\n")
    surface.rename(path, backup)
    surface.write(path, b"second\n")
    surface.delete(backup)
    assert store.history(path) == [("create", 1), ("update", 2)]
    assert surface.read(path) == b"second\n" and store.arrange.read(path) == b"second\n"
    assert surface.names(place.a) == ["history-archive", "memory.md", "scripts", "task.md"]
    assert store.notes_in(place.a) == []


def test_a_change_made_elsewhere_is_what_the_surface_reads_next(surface: Surface, place: Place,
                                                                store: Store) -> None:
    path = f"{place.g}/status.md"
    store.arrange.write(path, b"old\n")
    assert surface.read(path) == b"old\n"              # now held by the surface (the kernel's cache)
    bea = HostTree(store.db, Door(store.db).principal_for_email("bea@example.com"))  # type: ignore[arg-type]
    bea.write(path, b"new from Bea\n")
    bea.write(f"{place.g}/fresh.md", b"hello\n")
    surface.settles(lambda: surface.read(path) == b"new from Bea\n")
    surface.settles(lambda: surface.names(place.g) == ["fresh.md", "status.md"])
    bea.delete(f"{place.g}/fresh.md")
    surface.settles(lambda: surface.names(place.g) == ["status.md"])
