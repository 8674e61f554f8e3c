"""Embeds: what counts as one, expansion for State, and the Host rule on delete and move."""
from __future__ import annotations

import threading

import pytest

from store import admin, collections, embeds, notes, scripts, state, tasks
from store.access import SYSTEM, Actor, Principal
from store.agents import load_agent
from store.errors import Embedded, Invalid
from tests.conftest import wait_for_lock_waiters

OP = Actor("user", 1, "ada@example.com")


def test_embeds_in_code_spans_fences_and_indented_code_do_not_count() -> None:
    text = """# Task
Use ![[org/1/a.md]] and ![[ org/1/b.md ]] twice: ![[org/1/a.md]].
Not `![[org/1/code-span.md]]`, not \\![[org/1/escaped.md]].

```
![[org/1/fenced.md]]
```

~~~md
![[org/1/tilde.md]]
~~~

    ![[org/1/indented.md]]

- item ![[org/1/c.md]]
> quoted ![[org/1/d.md]]

| col |
| --- |
| ![[org/1/e.md]] |
"""
    assert embeds.find_embeds(text) == ["org/1/a.md", "org/1/b.md", "org/1/c.md", "org/1/d.md", "org/1/e.md"]
    assert embeds.find_embeds("![[]] ![[a\nb]] ![[x]") == []


def _setup(db, boot):
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "org", None, "style.md", "Be brief. ![[org/%d/deep.md]]" % org, SYSTEM)
        notes.write_note(conn, org, "org", None, "deep.md", "Deep body ![[org/%d/deeper.md]]" % org, SYSTEM)
        notes.write_note(conn, org, "org", None, "deeper.md", "too deep", SYSTEM)
        conn.execute("INSERT INTO artifact_collections (org_id, name, purpose) VALUES (%s, 'leads', 'sales leads')",
                     (org,))
        scripts.write_script(conn, org, agent, "x.py", "print()", SYSTEM)
    with db.connection() as conn:
        return load_agent(conn, agent, {org})


def test_expand_task_inlines_one_nested_hop_and_marks_the_rest(db, boot) -> None:
    agent = _setup(db, boot)
    org = boot["org_id"]
    other = admin.bootstrap(db, org_name="Other")
    task = (f"Start. ![[org/{org}/style.md]] Table: ![[org/{org}/collections/leads]]. "
            f"Missing: ![[org/{org}/nope.md]]. Script: ![[org/{org}/agents/{agent.id}/scripts/x.py]]. "
            f"Foreign: ![[org/{other['org_id']}/x.md]]. Code: `![[org/{org}/style.md]]`")
    with db.connection() as conn:
        out = embeds.expand_task(conn, agent, task)
    assert out == (
        "Start. Be brief. Deep body [embed not expanded: org/%(o)d/deeper.md; only one nested level is inlined] "
        "Table: leads. Missing: [embed missing: org/%(o)d/nope.md does not exist]. "
        "Script: [embed unreadable: org/%(o)d/agents/%(a)d/scripts/x.py is a script; only notes and collections "
        "are embedded]. Foreign: [embed unreadable: org/%(f)d/x.md belongs to another organisation]. "
        "Code: `![[org/%(o)d/style.md]]`") % {"o": org, "a": agent.id, "f": other["org_id"]}


def test_expansion_does_not_depend_on_note_grants(db, boot) -> None:
    agent = _setup(db, boot)
    admin.set_agent(db, agent.id, read_org=False, read_guild=False)
    with db.connection() as conn:
        agent = load_agent(conn, agent.id, {boot["org_id"]})
        assert embeds.expand_task(conn, agent, f"![[org/{boot['org_id']}/deeper.md]]") == "too deep"


def _neighbours(db, boot):
    """An agent's own, its guild's and the organisation's notes beside another guild's and another
    agent's own note, and an organisation note that embeds both of those."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    far_guild = admin.create_guild(db, org_id=org, name="Far")["id"]
    far_agent = admin.create_agent(db, org_id=org, guild_id=far_guild, name="Far agent")["id"]
    paths = {"own": f"org/{org}/agents/{agent}/own.md", "guild": f"org/{org}/guilds/{guild}/ours.md",
             "org": f"org/{org}/hub.md", "far guild": f"org/{org}/guilds/{far_guild}/plans.md",
             "far agent": f"org/{org}/agents/{far_agent}/diary.md"}
    with db.transaction() as conn:
        notes.write_note(conn, org, "agent", agent, "own.md", "own body", SYSTEM)
        notes.write_note(conn, org, "guild", guild, "ours.md", "guild body", SYSTEM)
        notes.write_note(conn, org, "guild", far_guild, "plans.md", "far guild secret", SYSTEM)
        notes.write_note(conn, org, "agent", far_agent, "diary.md", "far agent secret", SYSTEM)
        notes.write_note(conn, org, "org", None, "hub.md",
                         f"hub: ![[{paths['far guild']}]] ![[{paths['far agent']}]] ![[{paths['guild']}]]", SYSTEM)
    return paths, far_guild, far_agent


def test_a_task_save_refuses_another_guilds_or_another_agents_note_and_saves_nothing(db, boot) -> None:
    """The spec: no agent reads another guild's guild-level notes, and an agent's own notes are its
    own. A task inlines what it embeds into the agent's run, so such an embed is refused at save,
    every one at once, with what a task can embed instead."""
    org, agent = boot["org_id"], boot["agent_id"]
    paths, far_guild, far_agent = _neighbours(db, boot)
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, "before", OP)
    text = " ".join(f"![[{paths[k]}]]" for k in ("own", "guild", "org", "far guild", "far agent"))
    with pytest.raises(Invalid) as err, db.transaction() as conn:
        tasks.write_task(conn, org, agent, text, OP)
    where = (f"a task embeds its agent's own notes (org/{org}/agents/{agent}/<note>.md), its guild's "
             f"(org/{org}/guilds/{boot['guild_id']}/<note>.md), the organisation's (org/{org}/<note>.md) and "
             f"collections (org/{org}/collections/<name>); a note for several guilds belongs at the "
             "organisation's level")
    assert err.value.problems == [
        f"![[{paths['far guild']}]] is a note of guild {far_guild}, and agent {agent} is in guild "
        f"{boot['guild_id']}: no agent reads another guild's notes; {where}",
        f"![[{paths['far agent']}]] is agent {far_agent}'s own note, which agent {agent} never reads; {where}"]
    with db.connection() as conn:
        assert tasks.read_task(conn, org, agent)["task"] == "before"
    # The agent's own, its guild's and the organisation's notes are saved and inlined.
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, f"![[{paths['own']}]] / ![[{paths['guild']}]]", OP)
    with db.connection() as conn:
        assert embeds.expand_task(conn, load_agent(conn, agent, {org}), tasks.read_task(conn, org, agent)["task"]) \
            == "own body / guild body"


def test_the_insert_box_offers_exactly_what_a_task_save_takes(db, boot) -> None:
    """The task editor's Insert box (embed_choices, may_embed) and the save (reach_problems) ask
    one rule: the box offers the agent's own, its guild's and the organisation's notes and the
    tables it reaches, never a note the save would refuse, nor a memory or a note that is gone."""
    org, agent_id = boot["org_id"], boot["agent_id"]
    paths, _far_guild, _far_agent = _neighbours(db, boot)
    table = f"org/{org}/collections/leads"
    others = {"memory": f"org/{org}/agents/{agent_id}/memory.md", "missing": f"org/{org}/agents/{agent_id}/gone.md",
              "other org": f"org/{org + 1000}/hub.md", "not a path": "hub.md"}
    with db.connection() as conn:
        agent = load_agent(conn, agent_id, {org})
        offered, more = embeds.embed_choices(conn, agent, [table])
        assert not more and offered == [table, paths["org"], paths["guild"], paths["own"]]
        for name, path in {**paths, **others, "table": table}.items():
            refused = embeds.reach_problems(conn, org, agent_id, [path]) + embeds.private_embed_problems(org, [path])
            may = embeds.may_embed(conn, agent, [table], path)
            assert may == (name in ("own", "guild", "org", "table")), name
            assert not (may and refused), (name, refused)
            assert may or path not in offered, name
        # A table the agent does not reach is not offered, nor taken when typed whole.
        assert not embeds.may_embed(conn, agent, [], table)
        # Another guild's and another agent's notes are not found either; a find is any case.
        assert embeds.embed_choices(conn, agent, [], find="plans") == ([], False)
        assert embeds.embed_choices(conn, agent, [], find="diary") == ([], False)
        assert embeds.embed_choices(conn, agent, [table], find="OURS") == ([paths["guild"]], False)


def test_the_nested_hop_never_inlines_another_guilds_or_agents_note(db, boot) -> None:
    """An organisation note (which agents may write) embedding another guild's and another agent's
    note does not carry them into a task that embeds it: markers, listed among the warnings, while
    its own guild's note is inlined. The notes browser, the operator's view, inlines them all."""
    org, agent_id = boot["org_id"], boot["agent_id"]
    paths, far_guild, far_agent = _neighbours(db, boot)
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent_id, f"![[{paths['org']}]]", OP)
    with db.connection() as conn:
        agent = load_agent(conn, agent_id, {org})
        task = tasks.read_task(conn, org, agent_id)["task"]
        out = embeds.expand_task(conn, agent, task)
        problems = embeds.task_embed_problems(conn, agent, task)
        operator_view = embeds.expand_embeds(conn, org, task)
    far_guild_why = (f"embed unreadable: {paths['far guild']} is a note of guild {far_guild}, and agent {agent_id} "
                     f"is in guild {boot['guild_id']}: no agent reads another guild's notes")
    far_agent_why = f"embed unreadable: {paths['far agent']} is agent {far_agent}'s own note, which agent {agent_id} never reads"
    assert out == f"hub: [{far_guild_why}] [{far_agent_why}] guild body"
    assert "secret" not in out
    assert problems == [far_guild_why, far_agent_why]
    assert operator_view == "hub: far guild secret far agent secret guild body"
    with db.connection() as conn:  # what a run reads: State
        assert "secret" not in state.get_state(conn, agent)["task"]["text"]


def test_the_api_refuses_a_task_embedding_another_guilds_note(db, boot, operator, server) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    paths, far_guild, _ = _neighbours(db, boot)
    url = f"{server.url}/api/agents/{agent}/task"
    r = operator.put(url, data=f"Read ![[{paths['far guild']}]]".encode(), headers={"Content-Type": "text/markdown"})
    assert r.status_code == 422, r.text
    assert f"is a note of guild {far_guild}" in r.text and "no agent reads another guild's notes" in r.text
    assert "far guild secret" not in operator.get(f"{server.url}/api/agents/{agent}/state").text


def test_the_64_kb_budget_cuts_at_a_whole_embed_with_a_visible_marker(db, boot) -> None:
    """An embed is inlined whole or not at all: the first one that does not fit is where the cut
    is, marked, and every embed after it is marked as not inlined."""
    org = boot["org_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "org", None, "a.md", "a" * 40_000, SYSTEM)
        notes.write_note(conn, org, "org", None, "b.md", "b" * 40_000, SYSTEM)
        notes.write_note(conn, org, "org", None, "c.md", "c", SYSTEM)
        agent = load_agent(conn, boot["agent_id"], {org})
        task = (f"![[org/{org}/a.md]]|![[org/{org}/b.md]]|![[org/{org}/c.md]]|![[org/{org}/collections/none]]"
                f"|![[org/{org}/c.md]]")
        out = embeds.expand_task(conn, agent, task)
        problems = embeds.task_embed_problems(conn, agent, task)
    a, b, c, d, c_again = out.split("|")
    assert a == "a" * 40_000
    assert b == (f"[embed budget of 64 KB reached: org/{org}/b.md (40000 bytes) is not inlined, "
                 "nor any embed after it]")
    assert c == c_again == f"[embed budget of 64 KB used up: org/{org}/c.md not inlined]"
    assert d == f"[embed missing: org/{org}/collections/none does not exist]"
    # A save's warning names every embed a run will see as a marker, past the budget too, each once.
    assert problems == [b[1:-1], c[1:-1], d[1:-1]]


def test_a_budget_cut_inside_a_first_hop_note_never_leaves_a_raw_embed(db, boot) -> None:
    """The cut lands on a nested embed of a first-hop note: the note's own text is kept whole,
    the nested embed that does not fit is marked where it stood, and no ![[...]] stays raw."""
    org = boot["org_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "org", None, "a.md", "a" * 40_000, SYSTEM)
        notes.write_note(conn, org, "org", None, "hub.md",
                         f"intro ![[org/{org}/small.md]] middle ![[org/{org}/big.md]] outro ![[org/{org}/small.md]]",
                         SYSTEM)
        notes.write_note(conn, org, "org", None, "small.md", "s", SYSTEM)
        notes.write_note(conn, org, "org", None, "big.md", "B" * 30_000 + f" ![[org/{org}/a.md]]", SYSTEM)
        notes.write_note(conn, org, "org", None, "wide.md", "w" * 30_000 + f" ![[org/{org}/small.md]]", SYSTEM)
        agent = load_agent(conn, boot["agent_id"], {org})
        out = embeds.expand_task(conn, agent, f"![[org/{org}/a.md]] ![[org/{org}/hub.md]] ![[org/{org}/wide.md]]")
    assert "![[" not in out
    assert out == ("a" * 40_000 + " intro s middle "
                   f"[embed budget of 64 KB reached: org/{org}/big.md ({30_001 + len(f'![[org/{org}/a.md]]')} bytes) is not "
                   "inlined, nor any embed "
                   "after it] outro "
                   f"[embed budget of 64 KB used up: org/{org}/small.md not inlined] "
                   f"[embed budget of 64 KB used up: org/{org}/wide.md not inlined]")
    with db.connection() as conn:
        problems = embeds.task_embed_problems(
            conn, agent, f"![[org/{org}/a.md]] ![[org/{org}/hub.md]] ![[org/{org}/wide.md]]")
    assert problems == [f"embed budget of 64 KB reached: org/{org}/big.md ({30_001 + len(f'![[org/{org}/a.md]]')} "
                        "bytes) is not inlined, nor any embed after it",
                        f"embed budget of 64 KB used up: org/{org}/small.md not inlined",
                        f"embed budget of 64 KB used up: org/{org}/wide.md not inlined"]


def test_delete_or_move_of_an_embedded_note_is_refused_naming_every_task(db, boot) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    second = admin.create_agent(db, org_id=org, guild_id=guild, name="Second")
    path = f"org/{org}/guilds/{guild}/brief.md"
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "brief.md", "b", SYSTEM)
        notes.write_note(conn, org, "guild", guild, "free.md", "f", SYSTEM)
        tasks.write_task(conn, org, boot["agent_id"], f"Read ![[{path}]]", OP)
        tasks.write_task(conn, org, second["id"], f"Also ![[{path}]]; code `![[org/{org}/guilds/{guild}/free.md]]`",
                         OP)
    expected = (f"cannot delete {path}: the task org/{org}/agents/{boot['agent_id']}/task.md, "
                f"org/{org}/agents/{second['id']}/task.md embeds it (![[{path}]]); remove the embed from the task "
                "first, then try again")
    with pytest.raises(Embedded) as err, db.transaction() as conn:
        notes.delete_note(conn, org, "guild", guild, "brief.md", OP)
    assert err.value.message == expected
    assert err.value.tasks == [f"org/{org}/agents/{boot['agent_id']}/task.md", f"org/{org}/agents/{second['id']}/task.md"]
    with pytest.raises(Embedded), db.transaction() as conn:
        notes.move_note(conn, (org, "guild", guild, "brief.md"), (org, "guild", guild, "renamed.md"), OP,
                        replace=False)
    # replacing an embedded note by moving another onto it is refused too
    with pytest.raises(Embedded), db.transaction() as conn:
        notes.move_note(conn, (org, "guild", guild, "free.md"), (org, "guild", guild, "brief.md"), OP, replace=True)
    # an embed inside a code span does not hold the note
    with db.transaction() as conn:
        notes.delete_note(conn, org, "guild", guild, "free.md", OP)
    # once the tasks drop the embed, the delete goes through
    with db.transaction() as conn:
        tasks.write_task(conn, org, boot["agent_id"], "nothing", OP)
        tasks.write_task(conn, org, second["id"], "nothing", OP)
        notes.delete_note(conn, org, "guild", guild, "brief.md", OP)


def test_the_embed_check_sees_a_task_saved_a_moment_earlier(db, boot) -> None:
    """A task save in flight holds the delete until it commits; the delete then sees it."""
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/agents/{agent}/keep.md"
    with db.transaction() as conn:
        notes.write_note(conn, org, "agent", agent, "keep.md", "k", SYSTEM)
    outcome: list[object] = []

    def delete() -> None:
        try:
            with db.transaction() as conn:
                notes.delete_note(conn, org, "agent", agent, "keep.md", OP)
            outcome.append("deleted")
        except Embedded as exc:
            outcome.append(exc)

    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, f"![[{path}]]", OP)
        t = threading.Thread(target=delete)
        t.start()
        wait_for_lock_waiters(db.conninfo, 1)  # the delete waits on the task's embed lock
        assert outcome == []
    t.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], Embedded)


def test_move_keeps_identity_bumps_version_and_records_both_paths(db, boot) -> None:
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    with db.transaction() as conn:
        first = notes.write_note(conn, org, "agent", agent, "draft.md", "d", SYSTEM)
        notes.write_note(conn, org, "guild", guild, "final.md", "old", SYSTEM)
        moved = notes.move_note(conn, (org, "agent", agent, "draft.md"), (org, "guild", guild, "final.md"), OP,
                                replace=True)
    assert moved["id"] == first["id"] and moved["version"] == 2
    assert moved["display_path"] == f"org/{org}/guilds/{guild}/final.md"
    with db.connection() as conn:
        assert notes.get_note(conn, org, "agent", agent, "draft.md") is None
        assert notes.get_note(conn, org, "guild", guild, "final.md")["content"] == "d"
        rows = conn.execute("SELECT display_path, operation, version FROM file_changes ORDER BY id DESC LIMIT 2"
                            ).fetchall()
    assert rows == [{"display_path": f"org/{org}/guilds/{guild}/final.md", "operation": "update", "version": 2},
                    {"display_path": f"org/{org}/agents/{agent}/draft.md", "operation": "move", "version": 2}]


def test_a_memory_embed_already_in_a_task_is_shown_as_a_link_never_inlined(db, boot) -> None:
    """A task saved before the save-time rule may still hold a memory embed: State links to it and
    shows none of the memory, neither at the first hop nor through a note's nested embed."""
    org, agent = boot["org_id"], boot["agent_id"]
    other = admin.create_agent(db, org_id=org, guild_id=boot["guild_id"], name="Other")
    theirs = f"org/{org}/agents/{other['id']}/memory.md"
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, agent_id, key, display_path, content)"
                     " VALUES (%s, 'memory', 'agent', %s, 'memory.md', %s, 'SECRET plans')",
                     (org, other["id"], theirs))
        notes.write_note(conn, org, "org", None, "hub.md", f"hub ![[{theirs}]]", SYSTEM)
        conn.execute("UPDATE agents SET task = %s WHERE id = %s", (f"![[{theirs}]] / ![[org/{org}/hub.md]]", agent))
        agent_row = load_agent(conn, agent, {org})
        out = embeds.expand_task(conn, agent_row, tasks.read_task(conn, org, agent)["task"])
    assert "SECRET" not in out
    assert out == f"[{theirs}]({theirs}) / hub [{theirs}]({theirs})"


# --- a collection a live task embeds (![[org/<org_id>/collections/<name>]]) ---------------------------

def _member(boot) -> Principal:
    return Principal("user", boot["user_id"], boot["email"], frozenset({boot["org_id"]}))


def _table(db, boot, name: str = "leads", guild_id: int | None = None) -> dict:
    with db.transaction() as conn:
        return conn.execute(
            "INSERT INTO artifact_collections (org_id, guild_id, name, purpose, columns) VALUES (%s, %s, %s, 'sales'"
            ", '[]'::jsonb) RETURNING id, name", (boot["org_id"], guild_id, name)).fetchone()


def test_the_api_refuses_a_rename_or_delete_of_an_embedded_collection_and_names_every_task(
        db, boot, operator, server) -> None:
    """409 in the API's one error shape, naming each embedding task; nothing renamed or deleted, the
    table and its embed still work. An embed in a code span does not hold a table."""
    org, guild = boot["org_id"], boot["guild_id"]
    second = admin.create_agent(db, org_id=org, guild_id=guild, name="Second")
    leads, free = _table(db, boot), _table(db, boot, "free")
    path = f"org/{org}/collections/leads"
    with db.transaction() as conn:
        tasks.write_task(conn, org, boot["agent_id"], f"Work the table ![[{path}]].", OP)
        tasks.write_task(conn, org, second["id"], f"Also ![[{path}]]; code `![[org/{org}/collections/free]]`", OP)
    first_task = f"org/{org}/agents/{boot['agent_id']}/task.md"
    second_task = f"org/{org}/agents/{second['id']}/task.md"
    url = f"{server.url}/api/collections/{leads['id']}"

    r = operator.patch(url, json={"name": "prospects"})
    assert r.status_code == 409, r.text
    assert r.json() == {
        "error": f"cannot rename the collection leads to prospects: the tasks {first_task}, {second_task} embed it "
                 f"(![[{path}]]), which would then find nothing; remove the embed from the task first, then try "
                 f"again (and embed ![[org/{org}/collections/prospects]] after the rename)",
        "problems": [f"embedded by {first_task}", f"embedded by {second_task}"], "status": 409}
    r = operator.delete(url)
    assert r.status_code == 409, r.text
    assert r.json() == {
        "error": f"cannot delete the collection leads: the tasks {first_task}, {second_task} embed it (![[{path}]]); "
                 "remove the embed from the task first, then try again",
        "problems": [f"embedded by {first_task}", f"embedded by {second_task}"], "status": 409}
    # A rename together with other changes is refused whole: nothing of it was written.
    r = operator.patch(url, json={"name": "prospects", "purpose": "changed"})
    assert r.status_code == 409
    got = operator.get(url).json()
    assert (got["name"], got["purpose"], got["display_path"]) == ("leads", "sales", path)
    with db.connection() as conn:
        agent = load_agent(conn, boot["agent_id"], {org})
        assert embeds.expand_task(conn, agent, tasks.read_task(conn, org, boot["agent_id"])["task"]) == \
            "Work the table leads."
        assert conn.execute("SELECT count(*) AS n FROM file_changes WHERE display_path LIKE %s",
                            (f"org/{org}/collections/%",)).fetchone()["n"] == 0

    # What leaves the display path as it is goes through: purpose, columns, the same name, the scope
    # (a guild's or the organisation's table: org/<org_id>/collections/<name> either way).
    column = {"name": "email", "type": "text", "description": "contact", "required": False, "unique": False}
    for body in ({"purpose": "leads we call"}, {"columns": [column]}, {"name": "leads"},
                 {"guild_id": guild}, {"guild_id": None}, {"name": "leads", "purpose": "both", "guild_id": guild}):
        r = operator.patch(url, json=body)
        assert r.status_code == 200, (body, r.text)
        assert r.json()["display_path"] == path
    # The single task's wording; once no task embeds it, the rename and then the delete go through.
    with db.transaction() as conn:
        tasks.write_task(conn, org, second["id"], "nothing", OP)
    r = operator.patch(url, json={"name": "prospects"})
    assert r.status_code == 409 and r.json()["error"].startswith(
        f"cannot rename the collection leads to prospects: the task {first_task} embeds it (![[{path}]])")
    with db.transaction() as conn:
        tasks.write_task(conn, org, boot["agent_id"], "nothing", OP)
    r = operator.patch(url, json={"name": "prospects"})
    assert r.status_code == 200 and r.json()["display_path"] == f"org/{org}/collections/prospects"
    with db.transaction() as conn:
        tasks.write_task(conn, org, boot["agent_id"], f"![[org/{org}/collections/prospects]]", OP)
    assert operator.delete(url).status_code == 409
    with db.transaction() as conn:
        tasks.write_task(conn, org, boot["agent_id"], "nothing", OP)
    assert operator.delete(url).status_code == 200
    # An embed inside a code span holds nothing: the table it names renames and deletes freely.
    free_url = f"{server.url}/api/collections/{free['id']}"
    assert operator.patch(free_url, json={"name": "free2"}).status_code == 200
    assert operator.delete(free_url).status_code == 200


def test_the_collection_embed_check_sees_a_task_saved_a_moment_earlier(db, boot) -> None:
    """A task save in flight that embeds the table holds its delete and its rename (each waits on
    the task's embed lock) until the save commits; each then sees the embed and is refused."""
    org, agent = boot["org_id"], boot["agent_id"]
    leads = _table(db, boot)
    path = f"org/{org}/collections/leads"
    member = _member(boot)
    outcome: dict[str, object] = {}

    def attempt(what: str, fn) -> None:
        try:
            fn()
            outcome[what] = "done"
        except Embedded as exc:
            outcome[what] = exc

    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, f"![[{path}]]", OP)
        threads = [threading.Thread(target=attempt, args=("delete", lambda: collections.delete_collection(
                                        db, member, leads["id"]))),
                   threading.Thread(target=attempt, args=("rename", lambda: collections.alter_collection(
                                        db, member, leads["id"], {"name": "prospects"})))]
        threads[0].start()
        wait_for_lock_waiters(db.conninfo, 1)  # the delete waits on the task's embed lock
        threads[1].start()
        wait_for_lock_waiters(db.conninfo, 2)  # the rename waits on the table's row lock the delete holds
        assert outcome == {}
    for t in threads:
        t.join(10)
    assert isinstance(outcome["delete"], Embedded) and isinstance(outcome["rename"], Embedded)
    assert outcome["delete"].tasks == [f"org/{org}/agents/{agent}/task.md"]
    with db.connection() as conn:
        assert collections.get_collection(conn, org, leads["id"]).name == "leads"

