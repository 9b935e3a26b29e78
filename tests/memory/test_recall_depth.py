"""Seed 003's deeper recall: the depth-2 graph traversal, the late-interaction (MaxSim) re-rank
over the model's own token vectors, imported memories linked like remembered ones, and
remember's cost (no full re-read of the corpus per memory, its vector stored on return)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from recall_fixtures import T0

from kgr.memory import recall

DATA = Path(__file__).parent / "data" / "recall_eval.json"

CHAIN = [
    "Maya Lindqvist works with Tomas Brenner.",
    "Tomas Brenner shares a flat with Rosa Ortiz.",
    "Rosa Ortiz plays the cello in an orchestra.",
    "The office wifi password changes every month.",
]


def _hops(store, cfg, q: str) -> dict[str, int | None]:
    out = recall.recall(store, q, cfg, k=10, touch=False)
    return {r["text"]: r["scores"]["hops"] for r in out["results"]}


def test_recall_follows_the_entities_of_a_query_two_hops(store, stub_cfg, clock):
    for text in CHAIN:
        recall.remember(store, text, stub_cfg, clock=clock)
    hops = _hops(store, stub_cfg, "Maya Lindqvist")
    assert hops[CHAIN[0]] == 0  # observes the entity the query names
    assert hops[CHAIN[1]] == 1  # observes Tomas Brenner, one memory away
    assert hops[CHAIN[2]] == 2  # observes Rosa Ortiz, two away
    assert hops.get(CHAIN[3]) is None  # names none of them
    why = next(
        r["why"]
        for r in recall.recall(store, "Maya Lindqvist", stub_cfg, k=10, touch=False)["results"]
        if r["text"] == CHAIN[2]
    )
    assert "2 hops" in why and "Rosa Ortiz" in why
    shallow = _hops(store, stub_cfg.override({"memory.graph_depth": 0}), "Maya Lindqvist")
    assert shallow[CHAIN[0]] == 0 and shallow.get(CHAIN[1]) is None and shallow.get(CHAIN[2]) is None
    one = _hops(store, stub_cfg.override({"memory.graph_depth": 1}), "Maya Lindqvist")
    assert one[CHAIN[1]] == 1 and one.get(CHAIN[2]) is None


def test_the_traversal_respects_validity(store, stub_cfg, clock):
    for text in CHAIN[:3]:
        recall.remember(store, text, stub_cfg, clock=clock)
    # the middle memory's observations closed: the chain is cut there
    with store.write() as conn:
        conn.execute(
            "UPDATE observations SET valid_until_ms = ? WHERE doc_id = (SELECT id FROM docs WHERE text = ?)",
            (T0 + 1, CHAIN[1]),
        )
    clock.advance(1)
    hops = _hops(store, stub_cfg, "Maya Lindqvist")
    assert hops[CHAIN[0]] == 0 and hops.get(CHAIN[2]) is None


def test_graph_and_rerank_depths_are_checked(store, stub_cfg):
    recall.remember(store, CHAIN[0], stub_cfg)
    with pytest.raises(recall.UsageError, match="graph_depth"):
        recall.recall(store, "Maya", stub_cfg.override({"memory.graph_depth": 9}))
    with pytest.raises(recall.UsageError, match="rerank_depth"):
        recall.recall(store, "Maya", stub_cfg.override({"memory.rerank_depth": -1}))


def test_an_imported_memory_is_linked_to_its_entities_like_a_remembered_one(tmp_path, stub_cfg, clock):
    """A record without observations (written by hand, or by another tool) was stored with no
    entity at all, so recall's graph side could not reach it."""
    from kgr.store import Store

    with Store(tmp_path / "a.sqlite") as a, Store(tmp_path / "b.sqlite") as b:
        remembered = {t: recall.remember(a, t, stub_cfg, clock=clock)["entities"] for t in CHAIN}
        assert recall.import_records(b, [{"kind": "memory", "text": t} for t in CHAIN], stub_cfg) == {
            "imported": 4,
            "skipped": 0,
        }
        imported = {m["text"]: m["entities"] for m in recall.list_memories(b)["memories"]}
        for text in CHAIN:
            assert {e["name"] for e in imported[text]} == {e["name"] for e in remembered[text]}
        assert {e["name"] for e in imported[CHAIN[0]]} >= {"Maya Lindqvist", "Tomas Brenner"}
        out = recall.recall(b, "Who does Maya Lindqvist work with?", stub_cfg, touch=False)
        best = out["results"][0]
        assert best["text"] == CHAIN[0] and best["scores"]["graph_rank"] == 1


def test_an_exported_memory_keeps_its_observations_once(tmp_path, stub_cfg, clock):
    from kgr.store import Store

    with Store(tmp_path / "a.sqlite") as a, Store(tmp_path / "b.sqlite") as b:
        recall.remember(a, CHAIN[0], stub_cfg, clock=clock)
        recall.import_records(b, recall.parse_jsonl(recall.export_jsonl(a)), stub_cfg)
        n = b.scalar("SELECT count(*) FROM observations")
        assert n == a.scalar("SELECT count(*) FROM observations") >= 2
        assert recall.export_jsonl(b) == recall.export_jsonl(a)


def test_remember_does_not_mine_the_whole_corpus_again_each_time(store, stub_cfg, monkeypatch):
    """Mining the gazetteer reads every stored document: on a store of many memories it was
    most of remember's time. It runs once REFRESH_SHARE of the corpus changed, not per memory."""
    from kgr.ingest import graphbuild

    for i in range(100):
        recall.remember(store, f"Note {i}: Dara Novak met Hugo Silva in Lyon.", stub_cfg, graph=False, embed=False)
    graphbuild.build_pending(store, stub_cfg)
    calls = []
    real = graphbuild.mine
    monkeypatch.setattr(graphbuild, "mine", lambda *a, **k: calls.append(1) or real(*a, **k))
    for i in range(4):
        out = recall.remember(store, f"Ines Weber visited Quito in {2000 + i}.", stub_cfg)
        assert {"Ines Weber", "Quito"} <= {e["name"] for e in out["entities"]}
    assert calls == []
    for i in range(3):  # five per cent of the corpus: the next remember reads it all again
        recall.remember(store, f"Chen Varga flew to Oslo in {2010 + i}.", stub_cfg)
    assert calls == [1]


# -- with the real model ---------------------------------------------------------------------


def test_token_vectors_are_the_models_word_pieces(real_cfg):
    from kgr.embedders import get_embedder

    embedder = get_embedder(real_cfg, purpose="query")
    if not hasattr(embedder, "token_vectors"):
        pytest.skip("the light ONNX path is unavailable here")
    short, longer = embedder.token_vectors(["a cat", "The boiler in the flat was replaced in January."])
    assert short.shape == (2, embedder.native_dim)  # "a", "cat": no [CLS], [SEP] or padding
    assert longer.shape[0] >= 9
    assert np.allclose(np.linalg.norm(longer, axis=1), 1.0, atol=1e-5)
    assert recall.maxsim(longer, longer) == pytest.approx(1.0, abs=1e-5)
    q = embedder.token_vectors(["when was the heating replaced"])[0]
    other = embedder.token_vectors(["My favourite dessert is lemon tart."])[0]
    assert recall.maxsim(q, longer) > recall.maxsim(q, other)


def test_the_rerank_reorders_the_best_candidates_by_maxsim(real_store, real_cfg):
    from kgr.retrieval.query import query_embedder

    embed = query_embedder(real_store, real_cfg)
    q = "Which company did Alice join in Munich?"
    off = recall.recall(real_store, q, real_cfg, k=5, embed_query=embed, touch=False, rerank=False)
    on = recall.recall(real_store, q, real_cfg, k=5, embed_query=embed, touch=False, rerank=True)
    assert all(r["scores"]["maxsim"] is None for r in off["results"])
    sims = [r["scores"]["maxsim"] for r in on["results"]]
    assert all(s is not None and 0 < s <= 1 for s in sims)
    # the same five candidates, in the order of MaxSim times each memory's weight factor
    assert {r["id"] for r in on["results"]} == {r["id"] for r in off["results"]}
    keys = [r["scores"]["maxsim"] * r["scores"]["factor"] for r in on["results"]]
    assert keys == sorted(keys, reverse=True)
    assert "BMW" in on["results"][0]["text"]
    assert "token match" in on["results"][0]["why"]


def test_a_remembered_memory_has_its_vector_when_remember_returns(real_store, real_cfg):
    """The vector side of recall finds a memory the moment remember returns: a question that
    shares no content word with it finds it by meaning."""
    from kgr.retrieval.query import query_embedder
    from kgr.store import vectors

    out = recall.remember(real_store, "The cat is terrified of thunderstorms.", real_cfg)
    chunks = [c for (c,) in real_store.query("SELECT id FROM chunks WHERE doc_id=?", (out["doc_id"],))]
    embed = query_embedder(real_store, real_cfg)
    sims = vectors.similarities(real_store, vectors.CHUNK, embed("scared pet during storms"), chunks)
    assert set(sims) == set(chunks) and max(sims.values()) > 0.4
    got = recall.recall(real_store, "which animal is afraid of bad weather", real_cfg, embed_query=embed, touch=False)
    assert got["results"][0]["id"] == out["id"]
    assert got["results"][0]["scores"]["vector_rank"] == 1 and got["results"][0]["scores"]["bm25_rank"] is None


def _ranks(store, cfg, data, doc_fact, *, rerank):
    from kgr.retrieval.query import query_embedder

    embed = query_embedder(store, cfg)
    out = []
    for item in data["questions"]:
        res = recall.recall(
            store, item["q"], cfg, k=10, embed_query=embed, clock=lambda: T0, touch=False, rerank=rerank
        )
        got = [doc_fact.get(r["doc_id"]) for r in res["results"]]
        out.append((item["kind"], next((i for i, f in enumerate(got, 1) if f in item["gold"]), None)))
    return out


def _mrr(ranks):
    return sum(1 / r for _, r in ranks if r) / len(ranks)


def _r_at(ranks, k, kind=None):
    sel = [r for kd, r in ranks if kind in (None, kd)]
    return sum(1 for r in sel if r and r <= k) / len(sel)


def test_recall_quality_on_remembered_facts(tmp_path, real_cfg):
    """The authored set (tests/memory/data/recall_eval.json): 48 facts remembered, 51
    questions (paraphrases, keywords, multi-hop through entities). The default recall (graph
    depth 2, re-rank on) must find most answers in its top 5, the traversal must help the
    multi-hop questions, and the re-rank, on by default, must not do worse than without it."""
    from kgr.store import Store

    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert len(data["facts"]) >= 40 and len(data["questions"]) >= 40
    with Store(tmp_path / "eval.sqlite") as store:
        doc_fact = {
            recall.remember(store, text, real_cfg, clock=lambda: T0)["doc_id"]: fid
            for fid, text in data["facts"].items()
        }
        assert real_cfg.memory.rerank is True
        on = _ranks(store, real_cfg, data, doc_fact, rerank=None)
        off = _ranks(store, real_cfg, data, doc_fact, rerank=False)
        flat = _ranks(store, real_cfg.override({"memory.graph_depth": 0}), data, doc_fact, rerank=None)
    assert _r_at(on, 5) >= 0.85
    assert _mrr(on) >= _mrr(off) and _r_at(on, 1) > _r_at(off, 1)
    assert _r_at(on, 5, "multihop") > _r_at(flat, 5, "multihop")


def test_the_gazetteer_is_built_once_per_mined_version(store, stub_cfg):
    from kgr.ingest import graphbuild

    recall.remember(store, "Dara Novak met Hugo Silva in Lyon.", stub_cfg)
    first = graphbuild.load_gazetteer(store)
    assert graphbuild.load_gazetteer(store) is first
    stamp = store.get_meta(graphbuild.GAZETTEER_STAMP)
    graphbuild.mine(store)
    assert store.get_meta(graphbuild.GAZETTEER_STAMP) != stamp
    again = graphbuild.load_gazetteer(store)
    assert again is not first and set(again.terms) == set(first.terms)
