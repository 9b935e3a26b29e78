"""Fusion that keeps a clear keyword hit, and graph expansion gated by edge confidence."""

import hashlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from kgr.config import RetrievalWeights
from kgr.retrieval.query import hybrid_query
from kgr.stages.load import load
from kgr.store import Store, vectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from test_vectors import CountingFake, records  # noqa: E402


class TableFake:
    """Chunk vectors at a chosen cosine to the query direction: a weak vector list, whose
    cosines are all alike, is set up exactly."""

    model, dim, max_tokens = "fake-table", 16, 256

    def __init__(self, cosines: dict[str, float]):
        self.cosines = cosines

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        # a chunk is embedded with its prelude: it is known by the text it contains
        cos = next((c for t, c in self.cosines.items() if t in text), None)
        if cos is None:  # the query
            v[0] = 1.0
            return v
        v[0] = cos
        # the rest of the length on an axis of the chunk's own, so chunks differ from each other
        v[1 + int(hashlib.md5(text.encode()).hexdigest(), 16) % (self.dim - 1)] = math.sqrt(1 - cos * cos)
        return v

    def embed_documents(self, texts):
        return np.stack([self._vec(t) for t in texts])

    embed_queries = embed_documents


HIT = "error QX-4471 means the nightly batch was rejected by the clearing house"
NEAR = [
    "a batch can be slow when the queue is long",
    "rejected payments are retried by the scheduler",
    "the batch window closes at midnight",
    "payments that fail are retried later",
    "the scheduler runs every job in order",
]


@pytest.fixture()
def weak_vectors(tmp_path):
    # the vector list is flat: every chunk sits near the query, the keyword hit a little below the rest
    cosines = {HIT: 0.46, **{t: 0.50 - 0.005 * i for i, t in enumerate(NEAR)}}
    fake = TableFake(cosines)
    with Store(tmp_path / "f.sqlite") as store:
        load(records("hit.md", [HIT]), store)
        for i, t in enumerate(NEAR):
            load(records(f"near{i}.md", [t]), store)
        vectors.embed_pending(store, lambda: fake)
        yield store, (lambda text: fake._vec(text))


def test_hybrid_keeps_a_clear_exclusive_keyword_hit_on_top(weak_vectors):
    store, embed = weak_vectors
    q = "what does QX-4471 mean for a rejected batch"
    assert hybrid_query(store, q, k=5, mode="bm25")["results"][0]["path"] == "hit.md"
    vec = [r["path"] for r in hybrid_query(store, q, k=6, mode="vector", embed_query=embed)["results"]]
    assert vec.index("hit.md") >= 3  # the vector list puts it low
    for mode in ("hybrid", "graph"):
        top2 = [r["path"] for r in hybrid_query(store, q, k=5, mode=mode, embed_query=embed)["results"][:2]]
        assert "hit.md" in top2, mode
    # reciprocal rank fusion counts the flat vector list as much as the keyword list, and loses the hit
    rrf = RetrievalWeights(fusion="rrf")
    top2 = [r["path"] for r in hybrid_query(store, q, k=5, mode="hybrid", embed_query=embed, weights=rrf)["results"]]
    assert "hit.md" not in top2[:2]


def test_a_keyword_list_with_one_hit_still_counts(weak_vectors):
    # only one chunk writes the error code: the keyword list is that one hit, every other chunk
    # scores 0 on it, and the hit goes first against a flat vector list that puts it last
    store, embed = weak_vectors
    q = "QX-4471"
    assert [r["path"] for r in hybrid_query(store, q, k=6, mode="bm25")["results"]] == ["hit.md"]
    vec = [r["path"] for r in hybrid_query(store, q, k=6, mode="vector", embed_query=embed)["results"]]
    assert vec[-1] == "hit.md"
    for mode in ("hybrid", "graph"):
        assert hybrid_query(store, q, k=6, mode=mode, embed_query=embed)["results"][0]["path"] == "hit.md", mode


def test_fusion_modes_keep_single_list_orders(weak_vectors):
    store, embed = weak_vectors
    q = "rejected batch"
    for fusion in ("zscore", "rrf"):
        w = RetrievalWeights(fusion=fusion)
        for mode in ("bm25", "vector"):
            got = hybrid_query(store, q, k=6, mode=mode, embed_query=embed, weights=w)["results"]
            assert [r["score"] for r in got] == sorted((r["score"] for r in got), reverse=True)
            assert got[0]["score"] == 1.0


def _graph_kb(path: Path, confidence: float):
    """ledger.md is the page of Ledger Service (named in the questions); team.md, the page of
    its owner, shares no word with them; notes.md matches the question's words directly."""
    store = Store(path)
    load(records("ledger.md", ["ledger service records every money movement"]), store)
    load(records("notes.md", ["money movement records are kept for seven years"]), store)
    load(records("team.md", ["payments platform is based in lisbon"]), store)
    load(records("misc.md", ["the office has a kitchen"]), store)
    with store.write() as conn:
        conn.execute(
            "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES "
            "(1, 'SERVICE:ledger service', 'Ledger Service', 'SERVICE', 'ledger service', '[]'),"
            "(2, 'TEAM:payments platform', 'Payments Platform', 'TEAM', 'payments platform', '[]')"
        )
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (1, 2, 'owned_by', ?)", (confidence,)
        )
        for eid, surface, like in ((1, "ledger service", "ledger%"), (2, "payments platform", "payments%")):
            conn.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                "SELECT ?, doc_id, id, 0, ?, ?, 'gazetteer', '{\"in_title\": true}' FROM chunks WHERE text LIKE ?",
                (eid, len(surface), surface, like),
            )
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    return store, (lambda text: fake._vec(text))


def _ranked(store, embed, q):
    res = hybrid_query(store, q, k=5, mode="graph", hops=2, embed_query=embed)
    return res, [r["path"] for r in res["results"]], {r["path"]: r for r in res["results"]}


def test_a_low_confidence_edge_cannot_bring_a_page_above_a_direct_match(tmp_path):
    q = "ledger service money movement records"
    weak, strong = RetrievalWeights().min_confidence - 0.2, 0.95
    store, embed = _graph_kb(tmp_path / "weak.sqlite", weak)
    with store:
        res, order, by = _ranked(store, embed, q)
        assert order[:2] == ["ledger.md", "notes.md"]
        assert not res["edges"]  # the weak edge is not followed
        assert "team.md" not in by or by["team.md"]["scores"]["hop"] == 0
    store, embed = _graph_kb(tmp_path / "strong.sqlite", strong)
    with store:
        res, order, by = _ranked(store, embed, q)
        assert [e["rel"] for e in res["edges"]] == ["owned_by"]
        assert by["team.md"]["scores"]["hop"] > 0 and "owned_by" in by["team.md"]["why"]
        assert order.index("team.md") < order.index("notes.md")  # a strong edge may lift it over a direct match
        # unless what the graph adds is scaled by the page's own direct evidence, which it has none of
        gated = hybrid_query(
            store, q, k=5, mode="graph", hops=2, embed_query=embed, weights=RetrievalWeights(evidence=1)
        )
        order = [r["path"] for r in gated["results"]]
        assert order.index("notes.md") < order.index("team.md")


def test_an_edge_passes_on_its_confidence(tmp_path):
    hops = {}
    for conf in (0.6, 0.95):
        store, embed = _graph_kb(tmp_path / f"c{conf}.sqlite", conf)
        with store:
            _res, _order, by = _ranked(store, embed, "ledger service money movement records")
            hops[conf] = by["team.md"]["scores"]["hop"]
    assert 0 < hops[0.6] < hops[0.95]


def test_a_seed_from_a_top_chunk_gives_nothing_to_its_own_page(tmp_path):
    store, embed = _graph_kb(tmp_path / "home.sqlite", 0.95)
    with store:
        res, order, by = _ranked(store, embed, "based in lisbon")
        assert order[0] == "team.md"
        assert any((e["why"] or "").startswith("mentioned in a top result") for e in res["entities"])
        # its page is where it was mentioned: no second credit for the same evidence
        assert by["team.md"]["scores"]["hop"] == 0
        # the edge from it still reaches the other page
        assert by["ledger.md"]["scores"]["hop"] > 0


def test_a_single_hit_is_the_best_hit(weak_vectors):
    store, embed = weak_vectors
    got = hybrid_query(store, "QX-4471", k=5, mode="bm25")["results"]
    assert [r["path"] for r in got] == ["hit.md"] and got[0]["score"] == 1.0


def test_an_unknown_fusion_is_a_configuration_error():
    from kgr.errors import ConfigError

    with pytest.raises(ConfigError, match="fusion"):
        RetrievalWeights(fusion="borda")


def test_a_seed_found_by_vector_gives_nothing_to_the_pages_the_searches_found(tmp_path):
    # the question does not name Payments Platform, its vector is near the name: the name's likeness
    # to the question is what found team.md already, and counts once
    store, embed = _graph_kb(tmp_path / "echo.sqlite", 0.95)
    weights = RetrievalWeights(entity_sim=0.3, seed_chunks=0)
    with store:
        res = hybrid_query(
            store, "platform for payments", k=5, mode="graph", hops=2, embed_query=embed, weights=weights
        )
        by = {r["path"]: r for r in res["results"]}
        assert any((e["why"] or "").startswith("close to the query") for e in res["entities"])
        assert "team.md" in by and by["team.md"]["scores"]["hop"] == 0
        # the edge from it still reaches a page the searches did not find
        assert by["ledger.md"]["scores"]["hop"] > 0


def test_the_walk_reads_each_entitys_edges_once_and_finds_what_one_query_per_edge_found(tmp_path):
    """_edge_stats fills the confidence and degree caches of a walk from each entity's edges read
    at once; each value is the one the per-edge query (_confidence, _degree) gives."""
    import random

    from kgr.retrieval import query as query_mod

    store = Store(tmp_path / "edges.sqlite")
    rng = random.Random(7)
    rels = ["uses", "owned_by", "part_of", "cites"]
    with store.write() as conn:
        for eid in range(1, 31):
            conn.execute(
                "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES (?, ?, ?, 'SERVICE', ?, '[]')",
                (eid, f"e{eid}", f"E{eid}", f"e{eid}"),
            )
        for _ in range(150):  # pairs with several edges, both directions, self-loops, a relation type not walked
            a, b = rng.randint(1, 30), rng.randint(1, 30)
            conn.execute(
                "INSERT OR IGNORE INTO relations(src_id, dst_id, rel, confidence) VALUES (?, ?, ?, ?)",
                (a, b, rng.choice(rels), round(rng.random(), 3)),
            )
    walked = ["uses", "owned_by", "part_of"]
    with store:
        ids = set(range(1, 31, 2))
        confidences, degrees, best = {}, {}, {}
        query_mod._edge_stats(store, ids, walked, confidences, degrees, best)
        assert set(degrees) == ids
        for e in ids:
            assert degrees[e] == query_mod._degree(store, e, walked, {})
        pairs = store.query(
            "SELECT DISTINCT src_id, dst_id FROM relations WHERE rel IN ('uses', 'owned_by', 'part_of')"
        )
        checked = 0
        for a, b in pairs:
            if a in ids or b in ids:
                key = (min(a, b), max(a, b))
                assert confidences[key] == pytest.approx(query_mod._confidence(store, a, b, walked, {}))
                rid, src, dst, rel, conf = best[key]
                assert rel in walked and {src, dst} == {a, b} and conf == pytest.approx(confidences[key])
                checked += 1
        assert checked > 20
        # an edge of a relation type not walked is in neither cache
        cites = store.query("SELECT src_id, dst_id FROM relations WHERE rel = 'cites'")
        only_cites = [
            (a, b)
            for a, b in cites
            if not store.scalar(
                "SELECT count(*) FROM relations WHERE rel != 'cites' AND "
                "((src_id = ? AND dst_id = ?) OR (src_id = ? AND dst_id = ?))",
                (a, b, b, a),
            )
        ]
        assert only_cites and all((min(a, b), max(a, b)) not in confidences for a, b in only_cites)


def test_a_page_each_list_finds_in_another_passage_counts_both():
    # page 1 answers in two passages, one the keyword list finds and one the vector list finds; page 2
    # has one passage both lists rank second. Chunk by chunk, page 2's passage wins; with each list
    # also scoring a page by its best passage there, page 1 does.
    from kgr.retrieval.query import Candidate, RankedList, fuse

    keyword = {1: 10.0, 3: 7.0, 4: 2.0, 5: 1.5}
    vector = {2: 0.9, 3: 0.8, 4: 0.4, 5: 0.35, 6: 0.3}
    doc_of = {1: 1, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}
    w = RetrievalWeights()

    def fused(pages):
        cands = {cid: Candidate(cid) for cid in doc_of}
        fuse(cands, [RankedList(0.7, keyword, depth=50), RankedList(0.3, vector, 0.08)], w, pages)
        return {cid: c.direct for cid, c in cands.items()}

    alone, paged = fused(None), fused(doc_of)
    assert alone[3] > max(alone[1], alone[2])
    assert max(paged[1], paged[2]) > paged[3]
    assert paged[4] > paged[5] > paged[6]  # pages of one passage keep their order
