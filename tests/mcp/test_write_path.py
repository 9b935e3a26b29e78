"""The one write path: `kgr.store.lock.writing` / `LockedWrites` (the writer lock with a read-write
store), `kgr.ingest.writer.run_write` (or the running writer) and `Service.write` for the MCP tools."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def db(tmp_path) -> Path:
    from kgr.store import Store

    path = tmp_path / "kb.sqlite"
    Store(path).close()
    return path


def _create(store, name: str):
    from kgr.memory import graph as memory

    return memory.create_entities(store, [{"name": name, "entityType": "note", "observations": []}])


def _names(db: Path) -> list[str]:
    from kgr.memory import graph as memory
    from kgr.store.lock import reading

    with reading(db) as store:
        return [e["name"] for e in memory.read_graph(store, limit=100)["entities"]]


def test_writing_takes_the_lock_and_lets_it_go(db):
    from kgr.store.lock import WriterBusy, WriterLock, writer_pid, writing

    with writing(db) as store:
        assert writer_pid(db) == os.getpid()
        _create(store, "a")
        with pytest.raises(WriterBusy, match="being written by another kgr process"):
            WriterLock(db).acquire(retry_s=0.05)
    assert writer_pid(db) is None
    assert _names(db) == ["a"]


def test_writing_is_refused_at_once_while_another_writer_holds_the_lock(db):
    from kgr.store.lock import WriterBusy, WriterLock, writing

    with WriterLock(db):
        started = time.monotonic()
        with pytest.raises(WriterBusy):
            with writing(db):
                pass
        assert time.monotonic() - started < 5


def test_locked_writes_wait_for_a_short_write_of_another_process(db):
    """The per-call lock of a server without a writer waits (within its bound) instead of failing."""
    from kgr.store.lock import LockedWrites, WriterLock

    holder = WriterLock(db).acquire()
    threading.Timer(0.5, holder.release).start()
    locked = LockedWrites(db, wait_s=10, keep_open=True)
    try:
        with locked() as store:
            _create(store, "after the other write")
        with locked() as again:  # the same connection, kept open between writes
            assert again is store
    finally:
        locked.close()
    assert _names(db) == ["after the other write"]


def test_run_write_goes_to_the_running_writer(tmp_path, db):
    from kgr.ingest.writer import Writer, run_write

    root = tmp_path / "root"
    root.mkdir()
    with Writer(db, root=root) as writer:
        thread = run_write(lambda store: threading.current_thread().name, writer=writer, timeout=60)
    assert thread == "kgr-writer"


def test_a_memory_service_writes_under_the_lock_and_waits_its_turn(db):
    from kgr import config
    from kgr.mcp.service import Service
    from kgr.store.lock import WriterBusy, WriterLock

    svc = Service(db, config.load(None), lock_wait=10)
    try:
        holder = WriterLock(db).acquire()
        threading.Timer(0.5, holder.release).start()
        svc.write(lambda store: _create(store, "queued behind"), start_writer=False)
        with WriterLock(db):
            short = Service(db, config.load(None), lock_wait=0.2)
            try:
                with pytest.raises(WriterBusy):
                    short.write(lambda store: _create(store, "refused"), start_writer=False)
            finally:
                short.close()
    finally:
        svc.close()
    assert _names(db) == ["queued behind"]


def test_kgr_import_takes_the_writer_lock(tmp_path, db):
    from kgr.store.lock import WriterLock

    data = tmp_path / "memory.jsonl"
    data.write_text('{"type": "entity", "name": "Ada", "entityType": "person", "observations": []}\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "KGR_REDACT_KEY": "test-key"}
    cmd = [sys.executable, "-m", "kgr", "import", "--format", "mcp-memory", str(data), "--db", str(db)]
    with WriterLock(db):
        busy = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert busy.returncode == 1 and "being written by another kgr process" in busy.stderr
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _names(db) == ["Ada"]
