"""The writer and the watcher: API, ignores, confinement, the command line and its signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from harness import expect_exact, kb_config, stored

from kgr.ingest.writer import Writer, WriterClosed, wait_for_idle
from kgr.store.lock import WriterBusy, writer_pid


def kgr(*args, **kwargs):
    env = {**os.environ, "KGR_EMBED_STUB": "1", **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "kgr", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=kwargs.pop("timeout", 60),
        **kwargs,
    )


def start_watch(root, db, *extra):
    env = {**os.environ, "KGR_EMBED_STUB": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kgr",
            "watch",
            str(root),
            "--db",
            str(db),
            "--no-graph",
            "--debounce-ms",
            "150",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_lock(db, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while writer_pid(db) != proc.pid:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the watcher never took the writer lock"
        time.sleep(0.05)


# -- the Writer --------------------------------------------------------------------------------


def test_a_symlink_loop_is_logged_once_however_often_the_root_is_reconciled(tmp_path, caplog):
    # the hostile-folder bench saw each loop link reported again by the periodic reconcile
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    os.symlink("y.md", root / "x.md")
    os.symlink("x.md", root / "y.md")
    db = tmp_path / "kb.sqlite"
    with caplog.at_level("WARNING", logger="kgr.writer"):
        with Writer(db, root=root, config=kb_config(), graph=False, embed=False) as w:
            for _ in range(3):
                w.ingest().result(60)
            assert "symlink loop" in w.status()["last_error"]
    loops = [r.getMessage() for r in caplog.records if "symlink loop" in r.getMessage()]
    assert len(loops) == 2 and {("x.md" in m, "y.md" in m) for m in loops} == {(True, False), (False, True)}, loops


def test_writer_runs_jobs_in_order_on_one_thread_and_survives_a_failing_job(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    db = tmp_path / "kb.sqlite"
    with Writer(db, root=root, config=kb_config(), graph=False) as w:
        threads = []
        futures = [w.run(lambda store, i=i: (i, threading.current_thread().name, threads.append(i))) for i in range(5)]
        bad = w.run(lambda store: 1 / 0)
        after = w.ingest()
        assert [f.result(10)[0] for f in futures] == list(range(5)) and threads == list(range(5))
        assert {f.result()[1] for f in futures} == {"kgr-writer"}
        with pytest.raises(ZeroDivisionError):
            bad.result(10)
        assert after.result(30).ingested == 1
        assert w.wait_idle(10)
        st = w.status()
        assert st["counts"] == {"docs": 1, "chunks": 1} and st["queue_depth"] == 0 and not st["busy"]
        assert st["pid"] == os.getpid() and "division by zero" in st["last_error"]
        with pytest.raises(WriterBusy) as err:
            Writer(db, root=root, config=kb_config())
        assert f"pid {os.getpid()}" in str(err.value) and "kill" in err.value.hint
    assert writer_pid(db) is None
    with pytest.raises(WriterClosed):
        w.run(lambda store: None)
    # The lock is free again: a new writer starts.
    Writer(db, root=root, config=kb_config()).close()


def test_writer_refuses_bad_paths_and_another_root(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(Exception, match="is a directory"):
        Writer(tmp_path / "dir.sqlite", root=root, config=kb_config())
    with pytest.raises(Exception, match="no such directory"):
        Writer(tmp_path / "kb.sqlite", root=tmp_path / "missing", config=kb_config())
    (root / "a.md").write_text("# A\n\nalpha\n")
    with Writer(tmp_path / "kb.sqlite", root=root, config=kb_config(), embed=False, graph=False) as w:
        w.ingest().result(30)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(Exception, match="holds documents from"):
        Writer(tmp_path / "kb.sqlite", root=other, config=kb_config())
    assert writer_pid(tmp_path / "kb.sqlite") is None  # a refused writer leaves no lock behind


def test_status_wait_idle_waits_for_a_busy_writer_and_times_out(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    db = tmp_path / "kb.sqlite"
    with Writer(db, root=root, config=kb_config(), embed=False, graph=False) as w:
        w.ingest().result(30)
        gate = threading.Event()
        w.run(lambda store: gate.wait(30))
        busy = kgr("status", "--db", str(db), "--wait-idle", "--timeout", "0.5")
        assert busy.returncode == 1 and "still busy after 0.5s" in busy.stderr and busy.stdout == ""
        state = kgr("status", "--db", str(db), "--json")
        assert '"busy":true' in state.stdout.replace(" ", "")
        threading.Timer(0.5, gate.set).start()
        started = time.monotonic()
        idle = kgr("status", "--db", str(db), "--wait-idle", "--timeout", "20")
        assert idle.returncode == 0, idle.stderr
        assert 0.4 < time.monotonic() - started < 20
        assert f"pid {os.getpid()} idle" in idle.stdout
    # No writer alive: idle at once.
    ok, _ = wait_for_idle(db, 1)
    assert ok


# -- the watcher's scope -------------------------------------------------------------------------


def test_ignores_temp_names_dotfiles_kgrignore_and_the_database_itself(tmp_path, live):
    root = tmp_path / "kb"
    (root / ".kgr").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "drafts").mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    (root / "notes" / "b.md").write_text("# B\n\nbeta\n")
    (root / "drafts" / "c.md").write_text("# C\n\ngamma\n")
    (root / ".kgrignore").write_text("drafts/\n*.private.md\n")
    db = root / ".kgr" / "kb.sqlite"  # the database inside the root it watches
    h = live(root, db)
    h.idle()
    expect_exact(db, root, ["a.md", "notes/b.md"])
    events_before = h.watcher.stats.events
    for name in (
        "a.md~",
        ".a.md.swp",
        "4913",
        ".#a.md",
        "#a.md#",
        "a.md.tmp",
        "x.private.md",
        ".hidden.md",
        "notes/.secret.md",
        "drafts/d.md",
    ):
        (root / name).write_text("# temp\n\nshould never be stored\n")
    h.idle()
    expect_exact(db, root, ["a.md", "notes/b.md"])
    # The database's own writes (WAL, meta updates) and all of the above marked no path.
    assert h.watcher.stats.events == events_before, h.watcher.status()
    assert h.watcher.stats.ignored > 0
    # Changing .kgrignore rescans: drafts/ comes in.
    (root / ".kgrignore").write_text("*.private.md\n")
    h.idle()
    expect_exact(db, root, ["a.md", "drafts/c.md", "drafts/d.md", "notes/b.md"])
    assert ".kgrignore changed" in h.watcher.stats.scan_reasons


def test_never_follows_a_symlink_out_of_the_root(tmp_path, live):
    root = tmp_path / "kb"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\ntoken outsidesecret\n")
    (root / "a.md").write_text("# A\n\nalpha\n")
    db = tmp_path / "kb.sqlite"
    h = live(root, db)
    h.idle()
    os.symlink(outside, root / "linkdir")
    os.symlink(outside / "secret.md", root / "linked.md")
    os.symlink("/etc", root / "etc")
    (outside / "more.md").write_text("# More\n\nmore outside\n")
    h.idle()
    h.writer.ingest().result(30)  # a full reconcile as well
    h.idle()
    assert sorted(stored(db)) == ["a.md"]
    from kgr.store import Store

    with Store(db, readonly=True) as store:
        assert store.scalar("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'outsidesecret'") == 0


def test_deletes_purge_and_a_changed_file_is_replaced(tmp_path, live):
    root = tmp_path / "kb"
    root.mkdir()
    for name in ("a.md", "b.md", "c.txt"):
        (root / name).write_text(f"# {name}\n\ntext of {name}\n")
    db = tmp_path / "kb.sqlite"
    h = live(root, db)
    h.idle()
    os.unlink(root / "b.md")
    (root / "c.txt").write_text("new words entirely\n")
    h.idle()
    expect_exact(db, root, ["a.md", "c.txt"])
    import shutil

    (root / "sub" / "deep").mkdir(parents=True)
    (root / "sub" / "deep" / "d.md").write_text("# D\n\ndelta\n")
    h.idle()
    expect_exact(db, root, ["a.md", "c.txt", "sub/deep/d.md"])
    shutil.rmtree(root / "sub")
    h.idle()
    expect_exact(db, root, ["a.md", "c.txt"])


# -- the command -----------------------------------------------------------------------------------


def test_kgr_watch_errors_signals_and_a_quiet_stdout(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    db = tmp_path / "kb.sqlite"
    missing = kgr("watch", str(tmp_path / "nope"), "--db", str(db))
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    (tmp_path / "dir.sqlite").mkdir()
    isdir = kgr("watch", str(root), "--db", str(tmp_path / "dir.sqlite"))
    assert isdir.returncode in (1, 2) and "directory" in isdir.stderr

    proc = start_watch(root, db)
    try:
        wait_for_lock(db, proc)
        assert kgr("status", "--db", str(db), "--wait-idle", "--timeout", "30").returncode == 0
        (root / "b.md").write_text("# B\n\nbeta\n")
        assert kgr("status", "--db", str(db), "--wait-idle", "--timeout", "30").returncode == 0
        assert sorted(stored(db)) == ["a.md", "b.md"]
        refused = kgr("ingest", str(root), "--db", str(db), "--no-embed", "--no-graph")
        assert refused.returncode == 1
        assert f"pid {proc.pid}" in refused.stderr and refused.stderr.startswith("Error: ")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == "" and "watching" in err and "stopping" in err
    assert writer_pid(db) is None

    proc = start_watch(root, db)
    try:
        wait_for_lock(db, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and out == "" and "Interrupted" in err


def test_lost_events_and_a_dead_observer_turn_into_a_scan(tmp_path, live):
    """(W6 in small.) watchdog reports a kernel queue overflow only as a log line: the watcher
    turns that line into a whole-root scan; a stopped observer is restarted within seconds."""
    import logging

    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nalpha\n")
    db = tmp_path / "kb.sqlite"
    h = live(root, db)
    h.idle()
    # Changes the watcher never hears of: written while its observer is paused.
    h.watcher._observer.unschedule_all()
    (root / "b.md").write_text("# B\n\nbeta\n")
    time.sleep(0.5)
    assert sorted(stored(db)) == ["a.md"]
    scans = h.watcher.stats.scans
    logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
    h.idle()
    assert h.watcher.stats.overflows == 1 and h.watcher.stats.scans == scans + 1
    assert sorted(stored(db)) == ["a.md", "b.md"]

    # The observer thread dies: the liveness check restarts it and rescans.
    h.watcher._observer.stop()
    h.watcher._observer.join(5)
    (root / "c.md").write_text("# C\n\ngamma\n")
    deadline = time.monotonic() + 10
    while h.watcher.stats.restarts == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert h.watcher.stats.restarts == 1
    h.idle()
    (root / "d.md").write_text("# D\n\ndelta\n")  # and the next edit is seen by the new observer
    h.idle()
    expect_exact(db, root, ["a.md", "b.md", "c.md", "d.md"])
