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


def test_status_of_missing_database_creates_it_empty(runner, tmp_path):
    """Seed 000 quick start: "Initialize the database and report status"."""
    db = tmp_path / "none.sqlite"
    result = runner.invoke(cli, ["status", "--db", str(db), "--json"], env={"KGR_PROJECT": "acme"})
    assert result.exit_code == 0, result.stderr
    info = records(result.stdout_bytes)[0]
    assert db.is_file() and info["empty"] is True
    assert info["schema_version"] == info["schema_latest"] and info["counts"]["docs"] == 0
    assert info["project"] == "acme" and info["storage"]["auto_vacuum"] == "incremental"
    text = runner.invoke(cli, ["status", "--db", str(db)])
    assert text.exit_code == 0 and "empty      yes: no documents" in text.stdout
    assert "project    acme" in text.stdout


def test_bare_status_does_not_create_the_default_database(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KGR_DB", raising=False)
    monkeypatch.delenv("KGR_CONFIG", raising=False)
    result = runner.invoke(cli, ["status"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: database not found: kgr.sqlite")
    assert "kgr status --db kgr.sqlite" in result.stderr
    assert list(tmp_path.iterdir()) == []
    named = runner.invoke(cli, ["status", "--json"], env={"KGR_DB": str(tmp_path / "kb.sqlite")})
    assert named.exit_code == 0 and records(named.stdout_bytes)[0]["empty"] is True


def test_status_in_a_missing_folder_is_a_clear_error(runner, tmp_path):
    result = runner.invoke(cli, ["status", "--db", str(tmp_path / "nope" / "none.sqlite")])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: database not found") and "does not exist" in result.stderr
    assert not (tmp_path / "nope").exists()


def test_status_of_a_zero_byte_file_initializes_it(runner, tmp_path):
    db = tmp_path / "zero.sqlite"
    db.touch()
    result = runner.invoke(cli, ["status", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.stderr
    assert records(result.stdout_bytes)[0]["empty"] is True and db.stat().st_size > 0


def test_status_refuses_another_applications_file(runner, tmp_path):
    db = tmp_path / "other.sqlite"
    db.write_bytes(b"not a database at all, just text")
    result = runner.invoke(cli, ["status", "--db", str(db)])
    assert result.exit_code != 0 and "not a kgr database" in result.stderr
    assert db.read_bytes() == b"not a database at all, just text"


def test_query_of_missing_database_still_fails_and_creates_nothing(runner, tmp_path):
    db = tmp_path / "none.sqlite"
    result = runner.invoke(cli, ["query", "anything", "--db", str(db)])
    assert result.exit_code == 1 and result.stderr.startswith("Error: database not found")
    assert not db.exists()


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


def test_status_after_kgr_ingest_reports_that_runs_metrics(runner, kb, tmp_path):
    """Seed 000 section 15: "Periodic metrics: ingest rate, avg tx duration, vector count, orphaned entities"."""
    db = tmp_path / "kb.sqlite"
    env = {"KGR_EMBED_STUB": "1", "KGR_NORMALIZE_WORKERS": "1"}
    ingest = runner.invoke(cli, ["ingest", str(kb), "--db", str(db), "--no-graph"], env=env)
    assert ingest.exit_code == 0, ingest.stderr
    result = runner.invoke(cli, ["status", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.stderr
    info = records(result.stdout_bytes)[0]
    m = info["metrics"]
    assert info["empty"] is False and m["from"] == "last kgr ingest" and m["queue_depth"] == 0
    assert m["files_done"] == 2 and m["ingest_rate"] > 0
    assert m["transactions"]["count"] >= 2 and m["transactions"]["median_ms"] > 0
    assert m["vector_count"] == info["counts"]["chunks"] > 0
    text = runner.invoke(cli, ["status", "--db", str(db)]).stdout
    assert "metrics    last kgr ingest:" in text and "transactions, last" in text
