"""Graph mode's placement constants and retrieval weights side by side on the tuning sets, one variant per row.

    python bench/tune_placement.py DB:DATASET [DB:DATASET ...] [--variant NAME=VALUE[,NAME=VALUE]] ... [--changes]

Each DB is built first with `kgr eval retrieval --dataset DATASET --db DB`. A variant sets
module constants of kgr.retrieval.query (RAW_LINK=0.5, CHAIN_FIRST=1, ...) or retrieval
weights (w.place=0.5) for its run; the first row is always the defaults. Prints R@2, R@5
and MRR@10 of one mode (``--mode``, default graph) per set and variant.

Issue 18's rule: tune only on hipporag_hotpotqa_train100, hipporag_musique_train100 and
2wikimultihopqa_dev200, leaving out of the last the questions that are also in the HippoRAG
2WikiMultiHopQA set (read from hipporag_2wikimultihopqa/gold.json beside it); the reported
sets (hotpotqa_dev200, musique_dev200, hipporag_2wikimultihopqa, SciFact test) are refused.
Issue 13's annotated folders (../shared/golden, ../shared/golden2: a folder with
``annotations/``) are its tuning corpora for company documents, and are accepted too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from kgr import config
from kgr.config import settings_of
from kgr.embedders import get_embedder
from kgr.eval import retrieval as evalret
from kgr.retrieval import query
from kgr.store.lock import reading

ALLOWED = {"hipporag_hotpotqa_train100", "hipporag_musique_train100", "2wikimultihopqa_dev200"}


def left_out(dataset: Path, ds) -> set[str]:
    """The 2wikimultihopqa_dev200 questions that the HippoRAG 2WikiMultiHopQA set also asks."""
    if dataset.name != "2wikimultihopqa_dev200":
        return set()
    other = dataset.parent / "hipporag_2wikimultihopqa" / "gold.json"
    asked = {q["question"] for q in json.loads(other.read_text(encoding="utf-8"))}
    return {q.id for q in ds.questions if q.text in asked}


def apply(variant: str, weights):
    """Set the variant's constants; returns (weights, the constants to restore)."""
    saved = {}
    for item in filter(None, variant.split(",")):
        name, value = item.split("=", 1)
        if name.startswith("w."):
            old = getattr(weights, name[2:])
            weights = dataclasses.replace(weights, **{name[2:]: type(old)(float(value))})
        else:
            old = getattr(query, name)
            saved[name] = old
            setattr(query, name, type(old)(float(value)))
    return weights, saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+", help="DB:DATASET")
    ap.add_argument("--variant", action="append", default=[], help="NAME=VALUE[,NAME=VALUE]")
    ap.add_argument("--mode", default="graph", choices=query.MODES, help="the retrieval mode scored (default: graph)")
    ap.add_argument("--changes", action="store_true", help="also print each question a variant scores differently")
    args = ap.parse_args()
    cfg = settings_of(config.load(None))
    embedder = get_embedder(cfg, purpose="query")
    cache: dict[str, object] = {}

    def embed(text: str):
        if text not in cache:
            cache[text] = embedder.embed_queries([text])[0]
        return cache[text]

    for pair in args.pairs:
        db, dataset = pair.split(":", 1)
        path = Path(dataset)
        if path.name not in ALLOWED and not (path / "annotations").is_dir():
            sys.exit(f"refusing to tune on {dataset}: only {', '.join(sorted(ALLOWED))} or an annotated folder")
        ds = evalret.load_dataset(path)
        skip = left_out(path, ds)
        questions = [q for q in ds.questions if q.id not in skip]
        with reading(db) as store:
            base: dict[str, dict] = {}
            for variant in ["", *args.variant]:
                weights, saved = apply(variant, cfg.retrieval.weights)
                retrieval = dataclasses.replace(cfg.retrieval, weights=weights)
                total = {"recall@2": 0.0, "recall@5": 0.0, "mrr@10": 0.0}
                try:
                    for q in questions:
                        res = query.query_with_settings(
                            store, q.text, retrieval, k=30, mode=args.mode, embed_query=embed, vectors_in_memory=True
                        )
                        s = evalret.score_ranking(evalret.doc_ranking(res), q.gold)
                        if not variant:
                            base[q.id] = s
                        elif args.changes and any(abs(s[key] - base[q.id][key]) > 1e-9 for key in total):
                            moved = "  ".join(f"{key} {base[q.id][key]:.2f}->{s[key]:.2f}" for key in total)
                            print(f"  {variant}: {q.id} {q.text[:70]!r}  {moved}", flush=True)
                        for key in total:
                            total[key] += s[key]
                finally:
                    for name, old in saved.items():
                        setattr(query, name, old)
                figures = "  ".join(f"{k} {100 * v / len(questions):5.1f}" for k, v in total.items())
                label = variant or "defaults"
                print(f"{path.name:28} n={len(questions):3}  {args.mode:6} {label:40} {figures}", flush=True)


if __name__ == "__main__":
    main()
