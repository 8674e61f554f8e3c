"""The FUSE mount against local disk, measured the way a user meets it: `ls -l` of a 10 000-note
folder, reading every note once, `grep -r`, 200 editor saves (temp file, fsync, rename over), and
how soon a change made elsewhere shows through the mount, each as a ratio to the same work on the
same files in a local folder.

    .venv/bin/python -m bench.fuse [--notes 10000] [--peer rclone] [--peer floor] [--peer floor-noopen]
                                   [--requests] [--no-fsync]
    (HOSTFINDER_BENCH_DATABASE_URL: use that server)

The notes are bench.dav's, 1-4 KB of prose-like text each (until 3 December they were one
150-byte sentence), written through a first mount (as a user's are); then that mount is stopped
and a fresh `hostfinder mount` with its default options is measured: nothing is warm that a
user's first `ls -l` after mounting would not find warm. ``--peer rclone`` mounts a copy of the
local folder with `rclone mount --vfs-cache-mode writes` beside it: another FUSE file system in a
user-space process over the same files, so its ratio shows what the FUSE round trips cost with a
fast backend (a local disk), and ours shows what the store adds on top. ``--peer floor`` mounts
the smallest pyfuse3 file system that can run these operations (``Floor`` below: the same files in
memory, the same cache timeouts and keep_cache as the mount, no store, no checks): the ratio no
pyfuse3 mount can go below on this machine, what the kernel's requests and pyfuse3's trio loop
cost by themselves.
``--peer floor-noopen`` is that file system answering OPEN with ENOSYS, after which the kernel
sends no OPEN or RELEASE for any file again (zero-message opens, libfuse's
FUSE_CAP_NO_OPEN_SUPPORT): its timings show what that would save, and the check printed after
the table shows why the mount cannot use it with pyfuse3 3.5 (every file's READ, WRITE and FLUSH
then carry fh 0 and pyfuse3 hands the handler no inode, so it cannot tell which file is meant;
and libfuse's default atomic O_TRUNC lets the kernel skip truncating at all).
``--requests`` lists the kernel's requests for one read, one `cat`, one editor save and one `>`
through each pyfuse3 mount, read off its /dev/fuse with strace, each with the inode it names and a
LOOKUP with the name (``GETATTR(3) LOOKUP(3 note.md)``: the folder's attributes, then a name in it).

Without a URL it starts a private PostgreSQL in a temporary directory and removes it afterwards:
it flushes every commit to disk, as the embedded one of `hostfinder serve` does (an editor's save
through the mount waits for that, as the local folder's fsync waits for the disk); ``--no-fsync``
runs it as the tests do. Needs /dev/fuse."""
from __future__ import annotations

import argparse
import errno
import functools
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.dav import note as prose  # noqa: E402
from bench.harness import add_fsync_option, bench_database, say_durability  # noqa: E402
from store import admin  # noqa: E402
from store.access import Door  # noqa: E402
from store.db import Database  # noqa: E402
from store.host import HostTree  # noqa: E402

SAVES = 200
VISIBILITY_PROBES = 10


@functools.cache
def body(i: int, edit: int = 0) -> bytes:
    """Note ``i`` as bench.dav writes it (1-4 KB of prose-like text: the issue's notes, and a
    save's search vector costs what a person's does), every hundredth with the word `grep -r`
    looks for; ``edit``: a save's version of it. Kept once made: the saves' bodies are made
    before the clock starts (main), as bench.dav's are."""
    text = prose(i).encode() + (b"needle\n" if i % 100 == 0 else b"")
    return text + (f"edit {edit}\n".encode() if edit else b"")


def timed(fn: Callable[[], object], runs: int = 3) -> tuple[float, float]:
    """(first run, best of ``runs``) in seconds: the first meets whatever the fresh mount has
    cached, the best is the warm figure least disturbed by other work on the machine."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times[0], min(times)


def ls_l(folder: Path) -> None:
    subprocess.run(["ls", "-l", str(folder)], check=True, stdout=subprocess.DEVNULL)


def read_all(folder: Path) -> int:
    total = 0
    for name in os.listdir(folder):
        if not name.endswith(".md"):
            continue  # agents/, guilds/, collections/ beside the notes
        with open(folder / name, "rb") as f:
            total += len(f.read())
    return total


def grep_r(folder: Path) -> None:
    subprocess.run(["grep", "-r", "needle", str(folder)], stdout=subprocess.DEVNULL)


def editor_saves(folder: Path, count: int = SAVES, *, one_note: bool = False) -> None:
    """What atomic-save editors and libraries do: a temp file beside the note (Python's mkstemp
    name), write, fsync, close, rename over the note. ``one_note``: every save over the same note,
    as a person editing one file does (each save then meets the one before it)."""
    for k in range(count):
        fd, tmp = tempfile.mkstemp(dir=folder)
        try:
            os.write(fd, body(k, edit=k + 1))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, folder / f"note-{1 if one_note else k:05d}.md")


def wait_mounted(mountpoint: Path, proc: subprocess.Popen, log: Path) -> bool:
    deadline = time.monotonic() + 60
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None or time.monotonic() > deadline:
            print(log.read_text(errors="replace"), file=sys.stderr)
            return False
        time.sleep(0.05)
    return True


def stop(proc: subprocess.Popen | None, mountpoint: Path) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    if os.path.ismount(mountpoint) or _dead_mount(mountpoint):
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)


def _dead_mount(path: Path) -> bool:
    """A mount whose process is gone (stat says "transport endpoint is not connected"), which
    os.path.ismount does not count as a mount."""
    try:
        os.stat(path)
        return False
    except OSError as exc:
        return exc.errno == errno.ENOTCONN


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--peer", choices=["rclone", "floor", "floor-noopen"], action="append", default=[],
                        help="also measure `rclone mount --vfs-cache-mode writes` of a copy of the local folder "
                             "(rclone), or a do-nothing pyfuse3 file system over it (floor)")
    parser.add_argument("--requests", action="store_true",
                        help="list the FUSE requests of a few single operations (needs strace)")
    parser.add_argument("--serve-floor", nargs=2, metavar=("SOURCE", "MOUNTPOINT"), help=argparse.SUPPRESS)
    parser.add_argument("--no-open", action="store_true", help=argparse.SUPPRESS)
    add_fsync_option(parser)
    args = parser.parse_args()
    if args.serve_floor:
        return serve_floor(*args.serve_floor, no_open=args.no_open)
    if not os.path.exists("/dev/fuse"):
        print("bench/fuse.py: /dev/fuse is missing; the mount benchmark needs FUSE", file=sys.stderr)
        return 1
    if args.requests and shutil.which("strace") is None:
        print("bench/fuse.py: --requests needs strace on PATH", file=sys.stderr)
        return 1
    if "rclone" in args.peer and shutil.which("rclone") is None:
        print("bench/fuse.py: --peer rclone needs rclone on PATH", file=sys.stderr)
        return 1

    work = Path(tempfile.mkdtemp(prefix="hostfinder-bench-fuse-"))
    os.chmod(work, 0o755)
    try:
        with bench_database("hf_bench_fuse", durable=args.fsync) as url:
            say_durability(url)
            return mount_and_measure(args, url, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_hostfinder(url: str, mountpoint: Path, log: Path) -> subprocess.Popen:
    mountpoint.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "gateway", "mount", str(mountpoint), "--user",
                             "bench@example.com", "--database-url", url], cwd=REPO,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def start_gateway(url: str, work: Path, procs: list) -> requests.Session:
    """`hostfinder serve` on the bench database; a session with the bench user's Basic auth whose
    ``base`` is the gateway's URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = work / "gateway.log"
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1",
                             "--no-demo", "--database-url", url], cwd=REPO, stdout=open(log, "ab"),
                            stderr=subprocess.STDOUT)
    procs.append((proc, work / "no-mount"))
    session = requests.Session()
    session.auth = ("bench@example.com", "bench password")
    session.base = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while True:
        try:
            session.request("OPTIONS", f"{session.base}/dav/", timeout=2)  # type: ignore[attr-defined]
            return session
        except requests.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start:\n{log.read_text(errors='replace')}") from None
            time.sleep(0.1)


def mount_and_measure(args: argparse.Namespace, url: str, work: Path) -> int:
    procs: list[tuple[subprocess.Popen | None, Path]] = []
    servers: dict[str, int] = {}  # pyfuse3 mounts: target name -> the process answering its requests
    try:
        with Database(url, min_size=1, max_size=4) as db:
            boot = admin.bootstrap(db, email="bench@example.com", password="bench password")
            principal = Door(db).principal_for_email("bench@example.com")
            org = boot["org_id"]

            # The notes, written through a first mount as a user would (cp, an editor).
            seed_mnt, log = work / "seed", work / "mount.log"
            proc = start_hostfinder(url, seed_mnt, log)
            procs.append((proc, seed_mnt))
            if not wait_mounted(seed_mnt, proc, log):
                return 1
            start = time.perf_counter()

            def write(chunk: range) -> None:
                for i in chunk:
                    (seed_mnt / "org" / str(org) / f"note-{i:05d}.md").write_bytes(body(i))
            step = max(1, args.notes // 8)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(write, [range(s, min(s + step, args.notes)) for s in range(0, args.notes, step)]))
            print(f"wrote {args.notes} notes through a mount in {time.perf_counter() - start:.1f} s", flush=True)
            stop(proc, seed_mnt)

            local = work / "local"
            local.mkdir()
            for i in range(args.notes):
                (local / f"note-{i:05d}.md").write_bytes(body(i))
            targets: dict[str, Path] = {"local": local}

            mnt = work / "mnt"
            proc = start_hostfinder(url, mnt, log)
            procs.append((proc, mnt))
            if not wait_mounted(mnt, proc, log):
                return 1
            targets["hostfinder"] = mnt / "org" / str(org)
            servers["hostfinder"] = proc.pid

            if "rclone" in args.peer:
                source, rmnt = work / "rclone-source", work / "rclone-mnt"
                shutil.copytree(local, source)
                rmnt.mkdir()
                rlog = work / "rclone.log"
                rproc = subprocess.Popen(["rclone", "mount", str(source), str(rmnt), "--vfs-cache-mode", "writes",
                                          "--cache-dir", str(work / "rclone-cache")],
                                         stdout=open(rlog, "ab"), stderr=subprocess.STDOUT)
                procs.append((rproc, rmnt))
                if not wait_mounted(rmnt, rproc, rlog):
                    return 1
                targets["rclone"] = rmnt

            for peer in [p for p in ("floor", "floor-noopen") if p in args.peer]:
                fmnt, flog = work / f"{peer}-mnt", work / f"{peer}.log"
                fmnt.mkdir()
                fproc = subprocess.Popen([sys.executable, "-m", "bench.fuse", "--serve-floor", str(local), str(fmnt)]
                                         + (["--no-open"] if peer == "floor-noopen" else []),
                                         cwd=REPO, stdout=open(flog, "ab"), stderr=subprocess.STDOUT)
                procs.append((fproc, fmnt))
                if not wait_mounted(fmnt, fproc, flog):
                    return 1
                targets[peer] = fmnt
                servers[peer] = fproc.pid

            rows: list[tuple[str, Callable[[Path], object], int]] = [
                (f"ls -l, {args.notes} notes", ls_l, 3),
                ("read every note once", read_all, 3),
                ("grep -r over the notes", grep_r, 3),
                (f"{SAVES} editor saves", editor_saves, 1),
                (f"{SAVES} saves of one note", lambda folder: editor_saves(folder, one_note=True), 1),
            ]
            for k in range(SAVES):   # the saves' bodies, made before any clock starts
                body(k, edit=k + 1)
            names = list(targets)
            header = f"{'operation':<26}" + "".join(f"{n + ' 1st':>16}{n:>11}" for n in names)
            header += "".join(f"{n + ' ratio':>18}" for n in names if n != "local")
            print("\n" + header)
            for label, fn, runs in rows:
                best: dict[str, float] = {}
                line = f"{label:<26}"
                for name in names:  # the local reference first, then each mount, in the same minute
                    first, best[name] = timed(lambda: fn(targets[name]), runs)
                    line += f"{first * 1000:>14.0f}ms{best[name] * 1000:>9.0f}ms"
                line += "".join(f"{best[n] / best['local']:>17.1f}x" for n in names if n != "local")
                if "saves" in label:  # the local disk's fsync varies a lot: the mount's own figure too
                    line += "".join(f"  {n} {best[n] * 1000 / SAVES:.2f} ms a save" for n in names if n != "local")
                print(line, flush=True)

            if args.requests:
                print()
                for name, pid in servers.items():
                    count_requests(name, pid, targets[name])
            if "floor-noopen" in targets:
                check_no_open(targets["floor-noopen"], args.notes)

            # A change made elsewhere: a WebDAV PUT to a gateway on the same database, and the
            # store's own write from this process (what the API's tool route runs): how long
            # until the mount shows the new bytes, the kernel having held the old ones.
            gateway = start_gateway(url, work, procs)
            tree = HostTree(db, principal)  # type: ignore[arg-type]

            def put(name: str, data: bytes) -> None:
                answer = gateway.put(f"{gateway.base}/dav/org/{org}/{name}", data=data)  # type: ignore[attr-defined]
                assert answer.status_code in (200, 201, 204), answer.text
            writers = [("a WebDAV PUT", put), ("a store write (the API's path)",
                                                lambda name, data: tree.write(f"org/{org}/{name}", data))]
            print()
            for label, write_elsewhere in writers:
                worst = 0.0
                for k in range(VISIBILITY_PROBES):
                    i = (k + 500) % args.notes   # (notes from the middle of the folder, as far as it goes)
                    name = f"note-{i:05d}.md"
                    (targets["hostfinder"] / name).read_bytes()  # the kernel holds its pages now
                    new = body(i, edit=int(time.time() * 1000))
                    start = time.perf_counter()
                    write_elsewhere(name, new)
                    while (targets["hostfinder"] / name).read_bytes() != new:
                        if time.perf_counter() - start > 10:
                            break
                        time.sleep(0.002)
                    worst = max(worst, time.perf_counter() - start)
                print(f"a change via {label} is visible through the mount within {worst * 1000:.0f} ms "
                      f"(worst of {VISIBILITY_PROBES}, the write's own time included)")
            print("\n(1st: the first run on the fresh mount; then best of 3 runs (saves: one run); "
                  "ratio: best mount / best local; a save's ms is the run's time / 200)")
        return 0
    finally:
        for proc, where in reversed(procs):
            stop(proc, where)


# The FUSE opcodes (linux/fuse.h) these operations meet.
OPCODES = {1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 4: "SETATTR", 10: "UNLINK", 12: "RENAME", 14: "OPEN",
           15: "READ", 16: "WRITE", 17: "STATFS", 18: "RELEASE", 20: "FSYNC", 22: "GETXATTR", 25: "FLUSH",
           27: "OPENDIR", 28: "READDIR", 29: "RELEASEDIR", 35: "CREATE", 39: "IOCTL", 42: "BATCH_FORGET",
           44: "READDIRPLUS", 45: "RENAME2"}


def count_requests(name: str, pid: int, folder: Path) -> None:
    """Print the requests the kernel sends mount process ``pid`` for a few single operations in
    ``folder``: each request is one read(2) of /dev/fuse, whose 40-byte header holds its length and
    opcode (bytes 0-8) and the inode it is for (16-24), followed for a LOOKUP by the name. Each
    operation is counted warm (done twice just before), as the table's best runs are."""
    fd = next(int(f) for f in os.listdir(f"/proc/{pid}/fd") if os.readlink(f"/proc/{pid}/fd/{f}") == "/dev/fuse")
    trace = Path(tempfile.mkstemp(prefix="bench-fuse-strace-")[1])
    strace = subprocess.Popen(["strace", "-f", "-qq", "-xx", "-s", "72", "-e", "trace=read", "-e", "signal=none",
                               "-p", str(pid), "-o", str(trace)], stderr=subprocess.DEVNULL)
    pattern = re.compile(rf"read\({fd}, \"((?:\\x[0-9a-f]{{2}}){{8,72}})")

    def save() -> None:
        editor_saves(folder, 1)

    def cat() -> None:
        subprocess.run(["cat", str(folder / "note-00002.md")], stdout=subprocess.DEVNULL, check=True)
    operations: list[tuple[str, Callable[[], object]]] = [
        ("read a note (Python open, read, close)", lambda: (folder / "note-00001.md").read_bytes()),
        ("cat a note", cat),
        ("an editor save (mkstemp, write, fsync, close, rename)", save),
        ("echo > note (open O_TRUNC, write, close)", lambda: (folder / "note-00003.md").write_bytes(body(3, 1))),
    ]
    try:
        time.sleep(1.0)  # strace attached
        for label, op in operations:
            op()  # warm: what the kernel keeps is kept (twice: a first read of new pages makes the
            op()  # kernel ask for the file's attributes again at the next open, for its atime)
            time.sleep(0.3)
            start = len(trace.read_text().splitlines())
            op()
            time.sleep(0.3)
            ops = []
            for line in trace.read_text().splitlines()[start:]:
                m = pattern.search(line)
                if m:
                    raw = bytes.fromhex(m.group(1).replace("\\x", ""))
                    opcode = int.from_bytes(raw[4:8], "little")
                    nodeid = int.from_bytes(raw[16:24], "little")
                    extra = raw[40:].split(b"\0")[0].decode(errors="replace") if opcode == 1 else ""
                    ops.append(f"{OPCODES.get(opcode, str(opcode))}({nodeid}{' ' + extra if extra else ''})")
            print(f"{name}: {label}: {len(ops)} requests: {' '.join(ops)}", flush=True)
    finally:
        strace.terminate()
        strace.wait()
        trace.unlink()


def check_no_open(folder: Path, notes: int) -> None:
    """What zero-message opens do to the files: each note read back (after dropping the kernel's
    pages, so that every read is a READ naming fh 0), and a shell's ``>`` over a longer note."""
    subprocess.run(["sh", "-c", "echo 1 > /proc/sys/vm/drop_caches"], check=False, stderr=subprocess.DEVNULL)
    wrong = sum((folder / f"note-{i:05d}.md").read_bytes() != body(i) for i in range(0, notes, max(1, notes // 200)))
    print(f"\nfloor-noopen: {wrong} of {len(range(0, notes, max(1, notes // 200)))} notes read back wrong after the "
          "kernel's pages were dropped (a READ names fh 0 and pyfuse3 gives no inode)")
    note = folder / "note-00004.md"
    before = note.read_bytes()
    with open(note, "wb") as f:  # open(O_TRUNC): no OPEN is sent, and atomic_o_trunc skips the SETATTR
        f.write(b"x\n")
    after = note.read_bytes()
    print(f"floor-noopen: `> note` writing 2 bytes over {len(before)}: the file then holds {len(after)} bytes "
          f"({'truncated' if after == b'x' + bytes([10]) else 'NOT truncated'})")


class _FloorNode:
    __slots__ = ("ino", "data")

    def __init__(self, ino: int, data: bytes) -> None:
        self.ino, self.data = ino, bytearray(data)


def serve_floor(source: str, mountpoint: str, *, no_open: bool = False) -> int:
    """The floor peer: one flat folder of files held in memory (copied from ``source`` at start),
    served by pyfuse3 with the mount's timeouts (60 s), keep_cache on every open and nothing else:
    every request is answered from a dict in the event loop. Writes stay in memory. What it costs
    per operation is what the kernel and pyfuse3 cost; anything Host Finder's mount costs above it
    is the mount's own. ``no_open``: OPEN is answered ENOSYS, and a READ or WRITE naming fh 0
    goes to the file last named by a LOOKUP or GETATTR, the best guess a handler given no inode
    has (wrong as soon as two files are in use)."""
    import signal
    import stat

    import pyfuse3
    import trio

    class Floor(pyfuse3.Operations):
        def __init__(self) -> None:
            super().__init__()
            self.serial = pyfuse3.ROOT_INODE
            self.names: dict[bytes, _FloorNode] = {}
            self.nodes: dict[int, _FloorNode] = {}
            for name in sorted(os.listdir(source)):
                self._add(os.fsencode(name), Path(source, name).read_bytes())
            self.last = pyfuse3.ROOT_INODE  # (no_open) the file a READ naming fh 0 is taken for

        def _add(self, name: bytes, data: bytes) -> _FloorNode:
            self.serial += 1
            node = self.names[name] = self.nodes[self.serial] = _FloorNode(self.serial, data)
            return node

        def _attrs(self, ino: int) -> pyfuse3.EntryAttributes:
            a = pyfuse3.EntryAttributes()
            a.st_ino = ino
            a.entry_timeout = a.attr_timeout = 60.0
            a.st_uid, a.st_gid = os.getuid(), os.getgid()
            a.st_mtime_ns = a.st_ctime_ns = a.st_atime_ns = 1_700_000_000 * 10**9
            a.st_blksize = 4096
            if ino == pyfuse3.ROOT_INODE:
                a.st_mode, a.st_nlink = stat.S_IFDIR | 0o755, 2
            else:
                size = len(self.nodes[ino].data)
                a.st_mode, a.st_nlink, a.st_size, a.st_blocks = stat.S_IFREG | 0o644, 1, size, (size + 511) // 512
            return a

        def _node(self, ino: int) -> _FloorNode:
            node = self.nodes.get(ino)
            if node is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return node

        async def lookup(self, parent_inode, name, ctx=None):  # type: ignore[no-untyped-def]
            if name in (b".", b".."):
                return self._attrs(pyfuse3.ROOT_INODE)
            node = self.names.get(name)
            if node is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            self.last = node.ino
            return self._attrs(node.ino)

        async def getattr(self, inode, ctx=None):  # type: ignore[no-untyped-def]
            if inode != pyfuse3.ROOT_INODE:
                self._node(inode)
                self.last = inode
            return self._attrs(inode)

        async def setattr(self, inode, attr, fields, fh, ctx=None):  # type: ignore[no-untyped-def]
            if fields.update_size:
                node = self._node(inode)
                del node.data[attr.st_size:]
                node.data.extend(b"\0" * (attr.st_size - len(node.data)))
            return self._attrs(inode)

        async def opendir(self, inode, ctx=None):  # type: ignore[no-untyped-def]
            return inode

        async def readdir(self, fh, start_id, token):  # type: ignore[no-untyped-def]
            entries = sorted(self.names.items())
            for k in range(start_id, len(entries)):
                name, node = entries[k]
                if not pyfuse3.readdir_reply(token, name, self._attrs(node.ino), k + 1):
                    return

        async def open(self, inode, flags, ctx=None):  # type: ignore[no-untyped-def]
            if no_open:
                raise pyfuse3.FUSEError(errno.ENOSYS)
            node = self._node(inode)
            if flags & os.O_TRUNC:
                node.data.clear()
            return pyfuse3.FileInfo(fh=inode, keep_cache=True)

        async def create(self, parent_inode, name, mode, flags, ctx=None):  # type: ignore[no-untyped-def]
            if name in self.names and flags & os.O_EXCL:
                raise pyfuse3.FUSEError(errno.EEXIST)
            node = self.names.get(name) or self._add(name, b"")
            return pyfuse3.FileInfo(fh=node.ino), self._attrs(node.ino)

        async def read(self, fh, off, size):  # type: ignore[no-untyped-def]
            node = self.nodes.get(fh or self.last)  # (no_open: no file named yet reads as empty)
            return bytes(node.data[off:off + size]) if node is not None else b""

        async def write(self, fh, off, buf):  # type: ignore[no-untyped-def]
            data = self._node(fh or self.last).data
            data[off:off + len(buf)] = buf
            return len(buf)

        async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx=None):  # type: ignore[no-untyped-def]
            node = self.names.pop(name_old, None)
            if node is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            self.names[name_new] = node

        async def unlink(self, parent_inode, name, ctx=None):  # type: ignore[no-untyped-def]
            if self.names.pop(name, None) is None:
                raise pyfuse3.FUSEError(errno.ENOENT)

        async def flush(self, fh):  # type: ignore[no-untyped-def]
            pass

        async def fsync(self, fh, datasync):  # type: ignore[no-untyped-def]
            pass

        async def release(self, fh):  # type: ignore[no-untyped-def]
            pass

        async def releasedir(self, fh):  # type: ignore[no-untyped-def]
            pass

        async def getxattr(self, inode, name, ctx=None):  # type: ignore[no-untyped-def]
            raise pyfuse3.FUSEError(errno.ENOTSUP)  # as the mount answers (see fuse_mount/operations.py)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            async def stop_on_sigterm() -> None:  # (stop() sends SIGTERM): end the loop, unmount
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        pyfuse3.terminate()
                        return
            nursery.start_soon(stop_on_sigterm)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()

    pyfuse3.init(Floor(), mountpoint, set(pyfuse3.default_options) | {"fsname=floor", "subtype=floor"})
    try:
        trio.run(serve)
    finally:
        pyfuse3.close(unmount=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
