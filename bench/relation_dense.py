"""Does the embedding model's view of a candidate help the relation classifier? Measured, side by side.

    python bench/relation_dense.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--variants sparse,logistic:between,mlp:mentions,mean:mentions] \
        [--dims 64] [--scale 1.0] [--folds 5]

Issue 13 suggests, besides the parse features, "cheaply, the embedding model's view of the
marked context". This runs the relation classifier's cross-validation (k-fold by document,
and each corpus left out; thresholds chosen on both, as kgr.learn.relations.crossvalidate
does) on the same candidates for each of ``--variants``:

- ``sparse``: the shipped model, a logistic regression on its string features.
- a head on a view, ``HEAD:VIEW``. The views:
  - ``between``: the default embedding model's sentence vector of the words between the two
    names of a sentence or near candidate (up to ``MAX_BETWEEN_CHARS``; the phrase that
    states the relation, "is a village in", "is maintained by"). Other candidates (a
    section's subject, a table row) get zeros.
  - ``mentions``: the same model read in context. Each candidate's evidence (its sentence,
    the sentences of a near pair, a table row) goes through the model's transformer once,
    and the token states over each of its two names are averaged: two vectors, side by
    side, that know what the sentence says around each name. A name outside the evidence
    (a page's subject) gets zeros.
  The heads:
  - ``logistic``: the sparse model with the view added as columns, reduced by PCA fitted on
    each training split to ``--dims`` dimensions and scaled by ``--scale``;
  - ``mlp``: a one-hidden-layer network (torch) on the view, the product of its two halves,
    and the candidate's kind, types and block as one-hot columns, and nothing else;
  - ``mean``: the mean of the sparse model's and the mlp's probabilities;
  - ``cascade``: the mean where the sparse model gives some relation at least ``CASCADE``,
    the sparse model's alone elsewhere (what extraction can afford: the view is read only
    for those candidates).

Prints candidate-level relation F1 (kgr.learn.relations.pair_scores, the quick figure, not
the pipeline's) per corpus for each, and how long the model took: what extraction would pay.
Skips with a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MAX_BETWEEN_CHARS = 200
VIEWS = ("between", "mentions")
HEADS = ("logistic", "mlp", "mean", "cascade")  # mean: of the sparse logistic model's and the mlp's probabilities
CASCADE = 0.05  # cascade: the mean only where the sparse model gives a relation at least this, else the sparse


def candidates_in_order(data, got):
    """(document text, candidate) per example of ``data``, in the order collect() made them."""
    docs = {(d.corpus.name, doc) for d in data for doc in d.docs}
    for d, collected in zip(data, got):
        for path, text, cands in collected:
            if (d.corpus.name, path) in docs:
                for c in cands:
                    yield text, c


def between_texts(data, got) -> list[str]:
    """Per example of ``data`` (in order), the text between its two names, or "" when it has none."""
    out = []
    for text, c in candidates_in_order(data, got):
        first, second = sorted([(c.a.start, c.a.end), (c.b.start, c.b.end)])
        between = text[first[1] : second[0]].strip() if first[1] <= second[0] else ""
        usable = c.kind in ("sentence", "near") and len(between) <= MAX_BETWEEN_CHARS
        out.append(between if usable else "")
    return out


def evidence_spans(data, got) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """Per example of ``data`` (in order), its evidence text and its two names' offsets in it."""
    from kgr.stages.relview import evidence_of

    return [evidence_of(text, c) for text, c in candidates_in_order(data, got)]


def mention_vectors(evidence, log):
    """The default model's token states averaged over each name, in its evidence (kgr.stages.relview,
    what extraction reads): (a | b) per example, the seconds it took and the distinct texts read."""
    from kgr.stages.relview import MentionReader

    reader = MentionReader.load()
    distinct = len({w for w, _, _ in evidence})
    started = time.perf_counter()
    out = reader.vectors(evidence)
    seconds = time.perf_counter() - started
    log(f"read {distinct} distinct evidence texts in {seconds:.0f} s")
    return out, seconds, distinct


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


def logistic_head(examples, dense, *, dims: int, scale: float):
    """fit_predict of the shipped model's logistic regression, with ``dense`` columns reduced by PCA when given."""
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

    return fit_predict


def mlp_head(examples, dense):
    """fit_predict of the dense head kgr ships (kgr.learn.relations.fit_dense: a one-hidden-layer
    network on the two name vectors of ``dense``, their product, and the candidate's kind, types
    and block as one-hot columns), here on any view."""
    from kgr.learn import relations as learn

    def fit_predict(train_rows: list[int], test_rows: list[int]):
        train = [examples[i] for i in train_rows]
        for e, i in zip(train, train_rows):
            e.view = dense[i]  # this head's view (fit_dense reads each example's)
        head = learn.fit_dense(train)
        return head.probabilities(dense[test_rows], [examples[i].features for i in test_rows])

    return fit_predict


def crossvalidate(data, examples, fit_predict, *, folds: int, log):
    """Out-of-fold and left-out-corpus label probabilities of one ``fit_predict(train_rows, test_rows)``."""
    import numpy as np

    from kgr.learn import relations as learn
    from kgr.stages.relmodel import LABELS

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
    parser.add_argument(
        "--variants",
        default="sparse,logistic:between",
        help="comma-separated: sparse (the shipped features alone) and HEAD:VIEW, HEAD one of "
        f"{', '.join(HEADS)} and VIEW one of {', '.join(VIEWS)}",
    )
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        head, _, view = v.partition(":")
        if v != "sparse" and (head not in HEADS or view not in VIEWS):
            parser.error(f"unknown variant {v!r}: sparse, or HEAD:VIEW with HEAD in {HEADS} and VIEW in {VIEWS}")
    views = {v.partition(":")[2] for v in variants if v != "sparse"}
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0

    import numpy as np

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
    vectors = {}
    if "between" in views:
        texts = between_texts(data, got)
        assert len(texts) == len(examples), "collect() and the candidates it was given disagree"
        vectors["between"], seconds, distinct = embed(texts, cfg, log)
        print(f"{len(examples)} candidates, {distinct} distinct between-texts embedded in {seconds:.0f} s")
    if "mentions" in views:
        evidence = evidence_spans(data, got)
        assert len(evidence) == len(examples), "collect() and the candidates it was given disagree"
        vectors["mentions"], seconds, distinct = mention_vectors(evidence, log)
        print(f"{len(examples)} candidates, {distinct} distinct evidence texts read in context in {seconds:.0f} s")
    print(f"{'variant':<18}{'setting':<10}" + "".join(f"{d.corpus.name:>22}" for d in data))
    done: dict[str, tuple] = {}

    def probabilities(variant: str) -> tuple:
        if variant not in done:
            head, _, view = variant.partition(":")
            if variant == "sparse":
                fit_predict = logistic_head(examples, None, dims=args.dims, scale=args.scale)
            elif head == "logistic":
                fit_predict = logistic_head(examples, vectors[view], dims=args.dims, scale=args.scale)
            elif head == "mlp":
                fit_predict = mlp_head(examples, vectors[view])
            else:  # mean, cascade
                (sk, sl), (mk, ml) = probabilities("sparse"), probabilities(f"mlp:{view}")
                if head == "mean":
                    done[variant] = ((sk + mk) / 2, (sl + ml) / 2)
                else:
                    done[variant] = tuple(
                        np.where(s[:, 1:].max(axis=1, keepdims=True) >= CASCADE, (s + m) / 2, s)
                        for s, m in ((sk, mk), (sl, ml))
                    )
                return done[variant]
            done[variant] = crossvalidate(data, examples, fit_predict, folds=args.folds, log=log)
        return done[variant]

    for variant in variants:
        kfold, left_out = probabilities(variant)
        threshold, veto, _ = learn.best_threshold(data, examples, kfold, left_out)
        for setting, probs in (("k-fold", kfold), ("left out", left_out)):
            scores = learn.pair_scores(data, examples, probs, threshold, veto)
            cells = "".join(f"{cell(s):>22}" for s in scores.values())
            print(f"{variant:<18}{setting:<10}{cells}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
