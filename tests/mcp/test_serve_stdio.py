"""End to end: a real `kgr serve` subprocess driven over stdio by the MCP Python SDK client,
answering with the real default model."""

from __future__ import annotations

import os
import sys
import time

import anyio
import pytest


def params(db, *args, env=None):
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgr", "serve", "--db", str(db), *args],
        env={"KGR_REDACT_KEY": "test-key", **(env or {})},
    )


def run_client(server_params, fn, errlog=None):
    from mcp import Client

    async def main():
        async with Client(server_params) as client:
            return await fn(client)

    return anyio.run(main)


def test_stdio_graphrag_with_the_real_model(built_kb, tmp_path):
    db, _ = built_kb
    err = open(tmp_path / "stderr.txt", "w")

    async def session(client):
        tools = {t.name for t in (await client.list_tools()).tools}
        t0 = time.perf_counter()
        first = await client.call_tool(
            "hybrid_query", {"query": "Which team owns the Vehicle Locator Service?", "k": 5}
        )
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = await client.call_tool("hybrid_query", {"query": "What is the most a rider pays in one day?", "k": 5})
        warm = time.perf_counter() - t0
        bad = await client.call_tool("hybrid_query", {"query": "x", "k": 10**9})
        after = await client.call_tool("status", {})
        doc = await client.read_resource("kgr://doc/teams/fleet-operations.md")
        return tools, first, again, bad, after, doc, cold, warm

    from mcp import Client
    from mcp.client.stdio import stdio_client

    async def main():  # stdio_client is itself a Transport; through it the server's stderr is kept
        async with Client(stdio_client(params(db, "--config", str(db.parent / "config.yaml")), errlog=err)) as client:
            return await session(client)

    tools, first, again, bad, after, doc, cold, warm = anyio.run(main)
    err.close()
    assert {"hybrid_query", "ingest_docs", "status"} <= tools
    assert not first.is_error
    paths = [r["path"] for r in first.structured_content["results"]]
    assert "teams/fleet-operations.md" in paths[:3], paths  # the page that says who owns it
    assert first.structured_content["results"][0]["scores"]["cosine"] is not None  # the model answered
    top = [r["path"] for r in again.structured_content["results"][:3]]
    assert "services/fare-engine.md" in top, top  # the fare cap, asked in other words
    assert bad.is_error and bad.content[0].text == "Argument k must be at most 100 (got 1000000000)."
    assert after.structured_content["counts"]["docs"] == 17
    assert "Vehicle Locator Service" in doc.contents[0].text
    # The model stays loaded: a warm query takes well under a second on an idle machine
    # (bench/bench_query.py); the bound is generous for a loaded one.
    assert warm < 10.0, f"a warm query took {warm:.2f}s"
    log = (tmp_path / "stderr.txt").read_text()
    assert "kgr serve: 7 tools (graphrag) on stdio" in log


def test_stdio_kb_profile_and_a_bad_profile(built_kb):
    db, _ = built_kb

    async def session(client):
        tools = sorted(t.name for t in (await client.list_tools()).tools)
        rel = await client.call_tool("get_related", {"concept": "Fleet Operations", "hops": 1})
        return tools, rel

    tools, rel = run_client(params(db, "--profile", "kb"), session)
    assert tools == ["get_concept", "get_related", "kb_health", "list_concepts", "search_concepts", "status"]
    assert rel.structured_content["root"]["name"] == "Fleet Operations" and rel.structured_content["edges"]

    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--db", str(db), "--profile", "everything"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Invalid value for '--profile'" in proc.stderr


def test_missing_folder_of_the_database_is_a_clear_error(tmp_path):
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--db", str(tmp_path / "nope" / "none.sqlite")],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert "database not found" in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "nope").exists()


def test_serve_without_a_database_path_creates_nothing(tmp_path):
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("KGR_DB", "KGR_CONFIG")}
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert "database not found: kgr.sqlite" in proc.stderr and "--db PATH" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="needs /proc")
def test_root_option_builds_a_new_database(tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# Kestrel\n\nThe Kestrel pump station feeds the harbour.\n")
    db = tmp_path / "new.sqlite"

    async def session(client):
        ing = await client.call_tool("ingest_docs", {"paths": ["a.md"]})
        hit = await client.call_tool("hybrid_query", {"query": "Kestrel pump", "mode": "bm25"})
        return ing, hit

    ing, hit = run_client(params(db, "--root", str(root), env={"KGR_EMBED_STUB": "1"}), session)
    assert not ing.is_error and ing.structured_content["ingested"] == 1
    assert hit.structured_content["results"][0]["path"] == "a.md"
