"""Retrieval with the real default model on the examples knowledge base."""

import subprocess
import sys

import pytest

from kgr import config
from kgr.embedders import get_embedder
from kgr.ingest.pipeline import ingest
from kgr.retrieval.query import hybrid_query
from kgr.store import Store


@pytest.fixture(scope="module")
def kb(tmp_path_factory, examples):
    db = tmp_path_factory.mktemp("kb") / "kb.sqlite"
    cfg = config.load(None)
    with Store(db) as store:
        summary = ingest([str(examples / "kb")], store, config=cfg)
        assert summary.embedded > 0
    store = Store(db, readonly=True)
    embedder = get_embedder(cfg, purpose="query")
    yield store, lambda text: embedder.embed_queries([text])[0], db
    store.close()


def paths(res):
    return [r["path"] for r in res["results"]]


def test_a_paraphrase_without_shared_words_is_found_by_vectors(kb):
    store, embed, _ = kb
    q = "which bus gps tracker knows vehicle positions"
    assert "services/vehicle-locator.md" in paths(hybrid_query(store, q, k=3, mode="vector", embed_query=embed))


def test_a_fact_one_line_of_a_chunk_states_is_found_by_that_lines_vector(kb):
    # "Chair: Dmitri Hale." is one line of the meeting's first chunk, which is mostly about ghost
    # buses: the chunk's own vector is not near the question, its sentence's vector is
    store, embed, _ = kb
    res = hybrid_query(store, "who chaired the ops review", k=3, mode="vector", embed_query=embed)
    assert paths(res)[0] == "meetings/2025-03-ops-review.docx", paths(res)
    # and the result says which sentence (a line about who took part, not the ghost buses), and where
    # the document writes it
    said = res["results"][0]["sentence"]
    assert said["text"].startswith(("Chair: Dmitri Hale.", "Attendees: ")) and said["cosine"] > 0.3, said
    text = store.scalar("SELECT text FROM docs WHERE path = ?", ("meetings/2025-03-ops-review.docx",))
    assert text[said["start"] : said["end"]] == said["text"]


def test_every_mode_answers_a_plain_question(kb):
    store, embed, _ = kb
    for mode in ("bm25", "vector", "hybrid", "graph"):
        got = paths(hybrid_query(store, "who approves changes to the fare tables", k=3, mode=mode, embed_query=embed))
        assert "handbook/faq.md" in got, (mode, got)


def test_graph_mode_reaches_what_a_dependency_leads_to(kb):
    store, embed, _ = kb
    res = hybrid_query(
        store, "what does the Vehicle Locator Service depend on", k=10, mode="graph", hops=2, embed_query=embed
    )
    assert res["results"][0]["path"] == "services/vehicle-locator.md"
    assert any(e["rel"] == "depends_on" for e in res["edges"])
    assert all(r["why"] for r in res["results"])


def test_cli_query_json_and_cold_start_loads_no_torch(kb):
    _, _, db = kb
    code = (
        "import sys, json; from kgr.cli import main\n"
        f"sys.argv = ['kgr', 'query', 'who owns the fare engine', '--db', {str(db)!r}, '--json', '--k', '2']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sentence_transformers', 'spacy')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "HEAVY []", lines[-1]
    import json

    rows = [json.loads(line) for line in lines[:-1]]
    assert len(rows) == 2 and all({"path", "section", "snippet", "why", "entities"} <= set(r) for r in rows)


def test_embed_as_a_filter_gives_the_vectors_ingest_gives(kb, examples, tmp_path):
    import numpy as np

    from kgr.store import vectors

    _, _, ingest_db = kb
    pipe_db = tmp_path / "pipe.sqlite"
    kgr = f"{sys.executable} -m kgr"
    proc = subprocess.run(
        f"{kgr} normalize {examples / 'kb'} | {kgr} chunk | {kgr} embed | {kgr} load --db {pipe_db}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with Store(pipe_db, readonly=True) as a, Store(ingest_db, readonly=True) as b:
        assert a.scalar("SELECT count(*) FROM chunk_vec") == a.scalar("SELECT count(*) FROM chunks") > 0
        assert vectors.stored_spec(a) == vectors.stored_spec(b)
        # the sentences of each chunk (not their texts' hash: the module's ingest redacts with a key of its own)
        sentences = (
            "SELECT d.path, c.ord, length(s.vectors) FROM sentence_vec s JOIN chunks c ON c.id = s.chunk_id "
            "JOIN docs d ON d.id = c.doc_id ORDER BY d.path, c.ord"
        )
        assert a.query(sentences) == b.query(sentences)
        assert len(a.query(sentences)) == a.scalar("SELECT count(*) FROM chunks")
        q = "who approves changes to the fare tables"
        emb = get_embedder(config.load(None), purpose="query").embed_queries([q])[0]
        top_a = [
            a.scalar("SELECT d.path FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE c.id = ?", (i,))
            for i, _ in vectors.knn(a, vectors.CHUNK, emb, 3)
        ]
        top_b = [
            b.scalar("SELECT d.path FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE c.id = ?", (i,))
            for i, _ in vectors.knn(b, vectors.CHUNK, emb, 3)
        ]
        assert top_a == top_b
        assert np.isclose(
            vectors.knn(a, vectors.CHUNK, emb, 1)[0][1], vectors.knn(b, vectors.CHUNK, emb, 1)[0][1], atol=1e-3
        )


def test_the_linker_weighs_loose_matches_by_entity_vectors(kb):
    """A loose string match (shared words) scores by meaning once entities have vectors."""
    from kgr.ingest.graphbuild import EntityVectors, stored_entities
    from kgr.stages.link import STRUCTURAL, Entity, Linker

    store, _, _ = kb
    ev = EntityVectors(store, config.load(None))
    assert ev, "the examples' entities have vectors after ingest"
    rows = {e["name"]: e for e in stored_entities(store)}
    vls = rows["Vehicle Locator Service"]
    ent = Entity(vls["key"], vls["name"], vls["type"], vls["norm"], vls["aliases"], vls["description"], 0.0)
    near = ev(ent, "vehicle location service", 0.7)
    far = ev(ent, "vehicle insurance paperwork", 0.7)
    assert near > far + 0.2, (near, far)
    assert ev(ent, "Vehicle Locator Service", 0.7) == pytest.approx(1.0, abs=0.02)

    # the Linker asks for vectors only below the structural matches
    asked = []
    linker = Linker([vls], vectors=lambda e, s, sim: asked.append(s) or sim)
    linker.link("Vehicle Locator Service", "SERVICE", "x.md")
    assert asked == []
    assert linker.score(ent, 0.7, "SERVICE", "x.md", "vehicle location service") and asked == [
        "vehicle location service"
    ]
    assert 0.7 < STRUCTURAL
    real = Linker([vls], vectors=ev)
    gap = real.score(ent, 0.7, "SERVICE", "x.md", "vehicle location service") - real.score(
        ent, 0.7, "SERVICE", "x.md", "vehicle insurance paperwork"
    )
    assert gap > 0.1, gap  # the same string similarity, told apart by meaning
