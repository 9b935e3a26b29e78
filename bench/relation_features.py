"""Which feature families the relation classifier gains from, on the candidates of a cache.

    python bench/relation_features.py CACHE.pkl [VARIANT ...]

CACHE.pkl is what `bench/relation_losses.py --cache CACHE.pkl` writes (the collected, labelled
candidates of its --golden folders). Each variant rewrites every candidate's features, then the
sparse model alone (no dense head: quick) is cross-validated as kgr.learn.relations does, 5-fold
by document and each corpus left out, and scored at candidate level (learn.pair_scores) with the
one global threshold that gives the best mean F1 over both settings. Variants, joined with "+":

- ``base``: the features as collected;
- ``drop:P1,P2``: without the features whose name starts with one of these prefixes;
- ``nolt``: without the learned types (lt=, lta=, ltb= and kind|lt=): the features before them;
- ``ltonly``: without the extractor's own types (t=, ta=, tb= and their conjunctions);
- ``gold``: plus the gold entity types of both ends (an oracle: what perfect types could add);
- ``goldonly``: the gold types instead of the extractor's own.

Reporting only: nothing is tuned or shipped from it.
"""

from __future__ import annotations

import copy
import pickle
import sys
import time


def rewrite(features: list[str], variant: str, example, gold_types: dict) -> list[str]:
    out = features
    for part in variant.split("+"):
        if part == "base":
            continue
        if part.startswith("drop:"):
            prefixes = tuple(part[5:].split(","))
            out = [f for f in out if not f.startswith(prefixes)]
        elif part == "nolt":
            out = [f for f in out if f.split("=", 1)[0] not in ("lt", "lta", "ltb") and "|lt=" not in f]
        elif part == "ltonly":
            out = [f for f in out if f.split("=", 1)[0] not in ("t", "ta", "tb") and "|t=" not in f]
        elif part in ("gold", "goldonly"):
            types = gold_types[example.corpus]
            ga, gb = types.get(example.a[1]) or "NA", types.get(example.b[1]) or "NA"
            kind = next(f for f in out if f.startswith("k=") and "|" not in f)
            if part == "goldonly":
                out = [f for f in out if f.split("=", 1)[0] not in ("t", "ta", "tb") and "|t=" not in f]
            out = out + [f"gt={ga}|{gb}", f"gta={ga}", f"gtb={gb}", f"{kind}|gt={ga}|{gb}"]
        else:
            raise SystemExit(f"unknown variant part {part!r}")
    return out


def sparse_probabilities(data):
    """(examples, k-fold probabilities, left-out probabilities) of the sparse model alone, cross-
    validated as kgr.learn.relations does: 5-fold by document, and each corpus left out."""
    import numpy as np

    from kgr.learn import relations as learn

    examples = [e for d in data for e in d.examples]
    fold = learn.folds_of(data, learn.FOLDS)
    scopes = learn.scopes_of(data)
    kfold = np.zeros((len(examples), len(learn.LABELS)), dtype=np.float32)
    for f in range(learn.FOLDS):
        model = learn.fit([e for e in examples if fold[(e.corpus, e.doc)] != f], dense=False, scopes=scopes)
        test = [i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] == f]
        kfold[test] = model.probabilities([examples[i].features for i in test])
    left_out = np.zeros_like(kfold)
    for d in data:
        model = learn.fit([e for e in examples if e.corpus != d.corpus.name], dense=False, scopes=scopes)
        test = [i for i, e in enumerate(examples) if e.corpus == d.corpus.name]
        left_out[test] = model.probabilities([examples[i].features for i in test])
    return examples, kfold, left_out


def run(data, variant: str) -> str:
    from kgr.learn import relations as learn

    gold_types = {d.corpus.name: d.corpus.entity_types for d in data}
    variant_data = []
    for d in data:
        d2 = copy.copy(d)
        d2.examples = []
        for e in d.examples:
            e2 = copy.copy(e)
            e2.features = rewrite(e.features, variant, e, gold_types)
            e2.view = None
            d2.examples.append(e2)
        variant_data.append(d2)
    started = time.perf_counter()
    examples, kfold, left_out = sparse_probabilities(variant_data)
    best = None
    for threshold in learn.THRESHOLDS:
        k = learn.pair_scores(variant_data, examples, kfold, threshold)
        lo = learn.pair_scores(variant_data, examples, left_out, threshold)
        mean = (sum(v["f1"] for v in k.values()) + sum(v["f1"] for v in lo.values())) / (2 * len(k))
        if best is None or mean > best[0]:
            best = (mean, threshold, k, lo)
    mean, threshold, k, lo = best
    return (
        f"{variant:<24} threshold {threshold:.2f}  mean {mean:.4f} | {f1_line(k, lo)}"
        f"  ({time.perf_counter() - started:.0f} s)"
    )


def f1_line(kfold: dict, left_out: dict) -> str:
    """Each corpus's candidate-level F1, k-fold then left out, on one line."""
    return (
        "k-fold "
        + " ".join(f"{n} {v['f1']:.3f}" for n, v in kfold.items())
        + " | left out "
        + " ".join(f"{n} {v['f1']:.3f}" for n, v in left_out.items())
    )


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], "rb") as fh:
        data = pickle.load(fh)
    for variant in argv[1:] or ["base"]:
        print(run(data, variant), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
