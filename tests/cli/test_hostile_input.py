"""Issue 14, hostile and unusual input: symlink loops (item 2), partial documents
(item 9) and doc paths that load must refuse (item 10).

CliRunner tests assert stdout records, stderr lines and exit codes separately.
"""

from __future__ import annotations

import os

import orjson
import pytest
from click.testing import CliRunner

from kgr.cli import cli


@pytest.fixture()
def runner():
    return CliRunner()


def records(output: bytes | str) -> list[dict]:
    data = output.encode() if isinstance(output, str) else output
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


# -- item 2: symlink loops -------------------------------------------------------------


@pytest.fixture()
def looped(tmp_path):
    """t/ holds a.md, b.md and the loop x.md -> y.md -> x.md."""
    root = tmp_path / "t"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe first file.\n")
    (root / "b.md").write_text("# B\n\nThe second file.\n")
    os.symlink("y.md", root / "x.md")
    os.symlink("x.md", root / "y.md")
    return root


def test_symlink_loop_is_an_error_record_per_entry_and_other_files_are_normalized(runner, looped):
    result = runner.invoke(cli, ["normalize", str(looped)])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert [(r["kind"], r["path"]) for r in out] == [("doc", "a.md"), ("doc", "b.md"), ("error", "x.md"), ("error", "y.md")]
    errors = [r for r in out if r["kind"] == "error"]
    assert {r["reason"] for r in errors} == {"symlink_loop"}
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and all("symlink loop" in ln and "[symlink_loop]" in ln for ln in lines)
    assert any("x.md" in ln for ln in lines) and any("y.md" in ln for ln in lines)


def test_symlink_loop_named_on_the_command_line_is_an_error_record(runner, looped):
    result = runner.invoke(cli, ["normalize", "--root", str(looped), str(looped / "x.md"), str(looped / "a.md")])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert [r["kind"] for r in out] == ["error", "doc"]
    assert out[0]["reason"] == "symlink_loop" and out[1]["path"] == "a.md"


def test_ingest_stores_the_other_files_despite_a_symlink_loop(runner, looped, tmp_path, monkeypatch):
    monkeypatch.setenv("KGR_EMBED_MODEL", "fake")
    db = tmp_path / "kb.sqlite"
    result = runner.invoke(cli, ["ingest", str(looped), "--db", str(db), "--no-embed", "--no-graph"])
    assert "Traceback" not in result.stderr and not isinstance(result.exception, RuntimeError)
    assert "symlink_loop" in result.stderr
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert sorted(p for (p,) in store.query("SELECT path FROM docs")) == ["a.md", "b.md"]
