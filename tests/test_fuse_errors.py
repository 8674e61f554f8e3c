"""The mount's errno table says what a person's tools will print (tests/test_error_tables.py checks it
names every store error)."""
from __future__ import annotations

import errno
import os

from fuse_mount.errors import errno_for
from store import errors


def test_the_messages_people_see() -> None:
    said = {name: os.strerror(errno_for(exc)) for name, exc in {
        "embedded": errors.Embedded("embedded", ["org/1/agents/2/task.md"]),
        "read only": errors.ReadOnly("read-only"),
        "not a note": errors.NotANote("not a note"),
        "missing": errors.NotFound("gone"),
        "exists": errors.AlreadyExists("taken"),
        "too large": errors.TooLarge("big"),
        "at a cap": errors.LimitReached("org/1/agents/4/ already holds 10,000 live files"),
    }.items()}
    assert said == {"embedded": "Device or resource busy", "read only": "Read-only file system",
                    "not a note": "Operation not permitted", "missing": "No such file or directory",
                    "exists": "File exists", "too large": "File too large",
                    "at a cap": "Disk quota exceeded"}
    assert errno_for(RuntimeError("a bug")) == errno.EIO
