"""The gateway's options: each one's default and environment variable, read once into a Config
(gateway/cli.py gives the flags and their help)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_DATA_DIR = ".hostfinder"


@dataclass
class Config:
    """Everything `serve`, `migrate`, `admin` and `mount` need to find and serve the store."""

    database_url: str | None = field(default_factory=lambda: os.environ.get("HOSTFINDER_DATABASE_URL") or None)
    data_dir: Path = field(default_factory=lambda: Path(os.environ.get("HOSTFINDER_DATA_DIR") or DEFAULT_DATA_DIR))
    # Given by --data-dir or HOSTFINDER_DATA_DIR: then it is used as it is, never moved.
    data_dir_explicit: bool = field(default_factory=lambda: bool(os.environ.get("HOSTFINDER_DATA_DIR")))
    pg_bindir: str | None = field(default_factory=lambda: os.environ.get("HOSTFINDER_PG_BINDIR") or None)
    host: str = "127.0.0.1"
    port: int = 8080
    threads: int = 16
    tls_cert: Path | None = None
    tls_key: Path | None = None
    demo: bool = True
    read_cache: bool = False
    pool_size: int = 20

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    @property
    def base_url(self) -> str:
        host = "localhost" if self.host in ("127.0.0.1", "0.0.0.0", "::", "") else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_bind(value: str) -> tuple[str, int]:
    """'HOST:PORT', ':PORT' or 'PORT' -> (host, port); ValueError with a sentence otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--bind {value!r} is not HOST:PORT (for example 127.0.0.1:8080)")
    return host, int(port)
