"""Issue 14 item 14: a tool argument the schema refuses reaches the client as one sentence that
names the argument and the rule ("Argument k must be at most 100 (got 500)."), not pydantic's
multi-line report; through the SDK's in-memory client and over stdio."""

from __future__ import annotations

import sys

import anyio
import pytest
from serve_fixtures import Mcp, error_text, make_service


@pytest.fixture()
def servers(tmp_path):
    from kgr import config
    from kgr.mcp import server as serve
    from kgr.store import Store

    db = tmp_path / "kb.sqlite"
    Store(db).close()
    svc = make_service(db, config.load(None))
    yield {p: Mcp(serve.build_server(svc, p)) for p in ("graphrag", "kb", "authoring")}
    svc.close()


def refusal(client, tool, args):
    res = client.call(tool, args)
    assert res.is_error, res
    text = error_text(res)
    assert "\n" not in text and "validation error" not in text and "pydantic" not in text, text
    assert text.startswith("Argument ") and text.endswith("."), text
    return text


@pytest.mark.parametrize(
    "profile, tool, args, message",
    [
        ("graphrag", "hybrid_query", {"query": "fare cap", "k": 500}, "Argument k must be at most 100 (got 500)."),
        ("graphrag", "hybrid_query", {"query": "fare cap", "k": 0}, "Argument k must be at least 1 (got 0)."),
        ("graphrag", "hybrid_query", {"query": "fare cap", "k": "many"}, "Argument k must be an integer (got 'many')."),
        ("graphrag", "hybrid_query", {"k": 3}, "Argument q is required."),
        ("graphrag", "hybrid_query", {"query": ""}, "Argument query must not be empty."),
        (
            "graphrag",
            "hybrid_query",
            {"query": "x" * 5000},
            "Argument query must be at most 4000 characters long (got 5000 characters).",
        ),
        (
            "graphrag",
            "hybrid_query",
            {"query": "fare cap", "mode": "fast"},
            "Argument mode must be 'graph', 'hybrid', 'vector' or 'bm25' (got 'fast').",
        ),
        (
            "graphrag",
            "hybrid_query",
            {"query": "fare cap", "rels": "uses"},
            "Argument rels must be a list (got 'uses').",
        ),
        ("graphrag", "ingest_docs", {"paths": ["a.md"] * 300}, "Argument paths must have at most 200 items (got 300)."),
        ("graphrag", "ingest_docs", {"wait": "perhaps"}, "Argument wait must be true or false (got 'perhaps')."),
        ("kb", "kb_health", {"full": [1]}, "Argument full must be true or false (got [1])."),
        (
            "authoring",
            "manage_nodes",
            {"operation": "create", "nodes": [{"name": "x" * 600}]},
            "Argument nodes[0].name must be at most 512 characters long (got 600 characters).",
        ),
        (
            "authoring",
            "manage_nodes",
            {"operation": "create", "nodes": []},
            "Argument nodes must have at least 1 item (got 0).",
        ),
        (
            "authoring",
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": "a"}]},
            "Argument node_pairs[0].target_node_id is required.",
        ),
        (
            "authoring",
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": "a", "target_node_id": "b"}], "min_path_strength": 1.5},
            "Argument min_path_strength must be at most 1.0 (got 1.5).",
        ),
    ],
)
def test_one_sentence_naming_the_argument(servers, profile, tool, args, message):
    assert refusal(servers[profile], tool, args) == message


def test_several_problems_name_the_first_and_count_the_rest(servers):
    text = refusal(servers["graphrag"], "hybrid_query", {"query": "", "k": 500, "hops": 9})
    assert text == "Argument query must not be empty (and 2 more problems with the arguments)."


def test_a_long_bad_value_is_not_echoed_whole(servers):
    text = refusal(servers["graphrag"], "hybrid_query", {"query": "fare", "mode": "m" * 10_000})
    assert len(text) < 200 and text.startswith("Argument mode must be "), text


def test_over_stdio(tmp_path):
    from mcp import Client, StdioServerParameters

    from kgr.store import Store

    db = tmp_path / "kb.sqlite"
    Store(db).close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgr", "serve", "--db", str(db), "--profile", "kb"],
        env={"KGR_REDACT_KEY": "test-key"},
    )

    async def main():
        async with Client(params) as client:
            return await client.call_tool("list_concepts", {"limit": 501})

    res = anyio.run(main)
    assert res.is_error and error_text(res) == "Argument limit must be at most 500 (got 501)."
