"""The start-up banner of `hostfinder serve` and the demo's password: on a terminal it is shown;
written to a file or a log (a service manager's journal, `serve > serve.log`) it is not, since
secrets are never logged, and the banner says where the password is kept instead. (A real
`serve` with its output in a pipe: tests/test_cli.py, test_first_run_...)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from gateway import cli
from gateway.config import Config

LOGIN = {"email": "demo@hostfinder.local", "password": "Secret-Demo-Pass"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def banner(monkeypatch: pytest.MonkeyPatch, config: Config, *, terminal: bool) -> str:
    out = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    cli._announce(config, dict(LOGIN))
    return out.getvalue()


def test_written_to_a_log_the_banner_names_the_file_not_the_password(monkeypatch, tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path / "data", database_url=None)
    text = banner(monkeypatch, config, terminal=False)
    assert LOGIN["password"] not in text
    assert f"Log in as demo@hostfinder.local with the password in {tmp_path / 'data' / 'demo-login.txt'}" in text


def test_with_a_database_url_and_no_terminal_the_banner_says_how_to_set_a_password(monkeypatch) -> None:
    config = Config(database_url="postgresql://hf@db.example/hostfinder")
    text = banner(monkeypatch, config, terminal=False)
    assert LOGIN["password"] not in text
    assert "admin user set-password --email demo@hostfinder.local" in text and "--database-url" in text


def test_on_a_terminal_the_banner_shows_the_password(monkeypatch, tmp_path: Path) -> None:
    text = banner(monkeypatch, Config(data_dir=tmp_path, database_url=None), terminal=True)
    assert "Log in as demo@hostfinder.local with password Secret-Demo-Pass" in text
