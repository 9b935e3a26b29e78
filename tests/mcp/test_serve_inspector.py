"""The official MCP Inspector (npm @modelcontextprotocol/inspector 1.0.3, CLI mode) drives a real
`kgr serve` over stdio and over streamable HTTP.

.ci/run installs it into .ci/node; elsewhere the test skips with the reason, except under
CI=true, where a missing Inspector is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from serve_fixtures import INSPECTOR, spawn_http, stop


def inspector() -> str:
    found = os.environ.get("KGR_INSPECTOR") or (str(INSPECTOR) if INSPECTOR.exists() else shutil.which("mcp-inspector"))
    if not found:
        why = (
            f"the MCP Inspector is not installed ({INSPECTOR}); install it with "
            "`npm install --prefix .ci/node @modelcontextprotocol/inspector@1.0.3`"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run does this)")
        pytest.skip(why)
    return found


def run_cli(*args: str, timeout: float = 180) -> dict:
    proc = subprocess.run(
        [inspector(), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "KGR_REDACT_KEY": "test-key"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    start = proc.stdout.index("{")  # after the v1 deprecation banner
    return json.loads(proc.stdout[start:])


def serve_cmd(db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kgr", "serve", "--db", str(db), *extra]


def test_inspector_lists_the_tools(built_kb):
    out = run_cli(*serve_cmd(built_kb[0]), "--method", "tools/list")
    names = {t["name"] for t in out["tools"]}
    assert names == {
        "ingest_docs",
        "extract_and_link",
        "hybrid_query",
        "entity_lookup",
        "explain_entity",
        "status",
        "review_links",
    }
    hq = next(t for t in out["tools"] if t["name"] == "hybrid_query")
    assert hq["annotations"]["readOnlyHint"] is True and hq["inputSchema"]["properties"]["k"]["maximum"] == 100


def test_inspector_calls_hybrid_query_with_the_real_model(built_kb):
    db = built_kb[0]
    # (the Inspector takes --config for itself: the server's config goes in by environment)
    out = run_cli(
        "-e",
        f"KGR_CONFIG={db.parent / 'config.yaml'}",
        *serve_cmd(db),
        "--method",
        "tools/call",
        "--tool-name",
        "hybrid_query",
        "--tool-arg",
        "query=Which team owns the Vehicle Locator Service?",
        "--tool-arg",
        "k=3",
    )
    assert out["isError"] is False
    results = out["structuredContent"]["results"]
    assert len(results) == 3 and "teams/fleet-operations.md" in [r["path"] for r in results]
    assert json.loads(out["content"][0]["text"]) == out["structuredContent"]


def test_inspector_sees_errors_and_resources(built_kb):
    db = built_kb[0]
    bad = run_cli(
        *serve_cmd(db),
        "--method",
        "tools/call",
        "--tool-name",
        "hybrid_query",
        "--tool-arg",
        "query=x",
        "--tool-arg",
        "k=1000",
    )
    assert bad["isError"] is True and bad["content"][0]["text"] == "Argument k must be at most 100 (got 1000)."
    doc = run_cli(*serve_cmd(db), "--method", "resources/read", "--uri", "kgr://doc/teams/fleet-operations.md")
    assert doc["contents"][0]["text"].startswith("# Fleet Operations")
    tpl = run_cli(*serve_cmd(db), "--method", "resources/templates/list")
    assert tpl["resourceTemplates"][0]["uriTemplate"] == "kgr://doc/{+path}"


def test_inspector_over_streamable_http_with_a_token(built_kb):
    token = "inspector-token-0123456789abcdef"
    proc, url, _ = spawn_http(
        built_kb[0], "--profile", "kb", "--token-env", "INSPECTOR_TOKEN", env={"INSPECTOR_TOKEN": token}
    )
    try:
        out = run_cli(
            url,
            "--transport",
            "http",
            "--header",
            f"Authorization: Bearer {token}",
            "--method",
            "tools/call",
            "--tool-name",
            "get_related",
            "--tool-arg",
            "concept=Fleet Operations",
            "--tool-arg",
            "hops=1",
        )
        assert out["structuredContent"]["root"]["name"] == "Fleet Operations"
        assert out["structuredContent"]["edges"]
        refused = subprocess.run(
            [inspector(), "--cli", url, "--transport", "http", "--method", "tools/list"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert refused.returncode != 0 and "Unauthorized" in refused.stdout + refused.stderr
    finally:
        log = stop(proc)
    assert token not in log
