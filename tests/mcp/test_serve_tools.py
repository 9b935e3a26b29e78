"""Every tool through the SDK's in-memory client: schemas and bounds, annotations, structured
results that agree with the library, isError with a clear message on bad input, profiles and
the document resource."""

from __future__ import annotations

import json

import pytest
from serve_fixtures import Mcp, error_text, make_service

from kgr.errors import UsageError
from kgr.mcp import server as serve
from kgr.retrieval import concepts, entities

GRAPHRAG = {
    "ingest_docs",
    "extract_and_link",
    "hybrid_query",
    "entity_lookup",
    "explain_entity",
    "status",
    "review_links",
}
KB = {"search_concepts", "get_concept", "get_related", "list_concepts", "kb_health", "status"}


def test_profiles_give_their_tool_sets(service):
    assert {t.name for t in Mcp(serve.build_server(service, "graphrag")).tools()} == GRAPHRAG
    assert {t.name for t in Mcp(serve.build_server(service, "kb")).tools()} == KB
    assert {t.name for t in Mcp(serve.build_server(service, "all")).tools()} == set(serve.TOOLS) >= GRAPHRAG | KB


def test_a_profile_without_tools_is_a_clear_error(service, monkeypatch):
    from kgr.mcp import registry  # the tables live there; serve re-exports them

    monkeypatch.setattr(registry, "PROFILES", {**serve.PROFILES, "later": []})
    monkeypatch.setattr(registry, "PLANNED", {**serve.PLANNED, "later": "some_tool (seed 999)"})
    with pytest.raises(UsageError, match=r"the later profile has no tools yet \(planned: some_tool"):
        serve.build_server(service, "later")


def test_unknown_profile(service):
    with pytest.raises(UsageError, match="unknown profile"):
        serve.profile_tools("everything")


def test_a_registered_tool_joins_its_profile(service, monkeypatch):
    """The profile mechanism: registering a tool is all a later profile needs."""
    from kgr.mcp import registry  # the tables live there; serve re-exports them

    monkeypatch.setattr(registry, "TOOLS", dict(serve.TOOLS))
    monkeypatch.setattr(registry, "PROFILES", {k: list(v) for k, v in serve.PROFILES.items()})

    def count_graph(self) -> dict[str, int]:
        """The whole graph."""
        return {"entities": self.svc.read(lambda s: s.scalar("SELECT count(*) FROM entities"))}

    monkeypatch.setattr(
        serve.Tools,
        "count_graph",
        serve.tool("count_graph", profiles=("later",), title="Count the graph")(serve._boundary(count_graph)),
        raising=False,
    )
    mcp = Mcp(serve.build_server(service, "later"))
    assert [t.name for t in mcp.tools()] == ["count_graph"]
    assert mcp.call("count_graph").structured_content["entities"] > 0
    assert "count_graph" in serve.profile_tools("all")


def test_schemas_are_bounded_and_annotated(mcp_all):
    tools = {t.name: t for t in mcp_all.tools()}
    hq = tools["hybrid_query"].input_schema["properties"]
    assert hq["k"]["maximum"] == serve.MAX_K and hq["k"]["minimum"] == 1
    assert hq["hops"]["maximum"] == serve.MAX_HOPS
    for name in ("q", "query"):  # the seed's name and its alias
        assert hq[name]["anyOf"][0]["maxLength"] == serve.MAX_QUERY_CHARS
    assert tools["get_related"].input_schema["properties"]["max_nodes"]["maximum"] == serve.MAX_NODES
    paths = tools["ingest_docs"].input_schema["properties"]["paths"]["anyOf"][0]
    assert paths["maxItems"] == serve.MAX_PATHS and paths["items"]["maxLength"] == 1024
    for name, t in tools.items():
        assert t.description and len(t.description) > 40, name
        assert t.output_schema is not None and t.output_schema["type"] == "object", name
        assert t.annotations.read_only_hint is serve.TOOLS[name].read_only, name
        if name in GRAPHRAG | KB:
            assert t.annotations.read_only_hint is (name not in ("ingest_docs", "extract_and_link")), name
        assert t.annotations.open_world_hint is False
    assert tools["ingest_docs"].annotations.destructive_hint is False
    assert tools["ingest_docs"].annotations.idempotent_hint is True


def test_hybrid_query_matches_the_library(mcp_all, service):
    from kgr.retrieval import query

    r = mcp_all.call("hybrid_query", {"query": "Who is on call for the fare engine?", "k": 5})
    assert not r.is_error
    got = r.structured_content
    want = service.read(
        query.hybrid_query,
        "Who is on call for the fare engine?",
        k=5,
        hops=2,
        rels=service.cfg["retrieval"]["rels"],
        embed_query=service.embed_query(),
        weights=query.Weights.from_config(service.cfg),
        vectors_in_memory=True,
    )
    assert [x["chunk_id"] for x in got["results"]] == [x["chunk_id"] for x in want["results"]]
    assert got["truncated"] is False
    assert len(got["results"]) == 5
    first = got["results"][0]
    assert {"path", "section", "snippet", "start", "end", "why", "entities", "via"} <= first.keys()
    assert json.loads(r.content[0].text) == got  # the text block carries the same JSON


def test_hybrid_query_modes_and_rels(mcp_all):
    for mode in ("bm25", "vector", "hybrid"):
        r = mcp_all.call("hybrid_query", {"query": "fare cap", "k": 3, "mode": mode})
        assert not r.is_error and r.structured_content["mode"] == mode
    r = mcp_all.call("hybrid_query", {"query": "fare cap", "rels": ["no_such_rel"]})
    assert "unknown relation type no_such_rel" in error_text(r)


def test_entity_lookup_and_explain(mcp_all, service):
    r = mcp_all.call("entity_lookup", {"q": "Fare Engine", "limit": 3})
    hits = r.structured_content["entities"]
    assert hits == service.read(entities.lookup, "Fare Engine", limit=3)
    assert hits[0]["name"] == "Fare Engine"
    ex = mcp_all.call("explain_entity", {"entity": str(hits[0]["id"]), "hops": 1}).structured_content
    assert ex["name"] == "Fare Engine" and "FE" in ex["aliases"]
    assert ex["sources"] and ex["relations"]
    assert all(n["distance"] <= 1 for n in ex["neighbourhood"]["nodes"])
    r = mcp_all.call("explain_entity", {"entity": "zzqx nothing like it"})
    assert "no entity matches" in error_text(r)


def test_review_links(mcp_all, service):
    r = mcp_all.call("review_links", {"limit": 3}).structured_content
    assert r["edges"] == service.read(entities.review, limit=3)["edges"]
    assert len(r["edges"]) <= 3


def test_status_reports_counts_and_writer_without_host_paths(mcp_all, built_kb):
    r = mcp_all.call("status").structured_content
    assert r["counts"]["docs"] == 17 and r["counts"]["chunks"] > 0
    assert r["writer"]["active"] is False and r["writer"]["alive"] is False  # a read-only server takes no lock
    assert r["db"] == "kb.sqlite" and r["root"] == "kb"
    assert str(built_kb[0].parent) not in json.dumps(r)


def test_kb_tools(mcp_all, service):
    s = mcp_all.call("search_concepts", {"query": "fare engine", "limit": 5}).structured_content
    assert s["concepts"][0]["name"] == "Fare Engine" and len(s["concepts"]) <= 5
    c = mcp_all.call("get_concept", {"concept": "Fare Engine"}).structured_content
    assert c == service.read(concepts.get_concept, "Fare Engine", root=service.root)
    assert c["path"] == "services/fare-engine.md" and c["truncated"] is False and c["changed"] is False
    assert c["body"] == (service.root / "services" / "fare-engine.md").read_text(encoding="utf-8")
    assert mcp_all.call("get_concept", {"id": c["id"]}).structured_content == c  # the seed's name, an int id
    rel = mcp_all.call("get_related", {"concept": "Fare Engine", "hops": 2}).structured_content
    ids = {n["id"] for n in rel["nodes"]}
    assert rel["root"]["name"] == "Fare Engine" and rel["nodes"][0]["distance"] == 0
    assert rel["edges"], "Fare Engine has typed edges in the examples"
    for e in rel["edges"]:  # every edge traversed joins reached nodes
        assert e["src"] in ids and e["dst"] in ids
    assert len(rel["edges"]) == len(rel["nodes"]) - 1  # a BFS tree: one edge per reached node
    one = mcp_all.call("get_related", {"concept": "Fare Engine", "hops": 2, "max_nodes": 2}).structured_content
    assert len(one["nodes"]) == 2 and one["truncated"] is True
    lst = mcp_all.call("list_concepts", {"limit": 5, "type": "SERVICE"}).structured_content
    assert lst["total"] == lst["types"]["SERVICE"] and all(x["type"] == "SERVICE" for x in lst["concepts"])
    page2 = mcp_all.call("list_concepts", {"limit": 5, "offset": 5, "type": "SERVICE"}).structured_content
    assert not {x["id"] for x in page2["concepts"]} & {x["id"] for x in lst["concepts"]}
    h = mcp_all.call("kb_health").structured_content
    assert h["ok"] is True, h
    assert h["checks"]["quick_check"] == ["ok"]
    assert h["counts"]["chunks"] == h["counts"]["chunks_fts"] == h["counts"]["chunk_vectors"]


def test_kb_health_finds_damage(kb_copy, kb_config):
    """Each kind of damage kb_health reports, made on a copy."""
    from kgr.store import Store

    db, root = kb_copy
    with Store(db) as store, store.write() as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
    store = Store(db)
    store.conn.execute("PRAGMA foreign_keys=OFF")
    with store.write() as conn:
        conn.execute("INSERT INTO entities(key, name, type, norm) VALUES ('orphan', 'Orphan', 'CONCEPT', 'orphan')")
        conn.execute("INSERT INTO relations(src_id, dst_id, rel) VALUES (99999, 1, 'uses')")
        conn.execute("DELETE FROM vec_src WHERE kind = 'chunk' AND id = (SELECT min(id) FROM chunks)")
    store.close()
    (root / "handbook" / "welcome.md").unlink()
    svc = make_service(db, kb_config)
    try:
        h = Mcp(serve.build_server(svc, "kb")).call("kb_health", {"full": True}).structured_content
    finally:
        svc.close()
    assert h["ok"] is False
    p = h["problems"]
    assert p["dangling_edges"]["count"] == 1 and p["dangling_edges"]["sample"][0][1] == 99999
    assert p["orphan_concepts"]["count"] == 1 and p["orphan_concepts"]["sample"][0][1] == "Orphan"
    assert p["chunks_without_vectors"]["count"] == 1
    assert p["files_gone"]["count"] == 1 and p["files_gone"]["sample"] == ["handbook/welcome.md"]
    assert h["checks"]["integrity_check"] == ["ok"]
    assert h["checks"]["foreign_key_violations"] >= 1


@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("hybrid_query", {"query": "x", "k": 0}, "Argument k must be at least 1 (got 0)."),
        ("hybrid_query", {"query": "x", "k": 101}, "Argument k must be at most 100 (got 101)."),
        ("hybrid_query", {"query": "x", "hops": 4}, "Argument hops must be at most 3 (got 4)."),
        ("hybrid_query", {"query": ""}, "Argument query must not be empty."),
        ("hybrid_query", {"query": "x" * 4001}, "Argument query must be at most 4000 characters long"),
        (
            "hybrid_query",
            {"query": "x", "mode": "magic"},
            "Argument mode must be 'graph', 'hybrid', 'vector' or 'bm25'",
        ),
        ("hybrid_query", {"query": "x", "rels": ["uses"] * 21}, "Argument rels must have at most 20 items (got 21)."),
        ("hybrid_query", {"k": 3}, "Argument q is required."),
        ("entity_lookup", {"q": "x", "limit": 1000}, "Argument limit must be at most 100 (got 1000)."),
        (
            "get_related",
            {"concept": "Fare Engine", "max_nodes": 10001},
            "Argument max_nodes must be at most 10000 (got 10001).",
        ),
        (
            "get_related",
            {"concept": "Fare Engine", "direction": "sideways"},
            "Argument direction must be 'both', 'out' or 'in' (got 'sideways').",
        ),
        ("list_concepts", {"offset": -1}, "Argument offset must be at least 0 (got -1)."),
        ("review_links", {"limit": 201}, "Argument limit must be at most 200 (got 201)."),
        ("ingest_docs", {"paths": ["a.md"] * 201}, "Argument paths must have at most 200 items (got 201)."),
        (
            "ingest_docs",
            {"paths": ["x" * 1025]},
            "Argument paths[0] must be at most 1024 characters long (got 1025 characters).",
        ),
    ],
)
def test_bad_arguments_are_tool_errors(mcp_all, name, args, needle):
    r = mcp_all.call(name, args)
    text = error_text(r)
    assert needle in text
    assert "Traceback" not in text and "\n" not in text  # one sentence, not pydantic's report


def test_unknown_tool_is_an_error(mcp_all):
    assert "Unknown tool" in error_text(mcp_all.call("drop_database"))


def test_document_resource(mcp_all, built_kb):
    from kgr.store import Store

    r = mcp_all.read("kgr://doc/handbook/welcome.md")
    with Store(built_kb[0], readonly=True) as store:
        want = store.scalar("SELECT text FROM docs WHERE path = 'handbook/welcome.md'")
    assert r.contents[0].text == want and want.startswith("# Welcome")
    assert r.contents[0].mime_type == "text/markdown"


@pytest.mark.parametrize("path", ["nope.md", "../config.yaml", "handbook/../../config.yaml", "%2e%2e/config.yaml"])
def test_document_resource_refuses_unknown_and_outside(mcp_all, path):
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as info:
        mcp_all.read(f"kgr://doc/{path}")
    assert "Traceback" not in str(info.value)


def test_result_over_the_byte_budget_is_trimmed_and_flagged(built_kb, kb_config):
    svc = make_service(built_kb[0], kb_config, max_result_bytes=3000)
    try:
        r = Mcp(serve.build_server(svc, "all")).call("hybrid_query", {"query": "fare engine", "k": 20})
    finally:
        svc.close()
    got = r.structured_content
    assert got["truncated"] is True
    assert len(json.dumps(got, separators=(",", ":"))) <= 3000 + 200  # the budget counts compact JSON
    assert got["chunks"], "the best results are kept"
    assert "results" not in got, "the copy under the earlier name goes first"
    assert got["explanations"] == [c["why"] for c in got["chunks"]], "each chunk keeps its explanation"


def test_fitting_a_result_keeps_the_answers_first_item_longest():
    from types import SimpleNamespace

    from kgr.mcp.service import Service

    # the answer's one item is the largest list; the others are cut to nothing before it goes
    result = {"chunks": [{"text": "x" * 900}], "entities": ["e"] * 40, "edges": [{"rel": "uses"}] * 30}
    got = Service.fit(SimpleNamespace(max_result_bytes=1000), result)
    assert got["truncated"] is True and len(got["chunks"]) == 1
    assert len(json.dumps(got, separators=(",", ":"))) <= 1000 + 100


def test_time_budget_stops_a_slow_call(built_kb, kb_config):
    svc = make_service(built_kb[0], kb_config, time_budget=0.0)
    try:
        r = Mcp(serve.build_server(svc, "all")).call("hybrid_query", {"query": "fare engine", "mode": "bm25"})
        text = error_text(r)
        assert "took longer than 0 s" in text
        svc.time_budget = 2.0  # the next call is fine
        ok = Mcp(serve.build_server(svc, "all")).call("hybrid_query", {"query": "fare engine", "mode": "bm25"})
        assert not ok.is_error
    finally:
        svc.close()


def test_a_relative_db_path_scrubs_nothing_but_host_paths(built_kb, kb_config, monkeypatch):
    """--db kb.sqlite: the database's folder is ".", which must not be scrubbed out of every path."""
    monkeypatch.chdir(built_kb[0].parent)
    svc = make_service("kb.sqlite", kb_config)
    try:
        r = Mcp(serve.build_server(svc, "graphrag")).call("hybrid_query", {"query": "fare cap", "mode": "bm25", "k": 3})
        st = Mcp(serve.build_server(svc, "graphrag")).call("status").structured_content
    finally:
        svc.close()
    assert all(x["path"].endswith((".md", ".html", ".txt", ".pdf", ".docx")) for x in r.structured_content["results"])
    assert st["sqlite_version"].count(".") == 2
    assert svc.scrub(f"{built_kb[0].parent}/kb/x.md and kb.sqlite") == "x.md and kb.sqlite"
