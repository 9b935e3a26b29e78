"""Corpus-wide knowledge (the mined gazetteer, declared aliases) is not re-read for every
changed file of a large corpus: only once enough of it changed."""

import json

from kgr import config
from kgr.ingest import graphbuild
from kgr.ingest.pipeline import ingest
from kgr.store import Store


def write(root, i, extra=""):
    (root / f"p{i:02d}.md").write_text(f"# Page {i}\n\nThe Quartz Relay forwards events for team {i}. {extra}\n")


def test_gazetteer_and_aliases_refresh_only_after_enough_change(tmp_path, monkeypatch):
    monkeypatch.setattr(graphbuild, "REFRESH_ALWAYS_CHARS", 0)  # behave as a large corpus does
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(40):
        write(root, i)
    (root / "glossary.md").write_text("# Glossary\n\nThe Northwind Ledger Engine (NLE) keeps the books.\n")
    cfg = config.load(None)
    mined = []
    real_mine = graphbuild.mine
    monkeypatch.setattr(graphbuild, "mine", lambda store, **kw: mined.append(1) or real_mine(store, **kw))
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=cfg, embed=False)
        assert len(mined) == 1 and store.get_meta("graph.changed_since_refresh") == "0"

        # one changed page of 41 (under 5%): the stored gazetteer is reused; the declarations
        # of the unchanged pages are kept and the changed page's own join them
        write(root, 3, "The Quartz Relay Service (QRS) posts its totals nightly.")
        ingest([str(root)], store, config=cfg, embed=False)
        assert len(mined) == 1 and store.get_meta("graph.changed_since_refresh") == "1"
        declared = json.loads(store.get_meta("graph.declared"))
        assert ["NLE", "Northwind Ledger Engine"] in declared and ["QRS", "Quartz Relay Service"] in declared

        # a second change reaches 2 of 41 (>= 5% of 41 is 2.05: not yet); a third does
        write(root, 4, "Second change.")
        ingest([str(root)], store, config=cfg, embed=False)
        assert len(mined) == 1
        write(root, 5, "Third change.")
        ingest([str(root)], store, config=cfg, embed=False)
        assert len(mined) == 2 and store.get_meta("graph.changed_since_refresh") == "0"


def test_a_small_corpus_is_always_read_whole(tmp_path, monkeypatch):
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(3):
        write(root, i)
    mined = []
    real_mine = graphbuild.mine
    monkeypatch.setattr(graphbuild, "mine", lambda store, **kw: mined.append(1) or real_mine(store, **kw))
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=config.load(None), embed=False)
        write(root, 1, "changed")
        ingest([str(root)], store, config=config.load(None), embed=False)
    assert len(mined) == 2


def test_every_batch_of_documents_gets_its_own_graph(tmp_path, monkeypatch):
    # three batches: each document's mentions are its own, after every batch boundary too
    monkeypatch.setattr(graphbuild, "PARSE_BATCH", 2)
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(7):
        (root / f"p{i}.md").write_text(f"# Page {i}\n\nThe Quartz Relay {i} forwards events to Basin Ledger {i}.\n")
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=config.load(None), embed=False)
        docs = store.query("SELECT id, text FROM docs ORDER BY path")
        assert len(docs) == 7
        for doc_id, text in docs:
            surfaces = [r[0] for r in store.query("SELECT surface FROM mentions WHERE doc_id = ?", (doc_id,))]
            assert surfaces, f"document {doc_id} has no mentions"
            assert all(s in text for s in surfaces), (doc_id, surfaces)
