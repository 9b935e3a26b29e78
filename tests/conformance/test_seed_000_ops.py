"""Seed 000 (Knowledge GraphRAG MCP server), its operations side: a server started where no database
exists yet, status and its metrics, the path allowlist and the project id (sections 11.6, 15, 16, 18),
each through a real `kgr serve` subprocess over stdio."""

from __future__ import annotations

from pathlib import Path

from seed_client import payload, serve_params, session, text

STUB = {"KGR_EMBED_STUB": "1"}  # vectors without loading the model: this module is about operations


def knowledge(tmp_path: Path) -> Path:
    root = tmp_path / "knowledge"
    files = {
        "docs/retention.md": "# Data retention policy\n\nThe Archive service keeps records for seven years.\n",
        "docs/lifecycle.md": "# S3 lifecycle\n\nThe Archive service depends on the Lifecycle API.\n",
        "secret/keys.md": "# Keys\n\nNothing here may be read by the server.\n",
    }
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    return root


def test_serve_on_a_fresh_root_creates_the_database_and_reports_status_metrics_allowlist_project(tmp_path, errlog):
    """Seed 000 quick start: "# Initialize the database and report status".
    Seed 000 §11.6 `status`: "Returns: queue depth, last file, counts per table, last error."
    Seed 000 §15: "Periodic metrics: ingest rate, avg tx duration, vector count, orphaned entities".
    Seed 000 §16: "maintain an allowlist of paths" and "Namespaces: add `project_id` ... if running
    multi-tenant in one DB" (kgr: one database per project, its id stamped and reported).
    Seed 000 §18: "Run `PRAGMA incremental_vacuum` occasionally if churn is high" (new databases
    are made with auto_vacuum=INCREMENTAL)."""
    root = knowledge(tmp_path)
    db = tmp_path / "data" / "graphrag.sqlite"
    db.parent.mkdir()
    assert not db.exists()
    env = {**STUB, "KGR_PROJECT": "knowledge-graphrag", "KGR_SECURITY_ALLOWLIST": "docs/**"}

    async def run(client):
        first = payload(await client.call_tool("status", {}))
        refused = await client.call_tool("ingest_docs", {"paths": ["secret/keys.md"]})
        ingested = payload(await client.call_tool("ingest_docs", {"paths": ["**/*.md"]}))
        after = payload(await client.call_tool("status", {}))
        return first, refused, ingested, after

    first, refused, ingested, after = session(
        serve_params(db, "--root", str(root), profile="graphrag", env=env), run, errlog
    )
    assert db.is_file()
    # a new, empty database with the whole schema
    assert first["empty"] is True and first["counts"]["docs"] == 0
    assert first["schema_version"] == first["schema_latest"]
    assert first["project"] == "knowledge-graphrag"
    assert first["storage"]["auto_vacuum"] == "incremental"
    m = first["metrics"]
    assert {"queue_depth", "ingest_rate", "transactions", "vector_count", "orphaned_entities"} <= set(m)
    assert m["queue_depth"] == 0 and m["vector_count"] == 0
    assert {"queue_depth", "last_file", "counts", "last_error"} <= set(first)  # §11.6's four
    assert first["queue_depth"] == 0 and first["last_file"] is None and first["last_error"] is None
    # the allowlist: a named file outside it is refused, a glob reads only what it allows
    assert refused.is_error and "allowlist" in text(refused)
    assert ingested["ingested"] == 2
    assert after["empty"] is False and after["counts"]["docs"] == 2
    assert after["project"] == "knowledge-graphrag"
    m = after["metrics"]
    assert m["from"] == "live writer" and m["queue_depth"] == 0
    assert m["files_done"] == 2 and m["ingest_rate"] > 0
    tx = m["transactions"]
    assert tx["count"] >= 2 and 0 < tx["median_ms"] <= tx["p95_ms"] <= tx["max_ms"] and tx["last_ms"] > 0
    assert m["vector_count"] >= after["counts"]["chunks"] > 0
    assert after["last_file"] in ("docs/lifecycle.md", "docs/retention.md")
    assert "secret" not in str(after["last_file"])


def test_serve_on_a_missing_database_without_a_root_starts_empty(tmp_path, errlog):
    """Seed 000 quick start: "# Initialize the database and report status" (a server given only
    `--db` for a file that does not exist yet starts on an empty database, not an error)."""
    db = tmp_path / "graphrag.sqlite"

    async def run(client):
        status = payload(await client.call_tool("status", {}))
        query = await client.call_tool("hybrid_query", {"query": "data retention policy"})
        ingest = await client.call_tool("ingest_docs", {"paths": ["docs/a.md"]})
        return status, query, ingest

    status, query, ingest = session(serve_params(db, profile="graphrag", env=STUB), run, errlog)
    assert db.is_file() and status["empty"] is True and status["project"] == "kgr"
    assert status["metrics"]["queue_depth"] == 0 and status["writer"]["alive"] is False
    assert not query.is_error  # an empty answer, not a failure
    assert ingest.is_error and "no knowledge root" in text(ingest)
