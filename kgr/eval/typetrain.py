"""Train the entity-type model (:mod:`kgr.stages.entitytypes`) from annotated corpora.

    python -m kgr.eval.typetrain train --golden ../shared/golden --golden ../shared/golden2 \\
        --out kgr/stages/models/types.json

Each corpus (a golden folder: docs/ and annotations/, see its README) is ingested into a
scratch database with the type model switched off (types by vote), so that the training data
does not depend on the model being replaced. Every predicted mention is read back with its
features and the words around it; a mention that matches a gold mention (document, surface,
n) carries the gold entity's type. A predicted entity is one example: its mentions' features
averaged, labelled by the gold type most of its matched mentions have, weighted by how many
they are (typing is scored per mention). scikit-learn fits the model (training only; the
package infers with numpy). Deterministic: same corpora, same weights.
"""

from __future__ import annotations

import argparse
import collections
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import orjson

from kgr.stages import entitytypes
from kgr.stages.extract import TYPES

C_DEFAULT = 0.5  # inverse regularisation strength, chosen by cross-validation (bench/cv_types.py)
MIN_FEATURE_ENTITIES = 2  # a feature seen in fewer training entities is dropped
# What a name's head word says of its type ("Release Team", "Access Control Policy": the
# feature "headtype=T" of kgr.stages.entitytypes), as one weight shared by every type rather
# than one learned per type. A corpus teaches weights only for the head words it has: golden
# names no team "... Team" and golden2 no "... Service", so a model trained on one gave no
# weight to the other's and typed "Release Team" a service. Chosen with bench/cv_types.py
# with each corpus held out of training (each of the two alone picks 6): golden held out
# 0.539 -> 0.719, golden2 0.574 -> 0.634; 5-fold inside each 0.814 -> 0.802, 0.862 -> 0.864.
AGREEMENT = {"headtype": 6.0}


@dataclass
class Mention:
    doc: str
    entity: int | None
    raw: tuple  # (surface, type, source, features, words around): what entitytypes.mention_features reads
    gold: str | None = None  # gold entity id, when the mention matches a gold mention
    gold_type: str | None = None
    entity_type: str | None = None  # the type the pipeline gave the mention's entity
    corpus: str = ""  # entity ids are one database's: (corpus, entity) names an entity across corpora

    @property
    def key(self) -> tuple[str, int] | None:
        return None if self.entity is None else (self.corpus, self.entity)

    @property
    def feats(self) -> list[str]:
        return entitytypes.mention_features(*self.raw)


@dataclass
class Corpus:
    name: str
    mentions: list[Mention] = field(default_factory=list)

    @property
    def docs(self) -> list[str]:
        return sorted({m.doc for m in self.mentions})


def _jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def collect(golden: str | Path, *, db: str | Path | None = None, config=None) -> Corpus:
    """Ingest a golden corpus (type model off) and read back its mentions, features and gold types."""
    from kgr import config as config_mod
    from kgr.ingest.pipeline import ingest
    from kgr.store.lock import writing

    golden = Path(golden)
    cfg = config if config is not None else config_mod.load()
    with tempfile.TemporaryDirectory(prefix="kgr-types-") as tmp:
        path = Path(db) if db is not None else Path(tmp) / "golden.sqlite"
        with entitytypes.model(None), writing(path) as store:
            ingest([str(golden / "docs")], store, config=cfg)
            return read(store, golden / "annotations", golden.name)


def labels(ann: Path) -> dict[str, str]:
    """Each annotated entity's type, when it is one of kgr's: a corpus type outside them (Re-DocRED's
    MISC) is no label, or the model would learn to give it."""
    return {e["id"]: e["type"] for e in _jsonl(Path(ann) / "entities.jsonl") if e.get("type") in TYPES}


def read(store, ann: Path, name: str = "") -> Corpus:
    """The mentions of an ingested corpus, matched to its annotations as `kgr eval extraction` matches them."""
    from kgr.eval.extraction import occurrence_index

    gold_mentions = _jsonl(ann / "mentions.jsonl")
    gold_types = labels(ann)
    gold_key = {(m["doc"], m["surface"], m["n"]): m["entity"] for m in gold_mentions}
    coref_docs = {m["doc"] for m in gold_mentions if m.get("kind", "name") != "name"}
    texts = dict(store.query("SELECT path, text FROM docs WHERE status='ok'"))
    etypes = dict(store.query("SELECT id, type FROM entities"))
    corpus = Corpus(name)
    common: dict[str, frozenset[str]] = {}
    seen = set()
    rows = store.query(
        'SELECT d.path, c.start + m.start, c.start + m."end", m.entity_id, m.surface, m.type, m.source, m.features '
        "FROM mentions m JOIN chunks c ON c.id = m.chunk_id JOIN docs d ON d.id = m.doc_id ORDER BY d.path, 2"
    )
    for path, start, end, eid, surface, mtype, source, features in rows:
        if start is None or (path, start, end) in seen:
            continue
        seen.add((path, start, end))
        text = texts.get(path, "")
        if path not in common:
            common[path] = entitytypes.lower_words(text)
        feats = orjson.loads(features or "{}")
        if source != "coref":
            feats["common"] = entitytypes.commonness(surface, common[path])
        raw = (surface, mtype, source, feats, entitytypes.context(text, start, end))
        gold = None
        if source != "coref" or path in coref_docs:
            n = occurrence_index(text, text[start:end], start)
            gold = gold_key.get((path, text[start:end], n)) if n is not None else None
        corpus.mentions.append(
            Mention(path, eid, raw, gold, gold_types.get(gold) if gold else None, etypes.get(eid), corpus=name)
        )
    return corpus


def examples(mentions: Iterable[Mention]) -> list[tuple[dict[str, float], str | None, int, tuple[str, int]]]:
    """(entity features, gold type or None, matched mentions, (corpus, entity id)) per predicted entity."""
    by_entity: dict[tuple[str, int], list[Mention]] = collections.defaultdict(list)
    for m in mentions:
        if m.key is not None:
            by_entity[m.key].append(m)
    out = []
    for eid in sorted(by_entity):
        ms = by_entity[eid]
        counts: dict[str, float] = {}
        for m in ms:
            entitytypes.add_mention(counts, m.feats)
        golds = collections.Counter(m.gold for m in ms if m.gold)
        label = None
        if golds:
            best = golds.most_common(1)[0][0]
            label = next(m.gold_type for m in ms if m.gold == best)
        out.append((entitytypes.entity_features(counts, len(ms)), label, sum(golds.values()), eid))
    return out


def views(feats: dict[str, float]) -> list[dict[str, float]]:
    """The entity as the model sees it, and as it would with only its context, or only its
    surface: trained on all three, the model learns what each view says alone, so that the
    context ("the X team", "X leads") decides when a name's spelling is new."""
    ctx = {k: v for k, v in feats.items() if k.startswith(entitytypes.CONTEXT_PREFIXES) or k.startswith("n=")}
    surf = {k: v for k, v in feats.items() if k not in ctx or k.startswith("n=")}
    return [feats, ctx, surf]


def fit(mentions: Iterable[Mention], *, C: float = C_DEFAULT, augment: bool = True) -> dict:
    """The model (``entitytypes.Typer`` format) fitted on the labelled entities of ``mentions``."""
    import numpy as np
    from scipy.sparse import lil_matrix
    from sklearn.linear_model import LogisticRegression

    exs = [(f, y, w) for f, y, w, _ in examples(mentions) if y]
    if augment:
        exs = [(v, y, w * share) for f, y, w in exs for v, share in zip(views(f), (1.0, 0.5, 0.5))]
    seen = collections.Counter(k for f, _, _ in exs for k in f)
    names = sorted(k for k, n in seen.items() if n >= MIN_FEATURE_ENTITIES)
    index = {k: i for i, k in enumerate(names)}
    X = lil_matrix((len(exs), len(names)))
    for r, (f, _, _) in enumerate(exs):
        for k, v in f.items():
            if k in index:
                X[r, index[k]] = v
    y = [lab for _, lab, _ in exs]
    w = np.array([math.sqrt(1.0 + wt) for _, _, wt in exs])
    clf = LogisticRegression(C=C, max_iter=5000, random_state=0)
    clf.fit(X.tocsr(), y, sample_weight=w)
    types = [str(t) for t in clf.classes_]
    W = clf.coef_.T  # features x types
    if len(types) == 2:  # binary: sklearn keeps one row
        W = np.hstack([-W / 2, W / 2])
    keep = [i for i in range(len(names)) if np.abs(W[i]).max() >= 1e-3]
    bias = clf.intercept_ if len(types) > 2 else np.array([-clf.intercept_[0] / 2, clf.intercept_[0] / 2])
    return {
        "types": types,
        "features": [names[i] for i in keep],
        "weights": [[round(float(v), 4) for v in W[i]] for i in keep],
        "bias": [round(float(v), 4) for v in bias],
        "agreement": dict(AGREEMENT),
    }


def predict(model: dict, mentions: Iterable[Mention]) -> dict[tuple[str, int], str]:
    """(corpus, entity id) -> type, from the features of the given mentions only."""
    typer = entitytypes.Typer(model)
    return {eid: typer.predict(f)[0] for f, _, _, eid in examples(mentions)}


def accuracy(types: dict[tuple[str, int], str], mentions: Iterable[Mention]) -> tuple[int, int, dict[str, list[int]]]:
    """(right, scored, {gold type: [right, scored]}) over the matched mentions."""
    right = total = 0
    by_type: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for m in mentions:
        if m.gold_type is None or m.key is None:
            continue
        ok = types.get(m.key) == m.gold_type
        right += ok
        total += 1
        by_type[m.gold_type][0] += ok
        by_type[m.gold_type][1] += 1
    return right, total, dict(by_type)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgr.eval.typetrain", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    train = sub.add_parser("train", help="fit the entity-type model on golden folders and write its weights")
    train.add_argument("--golden", action="append", required=True, help="a folder with docs/ and annotations/")
    train.add_argument("--out", default=str(entitytypes.MODEL_FILE), help="where to write the weights (JSON)")
    train.add_argument("--C", type=float, default=C_DEFAULT, help="inverse regularisation strength")
    args = parser.parse_args(argv)
    mentions = []
    for k, g in enumerate(args.golden):
        for m in collect(g).mentions:
            m.corpus = f"{k}:{m.corpus}"  # two folders of one name are still two corpora
            mentions.append(m)
    model = fit(mentions, C=args.C)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_bytes(orjson.dumps(model) + b"\n")
    print(f"{args.out}: {len(model['features'])} features, {len(model['types'])} types")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
