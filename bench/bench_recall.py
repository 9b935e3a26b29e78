"""remember and recall latency (seed 003's targets: remember < 200 ms, recall < 100 ms).

    python bench/bench_recall.py [--remember 60] [--memories 1000]

1. With the real default model, on a copy of examples/ ingested into a temporary
   database: N memories remembered one by one (each chunked, extracted, linked and
   embedded), then recall's time over them with the real query embedder.
2. At scale, with the stub embedder (the model's time left out): M memories stored, then
   recall, consolidation (dry run) and export over all of them.

Prints one line per figure (median and p90 or max).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEOPLE = ["Alice Johnson", "Bob Smith", "Carol Diaz", "Dana Kim", "Eve Park", "Frank Lee", "Gina Ortiz", "Hana Sato"]
THINGS = [
    "the ledger service",
    "the billing dashboard",
    "the ingest pipeline",
    "the release review",
    "the VPN",
    "the staging database",
]
ACTS = ["owns", "maintains", "reviews", "migrated", "deprecated", "asked about"]
QUERIES = [
    "who owns the ledger service",
    "what did Carol Diaz migrate",
    "VPN questions",
    "billing dashboard reviews",
    "staging database",
]


def texts(n: int):
    rnd = random.Random(1)
    return [f"{rnd.choice(PEOPLE)} {rnd.choice(ACTS)} {rnd.choice(THINGS)} on day {i}." for i in range(n)]


def ms(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values) * 1000:.0f} ms, p90 {values[int(0.9 * (len(values) - 1))] * 1000:.0f} ms"


def time_recall(store, cfg, embed) -> list[float]:
    from kgr.memory import recall

    out = []
    for _ in range(4):
        for q in QUERIES:
            t0 = time.perf_counter()
            recall.recall(store, q, cfg, embed_query=embed, k=5)
            out.append(time.perf_counter() - t0)
    return out


def real_model(n: int, tmp: Path) -> None:
    from kgr import config
    from kgr.memory import recall
    from kgr.retrieval.query import query_embedder
    from kgr.store import Store

    shutil.copytree(REPO / "examples", tmp / "examples", ignore=shutil.ignore_patterns("*.sqlite*"))
    db = tmp / "kb.sqlite"
    subprocess.run(
        [sys.executable, "-m", "kgr", "ingest", str(tmp / "examples" / "kb"), "--db", str(db)],
        check=True,
        capture_output=True,
    )
    cfg = config.load(None)
    with Store(db) as store:
        recall.remember(store, "Warm up: Zed Quinn loads the models.", cfg)
        times = []
        for text in texts(n):
            t0 = time.perf_counter()
            recall.remember(store, text, cfg)
            times.append(time.perf_counter() - t0)
        print(f"remember (real model, examples/ + {n} memories): {ms(times)}")
        embed = query_embedder(store, cfg)
        embed("warm up")
        print(f"recall over {n + 1} memories (real model): {ms(time_recall(store, cfg, embed))}")


def at_scale(n: int, tmp: Path) -> None:
    from kgr import config
    from kgr.ingest.graphbuild import build_pending
    from kgr.ingest.pipeline import embed_store
    from kgr.memory import recall
    from kgr.retrieval.query import query_embedder
    from kgr.store import Store

    cfg = config.load(None, overrides={"embed.stub": True})
    with Store(tmp / "scale.sqlite") as store:
        t0 = time.perf_counter()
        for text in texts(n):
            recall.remember(store, text, cfg, graph=False, embed=False)
        build_pending(store, cfg)
        embed_store(store, cfg)
        for (path,) in store.query("SELECT path FROM docs WHERE source='memory'"):
            recall._observe(store, path, {"importance": 0.5, "created_ms": 0})
        print(f"stored {n} memories (stub model) in {time.perf_counter() - t0:.0f} s")
        print(
            f"recall over {n} memories (stub query vector): {ms(time_recall(store, cfg, query_embedder(store, cfg)))}"
        )
        t0 = time.perf_counter()
        recall.consolidate(store, cfg, dry_run=True)
        print(f"consolidate --dry-run over {n} memories: {time.perf_counter() - t0:.2f} s")
        t0 = time.perf_counter()
        data = recall.export_jsonl(store)
        print(f"export {n} memories: {time.perf_counter() - t0:.2f} s, {len(data)} bytes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remember", type=int, default=60)
    ap.add_argument("--memories", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kgr-bench-recall-") as tmp:
        real_model(args.remember, Path(tmp))
        at_scale(args.memories, Path(tmp))


if __name__ == "__main__":
    main()
