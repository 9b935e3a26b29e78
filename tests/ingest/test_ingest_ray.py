"""`kgr ingest --engine ray` gives the database `--engine local` gives (issue 17, items 1-2).

Each test ingests the same files twice, once in this process and once with the per-document
work on a local Ray cluster (``ray.init(num_cpus=2)``, started once for the module), and
compares the two databases table by table: documents, chunks, entities, mentions, relations
and their evidence, the gazetteer, and every stored vector to the int8 value. Timestamps are
left out (they say when a row was written, not what it holds). Skipped when Ray is not
installed (``pip install 'kgr[ray]'``); the PowerShell slice needs ../shared, and its
1,000-file version KGR_SLOW=1.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from snapshots import assert_same, ingest_into

from kgr.store import Store

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kgr[ray]'): --engine ray is not tested")

REPO = Path(__file__).resolve().parents[2]
SLICE = 1000 if os.environ.get("KGR_SLOW") == "1" else 20


@pytest.fixture(scope="module")
def cluster():
    """One local Ray cluster of two CPUs for the module, stopped at its end."""
    started = not ray.is_initialized()
    if started:
        paths = [str(REPO), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths), "KGR_REDACT_KEY": "test-key"}},
        )
    yield ray.get_runtime_context().gcs_address
    if started:
        ray.shutdown()


def ingest_both(src: Path, tmp_path: Path, cluster: str) -> tuple[Path, Path]:
    from kgr.ingest.engine import RayEngine

    dbs = []
    for name, engine in (("local", None), ("ray", RayEngine())):
        db = tmp_path / f"{name}.sqlite"
        summary = ingest_into(src, db, engine)
        assert summary.ingested > 0 and summary.extracted > 0 and summary.embedded > 0, summary.line()
        dbs.append(db)
    return dbs[0], dbs[1]


def test_examples_same_database_on_ray(examples, tmp_path, cluster):
    """Item 2: the examples give the same documents, chunks, graph and vectors on Ray as locally."""
    src = tmp_path / "examples"
    shutil.copytree(examples, src)
    local, other = ingest_both(src, tmp_path, cluster)
    counts = assert_same(local, other)
    assert counts["docs"] >= 10 and counts["chunks"] > counts["docs"] and counts["entities"] > 0
    assert counts["relations"] > 0 and counts["chunk_vec"] == counts["sentence_vec"] == counts["chunks"]


def test_powershell_slice_same_database_on_ray(shared, tmp_path, cluster, monkeypatch):
    """Item 2: a slice of the PowerShell corpus (20 files; 1,000 with KGR_SLOW=1), table by table,
    in batches of eight documents, so both engines cross batch boundaries (a shared loop once gave
    every document after the first batch the records of the one before it, on both engines)."""
    from kgr.ingest import graphbuild

    monkeypatch.setattr(graphbuild, "PARSE_BATCH", 8)
    corpus = shared / "corpora" / "powershell-docs"
    if not corpus.is_dir():
        pytest.skip(f"needs the PowerShell corpus at {corpus}")
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file())
    picked = random.Random(17).sample(files, min(SLICE, len(files)))
    src = tmp_path / "ps"
    for f in picked:
        dst = src / f.relative_to(corpus)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst)
    local, other = ingest_both(src, tmp_path, cluster)
    counts = assert_same(local, other)
    assert counts["docs"] == len(picked) and counts["mentions"] > 0
    store = Store(local)
    try:  # each document's mentions are its own
        texts = dict(store.query("SELECT id, text FROM docs"))
        for doc_id, surface in store.query("SELECT doc_id, surface FROM mentions"):
            assert surface in texts[doc_id], (doc_id, surface)
        assert store.scalar("SELECT count(DISTINCT doc_id) FROM mentions") >= 0.9 * len(picked)
    finally:
        store.close()


def test_cli_engine_ray_on_a_running_cluster(examples, tmp_path, cluster):
    """`kgr ingest --engine ray --address ADDR` loads through the CLI onto the cluster given (the
    normalize and chunk tasks; the tests above cover the graph and the vectors); a second run
    finds every file unchanged; --address without --engine ray is refused."""
    src = tmp_path / "ex"
    shutil.copytree(examples / "kb", src)
    db = tmp_path / "cli.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "kgr", "ingest", str(src), "--db", str(db), "--json", "--no-graph", "--no-embed"]
    run = subprocess.run([*cmd, "--engine", "ray", "--address", cluster], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert '"ingested":' in run.stdout and '"ingested": 0' not in run.stdout.replace(" ", "").replace(":", ": ")
    with sqlite3.connect(db) as conn:
        docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert docs > 0 and chunks >= docs
    again = subprocess.run([*cmd, "--engine", "ray", "--address", cluster], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and f'"unchanged":{docs}' in again.stdout.replace(" ", ""), again.stdout
    bad = subprocess.run([*cmd, "--address", cluster], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "--address needs --engine ray" in bad.stderr


def test_a_worker_that_dies_costs_a_retry_of_its_shard(tmp_path, cluster):
    """Item 1: a worker process that dies mid-shard is Ray's to retry; the writer gets each
    shard's results whole, once, in order."""
    from kgr.ingest.engine import RayEngine

    marker = str(tmp_path / "died")

    def work(shard: int, marker: str) -> list[int]:
        import os

        if shard == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies, as an out-of-memory kill would end it
        return [shard * 10 + i for i in range(shard)]

    engine = RayEngine()
    try:
        assert list(engine.map(work, [1, 2, 3], marker)) == [[10], [20, 21], [30, 31, 32]]
    finally:
        engine.close()
    assert os.path.exists(marker), "the shard never failed: nothing was retried"
