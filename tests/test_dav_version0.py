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


def test_a_task_saved_in_nfd_reads_back_byte_for_byte(server, boot) -> None:
    # macOS editors write NFD; the task was stored NFC, so a GET after a PUT gave other bytes and
    # another size (rclone called the copy corrupted and wrote it three times).
    import unicodedata
    url = f"{server.url}/dav/org/{boot['org_id']}/agents/{boot['agent_id']}/task.md"
    auth = (boot["email"], boot["password"])
    text = unicodedata.normalize("NFD", "Café résumé\n").encode()
    assert requests.put(url, data=text, auth=auth, timeout=10).status_code in (200, 201, 204)
    r = requests.get(url, auth=auth, timeout=10)
    assert r.content == text and r.headers["Content-Length"] == str(len(text))
    api = f"{server.url}/api/agents/{boot['agent_id']}/task"
    assert requests.get(api, auth=auth, timeout=10).json()["task"] == text.decode()
