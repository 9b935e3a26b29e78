"""Does the fine-tuned pair reader lift cross-validated relation F1? (issue 13)

    python bench/relation_reader.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--fold 0] [--epochs 1] [--cache C.pkl] [--json]

For each fold of the 5-fold split by document that it runs (``--fold``, default every fold),
the relation model is fitted on the other folds' documents with the dense head and the pair
reader (kgr.learn.relations.fit with ``reader=True``: the default model's transformer
fine-tuned through adapters on the marked evidence, ``--epochs`` passes), and the held-out
candidates the sparse model finds plausible are read by both. The variants compared, on the
same held-out candidates: the sparse model alone, with the dense head (what ships without a
reader), with the reader, and all three (what ``kgr train relations --reader`` ships), each the
mean of its models' probabilities.

Scores are relation F1 per corpus at the level of gold entities on the candidates' own
alignment (kgr.learn.relations.pair_scores, the quick figure of bench/cv_relations.py), with
thresholds chosen by kgr.learn.relations.best_threshold on the out-of-fold predictions of the
folds run. With one fold those thresholds are chosen on that fold, for every variant alike:
a comparison, not a reported figure (bench/cv_relations.py --reader gives those). Skips with
a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--golden", action="append", required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--fold", type=int, action="append", help="run only these folds (default: all)")
    ap.add_argument("--epochs", type=float, default=None, help="passes of the reader's fine-tuning (default: kgr's)")
    ap.add_argument("--cache", help="pickle the collected candidates here and reuse them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import numpy as np

    from kgr import config as config_mod
    from kgr.learn import relations as learn

    if args.epochs is not None:
        learn.READER_EPOCHS = args.epochs
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    if args.cache and Path(args.cache).exists():
        data = pickle.loads(Path(args.cache).read_bytes())
    else:
        data = learn.collect_all(args.golden, config_mod.load(), progress=log)
        if args.cache:
            Path(args.cache).write_bytes(pickle.dumps(data))
    examples = [e for d in data for e in d.examples]
    scopes = learn.scopes_of(data)
    fold = learn.folds_of(data, args.folds)
    runs = sorted(set(args.fold or range(args.folds)))
    held: list = []
    variants: dict[str, list] = {"sparse": [], "sparse+dense": [], "sparse+reader": [], "all three": []}
    report: dict = {"folds": args.folds, "runs": runs, "epochs": learn.READER_EPOCHS, "fits": []}
    for f in runs:
        train = [e for e in examples if fold[(e.corpus, e.doc)] != f]
        test = [e for e in examples if fold[(e.corpus, e.doc)] == f]
        t0 = time.perf_counter()
        model = learn.fit(train, scopes=scopes, reader=True, log=log)
        fit_s = time.perf_counter() - t0
        sparse = model.probabilities([e.features for e in test])
        rows = model.reads(sparse)
        t0 = time.perf_counter()
        read = model.read([(e.window, learn.reader_text(e)) for e in (test[i] for i in rows)])
        read_s = time.perf_counter() - t0
        dense = model.dense.probabilities(read["view"], [test[i].features for i in rows])
        reader = read["reader"]
        for name, parts in (
            ("sparse", []),
            ("sparse+dense", [dense]),
            ("sparse+reader", [reader]),
            ("all three", [dense, reader]),
        ):
            probs = sparse.copy()
            probs[rows] = (sparse[rows] + sum(parts)) / (1 + len(parts))
            variants[name].append(probs)
        held += test
        report["fits"].append({"fold": f, "fit_s": round(fit_s), "read": len(rows), "read_s": round(read_s)})
        log(f"fold {f}: fitted in {fit_s:.0f} s, read {len(rows)} of {len(test)} held-out candidates in {read_s:.0f} s")
    chosen = {(e.corpus, e.doc) for e in held}
    sub = [learn.CorpusData(d.corpus, docs=[x for x in d.docs if (d.corpus.name, x) in chosen]) for d in data]
    report["scores"] = {}
    for name, parts in variants.items():
        probs = np.concatenate(parts)
        threshold, veto, mean = learn.best_threshold(sub, held, probs)
        scores = learn.pair_scores(sub, held, probs, threshold, veto)
        report["scores"][name] = {
            "mean": round(mean, 4),
            **{k: {m: round(v, 4) for m, v in s.items()} for k, s in scores.items()},
        }
    report["seconds"] = round(time.perf_counter() - started)
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        corpora = [d.corpus.name for d in data]
        print(f"folds run: {runs} of {args.folds}; relation F1 (P / R) per corpus, candidate level")
        print(f"{'variant':<15}{'mean':>7}  " + "  ".join(f"{c:>22}" for c in corpora))
        for name, s in report["scores"].items():
            cells = [f"{s[c]['f1']:.3f} ({s[c]['precision']:.2f}/{s[c]['recall']:.2f})" for c in corpora]
            print(f"{name:<15}{s['mean']:>7.3f}  " + "  ".join(f"{x:>22}" for x in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
