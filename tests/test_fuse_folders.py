"""Folders that end outside the mount: a guild or an agent the platform deletes in the database
(its notes go by cascade) leaves the mount within a second, through the folder's own delete event
(sql/070), instead of lingering until the kernel's 60 s entry timeout."""
from __future__ import annotations

import os
from typing import Any

from store import admin
from store.db import Database
from tests.test_fuse import Mount, eventually, mount  # noqa: F401 (the fixture)


def test_a_deleted_guild_and_agent_leave_the_mount_within_a_second(mount: Mount, db: Database,
                                                                     boot: dict[str, Any]) -> None:
    guild = admin.create_guild(db, org_id=boot["org_id"], name="short-lived")["id"]
    folder = mount.org / "guilds" / str(guild)
    (folder / "plan.md").write_text("# plan\n")
    assert (folder / "plan.md").read_text() == "# plan\n" and os.path.isdir(folder)
    agent_folder = mount.org / "agents" / str(boot["agent_id"])
    assert (agent_folder / "task.md").exists()
    with db.transaction() as conn:
        conn.execute("DELETE FROM guilds WHERE id = %s", (guild,))
        conn.execute("DELETE FROM agents WHERE id = %s", (boot["agent_id"],))
    eventually(lambda: not folder.exists() and not (folder / "plan.md").exists(), 1.0)
    eventually(lambda: not agent_folder.exists(), 1.0)
    assert str(guild) not in os.listdir(mount.org / "guilds")
