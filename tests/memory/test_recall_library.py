"""remember, recall, history, consolidation and export/import: plumbing (stub embedder) and
deterministic ordering (an injected clock)."""

from __future__ import annotations

import math

import orjson
import pytest
from recall_fixtures import DAY_MS, T0

from kgr.errors import BadRecord, UsageError
from kgr.memory import recall


def test_remember_stores_a_memory_document_through_the_pipeline(store, stub_cfg, clock):
    out = recall.remember(
        store,
        "Alice Johnson moved to Berlin to work at Siemens.",
        stub_cfg,
        importance=0.8,
        tags=["people", "people", "work"],
        clock=clock,
    )
    assert out["created"] is True
    assert out["path"] == f".memory/{out['id']}.md"
    assert out["tags"] == ["people", "work"]
    doc_id, source, status, graph_sig = store.conn.execute(
        "SELECT id, source, status, graph_sig FROM docs WHERE path=?", (out["path"],)
    ).fetchone()
    assert (source, status) == ("memory", "ok")
    assert graph_sig is not None  # extracted and linked
    assert store.scalar("SELECT count(*) FROM chunks WHERE doc_id=?", (doc_id,)) >= 1
    assert store.scalar("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'siemens'") == 1
    # embedded like any chunk (the stub model here)
    assert (
        store.scalar("SELECT count(*) FROM chunk_vec v JOIN chunks c ON c.id = v.rowid WHERE c.doc_id=?", (doc_id,))
        >= 1
    )
    names = {e["name"] for e in out["entities"]}
    assert {"Alice Johnson", "Berlin", "Siemens"} <= names
    # each entity has an observation whose source document is the memory, valid from its time
    rows = store.query(
        "SELECT e.name, o.doc_id, o.valid_from_ms, o.valid_until_ms, o.importance FROM observations o "
        "JOIN entities e ON e.id = o.entity_id"
    )
    assert {r[0] for r in rows} == names
    assert all(r[1:] == (doc_id, T0, None, 0.8) for r in rows)


def test_the_same_text_twice_is_one_memory(store, stub_cfg, clock):
    a = recall.remember(
        store, "The VPN certificate expires on 1 March.", stub_cfg, importance=0.3, tags=["ops"], clock=clock
    )
    b = recall.remember(
        store, "  The VPN certificate expires on 1 March.\n", stub_cfg, importance=0.9, tags=["certs"], clock=clock
    )
    assert b["created"] is False and b["id"] == a["id"]
    assert b["importance"] == 0.9 and b["tags"] == ["ops", "certs"]
    c = recall.remember(store, "The VPN certificate expires on 1 March.", stub_cfg, importance=0.1, clock=clock)
    assert c["importance"] == 0.9  # the larger importance stays
    assert store.scalar("SELECT count(*) FROM docs WHERE source='memory'") == 1


@pytest.mark.parametrize(
    "text,kw,msg",
    [
        ("   ", {}, "empty"),
        ("x", {"importance": 1.5}, "between 0 and 1"),
        ("x", {"importance": -0.1}, "between 0 and 1"),
        ("x", {"tags": ["t" * 65]}, "64 characters"),
    ],
)
def test_remember_refuses_bad_input_and_stores_nothing(store, stub_cfg, text, kw, msg):
    with pytest.raises(UsageError, match=msg):
        recall.remember(store, text, stub_cfg, **kw)
    assert store.scalar("SELECT count(*) FROM docs") == 0


def test_file_ingest_and_reconciliation_never_touch_memories(tmp_path, stub_cfg, clock):
    from kgr.ingest import pipeline
    from kgr.store import Store

    root = tmp_path / "kb"
    (root / "memory").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\n\nThe Ledger Service is owned by the Payments team.\n")
    (root / "memory" / "x.md").write_text("# A file in a folder named memory\n\nNothing to do with memories.\n")
    with Store(tmp_path / "kb.sqlite") as s:
        mem = recall.remember(s, "Bob prefers morning meetings.", stub_cfg, clock=clock)
        pipeline.ingest([str(root)], s, config=stub_cfg)  # prune on, over the whole root
        (root / "notes.md").unlink()
        pipeline.ingest([str(root)], s, config=stub_cfg)
        pipeline.sync_paths(s, root, None, config=stub_cfg)  # the watcher's full reconciliation
        rows = dict(s.query("SELECT path, source FROM docs"))
    assert rows == {mem["path"]: "memory", "memory/x.md": "file"}


def _two(store, cfg, clock, *, a: dict, b: dict):
    ma = recall.remember(store, "falcon project alpha", cfg, **a)
    mb = recall.remember(store, "falcon project bravo", cfg, **b)
    return ma["id"], mb["id"]


def _order(store, cfg, clock, q="falcon project"):
    out = recall.recall(store, q, cfg, k=5, clock=clock, touch=False)
    return [r["id"] for r in out["results"]]


def test_recency_decays_with_the_half_life(store, stub_cfg, clock):
    s = recall.Settings.from_config(stub_cfg)
    assert s.half_life_days == 30
    for days, expected in ((0, 1.0), (30, 0.5), (60, 0.25), (90, 0.125)):
        w = recall.weigh({"created_ms": T0 - days * DAY_MS, "importance": 0.5, "access_count": 0}, T0, s)
        assert w["recency"] == pytest.approx(expected)
    stub_cfg = stub_cfg.override({"memory.half_life_days": 7})
    w = recall.weigh({"created_ms": T0 - 7 * DAY_MS}, T0, recall.Settings.from_config(stub_cfg))
    assert w["recency"] == pytest.approx(0.5)
    w = recall.weigh({"created_ms": T0, "importance": 1.0, "access_count": 20}, T0, s)
    assert w["factor"] == pytest.approx(0.6 + 0.2 + 0.1 + 0.1 * math.log(21) / 10)


@pytest.mark.parametrize("newer", ["alpha", "bravo"])
def test_a_recent_memory_outranks_an_old_one(store, stub_cfg, clock, newer):
    old, new = T0 - 90 * DAY_MS, T0
    a, b = _two(
        store,
        stub_cfg,
        clock,
        a={"clock": lambda: new if newer == "alpha" else old},
        b={"clock": lambda: new if newer == "bravo" else old},
    )
    assert _order(store, stub_cfg, clock) == ([a, b] if newer == "alpha" else [b, a])


@pytest.mark.parametrize("important", ["alpha", "bravo"])
def test_importance_orders_equally_relevant_memories(store, stub_cfg, clock, important):
    a, b = _two(
        store,
        stub_cfg,
        clock,
        a={"clock": clock, "importance": 1.0 if important == "alpha" else 0.0},
        b={"clock": clock, "importance": 1.0 if important == "bravo" else 0.0},
    )
    assert _order(store, stub_cfg, clock) == ([a, b] if important == "alpha" else [b, a])


def test_each_recall_counts_an_access_and_use_raises_the_rank(store, stub_cfg, clock):
    a, b = _two(store, stub_cfg, clock, a={"clock": clock}, b={"clock": clock})
    first = _order(store, stub_cfg, clock)
    loser = first[1]
    clock.advance(1)
    for i in range(1, 31):  # recall only the loser, by its own word, 30 times
        out = recall.recall(store, "bravo" if loser == b else "alpha", stub_cfg, k=1, clock=clock)
        assert [r["id"] for r in out["results"]] == [loser]
        assert out["results"][0]["access_count"] == i
        assert out["results"][0]["last_access_ms"] == clock.t
    assert _order(store, stub_cfg, clock) == [loser, first[0]]
    # touch=False reads only
    before = store.scalar("SELECT sum(json_extract(meta, '$.memory.access_count')) FROM docs")
    recall.recall(store, "falcon", stub_cfg, clock=clock, touch=False)
    assert store.scalar("SELECT sum(json_extract(meta, '$.memory.access_count')) FROM docs") == before


def test_entities_named_in_the_query_lead_to_their_observations_memories(store, stub_cfg, clock):
    m1 = recall.remember(store, "Alice Johnson joined the platform team.", stub_cfg, clock=clock)
    m2 = recall.remember(store, "She asked for a standing desk.", stub_cfg, clock=clock)
    alice = next(e["id"] for e in m1["entities"] if e["name"] == "Alice Johnson")
    # an observation on Alice whose source is the second memory, which never names her
    with store.write() as conn:
        conn.execute(
            "INSERT INTO observations(entity_id, content, source, doc_id, valid_from_ms, created_ms) "
            "VALUES (?, 'asked for a standing desk', 'manual', ?, ?, ?)",
            (alice, m2["doc_id"], T0, T0),
        )
    q = "what did Alice Johnson ask for"
    with_graph = recall.recall(store, q, stub_cfg, clock=clock, touch=False)
    ids = [r["id"] for r in with_graph["results"]]
    assert m2["id"] in ids
    hit = next(r for r in with_graph["results"] if r["id"] == m2["id"])
    assert "observation of Alice Johnson" in hit["why"] and hit["scores"]["graph_rank"] is not None
    without = recall.recall(store, "Alice Johnson", stub_cfg, clock=clock, touch=False, include_graph=False)
    assert m2["id"] not in [r["id"] for r in without["results"]]

    # validity: closed at T0 + 10 days, the observation leads nowhere after, still does as of before
    with store.write() as conn:
        conn.execute("UPDATE observations SET valid_until_ms=? WHERE doc_id=?", (T0 + 10 * DAY_MS, m2["doc_id"]))
    clock.advance(20)
    now = recall.recall(store, "Alice Johnson", stub_cfg, clock=clock, touch=False)
    assert m2["id"] not in [r["id"] for r in now["results"]]
    then = recall.recall(store, "Alice Johnson", stub_cfg, clock=clock, touch=False, as_of=T0 + 5 * DAY_MS)
    assert m2["id"] in [r["id"] for r in then["results"]]
    hist = recall.recall(store, "Alice Johnson", stub_cfg, clock=clock, touch=False, include_history=True)
    assert m2["id"] in [r["id"] for r in hist["results"]]

    h = recall.history(store, "Alice Johnson", clock=clock)
    closed = [o for o in h["observations"] if o["memory"] == m2["id"]]
    assert closed and closed[0]["valid_until_ms"] == T0 + 10 * DAY_MS and closed[0]["valid"] is False
    current = recall.history(store, "Alice Johnson", clock=clock, include_history=False)
    assert all(o["memory"] != m2["id"] for o in current["observations"])
    past = recall.history(store, "Alice Johnson", clock=clock, include_history=False, as_of=T0 + DAY_MS)
    assert any(o["memory"] == m2["id"] for o in past["observations"])


def test_as_of_leaves_out_later_memories_and_tags_filter(store, stub_cfg, clock):
    early = recall.remember(store, "kestrel rollout started", stub_cfg, tags=["ops"], clock=clock)
    clock.advance(3)
    late = recall.remember(store, "kestrel rollout finished", stub_cfg, tags=["ops", "done"], clock=clock)
    ids = lambda out: [r["id"] for r in out["results"]]  # noqa: E731
    assert set(ids(recall.recall(store, "kestrel", stub_cfg, clock=clock, touch=False))) == {early["id"], late["id"]}
    assert ids(recall.recall(store, "kestrel", stub_cfg, clock=clock, touch=False, as_of=T0 + DAY_MS)) == [early["id"]]
    assert ids(recall.recall(store, "kestrel", stub_cfg, clock=clock, touch=False, tags=["done"])) == [late["id"]]
    with pytest.raises(UsageError, match="empty"):
        recall.recall(store, "  ", stub_cfg)
    with pytest.raises(UsageError, match="k must be"):
        recall.recall(store, "kestrel", stub_cfg, k=0)


def test_export_import_round_trip_is_exact(tmp_path, stub_cfg, clock):
    from kgr.store import Store

    with Store(tmp_path / "a.sqlite") as a:
        recall.remember(
            a,
            "Alice Johnson moved to Berlin to work at Siemens.",
            stub_cfg,
            importance=0.9,
            tags=["people"],
            label="conversation",
            clock=clock,
        )
        clock.advance(2)
        recall.remember(a, "The Ledger Service depends on Postgres 15.", stub_cfg, clock=clock)
        recall.recall(a, "Berlin", stub_cfg, clock=clock)
        with a.write() as conn:  # a closed observation must survive the trip
            conn.execute(
                "UPDATE observations SET valid_until_ms=? WHERE id=(SELECT min(id) FROM observations)", (clock.t + 1,)
            )
        first = recall.export_jsonl(a)
    recs = [orjson.loads(line) for line in first.splitlines()]
    assert len(recs) == 2 and all(r["kind"] == "memory" for r in recs)
    assert any(o["valid_until_ms"] for r in recs for o in r["observations"])
    with Store(tmp_path / "b.sqlite") as b:
        assert recall.import_records(b, recall.parse_jsonl(first), stub_cfg) == {"imported": 2, "skipped": 0}
        assert recall.export_jsonl(b) == first
        assert recall.import_records(b, recall.parse_jsonl(first), stub_cfg) == {"imported": 0, "skipped": 2}
        assert recall.export_jsonl(b) == first
        # imported memories are recallable like any
        out = recall.recall(b, "Postgres", stub_cfg, clock=clock, touch=False)
        assert out["results"][0]["text"] == "The Ledger Service depends on Postgres 15."


def test_a_bad_import_writes_nothing(store, stub_cfg):
    good = orjson.dumps({"kind": "memory", "id": recall.memory_id("a fine memory"), "text": "a fine memory"})
    with pytest.raises(BadRecord, match="line 2"):
        recall.import_records(store, recall.parse_jsonl(good + b"\n{not json\n"), stub_cfg)
    with pytest.raises(BadRecord, match="does not match"):
        recall.import_records(store, [{"kind": "memory", "id": "0000", "text": "x"}], stub_cfg)
    with pytest.raises(BadRecord, match="line 2"):
        recall.import_records(store, [orjson.loads(good), {"kind": "entity"}], stub_cfg)
    assert store.scalar("SELECT count(*) FROM docs") == 0


def test_consolidation_keeps_provenance(store, stub_cfg, clock):
    """Plumbing of a merge (the stub model gives identical texts identical vectors; meaning is
    tested with the real model in test_recall_meaning.py)."""
    a = recall.remember(store, "Carol Diaz leads the Atlas project.", stub_cfg, importance=0.4, tags=["a"], clock=clock)
    clock.advance(1)
    b = recall.remember(store, "Carol Diaz leads the Atlas project!", stub_cfg, importance=0.7, tags=["b"], clock=clock)
    from kgr.store import vectors

    spec = vectors.stored_spec(store)
    [(blob,)] = store.query(
        "SELECT embedding FROM chunk_vec WHERE rowid=(SELECT min(id) FROM chunks WHERE doc_id=?)", (a["doc_id"],)
    )
    same = vectors.decode(blob, spec)
    with store.write():  # give both the same vector: a stand-in for near-duplicate meaning
        vectors.put(
            store,
            spec,
            vectors.CHUNK,
            [(cid, "test", same) for (cid,) in store.query("SELECT id FROM chunks WHERE doc_id=?", (b["doc_id"],))],
        )
    recall.touch_memories(store, [a["doc_id"]], clock.t)
    recall.touch_memories(store, [a["doc_id"], b["doc_id"]], clock.t)
    obs_before = store.scalar("SELECT count(*) FROM observations")
    dry = recall.consolidate(store, stub_cfg, dry_run=True)
    assert dry["absorbed"] == 1 and store.scalar("SELECT count(*) FROM docs WHERE source='memory'") == 2
    out = recall.consolidate(store, stub_cfg)
    assert out["merged"] == [{"into": b["id"], "from": [a["id"]]}]  # the more important one stays
    [kept] = recall.list_memories(store)["memories"]
    assert kept["id"] == b["id"] and kept["importance"] == 0.7 and kept["access_count"] == 3
    assert kept["tags"] == ["b", "a"] and kept["merged_from"] == [a["id"]]
    assert store.scalar("SELECT count(*) FROM observations") == obs_before  # moved, not lost
    assert store.scalar("SELECT count(DISTINCT doc_id) FROM observations") == 1
    exported = orjson.loads(recall.export_jsonl(store))
    assert exported["merged_from"][0]["text"] == "Carol Diaz leads the Atlas project."
    assert recall.consolidate(store, stub_cfg)["groups"] == 0


def test_recall_counts_accesses_on_the_memorys_observations_too(store, stub_cfg, clock):
    m = recall.remember(store, "Olga Berg signs off the Orion budget.", stub_cfg, clock=clock)
    other = recall.remember(store, "Paul Wren books the Vega offsite.", stub_cfg, clock=clock)
    assert m["entities"] and other["entities"]
    clock.advance(2)
    for _ in range(3):
        recall.recall(store, "Orion budget", stub_cfg, k=1, clock=clock)
    counts = dict(store.query("SELECT doc_id, min(access_count) FROM observations GROUP BY doc_id"))
    assert counts == {m["doc_id"]: 3, other["doc_id"]: 0}
    assert store.scalar("SELECT max(last_access_ms) FROM observations WHERE doc_id=?", (m["doc_id"],)) == clock.t


def test_consolidated_memories_round_trip_through_export(tmp_path, store, stub_cfg, clock):
    from kgr.store import Store, vectors

    a = recall.remember(store, "Quinn Hale runs the Lyra standup.", stub_cfg, clock=clock)
    b = recall.remember(store, "Quinn Hale runs the Lyra stand-up.", stub_cfg, importance=0.9, clock=clock)
    spec = vectors.stored_spec(store)
    [(blob,)] = store.query(
        "SELECT embedding FROM chunk_vec WHERE rowid=(SELECT min(id) FROM chunks WHERE doc_id=?)", (a["doc_id"],)
    )
    with store.write():
        vectors.put(
            store,
            spec,
            vectors.CHUNK,
            [
                (cid, "test", vectors.decode(blob, spec))
                for (cid,) in store.query("SELECT id FROM chunks WHERE doc_id=?", (b["doc_id"],))
            ],
        )
    assert recall.consolidate(store, stub_cfg)["absorbed"] == 1
    first = recall.export_jsonl(store)
    [rec] = [orjson.loads(x) for x in first.splitlines()]
    assert rec["id"] == b["id"] and [m["id"] for m in rec["merged_from"]] == [a["id"]]
    with Store(tmp_path / "copy.sqlite") as copy:
        recall.import_records(copy, recall.parse_jsonl(first), stub_cfg)
        assert recall.export_jsonl(copy) == first
