"""`kgr ingest` with the per-document work on Ray (1 and 2 workers) against one process.

    python bench/bench_ray.py [--corpus ../shared/corpora/powershell-docs] [--files 200] [--workers 1,2]

The same sample of files (fixed seed) is ingested into a fresh database by each engine:
``local`` (this process, as `kgr ingest`), then ``ray`` on a local Ray cluster of N CPUs
(started for that run and stopped after; its start-up is shown apart and left out of the
rates). Each run goes through the pipeline's three passes, timed one by one: load
(normalize + chunk + load), graph (gazetteer mining, extract, link, store), embed (chunks
and entities). Shown per run: documents per second over the three passes, each pass's
seconds, and the writer's share of wall time: for Ray, the time this process was not
waiting for the workers (loading, mining, linking, writing) over the wall time; for local,
the time inside write transactions over the wall time (everything else is the per-document
work a worker would take). The databases are compared table by table at the end (the test
tests/ingest/test_ingest_ray.py does the same, with more tables).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kgr import config as config_mod
from kgr.ingest import engine as engines
from kgr.ingest import graphbuild, pipeline
from kgr.store import Store

REPO = Path(__file__).resolve().parent.parent


def sample(corpus: Path, n: int, dst: Path) -> int:
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file())
    picked = random.Random(17).sample(files, min(n, len(files)))
    for f in picked:
        out = dst / f.relative_to(corpus)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, out)
    return len(picked)


def tx_seconds(store: Store) -> float:
    stats = store.tx_stats()
    return (stats["mean_ms"] or 0.0) * stats["count"] / 1000.0


def run(src: Path, db: Path, engine, cfg) -> dict:
    store = Store(db)
    try:
        t0 = time.perf_counter()
        summary = pipeline.ingest([str(src)], store, config=cfg, graph=False, embed=False, engine=engine)
        t1 = time.perf_counter()
        graphed = graphbuild.build_pending(store, cfg, engine=engine)
        t2 = time.perf_counter()
        vectors = pipeline.embed_store(store, cfg, engine=engine)
        t3 = time.perf_counter()
        wall = t3 - t0
        waited = getattr(engine, "waited", None)
        writer = (wall - waited) if waited is not None else tx_seconds(store)
        chunks = store.scalar("SELECT count(*) FROM chunks")
        return {
            "docs": summary.ingested,
            "chunks": chunks,
            "graphed": graphed,
            "vectors": vectors,
            "load_s": round(t1 - t0, 1),
            "graph_s": round(t2 - t1, 1),
            "embed_s": round(t3 - t2, 1),
            "wall_s": round(wall, 1),
            "docs_per_s": round(summary.ingested / wall, 2),
            "writer_s": round(writer, 1),
            "writer_share": round(writer / wall, 3),
            "tx_s": round(tx_seconds(store), 1),
        }
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpora" / "powershell-docs")
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--workers", default="1,2", help="Ray cluster sizes, comma-separated")
    ap.add_argument("--json", action="store_true", help="one JSON object per run instead of the table")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 2
    cfg = config_mod.load()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        src = Path(tmp) / "src"
        n = sample(args.corpus, args.files, src)
        print(f"{n} files from {args.corpus}", file=sys.stderr)
        plans = [("local", None)] + [(f"ray x{int(w)}", int(w)) for w in args.workers.split(",") if w.strip()]
        for name, workers in plans:
            began = time.perf_counter()
            engine = engines.LocalEngine() if workers is None else engines.RayEngine(num_cpus=workers)
            if workers is not None:
                engine.connect()  # the cluster's start, timed apart
            startup = time.perf_counter() - began
            try:
                row = {
                    "engine": name,
                    "startup_s": round(startup, 1),
                    **run(src, Path(tmp) / f"{name}.db", engine, cfg),
                }
            finally:
                engine.close()
            rows.append(row)
            print(json.dumps(row) if args.json else row, file=sys.stderr)
        same = [compare(Path(tmp) / "local.db", Path(tmp) / f"{r['engine']}.db") for r in rows[1:]]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    cols = ["engine", "docs", "chunks", "startup_s", "load_s", "graph_s", "embed_s", "wall_s", "docs_per_s"]
    cols += ["writer_s", "writer_share"]
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    for row, ok in zip(rows[1:], same):
        print(f"{row['engine']}: {'same database as local' if ok else 'DIFFERS from local: ' + ok}")
    return 0


def compare(a: Path, b: Path) -> bool | str:
    """True when the two databases hold the same rows (timestamps aside), else the first table that differs."""
    queries = {
        "docs": "SELECT id, path, hash, graph_sig, text FROM docs ORDER BY id",
        "chunks": "SELECT id, doc_id, ord, text, hash FROM chunks ORDER BY id",
        "entities": "SELECT id, key, name, type, aliases, popularity FROM entities ORDER BY id",
        "mentions": "SELECT id, entity_id, doc_id, chunk_id, start, surface, type FROM mentions ORDER BY id",
        "relations": "SELECT id, src_id, dst_id, rel, confidence FROM relations ORDER BY id",
        "chunk_vec": "SELECT rowid, vec_to_json(embedding) FROM chunk_vec ORDER BY rowid",
        "entity_vec": "SELECT rowid, vec_to_json(embedding) FROM entity_vec ORDER BY rowid",
    }
    sa, sb = Store(a), Store(b)
    try:
        for name, sql in queries.items():
            if sa.query(sql) != sb.query(sql):
                return name
        return True
    finally:
        sa.close()
        sb.close()


if __name__ == "__main__":
    sys.exit(main())
