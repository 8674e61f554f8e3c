"""The FUSE mount, for real: `hostfinder mount` in a subprocess on a real mount point, driven with the
tools people use (ls, cat, grep, cp, mv, rm, vim, sed, Python). No FUSE here is a failure, not a skip:
CI has /dev/fuse, and a suite that quietly skips would hide a broken mount."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fuse_mount.command import MountError, check_fuse
from fuse_mount.operations import UNFOLLOWED_LISTING_SECONDS
from store import admin, tools
from store.access import Door, Principal
from store.db import Database
from store.errors import LimitReached, NotFound
from store.host import HostTree
from store.storage import OWNER_CAP

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Mount:
    root: Path           # the mount point
    org: Path            # <mount>/org/<org_id>
    proc: subprocess.Popen
    log_path: Path
    db: Database
    principal: Principal
    boot: dict[str, Any]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def tree(self) -> HostTree:
        return HostTree(self.db, self.principal)

    def versions(self, path: str) -> int:
        """How many changes the store recorded for a display path (one per saved version)."""
        with self.db.connection() as conn:
            return conn.execute("SELECT count(*) AS n FROM file_changes WHERE display_path = %s",
                                (path,)).fetchone()["n"]


def start_mount(mountpoint: Path, db_url: str, email: str, log_path: Path, *extra: str) -> subprocess.Popen:
    out = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", "gateway", "mount", str(mountpoint), "--user", email,
                             "--database-url", db_url, *extra], cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def wait_mounted(mountpoint: Path, proc: subprocess.Popen, log_path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None:
            pytest.fail(f"the mount exited with {proc.returncode}:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"not mounted after {timeout} s:\n{log_path.read_text()}")
        time.sleep(0.05)


def unmount(mountpoint: Path, proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if os.path.ismount(mountpoint) or _stale(mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)


def _stale(path: Path) -> bool:
    try:
        os.stat(path)
        return False
    except OSError as exc:
        return exc.errno == errno.ENOTCONN


@contextlib.contextmanager
def mounted(db: Database, db_url: str, boot: dict[str, Any], tmp_path: Path) -> Iterator[Mount]:
    """`hostfinder mount` of ``db_url`` as the boot's user on tmp_path/mnt, unmounted after."""
    assert os.path.exists("/dev/fuse"), "FUSE is required: /dev/fuse is missing (CI must provide it)"
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log_path = tmp_path / "mount.log"
    proc = start_mount(mountpoint, db_url, boot["email"], log_path)
    try:
        wait_mounted(mountpoint, proc, log_path)
        principal = Door(db).principal_for_email(boot["email"])
        assert principal is not None
        yield Mount(mountpoint, mountpoint / "org" / str(boot["org_id"]), proc, log_path, db, principal, boot)
    finally:
        unmount(mountpoint, proc)


@pytest.fixture
def mount(db: Database, db_url: str, boot: dict[str, Any], tmp_path: Path) -> Iterator[Mount]:
    with mounted(db, db_url, boot, tmp_path) as running:
        yield running


def sh(*args: str | Path, cwd: Path | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=30)
    if ok:
        assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def eventually(check: Any, timeout: float) -> float:
    """Seconds until ``check()`` is truthy; fails after ``timeout``."""
    start = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - start
        except OSError:
            pass
        if time.monotonic() - start > timeout:
            pytest.fail(f"not true within {timeout} s")
        time.sleep(0.02)


# ---------------------------------------------------------------------------------------------

def test_ls_cat_grep_modes_and_stable_inodes(mount: Mount) -> None:
    org = mount.boot["org_id"]
    tree = mount.tree
    tree.write(f"org/{org}/plan.md", b"# Plan\nship the mount\n")
    tree.write(f"org/{org}/guilds/{mount.boot['guild_id']}/ideas.md", b"ship it on Friday\n")
    from store.collections import create_collection
    create_collection(mount.db, mount.principal, org, {
        "name": "leads", "purpose": "People to call",
        "columns": [{"name": "email", "type": "text", "description": "where to write"}]})

    listing = sh("ls", "-la", mount.org).stdout
    lines = {line.split()[-1]: line for line in listing.splitlines()[1:]}
    assert {".", "..", "agents", "guilds", "collections", "plan.md"} <= set(lines)
    assert lines["plan.md"].startswith("-rw-r--r--") and " 22 " in lines["plan.md"]
    assert lines["."].startswith("drwxr-xr-x")            # the org folder takes new notes
    assert lines["agents"].startswith("dr-xr-xr-x")       # one folder per agent, no files
    assert sh("cat", mount.org / "plan.md").stdout == "# Plan\nship the mount\n"

    coll = mount.org / "collections" / "leads"
    assert oct(os.stat(coll / "collection.json").st_mode & 0o777) == "0o444"
    assert oct(os.stat(coll).st_mode & 0o777) == "0o555"
    agent = mount.org / "agents" / str(mount.boot["agent_id"])
    assert oct(os.stat(agent / "history-archive").st_mode & 0o777) == "0o555"
    assert sorted(os.listdir(agent)) == ["history-archive", "memory.md", "scripts", "task.md"]
    with pytest.raises(OSError) as refused:
        (coll / "collection.json").write_text("{}")
    assert refused.value.errno in (errno.EROFS, errno.EACCES)

    hits = sh("grep", "-r", "ship", mount.root).stdout.splitlines()
    assert sorted(h.split(":", 1)[1] for h in hits) == ["ship it on Friday", "ship the mount"]

    first = os.stat(mount.org / "plan.md").st_ino
    sh("cat", mount.org / "plan.md")
    (mount.org / "plan.md").write_text("# Plan\nchanged\n")
    assert os.stat(mount.org / "plan.md").st_ino == first

    # xattrs: not supported, said plainly so that cp -a and editors fall back (the second time too,
    # though for all but getxattr the kernel answers alone, told by the first answer).
    for call in 2 * (lambda: os.getxattr(mount.org / "plan.md", "user.x"),
                     lambda: os.setxattr(mount.org / "plan.md", "user.x", b"1"),
                     lambda: os.listxattr(mount.org / "plan.md"),
                     lambda: os.removexattr(mount.org / "plan.md", "user.x")):
        with pytest.raises(OSError) as no_xattr:
            call()
        assert no_xattr.value.errno == errno.ENOTSUP
    assert os.statvfs(mount.root).f_namemax == 255


def test_acl_reads_say_not_supported_every_time(mount: Mount) -> None:
    """`ls -l` asks each file for its ACL until the file system says it has none (ENOTSUP). If
    an ACL read ever answered "this file has no ACL" instead (ENODATA, what the kernel says after
    a getxattr ENOSYS), ls would ask again for every file of a 10 000-note folder."""
    org = mount.boot["org_id"]
    for i in range(3):
        mount.tree.write(f"org/{org}/acl-{i}.md", b"x")
    for i in range(3):
        for name in ("system.posix_acl_access", "security.selinux", "user.x"):
            with pytest.raises(OSError) as no_acl:
                os.getxattr(mount.org / f"acl-{i}.md", name)
            assert no_acl.value.errno == errno.ENOTSUP, (i, name, no_acl.value)


def test_readdir_lists_a_large_folder_once_each(mount: Mount) -> None:
    """Several readdir calls per listing: each name exactly once, resuming after a name."""
    org = mount.boot["org_id"]
    tree = mount.tree
    names = [f"n{i:04d}-{'x' * 40}.md" for i in range(400)]
    for name in names:
        tree.write(f"org/{org}/{name}", b"x")
    listed = os.listdir(mount.org)
    assert sorted(n for n in listed if n.endswith(".md")) == names
    assert len(listed) == len(set(listed))


def test_cp_in_and_out_and_refusals(mount: Mount, tmp_path: Path) -> None:
    org = mount.boot["org_id"]
    src = tmp_path / "report.md"
    src.write_text("# Report\n" + "line\n" * 20000)  # 100 KB: many write calls, one version
    sh("cp", src, mount.org / "report.md")
    assert mount.tree.read(f"org/{org}/report.md") == src.read_bytes()
    assert mount.versions(f"org/{org}/report.md") == 1
    sh("cp", mount.org / "report.md", tmp_path / "back.md")
    assert (tmp_path / "back.md").read_bytes() == src.read_bytes()
    sh("cp", "-a", mount.org / "report.md", mount.org / "guilds" / str(mount.boot["guild_id"]) / "copy.md")

    (tmp_path / "notes.txt").write_text("plain text")
    refused = sh("cp", tmp_path / "notes.txt", mount.org / "notes.txt", ok=False)
    assert refused.returncode == 1 and "Operation not permitted" in refused.stderr
    assert "notes.txt" not in os.listdir(mount.org)
    with pytest.raises(NotFound):
        mount.tree.stat(f"org/{org}/notes.txt")
    assert "refused create" in mount.log() and "does not end in .md" in mount.log()
    # Refused when the file is created, so even a shell redirection (which ignores close errors) says so.
    redirected = sh("bash", "-c", f"echo hi > {mount.org / 'notes.txt'}", ok=False)
    assert redirected.returncode == 1 and "Operation not permitted" in redirected.stderr
    # So are the names only a new note may not take (a look-alike of memory.md, a zero-width
    # space): a shell's `>` must not be told yes at open and lose the text at close.
    agent_dir = mount.org / "agents" / str(mount.boot["agent_id"])
    for name in ("Memory.md", "plan\u200b.md"):
        redirected = sh("bash", "-c", f"echo important > '{agent_dir / name}'", ok=False)
        assert redirected.returncode == 1 and "Invalid argument" in redirected.stderr, (name, redirected)
        assert name not in os.listdir(agent_dir)
    assert b"important" not in mount.tree.read(f"org/{org}/agents/{mount.boot['agent_id']}/memory.md")

    made = sh("mkdir", mount.org / "drafts", ok=False)
    assert made.returncode == 1 and "Operation not permitted" in made.stderr
    gone = sh("cat", mount.org / "missing.md", ok=False)
    assert "No such file or directory" in gone.stderr
    with pytest.raises(OSError) as big:
        (mount.org / "big.md").write_bytes(b"x" * 300_000)
    assert big.value.errno == errno.EFBIG


def test_a_new_note_at_the_owner_cap_is_refused_at_the_shells_redirection(mount: Mount) -> None:
    """An owner holds at most 10 000 live files. In a folder at that cap a new note is refused
    when it is created (open with O_CREAT), with the store's sentence, so a shell's `>` (which
    ignores close errors), touch and printf say "Disk quota exceeded" and nothing is listed. An
    overwrite of a note there, an atomic editor's save over it (a temp side file renamed over the
    note) and vim's rename-away save are no new file and still save."""
    assert shutil.which("vim"), "vim is needed for the editor tests (apt-get install vim)"
    org, agent = mount.boot["org_id"], mount.boot["agent_id"]
    prefix = f"org/{org}/agents/{agent}"
    mount.tree.write(f"{prefix}/kept.md", b"v1\n")
    agent_dir = mount.org / "agents" / str(agent)
    assert "kept.md" in os.listdir(agent_dir)
    with mount.db.transaction() as conn:  # (the trigger's counter row, sql/011: as if 10 000 were live)
        conn.execute("UPDATE owner_counts SET live = %s WHERE org_id = %s AND level = 'agent' AND owner_id = %s",
                     (OWNER_CAP, org, agent))
    sentence = (f"cannot create {prefix}/capnote.md: {prefix}/ already holds 10,000 live files, the limit "
                "is 10,000 per owner; delete files that are no longer needed, or write into an existing one")
    with pytest.raises(LimitReached) as by_the_store:
        mount.tree.write(f"{prefix}/capnote.md", b"x")
    assert str(by_the_store.value) == sentence

    for command in (f"echo 'text I typed' > {agent_dir / 'capnote.md'}",
                    f"printf 'text I typed' > {agent_dir / 'capnote.md'}",
                    f"touch {agent_dir / 'capnote.md'}",
                    f"echo 'print(1)' > {agent_dir / 'scripts' / 'capscript.py'}"):
        done = sh("bash", "-c", command, ok=False)
        assert done.returncode != 0 and "Disk quota exceeded" in done.stderr, (command, done)
    assert "capnote.md" not in os.listdir(agent_dir) and os.listdir(agent_dir / "scripts") == []
    assert not (agent_dir / "capnote.md").exists()
    with pytest.raises(NotFound):
        mount.tree.stat(f"{prefix}/capnote.md")
    assert f"refused create {prefix}/capnote.md: {sentence} [EDQUOT]" in mount.log()

    # Not a new file: an overwrite, an atomic save over the note, vim's rename-away save.
    sh("bash", "-c", f"echo 'v2' > {agent_dir / 'kept.md'}")
    assert mount.tree.read(f"{prefix}/kept.md") == b"v2\n"
    fd, tmp = tempfile.mkstemp(dir=agent_dir)
    os.write(fd, b"v3\n")
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, agent_dir / "kept.md")
    assert mount.tree.read(f"{prefix}/kept.md") == b"v3\n"
    sh("vim", "-es", "-u", "NONE", "-c", "set backupcopy=no", "-c", "normal Gov4", "-c", "wq",
       agent_dir / "kept.md")
    assert mount.tree.read(f"{prefix}/kept.md") == b"v3\nv4\n"
    assert (agent_dir / "kept.md").read_text() == "v3\nv4\n"
    assert sorted(n for n in os.listdir(agent_dir) if n.endswith(".md")) == ["kept.md", "memory.md", "task.md"]


def test_mv_within_a_folder_between_levels_and_noreplace(mount: Mount) -> None:
    org, guild, agent = mount.boot["org_id"], mount.boot["guild_id"], mount.boot["agent_id"]
    tree = mount.tree
    tree.write(f"org/{org}/a.md", b"alpha\n")
    tree.write(f"org/{org}/b.md", b"beta\n")
    sh("mv", mount.org / "a.md", mount.org / "renamed.md")
    assert sh("cat", mount.org / "renamed.md").stdout == "alpha\n"
    sh("mv", mount.org / "renamed.md", mount.org / "guilds" / str(guild) / "up.md")
    sh("mv", mount.org / "guilds" / str(guild) / "up.md", mount.org / "agents" / str(agent) / "mine.md")
    assert tree.read(f"org/{org}/agents/{agent}/mine.md") == b"alpha\n"
    assert "renamed.md" not in os.listdir(mount.org)
    with pytest.raises(NotFound):
        tree.stat(f"org/{org}/guilds/{guild}/up.md")

    # renameat2(RENAME_NOREPLACE) onto an existing note: EEXIST, nothing changes.
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd, noreplace = -100, 1
    src = str(mount.org / "agents" / str(agent) / "mine.md").encode()
    dst = str(mount.org / "b.md").encode()
    assert libc.renameat2(at_fdcwd, src, at_fdcwd, dst, noreplace) == -1
    assert ctypes.get_errno() == errno.EEXIST
    assert tree.read(f"org/{org}/b.md") == b"beta\n"
    # A plain rename over it replaces it.
    os.rename(src, dst)
    assert sh("cat", mount.org / "b.md").stdout == "alpha\n"
    # A name the store refuses: "Operation not permitted", not EINVAL, which mv reads as "cannot
    # move ... to a subdirectory of itself".
    agent_dir = mount.org / "agents" / str(agent)
    (agent_dir / "plan.md").write_bytes(b"plan\n")
    done = sh("mv", agent_dir / "plan.md", agent_dir / "Memory.md", ok=False)
    assert done.returncode != 0 and "Operation not permitted" in done.stderr, done.stderr
    assert tree.read(f"org/{org}/agents/{agent}/plan.md") == b"plan\n"


def test_rm_of_an_embedded_note_is_ebusy_and_logged(mount: Mount) -> None:
    org, guild, agent = mount.boot["org_id"], mount.boot["guild_id"], mount.boot["agent_id"]
    tree = mount.tree
    tree.write(f"org/{org}/guilds/{guild}/facts.md", b"the facts\n")
    tree.write(f"org/{org}/agents/{agent}/task.md", f"Use ![[org/{org}/guilds/{guild}/facts.md]]\n".encode())
    done = sh("rm", mount.org / "guilds" / str(guild) / "facts.md", ok=False)
    assert done.returncode == 1 and "Device or resource busy" in done.stderr
    assert tree.read(f"org/{org}/guilds/{guild}/facts.md") == b"the facts\n"
    line = next(l for l in mount.log().splitlines() if "refused unlink" in l)
    assert f"org/{org}/agents/{agent}/task.md" in line and "EBUSY" in line
    # Not deletable by nature: task.md.
    assert "Permission denied" in sh("rm", mount.org / "agents" / str(agent) / "task.md", ok=False).stderr
    # A note nobody embeds goes.
    tree.write(f"org/{org}/loose.md", b"x")
    sh("rm", mount.org / "loose.md")
    with pytest.raises(NotFound):
        tree.stat(f"org/{org}/loose.md")


@pytest.mark.parametrize("mode", ["yes", "no", "auto"])
def test_vim_saves_are_one_version_each(mount: Mount, mode: str) -> None:
    assert shutil.which("vim"), "vim is needed for the editor tests (apt-get install vim)"
    org = mount.boot["org_id"]
    path = f"org/{org}/vim.md"
    mount.tree.write(path, b"first line\n")
    before = mount.versions(path)
    note = mount.org / "vim.md"
    sh("vim", "-es", "-u", "NONE", "-c", f"set backupcopy={mode}", "-c", "normal Gosecond line",
       "-c", "wq", note)
    assert note.read_text() == "first line\nsecond line\n"
    assert mount.tree.read(path) == b"first line\nsecond line\n"
    assert mount.versions(path) == before + 1
    # vim's backup, swap and probe files never become notes, and are gone afterwards.
    assert sorted(os.listdir(mount.org)) == ["agents", "collections", "guilds", "vim.md"]


def test_replace_sed_and_truncate_saves_are_one_version_each(mount: Mount) -> None:
    org = mount.boot["org_id"]
    path = f"org/{org}/doc.md"
    note = mount.org / "doc.md"
    mount.tree.write(path, b"one\n")

    def saves(action: Any) -> int:
        before = mount.versions(path)
        action()
        return mount.versions(path) - before

    def replace() -> None:
        tmp = mount.org / "doc.md.tmp"
        tmp.write_text("two\n")
        os.replace(tmp, note)
    assert saves(replace) == 1 and mount.tree.read(path) == b"two\n"

    assert saves(lambda: sh("sed", "-i", "s/two/three/", note)) == 1
    assert mount.tree.read(path) == b"three\n"

    assert saves(lambda: note.write_text("four\n")) == 1            # open(O_TRUNC), write
    assert mount.tree.read(path) == b"four\n"

    def ftruncate_then_write() -> None:
        with open(note, "r+b") as f:
            f.truncate(0)
            f.write(b"five\n")
    assert saves(ftruncate_then_write) == 1 and mount.tree.read(path) == b"five\n"

    assert saves(lambda: sh("bash", "-c", f"echo six > '{note}'")) == 1   # the shell's dup2 then write
    assert saves(lambda: sh("bash", "-c", f"echo seven >> '{note}'")) == 1
    assert mount.tree.read(path) == b"six\nseven\n"
    assert sh("cat", note).stdout == "six\nseven\n"
    assert sorted(os.listdir(mount.org)) == ["agents", "collections", "doc.md", "guilds"]


def test_a_temp_file_written_twice_keeps_both_writes(mount: Mount) -> None:
    """A temp file the mount holds in memory, closed and opened again for more (`>` then `>>`,
    a program writing its temp file in two goes), holds both writes, and renaming it over a note
    saves both. A temp file whose write passed the 256 KB cap is not renamed over the note."""
    org = mount.boot["org_id"]
    path = f"org/{org}/plan.md"
    mount.tree.write(path, b"v1\n")
    before = mount.versions(path)
    tmp = mount.org / "plan.tmp"
    with open(tmp, "wb") as f:
        f.write(b"a\n")
    with open(tmp, "ab") as f:
        f.write(b"b\n")
    assert tmp.read_bytes() == b"a\nb\n"
    # Read, then opened for more again: the reader's close leaves it held as it was (the
    # writability check asked the store, which has not got the file yet: ENOENT).
    with open(tmp, "ab") as f:
        f.write(b"c\n")
    assert tmp.read_bytes() == b"a\nb\nc\n"
    os.replace(tmp, mount.org / "plan.md")
    assert (mount.org / "plan.md").read_bytes() == b"a\nb\nc\n"
    assert mount.tree.read(path) == b"a\nb\nc\n" and mount.versions(path) - before == 1

    big = mount.org / "big.tmp"
    fd = os.open(big, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.write(fd, b"x" * 1000)
    rest = b"y" * 262_144
    with pytest.raises(OSError) as refused:
        while rest:  # the kernel takes a long write in pieces: the one past the cap is refused
            rest = rest[os.write(fd, rest):]
    assert refused.value.errno == errno.EFBIG
    try:
        os.close(fd)  # (a held temp file reports the refusal at its rename, not at close)
    except OSError as exc:
        assert exc.errno == errno.EFBIG
    with pytest.raises(OSError):
        os.replace(big, mount.org / "plan.md")
    assert mount.tree.read(path) == b"a\nb\nc\n" and mount.versions(path) - before == 1


def test_temp_file_saves_and_temp_files_left_behind(mount: Mount) -> None:
    """An atomic save (mkstemp, write, fsync, close, rename over the note) is one version of the
    note; a temp file the program closes and never renames still reaches the user's scratch area
    (the mount holds it in memory only until the rename that usually follows), and so does one
    still held when the mount is stopped."""
    org = mount.boot["org_id"]
    path = f"org/{org}/plan.md"
    mount.tree.write(path, b"v1\n")
    before = mount.versions(path)
    for text in (b"v2\n", b"v3\n"):
        fd, tmp = tempfile.mkstemp(dir=mount.org)
        os.write(fd, text)
        os.fsync(fd)
        os.close(fd)
        assert Path(tmp).read_bytes() == text      # readable through the mount before the rename
        os.replace(tmp, mount.org / "plan.md")
        assert not Path(tmp).exists()
        assert (mount.org / "plan.md").read_bytes() == text
    assert mount.versions(path) - before == 2 and mount.tree.read(path) == b"v3\n"
    assert sorted(os.listdir(mount.org)) == ["agents", "collections", "guilds", "plan.md"]

    fd, kept = tempfile.mkstemp(dir=mount.org)
    os.write(fd, b"left behind\n")
    os.close(fd)
    name = Path(kept).name
    def in_scratch() -> bool:
        try:
            return mount.tree.read(f"org/{org}/{name}") == b"left behind\n"
        except NotFound:
            return False
    eventually(in_scratch, 10.0)
    assert (mount.org / name).read_bytes() == b"left behind\n"

    fd, last = tempfile.mkstemp(dir=mount.org)
    os.write(fd, b"written just before unmount\n")
    os.close(fd)
    unmount(mount.root, mount.proc)
    assert mount.proc.returncode == 0
    assert mount.tree.read(f"org/{org}/{Path(last).name}") == b"written just before unmount\n"
    assert mount.versions(path) - before == 2


def test_an_editor_save_asks_the_store_once(db: Database, db_url: str, boot: dict[str, Any],
                                           tmp_path: Path) -> None:
    """An atomic save (mkstemp, write, fsync, close, rename over the note) is one store call: the
    rename's write. The folder's attributes, which the kernel asks for again after every create
    and rename, are answered by the mount itself, and the save's own change event costs nothing,
    so a save costs its one transaction and no more (the mount's -v log names every store call
    and every change event)."""
    tree = HostTree(db, Door(db).principal_for_email(boot["email"]))  # type: ignore[arg-type]
    for k in range(3):
        tree.write(f"org/{boot['org_id']}/s{k}.md", b"first\n")
    mountpoint, log_path = tmp_path / "mnt", tmp_path / "mount.log"
    mountpoint.mkdir()
    proc = start_mount(mountpoint, db_url, boot["email"], log_path, "-v")
    try:
        wait_mounted(mountpoint, proc, log_path)
        folder = mountpoint / "org" / str(boot["org_id"])
        os.listdir(folder)  # what a save's name lookups are answered from
        # ... for as long as the change feed is up, not for a few seconds: a save a while after the
        # folder was listed asks nothing about its names either.
        time.sleep(UNFOLLOWED_LISTING_SECONDS + 1)
        start = len(log_path.read_bytes())

        def calls() -> list[str]:
            text = log_path.read_bytes()[start:].decode()
            return [line.split("store call: ", 1)[1] for line in text.splitlines() if "store call: " in line]

        def kinds() -> list[str]:
            return [c.split(" ", 1)[0] for c in calls()]

        def events() -> list[str]:
            text = log_path.read_bytes()[start:].decode()
            return [line.split("change event: ", 1)[1] for line in text.splitlines()
                    if "change event: " in line]
        # Each save's own change event comes back and is told apart from a change made elsewhere
        # without a store call (by the order events come in): the kernel keeps the pages it was
        # given, and nothing is asked for the event.
        for k in range(3):
            fd, tmp = tempfile.mkstemp(dir=folder)
            os.write(fd, f"save {k}\n".encode())
            os.fsync(fd)
            os.close(fd)
            os.replace(tmp, folder / f"s{k}.md")
            eventually(lambda: len(events()) == k + 1, 5.0)
        assert kinds() == ["rename"] * 3, calls()
        assert [e.split(" ", 1)[0] for e in events()] == [f"org/{boot['org_id']}/s{k}.md" for k in range(3)]
        start = len(log_path.read_bytes())
        assert [(folder / f"s{k}.md").read_bytes() for k in range(3)] == [f"save {k}\n".encode() for k in range(3)]
        assert calls() == [], "reading what this mount just saved asks the store nothing"
        # The same note saved twice more: the kernel asks for the note's name before each rename
        # over it, and the kept listing (which each save updates) answers it.
        for k in range(2):
            fd, tmp = tempfile.mkstemp(dir=folder)
            os.write(fd, f"again {k}\n".encode())
            os.close(fd)
            os.replace(tmp, folder / "s0.md")
            eventually(lambda: len(events()) == k + 1, 5.0)
        assert (folder / "s0.md").read_bytes() == b"again 1\n"
        assert kinds() == ["rename"] * 2, calls()
        # Saves back to back, as an editor's autosave or a script makes them: a save's own event
        # often comes back before its write has returned to the mount. Its change id (heard as
        # the write commits) still tells it apart: nothing is dropped, and the next save's name
        # lookups are answered from memory, every time.
        start = len(log_path.read_bytes())
        for k in range(40):
            fd, tmp = tempfile.mkstemp(dir=folder)
            os.write(fd, f"burst {k}\n".encode())
            os.close(fd)
            os.replace(tmp, folder / "s1.md")
        eventually(lambda: len(events()) == 40, 10.0)
        assert kinds() == ["rename"] * 40, calls()
        # ... while a change made elsewhere right after them is still seen.
        tree.write(f"org/{boot['org_id']}/s1.md", b"from elsewhere\n")
        eventually(lambda: (folder / "s1.md").read_bytes() == b"from elsewhere\n", 1.0)
    finally:
        unmount(mountpoint, proc)


def test_a_change_made_elsewhere_right_after_a_save_is_not_taken_for_the_save(mount: Mount) -> None:
    """The mount checks its own saves' change events instead of dropping what the kernel holds;
    a write from elsewhere just after (or just before) the save must still show within a second."""
    org = mount.boot["org_id"]
    note = mount.org / "race.md"
    mount.tree.write(f"org/{org}/race.md", b"start\n")
    for k in range(5):
        fd, tmp = tempfile.mkstemp(dir=mount.org)
        os.write(fd, f"saved here {k}\n".encode())
        os.close(fd)
        os.replace(tmp, note)
        assert note.read_bytes() == f"saved here {k}\n".encode()   # the kernel holds these pages
        mount.tree.write(f"org/{org}/race.md", f"written elsewhere {k}\n".encode())
        eventually(lambda: note.read_bytes() == f"written elsewhere {k}\n".encode(), 1.0)
    for k in range(5):  # elsewhere first, then the save over it: the save is what stays
        mount.tree.write(f"org/{org}/race.md", f"elsewhere first {k}\n".encode())
        fd, tmp = tempfile.mkstemp(dir=mount.org)
        os.write(fd, f"then saved here {k}\n".encode())
        os.close(fd)
        os.replace(tmp, note)
        time.sleep(0.2)  # the events of both have come back
        assert note.read_bytes() == f"then saved here {k}\n".encode()
        assert mount.tree.read(f"org/{org}/race.md") == f"then saved here {k}\n".encode()


def test_two_open_descriptors_of_one_note_both_keep_their_writes(mount: Mount) -> None:
    """As on a disk, the open descriptions of one file share its bytes: two writers of different
    parts both keep theirs, whichever closes last, and two `>>` appenders keep every line (each
    descriptor used to hold its own copy: the last close won, and an appender's copy grew NUL
    bytes up to the kernel's offset and was refused)."""
    org = mount.boot["org_id"]
    note = mount.org / "shared.md"
    note.write_bytes(b"aaaa bbbb cccc\n")
    a, b = os.open(note, os.O_WRONLY), os.open(note, os.O_WRONLY)
    os.pwrite(a, b"AAAA", 0)
    os.pwrite(b, b"CCCC", 10)
    os.close(a)
    os.close(b)
    assert mount.tree.read(f"org/{org}/shared.md") == b"AAAA bbbb CCCC\n"
    log = mount.org / "log.md"
    log.write_bytes(b"")
    first, second = os.open(log, os.O_WRONLY | os.O_APPEND), os.open(log, os.O_WRONLY | os.O_APPEND)
    for i in range(3):
        os.write(first, f"job1 line {i}\n".encode())
        os.write(second, f"job2 line {i}\n".encode())
    os.close(first)
    os.close(second)
    assert mount.tree.read(f"org/{org}/log.md") == b"".join(
        f"job1 line {i}\njob2 line {i}\n".encode() for i in range(3))
    assert "refused" not in mount.log()


def test_a_readers_close_saves_nothing_of_a_writers_unfinished_save(mount: Mount) -> None:
    """Descriptions share a file's body, but only one that changed it commits at its close: a
    `cat` or an indexer closing while a save is under way must not store the half-written (or,
    after O_TRUNC, empty) body as a version."""
    org = mount.boot["org_id"]
    note = mount.org / "midway.md"
    note.write_bytes(b"original\n")
    before = mount.versions(f"org/{org}/midway.md")
    w = os.open(note, os.O_WRONLY | os.O_TRUNC)
    r = os.open(note, os.O_RDONLY)
    os.close(r)
    assert mount.tree.read(f"org/{org}/midway.md") == b"original\n"
    os.write(w, b"XXXX")
    r = os.open(note, os.O_RDONLY)
    assert os.read(r, 100) == b"XXXX"  # as on a disk, a reader sees the bytes written so far
    os.close(r)
    assert mount.tree.read(f"org/{org}/midway.md") == b"original\n"
    os.write(w, b" new\n")
    os.close(w)
    assert mount.tree.read(f"org/{org}/midway.md") == b"XXXX new\n"
    assert mount.versions(f"org/{org}/midway.md") == before + 1


def test_an_appender_appends_to_a_change_made_elsewhere_while_it_was_open(mount: Mount) -> None:
    """A descriptor with no unsaved bytes takes up a change made elsewhere (the event that drops
    the kernel's pages drops its copy too): a long-lived `>>` writer appends to the new text
    instead of saving the text it opened over it."""
    org = mount.boot["org_id"]
    note = mount.org / "journal.md"
    note.write_bytes(b"v1\n")
    fd = os.open(note, os.O_WRONLY | os.O_APPEND)
    try:
        mount.tree.write(f"org/{org}/journal.md", b"v2 from elsewhere, much longer\n")
        eventually(lambda: note.read_bytes() == b"v2 from elsewhere, much longer\n", 1.0)
        os.write(fd, b"appended\n")
    finally:
        os.close(fd)
    assert mount.tree.read(f"org/{org}/journal.md") == b"v2 from elsewhere, much longer\nappended\n"


def test_an_append_right_after_a_change_elsewhere_keeps_that_change(mount: Mount) -> None:
    """`>>` opened before the event of a change made elsewhere has come back (10-20 ms after an
    agent's note_write) appends to the store's text, not to the copy the mount keeps: it used to
    save the text from before that change with its line added, and the change was lost. The
    change here is made in SQL with no event at all, which stands for an event still on its way.
    Repeated: the event of the mount's own previous `>>` save (not told for its own while another
    description is open) can come back between this `>>`'s open and its write, and the write used
    to refill the body it emptied from the mount's copy (about one round in ten lost a change)."""
    org = mount.boot["org_id"]
    note = mount.org / "relay.md"
    path = f"org/{org}/relay.md"
    note.write_bytes(b"base\n")
    assert note.read_bytes() == b"base\n"

    def append_elsewhere(text: str) -> None:
        with mount.db.connection() as conn:
            conn.execute("UPDATE artifacts SET content = content || %s, version = version + 1"
                         " WHERE display_path = %s AND deleted_at IS NULL", (text, path))

    append_elsewhere("from the agent\n")
    with open(note, "ab") as f:
        f.write(b"from the shell\n")
    assert mount.tree.read(path) == b"base\nfrom the agent\nfrom the shell\n"
    for n in range(20):
        # While a reader holds the file open with the text it read (the body the `>>` shares).
        with open(note, "rb") as reader:
            assert reader.read() == mount.tree.read(path)
            append_elsewhere(f"agent again {n}\n")
            with open(note, "ab") as f:
                f.write(b"shell again %d\n" % n)
        assert mount.tree.read(path).endswith(b"agent again %d\nshell again %d\n" % (n, n)), n
        # And while a writer that has saved everything holds it (an earlier `>>` whose close the
        # kernel has not passed on yet looks the same).
        idle = os.open(note, os.O_WRONLY | os.O_APPEND)
        try:
            append_elsewhere(f"agent last {n}\n")
            with open(note, "ab") as f:
                f.write(b"shell last %d\n" % n)
        finally:
            os.close(idle)
        assert mount.tree.read(path).endswith(b"shell again %d\nagent last %d\nshell last %d\n" % (n, n, n)), n


def test_rsync_a_cp_a_and_install_m_copy_in_though_modes_stay_the_trees(mount: Mount, tmp_path: Path) -> None:
    """Tools that copy a file's mode as part of a copy: rsync -a (its temp file's fchmod) copied
    nothing and exited 23, cp -a and install -m saved the note and exited 1, since a mode change
    was refused. A mode change is taken and has no effect: every note still shows the tree's mode."""
    org, guild = mount.boot["org_id"], mount.boot["guild_id"]
    folder = mount.org / "guilds" / str(guild)
    src = tmp_path / "src"
    src.mkdir()
    (src / "one.md").write_text("one\n")
    (src / "two.md").write_text("two\n")
    (src / "two.md").chmod(0o600)
    sh("rsync", "-a", f"{src}/", f"{folder}/")
    assert mount.tree.read(f"org/{org}/guilds/{guild}/one.md") == b"one\n"
    assert mount.tree.read(f"org/{org}/guilds/{guild}/two.md") == b"two\n"
    assert sorted(n for n in os.listdir(folder) if n.endswith(".md")) == ["one.md", "two.md"]  # no temp files
    sh("cp", "-a", src / "two.md", folder / "kept.md")
    sh("install", "-m", "600", src / "one.md", folder / "installed.md")
    assert mount.tree.read(f"org/{org}/guilds/{guild}/installed.md") == b"one\n"
    modes = {stat.S_IMODE((folder / n).stat().st_mode) for n in ("one.md", "two.md", "kept.md", "installed.md")}
    assert len(modes) == 1 and modes != {0o600}, modes


def test_after_a_refused_save_the_mount_shows_what_the_store_holds(mount: Mount) -> None:
    """A save the store refuses (bytes that are not UTF-8) reaches the writer at close, and the
    kernel then forgets the refused bytes: cat and stat show the note as it is stored."""
    org = mount.boot["org_id"]
    note = mount.org / "kept.md"
    note.write_bytes(b"hello world\n")
    assert note.read_bytes() == b"hello world\n"
    fd = os.open(note, os.O_WRONLY)
    os.pwrite(fd, b"\xff", 0)
    with pytest.raises(OSError) as refused:
        os.close(fd)
    assert refused.value.errno == errno.EINVAL
    assert mount.tree.read(f"org/{org}/kept.md") == b"hello world\n"
    assert note.read_bytes() == b"hello world\n" and note.stat().st_size == 12


def test_agent_note_write_shows_up_within_a_second(mount: Mount) -> None:
    org, guild, agent = mount.boot["org_id"], mount.boot["guild_id"], mount.boot["agent_id"]
    folder = mount.org / "guilds" / str(guild)
    mount.tree.write(f"org/{org}/guilds/{guild}/status.md", b"old\n")
    assert (folder / "status.md").read_text() == "old\n"   # now cached by the kernel
    assert "fresh.md" not in os.listdir(folder)

    tools.call(mount.db, mount.principal, agent, "note_write",
               {"level": "guild", "key": "status.md", "content": "new from the agent\n"})
    tools.call(mount.db, mount.principal, agent, "note_write",
               {"level": "guild", "key": "fresh.md", "content": "hello\n"})
    eventually(lambda: (folder / "status.md").read_text() == "new from the agent\n", 1.0)
    eventually(lambda: "fresh.md" in os.listdir(folder), 1.0)

    tools.call(mount.db, mount.principal, agent, "note_delete", {"path": f"org/{org}/guilds/{guild}/fresh.md"})
    eventually(lambda: "fresh.md" not in os.listdir(folder), 1.0)


def test_side_files_from_the_users_other_clients_show_within_a_second(mount: Mount) -> None:
    """The mount keeps a folder's listing until a change event says otherwise; the user's side
    files from another client (Finder's ._x over WebDAV, a rename-away save by vim on davfs2)
    send theirs to this user's mount, so they show (and hide) at once in a folder listed before."""
    org = mount.boot["org_id"]
    mount.tree.write(f"org/{org}/kept.md", b"kept\n")
    assert "._kept.md" not in os.listdir(mount.org)   # (a listing the mount may keep)
    mount.tree.write(f"org/{org}/._kept.md", b"finder's metadata")
    eventually(lambda: "._kept.md" in os.listdir(mount.org), 1.0)
    assert (mount.org / "._kept.md").read_bytes() == b"finder's metadata"
    assert (mount.org / "kept.md").read_bytes() == b"kept\n"      # kept by the mount's content cache
    mount.tree.move(f"org/{org}/kept.md", f"org/{org}/kept.md~")   # a rename-away save begins
    eventually(lambda: not (mount.org / "kept.md").exists(), 1.0)  # (not answered from that cache)
    assert "kept.md" not in os.listdir(mount.org) and "kept.md~" in os.listdir(mount.org)
    mount.tree.write(f"org/{org}/kept.md", b"saved again\n")       # ... and ends
    eventually(lambda: "kept.md" in os.listdir(mount.org), 1.0)
    assert (mount.org / "kept.md").read_bytes() == b"saved again\n"
    mount.tree.delete(f"org/{org}/._kept.md")
    eventually(lambda: "._kept.md" not in os.listdir(mount.org), 1.0)


def test_a_rename_away_on_the_mount_ended_by_a_save_elsewhere_shows_the_saved_note(mount: Mount) -> None:
    """`mv hid.md hid.md~` on the mount hides the note for this user (a rename-away save begins);
    a save from another client of theirs (WebDAV) ends the hiding in the store. The mount had
    remembered the hiding itself and answered ENOENT for the listed note for the whole save
    window (two minutes); it asks the store."""
    org, guild = mount.boot["org_id"], mount.boot["guild_id"]
    folder, path = mount.org / "guilds" / str(guild), f"org/{org}/guilds/{guild}/hid.md"
    (folder / "hid.md").write_bytes(b"v1\n")
    assert (folder / "hid.md").read_bytes() == b"v1\n"
    os.rename(folder / "hid.md", folder / "hid.md~")
    assert not (folder / "hid.md").exists()
    mount.tree.write(path, b"saved from webdav\n")     # another process: the test's, as a gateway
    eventually(lambda: "hid.md" in os.listdir(folder), 1.0)
    assert (folder / "hid.md").read_bytes() == b"saved from webdav\n"
    (folder / "hid.md").write_bytes(b"saved on the mount\n")
    assert mount.tree.read(path) == b"saved on the mount\n"


def test_a_listing_is_kept_no_longer_than_a_hiding_it_shows(mount: Mount) -> None:
    """A rename-away save that is never finished hides its note for the save window only; the end
    of the window sends no event, so a kept listing that hides the note ends with it."""
    org = mount.boot["org_id"]
    mount.tree.write(f"org/{org}/left.md", b"left alone\n")
    mount.tree.move(f"org/{org}/left.md", f"org/{org}/left.md~")
    with mount.db.connection() as conn:  # the save window, made short (this announces the change)
        conn.execute("UPDATE scratch_files SET hides_until = now() + interval '4 seconds'"
                     " WHERE origin = %s", (f"org/{org}/left.md",))
    eventually(lambda: "left.md" not in os.listdir(mount.org), 2.0)  # listed (and kept) while hidden
    eventually(lambda: "left.md" in os.listdir(mount.org), 8.0)
    assert (mount.org / "left.md").read_bytes() == b"left alone\n"


def test_a_change_made_while_the_mount_was_not_listening_shows_once_it_listens_again(mount: Mount) -> None:
    """The mount's one LISTEN connection (its change feed, which also keeps its content cache)
    is cut; a change made before it is back sends its event to nobody. Once the feed is back, the
    mount drops everything it kept (kernel and content cache), so the change shows, and changes
    after that show as they happen."""
    org, guild = mount.boot["org_id"], mount.boot["guild_id"]
    path, file = f"org/{org}/guilds/{guild}/status.md", mount.org / "guilds" / str(guild) / "status.md"
    mount.tree.write(path, b"before\n")
    # An open description holding the bytes it read (opened first, so the read reaches the mount
    # rather than the kernel's pages); the opens that follow share them.
    reader = open(file, "rb", buffering=0)
    assert os.pread(reader.fileno(), 100, 0) == b"before\n"
    assert file.read_text() == "before\n"
    assert file.read_text() == "before\n"   # kept by the kernel and the mount's content cache
    with mount.db.connection() as conn:
        cut = conn.execute("SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity"
                           " WHERE datname = current_database() AND query LIKE 'LISTEN %%'"
                           " AND pid <> pg_backend_pid()").fetchall()
    assert len(cut) == 1, "the mount listens on one connection"
    mount.tree.write(path, b"while cut\n")
    eventually(lambda: file.read_text() == "while cut\n", 15.0)
    # (The change can show before the feed is back: while it is down the content cache is off
    # and a read may reach the store. The feed comes back after its 2 s retry, later on a busy
    # machine, and must come back for the change after it to show.)
    eventually(lambda: "listening again" in mount.log(), 15.0)
    # An appender opened now shares the reader's description of the file, which must not be the
    # bytes from before the missed change.
    with open(file, "ab") as appender:
        appender.write(b"appended\n")
    reader.close()
    assert mount.tree.read(path) == b"while cut\nappended\n"
    mount.tree.write(path, b"after\n")
    eventually(lambda: file.read_text() == "after\n", 1.0)


def test_folders_that_change_without_an_event_are_never_answered_from_an_old_listing(mount: Mount) -> None:
    """A guild or agent created after `ls` (no file event announces it) is there at once, and a
    memory save's new history-archive file is listed at once: the mount keeps no listing of the
    folders whose entries change without an event (guilds/, agents/, history-archive/)."""
    org, agent = mount.boot["org_id"], mount.boot["agent_id"]
    archive = mount.org / "agents" / str(agent) / "history-archive"
    before_guilds, before_agents = os.listdir(mount.org / "guilds"), os.listdir(mount.org / "agents")
    assert os.listdir(archive) == []
    guild = admin.create_guild(mount.db, org_id=org, name="Created after ls")
    new_agent = admin.create_agent(mount.db, org_id=org, guild_id=guild["id"], name="Also after ls")
    (mount.org / "agents" / str(new_agent["id"]) / "task.md").write_text("first task\n")
    (mount.org / "guilds" / str(guild["id"]) / "plan.md").write_text("plan\n")
    assert mount.tree.read(f"org/{org}/agents/{new_agent['id']}/task.md") == b"first task\n"
    assert sorted(os.listdir(mount.org / "guilds")) == sorted(before_guilds + [str(guild["id"])])
    assert sorted(os.listdir(mount.org / "agents")) == sorted(before_agents + [str(new_agent["id"])])
    mount.tree.write(f"org/{org}/agents/{agent}/memory.md", b"first memory\n")
    mount.tree.write(f"org/{org}/agents/{agent}/memory.md", b"second memory\n")
    [kept] = os.listdir(archive)
    assert (archive / kept).read_bytes() == b"first memory\n"


def test_killed_mount_writes_no_partial_note_and_mounts_again(db: Database, db_url: str,
                                                              boot: dict[str, Any], tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log_path = tmp_path / "mount.log"
    org = boot["org_id"]
    proc = start_mount(mountpoint, db_url, boot["email"], log_path)
    try:
        wait_mounted(mountpoint, proc, log_path)
        # A writer in another process, killed with the mount before it closes the file.
        writer = subprocess.Popen([sys.executable, "-c", (
            "import sys, time\n"
            f"f = open({str(mountpoint / 'org' / str(org) / 'half.md')!r}, 'w')\n"
            "f.write('half of it'); f.flush()\n"
            "print('written', flush=True)\n"
            "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
        proc.kill()
        proc.wait(10)
        writer.kill()
        writer.wait(10)
        principal = Door(db).principal_for_email(boot["email"])
        with pytest.raises(NotFound):
            HostTree(db, principal).stat(f"org/{org}/half.md")  # type: ignore[arg-type]

        assert _stale(mountpoint) or os.path.ismount(mountpoint)
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=True)
        proc = start_mount(mountpoint, db_url, boot["email"], log_path)
        wait_mounted(mountpoint, proc, log_path)
        assert "half.md" not in os.listdir(mountpoint / "org" / str(org))
        (mountpoint / "org" / str(org) / "whole.md").write_text("all of it\n")
        assert HostTree(db, principal).read(f"org/{org}/whole.md") == b"all of it\n"  # type: ignore[arg-type]
    finally:
        unmount(mountpoint, proc)


def test_sigterm_and_fusermount_end_it_cleanly(db_url: str, boot: dict[str, Any], tmp_path: Path) -> None:
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    log_path = tmp_path / "mount.log"
    proc = start_mount(mountpoint, db_url, boot["email"], log_path)
    try:
        wait_mounted(mountpoint, proc, log_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert not os.path.ismount(mountpoint) and os.listdir(mountpoint) == []

        proc = start_mount(mountpoint, db_url, boot["email"], log_path)
        wait_mounted(mountpoint, proc, log_path)
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)
        assert proc.wait(15) == 0
        assert not os.path.ismount(mountpoint)
    finally:
        unmount(mountpoint, proc)


def test_refusals_before_mounting(db_url: str, boot: dict[str, Any], tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gateway", "mount", *args, "--database-url", db_url],
                              cwd=REPO, capture_output=True, text=True, timeout=60)

    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("x")
    done = run(str(full), "--user", boot["email"])
    assert done.returncode == 1
    assert done.stderr.strip() == (f"hostfinder: the mount point {full} is not an empty directory: mount onto an "
                                   "empty one, so that no files are hidden under the mount")

    empty = tmp_path / "empty"
    empty.mkdir()
    done = run(str(empty), "--user", "nobody@example.com")
    assert done.returncode == 1 and done.stderr.startswith("hostfinder: no user has the email nobody@example.com")
    assert len(done.stderr.strip().splitlines()) == 1

    done = run(str(empty), "--user", boot["email"], "--org", "999")
    assert done.returncode == 1 and "is not a member of organisation 999" in done.stderr

    done = run(str(tmp_path / "nowhere"), "--user", boot["email"])
    assert done.returncode == 1 and "does not exist" in done.stderr
    assert not os.path.ismount(empty)

    with pytest.raises(MountError, match="is missing, so this system offers no FUSE"):
        check_fuse(str(tmp_path / "no-fuse-device"))
