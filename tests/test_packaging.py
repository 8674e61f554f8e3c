"""A plain (not editable) install holds the whole program: every module, migration, template and
static file of the checkout is in the wheel pip builds from it."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("gateway", "store", "api", "dav_provider", "fuse_mount", "web", "sql")


def test_the_wheel_holds_every_file_the_program_needs(tmp_path: Path) -> None:
    # Built from a copy: setuptools builds in the source tree, and a build/ left there from an
    # earlier build would hide a package the configuration leaves out.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", ".hostfinder",
                                                                "__pycache__", ".pytest_cache"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp_path.glob("hostfinder-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = {str(p.relative_to(REPO)) for package in PACKAGES for p in (REPO / package).rglob("*")
              if p.is_file() and p.suffix in (".py", ".sql", ".html", ".css", ".js", ".svg", ".png", ".ico")
              and "__pycache__" not in p.parts}
    assert wanted - shipped == set()
