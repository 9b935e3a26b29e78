"""The README's two fresh-clone commands stay true: CI runs the test one, and the main
job's kgr part works on a copy of examples/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest


def two_commands(repo) -> list[str]:
    text = (repo / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_readme_gives_exactly_two_commands(repo):
    commands = two_commands(repo)
    assert len(commands) == 2
    assert all("\n" not in c for c in commands), "each is one command line"
    assert "kgr ingest examples" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command(repo):
    ci = (repo / ".ci" / "run").read_text()
    assert two_commands(repo)[1] in ci.splitlines()


def test_main_job_works_on_a_copy_of_examples(repo, tmp_path):
    if not (repo / "examples" / "kb").is_dir():
        pytest.skip("examples/kb not present")
    shutil.copytree(repo / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("*.sqlite*"))
    job = two_commands(repo)[0].split("&&", 1)[1].strip()  # the part after the install
    proc = subprocess.run(
        job.replace("kgr ", f"{sys.executable} -m kgr "),
        shell=True,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^ 1\. \S+\.(md|html|txt|pdf|docx)", proc.stdout, re.M), (
        proc.stdout
    )  # a ranked result with its path
    assert "why:" in proc.stdout
