"""Graph mode places the pages the question's entities lead to next to the page that leads to them,
by the strength of the link (page subject, linked mention), for more than one round, and says which
link placed each one."""

import hashlib
import sys
from pathlib import Path

from kgr.config import RetrievalWeights
from kgr.retrieval.query import hybrid_query
from kgr.stages.load import load
from kgr.store import Store, vectors

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from test_vectors import CountingFake  # noqa: E402

# page path -> (title, text); the title is the page's subject
PAGES = {
    "film.md": ("Orrin Vale", "Orrin Vale is a drama directed by Petra Quist."),
    "person.md": ("Petra Quist", "Petra Quist grew up in Dunmere and studied painting."),
    "town.md": ("Dunmere", "Dunmere is a harbour town with a lighthouse."),
}
# pages that match the question's words, with no link to the pages above
NOISE = [f"the director of the festival was born in spring, film number {i}" for i in range(20)]
ENTITIES = {1: "Orrin Vale", 2: "Petra Quist", 3: "Dunmere"}
QUESTION = "Where was the director of Orrin Vale born?"


def _records(path: str, title: str, text: str):
    yield {"kind": "doc", "path": path, "hash": hashlib.sha256(text.encode()).hexdigest(), "title": title, "text": text}
    body = f"# {title}\n\n{text}"
    yield {
        "kind": "chunk",
        "doc": path,
        "ord": 0,
        "text": body,
        "prelude": path,
        "hash": "0",
        "start": 0,
        "end": len(body),
    }


def _kb(path: Path, links: dict[tuple[str, int], float], extra_docs: int = 0):
    """The pages above, each with its subject's in-title mention; ``links``: (page, entity) ->
    the linking score of the mention by which the page names the entity. ``extra_docs`` pages
    each mention every entity (a name every page has is a poor link)."""
    store = Store(path)
    for p, (title, text) in PAGES.items():
        load(_records(p, title, text), store)
    for i, text in enumerate(NOISE):
        load(_records(f"noise{i}.md", f"Festival report {i}", text), store)
    for i in range(extra_docs):
        load(_records(f"common{i}.md", f"Listing {i}", " ".join(ENTITIES.values())), store)
    with store.write() as conn:
        for eid, name in ENTITIES.items():
            conn.execute(
                "INSERT INTO entities(id, key, name, type, norm, aliases) VALUES (?, ?, ?, 'PERSON', ?, '[]')",
                (eid, f"PERSON:{name.lower()}", name, name.lower()),
            )
        chunk = dict(conn.execute("SELECT d.path, c.id FROM chunks c JOIN docs d ON d.id = c.doc_id").fetchall())
        docs = dict(conn.execute("SELECT path, id FROM docs").fetchall())

        def mention(page: str, eid: int, in_title: bool, score: float) -> None:
            conn.execute(
                'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, source, link_score, features) '
                "VALUES (?, ?, ?, 0, ?, ?, 'ner', ?, ?)",
                (
                    eid,
                    docs[page],
                    chunk[page],
                    len(ENTITIES[eid]),
                    ENTITIES[eid],
                    score,
                    f'{{"in_title": {str(in_title).lower()}}}',
                ),
            )

        for eid, page in ((1, "film.md"), (2, "person.md"), (3, "town.md")):
            mention(page, eid, True, 1.0)
        for (page, eid), score in links.items():
            mention(page, eid, False, score)
        for i in range(extra_docs):
            for eid in ENTITIES:
                mention(f"common{i}.md", eid, False, 1.0)
    fake = CountingFake()
    vectors.embed_pending(store, lambda: fake)
    return store, (lambda text: fake._vec(text))


STRONG = {("film.md", 2): 0.95, ("person.md", 3): 0.95}


def _run(store, embed, **weights):
    res = hybrid_query(store, QUESTION, k=8, mode="graph", embed_query=embed, weights=RetrievalWeights(**weights))
    return [r["path"] for r in res["results"]], {r["path"]: r for r in res["results"]}


def test_pages_are_placed_next_to_the_page_that_leads_to_them_over_two_rounds(tmp_path):
    store, embed = _kb(tmp_path / "kb.sqlite", STRONG)
    with store:
        order, by = _run(store, embed)
        # the question names Orrin Vale; its page names Petra Quist, whose page names Dunmere
        assert order[:3] == ["film.md", "person.md", "town.md"], order
        assert by["person.md"]["placed_by"]["round"] == 1 and by["town.md"]["placed_by"]["round"] == 2
        # without placement nothing is placed
        _order0, by0 = _run(store, embed, place=0)
        assert all(r["placed_by"] is None for r in by0.values())
        # one round: the page the second page leads to is not placed
        order1, by1 = _run(store, embed, place_rounds=1)
        assert order1[:2] == ["film.md", "person.md"]
        assert "town.md" not in by1 or by1["town.md"]["placed_by"] is None


def test_a_weak_link_places_nothing(tmp_path):
    weak = {("film.md", 2): RetrievalWeights().place * 0.5, ("person.md", 3): 0.95}
    store, embed = _kb(tmp_path / "weak.sqlite", weak)
    with store:
        _order, by = _run(store, embed)
        # the mention of Petra Quist is linked with too little confidence: her page is not placed, nor what it leads to
        assert "person.md" not in by or by["person.md"]["placed_by"] is None
        assert "town.md" not in by or by["town.md"]["placed_by"] is None


def test_a_name_most_pages_mention_is_a_poor_link(tmp_path):
    store, embed = _kb(tmp_path / "common.sqlite", STRONG, extra_docs=40)
    with store:
        _order, by = _run(store, embed)
        assert "person.md" not in by or by["person.md"]["placed_by"] is None


def test_each_result_says_which_link_placed_it(tmp_path):
    store, embed = _kb(tmp_path / "why.sqlite", STRONG)
    with store:
        # the question names the second page's subject: placed by the question, after the best result
        res = hybrid_query(
            store, "Where did Petra Quist grow up, the director of the festival?", k=8, mode="graph", embed_query=embed
        )
        by = {r["path"]: r for r in res["results"]}
        placed = by["person.md"]["placed_by"]
        if res["results"][0]["path"] != "person.md":
            assert placed["link"] == "question names Petra Quist; Petra Quist is the subject of this page"
            assert placed["named_by"] is None and placed["round"] == 0
        # the page placed from another page names that page
        _order, by = _run(store, embed)
        placed = by["person.md"]["placed_by"]
        assert placed["link"] == "page Orrin Vale names Petra Quist; Petra Quist is the subject of this page"
        assert placed["named_by"]["path"] == "film.md" and placed["entity"]["name"] == "Petra Quist"
        assert 0 < placed["strength"] <= 0.95
        assert by["person.md"]["why"].startswith("placed: page Orrin Vale names Petra Quist")
        assert by["town.md"]["placed_by"]["named_by"]["path"] == "person.md"
        assert by["town.md"]["placed_by"]["strength"] < placed["strength"]  # strength wanes along the chain
        assert by["film.md"]["placed_by"] is None  # the best result is there on its own evidence


def test_graph_mode_on_a_database_with_no_entities_is_hybrid_at_hybrids_cost(tmp_path, monkeypatch):
    from kgr.retrieval import query as query_mod

    store = Store(tmp_path / "plain.sqlite")
    with store:
        for p, (title, text) in PAGES.items():
            load(_records(p, title, text), store)
        for i, text in enumerate(NOISE):
            load(_records(f"noise{i}.md", f"Festival report {i}", text), store)
        fake = CountingFake()
        vectors.embed_pending(store, lambda: fake)

        def embed(text):
            return fake._vec(text)

        hybrid = hybrid_query(store, QUESTION, k=8, mode="hybrid", embed_query=embed)

        def no_graph(*_a, **_k):
            raise AssertionError("graph work on a database with no entities")

        for name in ("_named_entities", "_seed_entities", "_expand", "_reach_chunks", "_place", "_feedback"):
            monkeypatch.setattr(query_mod, name, no_graph)
        graph = hybrid_query(store, QUESTION, k=8, mode="graph", embed_query=embed)
        assert graph["mode"] == "graph"
        assert [(r["chunk_id"], r["score"]) for r in graph["results"]] == [
            (r["chunk_id"], r["score"]) for r in hybrid["results"]
        ]
