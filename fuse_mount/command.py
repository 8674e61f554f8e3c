"""`hostfinder mount`: check, open the store, mount, serve in the foreground, unmount.

Called by gateway/cli.py's `mount` subcommand, which hands it the way to open the store (the
gateway's StoreRuntime: a --database-url, or the embedded PostgreSQL), so the mount imports
nothing from the gateway and opens the store exactly as `serve` does. Each way it can fail before mounting (no FUSE, a
mount point that is not an empty directory, an unknown user) prints one sentence and exits 1.
Ctrl-C, SIGTERM and SIGHUP end it cleanly (unmounted); so does `fusermount3 -u MOUNTPOINT`, which
ends pyfuse3's loop. A killed process writes nothing half-way: open files are committed only whole.
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pyfuse3
import trio

from fuse_mount.events import follow_changes
from fuse_mount.operations import HostOperations
from store.access import Door, Principal
from store.changefeed import Change
from store.db import Database
from store.events import subscribe_local
from store.filecache import FileCache
from store.host import HostTree

log = logging.getLogger("hostfinder.fuse")

FUSE_DEVICE = "/dev/fuse"
POOL_SIZE = 10


class MountError(Exception):
    """One sentence for stderr, exit status 1."""


class StoreOpener(Protocol):
    """What opens the store for the mount (gateway.runtime.StoreRuntime): ``open`` returns the
    pool, ``conninfo`` is then set (the change feed and the content cache listen on it), ``close``
    stops whatever ``open`` started."""

    conninfo: str

    def open(self) -> Database: ...

    def close(self) -> None: ...


def run_mount(args: argparse.Namespace, open_store: Callable[[int], StoreOpener]) -> int:
    """Mount the tree at ``args.mountpoint`` as ``args.user`` (optionally one ``args.org``) until
    stopped; 0 after a clean unmount, 1 with a sentence on stderr when it cannot start.
    ``open_store(pool_size)`` makes the store's opener; it is called only once the checks pass."""
    try:
        return _run(args, open_store)
    except MountError as exc:
        print(f"hostfinder: {exc}", file=sys.stderr)
        return 1


def check_fuse(device: str = FUSE_DEVICE) -> None:
    try:
        mode = os.stat(device).st_mode
    except OSError:
        raise MountError(f"cannot mount: {device} is missing, so this system offers no FUSE; install fuse3 and "
                         "load the fuse module (modprobe fuse), or give a container --device /dev/fuse "
                         "--cap-add SYS_ADMIN") from None
    if not stat.S_ISCHR(mode):
        raise MountError(f"cannot mount: {device} is not the FUSE device (not a character device)")


def check_mountpoint(path: Path) -> str:
    """The absolute mount point, or MountError saying why it cannot be one."""
    where = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MountError(f"the mount point {where} does not exist: create an empty directory first "
                         f"(mkdir {where})") from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise MountError(f"{where} is a stale mount left by a process that ended (transport endpoint is "
                             f"not connected): clear it with `fusermount3 -u -z {where}` and mount again") from None
        raise MountError(f"cannot use {where} as the mount point ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise MountError(f"the mount point {where} is not a directory: mount onto an empty directory")
    if os.path.ismount(path):
        raise MountError(f"{where} is already a mount point: unmount it first (fusermount3 -u {where}) "
                         "or choose an empty directory")
    if os.listdir(path):
        raise MountError(f"the mount point {where} is not an empty directory: mount onto an empty one, "
                         "so that no files are hidden under the mount")
    return os.path.abspath(path)


def _run(args: argparse.Namespace, open_store: Callable[[int], StoreOpener]) -> int:
    check_fuse()
    mountpoint = check_mountpoint(Path(args.mountpoint))

    runtime = open_store(POOL_SIZE)
    db = runtime.open()
    cache: FileCache | None = None
    unsubscribe: Callable[[], None] | None = None
    try:
        principal = Door(db).principal_for_email(args.user)
        if principal is None:
            raise MountError(f"no user has the email {args.user}: mount as an existing user, or create one "
                             "with `hostfinder admin user create --email EMAIL --password PASSWORD`")
        if args.org is not None:
            if args.org not in principal.org_ids:
                raise MountError(f"{args.user} is not a member of organisation {args.org}; their organisations "
                                 f"are {', '.join(map(str, sorted(principal.org_ids))) or 'none'}")
            principal = dataclasses.replace(principal, org_ids=frozenset({args.org}))

        # A mount's trees live for hours, one per worker thread: stat() keeps no private copy of
        # content (content_ttl=0), while the shared, event-kept cache answers repeated reads. The
        # mount's change feed (_serve) keeps it, on the mount's one LISTEN connection.
        cache = FileCache(runtime.conninfo).start(listen=False)
        ops = HostOperations(lambda: HostTree(db, principal, cache=cache, content_ttl=0.0), concurrency=POOL_SIZE)
        # The mount's own writes' change ids, as each commits: how their events are told apart.
        unsubscribe = subscribe_local(ops.committed)
        options = set(pyfuse3.default_options) | {"fsname=hostfinder", "subtype=hostfinder"}
        try:
            pyfuse3.init(ops, mountpoint, options)
        except RuntimeError as exc:
            raise MountError(f"cannot mount on {mountpoint} ({exc}); check that fusermount3 is installed "
                             "and that you may use FUSE") from None
        print(f"Host Finder is mounted at {mountpoint} as {principal.name} "
              f"(organisations {', '.join(map(str, sorted(principal.org_ids))) or 'none'}).\n"
              f"Press Ctrl-C or run `fusermount3 -u {mountpoint}` to unmount.", flush=True)
        try:
            trio.run(_serve, ops, cache, runtime.conninfo, principal)
        except BaseException:
            log.exception("the mount stopped on an unexpected error")
            raise
        finally:
            unsaved = ops.discard_unsaved()
            if unsaved:
                log.warning("unmounting with files still open for writing; their unsaved changes were not "
                            "written: %s", ", ".join(unsaved))
            pyfuse3.close(unmount=True)
            log.info("unmounted %s", mountpoint)
        return 0
    finally:
        if unsubscribe is not None:
            unsubscribe()
        if cache is not None:
            cache.stop()
        runtime.close()


async def _serve(ops: HostOperations, cache: FileCache, conninfo: str, principal: Principal) -> None:
    # The content cache applies an event before the kernel is told to forget its paths, so the
    # kernel's re-read can never be answered from a cache that has not seen the same event yet.
    async def changed(change: Change) -> None:
        cache.apply(change.event)
        change_id = change.event.get("change_id")
        for path in change.paths:
            await ops.invalidate(path, change_id if isinstance(change_id, int) else None)

    async def invalidate_all() -> None:
        cache.clear()
        await ops.invalidate_all()

    def following(up: bool) -> None:
        cache.following(up)
        ops.following(up)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signal)
        await nursery.start(follow_changes, conninfo, principal.org_ids, int(principal.user_id or 0), changed,
                            invalidate_all, following)
        ops.nursery = nursery
        # Returns when the kernel ends the session (fusermount3 -u) or after terminate().
        await pyfuse3.main()
        ops.nursery = None
        await ops.commit_held()  # closed side files still in memory: the user had finished them
        nursery.cancel_scope.cancel()


async def _stop_on_signal() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("%s received: unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            return
