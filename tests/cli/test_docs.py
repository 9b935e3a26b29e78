"""Docs that are tested: man pages and completions match the code; every command has help and an example."""

import shutil
import subprocess

import pytest

from kgr import docs
from kgr.cli import cli


def test_man_pages_and_completions_are_current():
    stale = docs.stale()
    assert not stale, f"regenerate with `python -m kgr.docs --write`: {stale}"


@pytest.mark.parametrize("path,cmd", docs.commands(cli), ids=lambda x: "-".join(x) if isinstance(x, tuple) else "")
def test_every_command_has_help_and_an_example(path, cmd):
    summary, _, example = docs._help_parts(cmd)
    assert summary, f"kgr {' '.join(path)} has no help"
    if not hasattr(cmd, "commands"):
        assert example.startswith("kgr "), f"kgr {' '.join(path)} has no Example: block"


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_man_pages_render_without_warnings():
    for page in sorted((docs.REPO / "man").glob("*.1")):
        proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True)
        assert proc.returncode == 0 and not proc.stderr.strip(), f"{page.name}: {proc.stderr}"


def test_completion_scripts_name_the_completion_variable():
    for name in ("kgr.bash", "_kgr", "kgr.fish"):
        assert "_KGR_COMPLETE" in (docs.REPO / "completions" / name).read_text()
