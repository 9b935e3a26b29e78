"""Seed 000 section 18: "Run PRAGMA incremental_vacuum occasionally if churn is high": purging a
folder's documents gives their pages back to the file system (a new database is made with
auto_vacuum=INCREMENTAL), measured by the free-page count and the file's page count."""

from __future__ import annotations

import random
import shutil

from harness import kb_config

from kgr.ingest import pipeline
from kgr.store import Store

WORDS = "alpha beta gamma delta harbour pump station feeds records policy retention archive lifecycle".split()


def test_purging_many_documents_gives_their_pages_back(tmp_path):
    rng = random.Random(7)
    root = tmp_path / "kb"
    (root / "bulk").mkdir(parents=True)
    for i in range(30):
        paras = [f"# Page {i}\n"] + [" ".join(rng.choice(WORDS) for _ in range(80)) + "." for _ in range(30)]
        (root / "bulk" / f"p{i}.md").write_text("\n\n".join(paras))
    (root / "keep.md").write_text("# Keep\n\nThis page stays.\n")
    with Store(tmp_path / "kb.sqlite") as store:
        store.vacuum_min_pages = 64  # this corpus is small: the default waits for 4 MiB of free pages
        pipeline.sync_paths(store, root, None, config=kb_config(), graph=False, embed=False)
        full = store.storage()
        assert full["freelist_count"] < store.vacuum_min_pages and store.scalar("SELECT count(*) FROM docs") == 31
        shutil.rmtree(root / "bulk")
        summary = pipeline.sync_paths(store, root, None, config=kb_config(), graph=False, embed=False)
        after = store.storage()
    assert summary.pruned == 30
    assert store.vacuumed_pages > full["page_count"] / 3  # given back, not left in the free list
    assert after["freelist_count"] < store.vacuum_min_pages
    assert after["page_count"] < full["page_count"] * 2 / 3
