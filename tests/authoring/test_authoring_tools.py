"""The authoring profile through a real MCP client (the SDK's in-memory transport)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))

from serve_fixtures import Mcp, error_text, make_service  # noqa: E402

TOOLS = {
    "manage_nodes",
    "manage_relationships",
    "manage_relationship_types",
    "manage_templates",
    "generate_documents",
    "explore_neighborhoods",
    "find_relationship_paths",
}


@pytest.fixture(params=["no root", "root"])
def mcp(request, graph, tmp_path):
    """A server without a knowledge root (writes take the writer lock per call) and one with a root
    (writes go through its single writer thread)."""
    from kgr import config
    from kgr.mcp import server as serve

    root = None
    if request.param == "root":
        root = tmp_path / "notes"
        root.mkdir()
    svc = make_service(graph[0], config.load(None), root=root)
    client = Mcp(serve.build_server(svc, "authoring"))
    client.svc = svc
    yield client
    svc.close()


def ok(result):
    assert not result.is_error, result
    return result.structured_content


def test_the_profile_lists_its_tools_with_schemas(mcp):
    tools = {t.name: t for t in mcp.tools()}
    assert set(tools) == TOOLS
    assert tools["find_relationship_paths"].input_schema["properties"]["min_path_strength"]["default"] == 0.3
    assert tools["manage_nodes"].annotations.read_only_hint is False
    assert tools["find_relationship_paths"].annotations.read_only_hint is True


def test_author_then_render_then_find_paths(mcp, ids):
    out = ok(
        mcp.call(
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {
                        "name": "Thelonious Monk",
                        "summary": "Jazz pianist",
                        "node_type": "PERSON",
                        "relationships": [
                            {
                                "target_id": "Charlie Parker",
                                "relationship_type": "refers_to",
                                "relevance_strength": "strong",
                            },
                            {
                                "target_id": "Kansas City",
                                "relationship_type": "located_in",
                                "direction": "reverse",
                                "relevance_strength": "weak",
                            },
                        ],
                    }
                ],
            },
        )
    )
    monk = out["results"][0]["node_id"]
    assert out["results"][0] == {
        "node_id": monk,
        "operation": "create",
        "status": "success",
        "created_relationships": 2,
    }

    ok(
        mcp.call(
            "manage_templates",
            {
                "operation": "create",
                "templates": [
                    {
                        "name": "person",
                        "description": "People",
                        "node_types": ["PERSON"],
                        "structure": "# {{name}}\n{{#has_refs}}Refers to: {{#refs}}{{name}}{{/refs}}{{/has_refs}}",
                        "variables": {
                            "refs": "SELECT e.id, e.name FROM relations r JOIN entities e ON e.id = r.dst_id "
                            "WHERE r.src_id = :id AND r.rel = 'refers_to'"
                        },
                    }
                ],
            },
        )
    )
    first = ok(mcp.call("generate_documents", {"node_identifiers": ["thelonious monk"]}))
    doc = first["documents"][0]
    assert doc["content"] == "# Thelonious Monk\nRefers to: Charlie Parker"
    assert doc["from_cache"] is False and doc["template_used"] == "person" and first["cached"] == 1
    assert doc["dependencies"] == [monk, ids["Charlie Parker"]]
    assert ok(mcp.call("generate_documents", {"node_identifiers": [str(monk)]}))["documents"][0]["from_cache"] is True
    ok(mcp.call("manage_nodes", {"operation": "update", "nodes": [{"id": str(ids["Charlie Parker"]), "name": "Bird"}]}))
    doc = ok(mcp.call("generate_documents", {"node_identifiers": [str(monk)]}))["documents"][0]
    assert doc["from_cache"] is False and doc["content"].endswith("Refers to: Bird")

    paths = ok(
        mcp.call(
            "find_relationship_paths",
            {
                "node_pairs": [{"source_node_id": "Thelonious Monk", "target_node_id": "Miles Davis"}],
                "min_path_strength": 0.0,
            },
        )
    )
    res = paths["path_results"][0]
    assert res["paths"][0]["nodes"][1]["name"] == "Bird"
    assert res["summary"]["paths_returned"] == len(res["paths"]) >= 1
    assert all(p["narrative"] for p in res["paths"])
    assert (mcp.svc.writer is not None) == (mcp.svc.root is not None)  # with a root, writes used its writer


def test_refusals_are_clear_errors(mcp):
    out = ok(
        mcp.call(
            "manage_templates",
            {
                "operation": "create",
                "templates": [{"name": "evil", "structure": "{{x}}", "variables": {"x": "SELECT value FROM meta"}}],
            },
        )
    )
    assert out["results"][0]["status"] == "error" and "reading 'meta' is not allowed" in out["results"][0]["message"]
    assert "evil" not in {t["name"] for t in ok(mcp.call("manage_templates", {"operation": "list"}))["templates"]}
    bad = mcp.call(
        "find_relationship_paths",
        {"node_pairs": [{"source_node_id": "a", "target_node_id": "b"}], "max_path_length": 99},
    )
    assert bad.is_error
    err = mcp.call("manage_templates", {"operation": "create"})
    assert "create needs templates" in error_text(err)


def test_explore_neighborhoods_shape_and_explained_recommendations(mcp, ids):
    ok(
        mcp.call(
            "manage_nodes",
            {
                "operation": "create",
                "nodes": [
                    {"name": "Blue Note", "summary": "A record label", "node_type": "ORG"},
                    {
                        "name": "Village Vanguard",
                        "summary": "A jazz club",
                        "node_type": "PLACE",
                        "relationships": [{"target_id": "Kansas City", "relationship_type": "located_in"}],
                    },
                ],
            },
        )
    )
    out = ok(
        mcp.call(
            "explore_neighborhoods",
            {"search_terms": ["Charlie Parker", "Blue Note", "Coltrane"], "search_strategy": "text"},
        )
    )
    hood = out["neighborhoods"]["Charlie Parker"]
    assert set(hood) == {
        "primary_nodes",
        "relationships",
        "nearby_nodes",
        "common_relationship_types",
        "templates_in_use",
    }
    assert hood["primary_nodes"][0]["name"] == "Charlie Parker" and hood["primary_nodes"][0]["similarity_score"] > 0.9
    assert {(r["type"], r["target_name"]) for r in hood["relationships"]} >= {("located_in", "Kansas City")}
    near = {n["name"]: n for n in hood["nearby_nodes"]}
    assert near["Village Vanguard"]["distance"] == 2
    assert near["Village Vanguard"]["path"] == "Charlie Parker -> Kansas City -> Village Vanguard"
    assert hood["templates_in_use"] == ["default"]
    rec = out["recommendations"]
    parents = {p["node_name"]: p for p in rec["suggested_parents"]}
    assert "Kansas City" in parents and "located in" in parents["Kansas City"]["reason"]
    assert "located_in" in rec["suggested_relationship_types"]
    assert set(rec["explanations"]["suggested_relationship_types"]) == set(rec["suggested_relationship_types"])
    # Coltrane has no node; Blue Note is not connected to Charlie Parker
    assert "Coltrane" in rec["missing_intermediate_nodes"]
    assert any("Blue Note" in m and "Charlie Parker" in m for m in rec["missing_intermediate_nodes"])
    assert all(rec["explanations"]["missing_intermediate_nodes"][m] for m in rec["missing_intermediate_nodes"])


def test_vector_search_without_vectors_says_so(mcp):
    err = mcp.call("explore_neighborhoods", {"search_terms": ["Parker"], "search_strategy": "vector"})
    assert "has no vectors" in error_text(err)
    out = ok(mcp.call("explore_neighborhoods", {"search_terms": ["Parker"], "search_strategy": "combined"}))
    assert out["neighborhoods"]["Parker"]["primary_nodes"][0]["name"] == "Charlie Parker"  # the text half answers
