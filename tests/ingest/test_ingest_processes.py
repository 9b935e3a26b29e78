"""`kgr ingest --engine processes` (the default) gives the database `--engine local` gives.

The extract step runs in worker processes, a batch of documents at a time, while this process
links and writes; batches are made small here so that several are in flight at once and
results must come back in order. Each table is compared row by row (``snapshots.TABLES``), timestamps left out.
"""

from __future__ import annotations

import os
import shutil

from snapshots import assert_same, ingest_into

from kgr.ingest import graphbuild
from kgr.ingest.engine import LocalEngine, ProcessEngine, make


def test_examples_same_database_in_worker_processes(examples, tmp_path, monkeypatch):
    monkeypatch.setattr(graphbuild, "PARSE_BATCH", 4)  # 17 files: five batches over two workers
    src = tmp_path / "examples"
    shutil.copytree(examples, src)
    dbs = []
    for name, engine in (("local", LocalEngine()), ("processes", ProcessEngine(2))):
        db = tmp_path / f"{name}.sqlite"
        summary = ingest_into(src, db, engine)
        assert summary.extracted > 0 and not summary.extract_failed, summary.line()
        dbs.append(db)
        if name == "processes":
            assert engine.fallbacks == 0  # every batch was extracted by a worker
    counts = assert_same(*dbs)
    assert counts["entities"] > 0 and counts["relations"] > 0


def _work(shard: int, marker: str) -> list[int]:
    if shard == 2 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the worker process dies, as an out-of-memory kill would end it
    return [shard * 10 + i for i in range(shard)]


def test_shards_a_dead_worker_leaves_are_done_here_in_order(tmp_path):
    marker = str(tmp_path / "died")
    engine = ProcessEngine(2)
    try:
        assert list(engine.map(_work, [1, 2, 3], marker)) == [[10], [20, 21], [30, 31, 32]]
    finally:
        engine.close()
    assert os.path.exists(marker), "no worker died: nothing was tested"
    assert engine.fallbacks >= 1


def test_only_the_extract_step_leaves_this_process():
    engine = make("processes", num_cpus=2)
    assert engine.runs("extract") and not engine.runs("normalize") and not engine.runs("embed")
    assert not ProcessEngine(1).runs("extract")  # one core: nothing to share it with
    assert not make(None).runs("extract")


WORKER_SCRIPT = """
import sys, time
from kgr.ingest.engine import ProcessEngine

def slow(x):
    time.sleep(600)
    return x

if __name__ == "__main__":
    engine = ProcessEngine(2)
    results = engine.map(slow, [1, 2, 3])
    engine._start()
    while len(engine._pool._processes or {}) < 2:
        engine._pool._adjust_process_count()
        time.sleep(0.1)
    print(*engine._pool._processes, flush=True)
    next(results)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)
    except FileNotFoundError:
        return False


def test_workers_end_when_the_ingest_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "run.py"
    script.write_text(WORKER_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
    finally:
        proc.send_signal(signal.SIGKILL)  # as cron's timeout or the OOM killer would stop kgr ingest
        proc.wait()
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in workers), "worker processes outlived the ingest that started them"


def test_a_writer_that_stops_reading_stops_the_workers():
    import time

    engine = ProcessEngine(2)
    results = engine.map(_sleepy, [0.0, 60.0, 60.0, 60.0])
    assert next(results) == 0.0
    workers = list(engine._pool._processes)
    began = time.monotonic()
    results.close()  # as ^C in the writer ends the generator
    assert time.monotonic() - began < 30 and engine._pool is None
    assert not any(_alive(p) for p in workers)


def _sleepy(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds
