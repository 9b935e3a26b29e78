"""Seed 003 (Engram, ../shared/seeds/003_*.txt) through a real `kgr serve --profile memory`
subprocess over stdio, with the seed's own argument names: `remember` (content, source,
importance) and `recall` (query, limit, include_graph), and what the seed describes besides
them: graph-enhanced recall (§3.3), the ColBERT re-rank (§2.1), temporal decay, importance and
access counts (§5.1), consolidation (§5.2), export/import (Week 4) and observations with
valid_from/valid_until (§1.2). kgr's names for the tools the seed leaves unnamed ("// ... other
tools"): consolidate_memories, export_memories, import_memories, memory_history.

One server session drives a fresh database with the real default model; a second one imports
the first one's export."""

from __future__ import annotations

import statistics
import time
from datetime import datetime

import pytest
from seed_client import payload, serve_params, session

M_WORK = "Maya Lindqvist works with Tomas Brenner at the Rotterdam office."
M_CELLO = "Tomas Brenner plays the cello in a community orchestra."
M_WIFI = "The office wifi password changes on the first Monday of every month."
M_ALLERGY = "Priya Raman is allergic to shellfish."
M_ALLERGY_TOO = "Priya Raman is allergic to shellfish!"
M_BAKERY = "Jonah Whitfield owns a bakery in Leeds that sells sourdough."
M_CAR = "The car is due for its annual inspection in September."
M_CAT = "The cat is terrified of thunderstorms."
M_IMPORTED = "Lukas Brenner prefers text messages to email."
WARM = [
    "Elena Petrova coaches a football team on Saturday mornings.",
    "Rose Whitaker celebrates her birthday on 2 August.",
    "Noah Feld files the household tax return every January.",
    "Ingrid Solberg runs the veterinary clinic on Mill Lane.",
    "The book club meets at the Lantern Cafe on Thursdays.",
    "Hiroshi Tanabe translated three novels into German.",
]


def _store(path):
    from kgr.store import Store

    Store(path).close()  # an empty kgr database
    return path


async def _drive(client) -> dict:
    out: dict = {"tools": {t.name: t for t in (await client.list_tools()).tools}}

    async def call(name, args=None):
        return payload(await client.call_tool(name, args or {}))

    out["remember_full"] = await call("remember", {"content": M_WORK, "source": "conversation", "importance": 0.9})
    out["remember_bare"] = await call("remember", {"content": M_CELLO})
    for text in (M_WIFI, M_ALLERGY, M_BAKERY, M_CAR):
        await call("remember", {"content": text})
    times = []
    for text in WARM:
        t0 = time.perf_counter()
        await call("remember", {"content": text, "source": "import"})
        times.append(time.perf_counter() - t0)
    out["remember_seconds"] = times
    out["again"] = await call("remember", {"content": M_WORK, "importance": 0.4})

    out["recall_default"] = await call("recall", {"query": "Who does Maya Lindqvist work with?"})
    out["recall_again"] = await call("recall", {"query": "Who does Maya Lindqvist work with?"})
    out["recall_limit"] = await call("recall", {"query": "things about the office", "limit": 2})
    out["graph_on"] = await call("recall", {"query": "Maya Lindqvist", "limit": 10, "include_graph": True})
    out["graph_off"] = await call("recall", {"query": "Maya Lindqvist", "limit": 10, "include_graph": False})
    out["cat"] = await call("remember", {"content": M_CAT})
    out["cat_recall"] = await call("recall", {"query": "which animal is afraid of bad weather", "limit": 1})

    out["imported"] = await call("import_memories", {"memories": [{"kind": "memory", "text": M_IMPORTED}]})
    out["imported_recall"] = await call("recall", {"query": "How does Lukas Brenner like to be contacted?"})
    out["history"] = await call("memory_history", {"entity": "Tomas Brenner"})

    out["dup"] = await call("remember", {"content": M_ALLERGY_TOO, "importance": 0.7})
    out["export_before"] = await call("export_memories", {"limit": 1000})
    out["consolidate_dry"] = await call("consolidate_memories", {"dry_run": True})
    out["consolidate"] = await call("consolidate_memories", {})
    out["export_after"] = await call("export_memories", {"limit": 1000})
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("seed003")
    db = _store(tmp / "memory.sqlite")
    return session(serve_params(db, profile="memory"), _drive, errlog=tmp / "server-stderr.txt")


@pytest.fixture(scope="module")
def round_trip(run, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("seed003-import")
    db = _store(tmp / "copy.sqlite")
    records = run["export_after"]["memories"]

    async def drive(client):
        imported = payload(await client.call_tool("import_memories", {"memories": records}))
        exported = payload(await client.call_tool("export_memories", {"limit": 1000}))
        best = payload(await client.call_tool("recall", {"query": "Who does Maya Lindqvist work with?", "limit": 1}))
        return {"imported": imported, "exported": exported, "best": best}

    return session(serve_params(db, profile="memory"), drive, errlog=tmp / "server-stderr.txt")


def test_the_tools_and_their_input_schemas(run):
    """Seed 003 §4.1: "name: 'remember' ... properties: { content: { type: 'string' }, source:
    { type: 'string' }, importance: { type: 'number', description: '0-1 importance score' } },
    required: ['content']" and "name: 'recall' ... properties: { query: { type: 'string' },
    limit: { type: 'number', default: 5 }, include_graph: { type: 'boolean', default: true } },
    required: ['query']"."""
    tools = run["tools"]
    assert {"remember", "recall", "consolidate_memories", "export_memories", "import_memories"} <= set(tools)
    rem = tools["remember"].input_schema
    assert {"content", "source", "importance"} <= set(rem["properties"]) and rem["required"] == ["content"]
    rec = tools["recall"].input_schema
    assert {"query", "limit", "include_graph"} <= set(rec["properties"]) and rec["required"] == ["query"]
    assert rec["properties"]["limit"]["default"] == 5
    assert rec["properties"]["include_graph"]["default"] is True


def test_remember_answers_the_id_and_the_entity_names(run):
    """Seed 003 §4.2: "const entities = entityExtractor.extractAll(params.content); for (const
    entity of entities) { const e = await graph.addEntity(...); await graph.addObservation(e.id,
    params.content, memory.id); } return { id: memory.id, entities: entities.map(e => e.name) };"."""
    full = run["remember_full"]
    assert isinstance(full["id"], str) and full["id"]
    assert all(isinstance(name, str) for name in full["entities"])
    assert {"Maya Lindqvist", "Tomas Brenner"} <= set(full["entities"])
    assert {e["name"] for e in full["entity_refs"]} == set(full["entities"])
    assert full["content"] == M_WORK and full["source"] == "conversation" and full["importance"] == 0.9
    # the same text again is the same memory
    assert run["again"]["id"] == full["id"] and run["again"]["created"] is False


def test_remember_defaults_source_and_importance(run):
    """Seed 003 §4.2: "source: params.source || 'conversation', importance: params.importance ||
    0.5" and §1.2: "timestamp DATETIME DEFAULT CURRENT_TIMESTAMP"."""
    bare = run["remember_bare"]
    assert bare["source"] == "conversation" and bare["importance"] == 0.5
    assert datetime.fromisoformat(bare["timestamp"].replace("Z", "+00:00")).year >= 2024
    assert bare["access_count"] == 0 and bare["last_accessed"] is None


def test_recall_answers_the_best_memories_first_limit_5_by_default(run):
    """Seed 003 §4.1: "name: 'recall', description: 'Retrieve relevant memories' ... limit: {
    type: 'number', default: 5 }" and §1.2, the memory's columns: "id, content, source,
    timestamp, importance, access_count, last_accessed"."""
    first = run["recall_default"]["results"]
    assert len(first) == 5  # 13 memories stored, the default limit
    assert first[0]["content"] == M_WORK
    for r in first:
        assert {"id", "content", "source", "timestamp", "importance", "access_count", "last_accessed"} <= set(r)
    assert {r["content"] for r in run["recall_limit"]["results"]} == {M_WORK, M_WIFI}


def test_recall_counts_accesses(run):
    """Seed 003 §5.1: "const access = Math.log(1 + memory.access_count) / 10; return retrievalScore
    * (0.6 + 0.2 * temporal + 0.1 * importance + 0.1 * access);" (access_count and last_accessed,
    §1.2)."""
    first = run["recall_default"]["results"][0]
    again = run["recall_again"]["results"][0]
    assert again["id"] == first["id"] and again["access_count"] == first["access_count"] + 1
    assert datetime.fromisoformat(again["last_accessed"].replace("Z", "+00:00")) >= datetime.fromisoformat(
        first["last_accessed"].replace("Z", "+00:00")
    )
    s = again["scores"]
    assert s["factor"] == pytest.approx(0.6 + 0.2 * s["recency"] + 0.1 * s["importance"] + 0.1 * s["access"], abs=1e-3)


def test_recall_with_the_graph_reaches_memories_two_entities_away(run):
    """Seed 003 §3.3: "// 2. Extract entities from query ... const traversal = await
    graph.traverse(e[0].id, depth: 2); relatedObs.push(...traversal.observations); ... // 4. Add
    source memories from observations to candidate pool" (include_graph, default true)."""
    on = {r["content"]: r for r in run["graph_on"]["results"]}
    assert on[M_WORK]["scores"]["hops"] == 0 and on[M_WORK]["scores"]["graph_rank"] == 1
    # the cello memory never names Maya Lindqvist: reached through Tomas Brenner
    assert on[M_CELLO]["scores"]["hops"] == 1 and on[M_CELLO]["scores"]["graph_rank"] is not None
    assert "Tomas Brenner" in on[M_CELLO]["why"]
    assert "Maya Lindqvist" in {e["name"] for e in run["graph_on"]["entities"]}
    off = run["graph_off"]["results"]
    assert all(r["scores"]["graph_rank"] is None and r["scores"]["hops"] is None for r in off)


def test_recall_reranks_by_late_interaction(run):
    """Seed 003 §3.3: "// 5. ColBERT rerank all candidates ... return await colbert.rerank(query,
    candidates, k);" (§2.1: "ColBERT (via RAGatouille) gives us embedding + reranking in one
    model"). kgr: MaxSim over the default model's own token vectors, on the best five."""
    best = run["recall_default"]["results"]
    assert best[0]["scores"]["maxsim"] is not None and 0 < best[0]["scores"]["maxsim"] <= 1
    assert "token match" in best[0]["why"]


def test_a_remembered_memory_is_found_by_meaning_at_once(run):
    """Seed 003 §4.2: "// 2. Index for ColBERT await colbert.index([{ id: memory.id, text:
    memory.content }]);" before remember returns: the next recall finds it by meaning alone."""
    (hit,) = run["cat_recall"]["results"]
    assert hit["id"] == run["cat"]["id"] and hit["content"] == M_CAT
    assert hit["scores"]["vector_rank"] == 1 and hit["scores"]["bm25_rank"] is None


def test_remember_is_fast_when_warm(run):
    """Seed 003, Success Metrics: "Latency: recall < 100ms, remember < 200ms" (here the round
    trip through the client, on a busy shared machine: a generous bound; bench/bench_remember.py
    measures remember in process)."""
    assert statistics.median(run["remember_seconds"]) < 1.0


def test_an_imported_memory_is_linked_and_recalled_like_a_remembered_one(run):
    """Seed 003, Week 4: "12. Export/import", with §4.2's "Extract and store entities ... Create
    observation linking entity to this memory" for every memory, imported ones too."""
    assert (run["imported"]["imported"], run["imported"]["skipped"]) == (1, 0)
    best = run["imported_recall"]["results"][0]
    assert best["content"] == M_IMPORTED
    assert "Lukas Brenner" in best["entities"] and best["scores"]["graph_rank"] == 1


def test_observations_carry_their_validity(run):
    """Seed 003 §1.2: "CREATE TABLE observations ( ... source_memory_id TEXT REFERENCES
    memories(id), ... valid_from DATETIME DEFAULT CURRENT_TIMESTAMP, valid_until DATETIME, --
    NULL = still valid"."""
    hist = run["history"]
    assert hist["entity"]["name"] == "Tomas Brenner"
    memories = {o["memory"] for o in hist["observations"]}
    assert {run["remember_full"]["id"], run["remember_bare"]["id"]} <= memories
    for o in hist["observations"]:
        assert o["valid_from_ms"] is not None and o["valid_until_ms"] is None and o["valid"] is True


def test_consolidation_merges_near_duplicates(run):
    """Seed 003 §5.2: "// Find similar memories (high ColBERT similarity) const clusters = await
    findSimilarClusters(threshold: 0.9); ... const merged = mergeMemories(cluster); await
    storage.archiveMemories(cluster.map(m => m.id));"."""
    dry, done = run["consolidate_dry"], run["consolidate"]
    assert dry["dry_run"] is True and dry["threshold"] == 0.9
    dup = {run["dup"]["id"]}
    groups = [{g["into"], *g["from"]} for g in done["merged"]]
    pair = next(g for g in groups if dup <= g)
    allergy = next(m["id"] for m in run["export_before"]["memories"] if m["text"] == M_ALLERGY)
    assert pair == {allergy, run["dup"]["id"]}
    assert [g["into"] for g in dry["merged"]] == [g["into"] for g in done["merged"]]
    assert run["export_after"]["total"] == run["export_before"]["total"] - done["absorbed"]
    kept = next(m for m in run["export_after"]["memories"] if m["id"] in pair)
    assert kept["importance"] == 0.7 and [m["id"] for m in kept["merged_from"]]  # nothing lost


def test_export_then_import_is_a_round_trip(run, round_trip):
    """Seed 003, Week 4: "12. Export/import": what one server exports, another imports whole."""
    exported = run["export_after"]
    assert (round_trip["imported"]["imported"], round_trip["imported"]["skipped"]) == (exported["total"], 0)

    def key(m):
        return (m["id"], m["text"], m["importance"], tuple(m["tags"]), m["access_count"])

    assert sorted(map(key, round_trip["exported"]["memories"])) == sorted(map(key, exported["memories"]))
    assert round_trip["best"]["results"][0]["content"] == M_WORK
