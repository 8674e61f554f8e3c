"""Notes' names and note_find, as an agent and a WebDAV client see them: "- word" excludes in
note_find and record_search, a note is found by its own file name, the key rules every front end
shares (blank names, C1 controls and line separators, backslashes), and the owner cap's sentence
for a script."""
from __future__ import annotations

import html

from typing import Any

import pytest

from api.errors import status_of
from store import notes, search_index, tools
from store.access import Principal
from store.errors import StoreError
from test_records_support import PEOPLE, call_tool, make_collection, ok


@pytest.fixture(params=["python", "http"])
def call(request, db, boot):
    """call(tool, **args) -> (status, body), through tools.call and through the HTTP tool route."""
    principal = Principal("service", None, "service", frozenset({boot["org_id"]}))
    if request.param == "http":
        server = request.getfixturevalue("server")
        http = server.session(bearer=boot["service_token"])

    def run(tool: str, **args: Any) -> tuple[int, dict]:
        if request.param == "python":
            try:
                return 200, tools.call(db, principal, boot["agent_id"], tool, args)
            except StoreError as exc:
                return status_of(exc), {"error": exc.message, "problems": exc.problems}
        r = http.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/{tool}", json=args)
        return r.status_code, r.json()
    return run


def keys(call, query: str) -> list[str]:
    status, body = call("note_find", query=query)
    assert status == 200, body
    return [n["key"] for n in body["notes"]]


# -- "- word" excludes ---------------------------------------------------------------------------

def test_a_spaced_hyphen_before_a_word_excludes_it_in_note_find(call) -> None:
    for key, content in (("with.md", "alpha beta"), ("without.md", "alpha only")):
        assert call("note_write", level="agent", key=key, content=content)[0] == 200
    assert keys(call, "alpha -beta") == ["without.md"]
    assert keys(call, "alpha - beta") == ["without.md"]       # as websearch_to_tsquery reads it
    assert keys(call, "alpha -- beta") == ["without.md"]
    assert keys(call, 'alpha - "beta"') == ["without.md"]
    # punctuation after the hyphen is a word of its own, which takes the NOT: nothing is excluded
    assert sorted(keys(call, "alpha -, beta")) == ["with.md"]
    assert sorted(keys(call, "alpha beta")) == ["with.md"]


def test_a_spaced_hyphen_before_a_word_excludes_it_in_record_search(server, db, boot, service) -> None:
    make_collection(db, boot["org_id"], "people", PEOPLE, guild_id=boot["guild_id"])
    for name, city in (("Alice Martin", "Paris"), ("Bob Stone", "Paris")):
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people",
                     body={"name": name, "city": city}))
    for query in ("paris -alice", "paris - alice"):
        found = ok(call_tool(server, service, boot["agent_id"], "record_search", collection="people", query=query))
        assert [r["name"] for r in found["records"]] == ["Bob Stone"], query


# -- a note is found by its own file name ---------------------------------------------------------

NAMED = {"playbook.md": "how we respond to incidents", "style-guide.md": "write short sentences",
         "other.md": "nothing to see"}


@pytest.mark.parametrize("indexed", [False, True], ids=["just-saved", "indexed"])
def test_a_note_is_found_by_its_file_name_with_or_without_md(call, db, indexed: bool) -> None:
    for key, content in NAMED.items():
        assert call("note_write", level="agent", key=key, content=content)[0] == 200
    if indexed:   # the indexer's vector, as after a moment; before it, note_find computes the same
        with db.connection() as conn:
            search_index.index_pending(conn)   # (over HTTP the gateway's indexer may have taken some)
            assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 0
    for query in ("playbook.md", "playbook"):
        assert keys(call, query) == ["playbook.md"], query
    for query in ("style-guide.md", "style-guide", "style guide", "style_guide", '"style guide"', "guide"):
        assert keys(call, query) == ["style-guide.md"], query
    assert keys(call, "style-guide -sentences") == []
    assert keys(call, "other.md") == ["other.md"]


def test_a_key_word_counts_once_in_the_ranking(call) -> None:
    """The key's whole forms add no weight to its words: a note that says "guide" twice still ranks
    above guide.md, whose key says it once, as before the key's whole forms were indexed."""
    assert call("note_write", level="agent", key="notes.md", content="the guide, the whole guide")[0] == 200
    assert call("note_write", level="agent", key="guide.md", content="how we work")[0] == 200
    assert keys(call, "guide") == ["notes.md", "guide.md"]


# -- key rules, in every front end ----------------------------------------------------------------

BLANK = " .md"
REFUSED_KEYS = [
    (BLANK, f"the key {BLANK!r} has no name before .md: a note key is a Markdown file name such as findings.md"),
    ("\u3000 .md", "has no name before .md"),
    (" plan.md", "the key ' plan.md' starts with a space, which a file list does not show, so the name would read "
                 "as another; remove it"),
    ("a\x85b.md", "contains a control character or a line break: a note key is one line of visible characters"),
    ("a\x9fb.md", "contains a control character"),
    ("a\u2028b.md", "contains a control character or a line break"),
    ("a\u2029b.md", "contains a control character or a line break"),
    ("drafts\\plan.md", "contains a '\\': Windows reads it as a folder separator, and notes are flat, so a key "
                        "is one file name ending in .md with no folder, such as findings.md"),
    # task.md to the eye; and "xdm.txt" to the eye
    ("task\u200b.md", "contains U+200B (ZERO WIDTH SPACE), which a file list does not show or which reorders "
                      "the letters around it, so the name would read as another; remove it"),
    ("x\u202etxt.md", "contains U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("\ufeffplan.md", "contains U+FEFF (ZERO WIDTH NO-BREAK SPACE)"),
    # 400 bytes: listed by a FUSE mount or davfs2 but never opened, past Linux's 255 bytes a name
    ("é" * 197 + ".md", "the key is 397 bytes long in UTF-8; file systems and file clients take at most 255 bytes"),
]


@pytest.mark.parametrize("key,sentence", REFUSED_KEYS, ids=["blank", "spaces", "leading-space", "nel", "c1", "line-sep",
                                                            "para-sep", "backslash", "zero-width", "bidi", "bom",
                                                            "bytes"])
def test_note_write_refuses_bad_keys_with_a_sentence(call, db, key: str, sentence: str) -> None:
    status, body = call("note_write", level="agent", key=key, content="x")
    assert status == 422, body
    assert sentence in body["error"] and sentence in body["problems"][0]
    assert "contains a '/'" not in body["error"]
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM artifacts").fetchone()["n"] == 0


def test_keys_next_to_the_refused_ones_are_still_notes(call) -> None:
    for key in ("a b.md", "résumé.md", "a\u00a0b.md", "x .md", "é" * 126 + ".md", "नमस्ते.md",
                "\U0001f468\u200d\U0001f469\u200d\U0001f467.md", "می\u200cخواهم.md"):
        status, body = call("note_write", level="agent", key=key, content="x")
        assert status == 200, (key, body)


@pytest.mark.parametrize("name,sentence", [
    ("%20.md", "a note key is"), ("%20plan.md", "starts with a space"), ("a%C2%85b.md", "a note key is"),
    ("a%E2%80%A8b.md", "a note key is"),
    ("task%E2%80%8B.md", "contains U+200B (ZERO WIDTH SPACE)"), ("%C3%A9" * 128 + ".md", "at most 255 bytes")],
    ids=["blank", "leading-space", "nel", "line-sep", "zero-width", "bytes"])
def test_webdav_refuses_the_same_keys(server, operator, db, boot, name: str, sentence: str) -> None:
    r = operator.put(f"{server.url}/dav/org/{boot['org_id']}/agents/{boot['agent_id']}/{name}", data=b"x")
    # (a rule for new names, as look-alikes of memory.md are: 400 with its sentence)
    assert r.status_code == 400 and sentence in html.unescape(r.text), (r.status_code, r.text)
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM artifacts WHERE kind = 'note'").fetchone()["n"] == 0


@pytest.mark.parametrize("name", ["Memory.md", "plan%E2%80%8B.md"])
def test_a_lock_that_starts_a_save_is_refused_for_a_name_no_new_note_may_take(server, operator, db, boot,
                                                                               name: str) -> None:
    """Finder and Office LOCK a new name before its PUT: a name the PUT will refuse (a look-alike of
    memory.md, a zero-width space) is refused at the LOCK with the PUT's status and sentence, as
    notes.txt is, not granted and then lost at the save. A note already so named locks as before."""
    base = f"{server.url}/dav/org/{boot['org_id']}/agents/{boot['agent_id']}"
    body = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
            b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>finder</D:owner></D:lockinfo>')
    r = operator.request("LOCK", f"{base}/{name}", data=body, headers={"Depth": "0"})
    assert r.status_code == 400 and "Lock-Token" not in r.headers, (r.status_code, r.text)
    assert ("differs from the reserved memory.md" if name == "Memory.md" else "U+200B") in html.unescape(r.text)
    assert r.status_code == operator.put(f"{base}/{name}", data=b"x").status_code
    from urllib.parse import unquote
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, agent_id, key, display_path, content)"
                     " VALUES (%s, 'note', 'agent', %s, %s, %s, 'kept')",
                     (org, agent, unquote(name), f"org/{org}/agents/{agent}/{unquote(name)}"))
    assert operator.request("LOCK", f"{base}/{name}", data=body, headers={"Depth": "0"}).status_code == 200


def test_a_note_named_so_before_the_rule_can_still_be_read_renamed_and_deleted(server, operator, db, boot) -> None:
    """The rules for invisible names apply to new names: a note that got such a name before them is
    still a file every client can open, rename to a good name, or delete."""
    from urllib.parse import quote
    org, agent = boot["org_id"], boot["agent_id"]
    folder = f"org/{org}/agents/{agent}"
    with db.transaction() as conn:
        for key in ("old\x85name.md", " .md"):
            conn.execute("INSERT INTO artifacts (org_id, kind, level, agent_id, key, display_path, content)"
                         " VALUES (%s, 'note', 'agent', %s, %s, %s, 'kept')", (org, agent, key, f"{folder}/{key}"))
    base = f"{server.url}/dav/{folder}"
    assert operator.get(f"{base}/{quote('old' + chr(0x85) + 'name.md')}").text == "kept"
    moved = operator.request("MOVE", f"{base}/{quote('old' + chr(0x85) + 'name.md')}",
                             headers={"Destination": f"{base}/renamed.md"})
    assert moved.status_code == 201, moved.text
    assert operator.get(f"{base}/renamed.md").text == "kept"
    assert operator.get(f"{base}/%20.md").text == "kept"
    assert operator.delete(f"{base}/%20.md").status_code == 204


# -- the owner cap's sentence names the owner ------------------------------------------------------

def test_a_script_at_the_owner_cap_is_told_the_owner_holds_the_files(call, db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    assert call("note_write", level="agent", key="first.md", content="x")[0] == 200
    with db.transaction() as conn:
        conn.execute("UPDATE owner_counts SET live = %s WHERE org_id = %s AND level = 'agent' AND owner_id = %s",
                     (notes.OWNER_CAP, org, agent))
    status, body = call("script_write", name="fetch.py", content="print(1)")
    assert status == 422, body
    assert body["error"] == (f"cannot create org/{org}/agents/{agent}/scripts/fetch.py: org/{org}/agents/{agent}/ "
                             "already holds 10,000 live files, the limit is 10,000 per owner; delete files that "
                             "are no longer needed, or write into an existing one")
    status, body = call("note_write", level="agent", key="second.md", content="x")
    assert status == 422 and f": org/{org}/agents/{agent}/ already holds 10,000 live files" in body["error"]
