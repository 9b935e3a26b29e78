"""Tune the graph-mode weights on the TRAIN splits only, side by side with hybrid.

    python bench/tune_retrieval.py DB:DATASET [DB:DATASET ...] [--grid]

Each DB is built first with `kgr eval retrieval --dataset DATASET --db DB`. Prints R@2,
R@5 and MRR@10 of hybrid and of graph mode for the default weights, and with --grid for a
small grid around them. The dev/test sets must never be passed here (the issue's rule).
"""

from __future__ import annotations

import argparse
import itertools
import sys

from kgr import config
from kgr.embedders import get_embedder
from kgr.eval import retrieval as evalret
from kgr.retrieval import query
from kgr.store import Store, vectors


def run(store, ds, embed, weights, mode, hops, rels):
    tot = {"recall@2": 0.0, "recall@5": 0.0, "mrr@10": 0.0}
    for q in ds.questions:
        res = query.hybrid_query(
            store, q.text, k=30, hops=hops, rels=rels, mode=mode, embed_query=embed, weights=weights
        )
        s = evalret.score_ranking(evalret.doc_ranking(res), q.gold)
        for key in tot:
            tot[key] += s[key]
    return {k: 100 * v / len(ds.questions) for k, v in tot.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+")
    ap.add_argument("--grid", action="store_true")
    args = ap.parse_args()
    cfg = config.load(None)
    embedder = get_embedder(cfg, purpose="query")
    cache: dict[str, object] = {}

    def embed(text):
        if text not in cache:
            cache[text] = embedder.embed_queries([text])[0]
        return cache[text]

    sets = []
    for pair in args.pairs:
        db, dataset = pair.split(":", 1)
        if (
            any(tag in dataset for tag in ("dev", "2wikimultihopqa", "golden"))
            or "scifact" in dataset
            and "train" not in db
        ):
            sys.exit(f"refusing to tune on {dataset}: tune only on train splits")
        store = Store(db, readonly=True)
        vectors.check_spec(store, vectors.VectorSpec(embedder.model, embedder.dim))
        sets.append((dataset, store, evalret.load_dataset(dataset, split="train")))
    r = cfg["retrieval"]
    base = query.Weights.from_config(cfg)
    grid = [base]
    if args.grid:
        grid = []
        for sem, hop, share, seeds, spec in itertools.product(
            (0.5, 0.6, 0.7), (0.2, 0.3, 0.4), (0.3, 0.5, 0.7), (3, 5, 8), (0.0, 0.5, 1.0)
        ):
            grid.append(
                query.Weights(
                    semantic=sem,
                    hop=hop,
                    rel=max(0.0, 1 - sem - hop),
                    cosine_share=share,
                    seed_chunks=seeds,
                    entity_sim=base.entity_sim,
                    specificity=spec,
                )
            )
    for name, store, ds in sets:
        h = run(store, ds, embed, base, "hybrid", r["hops"], r["rels"])
        print(f"{name}: hybrid R@2 {h['recall@2']:.1f} R@5 {h['recall@5']:.1f} MRR {h['mrr@10']:.1f}", flush=True)
    rows = []
    for w in grid:
        scores = [run(store, ds, embed, w, "graph", r["hops"], r["rels"]) for _, store, ds in sets]
        mean5 = sum(s["recall@5"] for s in scores) / len(scores)
        mean2 = sum(s["recall@2"] for s in scores) / len(scores)
        rows.append((mean5, mean2, w))
        print(
            f"graph {w}: "
            + "  ".join(f"R@2 {s['recall@2']:.1f} R@5 {s['recall@5']:.1f}" for s in scores)
            + f"  mean R@5 {mean5:.1f}",
            flush=True,
        )
    if len(rows) > 1:
        rows.sort(key=lambda x: (-x[0], -x[1]))
        print("\nbest:", rows[0][2], f"mean R@5 {rows[0][0]:.1f} R@2 {rows[0][1]:.1f}")


if __name__ == "__main__":
    main()
