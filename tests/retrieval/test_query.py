"""hybrid_query plumbing: modes, escaping, bounds, provenance (a bag-of-words fake embeds)."""

import sys
from pathlib import Path

import pytest

from kgr.errors import UsageError
from kgr.retrieval.query import hybrid_query, rrf_only
from kgr.stages.load import load
from kgr.store import Store, vectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from test_vectors import CountingFake, records  # noqa: E402


@pytest.fixture()
def kb(tmp_path):
    with Store(tmp_path / "q.sqlite") as store:
        load(records("bus.md", ["kestrel is the event bus of the platform", "consumers must expect duplicates"]), store)
        load(records("ledger.md", ["the ledger service records money movements", "it publishes to kestrel"]), store)
        load(records("team.md", ["payments platform owns the ledger service"]), store)
        with store.write() as conn:
            conn.execute(
                "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES "
                "(1, 'SERVICE:ledger service', 'Ledger Service', 'SERVICE', 'ledger service', '[]'),"
                "(2, 'TEAM:payments platform', 'Payments Platform', 'TEAM', 'payments platform', '[]')"
            )
            conn.execute("INSERT INTO relations(src_id, dst_id, rel, confidence) VALUES (1, 2, 'owned_by', 0.9)")
            conn.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                "SELECT 1, doc_id, id, 4, 18, 'ledger service', 'gazetteer', '{\"in_title\": true}' FROM chunks WHERE text LIKE 'the ledger%'"
            )
            conn.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                "SELECT 2, doc_id, id, 0, 17, 'payments platform', 'gazetteer', '{\"in_title\": true}' FROM chunks WHERE text LIKE 'payments%'"
            )
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
    from kgr.retrieval.query import Weights

    store, embed = kb
    q = "ledger records"
    hybrid = [r["chunk_id"] for r in hybrid_query(store, q, k=5, mode="hybrid", embed_query=embed)["results"]]
    # unpinned, an overwhelming hop weight lets a chunk reached through the graph take first place
    # (the best chunk's Ledger Service, one edge on to its owner's page)
    free = hybrid_query(store, q, k=5, mode="graph", hops=2, embed_query=embed, weights=Weights(pin=0, hop=5.0))
    assert free["results"][0]["chunk_id"] != hybrid[0] and free["results"][0]["scores"]["hop"] > 0
    for pin in (1, 2):
        graph = hybrid_query(store, q, k=5, mode="graph", hops=2, embed_query=embed, weights=Weights(pin=pin, hop=5.0))
        assert [r["chunk_id"] for r in graph["results"][:pin]] == hybrid[:pin]


def test_user_text_is_never_fts_syntax(kb):
    store, embed = kb
    for q in ["NEAR(kestrel bus)", "text:kestrel", '"unbalanced', "kestrel*", "AND OR NOT", "-- ; DROP TABLE chunks"]:
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


def test_an_entity_named_in_the_query_seeds_the_graph_at_distance_zero(kb):
    store, embed = kb
    res = hybrid_query(store, "Who owns the Ledger Service?", k=5, mode="graph", hops=1, embed_query=embed)
    named = [e for e in res["entities"] if e["name"] == "Ledger Service"]
    assert named and named[0]["distance"] == 0 and named[0]["why"] == "named in the query (Ledger Service)"
    # a name is matched word for word, not as a run of letters inside other words
    res = hybrid_query(store, "ledgers ervice", k=5, mode="graph", hops=1, embed_query=embed)
    assert not any((e["why"] or "").startswith("named in the query") for e in res["entities"])


def _named_pages(db, pages: dict[str, list[str]], names: dict[int, tuple[str, str]]):
    """A store of one page per title, the entities ``names`` (id -> (name, type)) mentioned wherever a
    page writes them (in its title on the page of that title), and vectors from a fake."""
    store = Store(db)
    for path, texts in pages.items():
        load(records(path, texts), store)
    with store.write() as conn:
        for eid, (name, typ) in names.items():
            conn.execute(
                "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES (?, ?, ?, ?, ?, '[]')",
                (eid, f"{typ}:{name.lower()}", name, typ, name.lower()),
            )
        for eid, (name, _) in names.items():
            for cid, doc_id, path, text in conn.execute(
                "SELECT c.id, c.doc_id, d.path, c.text FROM chunks c JOIN docs d ON d.id = c.doc_id"
            ).fetchall():
                at = text.find(name)
                if at >= 0:
                    conn.execute(
                        'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                        "VALUES (?, ?, ?, ?, ?, ?, 'ner', ?)",
                        (eid, doc_id, cid, at, at + len(name), name, f'{{"in_title": {str(path == name).lower()}}}'),
                    )
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    return store, (lambda text: fake._vec(text))


@pytest.fixture()
def rivers(tmp_path):
    """A page named by the question that names a second entity, whose page shares no word with the question."""
    pages = {
        "Bubye River": ["The Bubye River flows south through Zimbabwe into the Limpopo"],
        "Victoria Falls": ["Victoria Falls lies on the Zambezi at the border of Zambia and Zimbabwe"],
        **{
            f"Waterfall guide {i}": [f"waterfall guide {i} for a country: waterfall seasons, waterfall hikes"]
            for i in range(8)
        },
    }
    names = {1: ("Bubye River", "LOCATION"), 2: ("Zimbabwe", "LOCATION"), 3: ("Victoria Falls", "LOCATION")}
    store, embed = _named_pages(tmp_path / "r.sqlite", pages, names)
    with store:
        yield store, embed


def test_feedback_follows_the_named_page_to_a_page_the_question_shares_no_word_with(rivers):
    from kgr.retrieval.query import Weights

    store, embed = rivers
    q = "Which waterfall is in the country where the Bubye River flows?"

    def ranked(feedback):
        # the first searches keep their best 4: Victoria Falls, sharing no word with the question, is not among them
        res = hybrid_query(
            store,
            q,
            k=10,
            mode="graph",
            hops=1,
            rels=["part_of"],
            embed_query=embed,
            candidates=4,
            weights=Weights(feedback=feedback),
        )
        return [r["path"] for r in res["results"]]

    without, with_ = ranked(0.0), ranked(3.0)
    assert without[0] == with_[0] == "Bubye River"
    assert "Victoria Falls" not in without
    assert "Victoria Falls" in with_, with_  # found by the second search, through the Bubye River page's Zimbabwe
    fed = hybrid_query(store, q, k=10, mode="graph", hops=1, rels=["part_of"], embed_query=embed, candidates=4)
    assert "Victoria Falls" in [r["path"] for r in fed["results"]]  # on by default


def test_feedback_needs_a_page_the_question_names(rivers):
    from kgr.retrieval.query import Weights

    store, embed = rivers
    q = "which waterfall flows south into a river"  # names no entity: nothing to follow
    got = [
        hybrid_query(store, q, k=5, mode="graph", hops=1, embed_query=embed, weights=Weights(feedback=f))["results"]
        for f in (0.0, 3.0)
    ]
    assert [(r["path"], r["score"]) for r in got[0]] == [(r["path"], r["score"]) for r in got[1]]


def test_the_pages_about_a_reached_entity_are_read_through_the_title_index(kb):
    from kgr.retrieval.query import _title_mentions_sql

    store, _ = kb
    plan = " ".join(str(r) for r in store.query("EXPLAIN QUERY PLAN " + _title_mentions_sql(2), (1, 2)))
    assert "idx_mentions_in_title" in plan, plan  # a hub's thousands of text mentions are never read


def test_a_title_qualifier_does_not_hide_whose_page_it_is(tmp_path):
    from kgr.retrieval.query import _is_about

    with Store(tmp_path / "t.sqlite") as store:
        for path in ("Hardcase (1972 film)", "Hardcase and other westerns of 1972"):
            load(records(path, ["Hardcase is a western directed by John Moxey"]), store)
        with store.write() as conn:
            conn.execute(
                "INSERT INTO entities(id, key, name, type, norm, aliases) "
                "VALUES (1, 'PRODUCT:hardcase', 'Hardcase', 'PRODUCT', 'hardcase', '[]')"
            )
            conn.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, features) '
                "SELECT 1, doc_id, id, 0, 8, 'Hardcase', 'ner', '{\"in_title\": true}' FROM chunks"
            )
        film, roundup = (
            store.scalar("SELECT c.id FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.path = ?", (p,))
            for p in ("Hardcase (1972 film)", "Hardcase and other westerns of 1972")
        )
        assert _is_about(store, film, [1])  # "(1972 film)" only tells which Hardcase
        assert not _is_about(store, roundup, [1])  # a page that mentions it in a longer title is not its page


def _tag(store, path: str, *tags: str, origin: str = "ingest") -> None:
    with store.write() as conn:
        doc_id = conn.execute("SELECT id FROM docs WHERE path = ?", (path,)).fetchone()[0]
        conn.executemany(
            "INSERT INTO doc_tags(doc_id, tag, origin) VALUES (?, ?, ?)", [(doc_id, t, origin) for t in tags]
        )


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid", "graph"])
def test_tags_keep_only_documents_carrying_all_of_them(kb, mode):
    store, embed = kb
    _tag(store, "team.md", "people", "org")
    _tag(store, "ledger.md", "people", origin="meta")
    free = hybrid_query(store, "ledger service", k=5, mode=mode, hops=1, embed_query=embed)
    assert {r["path"] for r in free["results"]} >= {"ledger.md", "team.md"}, mode
    one = hybrid_query(store, "ledger service", k=5, mode=mode, hops=1, embed_query=embed, tags=["PEOPLE"])
    assert {r["path"] for r in one["results"]} == {"ledger.md", "team.md"}, mode
    both = hybrid_query(store, "ledger service", k=5, mode=mode, hops=1, embed_query=embed, tags=["people", "org"])
    assert {r["path"] for r in both["results"]} == {"team.md"}, mode
    none = hybrid_query(store, "ledger service", k=5, mode=mode, embed_query=embed, tags=["nobody"])
    assert none["results"] == [] and none["tags"] == ["nobody"]


def test_results_carry_the_seed_id(kb):
    store, embed = kb
    res = hybrid_query(store, "event bus", k=2, mode="bm25")
    assert all(r["id"] == r["chunk_id"] for r in res["results"])


def test_the_text_output_names_the_nearest_sentence_the_snippet_lacks():
    from kgr.retrieval.query import format_results, snippet

    long = "Kestrel is the event bus. " + "It carries every event of every service. " * 8
    far = {"text": "Core Infrastructure owns Kestrel and runs its brokers.", "start": 400, "end": 455, "cosine": 0.6}
    near = {"text": "Kestrel is the event bus.", "start": 0, "end": 25, "cosine": 0.6}
    base = {"rank": 1, "path": "kestrel.md", "section": "Kestrel", "score": 0.9, "snippet": snippet(long), "why": "x"}
    shown = format_results({"results": [{**base, "sentence": far}, {**base, "rank": 2, "sentence": near}]})
    assert shown.count("nearest:") == 1
    assert "    nearest: Core Infrastructure owns Kestrel and runs its brokers." in shown.splitlines()
    assert "nearest" not in format_results({"results": [{**base, "sentence": None}]})


@pytest.fixture()
def hub(tmp_path):
    """Six pages: one about Hub, which every page mentions, and one about Relay, which only its own page does."""
    pages = {
        "Hub": ["Hub carries every message between the services"],
        "Relay": ["Relay forwards alerts to the pager and uses Hub"],
        **{f"Service {i}": [f"service {i} keeps orders and talks to Hub"] for i in range(4)},
    }
    store, embed = _named_pages(tmp_path / "h.sqlite", pages, {1: ("Hub", "SERVICE"), 2: ("Relay", "SERVICE")})
    with store:
        yield store, embed


def test_a_name_every_page_mentions_is_a_weak_seed(hub):
    from kgr.retrieval.query import Weights

    store, embed = hub

    def hops(specificity):
        res = hybrid_query(
            store,
            "How do Hub and Relay deliver alerts?",
            k=10,
            mode="graph",
            hops=1,
            embed_query=embed,
            weights=Weights(specificity=specificity, place=0.0),
        )
        return {r["path"]: r["scores"]["hop"] for r in res["results"]}

    plain, specific = hops(0.0), hops(1.0)
    # both pages are about an entity the question names: without specificity they count alike
    assert plain["Hub"] == plain["Relay"] == 1.0
    # Relay's name is on one page and keeps all its strength; Hub's is on all six, and keeps 1/6
    assert specific["Relay"] == 1.0
    assert specific["Hub"] == pytest.approx(1 / 6, abs=1e-3)
