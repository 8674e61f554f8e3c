"""The store's errors: a small closed set, each carrying a sentence for a person and its problems.

Each protocol translates these in one table (api/errors.py for HTTP, the web app's pages included;
dav_provider/errors.py; fuse_mount/errors.py), as rclone's mount translates its VFS errors in one
switch; tests/test_error_tables.py checks that each names every class. The store never
names an HTTP status, a DAV status or an errno.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


class StoreError(Exception):
    """Base of every refusal the store gives. ``str(exc)`` is the sentence a person or a model reads:
    what was asked, why it was refused, and what would work."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.problems: list[str] = list(problems)

    @property
    def head(self) -> str:
        """The sentence's first line: what a page shows above the problems it lists itself
        (``rejected`` puts each problem on a line of its own after it)."""
        return self.message.split("\n", 1)[0]


# Problems one answer lists. "Every problem at once" is for a person or a model mending a body;
# a body of 100 000 unknown keys (2 MB) listed line by line answered with 32 MB, which a client
# that does not read held a worker with.
MAX_LISTED = 100


def at_most_listed(problems: list[str]) -> list[str]:
    """``problems``, or its first MAX_LISTED and one line saying how many more there are."""
    if len(problems) <= MAX_LISTED:
        return problems
    rest = len(problems) - MAX_LISTED
    return problems[:MAX_LISTED] + [f"{rest} more problem{'s' if rest > 1 else ''} not listed here; mend these "
                                    "and send it again to see the rest"]


def rejected(head: str, problems: list[str]) -> Invalid:
    """Invalid whose sentence is ``head`` and then each problem on a line of its own ("- ..."):
    the form every refusal listing several problems takes."""
    return Invalid(head + "\n" + "\n".join(f"- {p}" for p in problems), problems)


class Unauthenticated(StoreError):
    """No credentials, or wrong ones."""


class NotFound(StoreError):
    """Nothing there, or nothing the caller may know is there (another organisation's ids, an
    unreadable collection): both read the same so that ids reveal nothing."""


class Forbidden(StoreError):
    """The caller may see the thing but not do this to it (a write with read access)."""


class ReadOnly(Forbidden):
    """The thing is read-only by nature (collections in the tree, the memory archive)."""


class NotANote(StoreError):
    """A name that cannot be a note, a script or a side file (a folder, a .txt file...)."""


class Invalid(StoreError):
    """Arguments of the wrong shape or values that break a rule; ``problems`` lists every one."""


class Conflict(StoreError):
    """The write contradicts the current state (a unique value held by another record, a name taken)."""


class AlreadyExists(Conflict):
    """The target name is taken and the caller asked not to replace it."""


class Embedded(Conflict):
    """A live task embeds the note; ``tasks`` names each embedding task's display path."""

    def __init__(self, message: str, tasks: Sequence[str]) -> None:
        super().__init__(message, problems=[f"embedded by {t}" for t in tasks])
        self.tasks = list(tasks)


class Contention(Conflict):
    """The write met another change to the same rows at the same moment and PostgreSQL undid it
    (a deadlock, a serialization failure): nothing was written, and the same request may succeed
    at once. The store orders its locks so that this should not happen; this is the net."""


class TooLarge(StoreError):
    """A body over its size cap."""


class LimitReached(StoreError):
    """A count cap (live artifacts per owner, records per collection, collections per organisation)."""


class PreconditionFailed(StoreError):
    """A conditional write whose condition (version, etag) no longer holds."""


class Locked(StoreError):
    """A lease held by someone else covers the path."""


class TooManyAttempts(StoreError):
    """Too many failed logins for an account or from an address; ``retry_after`` is how many
    seconds until the next attempt is allowed."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(StoreError):
    """The database cannot be reached just now (down, restarting, or every connection busy past a
    short wait). Nothing was changed; the same request may succeed in a few seconds."""

    retry_after = 2  # seconds: what front ends tell clients (Retry-After) before they try again


def translate(table: Mapping[type, T], exc: BaseException, default: T) -> T:
    """The entry for the most specific class of ``exc`` in a front end's table (its MRO order), or
    ``default``: each front end keeps one table (HTTP status, DAV status, errno) and this one lookup."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    return default
