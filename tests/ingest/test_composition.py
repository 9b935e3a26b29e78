"""`kgr ingest` is made of the functions behind the filters: the same stages, chained in one process."""

from __future__ import annotations

from pathlib import Path

# the pipe-vs-ingest helpers of the corpus test (same folder, on sys.path under pytest)
from test_ingest_corpora import db_content, run_kgr

from kgr import config, records
from kgr.ingest import graphbuild
from kgr.ingest.pipeline import ingest, move_doc
from kgr.stages import chunk as chunking
from kgr.stages import extract as extracting
from kgr.stages import link as linking
from kgr.stages import load as loading
from kgr.stages import normalize as norm
from kgr.store import Store

PAGES = {
    "ois.md": "# Order Intake Service\n\nThe Order Intake Service (OIS) uses the Payments Platform.\n",
    "pay.md": "# Payments Platform\n\nThe Payments Platform depends on Kafka. OIS calls it for every order.\n",
    "empty.md": "# Notes\n\nnothing much here at all.\n",
}


def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    for name, text in PAGES.items():
        (root / name).write_text(text)
    return root


def test_ingest_runs_the_filter_functions_of_every_stage(tmp_path, monkeypatch):
    calls: dict[str, int] = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    spy(norm, "normalize_files")
    spy(chunking, "chunk")
    spy(loading, "load")
    spy(extracting, "extract")
    spy(linking, "link")
    # pipeline imported load() by name when it was first imported: watch it there too
    from kgr.ingest import pipeline

    monkeypatch.setattr(pipeline, "load", loading.load)
    root = corpus(tmp_path)
    with Store(tmp_path / "kb.sqlite") as store:
        summary = ingest([str(root)], store, config=config.load(None), embed=False)
        assert summary.ingested == 3 and summary.extracted == 3
        assert store.scalar("SELECT count(*) FROM docs WHERE graph_sig IS NULL") == 0
        assert store.scalar("SELECT count(*) FROM entities") > 0
    # one stream through normalize, chunk and load; the documents through extract, each through link
    # (extract once for the batch of three, whose relations it decides together)
    assert calls == {"normalize_files": 1, "chunk": 1, "load": 1, "extract": 1, "link": 3}


def test_graph_records_are_extract_then_link(tmp_path):
    """What the graph pass gives a stored document is what `kgr extract | kgr link` gives
    its records with the same extractor and linker."""
    root = corpus(tmp_path)
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=config.load(None), graph=False, embed=False)
        rows = store.query("SELECT id, path, title, text, hash FROM docs ORDER BY path")
        recs = [rec for row in rows for rec in graphbuild.stored_records(store, *row)]
    extractor = extracting.extractor_from_config(config.load(None))
    by_pipe = list(linking.link(extracting.extract(recs, extractor=extractor), linker=linking.Linker()))
    docs = [r for r in recs if r["kind"] == records.DOC]
    parsed, failed = extracting.parse_batch(extractor, docs)
    assert not failed and set(parsed) == set(PAGES)
    composed = list(graphbuild.graph_records(recs, extractor, linking.Linker(), parsed=parsed))
    assert composed == by_pipe
    assert any(r["kind"] == records.MENTION and r.get("entity") for r in composed)


def test_the_pipe_and_ingest_store_the_same_documents(examples, tmp_path):
    a, b = tmp_path / "ingest.sqlite", tmp_path / "pipe.sqlite"
    with Store(a) as store:
        ingest([str(examples)], store, config=config.load(None), graph=False, embed=False)
    normalized = run_kgr("normalize", str(examples))
    assert normalized.returncode == 0, normalized.stderr
    chunked = run_kgr("chunk", stdin=normalized.stdout)
    assert chunked.returncode == 0, chunked.stderr
    loaded = run_kgr("load", "--db", str(b), stdin=chunked.stdout)
    assert loaded.returncode == 0, loaded.stderr
    left, right = db_content(a), db_content(b)
    assert left["docs"] and left == right


def test_file_hash_is_the_stored_file_hash(tmp_path):
    root = corpus(tmp_path)
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=config.load(None), graph=False, embed=False)
        stored = dict(store.query("SELECT path, file_hash FROM docs"))
    assert stored == {name: norm.file_hash(root / name) for name in PAGES}


def test_a_moved_document_keeps_its_chunks_with_the_new_path_in_their_preludes(tmp_path):
    root = corpus(tmp_path)
    with Store(tmp_path / "kb.sqlite") as store:
        ingest([str(root)], store, config=config.load(None), graph=False, embed=False)
        before = store.query(
            "SELECT c.id, c.prelude FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.path='ois.md'"
        )
        assert move_doc(store, "ois.md", "services/intake.md")
        after = store.query(
            "SELECT c.id, c.prelude FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.path='services/intake.md'"
        )
    assert [cid for cid, _ in after] == [cid for cid, _ in before]
    for (_, old), (_, new) in zip(before, after):
        assert old.startswith("ois.md") and new == "services/intake.md" + old[len("ois.md") :]


def test_moved_prelude():
    assert chunking.moved_prelude("a/b.md • Intro", "a/b.md", "c/d.md") == "c/d.md • Intro"
    assert chunking.moved_prelude("a/b.md", "a/b.md", "c/d.md") == "c/d.md"
    assert chunking.moved_prelude("a/b.mdx • Intro", "a/b.md", "c/d.md") is None
    assert chunking.moved_prelude(None, "a/b.md", "c/d.md") is None


def test_ignored_path_applies_discovery_rules_to_every_part():
    assert norm.ignored_path(".git/config.md", [])
    assert norm.ignored_path("notes/.draft.md", [])
    assert norm.ignored_path("drafts/x.md", ["drafts/"])
    assert not norm.ignored_path("notes/x.md", ["drafts/"])


def test_a_text_that_spoils_the_shared_spacy_stream_fails_alone(tmp_path, monkeypatch):
    """parse_batch runs spaCy over a batch of documents at once; when that stream fails, each
    document is parsed alone, and only the one that fails by itself is marked failed."""
    marker = "SPOILS-THE-STREAM"
    real_pipe = extracting.Extractor.pipe

    def pipe(self, texts):
        if any(marker in t for t in texts):
            raise ValueError("spaCy gave up")
        return real_pipe(self, texts)

    monkeypatch.setattr(extracting.Extractor, "pipe", pipe)
    root = corpus(tmp_path)
    (root / "bad.md").write_text(f"# Bad\n\nThe Ledger Store is owned by Treasury Team. {marker}\n")
    errors: list[dict] = []
    with Store(tmp_path / "kb.sqlite") as store:
        s = ingest([str(root)], store, config=config.load(None), embed=False, on_error=errors.append)
        assert (s.ingested, s.extracted, s.extract_failed) == (4, 3, 1)
        assert [(e["stage"], e["path"]) for e in errors] == [("extract", "bad.md")]
        assert "spaCy gave up" in errors[0]["message"]
        assert dict(store.query("SELECT path, graph_sig = 'failed' FROM docs")) == {
            "bad.md": 1,
            "empty.md": 0,
            "ois.md": 0,
            "pay.md": 0,
        }
        assert store.scalar("SELECT count(*) FROM mentions m JOIN docs d ON d.id = m.doc_id WHERE d.path='ois.md'") > 0
