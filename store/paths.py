"""Display paths: the one vocabulary of names shared by the tools, the Host tree and provenance.

    org/<org_id>/<note>.md                               organisation note
    org/<org_id>/guilds/<guild_id>/<note>.md             guild note
    org/<org_id>/agents/<agent_id>/task.md               the standing task (agents.task)
    org/<org_id>/agents/<agent_id>/memory.md             the memory artifact
    org/<org_id>/agents/<agent_id>/<note>.md             agent note
    org/<org_id>/agents/<agent_id>/scripts/<name>        agent script
    org/<org_id>/agents/<agent_id>/history-archive/<stamp>-<source>.md
    org/<org_id>/collections/<name>                      a collection
    org/<org_id>/collections/<name>/<id>                 a record

Parsing never touches the database: it says what a path would name, and the modules that own
each family decide whether it exists and who may reach it.
"""
from __future__ import annotations

import fnmatch
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from store.errors import Invalid, NotFound

Level = Literal["agent", "guild", "org"]
LEVELS: tuple[Level, ...] = ("agent", "guild", "org")

RESERVED_AGENT_KEYS = frozenset({"task.md", "memory.md"})
MAX_KEY_LENGTH = 255

# A script is sandbox Python: a plain file name ending in .py, so that editors' side files and
# notes can never be taken for one.
# Every name rule is anchored with \Z, not $: "$" also matches before a trailing newline, which
# would let "x.py\n" pass as a script name. ASCII digits only: str.isdigit() and \d also take
# "²" or "١", which would give one file a second, differently spelled path.
SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,124}\.py\Z")
COLLECTION_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
HISTORY_NAME = re.compile(r"^([0-9]{8}T[0-9]{6}(?:[0-9]{6})?Z)-([a-z0-9][a-z0-9-]{0,40})\.md\Z")
# An id segment: a canonical decimal of at most 18 digits, so it always fits a bigint.
_ID = re.compile(r"^[1-9][0-9]{0,17}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# C1 controls and the line and paragraph separators: none is visible in a file list, and each
# breaks a name across lines (U+0085 is NEL, a newline too) in listings, logs and headers. Refused
# for new names only (new_note_problem): notes named so before the rule stay readable and movable.
_INVISIBLE = re.compile(r"[\x80-\x9f\u2028\u2029]")
# Characters a file list does not show, or that reorder the letters around them: a zero-width
# space makes "task\u200b.md" read as task.md, and a right-to-left override makes
# "x\u202etxt.md" read as "xdm.txt". The joiners U+200C and U+200D are left alone: Persian,
# Indic scripts and emoji sequences need them. Refused for new names only, as _INVISIBLE.
_UNSEEN = re.compile(r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b\u200e\u200f\u202a-\u202e"
                     r"\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0\ufff9-\ufffb]")
# Linux file systems, and so a FUSE mount or davfs2, take at most 255 bytes in one name: a key
# longer in UTF-8 (200 accented letters are 400 bytes) could be listed but never opened there.
MAX_KEY_BYTES = 255


def nfc(text: str) -> str:
    """Finder sends names in NFD; every lookup and every stored key is NFC."""
    return unicodedata.normalize("NFC", text)


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot be a note key, or None when it can. A key is one .md file name."""
    if not isinstance(key, str) or not key:
        return "a note key is a file name ending in .md, such as findings.md"
    # The key is stored NFC, so every rule (the length above all: NFC can lengthen a key) applies
    # to that form.
    key = nfc(key)
    if "/" in key:
        return (f"the key {key!r} contains a '/': notes are flat, so a key is one file name "
                "ending in .md with no folder, such as findings.md")
    if "\\" in key:
        return (f"the key {key!r} contains a '\\': Windows reads it as a folder separator, and notes are "
                "flat, so a key is one file name ending in .md with no folder, such as findings.md")
    if key == ".md":
        return "the key '.md' has no name before .md: a note key is a Markdown file name such as findings.md"
    if not key.endswith(".md"):
        return f"the key {key!r} does not end in .md: a note key is a Markdown file name such as findings.md"
    if key.startswith("."):
        return f"the key {key!r} starts with a dot: a note key is a visible file name such as findings.md"
    if _CONTROL.search(key):
        return (f"the key {key!r} contains a control character or a line break: a note key is one line "
                "of visible characters ending in .md, such as findings.md")
    if len(key) > MAX_KEY_LENGTH:
        return f"the key is {len(key)} characters long; at most {MAX_KEY_LENGTH} are allowed"
    return None


def side_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be given to a new note or script, or None: WebDAV and the mount take it
    for an editor's or a program's side file (is_side_file) and keep it in the user's scratch
    area, so a note under it would be listed there but never read, saved or deleted through them.
    Checked where a name is given (a note or script written anew, a rename), not where one is
    read: a note that already has such a name stays readable and removable."""
    if not is_side_file(nfc(name)):
        return None
    example = "summary.py" if name.endswith(".py") else "summary.md"
    return (f"the name {name!r} has the form editors and programs give their temporary, backup and lock "
            "files (tmp and 8 letters or digits, ~$name, name.md.tmp.x, name.md.sb-x), which file clients "
            f"keep out of the notes; choose another name, such as {example}")


def diverged_copy_path(path: str, when: datetime | None = None) -> str:
    """Where a front end keeps text it could not save over ``path`` because the file changed
    meanwhile (the mount's save that waited out an outage): beside it, named
    ``<stem>-conflicted-copy-<UTC stamp><ext>``, which is a note's and a script's name alike."""
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    suffix = f"-conflicted-copy-{stamp}" + (f".{ext}" if dot else "")
    room = MAX_KEY_BYTES - len(suffix.encode())
    name = stem.encode()[:room].decode(errors="ignore")[:MAX_KEY_LENGTH - len(suffix)] + suffix
    return f"{folder}/{name}" if folder else name


def lookalike_problem(key: str, level: Level) -> str | None:
    """Why an agent note may not be given ``key``, or None: it differs from task.md or memory.md
    only in case, width or surrounding spaces. Finder and Windows Explorer do not tell such names
    apart, so the note and the memory would show as one file, and renaming one to the other's
    spelling is a move onto the memory. Checked where a name is given, as side_name_problem."""
    if level != "agent" or key in RESERVED_AGENT_KEYS:
        return None
    folded = unicodedata.normalize("NFKC", key).casefold().strip()
    if folded not in RESERVED_AGENT_KEYS:
        return None
    return (f"the key {key!r} differs from the reserved {folded} only in case, width or spaces; Finder "
            "and Windows Explorer, which do not tell such names apart, would show the two as one file; "
            "choose another key, such as notes.md")


def new_note_problem(key: str, level: Level) -> str | None:
    """Why a note may not be created under (or renamed to) ``key``, or None: see
    side_name_problem, lookalike_problem and invisible_name_problem."""
    return side_name_problem(key) or lookalike_problem(key, level) or invisible_name_problem(key)


def invisible_name_problem(key: str) -> str | None:
    """A name no one can read in a file list: blank before .md, holding a C1 control, a line or
    paragraph separator, or a character a list does not show; or one a Linux client cannot open,
    longer than 255 bytes. A rule for new names (a note named so before it is still a note)."""
    key = nfc(key)
    if key.endswith(".md") and not key[:-3].strip():
        return (f"the key {key!r} has no name before .md: a note key is a Markdown file name "
                "such as findings.md")
    if key[:1].isspace():
        # Finder, Explorer and ls show a leading space as nothing: " plan.md" reads as plan.md,
        # and the web app's form, which trims what is typed, could never name it.
        return (f"the key {key!r} starts with a space, which a file list does not show, so the name "
                "would read as another; remove it")
    if _INVISIBLE.search(key):
        return (f"the key {key!r} contains a control character or a line break: a note key is one line "
                "of visible characters ending in .md, such as findings.md")
    if (unseen := _UNSEEN.search(key)) is not None:
        char = unseen.group()
        return (f"the key {key!r} contains U+{ord(char):04X} ({unicodedata.name(char, 'a format character')}), "
                "which a file list does not show or which reorders the letters around it, so the name "
                "would read as another; remove it")
    if (size := len(key.encode())) > MAX_KEY_BYTES:
        return (f"the key is {size} bytes long in UTF-8; file systems and file clients take at most "
                f"{MAX_KEY_BYTES} bytes in a name (about 127 accented or 85 CJK characters); choose a shorter key")
    return None


def refuse_name(problem: str | None) -> None:
    """Invalid with ``problem`` when there is one (the rename checks of notes and scripts)."""
    if problem is not None:
        raise Invalid(problem, [problem])


def check_note_key(key: object, level: Level) -> str:
    """The NFC key, or Invalid saying why it cannot name a note at ``level``."""
    problem = key_problem(key)
    if problem:
        raise Invalid(problem, [problem])
    key = nfc(key)  # type: ignore[arg-type]
    if level == "agent" and key in RESERVED_AGENT_KEYS:
        # Read by operators (a new note in the web app) and by agents naming the path (note_get,
        # note_delete), so each one's way is named; note_write gives agents a sentence of their own.
        what = ("the agent's memory: the agent keeps it with memory_write, and people open it as memory.md "
                "in the agent's folder"
                if key == "memory.md" else
                "the agent's standing task: the operator edits it on the agent's State page, or as task.md "
                "in the agent's folder")
        msg = (f"the key {key!r} is reserved at the agent root ({' and '.join(sorted(RESERVED_AGENT_KEYS))}) for "
               f"{what}; choose another key for a note")
        raise Invalid(msg, [msg])
    return key


# ---------------------------------------------------------------------------------------------
# Formatting

def parent_of(path: str) -> str:
    """A tree path's folder: 'org/1/plan.md' -> 'org/1'; 'org' -> '' (the root); '' -> ''."""
    return path.rsplit("/", 1)[0] if "/" in path else ""


def ancestors(path: str) -> list[str]:
    """Every folder above a tree path, from the root "": 'org/1/x.md' -> ['', 'org', 'org/1']."""
    parts = path.split("/") if path else []
    return ["/".join(parts[:i]) for i in range(len(parts))]


def owner_prefix(org_id: int, level: Level, owner_id: int | None = None) -> str:
    if level == "org":
        return f"org/{org_id}/"
    if level == "guild":
        return f"org/{org_id}/guilds/{owner_id}/"
    return f"org/{org_id}/agents/{owner_id}/"


def note_path(org_id: int, level: Level, owner_id: int | None, key: str) -> str:
    return owner_prefix(org_id, level, owner_id) + key


def task_path(org_id: int, agent_id: int) -> str:
    return f"org/{org_id}/agents/{agent_id}/task.md"


def memory_path(org_id: int, agent_id: int) -> str:
    return f"org/{org_id}/agents/{agent_id}/memory.md"


def script_path(org_id: int, agent_id: int, name: str) -> str:
    return f"org/{org_id}/agents/{agent_id}/scripts/{name}"


def history_path(org_id: int, agent_id: int, name: str) -> str:
    return f"org/{org_id}/agents/{agent_id}/history-archive/{name}"


def collection_path(org_id: int, name: str) -> str:
    return f"org/{org_id}/collections/{name}"


def record_path(org_id: int, collection: str, record_id: int) -> str:
    return f"org/{org_id}/collections/{collection}/{record_id}"


# ---------------------------------------------------------------------------------------------
# Parsing

Family = Literal["note", "task", "memory", "script", "history", "collection", "record"]


@dataclass(frozen=True)
class Target:
    """What a display path names. ``owner_id`` is the agent or guild id for agent- and guild-level
    paths; ``name`` is the note key, script name, history file, collection name."""

    family: Family
    org_id: int
    level: Level
    owner_id: int | None
    name: str
    record_id: int | None = None

    @property
    def path(self) -> str:
        if self.family == "collection":
            return collection_path(self.org_id, self.name)
        if self.family == "record":
            return record_path(self.org_id, self.name, self.record_id or 0)
        if self.family == "script":
            return script_path(self.org_id, self.owner_id or 0, self.name)
        if self.family == "history":
            return history_path(self.org_id, self.owner_id or 0, self.name)
        return note_path(self.org_id, self.level, self.owner_id, self.name)


def is_id(value: object) -> bool:
    """Whether a JSON value is an id: a whole number (not a boolean) that fits a bigint id."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def parse_id(text: str) -> int | None:
    """The id an id segment of a path names, or None: only the canonical ASCII decimal (no
    leading zero, no sign, no other digits), so each id has exactly one spelling."""
    return int(text) if _ID.fullmatch(text) else None


def parse(path: object) -> Target:
    """Parse a display path. Raises NotFound for anything that is not one (a display path names
    something or nothing; there is no 'malformed' answer a model could act on differently)."""
    if not isinstance(path, str) or not path:
        raise Invalid("path must be a display path such as org/1/agents/2/notes.md",
                      ["path: expected a display path string"])
    raw = nfc(path.strip()).strip("/")
    parts = raw.split("/")
    unknown = NotFound(f"unknown path {path}: no note, task, memory, script or record has that display path")
    if len(parts) < 3 or parts[0] != "org" or (org_id := parse_id(parts[1])) is None:
        raise unknown
    rest = parts[2:]
    if len(rest) == 1 and rest[0] not in ("agents", "guilds", "collections"):
        return Target("note", org_id, "org", None, rest[0])
    head = rest[0]
    if head == "guilds" and len(rest) == 3 and (gid := parse_id(rest[1])) is not None:
        return Target("note", org_id, "guild", gid, rest[2])
    if head == "agents" and len(rest) >= 3 and (aid := parse_id(rest[1])) is not None:
        if len(rest) == 3:
            name = rest[2]
            family: Family = "task" if name == "task.md" else "memory" if name == "memory.md" else "note"
            return Target(family, org_id, "agent", aid, name)
        if len(rest) == 4 and rest[2] == "scripts":
            return Target("script", org_id, "agent", aid, rest[3])
        if len(rest) == 4 and rest[2] == "history-archive":
            return Target("history", org_id, "agent", aid, rest[3])
    if head == "collections" and len(rest) in (2, 3) and COLLECTION_NAME.fullmatch(rest[1]):
        if len(rest) == 2:
            return Target("collection", org_id, "org", None, rest[1])
        rid = parse_id(rest[2].removesuffix(".json"))
        if rid is not None:
            return Target("record", org_id, "org", None, rest[1], rid)
    raise unknown


# ---------------------------------------------------------------------------------------------
# Clients' side files: names that editors and file managers write beside the files they touch.
# They are accepted into the per-user scratch area and never become notes.

SIDE_FILE_PATTERNS: tuple[str, ...] = (
    "._*", ".DS_Store", ".localized", "Thumbs.db", "desktop.ini", "~$*", ".~lock.*#", "*.swp", "*.swx",
    "*.swo", ".*.sw?", "*~", "4913", "*.tmp", ".goutputstream-*", ".sb-*", "*.vsctmp", ".#*", "#*#",
    "*.crdownload", ".fuse_hidden*", ".nfs*", ".Spotlight-V100", ".Trashes", ".fseventsd",
    ".TemporaryItems", ".apdisk", "*.bak", "*.orig", ".*.kate-swp", "*.part", ".~*", "~*.tmp",
    "*.md.tmp.*", ".*.tmp", ".*.md.*", "*.md.sb-*",
)
_SIDE_RE = re.compile("|".join(fnmatch.translate(p) for p in SIDE_FILE_PATTERNS))
# vim probes whether it may write in a folder with numbered names 4913, 5036, 5159, ... (4913 + k*123).
_VIM_PROBE = re.compile(r"^\d{4,5}$")
# GNU sed -i writes its output to sedXXXXXX (mkostemp) in the file's folder, then renames it over.
_SED_TEMP = re.compile(r"^sed[A-Za-z0-9]{6}$")


# Python's tempfile (mkstemp, NamedTemporaryFile, and atomicwrites and the other libraries built on
# them) names a file "tmp" + 8 characters of [a-z0-9_], with whatever suffix the caller chose.
# Only names with a digit among the 8: people name notes tmp_summary.md or tmp_backlog.md, which
# WebDAV and the mount would keep as side files (a day in scratch, never seen by agents). The
# 8 % of Python's names that draw no digit and carry a .md suffix become notes for a moment, which
# an editor's rename over the note handles as any temporary .md name (the note's next version).
_PY_TEMP = re.compile(r"^tmp(?=[a-z_]*[0-9])[a-z0-9_]{8}(\..*)?$")
# A name without an extension (or with only a leading dot) is not a note and not a document of
# another kind: a program's temporary or helper file (atomicwrites' .___atomic_writeXXXX, git's
# index.lock-style names...). A name with another extension (.txt, .png, .pdf) is a document a
# person meant to store, and stays refused with a sentence saying why.
_NO_EXTENSION = re.compile(r"^\.?[^.]+$")


def is_side_file(name: str) -> bool:
    """True for an editor's, program's or file manager's side file (._x, .DS_Store, x.swp, x~,
    4913, tmpab12cd34, names without an extension...). The caller rules out names of layout
    folders (org/1/agents/2 is a folder, not a side file)."""
    if _SIDE_RE.fullmatch(name) or _PY_TEMP.match(name) or _NO_EXTENSION.match(name):
        return True
    if _VIM_PROBE.match(name) and (int(name) - 4913) % 123 == 0:
        return True
    if _SED_TEMP.match(name):
        return True
    return False
