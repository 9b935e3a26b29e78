"""Issue 14 item 14: `kgr man [COMMAND]` shows the manual after any install (the pages are generated
from the installed code), and `kgr man --write DIR` makes `man kgr` work after an editable install,
where setuptools installs no data files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kgr import docs
from kgr.cli import cli


@pytest.mark.parametrize(
    "args, page",
    [([], "kgr.1"), (["ingest"], "kgr-ingest.1"), (["template", "add"], "kgr-template-add.1"), (["man"], "kgr-man.1")],
)
def test_kgr_man_prints_the_page_when_not_on_a_terminal(args, page):
    res = CliRunner().invoke(cli, ["man", *args])
    assert res.exit_code == 0, res.stderr
    assert res.stdout == (docs.REPO / "man" / page).read_text()  # the same text as the shipped page


def test_kgr_man_of_an_unknown_command_is_a_usage_error():
    res = CliRunner().invoke(cli, ["man", "nosuch"])
    assert res.exit_code == 2 and "no command kgr nosuch" in res.stderr


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_kgr_finds_the_written_pages(tmp_path):
    target = tmp_path / "share" / "man"
    res = CliRunner().invoke(cli, ["man", "--write", str(target)])
    assert res.exit_code == 0, res.stderr
    assert sorted(p.name for p in (target / "man1").iterdir()) == sorted(
        p.name for p in (docs.REPO / "man").glob("*.1")
    )
    assert str(target) in res.stderr  # says where they went
    env = {**os.environ, "MANPATH": str(target), "MANPAGER": "cat", "MANWIDTH": "80"}
    where = subprocess.run(["man", "-w", "kgr"], capture_output=True, text=True, env=env)
    assert where.stdout.strip() == str(target / "man1" / "kgr.1"), where
    shown = subprocess.run(["man", "kgr-ingest"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "KGR-INGEST(1)" in shown.stdout and "--null" in shown.stdout, shown.stderr


def test_the_console_script_runs_kgr_man():
    proc = subprocess.run([sys.executable, "-m", "kgr", "man", "status"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith('.TH "KGR-STATUS" "1"'), proc.stderr
