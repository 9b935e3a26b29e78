"""W2: a burst (a tarball extracted, then every file touched three times) becomes a scan."""

from __future__ import annotations

import logging
import os
import resource
import tarfile
import time

from harness import expect_exact, figures, invariants, tier, write_corpus


def test_w2_burst_turns_into_a_directory_scan(tmp_path, live, counters, caplog):
    n = tier(1000, 5000)
    source = tmp_path / "src"
    paths = write_corpus(source, n, words=20)
    tarball = tmp_path / "corpus.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(source, arcname=".")
    root = tmp_path / "kb"
    root.mkdir()
    db = tmp_path / "kb.sqlite"
    caplog.set_level(logging.INFO, logger="kgr.watch")
    h = live(root, db, embed=False, debounce_ms=300)
    h.idle()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    started = time.monotonic()
    with tarfile.open(tarball) as tar:
        tar.extractall(root, filter="data")
    extracted = time.monotonic() - started
    for _ in range(3):  # touch every file three times within about a second
        now = time.time()
        for rel in paths:
            os.utime(root / rel, (now, now))
    touched = time.monotonic() - started
    idle_after = h.idle(timeout=120)
    total = time.monotonic() - started

    expect_exact(db, root, paths)
    invariants(db, root)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stats = h.watcher.stats
    scans_logged = [r.getMessage() for r in caplog.records if "burst of" in r.getMessage()]
    assert stats.bursts >= 1 and scans_logged, "the burst was not turned into a scan"
    assert counters.parsed <= 1.05 * n, f"{counters.parsed} parses for {n} files"
    assert max(counters.parses.values()) <= 2
    assert total <= 120
    assert peak_rss_mb <= 500  # the whole test process: watcher, writer and pytest
    figures("W2", files=n, extract_s=extracted, touch_done_s=touched, idle_after_s=total, parses=counters.parsed,
            parse_ratio=counters.parsed / n, bursts=stats.bursts, scans=stats.scans, batches=stats.batches,
            peak_rss_mb=peak_rss_mb, rss_before_mb=rss_before / 1024, log_line=scans_logged[0])
