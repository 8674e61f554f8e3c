"""The mount's one errno table names every store error, and says what a person's tools will print."""
from __future__ import annotations

import errno
import os

from fuse_mount.errors import ERRNO, errno_for
from store import errors


def _all(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _all(sub)
    return found


def test_every_store_error_has_its_own_row() -> None:
    missing = sorted(c.__name__ for c in _all(errors.StoreError) | {errors.StoreError} if c not in ERRNO)
    assert missing == [], f"add these to fuse_mount/errors.py ERRNO: {missing}"


def test_the_messages_people_see() -> None:
    said = {name: os.strerror(errno_for(exc)) for name, exc in {
        "embedded": errors.Embedded("embedded", ["org/1/agents/2/task.md"]),
        "read only": errors.ReadOnly("read-only"),
        "not a note": errors.NotANote("not a note"),
        "missing": errors.NotFound("gone"),
        "exists": errors.AlreadyExists("taken"),
        "too large": errors.TooLarge("big"),
    }.items()}
    assert said == {"embedded": "Device or resource busy", "read only": "Read-only file system",
                    "not a note": "Operation not permitted", "missing": "No such file or directory",
                    "exists": "File exists", "too large": "File too large"}
    assert errno_for(RuntimeError("a bug")) == errno.EIO
