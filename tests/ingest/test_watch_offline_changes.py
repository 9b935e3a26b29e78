"""W5: changes made while nothing watched are found by the start-up reconcile; an edit
with its size and mtime restored is found by kgr verify's full re-hash, and fixed."""

from __future__ import annotations

import os
import random
import time

from harness import Live, expect_exact, figures, files_under, invariants, kb_config, tier, write_corpus

from kgr.ingest import verify
from kgr.store import Store, vectors


def test_w5_offline_changes_and_startup_reconcile(tmp_path, counters):
    n, k = tier(1000, 10000), tier(30, 300)
    root = tmp_path / "kb"
    paths = write_corpus(root, n, words=12)
    db = tmp_path / "kb.sqlite"
    cfg = kb_config()

    h = Live(root, db, cfg, debounce_ms=200)
    try:
        first = h.idle(timeout=600)
    finally:
        h.close()
    expect_exact(db, root, paths)

    # Unchanged restart: the mtime/size fast path, no parsing.
    parsed_before = counters.parsed
    started = time.monotonic()
    h = Live(root, db, cfg, debounce_ms=200)
    try:
        h.idle(timeout=600)
        unchanged_reconcile = time.monotonic() - started
    finally:
        h.close()
    assert counters.parsed == parsed_before, "an unchanged start-up parsed files"
    assert unchanged_reconcile <= 60

    # Offline: add, modify, delete and rename k each; one edit hides behind its old size and mtime.
    rng = random.Random(5)
    pool = paths[:]
    rng.shuffle(pool)
    modify, delete, rename, hidden = pool[:k], pool[k : 2 * k], pool[2 * k : 3 * k], pool[3 * k]
    for rel in modify:
        with open(root / rel, "a", encoding="utf-8") as fh:
            fh.write("An offline edit added this sentence.\n")
    for rel in delete:
        os.unlink(root / rel)
    for rel in rename:
        os.rename(root / rel, root / rel.replace(".md", "-renamed.md"))
    for i in range(k):
        p = root / "added" / f"new{i:04d}.md"
        p.parent.mkdir(exist_ok=True)
        p.write_text(
            f"# Added {i}\n\nA page written while the watcher was stopped, token tokadded{i}x.\n", encoding="utf-8"
        )
    st = os.stat(root / hidden)
    text = (root / hidden).read_text(encoding="utf-8")
    swapped = text.replace("Unique token", "Uniqua token")
    assert len(swapped) == len(text) and swapped != text
    (root / hidden).write_text(swapped, encoding="utf-8")
    os.utime(root / hidden, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r: the same size and mtime

    embedded_before, parsed_before = counters.embedded_texts, counters.parsed
    started = time.monotonic()
    h = Live(root, db, cfg, debounce_ms=200)
    try:
        h.idle(timeout=600)
        changed_reconcile = time.monotonic() - started
        now = files_under(root)
        # I1 holds for everything except the file whose edit hid behind its old stat.
        changed = [*modify, *(f"added/new{i:04d}.md" for i in range(k))]
        with Store(db, readonly=True) as store:
            report = verify.check(store, root)
            sentences = sum(
                len(vectors.sentence_texts(title, text))
                for title, text in store.query(
                    "SELECT d.title, c.text FROM chunks c JOIN docs d ON d.id = c.doc_id "
                    f"WHERE d.path IN ({','.join('?' * len(changed))})",
                    changed,
                )
            )
        assert report["missing"] == [] and report["extra"] == []
        assert report["stale"] == [hidden], report["stale"]
        assert report["index"]["ok"] and report["storage"]["ok"]
        # Renames were moves: only added and modified pages were embedded (a chunk text and the
        # chunk's sentences each) and parsed.
        new_texts = counters.embedded_texts - embedded_before
        assert sentences >= 2 * k
        assert new_texts == 2 * k + sentences, f"{new_texts} texts embedded for {k} added and {k} modified pages"
        assert counters.parsed - parsed_before == 2 * k
        assert h.watcher.stats.moved == k and h.watcher.stats.pruned == k

        # kgr verify's fix, run by the live writer.
        fixed = h.writer.run(lambda store: verify.fix(store, root, report, config=cfg, graph=False)).result(60)
        assert fixed.ingested == 1
        h.idle()
        expect_exact(db, root, now)
        invariants(db, root)
    finally:
        h.close()
    figures(
        "W5",
        files=n,
        changes_each=k,
        first_ingest_s=first,
        unchanged_reconcile_s=unchanged_reconcile,
        changed_reconcile_s=changed_reconcile,
        embedded_texts=new_texts,
        moved=k,
        purged=k,
        stale_found_by_verify=len(report["stale"]),
        after_fix_ok=True,
    )
