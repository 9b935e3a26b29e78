"""Does the embedding model's view of a candidate help the relation classifier? Measured, side by side.

    python bench/relation_dense.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--dims 64] [--scale 1.0] [--folds 5]

Issue 13 suggests, besides the parse features, "cheaply, the embedding model's view of the
marked context". This runs the relation classifier's cross-validation (k-fold by document,
and each corpus left out; thresholds chosen on both, as kgr.learn.relations.crossvalidate
does) twice on the same candidates:

- ``sparse``: the shipped model's features alone;
- ``sparse+between``: the same, plus the default embedding model's vector of the words
  between the two names of a sentence or near candidate (up to ``MAX_BETWEEN_CHARS``; the
  phrase that states the relation, "is a village in", "is maintained by"), reduced by PCA
  fitted on each training split to ``--dims`` dimensions and scaled by ``--scale``. Other
  candidates (a section's subject, a table row) get zeros.

Prints candidate-level relation F1 (kgr.learn.relations.pair_scores, the quick figure, not
the pipeline's) per corpus for both, and how long embedding took: what extraction would pay
per candidate. Skips with a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MAX_BETWEEN_CHARS = 200


def between_texts(data, got) -> list[str]:
    """Per example of ``data`` (in order), the text between its two names, or "" when it has none."""
    out = []
    docs = {(d.corpus.name, doc) for d in data for doc in d.docs}
    names = [d.corpus.name for d in data]
    for name, collected in zip(names, got):
        for path, text, cands in collected:
            if (name, path) not in docs:
                continue
            for c in cands:
                first, second = sorted([(c.a.start, c.a.end), (c.b.start, c.b.end)])
                between = text[first[1] : second[0]].strip() if first[1] <= second[0] else ""
                usable = c.kind in ("sentence", "near") and len(between) <= MAX_BETWEEN_CHARS
                out.append(between if usable else "")
    return out


def embed(texts: list[str], cfg, log):
    import numpy as np

    from kgr.config import settings_of
    from kgr.embedders import get_embedder

    embedder = get_embedder(settings_of(cfg), purpose="document")
    unique = sorted({t for t in texts if t})
    started = time.perf_counter()
    vectors = np.asarray(embedder.embed_documents(unique), dtype=np.float32)
    seconds = time.perf_counter() - started
    log(f"embedded {len(unique)} distinct texts of {len(texts)} candidates in {seconds:.0f} s")
    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    index = {t: i for i, t in enumerate(unique)}
    for row, t in enumerate(texts):
        if t:
            out[row] = vectors[index[t]]
    return out, seconds, len(unique)


def crossvalidate(data, examples, dense, *, folds: int, dims: int, scale: float, log):
    """Out-of-fold and left-out-corpus label probabilities, with or without the dense columns."""
    import numpy as np
    from scipy.sparse import csr_matrix, hstack
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression

    from kgr.learn import relations as learn
    from kgr.stages.relmodel import LABELS

    def fit_predict(train_rows: list[int], test_rows: list[int]):
        train_rows = [i for i in train_rows if examples[i].label is not None]
        train = [examples[i] for i in train_rows]
        vocabulary = learn.features_of(train)
        X_train = learn.design_matrix(vocabulary, train)
        X_test = learn.design_matrix(vocabulary, [examples[i] for i in test_rows])
        if dense is not None:
            D_train, D_test = dense[train_rows], dense[test_rows]
            filled = np.abs(D_train).sum(axis=1) > 0
            pca = PCA(dims, random_state=0).fit(D_train[filled])
            unit = scale / np.sqrt(pca.explained_variance_[0])

            def reduce(D):
                out = np.zeros((len(D), dims), dtype=np.float32)
                rows = np.abs(D).sum(axis=1) > 0
                if rows.any():
                    out[rows] = pca.transform(D[rows]) * unit
                return csr_matrix(out)

            X_train = hstack([X_train, reduce(D_train)]).tocsr()
            X_test = hstack([X_test, reduce(D_test)]).tocsr()
        clf = LogisticRegression(C=learn.DEFAULT_C, max_iter=learn.MAX_ITER, tol=1e-4)
        clf.fit(X_train, [e.label for e in train], sample_weight=learn.corpus_weights(train))
        probs = np.zeros((len(test_rows), len(LABELS)), dtype=np.float32)
        for k, p in zip(clf.classes_, clf.predict_proba(X_test).T):
            probs[:, LABELS.index(k)] = p
        return probs

    fold = learn.folds_of(data, folds)
    kfold = np.zeros((len(examples), len(LABELS)), dtype=np.float32)
    for f in range(folds):
        test = [i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] == f]
        kfold[test] = fit_predict([i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] != f], test)
        log(f"fold {f + 1}/{folds}")
    left_out = np.zeros_like(kfold)
    for d in data:
        test = [i for i, e in enumerate(examples) if e.corpus == d.corpus.name]
        left_out[test] = fit_predict([i for i, e in enumerate(examples) if e.corpus != d.corpus.name], test)
        log(f"left out {d.corpus.name}")
    return kfold, left_out


def cell(score: dict) -> str:
    return f"{score['f1']:.3f} ({score['precision']:.2f}/{score['recall']:.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", action="append", required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--dims", type=int, default=64)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0

    from kgr import config as config_mod
    from kgr.learn import relations as learn
    from kgr.stages.relmodel import collecting

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    cfg = config_mod.load()
    data, got = [], []
    for g in args.golden:
        with collecting() as collected:  # the documents' text and candidates, in collect's order
            data.append(learn.collect(g, cfg, progress=log))
        got.append(collected)
    examples = [e for d in data for e in d.examples]
    texts = between_texts(data, got)
    assert len(texts) == len(examples), "collect() and the candidates it was given disagree"
    dense, seconds, distinct = embed(texts, cfg, log)
    print(f"{len(examples)} candidates, {distinct} distinct between-texts embedded in {seconds:.0f} s")
    print(f"{'variant':<16}{'setting':<10}" + "".join(f"{d.corpus.name:>22}" for d in data))
    for variant, matrix in (("sparse", None), ("sparse+between", dense)):
        kfold, left_out = crossvalidate(
            data, examples, matrix, folds=args.folds, dims=args.dims, scale=args.scale, log=log
        )
        threshold, veto, _ = learn.best_threshold(data, examples, kfold, left_out)
        for setting, probs in (("k-fold", kfold), ("left out", left_out)):
            scores = learn.pair_scores(data, examples, probs, threshold, veto)
            cells = "".join(f"{cell(s):>22}" for s in scores.values())
            print(f"{variant:<16}{setting:<10}{cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
