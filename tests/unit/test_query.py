"""hybrid_query plumbing: modes, escaping, bounds, provenance (a bag-of-words fake embeds)."""

import pytest

from kgr import vectors
from kgr.errors import UsageError
from kgr.load import load
from kgr.query import hybrid_query, rrf_only
from kgr.store import Store

from .test_vectors import CountingFake, records


@pytest.fixture()
def kb(tmp_path):
    with Store(tmp_path / "q.sqlite") as store:
        load(records("bus.md", ["kestrel is the event bus of the platform", "consumers must expect duplicates"]), store)
        load(records("ledger.md", ["the ledger service records money movements", "it publishes to kestrel"]), store)
        load(records("team.md", ["payments platform owns the ledger service"]), store)
        with store.write() as conn:
            conn.execute("INSERT INTO entities(id, key, name, type, norm, aliases) VALUES "
                         "(1, 'SERVICE:ledger service', 'Ledger Service', 'SERVICE', 'ledger service', '[]'),"
                         "(2, 'TEAM:payments platform', 'Payments Platform', 'TEAM', 'payments platform', '[]')")
            conn.execute("INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (1, 2, 'owned_by', 0.9)")
            conn.execute("INSERT INTO mentions(entity_id, doc_id, chunk_id, start, \"end\", surface, source, features) "
                         "SELECT 1, doc_id, id, 4, 18, 'ledger service', 'gazetteer', '{\"in_title\": true}' FROM chunks WHERE text LIKE 'the ledger%'")
            conn.execute("INSERT INTO mentions(entity_id, doc_id, chunk_id, start, \"end\", surface, source, features) "
                         "SELECT 2, doc_id, id, 0, 17, 'payments platform', 'gazetteer', '{\"in_title\": true}' FROM chunks WHERE text LIKE 'payments%'")
        fake = CountingFake()
        vectors.embed_pending(store, lambda: fake)
        yield store, (lambda text: fake._vec(text))


def test_modes_rank_and_explain(kb):
    store, embed = kb
    for mode in ("bm25", "vector", "hybrid", "graph"):
        res = hybrid_query(store, "event bus", k=3, mode=mode, embed_query=embed)
        top = res["results"][0]
        assert top["path"] == "bus.md", mode
        assert top["snippet"].startswith("kestrel is the event bus") and top["why"]
        assert {"path", "section", "start", "end", "entities", "score"} <= set(top)


def test_graph_mode_reaches_the_owner_through_an_edge(kb):
    store, embed = kb
    res = hybrid_query(store, "ledger service", k=5, mode="graph", hops=1, embed_query=embed)
    assert any(e["rel"] == "owned_by" for e in res["edges"])
    owner = next(r for r in res["results"] if r["path"] == "team.md")
    assert "owned_by" in owner["why"]


def test_pinned_places_keep_the_best_fused_results_first(kb):
    from kgr.query import Weights

    store, embed = kb
    q = "kestrel publishes"
    hybrid = [r["chunk_id"] for r in hybrid_query(store, q, k=5, mode="hybrid", embed_query=embed)["results"]]
    # unpinned, an overwhelming hop weight lets a chunk reached through the graph take first place
    free = hybrid_query(store, q, k=5, mode="graph", hops=1, embed_query=embed, weights=Weights(pin=0, hop=5.0))
    assert free["results"][0]["chunk_id"] != hybrid[0] and free["results"][0]["scores"]["hop"] > 0
    for pin in (1, 2):
        graph = hybrid_query(store, q, k=5, mode="graph", hops=1, embed_query=embed, weights=Weights(pin=pin, hop=5.0))
        assert [r["chunk_id"] for r in graph["results"][:pin]] == hybrid[:pin]


def test_user_text_is_never_fts_syntax(kb):
    store, embed = kb
    for q in ['NEAR(kestrel bus)', 'text:kestrel', '"unbalanced', 'kestrel*', 'AND OR NOT', "-- ; DROP TABLE chunks"]:
        hybrid_query(store, q, mode="bm25")
    assert store.scalar("SELECT count(*) FROM chunks") == 5


def test_bounds_and_bad_input(kb):
    store, embed = kb
    with pytest.raises(UsageError):
        hybrid_query(store, "   ", mode="bm25")
    with pytest.raises(UsageError):
        hybrid_query(store, "bus", k=0, mode="bm25")
    with pytest.raises(UsageError):
        hybrid_query(store, "bus", hops=9, mode="bm25")
    with pytest.raises(UsageError):
        hybrid_query(store, "bus", mode="psychic")
    with pytest.raises(UsageError, match="unknown relation"):
        hybrid_query(store, "bus", rels=["likes"], mode="graph", embed_query=embed)


def test_rrf():
    assert rrf_only([[1, 2, 3], [3, 1]])[:2] == [1, 3]
