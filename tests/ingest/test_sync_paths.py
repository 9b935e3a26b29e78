"""pipeline.sync_paths and move_doc, the library under the watcher (no events involved)."""

from __future__ import annotations

import os
import shutil

from harness import expect_exact, kb_config

from kgr.ingest import pipeline
from kgr.store import Store


def build(tmp_path, files: dict[str, str]):
    root = tmp_path / "kb"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    store = Store(tmp_path / "kb.sqlite")
    pipeline.sync_paths(store, root, None, config=kb_config(), graph=False)
    return root, store


def snapshot(store):
    return store.query(
        "SELECT d.path, d.title, d.meta, c.id, c.prelude, v.hash FROM docs d JOIN chunks c ON c.doc_id = d.id "
        "LEFT JOIN vec_src v ON v.kind = 'chunk' AND v.id = c.id ORDER BY c.id"
    )


def test_a_move_keeps_chunks_and_vectors_and_follows_the_new_path(tmp_path):
    root, store = build(tmp_path, {"notes/plain.md": "No heading here, just a sentence.\n\nMore words.\n"})
    (before,) = snapshot(store)
    os.makedirs(root / "archive/2024")
    os.rename(root / "notes/plain.md", root / "archive/2024/renamed.md")
    s = pipeline.sync_paths(store, root, ["notes/plain.md", "archive/2024/renamed.md"], config=kb_config(), graph=False)
    assert (s.moved, s.ingested, s.pruned, s.embedded) == (1, 0, 0, 0)
    (after,) = snapshot(store)
    path, title, meta, cid, prelude, vhash = after
    assert path == "archive/2024/renamed.md" and title == "renamed"  # the title came from the file name
    assert '"breadcrumbs":["archive","2024"]' in meta
    assert cid == before[3] and vhash == before[5]  # same chunk row, same vector
    assert prelude.startswith("archive/2024/renamed.md") and not prelude.startswith("notes")
    assert store.scalar("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'renamed'") == 1
    expect_exact(store.path, root, ["archive/2024/renamed.md"])


def test_a_copy_or_a_format_change_is_not_a_move(tmp_path):
    root, store = build(tmp_path, {"a.md": "# A\n\nalpha words\n"})
    shutil.copy(root / "a.md", root / "b.md")  # a copy: a.md is still there
    s = pipeline.sync_paths(store, root, ["b.md"], config=kb_config(), graph=False)
    assert s.moved == 0 and s.ingested == 1
    os.rename(root / "b.md", root / "b.txt")  # same bytes, another format: parsed again
    s = pipeline.sync_paths(store, root, ["b.md", "b.txt"], config=kb_config(), graph=False)
    assert s.moved == 0 and s.ingested == 1 and s.pruned == 1
    expect_exact(store.path, root, ["a.md", "b.txt"])


def test_the_two_sides_of_a_move_in_different_batches(tmp_path):
    root, store = build(tmp_path, {"a.md": "# A\n\nalpha words\n"})
    (before,) = snapshot(store)
    os.rename(root / "a.md", root / "z.md")
    s = pipeline.sync_paths(store, root, ["z.md"], config=kb_config(), graph=False)  # the new side first
    assert s.moved == 1
    s = pipeline.sync_paths(store, root, ["a.md"], config=kb_config(), graph=False)  # then the old one
    assert (s.moved, s.pruned, s.ingested) == (0, 0, 0)
    (after,) = snapshot(store)
    assert after[0] == "z.md" and after[3] == before[3]


def test_gone_ignored_and_outside_paths(tmp_path):
    root, store = build(tmp_path, {"a.md": "# A\n\nalpha\n", "drafts/b.md": "# B\n\nbeta\n", "c.md": "# C\n\ngamma\n"})
    (root / ".kgrignore").write_text("drafts/\n")
    os.unlink(root / "c.md")
    s = pipeline.sync_paths(
        store, root, ["drafts/b.md", "c.md", str(tmp_path / "elsewhere.md"), "../x.md"], config=kb_config(), graph=False
    )
    assert s.pruned == 2  # ignored now, and gone
    expect_exact(store.path, root, ["a.md"])


def test_a_symlink_inside_the_root_is_stored_under_its_own_name_as_the_walk_does(tmp_path):
    root, store = build(tmp_path, {"a.md": "# A\n\nalpha\n"})
    os.symlink(root / "a.md", root / "link.md")
    s = pipeline.sync_paths(store, root, ["link.md"], config=kb_config(), graph=False)
    assert s.ingested == 1
    assert sorted(p for (p,) in store.query("SELECT path FROM docs")) == ["a.md", "link.md"]
    s = pipeline.sync_paths(store, root, None, config=kb_config(), graph=False)  # the full walk agrees
    assert (s.ingested, s.pruned, s.unchanged) == (0, 0, 2)
