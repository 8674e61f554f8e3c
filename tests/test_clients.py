"""Real WebDAV clients against the running gateway: davfs2 (a kernel mount), rclone, cadaver,
recorded Finder and Windows request sequences, and two gateway processes on one store.

A client missing from the machine fails its test (CI installs them); mounts are cleaned up even
when a test fails."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from store.db import Database

from tests.conftest import free_port  # noqa: F401 - shared helper

REPO = Path(__file__).resolve().parent.parent


def need(tool: str) -> str:
    path = shutil.which(tool) or (f"/usr/sbin/{tool}" if os.path.exists(f"/usr/sbin/{tool}") else None)
    assert path, f"{tool} is not installed; CI installs it (apt-get install davfs2 rclone cadaver)"
    return path


def content(db: Database, path: str) -> str | None:
    with db.connection() as conn:
        row = conn.execute("SELECT content FROM artifacts WHERE display_path = %s AND deleted_at IS NULL",
                           (path,)).fetchone()
    return row["content"] if row else None


@pytest.fixture
def ids(boot: dict[str, Any]) -> dict[str, Any]:
    return boot


# ---------------------------------------------------------------------------------------------
# davfs2


@contextlib.contextmanager
def davfs_mount(url: str, user: str, password: str) -> Iterator[Path]:
    need("mount.davfs")
    work = Path(tempfile.mkdtemp(prefix="hf-davfs-"))
    mnt, secrets, conf = work / "mnt", work / "secrets", work / "davfs2.conf"
    mnt.mkdir()
    secrets.write_text(f"{url} {user} {password}\n")
    secrets.chmod(0o600)
    conf.write_text(f"ask_auth 0\nuse_locks 1\ndelay_upload 0\nbuf_size 64\n"
                    f"secrets {secrets}\n")
    proc = subprocess.run(["mount", "-t", "davfs", "-o", f"conf={conf}", url, str(mnt)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)
        shutil.rmtree(work, ignore_errors=True)
        # davfs2 keeps a cache folder per mount point (its name holds the mount's path) in
        # /var/cache/davfs2, owned by its own user, so it cannot live in ``work``; it goes here.
        for cache in Path("/var/cache/davfs2").glob(f"*{work.name}*"):
            shutil.rmtree(cache, ignore_errors=True)


def test_davfs2_mount_reads_writes_renames(server: Any, ids: dict[str, Any], db: Database) -> None:
    url = f"{server.url}/dav/"
    g = f"org/{ids['org_id']}/guilds/{ids['guild_id']}"
    # A member token as the password: davfs2's secrets file and .netrc split on spaces.
    with davfs_mount(url, ids["email"], ids["member_token"]) as mnt:
        assert sorted(os.listdir(mnt / "org" / str(ids["org_id"]))) == ["agents", "collections", "guilds"]
        folder = mnt / g
        (folder / "mounted.md").write_text("# from davfs2\n")
        assert "mounted.md" in os.listdir(folder)
        os.rename(folder / "mounted.md", folder / "renamed.md")
        assert (folder / "renamed.md").read_text() == "# from davfs2\n"
        with pytest.raises(OSError):
            (folder / "sub").mkdir()
    assert content(db, f"{g}/renamed.md") == "# from davfs2\n"
    assert content(db, f"{g}/mounted.md") is None


def test_davfs2_saves_the_first_memory_and_task_of_a_new_agent(server: Any, ids: dict[str, Any], db: Database) -> None:
    # A new agent's memory.md and task.md are there at version 0 (empty); davfs2 sends back the
    # etag it read as If-Match on its save, which was refused with 412: its save went to
    # lost+found while the write seemed to succeed.
    from store import admin
    agent = admin.create_agent(db, org_id=ids["org_id"], guild_id=ids["guild_id"], name="fresh")
    folder = f"org/{ids['org_id']}/agents/{agent['id']}"
    with davfs_mount(f"{server.url}/dav/", ids["email"], ids["member_token"]) as mnt:
        assert (mnt / folder / "memory.md").read_text() == ""
        (mnt / folder / "memory.md").write_text("first memory\n")
        (mnt / folder / "task.md").write_text("first task\n")
        assert not os.listdir(mnt / "lost+found")
    auth = (ids["email"], ids["member_token"])
    for name, text in (("memory.md", "first memory\n"), ("task.md", "first task\n")):
        r = requests.get(f"{server.url}/dav/{folder}/{name}", auth=auth, timeout=10)
        assert r.status_code == 200 and r.text == text, (name, r.status_code, r.text)


# ---------------------------------------------------------------------------------------------
# rclone


def rclone(server: Any, ids: dict[str, Any], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    exe = need("rclone")
    obscured = subprocess.run([exe, "obscure", ids["password"]], capture_output=True, text=True,
                              check=True).stdout.strip()
    return subprocess.run([exe, "--config", "/dev/null", *args, "--webdav-url", f"{server.url}/dav",
                           "--webdav-user", ids["email"], "--webdav-pass", obscured],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_rclone_lsf_copyto_cat_moveto_deletefile_check(server: Any, ids: dict[str, Any], db: Database,
                                                       tmp_path: Path) -> None:
    g = f"org/{ids['org_id']}/guilds/{ids['guild_id']}"
    local = tmp_path / "up.md"
    local.write_text("uploaded by rclone\n")
    r = rclone(server, ids, "copyto", str(local), f":webdav:{g}/up.md")
    assert r.returncode == 0, r.stderr
    assert content(db, f"{g}/up.md") == "uploaded by rclone\n"
    r = rclone(server, ids, "lsf", f":webdav:{g}")
    assert r.returncode == 0 and r.stdout.split() == ["up.md"], r.stderr
    r = rclone(server, ids, "cat", f":webdav:{g}/up.md")
    assert r.stdout == "uploaded by rclone\n"
    same = tmp_path / "same"
    same.mkdir()
    (same / "up.md").write_text("uploaded by rclone\n")
    r = rclone(server, ids, "check", str(same), f":webdav:{g}")
    assert r.returncode == 0, r.stderr
    r = rclone(server, ids, "moveto", f":webdav:{g}/up.md", f":webdav:org/{ids['org_id']}/up.md")
    assert r.returncode == 0, r.stderr
    assert content(db, f"org/{ids['org_id']}/up.md") == "uploaded by rclone\n"
    r = rclone(server, ids, "deletefile", f":webdav:org/{ids['org_id']}/up.md")
    assert r.returncode == 0, r.stderr
    assert content(db, f"org/{ids['org_id']}/up.md") is None
    bad = tmp_path / "notes.txt"
    bad.write_text("x")
    r = rclone(server, ids, "copyto", str(bad), f":webdav:{g}/notes.txt", "--retries", "1",
               "--low-level-retries", "1")
    assert r.returncode != 0 and "403" in r.stderr


# ---------------------------------------------------------------------------------------------
# cadaver


def test_cadaver_put_get_lock_propset_move(server: Any, ids: dict[str, Any], db: Database, tmp_path: Path) -> None:
    exe = need("cadaver")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"machine 127.0.0.1 login {ids['email']} password {ids['member_token']}\n")
    (home / ".netrc").chmod(0o600)
    src = tmp_path / "c.md"
    src.write_text("from cadaver\n")
    got = tmp_path / "got.md"
    g = f"/dav/org/{ids['org_id']}/guilds/{ids['guild_id']}"
    script = "\n".join([
        f"cd {g}", f"put {src} c.md", f"get c.md {got}", "lock c.md", "unlock c.md",
        "propset c.md colour blue", "propget c.md colour", "move c.md moved.md", "ls", "quit"]) + "\n"
    r = subprocess.run([exe, f"{server.url}/dav/"], input=script, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "HOME": str(home)})
    out = r.stdout + r.stderr
    assert "Authentication required" not in out, out
    assert got.read_text() == "from cadaver\n", out
    assert "Locking `c.md': succeeded" in out and "Unlocking `c.md': succeeded" in out, out
    assert "blue" in out, out
    assert "moved.md" in out, out
    assert content(db, f"{g[5:]}/moved.md") == "from cadaver\n"


# ---------------------------------------------------------------------------------------------
# Recorded sequences


LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?>\n<D:lockinfo xmlns:D="DAV:">\n<D:lockscope><D:exclusive/>'
             b'</D:lockscope>\n<D:locktype><D:write/></D:locktype>\n<D:owner>\n'
             b'<D:href>http://www.apple.com/webdav_fs/</D:href>\n</D:owner>\n</D:lockinfo>\n')


def test_finder_sequence(server: Any, operator: requests.Session, ids: dict[str, Any], db: Database) -> None:
    """macOS Finder copying report.md into a folder (as captured from WebDAVFS/3.0)."""
    g = f"org/{ids['org_id']}/guilds/{ids['guild_id']}"
    base = f"{server.url}/dav/{g}"
    ua = {"User-Agent": "WebDAVFS/3.0.0 (03008000) Darwin/22.1.0 (x86_64)"}
    r = operator.request("PROPFIND", base + "/", headers={**ua, "Depth": "1"}, data=(
        b'<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop><D:getlastmodified/>'
        b'<D:getcontentlength/><D:creationdate/><D:resourcetype/></D:prop></D:propfind>'))
    assert r.status_code == 207
    assert operator.request("PROPFIND", base + "/report.md", headers={**ua, "Depth": "0"}).status_code == 404
    assert operator.put(base + "/._report.md", data=b"\x00\x05\x16\x07" + b"\x00" * 80, headers=ua).status_code == 201
    r = operator.request("LOCK", base + "/report.md", data=LOCK_BODY,
                         headers={**ua, "Timeout": "Second-600", "Depth": "0"})
    assert r.status_code in (200, 201), r.text
    token = r.headers["Lock-Token"]

    def chunks() -> Iterator[bytes]:
        yield b"# Report\n"
        yield b"Written by Finder in chunks.\n"
    r = operator.put(base + "/report.md", data=chunks(), headers={**ua, "If": f"({token})"})
    assert r.status_code == 201, r.text  # it created the note (RFC 9110 9.3.4), though the name was locked
    assert operator.request("UNLOCK", base + "/report.md", headers={**ua, "Lock-Token": token}).status_code == 204
    assert content(db, f"{g}/report.md") == "# Report\nWritten by Finder in chunks.\n"
    assert operator.get(base + "/._report.md").content.startswith(b"\x00\x05\x16\x07")


def test_windows_sequence(server: Any, operator: requests.Session, ids: dict[str, Any], db: Database) -> None:
    """Windows Explorer (Microsoft-WebDAV-MiniRedir) saving notes.md."""
    g = f"org/{ids['org_id']}/guilds/{ids['guild_id']}"
    url = f"{server.url}/dav/{g}/notes.md"
    ua = {"User-Agent": "Microsoft-WebDAV-MiniRedir/10.0.19045"}
    assert operator.put(url, data=b"", headers={**ua, "Content-Length": "0"}).status_code == 201
    r = operator.request("LOCK", url, headers={**ua, "Timeout": "Second-3600"}, data=(
        b'<?xml version="1.0" encoding="utf-8" ?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
        b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>WIN\\ada</D:href></D:owner>'
        b'</D:lockinfo>'))
    assert r.status_code == 200, r.text
    token = r.headers["Lock-Token"]
    assert operator.put(url, data=b"saved from Explorer\r\n", headers={**ua, "If": f"({token})"}).status_code == 204
    r = operator.request("PROPPATCH", url, headers={**ua, "If": f"({token})"}, data=(
        b'<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" '
        b'xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>'
        b'<Z:Win32CreationTime>Mon, 06 Jan 2025 09:00:00 GMT</Z:Win32CreationTime>'
        b'<Z:Win32LastAccessTime>Mon, 06 Jan 2025 09:05:00 GMT</Z:Win32LastAccessTime>'
        b'<Z:Win32LastModifiedTime>Mon, 06 Jan 2025 09:05:00 GMT</Z:Win32LastModifiedTime>'
        b'<Z:Win32FileAttributes>00000020</Z:Win32FileAttributes></D:prop></D:set></D:propertyupdate>'))
    assert r.status_code == 207 and b"200 OK" in r.content, r.text
    assert operator.request("UNLOCK", url, headers={**ua, "Lock-Token": token}).status_code == 204
    assert content(db, f"{g}/notes.md") == "saved from Explorer\r\n"
    with db.connection() as conn:
        props = conn.execute("SELECT name FROM path_properties WHERE path = %s ORDER BY name",
                             (f"{g}/notes.md",)).fetchall()
    assert [p["name"] for p in props] == [
        "{urn:schemas-microsoft-com:}Win32CreationTime", "{urn:schemas-microsoft-com:}Win32FileAttributes",
        "{urn:schemas-microsoft-com:}Win32LastAccessTime", "{urn:schemas-microsoft-com:}Win32LastModifiedTime"]


# ---------------------------------------------------------------------------------------------
# Two gateway processes on one store


@contextlib.contextmanager
def gateway_process(db_url: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--no-demo", "--database-url", db_url,
                             "--bind", f"127.0.0.1:{port}", "--threads", "4"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "gateway exited"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_two_gateway_processes_share_locks_and_notes(db_url: str, boot: dict[str, Any]) -> None:
    auth = (boot["email"], boot["password"])
    g = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    with gateway_process(db_url) as one, gateway_process(db_url) as two:
        a, b = requests.Session(), requests.Session()
        a.auth = b.auth = auth
        assert a.put(f"{one}/dav/{g}/shared.md", data=b"written through one").status_code == 201
        assert b.get(f"{two}/dav/{g}/shared.md").text == "written through one"
        r = a.request("LOCK", f"{one}/dav/{g}/shared.md", data=LOCK_BODY, headers={"Timeout": "Second-600"})
        assert r.status_code == 200, r.text
        token = r.headers["Lock-Token"]
        assert b.put(f"{two}/dav/{g}/shared.md", data=b"sneaky").status_code == 423
        assert b.request("LOCK", f"{two}/dav/{g}/shared.md", data=LOCK_BODY).status_code == 423
        assert b.put(f"{two}/dav/{g}/shared.md", data=b"with token", headers={"If": f"({token})"}).status_code == 204
        assert b.request("UNLOCK", f"{two}/dav/{g}/shared.md", headers={"Lock-Token": token}).status_code == 204
        assert a.put(f"{one}/dav/{g}/shared.md", data=b"free again").status_code == 204
        assert b.get(f"{two}/dav/{g}/shared.md").text == "free again"
