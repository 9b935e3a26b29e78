"""ingest_docs' library side (seed 000 §11.1): tags stored per document (given ones kept across
re-ingests, front-matter ones replaced when the file changes), and ``force`` (skip_if_seen false)."""

from __future__ import annotations

from harness import kb_config

from kgr.ingest import pipeline
from kgr.store import Store


def tags_of(store, path: str) -> set[tuple[str, str]]:
    return set(
        store.query("SELECT t.tag, t.origin FROM doc_tags t JOIN docs d ON d.id = t.doc_id WHERE d.path = ?", (path,))
    )


def build(tmp_path):
    root = tmp_path / "kb"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "a.md").write_text("---\ntags: [alpha, Beta]\n---\n# A\n\nalpha words here.\n")
    (root / "notes" / "b.md").write_text("# B\n\nbeta words here.\n")
    (root / "top.md").write_text("# Top\n\nother words.\n")
    return root, Store(tmp_path / "kb.sqlite")


def test_given_tags_are_added_to_the_documents_found_and_kept(tmp_path):
    root, store = build(tmp_path)
    cfg = kb_config()
    pipeline.sync_paths(store, root, ["notes"], config=cfg, graph=False, tags=[" docs ", "kb", "DOCS", ""])
    assert tags_of(store, "notes/b.md") == {("docs", "ingest"), ("kb", "ingest")}
    assert tags_of(store, "notes/a.md") == {("docs", "ingest"), ("kb", "ingest"), ("alpha", "meta"), ("Beta", "meta")}
    pipeline.sync_paths(store, root, ["top.md"], config=cfg, graph=False)
    assert tags_of(store, "top.md") == set(), "only the documents the call names are tagged"
    # a second ingest adds, and an ingest without tags keeps them
    pipeline.sync_paths(store, root, ["notes/b.md"], config=cfg, graph=False, tags=["more"])
    assert ("more", "ingest") in tags_of(store, "notes/b.md") and ("docs", "ingest") in tags_of(store, "notes/b.md")
    # the front matter changes: its tags follow, the given ones stay
    (root / "notes" / "a.md").write_text("---\ntags: [gamma]\n---\n# A\n\nalpha words, changed.\n")
    pipeline.sync_paths(store, root, ["notes/a.md"], config=cfg, graph=False)
    assert tags_of(store, "notes/a.md") == {("docs", "ingest"), ("kb", "ingest"), ("gamma", "meta")}
    # a deleted document takes its tags with it
    (root / "notes" / "b.md").unlink()
    pipeline.sync_paths(store, root, ["notes"], config=cfg, graph=False)
    assert store.scalar("SELECT count(*) FROM doc_tags t LEFT JOIN docs d ON d.id = t.doc_id WHERE d.id IS NULL") == 0


def test_force_parses_unchanged_files_again(tmp_path):
    root, store = build(tmp_path)
    cfg = kb_config()
    first = pipeline.sync_paths(store, root, None, config=cfg, graph=False)
    assert first.ingested == 3
    again = pipeline.sync_paths(store, root, ["notes"], config=cfg, graph=False)
    assert (again.ingested, again.unchanged) == (0, 2)
    forced = pipeline.sync_paths(store, root, ["notes"], config=cfg, graph=False, force=True)
    assert (forced.ingested, forced.unchanged) == (2, 0)
    # what was forgotten is stored again: the next plain ingest skips them once more
    after = pipeline.sync_paths(store, root, None, config=cfg, graph=False)
    assert (after.ingested, after.unchanged) == (0, 3)
    assert store.scalar("SELECT count(*) FROM docs WHERE file_hash IS NULL OR mtime_ms IS NULL") == 0


def test_the_migration_backfills_front_matter_tags(tmp_path):
    from kgr.store import migrations

    root, store = build(tmp_path)
    pipeline.sync_paths(store, root, None, config=kb_config(), graph=False)
    assert "m008_doc_tags" in [name for name, _ in migrations.MIGRATIONS]
    with store.write() as conn:  # the database as it was before m008, then m008 on it
        conn.execute("DROP TABLE doc_tags")
        conn.execute(migrations.M008_DOC_TAGS)
    assert tags_of(store, "notes/a.md") == {("alpha", "meta"), ("Beta", "meta")}
    assert store.scalar("SELECT count(*) FROM doc_tags") == 2
