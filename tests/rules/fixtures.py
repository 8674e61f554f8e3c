"""Fixtures of the rule suite, imported by test_rules.py (a second conftest.py would take the
module name ``conftest`` that tests importing ``from conftest`` rely on): one database, one gateway
and one FUSE mount for the whole module (the rules run on three surfaces and must stay fast), a
fresh guild and agent for every test (so a folder's listing is the test's own and a task's embeds
are its own), the ``surface`` under test, and ``store``: what a user would notice afterwards, read
through the API and the store."""
from __future__ import annotations

import os
import shutil
import tempfile
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from store import admin
from store.access import Door
from store.db import Database
from store.host import HostTree
from tests.conftest import RunningServer, create_database, drop_database, running_gateway
from tests.rules.drivers import FuseSurface, Surface, TreeSurface, WebDavSurface
from tests.test_fuse import start_mount, unmount, wait_mounted

SURFACES = ("tree", "webdav", "fuse")
_places = itertools.count(1)


@pytest.fixture(scope="module")
def rules_db_url(pg_server: str, template_db: str) -> Iterator[str]:
    url = create_database(pg_server, template_db)
    yield url
    drop_database(pg_server, url)


@pytest.fixture(scope="module")
def rules_db(rules_db_url: str) -> Iterator[Database]:
    database = Database(rules_db_url, min_size=1, max_size=20).open()
    yield database
    database.close()


@pytest.fixture(scope="module")
def world(rules_db: Database) -> dict[str, Any]:
    """The organisation, its member (Ada) and a second member (Bea), who must never see Ada's
    side files."""
    boot = admin.bootstrap(rules_db, email="ada@example.com", password="correct horse battery")
    admin.create_user(rules_db, email="bea@example.com", password="another long password")
    admin.add_member(rules_db, org_id=boot["org_id"], email="bea@example.com")
    return boot


@pytest.fixture(scope="module")
def gateway(rules_db: Database) -> Iterator[RunningServer]:
    with running_gateway(rules_db) as running:
        yield running


@pytest.fixture(scope="module")
def ada_http(gateway: RunningServer, world: dict[str, Any]) -> requests.Session:
    # The member token, not the password: a password costs an argon2 check per request.
    return gateway.session(basic=(world["email"], world["member_token"]))


@dataclass
class FuseMount:
    root: Path
    log_path: Path


@pytest.fixture(scope="module")
def fuse_mount(rules_db_url: str, world: dict[str, Any]) -> Iterator[FuseMount]:
    assert os.path.exists("/dev/fuse"), "FUSE is required: /dev/fuse is missing (CI must provide it)"
    work = Path(tempfile.mkdtemp(prefix="hf-rules-"))
    mnt, log = work / "mnt", work / "mount.log"
    mnt.mkdir()
    proc = start_mount(mnt, rules_db_url, world["email"], log)
    try:
        wait_mounted(mnt, proc, log)
        yield FuseMount(mnt, log)
    finally:
        unmount(mnt, proc)
        shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class Place:
    """A fresh guild and agent in the organisation, as tree paths."""
    org: int
    guild: int
    agent: int

    @property
    def g(self) -> str:
        return f"org/{self.org}/guilds/{self.guild}"

    @property
    def a(self) -> str:
        return f"org/{self.org}/agents/{self.agent}"


@pytest.fixture
def place(rules_db: Database, world: dict[str, Any]) -> Place:
    n = next(_places)
    guild = admin.create_guild(rules_db, org_id=world["org_id"], name=f"Rules {n}")
    agent = admin.create_agent(rules_db, org_id=world["org_id"], guild_id=guild["id"], name=f"Agent {n}")
    return Place(world["org_id"], guild["id"], agent["id"])


@pytest.fixture
def ada_tree(rules_db: Database, world: dict[str, Any]) -> HostTree:
    principal = Door(rules_db).principal_for_email(world["email"])
    assert principal is not None
    return HostTree(rules_db, principal)


@pytest.fixture(params=SURFACES)
def surface(request: pytest.FixtureRequest, ada_tree: HostTree) -> Surface:
    """The surface under test, acting as Ada. The gateway and the mount start at their first use."""
    if request.param == "tree":
        return TreeSurface(ada_tree)
    if request.param == "webdav":
        gw: RunningServer = request.getfixturevalue("gateway")
        return WebDavSurface(gw.url, request.getfixturevalue("ada_http"))
    mount: FuseMount = request.getfixturevalue("fuse_mount")
    return FuseSurface(mount.root, mount.log_path)


@dataclass
class Store:
    """What a user would notice, read outside the surface under test: the History the web app
    and the API show (GET /api/file-changes), the stored note (its identity, version, text and
    creation time), and what each user's tree holds."""
    db: Database
    http: requests.Session
    api: str
    arrange: HostTree        # Ada's tree, for setting the scene (never the surface under test)

    def history(self, path: str) -> list[tuple[str, int]]:
        """(operation, version) of every recorded change of ``path``, oldest first."""
        r = self.http.get(f"{self.api}/api/file-changes", params={"display_path": path}, timeout=30)
        assert r.status_code == 200, r.text
        return [(c["operation"], c["version"]) for c in reversed(r.json()["changes"])]

    def note(self, path: str) -> dict[str, Any] | None:
        """The live artifact at ``path``: id, version, content, created_at; None when there is none."""
        with self.db.connection() as conn:
            return conn.execute("SELECT id, version, content, created_at FROM artifacts"
                                " WHERE display_path = %s AND deleted_at IS NULL", (path,)).fetchone()

    def notes_in(self, folder: str) -> list[str]:
        """The names of the live notes the store holds directly in ``folder``: what every user and
        every agent sees there."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT display_path FROM artifacts WHERE deleted_at IS NULL"
                                " AND kind = 'note' AND starts_with(display_path, %s)", (folder + "/",)).fetchall()
        names = [r["display_path"][len(folder) + 1:] for r in rows]
        return sorted(n for n in names if "/" not in n)

    def created_at(self, path: str) -> datetime:
        row = self.note(path)
        assert row is not None, f"no live note at {path}"
        return row["created_at"]


@pytest.fixture
def store(rules_db: Database, gateway: RunningServer, ada_http: requests.Session, ada_tree: HostTree) -> Store:
    return Store(rules_db, ada_http, gateway.url, HostTree(rules_db, ada_tree.principal))
