"""Each protocol's one table names every store error by its own class (STYLE.md: explicit tables
plus a test), so a new StoreError cannot fall through to a base class's status by accident."""
from __future__ import annotations

import pytest

from api.errors import STATUS as HTTP_STATUS
from dav_provider.errors import STATUS as DAV_STATUS
from fuse_mount.errors import ERRNO
from store import errors


def _all(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _all(sub)
    return found


@pytest.mark.parametrize("table, where", [(HTTP_STATUS, "api/errors.py STATUS (the API and the web app)"),
                                          (DAV_STATUS, "dav_provider/errors.py STATUS"),
                                          (ERRNO, "fuse_mount/errors.py ERRNO")])
def test_every_store_error_has_its_own_row(table: dict, where: str) -> None:
    missing = sorted(c.__name__ for c in _all(errors.StoreError) | {errors.StoreError} if c not in table)
    assert missing == [], f"add these to {where}: {missing}"

