"""CliRunner tests: stdout records, stderr text and exit codes, asserted separately."""

from __future__ import annotations

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


@pytest.fixture()
def kb(tmp_path):
    root = tmp_path / "kb"
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "intro.md").write_text(
        "---\ntitle: Introduction\ntags: [start]\n---\n# Intro\n\nThe Widget service stores orders.\n\n## Setup\n\n1. Install it.\n2. Run it.\n"
    )
    (root / "notes.txt").write_text("Plain notes about the Widget service and its storage.\n")
    return root


def test_normalize_chunk_load_through_the_cli(runner, kb, tmp_path):
    db = tmp_path / "kb.sqlite"
    norm = runner.invoke(cli, ["normalize", str(kb)])
    assert norm.exit_code == 0, norm.stderr
    docs = records(norm.stdout_bytes)
    assert [d["path"] for d in docs] == ["guide/intro.md", "notes.txt"]
    assert docs[0]["title"] == "Introduction"
    chunked = runner.invoke(cli, ["chunk"], input=norm.stdout_bytes)
    assert chunked.exit_code == 0, chunked.stderr
    kinds = [r["kind"] for r in records(chunked.stdout_bytes)]
    assert kinds[0] == "doc" and "chunk" in kinds
    loaded = runner.invoke(cli, ["load", "--db", str(db)], input=chunked.stdout_bytes)
    assert loaded.exit_code == 0, loaded.stderr
    assert loaded.stdout == ""
    assert "loaded 2 documents" in loaded.stderr
    again = runner.invoke(cli, ["load", "--db", str(db)], input=chunked.stdout_bytes)
    assert "loaded 0 documents" in again.stderr and "2 unchanged" in again.stderr


def test_chunk_reports_bad_lines_and_exits_1(runner):
    result = runner.invoke(cli, ["chunk"], input=b'{"kind": "note", "x": 1}\nnot json\n')
    assert result.exit_code == 1
    out = records(result.stdout_bytes)
    assert out[0] == {"kind": "note", "x": 1}  # passed through unchanged
    assert out[1]["kind"] == "error" and out[1]["line"] == 2
    assert "line 2: not valid JSON" in result.stderr


def test_normalize_missing_path_is_an_error_record(runner, tmp_path):
    result = runner.invoke(cli, ["normalize", str(tmp_path / "nope.md")])
    assert result.exit_code == 1
    (err,) = records(result.stdout_bytes)
    assert err["kind"] == "error" and err["stage"] == "normalize"
    assert "nope.md" in result.stderr


def test_ingest_then_status(runner, kb, tmp_path):
    db = tmp_path / "kb.sqlite"
    first = runner.invoke(cli, ["ingest", str(kb), "--db", str(db), "--json"])
    assert first.exit_code == 0, first.stderr
    (summary,) = records(first.stdout_bytes)
    assert summary["seen"] == 2 and summary["ingested"] == 2 and summary["failed"] == 0
    second = runner.invoke(cli, ["ingest", str(kb), "--db", str(db), "--json"])
    (summary,) = records(second.stdout_bytes)
    assert summary["unchanged"] == 2 and summary["ingested"] == 0
    status = runner.invoke(cli, ["status", "--db", str(db), "--json"])
    assert status.exit_code == 0
    (info,) = records(status.stdout_bytes)
    assert info["counts"]["docs"] == 2
    assert info["counts"]["chunks"] == info["counts"]["chunks_fts"] > 0
    assert info["root"] == str(kb.resolve())
    assert info["extensions"]["sqlite-vec"]
    human = runner.invoke(cli, ["status", "--db", str(db)])
    assert "docs" in human.stdout and "sqlite-vec" in human.stdout


def test_ingest_prunes_deleted_files_and_reingests_changed_ones(runner, kb, tmp_path):
    db = tmp_path / "kb.sqlite"
    runner.invoke(cli, ["ingest", str(kb), "--db", str(db)])
    (kb / "notes.txt").unlink()
    (kb / "guide" / "intro.md").write_text("# Intro\n\nRewritten text about gadgets.\n")
    result = runner.invoke(cli, ["ingest", str(kb), "--db", str(db), "--json"])
    (summary,) = records(result.stdout_bytes)
    assert summary["pruned"] == 1 and summary["ingested"] == 1
    info = records(runner.invoke(cli, ["status", "--db", str(db), "--json"]).stdout_bytes)[0]
    assert info["counts"]["docs"] == 1


def test_ingest_refuses_a_database_built_from_another_root(runner, kb, tmp_path):
    db = tmp_path / "kb.sqlite"
    runner.invoke(cli, ["ingest", str(kb), "--db", str(db)])
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("# A\n")
    result = runner.invoke(cli, ["ingest", str(other), "--db", str(db)])
    assert result.exit_code == 2
    assert "holds documents from" in result.stderr and "Hint: pass --root" in result.stderr


def test_status_of_missing_database(runner, tmp_path):
    result = runner.invoke(cli, ["status", "--db", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: database not found")
    assert "Hint: create it with `kgr ingest" in result.stderr


def test_usage_errors_exit_2(runner):
    assert runner.invoke(cli, ["chunk", "--overlap", "2"]).exit_code == 2
    assert runner.invoke(cli, ["nosuch"]).exit_code == 2


def test_bad_config_is_one_line(runner, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("chunk: [\n")
    result = runner.invoke(cli, ["chunk", "--config", str(cfg)], input=b"")
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("Error: ") and "invalid YAML" in result.stderr
    assert "Traceback" not in result.stderr


def test_query_tag_keeps_documents_with_every_tag(runner, kb, tmp_path):
    """kgr query --tag mirrors hybrid_query's tags: here the front-matter tags of guide/intro.md."""
    db = tmp_path / "kb.sqlite"
    ing = runner.invoke(cli, ["ingest", str(kb), "--db", str(db), "--no-embed", "--no-graph"])
    assert ing.exit_code == 0, ing.stderr
    base = ["query", "Widget service", "--db", str(db), "--mode", "bm25", "--json"]
    every = runner.invoke(cli, base)
    assert every.exit_code == 0, every.stderr
    assert {r["path"] for r in records(every.stdout_bytes)} == {"guide/intro.md", "notes.txt"}
    tagged = runner.invoke(cli, [*base, "--tag", "START"])
    assert {r["path"] for r in records(tagged.stdout_bytes)} == {"guide/intro.md"}
    both = runner.invoke(cli, [*base, "--tag", "start", "--tag", "other"])
    assert both.exit_code == 0 and records(both.stdout_bytes) == []
