"""How the relation decision reads the model's probabilities, on the candidates of a cache.

    python bench/relation_decisions.py CACHE.pkl [--probs FILE.npz]

CACHE.pkl is what `bench/relation_losses.py --cache CACHE.pkl` writes. The sparse model alone
is cross-validated on it (bench/relation_features.py's ``base``: 5-fold by document, and each
corpus left out); ``--probs`` keeps those probabilities and reuses them when the file exists.
Two reports:

- **rule relations by the model's probability**: each relation a rule states (``rule=``
  features), counted once per document, by the probability the model gives it (k-fold), and
  how many are gold: what a relation's confidence means on each corpus;
- **max or noisy-or over a pair's candidates**: the decision takes the best candidate of a pair
  of names (today), or combines a pair's candidates per relation and direction as
  1 - prod(1 - p); thresholds are chosen again for each (learn.best_threshold), and the
  candidate-level F1 is printed k-fold and left out.

Reporting only: nothing is tuned or shipped from it.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import sys
from pathlib import Path

from relation_features import f1_line, sparse_probabilities

BINS = 10
ORIGINAL = None  # learn._readings, set in main before it is replaced


def rule_bins(data, examples, probs) -> dict[str, list[list[int]]]:
    """corpus -> for each probability bin, [rule relations, of them gold]."""
    from kgr.learn import relations as learn

    gold = {
        (d.corpus.name, doc): {(r["src"], r["rel"], r["dst"]) for r in d.corpus.relations.get(doc, [])}
        for d in data
        for doc in d.docs
    }
    out = {d.corpus.name: [[0, 0] for _ in range(BINS)] for d in data}
    said, _ = learn._readings(examples, probs)
    seen = set()
    for where, p, src, rel, dst in said:
        t = learn._triple(src, rel, dst)
        if (where, t) in seen:
            continue
        seen.add((where, t))
        row = out[where[0]][min(int(p * BINS), BINS - 1)]
        row[0] += 1
        row[1] += t in gold.get(where, ())
    return out


_NOISY: dict[int, tuple] = {}


def noisy_or_readings(examples, probs):
    """learn._readings, with each pair's candidates combined per relation and direction (kept
    per set of probabilities, as learn._readings keeps its own)."""
    from kgr.learn import relations as learn

    kept = _NOISY.get(id(probs))
    if kept is not None and kept[0] is probs:
        return kept[1]
    said, _ = ORIGINAL(examples, probs)
    per_pair: dict[tuple, dict[tuple, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for e, row in zip(examples, probs):
        key = (e.corpus, e.doc, *sorted((e.a[0], e.b[0])))
        for j, label in enumerate(learn.LABELS[1:], 1):
            rel, direction = label[:-1], label[-1]
            src, dst = (e.a, e.b) if direction == ">" else (e.b, e.a)
            allowed = e.allowed is None or label in e.allowed
            per_pair[key][(rel, src[0])].append((float(row[j]), src, dst, allowed))
    best = []
    for key, readings in per_pair.items():
        top = None
        for (rel, _), got in readings.items():
            miss = 1.0
            for p, *_ in got:
                miss *= 1.0 - p
            p, src, dst, allowed = max(got, key=lambda g: g[0])
            if top is None or 1.0 - miss > top[0]:
                top = (1.0 - miss, rel, src, dst, allowed)
        best.append((key, *top))
    _NOISY[id(probs)] = (probs, (said, best))
    return said, best


def decision_line(name, data, examples, kfold, left_out) -> str:
    from kgr.learn import relations as learn

    thresholds, veto, score = learn.best_threshold(data, examples, kfold, left_out)
    k = learn.pair_scores(data, examples, kfold, thresholds, veto)
    lo = learn.pair_scores(data, examples, left_out, thresholds, veto)
    chosen = {r: t for r, t in thresholds.items() if t <= 1.0}
    return f"{name:<9} mean {score:.4f} | {f1_line(k, lo)} | veto {veto} thresholds {chosen}"


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from kgr.learn import relations as learn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache")
    parser.add_argument("--probs", default=None, help="npz of the cross-validated probabilities (reused when present)")
    args = parser.parse_args(argv)
    with open(args.cache, "rb") as fh:
        data = pickle.load(fh)
    for d in data:
        for e in d.examples:
            e.view = None  # the sparse model alone
    if args.probs and Path(args.probs).exists():
        z = np.load(args.probs)
        examples, kfold, left_out = [e for d in data for e in d.examples], z["k"], z["l"]
    else:
        examples, kfold, left_out = sparse_probabilities(data)
        if args.probs:
            np.savez(args.probs, k=kfold, l=left_out)

    print("rule relations by the model's k-fold probability: gold / stated")
    for corpus, bins in rule_bins(data, examples, kfold).items():
        print(f"  {corpus:<14}" + " ".join(f"{b / BINS:.1f}:{g}/{n}" for b, (n, g) in enumerate(bins)))

    print("the decision over a pair's candidates (candidate-level F1)")
    learn._READINGS.clear()
    print(decision_line("max", data, examples, kfold, left_out))
    global ORIGINAL
    ORIGINAL = learn._readings
    learn._READINGS.clear()
    learn._readings = noisy_or_readings
    try:
        print(decision_line("noisy-or", data, examples, kfold, left_out))
    finally:
        learn._readings = ORIGINAL
    return 0


if __name__ == "__main__":
    sys.exit(main())
