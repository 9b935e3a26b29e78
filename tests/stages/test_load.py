from kgr.stages.load import load, prune_missing
from kgr.store import Store


def doc(path, text, **kw):
    from kgr.records import text_hash

    return {
        "kind": "doc",
        "path": path,
        "text": text,
        "hash": text_hash(text),
        "title": path,
        "mtime_ms": 1,
        "size": len(text),
        **kw,
    }


def chunks(path, *texts):
    return [
        {"kind": "chunk", "doc": path, "ord": i, "text": t, "prelude": path, "start": 0, "end": len(t)}
        for i, t in enumerate(texts)
    ]


def snapshot(s):
    return (
        s.query("SELECT path, hash, status, title FROM docs ORDER BY path"),
        s.query("SELECT d.path, c.ord, c.text FROM chunks c JOIN docs d ON d.id=c.doc_id ORDER BY 1, 2"),
        s.query("SELECT rowid, text FROM chunks_fts ORDER BY rowid"),
    )


def test_load_is_idempotent(db):
    recs = [doc("a.md", "one two"), *chunks("a.md", "one", "two"), doc("b.md", "three"), *chunks("b.md", "three")]
    with Store(db) as s:
        first = load(recs, s)
        assert (first.written, first.chunks, first.unchanged) == (2, 3, 0)
        before = snapshot(s)
        changes_before = s.scalar("SELECT total_changes()")
        again = load(recs, s)
        assert (again.written, again.unchanged) == (0, 2)
        assert snapshot(s) == before
        assert s.scalar("SELECT total_changes()") == changes_before  # nothing written at all


def test_changed_document_replaces_exactly_its_rows(db):
    with Store(db) as s:
        load([doc("a.md", "one"), *chunks("a.md", "one"), doc("b.md", "keep"), *chunks("b.md", "keep")], s)
        b_rows = s.query("SELECT c.id, c.text FROM chunks c JOIN docs d ON d.id=c.doc_id WHERE d.path='b.md'")
        summary = load([doc("a.md", "uno dos"), *chunks("a.md", "uno", "dos")], s)
        assert summary.written == 1
        assert s.query("SELECT c.text FROM chunks c JOIN docs d ON d.id=c.doc_id WHERE d.path='a.md' ORDER BY ord") == [
            ("uno",),
            ("dos",),
        ]
        assert s.query("SELECT c.id, c.text FROM chunks c JOIN docs d ON d.id=c.doc_id WHERE d.path='b.md'") == b_rows
        assert s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'one'") == []
        assert len(s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'dos'")) == 1


def test_same_text_but_new_chunking_is_rewritten(db):
    with Store(db) as s:
        load([doc("a.md", "one two"), *chunks("a.md", "one two")], s)
        assert load([doc("a.md", "one two"), *chunks("a.md", "one", "two")], s).written == 1
        assert s.scalar("SELECT count(*) FROM chunks") == 2


def test_touched_file_updates_only_its_stat(db):
    with Store(db) as s:
        load([doc("a.md", "x"), *chunks("a.md", "x")], s)
        load([doc("a.md", "x", mtime_ms=99), *chunks("a.md", "x")], s)
        assert s.scalar("SELECT mtime_ms FROM docs") == 99


def test_failed_file_is_remembered_and_stored_content_is_kept(db):
    err = {
        "kind": "error",
        "stage": "normalize",
        "path": "a.pdf",
        "message": "cannot parse",
        "reason": "malformed",
        "size": 10,
        "mtime_ms": 5,
        "file_hash": "f",
    }
    with Store(db) as s:
        summary = load([err], s)
        assert summary.failed == 1 and summary.errors == 1
        assert s.query("SELECT path, status, size, error FROM docs") == [
            ("a.pdf", "failed", 10, "malformed: cannot parse")
        ]
        assert "a.pdf" in s.get_meta("last_error")
        # a good file that later fails keeps its content
        load([doc("b.md", "good"), *chunks("b.md", "good")], s)
        load([{**err, "path": "b.md", "mtime_ms": 7}], s)
        assert s.query("SELECT status, text, mtime_ms FROM docs WHERE path='b.md'") == [("ok", "good", 1)]
        assert s.scalar("SELECT count(*) FROM chunks") == 1


def test_errors_without_a_file_are_counted_not_stored(db):
    with Store(db) as s:
        summary = load(
            [
                {"kind": "error", "stage": "input", "message": "line 3: bad", "line": 3},
                {
                    "kind": "error",
                    "stage": "normalize",
                    "path": "gone.md",
                    "message": "not found",
                    "reason": "not_found",
                },
            ],
            s,
        )
        assert summary.errors == 2 and summary.failed == 0
        assert s.scalar("SELECT count(*) FROM docs") == 0


def test_chunk_without_its_doc_is_an_error_not_a_crash(db):
    with Store(db) as s:
        summary = load([*chunks("a.md", "x")], s)
        assert summary.orphans == 1
        assert s.scalar("SELECT count(*) FROM chunks") == 0


def test_prune_purges_documents_whose_files_are_gone(db, tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("a")
    with Store(db) as s:
        load([doc("a.md", "a"), *chunks("a.md", "a"), doc("b.md", "b"), *chunks("b.md", "b")], s)
        assert prune_missing(s, root) == 1
        assert s.query("SELECT path FROM docs") == [("a.md",)]
        assert s.scalar("SELECT count(*) FROM chunks") == 1
        assert s.query("SELECT kind, path FROM events WHERE kind='delete'") == [("delete", "b.md")]
