"""W2: a burst (a tarball extracted, then every file touched three times) becomes a scan."""

from __future__ import annotations

import logging
import os
import tarfile
import threading
import time

from harness import expect_exact, figures, invariants, tier, write_corpus


def _rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


class _PeakRss:
    """The highest resident set size seen while the block runs (sampled every 20 ms): what the
    burst adds is peak minus the size on entry, whatever earlier tests left loaded in this process."""

    def __enter__(self):
        self.before = self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss_mb())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


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
    # a debounce long enough that the extracted paths pile up even when a loaded machine
    # extracts slowly (at 300 ms the dispatcher drained them as they came: no burst, a flake)
    h = live(root, db, embed=False, debounce_ms=2000)
    h.idle()
    with _PeakRss() as rss:
        started = time.monotonic()
        with tarfile.open(tarball) as tar:
            tar.extractall(root, filter="data")
        extracted = time.monotonic() - started
        for _ in range(3):  # touch every file three times within about a second
            now = time.time()
            for rel in paths:
                os.utime(root / rel, (now, now))
        touched = time.monotonic() - started
        h.idle(timeout=120)
        total = time.monotonic() - started

    expect_exact(db, root, paths)
    invariants(db, root)
    growth_mb = rss.peak - rss.before
    stats = h.watcher.stats
    scans_logged = [r.getMessage() for r in caplog.records if "burst of" in r.getMessage()]
    assert stats.bursts >= 1 and scans_logged, "the burst was not turned into a scan"
    assert counters.parsed <= 1.05 * n, f"{counters.parsed} parses for {n} files"
    assert max(counters.parses.values()) <= 2
    assert total <= 120
    assert growth_mb <= 500, f"the burst grew the process by {growth_mb:.0f} MB"  # watcher, writer, parsers' results
    figures(
        "W2",
        files=n,
        extract_s=extracted,
        touch_done_s=touched,
        idle_after_s=total,
        parses=counters.parsed,
        parse_ratio=counters.parsed / n,
        bursts=stats.bursts,
        scans=stats.scans,
        batches=stats.batches,
        rss_growth_mb=growth_mb,
        peak_rss_mb=rss.peak,
        rss_before_mb=rss.before,
        log_line=scans_logged[0],
    )
