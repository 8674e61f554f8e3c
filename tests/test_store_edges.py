"""Store defects found in review, each pinned at the edge where it showed: races between two
writers, values at the limits of their type, names that look like others (Unicode digits, a
trailing newline, NFD text), and schema changes whose outcome depended on row order."""
from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from store import collections as C
from store import errors, memory, notes, tasks, tools
from store.access import SYSTEM, Door, Principal
from store.db import Database
from store.host import HostTree
from store.paths import parse
from tests.conftest import wait_for_lock_waiters

NFD_CAFE = "cafe\u0301"   # "café" as macOS spells it
NFC_CAFE = "caf\u00e9"


@pytest.fixture
def tree(db: Database, boot: dict[str, Any]) -> HostTree:
    return HostTree(db, Door(db).basic(boot["email"], boot["password"]))


@pytest.fixture
def service(db: Database, boot: dict[str, Any]) -> Principal:
    """The service principal the orchestrator's tool calls arrive as (no HTTP: these are store rules)."""
    return Door(db).bearer(boot["service_token"])


def tool(db: Database, service: Principal, boot: dict[str, Any], tool_name: str, **args: Any) -> dict[str, Any]:
    return tools.call(db, service, boot["agent_id"], tool_name, args)


def collection(db: Database, service: Principal, boot: dict[str, Any], name: str,
               columns: list[dict[str, Any]]) -> Any:
    coll = C.create_collection(db, service, boot["org_id"], {"name": name, "purpose": "p", "columns": columns})
    C.set_guild_access(db, service, boot["guild_id"], {"collection_id": coll.id, "mode": "write"})
    return coll


# --- 1. conditional writes are atomic ----------------------------------------------------------------

@pytest.mark.parametrize("kind", ["note", "task", "memory", "script"])
def test_two_writers_with_the_same_if_match_exactly_one_wins(db: Database, db_url: str, boot: dict[str, Any],
                                                              tree: HostTree, kind: str) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    base = f"org/{org}/agents/{agent}"
    path = {"note": f"{base}/shared.md", "task": f"{base}/task.md", "memory": f"{base}/memory.md",
            "script": f"{base}/scripts/job.py"}[kind]
    etag = tree.write(path, b"v1").etag
    # Hold the row so that both writers read it, pass If-Match, and queue on the row lock.
    blocker = psycopg.connect(db_url)
    if kind == "task":
        blocker.execute("SELECT 1 FROM agents WHERE id = %s FOR UPDATE", (agent,))
    else:
        blocker.execute("SELECT 1 FROM artifacts WHERE display_path = %s AND deleted_at IS NULL FOR UPDATE",
                        (path,))
    outcome: dict[str, Any] = {}

    def write(who: str) -> None:
        try:
            outcome[who] = HostTree(db, tree.principal).write(path, f"from {who}".encode(), if_match=etag).version
        except errors.StoreError as exc:
            outcome[who] = exc

    threads = [threading.Thread(target=write, args=(who,)) for who in ("A", "B")]
    for t in threads:
        t.start()
    try:
        wait_for_lock_waiters(db_url, 2)
    finally:
        blocker.rollback()
        blocker.close()
    for t in threads:
        t.join(10)
    won = [who for who, result in outcome.items() if result == 2]
    lost = [who for who, result in outcome.items() if isinstance(result, errors.PreconditionFailed)]
    assert len(won) == 1 and len(lost) == 1, outcome
    assert "changed since it was read" in str(outcome[lost[0]])
    # The loser's text never landed: the file holds the winner's, at version 2.
    assert tree.read(path) == f"from {won[0]}".encode() and tree.stat(path).version == 2


def test_if_none_match_on_memory_and_a_new_note_still_creates(tree: HostTree, boot: dict[str, Any]) -> None:
    """A condition that passed on a missing file (version 0) creates it; the version-0 form of
    memory.md counts as missing."""
    base = f"org/{boot['org_id']}/agents/{boot['agent_id']}"
    assert tree.write(f"{base}/fresh.md", b"x", if_none_match=True).version == 1
    assert tree.write(f"{base}/memory.md", b"m", if_none_match=True).version == 1
    with pytest.raises(errors.PreconditionFailed):
        tree.write(f"{base}/fresh.md", b"y", if_none_match=True)
    assert tree.read(f"{base}/fresh.md") == b"x"


# --- 2. datetimes whose UTC form leaves years 1..9999 ------------------------------------------------

_PAST_THE_YEARS = ("falls outside the years 0001 to 9999 once in UTC, where datetimes are stored; "
                   "send one within them")


@pytest.mark.parametrize("when, problem", [
    ("0001-01-01T00:00:00+01:00", f'datetime "0001-01-01T00:00:00+01:00" {_PAST_THE_YEARS}'),
    ("9999-12-31T23:59:59-01:00", f'datetime "9999-12-31T23:59:59-01:00" {_PAST_THE_YEARS}'),
    ("2024-05-01T09:30:00Z\x00 not a date at all",
     'unparsable datetime; got "2024-05-01T09:30:00Z\\u0000 not a date at all"; send ISO 8601 with a timezone, '
     "such as 2024-05-01T09:30:00Z")])
def test_datetime_past_the_year_limits_or_unparsable_says_which(db, service, boot, when: str, problem: str) -> None:
    """A valid ISO 8601 datetime whose UTC form leaves the years 1..9999 is told so, not called
    unparsable (it was)."""
    collection(db, service, boot, "leads", [{"name": "email", "type": "text", "description": "d"},
                                            {"name": "when", "type": "datetime", "description": "d"}])
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "record_add", collection="leads", body={"email": "a", "when": when})
    assert exc.value.problems == [f'column "when": {problem}']
    with pytest.raises(errors.Invalid, match="since: "):
        tool(db, service, boot, "record_list", collection="leads", since=when)
    with pytest.raises(errors.Invalid, match='where "when": expected an ISO 8601 datetime'):
        tool(db, service, boot, "record_list", collection="leads", where={"when": when})
    assert tool(db, service, boot, "record_list", collection="leads")["total"] == 0


# --- 3. one spelling per id, and names anchored at their end -----------------------------------------

def test_unicode_digits_name_no_organisation(tree: HostTree, boot: dict[str, Any]) -> None:
    org = boot["org_id"]
    assert org == 1  # the Arabic-Indic one below would alias it
    with pytest.raises(errors.NotFound):
        tree.stat("org/\u00b2")                 # "²": isdigit() but not a number int() reads
    with pytest.raises(errors.NotFound):
        tree.list("org/\u0661")
    with pytest.raises(errors.NotFound):
        tree.write("org/\u0661/x.md", b"through an alias of org/1")
    with pytest.raises(errors.NotFound):
        tree.write(f"org/{org}/agents/\u0661/x.md", b"alias of agent 1")
    assert [n.name for n in tree.list(f"org/{org}")] == ["agents", "collections", "guilds"]
    for alias in ("org/\u0661/x.md", "org/1\n/x.md", "org/01/x.md", "org/1/agents/1\n/x.md"):
        with pytest.raises(errors.NotFound):
            parse(alias)


def test_a_trailing_newline_is_not_part_of_a_valid_name(db, service, boot) -> None:
    with pytest.raises(errors.Invalid, match="is not allowed: a script is one file name"):
        tool(db, service, boot, "script_write", name="x.py\n", content="print(1)")
    assert tool(db, service, boot, "script_list")["scripts"] == []
    with pytest.raises(errors.Invalid, match=r'column 1: name "email\\n" is not a column name'):
        C.create_collection(db, service, boot["org_id"], {"name": "leads", "purpose": "p", "columns": [
            {"name": "email\n", "type": "text", "description": "d"}]})
    with pytest.raises(errors.Invalid, match="is not a collection name"):
        C.create_collection(db, service, boot["org_id"], {"name": "leads\n", "purpose": "p", "columns": []})
    with db.transaction() as conn, pytest.raises(errors.Invalid, match="must be a short slug"):
        memory.write_memory(conn, boot["org_id"], boot["agent_id"], "m", SYSTEM, source="agent\n")


# --- 4. moving the unique flag does not depend on row order --------------------------------------

@pytest.mark.parametrize("order", [["x", "y"], ["y", "x"]])
def test_moving_unique_to_another_column_is_accepted_in_any_row_order(db, service, boot, order) -> None:
    cols = [{"name": "x", "type": "text", "description": "d", "unique": True},
            {"name": "y", "type": "text", "description": "d"}]
    coll = collection(db, service, boot, "t", cols)
    for column in order:  # one record holds x = "v", the other y = "v"
        tool(db, service, boot, "record_add", collection="t", body={column: "v"})
    moved = [{"name": "x", "type": "text", "description": "d"},
             {"name": "y", "type": "text", "description": "d", "unique": True}]
    after = C.alter_collection(db, service, coll.id, {"columns": moved})
    assert [c["name"] for c in after.columns if c["unique"]] == ["y"]
    holder = order.index("y") + 1
    # The unique value now lives in y: adding y = "V" again merges into that record.
    out = tool(db, service, boot, "record_add", collection="t", body={"y": " V "})
    assert out["note"] == f"merged into existing record {holder}"


# --- 5. a task saved in NFD keeps its bytes and still protects the NFC note it embeds ---------------

def test_a_task_embedding_a_note_in_nfd_blocks_its_delete(db, service, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    task = f"{NFD_CAFE}: see ![[org/{org}/agents/{agent}/{NFD_CAFE}.md]]"
    with db.transaction() as conn:
        notes.write_note(conn, org, "agent", agent, f"{NFC_CAFE}.md", "body", SYSTEM)
        tasks.write_task(conn, org, agent, task, SYSTEM)
    with db.connection() as conn:
        # As sent: a client reading the task back finds the bytes it wrote (rclone compares sizes).
        assert tasks.read_task(conn, org, agent)["task"] == task
    with pytest.raises(errors.Embedded, match="embeds it"):
        tool(db, service, boot, "note_delete", path=f"org/{org}/agents/{agent}/{NFC_CAFE}.md")
    assert tool(db, service, boot, "note_get", path=f"org/{org}/agents/{agent}/{NFC_CAFE}.md")["content"] == "body"


# --- 6. key length is counted on the stored (NFC) key ------------------------------------------------

def test_a_key_that_grows_under_nfc_is_refused_with_its_length(db, service, boot) -> None:
    key = "\u0958" * 252 + ".md"  # 255 characters as sent, 507 once NFC (each becomes two)
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "note_write", level="agent", key=key, content="x")
    assert exc.value.problems == ["key: the key is 507 characters long; at most 255 are allowed"]


# --- 7. listed values compare in NFC ------------------------------------------------------------------

def test_listed_values_accept_nfd_text_and_count_nfc_duplicates(db, service, boot) -> None:
    collection(db, service, boot, "leads", [
        {"name": "email", "type": "text", "description": "d", "unique": True},
        {"name": "status", "type": "text", "description": "d", "values": [NFC_CAFE, "new"]},
        {"name": "tags", "type": "array", "description": "d", "values": [NFC_CAFE, "tea"]},
        {"name": "notes", "type": "array", "description": "d"}])
    record = tool(db, service, boot, "record_add", collection="leads",
                  body={"email": "a", "status": NFD_CAFE, "tags": [NFD_CAFE]})["record"]
    assert record["status"] == NFC_CAFE and record["tags"] == [NFC_CAFE]  # stored as listed
    listed = tool(db, service, boot, "record_list", collection="leads", where={"status": NFD_CAFE})
    assert [r["id"] for r in listed["records"]] == [1]
    assert tool(db, service, boot, "record_list", collection="leads", where={"tags": NFD_CAFE})["total"] == 1
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "record_add", collection="leads", body={"email": "b", "notes": ["\u00e9", "e\u0301"]})
    assert exc.value.problems == ['column "notes": expected distinct items; "\u00e9" appears twice']
    with pytest.raises(errors.Invalid) as exc:
        C.create_collection(db, service, boot["org_id"], {"name": "v", "purpose": "p", "columns": [
            {"name": "s", "type": "text", "description": "d", "values": ["\u00e9", "e\u0301"]}]})
    assert exc.value.problems == ['column "s": values lists "\u00e9" more than once; each value appears once']


# --- 8. move_note moves notes only -------------------------------------------------------------------

def test_move_note_refuses_the_memory_artifact(db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        memory.write_memory(conn, org, agent, "remember", SYSTEM, source="agent")
    with db.transaction() as conn, pytest.raises(errors.Forbidden, match="memory.md is reserved"):
        notes.move_note(conn, (org, "agent", agent, "memory.md"), (org, "agent", agent, "moved.md"), SYSTEM,
                        replace=False)
    with db.connection() as conn:
        assert memory.read_memory(conn, org, agent)["content"] == "remember"
        assert notes.get_note(conn, org, "agent", agent, "moved.md") is None
    # Even under a name that is not reserved, a non-note row is never taken for the source.
    with db.transaction() as conn:
        conn.execute("UPDATE artifacts SET key = 'mem.md', display_path = %s WHERE kind = 'memory'",
                     (f"org/{org}/agents/{agent}/mem.md",))
    with db.transaction() as conn, pytest.raises(errors.NotFound, match="no live note"):
        notes.move_note(conn, (org, "agent", agent, "mem.md"), (org, "agent", agent, "moved.md"), SYSTEM,
                        replace=False)


# --- 9. a move racing a create on its destination ------------------------------------------------------

def test_a_move_onto_a_path_created_meanwhile_says_so(db: Database, db_url: str, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    dst = f"org/{org}/agents/{agent}/dst.md"
    with db.transaction() as conn:
        notes.write_note(conn, org, "agent", agent, "src.md", "s", SYSTEM)
    other = psycopg.connect(db_url, row_factory=psycopg.rows.dict_row)
    notes.write_note(other, org, "agent", agent, "dst.md", "d", SYSTEM)  # created, not yet committed
    outcome: dict[str, Any] = {}

    def move() -> None:
        try:
            with db.transaction() as conn:
                outcome["move"] = notes.move_note(conn, (org, "agent", agent, "src.md"),
                                                  (org, "agent", agent, "dst.md"), SYSTEM, replace=True)
        except Exception as exc:  # noqa: BLE001 - the test asserts which one
            outcome["move"] = exc

    t = threading.Thread(target=move)
    t.start()
    try:
        wait_for_lock_waiters(db_url, 1)
    finally:
        other.commit()
        other.close()
    t.join(10)
    exc = outcome["move"]
    assert isinstance(exc, errors.AlreadyExists), exc
    assert str(exc).startswith(f"{dst} was created by another change at the same moment")
    with db.connection() as conn:
        assert notes.get_note(conn, org, "agent", agent, "src.md")["content"] == "s"
        assert notes.get_note(conn, org, "agent", agent, "dst.md")["content"] == "d"


# --- 10. a problem line quoting a value too deep to print ------------------------------------------------

def test_a_deeply_nested_where_term_is_named_by_its_type(db, service, boot) -> None:
    collection(db, service, boot, "leads", [{"name": "email", "type": "text", "description": "d"}])
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "record_list", collection="leads", where={"email": deep})
    assert exc.value.problems == ['where "email": expected a text term (at most 200 characters) or null; got a list']


# --- 11. the refusal's grammar ---------------------------------------------------------------------------

def test_copying_a_layout_folder_is_refused_in_plain_english(tree: HostTree, boot) -> None:
    org = boot["org_id"]
    with pytest.raises(errors.Forbidden, match="folders cannot be copied$"):
        tree.copy(f"org/{org}/guilds", f"org/{org}/g.md")
    with pytest.raises(errors.Forbidden, match="folders cannot be moved$"):
        tree.move(f"org/{org}/guilds", f"org/{org}/g.md")


# --- 12. blank unique text is no identity ------------------------------------------------------------

def test_records_with_a_blank_unique_value_stay_separate(db, service, boot) -> None:
    collection(db, service, boot, "leads", [{"name": "email", "type": "text", "description": "d", "unique": True},
                                            {"name": "n", "type": "number", "description": "d"}])
    ids = []
    for n, email in enumerate(["", "   ", ""]):
        out = tool(db, service, boot, "record_add", collection="leads", body={"email": email, "n": n})
        assert "note" not in out
        ids.append(out["record"]["id"])
    assert ids == [1, 2, 3]
    assert [r["n"] for r in tool(db, service, boot, "record_list", collection="leads")["records"]] == [0, 1, 2]
    # A real value still merges.
    tool(db, service, boot, "record_add", collection="leads", body={"email": "a@x"})
    assert tool(db, service, boot, "record_add", collection="leads", body={"email": " A@X "})["note"] == \
        "merged into existing record 4"


# --- names WebDAV and the mount take for side files ----------------------------------------------

@pytest.mark.parametrize("key", ["tmpab12cd34.md", "~$budget.md", "a.md.tmp.md", "x.md.sb-y.md"])
def test_a_side_files_name_is_given_to_no_new_note(db, service, boot, tree: HostTree, key: str) -> None:
    """A note under a name file clients keep as a side file would be listed there but never read,
    saved or deleted through them: such a name is refused for a new note or a rename, with a
    sentence, by every front end that names notes (tools, web app); a note that already holds one
    (written before the rule) stays readable, writable and removable."""
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    with pytest.raises(errors.Invalid, match="has the form editors and programs give their temporary"):
        tool(db, service, boot, "note_write", level="guild", key=key, content="kept")
    tool(db, service, boot, "note_write", level="guild", key="summary.md", content="s")
    with pytest.raises(errors.Invalid, match="choose another name"), db.transaction() as conn:
        notes.move_note(conn, (org, "guild", guild, "summary.md"), (org, "guild", guild, key), SYSTEM,
                        replace=False)
    with pytest.raises(errors.Invalid, match="choose another name|is not allowed"):  # (~$ is no script name)
        tool(db, service, boot, "script_write", name=key.removesuffix(".md") + ".py", content="print()")
    # Written before the rule: still a note for the tools.
    path = f"org/{org}/guilds/{guild}/{key}"
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, guild_id, key, display_path, content)"
                     " VALUES (%s, 'note', 'guild', %s, %s, %s, 'old')", (org, guild, key, path))
    assert tool(db, service, boot, "note_get", path=path)["content"] == "old"
    assert tool(db, service, boot, "note_write", level="guild", key=key, content="new")["version"] == 2
    tool(db, service, boot, "note_delete", path=path)
    assert tree.stat(f"org/{org}/guilds/{guild}/summary.md").version == 1  # the refused move moved nothing


@pytest.mark.parametrize("key", ["Memory.md", "TASK.md", "\uff54ask.md", " task.md"])
def test_a_lookalike_of_memory_or_task_is_given_to_no_new_agent_note(db, service, boot, key: str) -> None:
    """Finder and Windows Explorer do not tell Memory.md from memory.md: the note and the memory
    would show as one file there, and renaming the note to the other spelling moves it onto the
    memory. Such a key is refused for a new agent note and a rename; a guild note may have it;
    one written before the rule stays writable."""
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    with pytest.raises(errors.Invalid, match="only in case, width or spaces"):
        tool(db, service, boot, "note_write", level="agent", key=key, content="x")
    tool(db, service, boot, "note_write", level="agent", key="plan.md", content="p")
    with pytest.raises(errors.Invalid, match="choose another key"), db.transaction() as conn:
        notes.move_note(conn, (org, "agent", agent, "plan.md"), (org, "agent", agent, key), SYSTEM, replace=False)
    if key.startswith(" "):  # a guild note may not start with a space either (a file list hides it)
        with pytest.raises(errors.Invalid, match="starts with a space"):
            tool(db, service, boot, "note_write", level="guild", key=key, content="g")
    else:
        assert tool(db, service, boot, "note_write", level="guild", key=key, content="g")["version"] == 1
    path = f"org/{org}/agents/{agent}/{key}"
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, agent_id, key, display_path, content)"
                     " VALUES (%s, 'note', 'agent', %s, %s, %s, 'old')", (org, agent, key, path))
    assert tool(db, service, boot, "note_write", level="agent", key=key, content="new")["version"] == 2


def test_a_scripts_side_file_name_is_refused_with_a_script_name_to_use() -> None:
    from store.paths import side_name_problem
    assert side_name_problem("tmpabcd12gh.py").endswith("choose another name, such as summary.py")
    assert side_name_problem("tmpabcd12gh.md").endswith("choose another name, such as summary.md")


# --- arguments an agent can send -------------------------------------------------------------------

def test_a_note_find_query_is_at_most_1000_characters(db, service, boot) -> None:
    """Tens of thousands of words overflowed PostgreSQL's parser stack (a 500); the cap is
    record_search's, said in a sentence."""
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "note_find", query=" ".join(["w"] * 50_000))
    assert exc.value.problems == ["query: 99999 characters long; at most 1000 are allowed"]
    assert tool(db, service, boot, "note_find", query=" ".join(["w"] * 500))["notes"] == []


def test_a_nul_in_a_record_value_is_one_of_all_its_problems(db, service, boot) -> None:
    collection(db, service, boot, "leads", [{"name": "email", "type": "text", "description": "d"},
                                            {"name": "notes", "type": "text", "description": "d"},
                                            {"name": "tags", "type": "array", "description": "d"},
                                            {"name": "score", "type": "number", "description": "d"}])
    with pytest.raises(errors.Invalid) as exc:
        tool(db, service, boot, "record_add", collection="leads",
             body={"email": "ok@x", "notes": "a\x00b", "tags": ["fine", "b\x00d"], "score": "42"})
    assert exc.value.problems == [
        'column "notes": contains a NUL character (\\u0000), which text cannot hold; remove it',
        'column "tags": item 2: contains a NUL character (\\u0000), which text cannot hold; remove it',
        'column "score": expected number; got "42"']
    assert tool(db, service, boot, "record_list", collection="leads")["total"] == 0
