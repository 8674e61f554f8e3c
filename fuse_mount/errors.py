"""The one table from store errors to errno values, and the one log line per refusal.

A person meets these through their tools' messages ("Device or resource busy", "Operation not
permitted"), so each store error gets the errno whose strerror reads closest to the store's reason;
the store's own sentence goes to the log, since a syscall cannot carry it. As rclone's mount keeps
``translateError`` in one switch, every StoreError class is named here explicitly (a test checks
that none is missing) rather than left to fall through to a base class by accident.
"""
from __future__ import annotations

import errno
import logging

from store import errors as e

log = logging.getLogger("hostfinder.fuse")

# Most specific first is not needed: lookup walks the exception's MRO and takes the first class
# named here, so Embedded (a Conflict) gets EBUSY and AlreadyExists (a Conflict) gets EEXIST.
ERRNO: dict[type[e.StoreError], int] = {
    e.StoreError: errno.EIO,
    e.Unauthenticated: errno.EACCES,
    e.NotFound: errno.ENOENT,
    # A grant the user lacks, or a change the file refuses by nature though it is writable (task.md
    # and memory.md cannot be deleted or moved): "Permission denied".
    e.Forbidden: errno.EACCES,
    # Read-only by nature (collections, records, the memory archive): the file is 0444 and
    # "Read-only file system" says the rule is the tree's, not the user's rights.
    e.ReadOnly: errno.EROFS,
    # A name that cannot be a note (a .txt file, a folder): "Operation not permitted".
    e.NotANote: errno.EPERM,
    e.Invalid: errno.EINVAL,
    e.Conflict: errno.EEXIST,
    # Undone by PostgreSQL (a deadlock): nothing written, try again.
    e.Contention: errno.EAGAIN,
    e.AlreadyExists: errno.EEXIST,
    # A live task embeds the note: "Device or resource busy", as for a mounted-on directory.
    e.Embedded: errno.EBUSY,
    e.TooLarge: errno.EFBIG,
    e.LimitReached: errno.EDQUOT,
    # The mount writes last-writer-wins like a local disk, so this only comes from a store rule.
    e.PreconditionFailed: errno.ESTALE,
    # A WebDAV client holds a lease on the path (Finder or Office has it open).
    e.Locked: errno.EBUSY,
    # Too many failed logins: "Resource temporarily unavailable", try again later.
    e.TooManyAttempts: errno.EAGAIN,
    # The database is down or restarting: "Input/output error", as a disk that stopped answering.
    e.Unavailable: errno.EIO,
}


def errno_for(exc: BaseException) -> int:
    """The errno for ``exc``: the table above for store errors, EIO for anything else."""
    return e.translate(ERRNO, exc, errno.EIO)


def describe(exc: BaseException) -> str:
    """The store's sentence with any problems it does not already list (for Embedded: the
    embedding tasks), for the log."""
    text = str(exc) or type(exc).__name__
    problems = getattr(exc, "problems", None) or []
    extra = [p for p in problems if p not in text]
    return text + (f" ({'; '.join(extra)})" if extra else "")


def log_refusal(operation: str, path: str, exc: BaseException) -> int:
    """Log one line saying what was refused and why; return the errno to answer with.

    A store refusal is the user's business (INFO: the tool already printed the errno's text);
    an unreachable store is a WARNING; anything else is a bug, logged with its traceback."""
    code = errno_for(exc)
    if operation == "rename" and code == errno.EINVAL:
        # mv reads EINVAL from rename(2) as "cannot move 'a' to a subdirectory of itself": a
        # name the store refuses (Memory.md beside memory.md) says "Operation not permitted".
        code = errno.EPERM
    name = errno.errorcode.get(code, str(code))
    if isinstance(exc, e.StoreError) and not isinstance(exc, e.Unavailable):
        log.info("refused %s %s: %s [%s]", operation, path or "/", describe(exc), name)
    elif isinstance(exc, e.Unavailable):  # store.db and store.changefeed both say it so
        log.warning("%s %s failed: the store is unavailable (%s) [%s]", operation, path or "/",
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, name)
    else:
        log.error("%s %s failed with an unexpected error [%s]", operation, path or "/", name, exc_info=exc)
    return code
