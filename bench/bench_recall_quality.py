"""recall's quality on remembered facts, with and without the MaxSim re-rank and the graph traversal.

    python bench/bench_recall_quality.py [--data tests/memory/data/recall_eval.json]

Remembers the facts of the data file one at a time (real default model, one fixed time, so
recency plays no part), then asks each question and scores the rank of its gold fact:
R@1, R@5 and MRR (over the first 10 results), overall and by kind (paraphrase, keyword,
multihop). Variants, in one run on one store:

- ``rerank off`` / ``rerank on``: recall as configured, the re-rank forced off or on;
- ``rerank depth N``: the re-rank reorders the best N fused candidates (default 5);
- ``graph depth 0``: only the memories observing an entity the query names (no traversal).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "memory" / "data" / "recall_eval.json"
T0 = 1_750_000_000_000


def build(store, data: dict, cfg) -> dict[int, str]:
    """Remember every fact; doc id -> fact id."""
    from kgr.memory import recall

    out = {}
    for fid, text in data["facts"].items():
        out[recall.remember(store, text, cfg, clock=lambda: T0)["doc_id"]] = fid
    return out


def evaluate(store, data: dict, cfg, doc_fact: dict[int, str], *, rerank: bool | None) -> dict:
    """Per question: the rank (1-based, None beyond 10) of its first gold fact; and the time."""
    from kgr.memory import recall
    from kgr.retrieval.query import query_embedder

    embed = query_embedder(store, cfg)
    ranks, times = [], []
    for item in data["questions"]:
        t0 = time.perf_counter()
        out = recall.recall(
            store, item["q"], cfg, k=10, embed_query=embed, clock=lambda: T0, touch=False, rerank=rerank
        )
        times.append(time.perf_counter() - t0)
        got = [doc_fact.get(r["doc_id"]) for r in out["results"]]
        rank = next((i for i, f in enumerate(got, 1) if f in item["gold"]), None)
        ranks.append((item["kind"], rank))
    return {"ranks": ranks, "times": times}


def scores(ranks: list[tuple[str, int | None]]) -> dict[str, float]:
    n = max(1, len(ranks))
    return {
        "n": len(ranks),
        "R@1": sum(r == 1 for _, r in ranks if r) / n,
        "R@5": sum(r <= 5 for _, r in ranks if r) / n,
        "MRR": sum(1 / r for _, r in ranks if r) / n,
    }


def report(name: str, res: dict) -> None:
    import statistics

    ranks = res["ranks"]
    kinds = sorted({k for k, _ in ranks})
    parts = []
    for kind in ["all", *kinds]:
        s = scores([x for x in ranks if kind == "all" or x[0] == kind])
        parts.append(f"{kind} (n={s['n']}): R@1 {s['R@1']:.3f} R@5 {s['R@5']:.3f} MRR {s['MRR']:.3f}")
    print(f"{name:>16}: " + " | ".join(parts) + f" | recall p50 {statistics.median(res['times']) * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    from kgr import config
    from kgr.store import Store

    data = json.loads(args.data.read_text(encoding="utf-8"))
    cfg = config.load(None)
    with tempfile.TemporaryDirectory(prefix="kgr-bench-recall-quality-") as tmp, Store(Path(tmp) / "m.sqlite") as store:
        doc_fact = build(store, data, cfg)
        print(f"{len(data['facts'])} facts remembered, {len(data['questions'])} questions")
        evaluate(store, data, cfg, doc_fact, rerank=True)  # warm up (models, token vectors of the memories)
        report("rerank off", evaluate(store, data, cfg, doc_fact, rerank=False))
        report("rerank on", evaluate(store, data, cfg, doc_fact, rerank=True))
        for depth in (10, 20):
            deeper = cfg.override({"memory.rerank_depth": depth})
            report(f"rerank depth {depth}", evaluate(store, data, deeper, doc_fact, rerank=True))
        flat = cfg.override({"memory.graph_depth": 0})
        report("graph depth 0", evaluate(store, data, flat, doc_fact, rerank=False))


if __name__ == "__main__":
    main()
