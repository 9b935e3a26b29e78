"""W4: folder moves and renames inside, out of and into the root; moves never re-embed."""

from __future__ import annotations

import os
import shutil

from harness import expect_exact, figures, files_under, invariants, tier, write_corpus

from kgr.store import Store


def rows(db):
    """The ids of chunks and of their vectors, by document path."""
    with Store(db, readonly=True) as store:
        chunk_ids = sorted(r[0] for r in store.query("SELECT id FROM chunks"))
        vec_ids = sorted(r[0] for r in store.query("SELECT id FROM vec_src WHERE kind='chunk'"))
        by_path = dict(
            store.query("SELECT d.path, group_concat(c.id) FROM docs d JOIN chunks c ON c.doc_id=d.id GROUP BY d.path")
        )
    return chunk_ids, vec_ids, by_path


def test_w4_directory_moves_inside_out_and_in(tmp_path, live, counters):
    n = tier(200, 200)
    root = tmp_path / "kb"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write_corpus(root, n, per_dir=n, prefix="m")  # one folder d000 of n files
    write_corpus(root / "keep", 20, prefix="k")
    db = tmp_path / "kb.sqlite"
    h = live(root, db, debounce_ms=200)
    h.idle()
    expect_exact(db, root, files_under(root))
    chunks0, vecs0, by_path0 = rows(db)
    assert len(vecs0) == len(chunks0) > 0
    embedded_at_start = counters.embedded_texts
    figs = {"files_moved": n}

    # 1. Move the folder inside the root.
    (root / "archive").mkdir()
    os.rename(root / "d000", root / "archive" / "d000")
    h.idle()
    expect_exact(db, root, files_under(root))
    invariants(db, root)
    chunks1, vecs1, by_path1 = rows(db)
    assert chunks1 == chunks0 and vecs1 == vecs0, "a move replaced chunks or vectors"
    assert by_path1["archive/d000/m00000.md"] == by_path0["d000/m00000.md"]
    assert counters.embedded_texts == embedded_at_start, "a pure move called the embedder"
    figs["move_embeds"] = counters.embedded_texts - embedded_at_start

    # 2. Rename it twice in quick succession (a -> b -> c).
    os.rename(root / "archive" / "d000", root / "archive" / "b")
    os.rename(root / "archive" / "b", root / "archive" / "c")
    h.idle()
    expect_exact(db, root, files_under(root))
    invariants(db, root)
    chunks2, vecs2, _ = rows(db)
    assert chunks2 == chunks0 and vecs2 == vecs0
    assert counters.embedded_texts == embedded_at_start, "a double rename called the embedder"
    figs["double_rename_embeds"] = counters.embedded_texts - embedded_at_start
    moved_total = h.watcher.stats.moved

    # 3. Move it out of the root: every document purged (watchdog #363: no per-file deletes).
    shutil.move(str(root / "archive" / "c"), str(outside / "c"))
    h.idle()
    expect_exact(db, root, files_under(root))
    invariants(db, root)
    with Store(db, readonly=True) as store:
        left = store.scalar("SELECT count(*) FROM docs WHERE path LIKE 'archive/%'")
    assert left == 0
    figs["moved_out_left"] = left

    # 4. Move a folder in from outside: every file added.
    write_corpus(outside / "new", 30, prefix="n", per_dir=30)
    shutil.move(str(outside / "new"), str(root / "incoming"))
    h.idle()
    expect_exact(db, root, files_under(root))
    invariants(db, root)
    with Store(db, readonly=True) as store:
        added = store.scalar("SELECT count(*) FROM docs WHERE path LIKE 'incoming/%'")
    assert added == 30

    figs.update(moved_out_purged=n, moved_in_added=added, moves_recorded=moved_total, docs_final=len(files_under(root)))
    figures("W4", **figs)
    assert moved_total >= 2 * n, f"only {moved_total} documents were moved"


def test_w4_rename_of_one_file_keeps_rows_and_follows_the_name(tmp_path, live, counters):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "draft.md").write_text("Just some words without a heading at all\n\nand a body.\n", encoding="utf-8")
    db = tmp_path / "kb.sqlite"
    h = live(root, db, debounce_ms=150)
    h.idle()
    chunks0, vecs0, _ = rows(db)
    with Store(db, readonly=True) as store:
        (prelude0,) = store.query("SELECT prelude FROM chunks")[0]
    before = counters.embedded_texts
    os.rename(root / "draft.md", root / "final.md")
    h.idle()
    chunks1, vecs1, by_path = rows(db)
    assert list(by_path) == ["final.md"] and chunks1 == chunks0 and vecs1 == vecs0
    assert counters.embedded_texts == before
    with Store(db, readonly=True) as store:
        (prelude1,) = store.query("SELECT prelude FROM chunks")[0]
        hits = store.query(
            "SELECT c.id FROM chunks_fts f JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH 'final'"
        )
    assert prelude0.startswith("draft.md") and prelude1.startswith("final.md")
    assert hits, "the new name is not searchable"
    invariants(db, root)
    # A rename to another format is not a move: the document is parsed again under its new name.
    os.rename(root / "final.md", root / "final.txt")
    h.idle()
    expect_exact(db, root, ["final.txt"])
