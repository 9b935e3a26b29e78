"""What depends on meaning, with the real default embedding model (all-MiniLM-L6-v2):
recall of a paraphrase that shares no keyword, and consolidation of a near-duplicate but
not of a related, different memory."""

from __future__ import annotations

import pytest
from recall_fixtures import DAY_MS, REAL_MEMORIES, T0

from kgr.memory import recall
from kgr.retrieval.query import query_embedder


def _ids(store):
    return {
        text: mid
        for mid, text in store.query("SELECT json_extract(meta, '$.memory.id'), text FROM docs WHERE source='memory'")
    }


def _recall(store, cfg, q, **kw):
    return recall.recall(
        store, q, cfg, embed_query=query_embedder(store, cfg), clock=lambda: T0 + 10 * DAY_MS, touch=False, **kw
    )


@pytest.mark.parametrize(
    "question,key",
    [
        ("What sweet treat do I like most?", "dessert"),
        ("How often are copies of our test DB saved?", "backups"),
        ("Can we ship releases over Christmas?", "deploys"),
    ],
)
def test_recall_finds_a_paraphrase_by_meaning(real_store, real_cfg, question, key):
    from kgr.retrieval.entities import fts_query

    text = REAL_MEMORIES[key]
    # no keyword of the question is in the memory: only the vectors can find it
    assert not real_store.query(
        "SELECT 1 FROM chunks_fts f JOIN chunks c ON c.id=f.rowid WHERE chunks_fts MATCH ? AND c.text=?",
        (fts_query(question), text),
    )
    out = _recall(real_store, real_cfg, question, k=3)
    top = out["results"][0]
    assert top["text"] == text
    assert top["scores"]["vector_rank"] == 1 and top["scores"]["bm25_rank"] is None
    assert "semantic match #1" in top["why"]


def test_keywords_and_vectors_fuse(real_store, real_cfg):
    out = _recall(real_store, real_cfg, "staging database backups", k=3)
    top = out["results"][0]
    assert top["text"] == REAL_MEMORIES["backups"]
    assert top["scores"]["bm25_rank"] == 1 and top["scores"]["vector_rank"] == 1


def test_consolidation_merges_the_near_duplicate_only(real_store, real_cfg):
    ids = _ids(real_store)
    berlin, dup, munich = (ids[REAL_MEMORIES[k]] for k in ("berlin", "berlin_dup", "munich"))
    vecs = recall._memory_vectors(real_store)
    by_id = {
        mid: d
        for d, mid in real_store.query("SELECT id, json_extract(meta, '$.memory.id') FROM docs WHERE source='memory'")
    }
    cos = lambda a, b: float(vecs[by_id[a]] @ vecs[by_id[b]])  # noqa: E731
    assert cos(berlin, dup) >= 0.9 > cos(berlin, munich)  # the premise, from the model itself
    out = recall.consolidate(real_store, real_cfg)
    assert out["groups"] == 1 and out["absorbed"] == 1
    [group] = out["merged"]
    assert {group["into"], *group["from"]} == {berlin, dup}
    left = {m["id"] for m in recall.list_memories(real_store)["memories"]}
    assert munich in left and len(left) == len(REAL_MEMORIES) - 1
    kept = next(m for m in recall.list_memories(real_store)["memories"] if m["id"] == group["into"])
    assert kept["merged_from"] == group["from"]
    # the merged memory answers for both texts
    res = _recall(real_store, real_cfg, "Where did Alice Johnson move for her job at Siemens?", k=1)
    assert res["results"][0]["id"] == group["into"]


def test_the_threshold_is_configurable(real_store, real_cfg):
    strict = real_cfg.override({"memory.consolidate_threshold": 0.999})
    assert recall.consolidate(real_store, strict)["groups"] == 0
    loose = recall.consolidate(real_store, real_cfg, threshold=0.7, dry_run=True)
    ids = _ids(real_store)
    merged = {m for g in loose["merged"] for m in (g["into"], *g["from"])}
    assert ids[REAL_MEMORIES["munich"]] in merged  # related enough at 0.7
    assert ids[REAL_MEMORIES["dessert"]] not in merged
