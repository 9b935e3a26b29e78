"""Issue 14 item 14: `-0`/`--null` reads NUL-separated paths from stdin (as `find -print0` writes
them), so names with spaces or newlines arrive whole; `-` as the only PATH reads stdin too."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from kgr.cli import cli


@pytest.fixture()
def odd_names(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    names = ["with space.md", "with\nnewline.md", "plain.txt"]
    for i, name in enumerate(names):
        (root / name).write_text(f"# Page {i}\n\nThe Widget service stores order number {i}.\n")
    return root, names


def _docs(out: bytes) -> list[dict]:
    return [orjson.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("flag", ["-0", "--null"])
@pytest.mark.parametrize("dash", [[], ["-"]])
def test_normalize_reads_nul_separated_paths(odd_names, monkeypatch, flag, dash):
    root, names = odd_names
    monkeypatch.chdir(root)
    stdin = b"\0".join(n.encode() for n in names) + b"\0"
    res = CliRunner().invoke(cli, ["normalize", flag, *dash, "--root", str(root)], input=stdin)
    assert res.exit_code == 0, res.stderr
    assert sorted(d["path"] for d in _docs(res.stdout_bytes)) == sorted(names)
    assert all(d["kind"] == "doc" for d in _docs(res.stdout_bytes))


def test_without_null_newlines_still_separate_paths(odd_names, monkeypatch):
    root, _ = odd_names
    monkeypatch.chdir(root)
    res = CliRunner().invoke(cli, ["normalize", "-", "--root", str(root)], input=b"with space.md\nplain.txt\n")
    assert res.exit_code == 0, res.stderr
    assert [d["path"] for d in _docs(res.stdout_bytes)] == ["with space.md", "plain.txt"]


def test_ingest_reads_paths_from_stdin_with_null(odd_names, monkeypatch, tmp_path):
    root, names = odd_names
    monkeypatch.chdir(root)
    db = tmp_path / "kb.sqlite"
    stdin = b"\0".join(n.encode() for n in names)  # no trailing NUL: the last name still counts
    res = CliRunner().invoke(
        cli,
        ["ingest", "-0", "-", "--root", str(root), "--db", str(db), "--no-embed", "--no-graph", "--json"],
        input=stdin,
    )
    assert res.exit_code == 0, res.stderr
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert sorted(p for (p,) in store.query("SELECT path FROM docs")) == sorted(names)


def test_null_with_paths_on_the_command_line_is_a_usage_error(odd_names):
    root, _ = odd_names
    res = CliRunner().invoke(cli, ["normalize", "-0", str(root / "plain.txt")])
    assert res.exit_code == 2
    assert "--null" in res.stderr and "stdin" in res.stderr
