"""Each question's gold pages and the rank each retrieval mode gives them, side by side.

    python bench/rank_by_mode.py DB DATASET [--modes bm25,vector,hybrid,graph] [--lost-by hybrid]

DB is built first by `kgr eval retrieval --dataset DATASET --db DB`. One line per question:
the rank of each gold page (document level, first chunk of the page; "-" when not among the
results) under each mode, each asked for ``--k`` results (30, as `kgr eval retrieval` asks: the
candidate pool grows with k, so another k ranks differently). ``--lost-by MODE`` prints only
the questions where the first mode puts a gold page in its top 5 and MODE ranks that page
lower, past 2 or past 5 (where a fused mode loses what a single list had). Reporting only:
nothing is tuned.
"""

from __future__ import annotations

import argparse

from kgr import config
from kgr.embedders import get_embedder
from kgr.eval import retrieval as evalret
from kgr.retrieval import query
from kgr.store import Store


def _lost(first: list, other: list) -> bool:
    for a, b in zip(first, other):
        a, b = a or 10**6, b or 10**6
        if a <= 5 and b > a and (a <= 2 < b or b > 5):
            return True
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("dataset")
    ap.add_argument("--modes", default="bm25,vector,hybrid,graph")
    ap.add_argument("--k", type=int, default=30, help="results asked for (kgr eval retrieval asks 30)")
    ap.add_argument("--lost-by", help="only the questions where this mode loses a gold page of the first mode's top 5")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.lost_by and args.lost_by not in modes:
        ap.error(f"--lost-by {args.lost_by}: not one of --modes {args.modes}")
    cfg = config.load(None)
    embedder = get_embedder(cfg, purpose="query")
    weights, r = query.Weights.from_config(cfg), cfg["retrieval"]
    cache: dict[str, object] = {}

    def embed(text: str):
        if text not in cache:
            cache[text] = embedder.embed_queries([text])[0]
        return cache[text]

    with Store(args.db, readonly=True) as store:
        for q in evalret.load_dataset(args.dataset).questions:
            gold = sorted(q.gold)
            ranks = {}
            for mode in modes:
                res = query.hybrid_query(
                    store,
                    q.text,
                    k=args.k,
                    hops=r["hops"],
                    rels=r["rels"],
                    mode=mode,
                    embed_query=embed,
                    weights=weights,
                )
                docs = evalret.doc_ranking(res, depth=1000)
                ranks[mode] = [docs.index(g) + 1 if g in docs else None for g in gold]
            if args.lost_by and not _lost(ranks[modes[0]], ranks[args.lost_by]):
                continue
            shown = "  ".join(f"{m}={[x or '-' for x in ranks[m]]}" for m in modes)
            print(f"{q.text[:100]} | {len(gold)} gold | {shown}")


if __name__ == "__main__":
    main()
