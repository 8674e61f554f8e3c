"""An agent's memory.md and task.md before their first write: there at version 0 (empty), with
an etag. A conditional save that sends that etag back, or If-Match: *, is a save like any other;
If-None-Match: * is refused, as the file is there. Real server, real requests."""
from __future__ import annotations

import requests

from store import admin


def test_a_conditional_save_of_a_never_written_memory_or_task_goes_through(server, boot, db) -> None:
    agent = admin.create_agent(db, org_id=boot["org_id"], guild_id=boot["guild_id"], name="fresh")
    folder = f"{server.url}/dav/org/{boot['org_id']}/agents/{agent['id']}"
    auth = (boot["email"], boot["password"])
    for name in ("memory.md", "task.md"):
        head = requests.head(f"{folder}/{name}", auth=auth, timeout=10)
        assert head.status_code == 200 and head.headers["Content-Length"] == "0", (name, head.status_code)
        r = requests.put(f"{folder}/{name}", data=b"x", auth=auth, headers={"If-None-Match": "*"}, timeout=10)
        assert r.status_code == 412, (name, r.status_code, r.text)
        r = requests.put(f"{folder}/{name}", data=b"first\n", auth=auth,
                         headers={"If-Match": head.headers["ETag"]}, timeout=10)
        assert r.status_code in (200, 204), (name, r.status_code, r.text)
        # The etag the client read is now stale.
        r = requests.put(f"{folder}/{name}", data=b"again\n", auth=auth,
                         headers={"If-Match": head.headers["ETag"]}, timeout=10)
        assert r.status_code == 412, (name, r.status_code, r.text)
        assert requests.get(f"{folder}/{name}", auth=auth, timeout=10).text == "first\n"
    other = admin.create_agent(db, org_id=boot["org_id"], guild_id=boot["guild_id"], name="other")
    r = requests.put(f"{server.url}/dav/org/{boot['org_id']}/agents/{other['id']}/task.md", data=b"t\n",
                     auth=auth, headers={"If-Match": "*"}, timeout=10)
    assert r.status_code in (200, 204), r.text
