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


def test_another_organisations_folders_answer_404_to_every_method(server, boot, db) -> None:
    # They answered 403 ("is a folder"), where the README promises 404 for another
    # organisation's ids; so did a guild folder that does not exist.
    other = admin.bootstrap(db, org_name="Other", email="o@example.com", password="correct horse battery")
    auth = (boot["email"], boot["password"])
    dav = f"{server.url}/dav"
    mine = f"org/{boot['org_id']}/guilds/{boot['guild_id']}/mine.md"
    assert requests.put(f"{dav}/{mine}", data=b"x", auth=auth, timeout=10).status_code == 201
    lock = ('<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>'
            "<D:locktype><D:write/></D:locktype></D:lockinfo>")
    for folder in (f"org/{other['org_id']}/", f"org/{other['org_id']}/guilds/{other['guild_id']}/",
                   f"org/{other['org_id']}/agents/{other['agent_id']}/", f"org/{boot['org_id']}/guilds/999999/"):
        for method, kwargs in (("PUT", {"data": b"x"}), ("MKCOL", {}), ("DELETE", {}),
                               ("LOCK", {"data": lock, "headers": {"Content-Type": "text/xml"}}),
                               ("MOVE", {"headers": {"Destination": f"{dav}/{mine}"}})):
            r = requests.request(method, f"{dav}/{folder}", auth=auth, timeout=10, **kwargs)
            assert r.status_code == 404, (method, folder, r.status_code, r.text)
        r = requests.request("COPY", f"{dav}/{mine}", auth=auth, timeout=10, headers={"Destination": f"{dav}/{folder}"})
        assert r.status_code == 404, ("COPY", folder, r.status_code, r.text)
    # One's own organisation's folder is there, and is refused as a folder.
    r = requests.put(f"{dav}/org/{boot['org_id']}/", data=b"x", auth=auth, timeout=10)
    assert r.status_code == 405 and "Cannot PUT to a collection" in r.text, r.text
