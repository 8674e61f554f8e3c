"""The `hostfinder` command: serve, migrate, admin, mount.

Bad input and start-up failures print one sentence on stderr and exit 1, never a traceback."""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gateway.config import DEFAULT_BIND, DEFAULT_DATA_DIR, Config, parse_bind
from gateway.demo import DEMO_LOGIN_FILE
from gateway.runtime import StartupError, StoreRuntime
from gateway.stopping import StopSignal
from store import admin
from store.db import Database
from store.errors import StoreError

log = logging.getLogger("hostfinder")


class CommandError(Exception):
    """A sentence for stderr, exit status 1."""


# ---------------------------------------------------------------------------------------------
# Options shared by every command that opens the store

def _directory(text: str) -> Path:
    if not text.strip():  # Path("") is the current directory
        raise argparse.ArgumentTypeError("give the path of a directory (an empty one, or one Host Finder made)")
    return Path(text)


def add_store_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("store")
    g.add_argument("--database-url", metavar="URL",
                   help="use this PostgreSQL instead of the embedded one (env HOSTFINDER_DATABASE_URL)")
    g.add_argument("--data-dir", metavar="DIR", type=_directory,
                   help=f"the embedded PostgreSQL's data directory (env HOSTFINDER_DATA_DIR; default ./{DEFAULT_DATA_DIR})")
    g.add_argument("--pg-bindir", metavar="DIR",
                   help="PostgreSQL server binaries for the embedded server (env HOSTFINDER_PG_BINDIR)")
    g.add_argument("-v", "--verbose", action="store_true", help="log debug messages")


def config_from(args: argparse.Namespace) -> Config:
    config = Config()
    if args.database_url:
        config.database_url = args.database_url
    if args.data_dir:
        config.data_dir, config.data_dir_explicit = args.data_dir, True
    if args.pg_bindir:
        config.pg_bindir = args.pg_bindir
    config.data_dir = config.data_dir.absolute()
    return config


# ---------------------------------------------------------------------------------------------
# serve

MAX_THREADS = 256


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.demo import ensure_demo
    from gateway.server import Gateway, cannot_listen, cannot_start, make_server
    from gateway.workers import (MAX_CONNECTIONS, MAX_WORKERS, MIN_POOL, OWN_CONNECTIONS, default_workers,
                                 pool_size, serve_workers)

    config = config_from(args)
    try:
        config.host, config.port = parse_bind(args.bind)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    config.threads, config.demo, config.read_cache = args.threads, not args.no_demo, args.read_cache
    config.tls_cert, config.tls_key = args.tls_cert, args.tls_key
    if bool(config.tls_cert) != bool(config.tls_key):
        raise CommandError("--tls-cert and --tls-key go together: give both, or neither for plain HTTP")
    for f in (config.tls_cert, config.tls_key):
        if f and not Path(f).is_file():
            raise CommandError(f"cannot read {f}: give the path of a PEM file")
    workers = default_workers() if args.workers is None else args.workers
    # The embedded PostgreSQL allows 100 connections; a server given by URL has its own limit.
    most = MAX_WORKERS if not config.database_url else 256
    if not 1 <= workers <= most:
        raise CommandError(f"--workers {workers}: give a number of processes from 1 to {most}" + (
            f" (each holds at least {MIN_POOL + OWN_CONNECTIONS} of the {MAX_CONNECTIONS} connections the "
            "embedded PostgreSQL gives the gateway)" if not config.database_url else ""))
    if not 1 <= config.threads <= MAX_THREADS:
        raise CommandError(f"--threads {config.threads}: give a number of threads per worker from 1 to {MAX_THREADS}")
    if workers > 1:  # processes sharing one socket and one PostgreSQL (gateway/workers.py)
        return serve_workers(config, workers, announce=_announce, ensure_demo=ensure_demo)

    # Bind first: a port in use should fail before anything is started or created.
    try:  # a certificate or key that does not load fails here (ssl.SSLError)
        server = make_server(_starting, config.host, config.port, threads=config.threads,
                             tls_cert=config.tls_cert and str(config.tls_cert),
                             tls_key=config.tls_key and str(config.tls_key))
    except Exception as exc:
        raise CommandError(cannot_start(config.host, config.port, exc, tls=bool(config.tls_cert))) from None
    try:
        server.prepare()
    except OSError as exc:
        raise CommandError(cannot_listen(config.host, config.port, exc)) from None
    except Exception as exc:  # cheroot wraps TLS loading errors in several types
        raise CommandError(cannot_start(config.host, config.port, exc, tls=bool(config.tls_cert))) from None

    _stop_on_sigterm()  # during start-up, Ctrl-C or SIGTERM interrupts at once
    # A connection per thread and a few spare; on the embedded PostgreSQL, within its 100.
    runtime = StoreRuntime(config, pool_size=max(config.pool_size, config.threads + 4) if config.database_url
                           else pool_size(config, 1), share=False)
    serving: threading.Thread | None = None
    try:
        db = runtime.open()
        server.wsgi_app = Gateway(db, read_cache=config.read_cache)
        login = ensure_demo(db, config) if config.demo else None
        # From here a signal only asks the main thread to stop; the server runs in a thread of its
        # own. An exception raised by a signal handler inside cheroot's accept loop could land
        # while it holds a lock that stop() then waits for (seen as a hang on SIGTERM with TLS).
        stop = StopSignal()
        serving = threading.Thread(target=server.serve, name="hostfinder-http", daemon=True)
        serving.start()
        _announce(config, login)
        while not stop.wait(0.5) and serving.is_alive():
            runtime.revive()
        if not stop.is_set():
            log.error("the HTTP server stopped unexpectedly")
        log.info("stopping")
    finally:
        # A second Ctrl-C or SIGTERM must not interrupt the clean-up half-way.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if isinstance(server.wsgi_app, Gateway):
            server.wsgi_app.stopping()
        server.stop()
        if serving is not None:
            serving.join(timeout=10)
        if isinstance(server.wsgi_app, Gateway):
            server.wsgi_app.close()
        runtime.close()
    return 0


def _starting(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    body = b"Host Finder is starting; try again in a moment.\n"
    start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8"),
                                               ("Content-Length", str(len(body))), ("Retry-After", "2")])
    return [body]


def _stop_on_sigterm() -> None:
    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, raise_interrupt)


def _invoked_as() -> str:
    """The command as this process was started (.venv/bin/hostfinder under `make serve`), so a
    hint can be pasted as it is: the virtualenv's bin is seldom on PATH."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "hostfinder"
    return argv0 if "/" in argv0 and Path(argv0).name == "hostfinder" else "hostfinder"


def _announce(config: Config, login: dict[str, Any] | None) -> None:
    base = config.base_url
    lines = [f"Host Finder is serving on {base}",
             f"  Web app (Databases, Notes, agents' State): {base}/   <- open this in a browser",
             f"  WebDAV (Finder, Explorer, davfs2, rclone): {base}/dav/",
             f"  HTTP API:                                  {base}/api/  (health: {base}/api/health)"]
    me = _invoked_as()
    where = "--database-url" if config.database_url else "--data-dir"
    if login and sys.stdout.isatty():
        lines.append(f"  Log in as {login['email']} with password {login['password']}")
    elif login and not config.database_url:
        # Output to a file or a log (a service manager's journal): secrets are never logged, and
        # the password is kept beside the data already (gateway/demo.py).
        lines.append(f"  Log in as {login['email']} with the password in {config.data_dir / DEMO_LOGIN_FILE} "
                     "(printed only on a terminal)")
    elif login:
        lines.append(f"  Log in as {login['email']} once you give it a password: {me} admin user set-password "
                     f"--email {login['email']} --password '...' (with this {where}; the generated one is "
                     "printed only on a terminal)")
    elif not config.demo:
        lines.append(f"  Logins (no demo): {me} admin user create --email YOU --password '...', then "
                     f"{me} admin member add --org ORG_ID --email YOU (with this {where})")
    else:
        # The store had organisations already, and no kept demo login (with --database-url the
        # password is printed at the first start only: there is no data directory to keep it in).
        lines.append(f"  Logins: this store's users; a forgotten password is replaced with {me} admin user "
                     f"set-password --email EMAIL --password '...' (with this {where})")
    lines.append("Press Ctrl-C to stop.")
    print("\n".join(lines), flush=True)


# ---------------------------------------------------------------------------------------------
# migrate

def cmd_migrate(args: argparse.Namespace) -> int:
    runtime = StoreRuntime(config_from(args), migrate=False, pool_size=1)
    try:
        runtime.open()
        from store import migrations
        try:
            applied = migrations.migrate(runtime.conninfo)
        except migrations.MigrationError as exc:
            raise CommandError(str(exc)) from None
        print(json.dumps({"applied": applied, "schema_version": migrations.latest_version()}))
    finally:
        runtime.close()
    return 0


# ---------------------------------------------------------------------------------------------
# admin: every subcommand prints one JSON object

def _flag_pair(p: argparse.ArgumentParser, name: str, help_on: str) -> None:
    dest = name.replace("-", "_")
    p.add_argument(f"--{name}", dest=dest, action="store_true", default=None, help=help_on)
    p.add_argument(f"--no-{name}", dest=dest, action="store_false", help=f"turn {name} off")


def _grant_flags(p: argparse.ArgumentParser) -> None:
    _flag_pair(p, "read-guild", "may read its guild's notes (default on)")
    _flag_pair(p, "write-guild", "may write its guild's notes (default on)")
    _flag_pair(p, "read-org", "may read organisation notes (default on)")
    _flag_pair(p, "write-org", "may write organisation notes (default off)")


def _grants(a: argparse.Namespace) -> dict[str, bool | None]:
    return {k: getattr(a, k) for k in admin.GRANT_FLAGS}


AdminFn = Callable[[Database, argparse.Namespace], dict[str, Any]]


def _object(objects: argparse._SubParsersAction, name: str) -> argparse._SubParsersAction:
    """`hostfinder admin NAME`: the actions on one kind of object."""
    p = objects.add_parser(name, help=f"{name} commands", description=f"{name} commands")
    return p.add_subparsers(dest="admin_action", required=True, metavar="ACTION")


@contextmanager
def _action(actions: argparse._SubParsersAction, name: str, help_text: str, fn: AdminFn) -> Iterator[argparse.ArgumentParser]:
    """`hostfinder admin OBJECT NAME`: declare its arguments in the ``with`` block; it opens the
    store, runs ``fn`` and prints its JSON (cmd_admin). The store options come last."""
    p = actions.add_parser(name, help=help_text, description=help_text)
    yield p
    add_store_options(p)
    p.set_defaults(func=cmd_admin, admin_fn=fn)


def add_admin_commands(objects: argparse._SubParsersAction) -> None:
    """Every `hostfinder admin OBJECT ACTION`, in the order --help lists them."""
    org = _object(objects, "org")
    with _action(org, "create", "create an organisation", lambda db, a: admin.create_org(db, name=a.name)) as p:
        p.add_argument("--name", required=True)

    guild = _object(objects, "guild")
    with _action(guild, "create", "create a guild in an organisation",
                 lambda db, a: admin.create_guild(db, org_id=a.org, name=a.name)) as p:
        p.add_argument("--org", type=int, required=True)
        p.add_argument("--name", required=True)

    agent = _object(objects, "agent")
    with _action(agent, "create", "create an agent in a guild",
                 lambda db, a: admin.create_agent(db, org_id=a.org, guild_id=a.guild, name=a.name, task=a.task,
                                                  **_grants(a))) as p:
        p.add_argument("--org", type=int, required=True)
        p.add_argument("--guild", type=int, required=True)
        p.add_argument("--name", required=True)
        p.add_argument("--task", default="", help="the standing task (Markdown)")
        _grant_flags(p)
    with _action(agent, "set", "change an agent's name or note grants",
                 lambda db, a: admin.set_agent(db, a.id, name=a.name, **_grants(a))) as p:
        p.add_argument("id", type=int)
        p.add_argument("--name")
        _grant_flags(p)

    user = _object(objects, "user")
    with _action(user, "create", "create a user who can log in",
                 lambda db, a: admin.create_user(db, email=a.email, password=a.password, name=a.name)) as p:
        p.add_argument("--email", required=True)
        p.add_argument("--password", required=True)
        p.add_argument("--name", default="")
    with _action(user, "set-password", "replace a user's password (the old one stops working at once)",
                 lambda db, a: admin.set_password(db, email=a.email, password=a.password)) as p:
        p.add_argument("--email", required=True)
        p.add_argument("--password", required=True)

    member = _object(objects, "member")
    with _action(member, "add", "make a user a member (operator) of an organisation",
                 lambda db, a: admin.add_member(db, org_id=a.org, email=a.email)) as p:
        p.add_argument("--org", type=int, required=True)
        p.add_argument("--email", required=True)
    with _action(member, "remove", "end a user's membership of an organisation, and their tokens there",
                 lambda db, a: admin.remove_member(db, org_id=a.org, email=a.email)) as p:
        p.add_argument("--org", type=int, required=True)
        p.add_argument("--email", required=True)

    token = _object(objects, "token")
    with _action(token, "create", "create an API token (shown once)",
                 lambda db, a: admin.create_token(db, org_id=a.org, member_email=a.member, service=a.service)) as p:
        p.add_argument("--org", type=int, required=True)
        who = p.add_mutually_exclusive_group(required=True)
        who.add_argument("--member", metavar="EMAIL")
        who.add_argument("--service", action="store_true", help="the orchestrator's token for the organisation")
    with _action(token, "list", "list the tokens that can log in (ids and prefixes, never secrets)",
                 lambda db, a: admin.list_tokens(db, org_id=a.org, member_email=a.member)) as p:
        p.add_argument("--org", type=int, help="only this organisation's")
        p.add_argument("--member", metavar="EMAIL", help="only this user's")
    with _action(token, "revoke", "delete a token: it stops working at once on every gateway",
                 lambda db, a: admin.revoke_token(db, a.id)) as p:
        p.add_argument("id", type=int, help="the token's id (see token list)")

    lock = _object(objects, "lock")
    with _action(lock, "list", "list the WebDAV locks held now (who, where, until when)",
                 lambda db, a: admin.list_locks(db, under=a.under)) as p:
        p.add_argument("--under", default="", metavar="PATH",
                       help="only locks on PATH, below it or on a folder above it with depth infinity")
    with _action(lock, "remove", "end the WebDAV locks on a path and below it (an abandoned lock)",
                 lambda db, a: admin.remove_locks(db, path=a.path)) as p:
        p.add_argument("path", help="a tree path, such as org/1/guilds/2/notes.md (or /dav/org/1/... or its "
                                    "WebDAV URL)")

    run = _object(objects, "run")
    with _action(run, "create", "open a run for an agent (for run-owned provenance)",
                 lambda db, a: admin.create_run(db, agent_id=a.agent, kind=a.kind, status=a.status,
                                                routine=a.routine)) as p:
        p.add_argument("--agent", type=int, required=True)
        p.add_argument("--kind", required=True, choices=admin.RUN_KINDS)
        p.add_argument("--status", default="running", choices=admin.RUN_STATUSES)
        p.add_argument("--routine", help="the schedule's routine name")
    with _action(run, "set", "change a run's status", lambda db, a: admin.set_run(db, a.id, status=a.status)) as p:
        p.add_argument("id", type=int)
        p.add_argument("--status", required=True, choices=admin.RUN_STATUSES)


def _bootstrap(db: Database, a: argparse.Namespace) -> dict[str, Any]:
    return admin.bootstrap(db, org_name=a.name, email=a.email, password=a.password)


def cmd_admin(args: argparse.Namespace) -> int:
    runtime = StoreRuntime(config_from(args), pool_size=2, create=False)
    try:
        db = runtime.open()
        result = args.admin_fn(db, args)
    finally:
        runtime.close()
    print(json.dumps(result, default=str))
    return 0


# ---------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hostfinder",
        description="Host Finder: an agent platform's notes, memory, scripts and collections as files "
                    "(WebDAV, FUSE) and an HTTP API, over PostgreSQL.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the gateway (WebDAV under /dav/, API under /api/)",
                       description="Run the gateway. Without a database URL it starts a private PostgreSQL "
                                   "in --data-dir and stops it on exit.")
    p.add_argument("--bind", default=DEFAULT_BIND, metavar="HOST:PORT", help=f"where to listen (default {DEFAULT_BIND})")
    p.add_argument("--threads", type=int, default=16, help="threads per worker process (default 16)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes answering on the one port, each with its own threads and database pool "
                        "(default: the number of cores; 1 runs everything in this process)")
    p.add_argument("--tls-cert", type=Path, metavar="PEM", help="serve HTTPS with this certificate (Windows Explorer needs HTTPS for Basic)")
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's private key")
    p.add_argument("--no-demo", action="store_true", help="do not create the demo organisation on an empty store")
    p.add_argument("--read-cache", action="store_true",
                   help="answer repeated reads of notes from memory, kept exact by change events; a write "
                        "through another gateway or a FUSE mount can take a few milliseconds to show here, "
                        "so use it when this is the only gateway")
    add_store_options(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("migrate", help="apply the schema migrations and exit",
                       description="Apply sql/NNN_*.sql migrations not yet applied (serve does this at start-up).")
    add_store_options(p)
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("admin", help="create and change organisations, guilds, agents, users, tokens, runs",
                       description="Administration. Each subcommand prints one JSON object with its id.")
    groups = p.add_subparsers(dest="admin_group", required=True, metavar="OBJECT")
    add_admin_commands(groups)
    bp = groups.add_parser("bootstrap", help="an organisation, guild, agent, user and tokens in one step",
                           description="Create an organisation with a guild, an agent, a user with a password, "
                                       "a member token and a service token; print them as one JSON object.")
    bp.add_argument("--json", action="store_true", help="print JSON (the only format; accepted for scripts)")
    bp.add_argument("--name", default="Bootstrap", help="the organisation's name")
    bp.add_argument("--email", help="the user's email (default: a generated one)")
    bp.add_argument("--password", help="the user's password (default: a generated one)")
    add_store_options(bp)
    bp.set_defaults(func=cmd_admin, admin_fn=_bootstrap)

    p = sub.add_parser("mount", help="mount the tree with FUSE (Linux)",
                       description="Mount the Host tree as USER sees it over WebDAV, in the foreground until "
                                   "Ctrl-C, SIGTERM or fusermount3 -u.")
    p.add_argument("mountpoint", type=Path, help="an empty directory")
    p.add_argument("--user", required=True, metavar="EMAIL", help="whose view of the tree to mount")
    p.add_argument("--org", type=int, help="only this organisation")
    add_store_options(p)
    p.set_defaults(func=cmd_mount)
    return parser


def cmd_mount(args: argparse.Namespace) -> int:
    try:
        from fuse_mount.command import run_mount
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("pyfuse3", "trio"):
            raise   # a defect of the checkout itself, not a missing FUSE library: installing one would not help
        raise CommandError(f"the FUSE mount is not available ({exc}): install fuse3, libfuse3-dev and "
                           "pkg-config (apt-get install fuse3 libfuse3-dev pkg-config), then run `make install` "
                           "in the checkout (or `.venv/bin/pip install -e '.[fuse]'`)") from None
    config = config_from(args)
    # The mount opens the store as serve does, without importing the gateway (issue 12).
    return run_mount(args, lambda pool_size: StoreRuntime(config, pool_size=pool_size, create=False))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("wsgidav").setLevel(logging.WARNING)
    try:
        return args.func(args)
    except (CommandError, StartupError, StoreError) as exc:
        print(f"hostfinder: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
