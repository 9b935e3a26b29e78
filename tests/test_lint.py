"""Lint is part of the test run, so CI enforces it: ruff's formatting and checks on kgr/, tests/
and bench/, and import-linter's contracts (pyproject.toml) for the layers of kgr/.

The tools come with the test extra (pip install -e '.[test]'). Without them the tests skip with
the reason, except under CI=true, where a missing tool is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LINTED = ["kgr", "tests", "bench"]


def tool(name: str) -> str:
    """The executable, preferring the one installed beside this Python (a venv's bin/)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    exe = shutil.which(name, path=path)
    if exe is None:
        reason = f"{name} is not installed (pip install -e '.[test]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return exe


def run(repo: Path, *cmd: str) -> None:
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stdout[-8000:]}{proc.stderr[-4000:]}", pytrace=False)


def linted(repo: Path) -> list[str]:
    return [name for name in LINTED if (repo / name).is_dir()]


def test_ruff_format(repo):
    run(repo, tool("ruff"), "format", "--check", *linted(repo))


def test_ruff_check(repo):
    run(repo, tool("ruff"), "check", *linted(repo))


def test_import_linter_contracts(repo):
    # --no-cache: no .import_linter_cache/ left in the clone.
    run(repo, tool("lint-imports"), "--no-cache")
