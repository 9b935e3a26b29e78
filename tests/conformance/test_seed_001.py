"""Seed 001 (the knowledge-graph memory server with visualization), kept: every tool it lists, driven through
one real `kgr serve --profile memory` subprocess over stdio with the seed's own argument names and example
records, and its KNOWLEDGE_BASE_FILE_PATH imported at start.

The session runs once (module fixture ``played``) and records each answer; each test checks one section of the
seed against those answers. The side-by-side comparison with the reference npm server is tests/memory's.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from seed_client import payload, serve_params, session, text

SEED_TOOLS = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "visualize_graph",
]

# The seed's "Storage Format (JSONL)" example, verbatim.
SEED_JSONL = (
    '{"type":"entity","name":"John_Smith","entityType":"person","observations":["Software engineer"]}\n'
    '{"type":"relation","from":"John_Smith","to":"TechCorp","relationType":"works_at"}\n'
)
JOHN = {"name": "John_Smith", "entityType": "person", "observations": ["Software engineer"]}
TECHCORP = {"name": "TechCorp", "entityType": "company", "observations": ["Employs software engineers"]}
JANE = {"name": "Jane_Doe", "entityType": "person", "observations": ["Product manager"]}
WORKS_AT = {"from": "John_Smith", "to": "TechCorp", "relationType": "works_at"}


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read()


def _names(graph: dict) -> list[str]:
    return sorted(e["name"] for e in graph["entities"])


def _rels(graph: dict) -> list[tuple[str, str, str]]:
    return sorted((r["from"], r["to"], r["relationType"]) for r in graph["relations"])


def _edges(view: dict) -> list[tuple[str, str, str]]:
    name = {n["id"]: n["name"] for n in view["nodes"]}
    return sorted((name[e["from"]], name[e["to"]], e["rel"]) for e in view["edges"])


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> dict:
    """The seed's calls, in one server session on a new database; every answer by step name."""
    db = tmp_path_factory.mktemp("seed001") / "memory.sqlite"  # does not exist: the first run
    out: dict = {}

    async def call(c, step: str, tool: str, args: dict):
        out[step] = await c.call_tool(tool, args)
        return out[step]

    async def fn(c):
        out["tools"] = {t.name: t for t in (await c.list_tools()).tools}
        await call(c, "first_read", "read_graph", {})
        await call(c, "create", "create_entities", {"entities": [JOHN, TECHCORP]})
        await call(c, "create_again", "create_entities", {"entities": [{**JOHN, "observations": ["other"]}, JANE]})
        await call(c, "relate", "create_relations", {"relations": [WORKS_AT]})
        await call(c, "relate_again", "create_relations", {"relations": [WORKS_AT]})
        await call(
            c,
            "observe",
            "add_observations",
            {"observations": [{"entityName": "John_Smith", "contents": ["Leads the platform team"]}]},
        )
        await call(
            c, "observe_missing", "add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}
        )
        await call(c, "invalid_entity", "create_entities", {"entities": [{"name": "Typeless", "observations": []}]})
        await call(c, "invalid_relation", "create_relations", {"relations": [{"from": "John_Smith", "to": "TechCorp"}]})
        await call(c, "search_engineer", "search_nodes", {"query": "engineer"})
        await call(c, "search_upper", "search_nodes", {"query": "ENGINEER"})
        await call(c, "search_type", "search_nodes", {"query": "person"})
        await call(c, "search_name", "search_nodes", {"query": "techcorp"})
        await call(c, "open", "open_nodes", {"names": ["TechCorp", "Nobody"]})
        await call(c, "read", "read_graph", {})

        viz = payload(await call(c, "visualize", "visualize_graph", {}))
        await call(c, "visualize_again", "visualize_graph", {})
        out["page"] = _get(viz["url"])
        out["view"] = json.loads(_get(viz["graph_api"])[2])
        john = next(n for n in out["view"]["nodes"] if n["name"] == "John_Smith")
        out["details"] = json.loads(_get(f"{viz['url']}api/entity/{john['id']}")[2])

        await call(
            c,
            "unobserve",
            "delete_observations",
            {"deletions": [{"entityName": "John_Smith", "observations": ["Software engineer"]}]},
        )
        await call(c, "after_unobserve", "open_nodes", {"names": ["John_Smith"]})
        await call(c, "unrelate", "delete_relations", {"relations": [WORKS_AT]})
        await call(c, "after_unrelate", "read_graph", {})
        out["view_after_unrelate"] = json.loads(_get(viz["graph_api"])[2])  # what the page's next poll gets
        await call(c, "relate_back", "create_relations", {"relations": [WORKS_AT]})
        await call(c, "delete", "delete_entities", {"entityNames": ["TechCorp", "Jane_Doe"]})
        await call(c, "after_delete", "read_graph", {})
        out["view_after_delete"] = json.loads(_get(viz["graph_api"])[2])

    session(serve_params(db, profile="memory"), fn)
    return out


def test_the_tools_registered(played):
    """Seed 001 "McpServer", Tools Registered: "`create_entities` `create_relations` `add_observations`
    `delete_entities` `delete_observations` `delete_relations` `read_graph` `search_nodes` `open_nodes`
    `visualize_graph`"; "Tool Schemas": Entity {name, entityType, observations}, Relation {from, to,
    relationType}."""
    tools = played["tools"]
    assert set(SEED_TOOLS) <= set(tools)
    entity = tools["create_entities"].input_schema["$defs"]["Entity"]
    assert set(entity["required"]) == {"name", "entityType", "observations"}
    assert entity["properties"]["observations"]["type"] == "array"
    relation = tools["create_relations"].input_schema["$defs"]["Relation"]
    assert set(relation["required"]) == {"from", "to", "relationType"}
    assert tools["visualize_graph"].input_schema.get("required", []) == []  # callable with no arguments


def test_a_first_run_is_an_empty_graph(played):
    """Seed 001 "Error Handling": "File not found: Returns empty graph on first run"."""
    assert payload(played["first_read"])["entities"] == []
    assert payload(played["first_read"])["relations"] == []


def test_creating_entities_skips_duplicates(played):
    """Seed 001 "Creating Entities": "Filter duplicates - Add entities - Save graph"; "Key Methods":
    "`createEntities()`: Add new entities (skip duplicates)"; "Error Handling": "Duplicate prevention:
    Silently skips duplicate entities/relations"."""
    created = payload(played["create"])["entities"]
    assert created == [JOHN, TECHCORP]
    again = payload(played["create_again"])["entities"]
    assert again == [JANE]  # John_Smith existed: skipped, without an error
    john = next(e for e in payload(played["read"])["entities"] if e["name"] == "John_Smith")
    assert "other" not in john["observations"]


def test_creating_relations_skips_duplicates(played):
    """Seed 001 "Key Methods": "`createRelations()`: Add new relations (skip duplicates)"; "Relation Schema":
    "from: string // Source entity name, to: string // Target entity name, relationType: string"."""
    assert payload(played["relate"])["relations"] == [WORKS_AT]
    assert payload(played["relate_again"])["relations"] == []
    assert _rels(payload(played["read"])) == [("John_Smith", "TechCorp", "works_at")]


def test_add_observations_and_the_missing_entity_error(played):
    """Seed 001 "Error Handling": "Entity not found: Throws error when adding observations to non-existent
    entity"."""
    results = payload(played["observe"])["results"]
    assert results == [{"entityName": "John_Smith", "addedObservations": ["Leads the platform team"]}]
    missing = played["observe_missing"]
    assert missing.is_error and "Nobody" in text(missing) and "not found" in text(missing)
    assert "Nobody" not in _names(payload(played["read"]))


def test_invalid_inputs_are_refused(played):
    """Seed 001 "Error Handling": "Validation errors: Zod schema validation catches invalid inputs"."""
    for step, field in (("invalid_entity", "entityType"), ("invalid_relation", "relationType")):
        result = played[step]
        assert result.is_error and field in text(result) and "required" in text(result), text(result)
    assert "Typeless" not in _names(payload(played["read"]))


def test_search_nodes(played):
    """Seed 001 "Searching Nodes" (query: "engineer"): "Filter entities by query: - Match entity names - Match
    entity types - Match observations; 3. Get relations between matching entities; 4. Return filtered graph";
    "Performance Considerations": "Search is case-insensitive linear scan"."""
    by_observation = payload(played["search_engineer"])
    assert _names(by_observation) == ["John_Smith", "TechCorp"]
    assert _rels(by_observation) == [("John_Smith", "TechCorp", "works_at")]  # between two matches
    assert set(by_observation["entities"][0]) >= {"name", "entityType", "observations"}
    assert _names(payload(played["search_upper"])) == ["John_Smith", "TechCorp"]
    assert _names(payload(played["search_type"])) == ["Jane_Doe", "John_Smith"]
    assert _names(payload(played["search_name"])) == ["TechCorp"]


def test_open_nodes(played):
    """Seed 001 "Key Methods": "`openNodes()`: Retrieve specific nodes by name"."""
    opened = payload(played["open"])
    assert opened["entities"] == [TECHCORP]  # an unknown name is no node, and no error
    assert _rels(opened) == [("John_Smith", "TechCorp", "works_at")]


def test_read_graph(played):
    """Seed 001 "Storage Format (JSONL)": each entity {"name", "entityType", "observations"} and relation
    {"from", "to", "relationType"}; "Key Methods": `loadGraph()`."""
    graph = payload(played["read"])
    assert _names(graph) == ["Jane_Doe", "John_Smith", "TechCorp"]
    john = next(e for e in graph["entities"] if e["name"] == "John_Smith")
    assert john == {
        "name": "John_Smith",
        "entityType": "person",
        "observations": ["Software engineer", "Leads the platform team"],
    }
    assert graph["relations"] == [WORKS_AT]


def test_the_deletes(played):
    """Seed 001 "KnowledgeGraphManager": "CRUD operations on entities and relations"; Tools Registered:
    `delete_entities`, `delete_observations`, `delete_relations`."""
    for step in ("unobserve", "unrelate", "delete"):
        assert payload(played[step])["success"] is True
    john = payload(played["after_unobserve"])["entities"][0]
    assert john["observations"] == ["Leads the platform team"]
    assert payload(played["after_unrelate"])["relations"] == []
    after = payload(played["after_delete"])
    assert _names(after) == ["John_Smith"]
    assert after["relations"] == []  # the relation re-created to TechCorp went with it


def test_visualize_graph(played):
    """Seed 001 "Visualization": "Interactive D3.js-based graph visualization served via local HTTP with live
    updates"; "`startVisualizationServer()`: HTTP server on 127.0.0.1, serves `/api/graph` for polling";
    "Features: Zoom/pan, drag nodes, click for details, entity type colors, toggle labels, live updates (2s
    polling, pause/resume)". (kgr draws with vis-network instead of D3; the browser opens on request,
    open_browser.)"""
    viz = payload(played["visualize"])
    assert viz["url"].startswith("http://127.0.0.1:") and viz["started"] is True
    again = payload(played["visualize_again"])
    assert again["url"] == viz["url"] and again["started"] is False  # the running page, reused
    assert viz["message"].endswith(viz["url"]) and viz["graph_api"] == viz["url"] + "api/graph"

    status, content_type, page = played["page"]
    assert status == 200 and content_type.startswith("text/html")
    assert b'id="labels"' in page and b'id="pause"' in page  # toggle labels, pause/resume

    view = played["view"]
    assert {(n["name"], n["type"]) for n in view["nodes"]} == {
        ("John_Smith", "person"),
        ("TechCorp", "company"),
        ("Jane_Doe", "person"),
    }
    assert _edges(view) == [("John_Smith", "TechCorp", "works_at")]
    colors = view["types"]
    assert set(colors) == {"person", "company"} and colors["person"] != colors["company"]  # entity type colors
    details = played["details"]  # click for details
    assert details["name"] == "John_Smith"
    assert [o["content"] for o in details["observations"]] == ["Software engineer", "Leads the platform team"]

    # live updates: what a poll returns after each change
    assert _edges(played["view_after_unrelate"]) == []
    assert [n["name"] for n in played["view_after_delete"]["nodes"]] == ["John_Smith"]


def test_knowledge_base_file_path_at_start(tmp_path, errlog):
    """Seed 001 "Configuration", Environment Variables: "`KNOWLEDGE_BASE_FILE_PATH`: Custom storage path
    (optional)"; "Storage Format (JSONL)": the seed's two example lines. kgr imports the file when the server
    starts on a database without memory entities, and never again once it holds some. (The example's relation
    names TechCorp, which the file does not hold: kgr's graph has no dangling relations, so it is left out and
    named on stderr.)"""
    kb_file = tmp_path / "knowledge_base.jsonl"
    kb_file.write_text(SEED_JSONL)
    db = tmp_path / "memory.sqlite"
    params = serve_params(db, profile="memory", env={"KNOWLEDGE_BASE_FILE_PATH": str(kb_file)})

    async def read(c):
        return (
            payload(await c.call_tool("read_graph", {})),
            payload(await c.call_tool("search_nodes", {"query": "engineer"})),
        )

    graph, found = session(params, read, errlog=errlog)
    assert graph["entities"] == [JOHN]
    assert graph["relations"] == []
    assert _names(found) == ["John_Smith"]
    log = errlog.read_text()
    assert "imported 1 entities" in log and "KNOWLEDGE_BASE_FILE_PATH" in log
    assert "John_Smith -works_at-> TechCorp" in log

    # the file grows (say the reference wrote to it); this database already holds memory: not re-imported
    kb_file.write_text(SEED_JSONL + json.dumps({"type": "entity", **TECHCORP}) + "\n")
    graph, _ = session(params, read, errlog=errlog)
    assert _names(graph) == ["John_Smith"]
    assert "not imported" in Path(errlog).read_text()
