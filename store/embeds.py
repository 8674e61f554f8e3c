"""Embeds: ``![[display-path]]`` in a task, found with markdown-it-py and expanded for State.

An embed is found by our own inline rule, registered before markdown-it's ``link`` rule, so the
parser decides what is code: an embed inside a code span, a fenced or indented code block or an
HTML block is text, not an embed, and ``\\![[x]]`` (an escaped bang) is not one either.

Public functions:

``find_embeds(markdown) -> list[str]``
    The display paths a text embeds, NFC, in document order, each once.
``lock_for_task(conn, paths)`` / ``lock_for_removal(conn, paths)``
    Transaction-level advisory locks keyed on each embedded path: a task save takes them shared,
    a note delete or move, and a collection delete or rename (store.collections), exclusive, so
    the two serialise and the delete's check always sees a task committed a moment earlier (the
    check runs after the lock, in a fresh READ COMMITTED snapshot).
``embedding_tasks(conn, display_path) -> list[str]``
    The task display paths of the live tasks that embed a note or a collection (call after
    ``lock_for_removal``).
``private_embed_problems(org_id, paths) -> list[str]``
    One problem per embed of a memory (any agent's, or an earlier version of one): memory is
    private, so a task save refuses them (store.tasks) with what a task can embed instead.
``reach_problems(conn, org_id, agent_id, paths) -> list[str]``
    One problem per embed of a note the task's agent may never read: another agent's own note, or
    a note of a guild other than its own. A task save refuses them (store.tasks).
``embed_choices(conn, agent, tables, find, limit) -> (paths, more)`` / ``may_embed(conn, agent, tables, path)``
    What the task editor's Insert box offers, and whether a path typed whole is one of them: the
    tables the agent reaches and the live notes its task may embed (the same rule as
    ``reach_problems``: its own, its guild's, the organisation's), so the box never offers what a
    save refuses.
``expand_task(conn, agent, task) -> str``
    The task with note embeds inlined (their body and one nested hop), collection embeds turned
    into the table's name, within the 64 KB embed budget, spent in document order: an embed is
    inlined whole or not at all, and the first that does not fit is the cut, marked, with every
    embed after it marked as not inlined (never half a note, never a raw ![[...]]). Missing,
    unreadable or over-budget targets become a visible marker in square brackets, never an error. A memory embed (a task
    saved before the save-time rule) becomes a Markdown link to it and is never inlined. Inlining
    is the operator's choice within what the agent's place allows: its own notes, its guild's and
    the organisation's, whatever its four note grants say (it does not grant note_get either).
    Another agent's own note, or another guild's, is never inlined into a task, at either depth:
    the spec's "no agent reads another guild's guild-level notes", and a note an agent writes could
    otherwise pull one into another agent's task through the nested hop (a marker instead).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from store.agents import Agent
from store.db import Conn, like_escape
from store.paths import Target, nfc, parse, task_path
from store.errors import StoreError

EMBED_BUDGET = 65_536  # bytes of UTF-8 inlined into one task, nested hops included
# Advisory-lock namespace (first key of the two-int form): "EMB".
_LOCK_NS = 0x454D42
# What can sit between ![[ and ]]: one line, no brackets and no backtick (a backtick would make
# the candidate's extent depend on code-span parsing).
_INNER = r"[^\[\]\n`]+"
_CANDIDATE = re.compile(r"!\[\[(" + _INNER + r")\]\]")
_INNER_RE = re.compile(_INNER)


def _embed_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    if not src.startswith("![[", pos):
        return False
    end = src.find("]]", pos + 3)
    if end < 0 or not _INNER_RE.fullmatch(src, pos + 3, end):
        return False
    if not silent:
        token = state.push("embed", "", 0)
        token.content = src[pos + 3:end]
    state.pos = end + 2
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable("table")
    md.inline.ruler.before("link", "embed", _embed_rule)
    return md


_MD = _parser()


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    path: str


def _spans(markdown: str) -> list[_Span]:
    """Where the real embeds are in ``markdown``. Each regex candidate's inner text is replaced by
    its index before parsing, so the parser's tokens say which candidates are embeds while the
    text around them (what decides code spans and blocks) is unchanged."""
    candidates = list(_CANDIDATE.finditer(markdown))
    if not candidates:
        return []
    parts, last = [], 0
    for i, m in enumerate(candidates):
        parts.append(markdown[last:m.start(1)])
        parts.append(str(i))
        last = m.end(1)
    parts.append(markdown[last:])
    real: set[int] = set()
    for block in _MD.parse("".join(parts)):
        for tok in block.children or ():
            if tok.type == "embed" and tok.content.isdigit():
                real.add(int(tok.content))
    return [_Span(m.start(), m.end(), nfc(m.group(1).strip())) for i, m in enumerate(candidates) if i in real]


def find_embeds(markdown: str) -> list[str]:
    """The display paths ``markdown`` embeds, in order, each once. Code spans and blocks do not count."""
    seen: dict[str, None] = {}
    for span in _spans(markdown):
        seen.setdefault(span.path, None)
    return list(seen)


def _lock(conn: Conn, paths: Iterable[str], fn: str) -> None:
    keys = sorted({nfc(p) for p in paths})  # one order everywhere, so two lockers never deadlock
    if keys:
        conn.execute(f"SELECT {fn}(%s, hashtext(p)) FROM unnest(%s::text[]) AS p ORDER BY p",
                     (_LOCK_NS, keys))


def lock_for_task(conn: Conn, paths: Iterable[str]) -> None:
    """Shared locks on the paths a task being saved embeds (see the module docstring)."""
    _lock(conn, paths, "pg_advisory_xact_lock_shared")


def lock_for_removal(conn: Conn, paths: Iterable[str]) -> None:
    """Exclusive locks on notes about to be deleted or moved away, or collections about to be
    deleted or renamed (see the module docstring)."""
    _lock(conn, paths, "pg_advisory_xact_lock")


def expand_embeds(conn: Conn, org_id: int, text: str) -> str:
    """Any Markdown of organisation ``org_id`` with its embeds expanded as State expands a task
    (``expand_task``), for the notes browser: the operator's view, who reads every note of the
    organisation, so no agent's place limits it (a run sees another agent's or guild's note as a
    marker: ``reach_problems``)."""
    return _expand(conn, org_id, text, None)[0]


def embedding_tasks(conn: Conn, display_path: str) -> list[str]:
    """Display paths of the live tasks of the path's organisation that embed ``display_path`` (a
    note's or a collection's).
    SQL narrows by substring (trigram index); markdown-it confirms, so an embed in code is ignored."""
    path = nfc(display_path)
    try:
        org_id = parse(path).org_id
    except StoreError:
        return []
    pattern = "%" + like_escape(path) + "%"
    # (Tasks are kept as typed, NFD too: the NFC form is what is compared, by sql/090's index.)
    rows = conn.execute("SELECT id, task FROM agents WHERE org_id = %s AND normalize(task, NFC) LIKE %s"
                        " ORDER BY id", (org_id, pattern)).fetchall()
    return [task_path(org_id, r["id"]) for r in rows if path in find_embeds(r["task"])]


_PRIVATE = {"memory": "an agent's memory", "history": "an earlier version of an agent's memory"}


def _embeddable(org_id: int) -> str:
    return (f"a task embeds notes (org/{org_id}/<note>.md, org/{org_id}/guilds/<guild_id>/<note>.md, "
            f"org/{org_id}/agents/<agent_id>/<note>.md) and collections (org/{org_id}/collections/<name>)")


def _beyond_reach(target: Target, agent_id: int, guild_id: int | None) -> str | None:
    """Why the agent ``agent_id`` of guild ``guild_id`` may never read the note ``target``
    (another agent's own note, another guild's), or None when its task may inline it."""
    if target.family != "note":
        return None
    if target.level == "agent" and target.owner_id != agent_id:
        return f"is agent {target.owner_id}'s own note, which agent {agent_id} never reads"
    if target.level == "guild" and target.owner_id != guild_id:
        return (f"is a note of guild {target.owner_id}, and agent {agent_id} is in guild {guild_id}: "
                "no agent reads another guild's notes")
    return None


def reach_problems(conn: Conn, org_id: int, agent_id: int, paths: Iterable[str]) -> list[str]:
    """One sentence per embedded note the task of agent ``agent_id`` may never read, with what it
    can embed instead (the agent's guild is read only when it embeds an agent's or guild's note)."""
    targets = []
    for path in paths:
        try:
            target = parse(path)
        except StoreError:
            continue  # (not a display path: the expansion's marker says so)
        if target.family == "note" and target.org_id == org_id and target.level != "org":
            targets.append((path, target))
    if not targets:
        return []
    row = conn.execute("SELECT guild_id FROM agents WHERE id = %s AND org_id = %s", (agent_id, org_id)).fetchone()
    if row is None:
        return []  # (no such agent: the save says so)
    guild_id = row["guild_id"]
    where = (f"a task embeds its agent's own notes (org/{org_id}/agents/{agent_id}/<note>.md), its guild's "
             f"(org/{org_id}/guilds/{guild_id}/<note>.md), the organisation's (org/{org_id}/<note>.md) and "
             f"collections (org/{org_id}/collections/<name>); a note for several guilds belongs at the "
             "organisation's level")
    out = []
    for path, target in targets:
        why = _beyond_reach(target, agent_id, guild_id)
        if why:
            out.append(f"![[{path}]] {why}; {where}")
    return out


def embed_choices(conn: Conn, agent: Agent, tables: Sequence[str], find: str = "",
                  limit: int = 50) -> tuple[list[str], bool]:
    """What the task editor offers to embed (the spec's Insert table and Insert note), those whose
    display path holds ``find`` (any case) when it is given: ``tables`` (the display paths of the
    tables the agent reaches), then the notes of the scopes its task may embed (``_beyond_reach``
    refuses the others), the organisation's, its guild's and its own, each by name; at most
    ``limit`` of them, and whether there are more. One query for the notes, reading at most
    ``limit`` of each scope."""
    from store import notes  # (store.notes imports this module)
    folded = find.casefold()
    found = [t for t in tables if folded in t.casefold()]
    owners = notes.first_notes(conn, agent.org_id, guild_ids=_reached(agent, "guild"),
                               agent_ids=_reached(agent, "agent"), limit=limit, find=find, in_path=True)
    paths, total = list(found), len(found)
    for owner in owners:  # the organisation, the guild, the agent: first_notes's order
        paths += [n["display_path"] for n in owner["notes"]]
        total += owner["count"]
    return paths[:limit], total > limit


def _reached(agent: Agent, level: str) -> list[int]:
    """The owner of ``level`` (guild, agent) whose notes ``agent``'s task may embed, asked of
    ``_beyond_reach`` so the offer follows the save's rule."""
    owner = agent.guild_id if level == "guild" else agent.id
    probe = Target("note", agent.org_id, level, owner, "")  # type: ignore[arg-type]
    return [] if _beyond_reach(probe, agent.id, agent.guild_id) else [owner]


def may_embed(conn: Conn, agent: Agent, tables: Sequence[str], path: str) -> bool:
    """Whether ``path`` (as typed) is one of ``tables`` (the display paths of the tables the agent
    reaches) or a live note ``agent``'s task may embed (its own, its guild's or the organisation's,
    as ``reach_problems`` decides for a save): what the Insert box takes when it was typed whole."""
    if path in tables:
        return True
    try:
        target = parse(path)
    except StoreError:
        return False
    if target.family != "note" or target.org_id != agent.org_id or _beyond_reach(target, agent.id, agent.guild_id):
        return False
    live = _targets(conn, agent.org_id, [target.path])
    return live.get(target.path, ("",))[0] == "note"


def _private_family(path: str) -> str | None:
    try:
        family = parse(path).family
    except StoreError:
        return None
    return family if family in _PRIVATE else None


def private_embed_problems(org_id: int, paths: Iterable[str]) -> list[str]:
    """One sentence per embedded path that is a memory or a memory's earlier version."""
    out = []
    for path in paths:
        family = _private_family(path)
        if family is not None:
            out.append(f"![[{path}]]: {_PRIVATE[family]} is private and cannot be embedded; {_embeddable(org_id)}")
    return out


# ---------------------------------------------------------------------------------------------
# Expansion for State


def _marker(text: str) -> str:
    return f"[{text}]"


class _Budget:
    """The 64 KB an expansion may inline, spent in document order. An embed is inlined whole or
    not at all: the first that does not fit is the cut, and nothing after it is inlined, so State
    never shows half a note or an embed left raw."""

    def __init__(self, total: int) -> None:
        self.left = total
        self.cut = False

    def fits(self, size: int) -> bool:
        """Spend ``size`` bytes if they fit and nothing was cut yet; otherwise make (or keep) the cut."""
        if not self.cut and size <= self.left:
            self.left -= size
            return True
        self.cut = True
        return False


def _size(text: str, spans: list[_Span]) -> int:
    """The UTF-8 bytes ``text`` inlines by itself: its embeds' raw ![[...]] text is left out, since
    each embed is shown as its own inlined body or marker instead."""
    size, last = 0, 0
    for span in spans:
        size += len(text[last:span.start].encode("utf-8"))
        last = span.end
    return size + len(text[last:].encode("utf-8"))


def _targets(conn: Conn, org_id: int, paths: list[str]) -> dict[str, tuple[str, str]]:
    """path -> (kind, text): a note's body, or a collection's name; one query. Memory is never
    read here: it is private, and an embed of it is only ever a link."""
    if not paths:
        return {}
    rows = conn.execute(
        """SELECT display_path AS path, 'note' AS kind, coalesce(content, '') AS text
             FROM artifacts
            WHERE display_path = ANY(%(paths)s) AND org_id = %(org)s AND deleted_at IS NULL
              AND kind = 'note'
           UNION ALL
           SELECT 'org/' || org_id || '/collections/' || name, 'collection', name
             FROM artifact_collections
            WHERE org_id = %(org)s AND deleted_at IS NULL
              AND 'org/' || org_id || '/collections/' || name = ANY(%(paths)s)""",
        {"paths": paths, "org": org_id}).fetchall()
    return {r["path"]: (r["kind"], r["text"]) for r in rows}


def _unreadable(org_id: int, path: str, reader: Agent | None) -> str | None:
    """Why ``path`` is not something an embed can show to ``reader`` (None: the operator), or
    None when it may be."""
    try:
        target = parse(path)
    except StoreError:
        return f"embed unreadable: {path} is not a display path"
    if target.org_id != org_id:
        return f"embed unreadable: {path} belongs to another organisation"
    if target.family in ("note", "collection"):
        why = _beyond_reach(target, reader.id, reader.guild_id) if reader is not None else None
        return f"embed unreadable: {path} {why}" if why else None
    return f"embed unreadable: {path} is a {target.family}; only notes and collections are embedded"


def task_embed_problems(conn: Conn, agent: Agent, task: str) -> list[str]:
    """Each embed of ``task`` that a run will see as a marker instead of its content (missing, not
    something an embed shows, or past the 64 KB budget; in the task or in a note it inlines), in
    the markers' own words, each once, so a save can say so at once. Taken from the expansion
    itself, so the warning and State never disagree. A nested note's own embeds, left unexpanded
    by design, and memory embeds (a save refuses them: private_embed_problems) are not problems."""
    return list(dict.fromkeys(_expand(conn, agent.org_id, task, agent)[1]))


def expand_task(conn: Conn, agent: Agent, task: str) -> str:
    """The task as State shows it (see the module docstring for the rules and markers)."""
    return _expand(conn, agent.org_id, task, agent)[0]


def _expand(conn: Conn, org_id: int, task: str, reader: Agent | None) -> tuple[str, list[str]]:
    """(the expanded task, the text of each marker that stands in for content a run will not see);
    ``reader``: the agent whose task it is, or None for the operator's view of a note."""
    budget = _Budget(EMBED_BUDGET)
    problems: list[str] = []
    first = _spans(task)
    if not first:
        return task, problems
    bodies = _targets(conn, org_id, list({s.path for s in first}))
    nested: dict[str, list[_Span]] = {p: _spans(text) for p, (kind, text) in bodies.items() if kind == "note"}
    second_paths = list({s.path for spans in nested.values() for s in spans} - set(bodies))
    bodies.update(_targets(conn, org_id, second_paths))

    def render(text: str, spans: list[_Span], embed: Callable[[str], str]) -> str:
        out, last = [], 0
        for span in spans:
            out.append(text[last:span.start])
            last = span.end
            out.append(embed(span.path))
        out.append(text[last:])
        return "".join(out)

    def lost(why: str) -> str:
        problems.append(why)
        return _marker(why)

    def one(path: str, depth: int) -> str:
        if _private_family(path) is not None:
            return f"[{path}]({path})"
        why = _unreadable(org_id, path, reader)
        if why:
            return lost(why)
        if path not in bodies:
            return lost(f"embed missing: {path} does not exist")
        kind, text = bodies[path]
        if kind == "collection":
            return text
        if budget.cut:
            return lost(f"embed budget of 64 KB used up: {path} not inlined")
        spans = nested[path] if path in nested else _spans(text)
        if not budget.fits(_size(text, spans)):
            return lost(f"embed budget of 64 KB reached: {path} ({len(text.encode('utf-8'))} bytes) is not "
                        "inlined, nor any embed after it")
        if depth == 1:
            return render(text, spans, lambda p: one(p, 2))
        # The nested hop: its own embeds stay unexpanded, visibly.
        return render(text, spans, lambda p: _marker(f"embed not expanded: {p}; only one nested level is inlined"))

    return render(task, first, lambda p: one(p, 1)), problems
