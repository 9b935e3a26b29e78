"""Issue 14, items 1, 4 and 11: a text over spaCy's length limit, a document whose
extraction fails, extract_and_link run twice, and verify after an interrupted ingest."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kgr import config as config_mod
from kgr import records
from kgr.ingest import pipeline, verify
from kgr.retrieval import status
from kgr.stages.extract import Extractor, extract_doc
from kgr.stages.textmodel import parse_document
from kgr.store import Store

SENTENCE = "The Ledger Store is owned by Treasury Team. "


def stub_config(**overrides):
    return config_mod.load(None, overrides={"embed.stub": True, "normalize.workers": 1, **overrides})


def test_split_text_joins_back_and_cuts_at_boundaries():
    from kgr.stages.extract import split_text

    text = SENTENCE * 300 + "x" * 5000 + "\n\nA second paragraph.\nA line."
    for limit in (7, 100, 1000, 4000, len(text)):
        pieces = split_text(text, limit)
        assert "".join(pieces) == text
        assert all(0 < len(p) <= limit for p in pieces)
    # sentence ends are preferred to word breaks, paragraph breaks to sentence ends
    assert all(p.endswith(". ") for p in split_text(SENTENCE * 300, 1000)[:-1])
    assert split_text("a b. " * 30 + "\n\n" + "c d. " * 30, 200)[0].endswith("\n\n")


def test_a_block_over_spacys_max_length_is_parsed_in_pieces_with_right_offsets(nlp, monkeypatch):
    """Item 1: before, spaCy refused the block (E088) and extraction of the run ended."""
    monkeypatch.setattr(nlp, "max_length", 2_000)
    text = SENTENCE * 200 + "Lucía Ferrante approved the Harbor Depot plan in Lisbon. " + SENTENCE * 5
    assert len(text) > 4 * nlp.max_length and "\n" not in text  # one paragraph: one block
    doc = {"kind": "doc", "path": "big.md", "title": None, "text": text}
    chunks = [
        {
            "kind": "chunk",
            "doc": "big.md",
            "ord": i,
            "start": s,
            "end": min(s + 1500, len(text)),
            "text": text[s : s + 1500],
        }
        for i, s in enumerate(range(0, len(text), 1200))
    ]
    out = extract_doc(Extractor(nlp=nlp), doc, chunks)
    assert not [r for r in out if r["kind"] == records.ERROR]
    mentions = [r for r in out if r["kind"] == records.MENTION]
    by_chunk = {records.chunk_id("big.md", c["ord"]): c for c in chunks}
    for m in mentions:  # every mention points at its own words in its chunk
        assert by_chunk[m["chunk"]]["text"][m["start"] : m["end"]] == m["surface"]
    surfaces = {m["surface"] for m in mentions}
    assert {"Ledger Store", "Treasury Team", "Lucía Ferrante"} <= surfaces
    # spaCy's entities come from the last pieces too (offsets carried over the joins)
    ner = [m for m in mentions if m["source"] == "ner" or "ner" in (m["features"].get("also") or [])]
    last = max(by_chunk[m["chunk"]]["start"] + m["start"] for m in ner)
    assert last > len(text) - 1_000
    relations = [r for r in out if r["kind"] == records.RELATION]
    assert any(r["src"] == "Ledger Store" and r["dst"] == "Treasury Team" for r in relations)


def write_kb(root: Path) -> None:
    (root / "services").mkdir(parents=True)
    (root / "services" / "fare-engine.md").write_text(
        textwrap.dedent("""\
        # Fare Engine

        The Fare Engine computes fares for every trip. It is owned by the Pricing Team.
        The Fare Engine depends on the Zone Registry for zone boundaries.
        """)
    )
    (root / "notes.md").write_text("# Notes\n\nThe Harbor Depot office is run by Wren Castellano.\n")


@pytest.fixture()
def failing_extraction(monkeypatch):
    """Extraction raises for documents whose text holds the marker; counts the attempts."""
    marker = "EXTRACTION-BREAKS-HERE"
    attempts: list[str] = []
    original = Extractor.mentions

    def mentions(self, doc):
        if marker in doc.text:
            attempts.append(doc.path)
            raise ValueError("the parser ran out of memory")
        return original(self, doc)

    monkeypatch.setattr(Extractor, "mentions", mentions)
    return marker, attempts


def test_a_document_whose_extraction_fails_fails_alone_and_visibly(tmp_path, failing_extraction):
    """Item 1: before, the exception ended `kgr ingest`: no graph and no vectors for any file."""
    marker, attempts = failing_extraction
    root = tmp_path / "kb"
    write_kb(root)
    (root / "bad.md").write_text(f"# Bad\n\nThe Ledger Store is owned by Treasury Team. {marker}\n")
    errors: list[dict] = []
    with Store(tmp_path / "kb.sqlite") as store:
        s = pipeline.ingest([str(root)], store, config=stub_config(), on_error=errors.append)
        assert (s.ingested, s.extracted, s.extract_failed) == (3, 2, 1)
        assert "1 not graphed (extraction failed)" in s.line()
        assert [(e["stage"], e["path"]) for e in errors] == [("extract", "bad.md")]
        assert "the parser ran out of memory" in errors[0]["message"]
        # the other documents have their graph, and every document its vectors
        graphed = dict(
            store.query(
                "SELECT d.path, count(m.id) FROM docs d LEFT JOIN mentions m ON m.doc_id = d.id GROUP BY d.path"
            )
        )
        assert graphed["services/fare-engine.md"] > 0 and graphed["notes.md"] > 0 and graphed["bad.md"] == 0
        assert store.scalar("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT rowid FROM chunk_vec)") == 0
        info = status.status(store)
        assert info["last_error"].startswith("bad.md: extract: cannot extract: ") and marker not in info["last_error"]
        assert info["graph"] == {"pending": 0, "failed": 1}
        report = verify.check(store, root)
        assert report["extract_failed"] == [{"path": "bad.md", "error": "extract: " + errors[0]["message"]}]
        assert report["incomplete"] == [] and report["ok"] is False
        # not tried again while its text is the same ...
        again = pipeline.ingest([str(root)], store, config=stub_config())
        assert again.extract_failed == 0 and attempts == ["bad.md"]
        # ... and tried again, alone, once it changes
        (root / "bad.md").write_text("# Bad\n\nThe Ledger Store is owned by Treasury Team now.\n")
        fixed = pipeline.ingest([str(root)], store, config=stub_config())
        assert (fixed.ingested, fixed.extracted, fixed.extract_failed) == (1, 1, 0)
        assert status.status(store)["graph"] == {"pending": 0, "failed": 0}
        assert store.scalar("SELECT error FROM docs WHERE path='bad.md'") is None
        assert verify.check(store, root)["ok"] is True


def test_the_watcher_does_not_retry_a_failed_extraction_forever(tmp_path, failing_extraction):
    """Item 1: under `kgr watch`, a failing document made every update fail and a scan retry
    it, forever, while the writer said idle with no last error."""
    from kgr.ingest.writer import Writer

    marker, attempts = failing_extraction
    root = tmp_path / "kb"
    write_kb(root)
    (root / "bad.md").write_text(f"# Bad\n\n{marker} The Ledger Store is owned by Treasury Team.\n")
    with Writer(tmp_path / "kb.sqlite", root=root, config=stub_config()) as writer:
        first = writer.ingest(None).result(120)
        assert (first.extracted, first.extract_failed) == (2, 1)
        assert "bad.md" in writer.status()["last_error"]
        (root / "notes.md").write_text("# Notes\n\nThe Harbor Depot office is run by Tobias Greer.\n")
        for paths in (["notes.md"], ["bad.md"], None):  # events and scans: the failed one is not redone
            writer.ingest(paths).result(120)
        assert attempts == ["bad.md"]
        mentions = writer.run(
            lambda st: st.scalar("SELECT count(*) FROM mentions WHERE surface='Tobias Greer'")
        ).result(30)
        assert mentions == 1


def test_verify_reports_documents_left_without_graph_or_vectors(tmp_path):
    """Item 11: an ingest interrupted after loading (0 entities, 0 vectors) looked consistent."""
    root = tmp_path / "kb"
    write_kb(root)
    db = tmp_path / "kb.sqlite"
    with Store(db) as store:
        pipeline.ingest([str(root)], store, config=stub_config(), graph=False, embed=False)  # stopped before the graph
        assert store.scalar("SELECT count(*) FROM entities") == 0
        report = verify.check(store, root)
        assert report["ok"] is False
        assert report["incomplete"] == [
            {"path": "notes.md", "missing": ["graph", "vectors"]},
            {"path": "services/fare-engine.md", "missing": ["graph", "vectors"]},
        ]
        assert verify.check(store, root, graph=False, embed=False)["ok"] is True  # as ingested: nothing expected
        summary = verify.fix(store, root, report, config=stub_config())
        assert summary.extracted == 2 and summary.embedded > 0
        after = verify.check(store, root)
        assert after["ok"] is True and after["incomplete"] == []
        assert store.scalar("SELECT count(*) FROM entities") > 0


def test_verify_cli_lists_incomplete_documents_and_fix_completes_them(tmp_path):
    from click.testing import CliRunner

    from kgr.cli import cli

    root = tmp_path / "kb"
    write_kb(root)
    db = tmp_path / "kb.sqlite"
    cfg = tmp_path / "config.yaml"
    cfg.write_text("embed:\n  stub: true\nnormalize:\n  workers: 1\n")
    runner = CliRunner()
    r = runner.invoke(cli, ["ingest", str(root), "--db", str(db), "--config", str(cfg), "--no-graph", "--no-embed"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["verify", str(root), "--db", str(db), "--config", str(cfg)])
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        "incomplete\tnotes.md\tno graph and no vectors",
        "incomplete\tservices/fare-engine.md\tno graph and no vectors",
    ]
    assert "0 missing, 0 extra, 0 stale, 2 incomplete, 0 failed extraction" in r.stderr
    assert "--fix` builds the missing graphs" in r.stderr
    r = runner.invoke(cli, ["verify", str(root), "--db", str(db), "--config", str(cfg), "--fix"])
    assert r.exit_code == 0, r.output
    assert "2 graphed" in r.stderr
    r = runner.invoke(cli, ["verify", str(root), "--db", str(db), "--config", str(cfg)])
    assert r.exit_code == 0 and "consistent" in r.stderr


@pytest.mark.slow
def test_ingest_of_a_text_over_one_million_characters(tmp_path):
    """Item 1's repro, for real: 1.1 M characters in one paragraph beside an ordinary file."""
    import time

    root = tmp_path / "big"
    root.mkdir()
    (root / "b.txt").write_text(SENTENCE * 25000)
    (root / "notes.md").write_text("# Notes\n\nThe Harbor Depot office is run by Wren Castellano.\n")
    errors: list[dict] = []
    started = time.perf_counter()
    with Store(tmp_path / "big.sqlite") as store:
        s = pipeline.ingest([str(root)], store, config=stub_config(), on_error=errors.append)
        assert errors == [] and (s.extracted, s.extract_failed) == (2, 0)
        assert (
            store.scalar("SELECT count(*) FROM mentions m JOIN docs d ON d.id = m.doc_id WHERE d.path='b.txt'") >= 50000
        )
        assert store.scalar("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT rowid FROM chunk_vec)") == 0
        assert verify.check(store, root)["ok"] is True
    print(f"ingest of 1.1 M characters: {time.perf_counter() - started:.1f}s")


def entity_table(store) -> list[tuple]:
    return store.query("SELECT key, name, type, aliases, popularity FROM entities ORDER BY key")


def test_extract_and_link_twice_on_the_same_documents_changes_nothing(tmp_path):
    """Item 4: run twice on the same documents, extract_and_link reported entities_new: -1 and
    the graph lost entities (each run linked against the graph the documents had built)."""
    import shutil

    from kgr.mcp import server as serve

    root = tmp_path / "kb"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "kb", root)
    db = tmp_path / "kb.sqlite"
    cfg = stub_config()
    with Store(db) as store:
        pipeline.ingest([str(root)], store, config=cfg)
        built = entity_table(store)
        ids = [i for (i,) in store.query("SELECT id FROM docs ORDER BY id")]
        one = store.scalar("SELECT id FROM docs WHERE path='services/fare-engine.md'")
    svc = serve.Service(db, cfg, root=root)
    try:
        tools = serve.Tools(svc)
        for doc_ids in (ids, ids, [one], [one]):
            out = tools.extract_and_link(doc_ids=doc_ids)
            assert out["documents"] == len(doc_ids) and out["failed"] == []
            assert (out["entities_new"], out["entities_removed"], out["mentions"], out["relations"]) == (0, 0, 0, 0), (
                out
            )
    finally:
        svc.close()
    with Store(db) as store:
        assert entity_table(store) == built


def test_spacy_gets_long_pieces_a_few_at_a_time(nlp, monkeypatch):
    """Item 1: a batch of long pieces parsed at once took GBs (4.1 GB peak for the 1.1 M repro)."""
    monkeypatch.setattr(nlp, "max_length", 2_000)
    calls: list[list[int]] = []

    class Recording:
        max_length = nlp.max_length

        def pipe(self, texts, batch_size=64):
            texts = list(texts)
            calls.append([len(t) for t in texts])
            return nlp.pipe(texts, batch_size=batch_size)

    docs = [parse_document(SENTENCE * 100 + "\n\nShort one.\n\nAnother short one.") for _ in range(3)]
    Extractor(nlp=Recording()).parse_many(docs)
    assert sum(len(c) for c in calls) > 3 * 3 and all(sum(c) <= 2_000 or len(c) == 1 for c in calls)
    assert [len(d.parsed_blocks) for d in docs] == [3, 3, 3]
    assert all(sd.text == b.masked for d in docs for sd, b in zip(d.parsed_blocks, d.blocks))
