"""Issue 14, item 7: `kgr watch DIR --db new.sqlite & kgr status --db new.sqlite --wait-idle`
waits for the watcher to create the database (and go idle) instead of failing at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import orjson

ENV = {**os.environ, "KGR_EMBED_STUB": "1", "KGR_REDACT_KEY": "test-key"}


def kgr_popen(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "kgr", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def test_status_wait_idle_waits_for_the_watcher_to_create_the_database(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha, the first page.\n")
    (root / "b.md").write_text("# B\n\nbeta, the second page.\n")
    db = tmp_path / "new.sqlite"
    status = kgr_popen("status", "--db", db, "--wait-idle", "--timeout", "120", "--json")
    watcher = None
    try:
        time.sleep(2)  # the watcher starts after the status: the database is not there yet
        assert status.poll() is None, status.communicate()
        assert not db.exists()
        watcher = kgr_popen("watch", root, "--db", db, "--no-graph", "--no-embed", "--debounce-ms", "100")
        out, err = status.communicate(timeout=150)
        assert status.returncode == 0, err
        info = orjson.loads(out.splitlines()[0])
        assert info["counts"]["docs"] == 2  # waited for the watcher's first reconcile, not just the file
        assert info["writer"]["alive"] and info["writer"]["pid"] == watcher.pid and not info["writer"]["busy"]
    finally:
        if status.poll() is None:
            status.kill()
        if watcher is not None:
            watcher.send_signal(signal.SIGTERM)
            watcher.communicate(timeout=60)


def test_status_wait_idle_gives_up_on_a_database_that_never_appears(tmp_path):
    db = tmp_path / "never.sqlite"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "status", "--db", str(db), "--wait-idle", "--timeout", "1.5"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    waited = time.monotonic() - started
    assert proc.returncode == 1
    assert waited >= 1.5
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"Error: {db} still does not exist after 1.5s", proc.stderr
    assert len(lines) == 2 and lines[1].startswith("Hint: ") and "kgr watch" in lines[1]
    assert proc.stdout == ""
