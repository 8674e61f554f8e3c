"""Embeds: ``![[display-path]]`` in a task, found with markdown-it-py and expanded for State.

An embed is found by our own inline rule, registered before markdown-it's ``link`` rule, so the
parser decides what is code: an embed inside a code span, a fenced or indented code block or an
HTML block is text, not an embed, and ``\\![[x]]`` (an escaped bang) is not one either.

Public functions:

``find_embeds(markdown) -> list[str]``
    The display paths a text embeds, NFC, in document order, each once.
``lock_for_task(conn, paths)`` / ``lock_for_removal(conn, paths)``
    Transaction-level advisory locks keyed on each embedded path: a task save takes them shared,
    a note delete or move exclusive, so the two serialise and the delete's check always sees a
    task committed a moment earlier (the check runs after the lock, in a fresh READ COMMITTED
    snapshot).
``embedding_tasks(conn, display_path) -> list[str]``
    The task display paths of the live tasks that embed a note (call after ``lock_for_removal``).
``expand_task(conn, agent, task) -> str``
    The task with note embeds inlined (their body and one nested hop), collection embeds turned
    into the table's name, within the 64 KB embed budget. Missing, unreadable or over-budget
    targets become a visible marker in square brackets, never an error. Inlining is the operator's
    choice: it does not depend on, or grant, the agent's note grants.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline

from store.agents import Agent
from store.db import Conn, like_escape
from store.paths import nfc, parse, task_path
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
    """Exclusive locks on notes about to be deleted or moved away (see the module docstring)."""
    _lock(conn, paths, "pg_advisory_xact_lock")


def expand_embeds(conn: Conn, org_id: int, text: str) -> str:
    """Any Markdown of organisation ``org_id`` with its embeds expanded exactly as State expands a
    task (``expand_task``), so the notes browser shows a note's embeds the way a run will see them.
    The expansion depends only on the organisation (inlining does not depend on the agent's
    grants), so no real agent is needed: the stand-in carries the organisation alone."""
    return expand_task(conn, Agent(id=0, org_id=org_id, guild_id=0, name=""), text)


def embedding_tasks(conn: Conn, display_path: str) -> list[str]:
    """Display paths of the live tasks of the path's organisation that embed ``display_path``.
    SQL narrows by substring (trigram index); markdown-it confirms, so an embed in code is ignored."""
    path = nfc(display_path)
    try:
        org_id = parse(path).org_id
    except StoreError:
        return []
    pattern = "%" + like_escape(path) + "%"
    rows = conn.execute("SELECT id, task FROM agents WHERE org_id = %s AND task LIKE %s ORDER BY id",
                        (org_id, pattern)).fetchall()
    return [task_path(org_id, r["id"]) for r in rows if path in find_embeds(r["task"])]


def embedding_tasks_many(conn: Conn, display_paths: Iterable[str]) -> dict[str, list[str]]:
    """``embedding_tasks`` for several paths: path -> embedding task paths (only paths that have some)."""
    out: dict[str, list[str]] = {}
    for path in display_paths:
        tasks = embedding_tasks(conn, path)
        if tasks:
            out[path] = tasks
    return out


# ---------------------------------------------------------------------------------------------
# Expansion for State


def _marker(text: str) -> str:
    return f"[{text}]"


class _Budget:
    def __init__(self, total: int) -> None:
        self.left = total

    def take(self, text: str) -> tuple[str, bool]:
        """As much of ``text`` as the budget allows, and whether it was cut."""
        data = text.encode("utf-8")
        if len(data) <= self.left:
            self.left -= len(data)
            return text, False
        cut = data[:self.left].decode("utf-8", errors="ignore")
        self.left = 0
        return cut, True


def _targets(conn: Conn, org_id: int, paths: list[str]) -> dict[str, tuple[str, str]]:
    """path -> (kind, text): a note or memory body, or a collection's name; one query."""
    if not paths:
        return {}
    rows = conn.execute(
        """SELECT display_path AS path, 'note' AS kind, coalesce(content, '') AS text
             FROM artifacts
            WHERE display_path = ANY(%(paths)s) AND org_id = %(org)s AND deleted_at IS NULL
              AND kind IN ('note', 'memory')
           UNION ALL
           SELECT 'org/' || org_id || '/collections/' || name, 'collection', name
             FROM artifact_collections
            WHERE org_id = %(org)s AND deleted_at IS NULL
              AND 'org/' || org_id || '/collections/' || name = ANY(%(paths)s)""",
        {"paths": paths, "org": org_id}).fetchall()
    return {r["path"]: (r["kind"], r["text"]) for r in rows}


def _unreadable(org_id: int, path: str) -> str | None:
    """Why ``path`` is not something an embed can show, or None when it may be."""
    try:
        target = parse(path)
    except StoreError:
        return f"embed unreadable: {path} is not a display path"
    if target.org_id != org_id:
        return f"embed unreadable: {path} belongs to another organisation"
    if target.family in ("note", "memory", "collection"):
        return None
    return f"embed unreadable: {path} is a {target.family}; only notes and collections are embedded"


def expand_task(conn: Conn, agent: Agent, task: str) -> str:
    """The task as State shows it (see the module docstring for the rules and markers)."""
    budget = _Budget(EMBED_BUDGET)
    first = _spans(task)
    if not first:
        return task
    bodies = _targets(conn, agent.org_id, list({s.path for s in first}))
    nested: dict[str, list[_Span]] = {p: _spans(text) for p, (kind, text) in bodies.items() if kind == "note"}
    second_paths = list({s.path for spans in nested.values() for s in spans} - set(bodies))
    bodies.update(_targets(conn, agent.org_id, second_paths))

    def render(text: str, spans: list[_Span], depth: int) -> str:
        out, last = [], 0
        for span in spans:
            out.append(text[last:span.start])
            last = span.end
            out.append(one(span.path, depth))
        out.append(text[last:])
        return "".join(out)

    def one(path: str, depth: int) -> str:
        why = _unreadable(agent.org_id, path)
        if why:
            return _marker(why)
        if path not in bodies:
            return _marker(f"embed missing: {path} does not exist")
        kind, text = bodies[path]
        if kind == "collection":
            return text
        if budget.left == 0:
            return _marker(f"embed budget of 64 KB used up: {path} not inlined")
        if depth == 2:
            # The nested hop: its own embeds stay unexpanded, visibly.
            spans = _spans(text)
            text = render_markers(text, spans)
        kept, cut = budget.take(text)
        if cut:
            return kept + _marker(f"embed budget of 64 KB reached: the rest of {path} is not inlined")
        if depth == 1:
            return render(kept, nested.get(path, []), 2)
        return kept

    def render_markers(text: str, spans: list[_Span]) -> str:
        out, last = [], 0
        for span in spans:
            out.append(text[last:span.start])
            out.append(_marker(f"embed not expanded: {span.path}; only one nested level is inlined"))
            last = span.end
        out.append(text[last:])
        return "".join(out)

    return render(task, first, 1)
