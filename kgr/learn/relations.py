"""Training the relation classifier of :mod:`kgr.stages.relmodel`, and cross-validating it.

``kgr train relations --golden A --golden B ... --out FILE`` ingests each annotated folder
into a scratch database (no vectors), collects the candidates extraction makes for every
document, labels them from the annotation, and fits a multinomial logistic regression
(scikit-learn's objective, minimised by scipy's L-BFGS: :func:`fit_softmax`) on their
features and a small network (torch, :func:`fit_dense`) on each candidate's two names as
the default embedding model reads them in the evidence (:mod:`kgr.stages.relview`).
Extraction averages the two for the candidates the logistic model finds plausible
(``RelationModel.cascade``), and so do the cross-validated predictions the thresholds are
chosen on. The labels:

- a candidate whose two ends are annotated mentions of two entities the document relates
  is labelled with that relation and its direction, when the candidate lies in the
  relation's evidence (or the evidence cannot be found in kgr's text); a candidate of a
  related pair outside the evidence is left out of training (it may or may not say it);
- any other candidate is "none", except, in a corpus whose ``scope.json`` limits what it
  annotates, a candidate with an end that is no annotated entity (it cannot be judged);
- in a corpus whose ``scope.json`` names the relation types it annotates, "none" means none
  of those: such a candidate's target is "none" or any relation outside them
  (:func:`targets`), so Re-DocRED's thousands of unrelated pairs do not teach the model that
  the way a sentence states ``uses`` or ``refers_to`` states nothing.

The features read each name's type as the entity-type model decides it over the document's
mentions (:func:`kgr.stages.relmodel.document_types`). That model is trained on the typed
corpora themselves, so each typed folder is collected with a type model trained on the other
typed folders only (:func:`left_out_typers`): the types a document's candidates carry, in
training and in cross-validation alike, come from a model that never read it, as they will on
a user's corpus.

Corpora are weighted so that a large one does not drown a small one (each example weighs
``(total / (corpora * its corpus' examples)) ** BALANCE``). The decision thresholds are
chosen on predictions for documents the model was not trained on, so the shipped model's
are chosen out of sample too. Two kinds of such prediction count alike: k-fold by document
(a new document from a world the model has read) and, with several corpora, each corpus
left out (a new corpus, written in another world). The score is the mean relation F1 over
the corpora, on the predictions extraction would keep (what the model adds alone fits the
relation's signature), counting what ``kgr eval extraction`` judges (a corpus's
``scope.json`` relation types only). Where that score is flat, each relation's threshold is
the highest within ``TOLERANCE`` of the best: a relation the model would add alone, at no
measured gain, is not claimed (what cross-validation cannot tell apart should not turn
into edges on a corpus nobody checked).

The same k-fold predictions calibrate the confidence a relation carries (:func:`calibration`):
what a probability has meant, for a relation a rule states and for one the model adds alone.
The model's probability of a rule's relation says little of how often it holds (a rule's
relation the model gives 0.1 held about half the time in the golden corpora), and graph mode
follows only edges of some confidence.
"""

from __future__ import annotations

import collections
import contextlib
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from kgr.learn.corpus import Corpus, locate, read_corpus
from kgr.stages.relations import types_ok
from kgr.stages.relmodel import (
    LABELS,
    NEVER,
    NONE,
    VOCABULARY,
    DenseHead,
    RelationModel,
    alone_threshold,
    collecting,
    log_odds,
    name_of,
    typing_with,
)
from kgr.stages.relview import default_reader, evidence_of, marked

IGNORE = None
BALANCE = 0.5
DEFAULT_C = 0.5
MIN_COUNT = 2  # features seen fewer times in training are dropped
FOLDS = 5
SEED = 13
MAX_ITER = 300
# the dense head (a network with one hidden layer on the candidate's names read in context):
DENSE_HIDDEN = 256
DENSE_EPOCHS = 8
DENSE_BATCH = 512
DENSE_SEED = 0
# the pair reader (the default model's transformer fine-tuned through adapters, kgr.stages.relview):
# it learns from every related candidate (at most READER_POSITIVES per corpus) and
# READER_NEGATIVES times as many unrelated ones, for READER_EPOCHS passes
READER_POSITIVES = 3000
READER_NEGATIVES = 3.0
READER_EPOCHS = 1.0
READER_BATCH = 16
READER_LR = 5e-4
READER_SEED = 0
THRESHOLDS = [round(0.05 * k, 2) for k in range(1, 20)]
VETOES = [0.0, 0.01, 0.02, 0.05, 0.1]
# mean relation F1 that choosing thresholds may give up to claim fewer relations: in a mean
# over three corpora, two or three relations of a 250-relation corpus
TOLERANCE = 0.002


@dataclass
class Example:
    corpus: str
    doc: str
    features: list[str]
    label: str | None
    a: tuple[str, str | None]  # (name, gold entity)
    b: tuple[str, str | None]
    evidence: tuple[int, int] = (0, 0)
    # the labels the pipeline keeps when the model gives them alone (the relation's signature,
    # :func:`kgr.stages.relations.types_ok`); None: any
    allowed: frozenset[str] | None = None
    # the candidate's dense view (kgr.stages.relview: its two names read in context); None: not read
    view: Any = None
    # its evidence text and the two names' offsets in it (kgr.stages.relview.evidence_of)
    window: Any = None


@dataclass
class CorpusData:
    corpus: Corpus
    examples: list[Example] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    typer: Any = "default"  # the type model its features read (see :func:`collect`)

    def typing(self):
        """A context in which extraction reads the types this corpus's features were collected with."""
        return contextlib.nullcontext() if self.typer == "default" else typing_with(lambda path: self.typer)


def collect(
    root: str | Path,
    config=None,
    *,
    progress: Callable[[str], None] | None = None,
    views: bool = True,
    typer: Any = "default",
) -> CorpusData:
    """Ingest an annotated folder into a scratch database and label the candidates extraction
    made; with ``views``, read each candidate's dense view (what the dense head learns from).
    ``typer``: the type model whose types the candidates' features read (an
    ``entitytypes.Typer``, None for none; "default": the packaged one)."""
    from kgr import config as config_mod
    from kgr.ingest.pipeline import ingest
    from kgr.store.lock import writing

    corpus = read_corpus(root)
    cfg = config if config is not None else config_mod.load()
    data = CorpusData(corpus, typer=typer)
    with tempfile.TemporaryDirectory(prefix="kgr-train-") as tmp, collecting() as got:
        with writing(Path(tmp) / "train.sqlite") as store, data.typing():
            ingest([str(corpus.root / "docs")], store, config=cfg, embed=False)
    if progress:
        progress(f"{corpus.name}: {len(got)} documents read")
    evidence = []
    for path, text, cands in got:
        if path not in corpus.mentions and path not in corpus.relations:
            continue
        data.docs.append(path)
        gold = locate(text, corpus, path)
        for c in cands:
            label = _label(corpus, gold, c)
            ga = _entity(gold, c.a)
            gb = _entity(gold, c.b)
            ends = ((name_of(c.a), ga), (name_of(c.b), gb))
            evidence.append(evidence_of(text, c))
            data.examples.append(
                Example(
                    corpus.name,
                    path,
                    c.features,
                    label,
                    *ends,
                    (c.start, c.end),
                    allowed=signature_ok(c),
                    window=evidence[-1],
                )
            )
    if views and data.examples:
        reader = default_reader()
        if reader is not None:
            for e, v in zip(data.examples, reader.vectors(evidence)):
                e.view = v
            if progress:
                progress(f"{corpus.name}: {len(evidence)} candidates read in context")
    return data


def left_out_typers(roots: Iterable[str | Path], config=None, progress=None) -> dict[str, Any]:
    """For each annotated folder that types every entity (no ``entity_types`` in its scope.json: the
    kind the packaged type model is trained on), a type model trained on the other such folders
    (:mod:`kgr.eval.typetrain`), so that the types its candidates' features read come from a model
    that never saw its documents, in training as in cross-validation. A folder whose scope limits
    the types (Re-DocRED's four) is left to the packaged model, which is not trained on it; so is
    a typed folder with no other typed folder beside it. Keyed by the folder's resolved path."""
    from kgr.eval import typetrain
    from kgr.stages.entitytypes import Typer

    typed = [Path(r).resolve() for r in roots if read_corpus(r).scope.entity_types is None]
    if len(typed) < 2:
        return {}
    mentions = {}
    for k, root in enumerate(typed):
        got = typetrain.collect(root, config=config).mentions
        for m in got:
            m.corpus = f"{k}:{m.corpus}"
        mentions[root] = got
        if progress:
            progress(f"{root.name}: {len(got)} mentions read for typing")
    return {
        str(root): Typer(typetrain.fit([m for other, ms in mentions.items() if other != root for m in ms]))
        for root in typed
    }


def collect_all(
    roots: Iterable[str | Path], config=None, *, progress: Callable[[str], None] | None = None, views: bool = True
) -> list[CorpusData]:
    """:func:`collect` of every folder, each reading the types of :func:`left_out_typers`."""
    roots = list(roots)
    typers = left_out_typers(roots, config, progress)
    return [
        collect(r, config, progress=progress, views=views, typer=typers.get(str(Path(r).resolve()), "default"))
        for r in roots
    ]


def signature_ok(c) -> frozenset[str]:
    """The labels of a candidate whose two ends fit the relation's signature, each way round."""
    return frozenset(
        label for label in LABELS[1:] if types_ok(label[:-1], *((c.a, c.b) if label[-1] == ">" else (c.b, c.a)))
    )


def _entity(gold, sp) -> str | None:
    ent = gold.entity_at(sp.start, sp.end)
    if ent is None and sp.refers is not None and sp.ref_start is not None:
        ent = gold.entity_at(sp.ref_start, sp.ref_start + len(sp.refers))
    return ent


def _inside(sp, where: tuple[int, int]) -> bool:
    return where[0] - 1 <= sp.start and sp.end <= where[1] + 1


def _label(corpus: Corpus, gold, c) -> str | None:
    ga, gb = _entity(gold, c.a), _entity(gold, c.b)
    scoped = corpus.scope.entity_types is not None
    if ga is None or gb is None:
        return IGNORE if scoped else NONE
    if ga == gb:
        return NONE
    if scoped and not {corpus.entity_types.get(ga), corpus.entity_types.get(gb)} <= corpus.scope.entity_types:
        return IGNORE
    related = False
    for src, rel, dst, where in gold.relations:
        if {src, dst} != {ga, gb}:
            continue
        related = True
        direction = ">" if (src, dst) == (ga, gb) else "<"
        if where is None or (_inside(c.b, where) and (c.kind == "subject" or _inside(c.a, where))):
            return f"{rel}{direction}"
    return IGNORE if related else NONE


# -- fitting ------------------------------------------------------------------------------------


def features_of(train: list[Example]) -> list[str]:
    """The features the model learns weights for: those of at least ``MIN_COUNT`` training examples."""
    counts = collections.Counter(f for e in train for f in set(e.features))
    return sorted(f for f, n in counts.items() if n >= MIN_COUNT)


def design_matrix(vocabulary: list[str], examples: list[Example]):
    """One sparse 0/1 row per example over ``vocabulary`` (a feature outside it is ignored)."""
    import numpy as np
    from scipy.sparse import csr_matrix

    index = {f: i for i, f in enumerate(vocabulary)}
    rows, cols = [], []
    for r, e in enumerate(examples):
        for f in set(e.features):
            i = index.get(f)
            if i is not None:
                rows.append(r)
                cols.append(i)
    return csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(len(examples), len(vocabulary)))


def corpus_weights(train: list[Example]):
    """Each example's weight, so that a large corpus does not drown a small one (``BALANCE``)."""
    import numpy as np

    sizes = collections.Counter(e.corpus for e in train)
    total = sum(sizes.values())
    return np.array([(total / (len(sizes) * sizes[e.corpus])) ** BALANCE for e in train])


def targets(train: list[Example], scopes: dict[str, frozenset[str] | None] | None = None):
    """Each example's acceptable labels (a boolean row over ``LABELS``): its label; and, for a
    "none" of a corpus whose ``scope.json`` names the relation types it annotates, every label
    of a relation outside them too. Such a corpus says a pair is none of *its* relations; whether
    one of the others holds it does not say (Re-DocRED annotates no ``uses``)."""
    import numpy as np

    unjudged = {  # per scoped corpus, the labels of the relations it does not annotate
        name: [j for j, label in enumerate(LABELS) if j and label[:-1] not in judged]
        for name, judged in (scopes or {}).items()
        if judged is not None
    }
    M = np.zeros((len(train), len(LABELS)), dtype=bool)
    for i, e in enumerate(train):
        M[i, LABELS.index(e.label)] = True
        if e.label == NONE and e.corpus in unjudged:
            M[i, unjudged[e.corpus]] = True
    return M


def scopes_of(data: list[CorpusData]) -> dict[str, frozenset[str] | None]:
    """Each corpus's annotated relation types (None: every relation)."""
    return {d.corpus.name: d.corpus.scope.relation_types for d in data}


def fit_softmax(X, M, weights, C: float):
    """Multinomial logistic regression with partial labels: minimises
    ``C * sum_i w_i * -log P(label_i in M_i | x_i) + |W|^2 / 2`` (scikit-learn's objective when
    every row of ``M`` holds one label) with scipy's L-BFGS, divided by ``C * sum_i w_i`` as
    scikit-learn does, so that its stopping rule (``gtol``) means the same. Returns (W, b); a
    label no row accepts gets a bias of -30 (never predicted)."""
    import numpy as np
    from scipy.optimize import minimize

    seen = M.any(axis=0)
    M = M[:, seen]
    X = X.astype(np.float32).tocsr()  # float32 arithmetic, as scikit-learn keeps for float32 data
    Xt = X.T.tocsr()
    d, k = X.shape[1], M.shape[1]
    w = np.asarray(weights, dtype=np.float64)
    cw = (w / w.sum()).astype(np.float32)[:, None]
    l2 = np.float32(1.0 / (C * w.sum()))

    def objective(theta):
        W, b = theta[: d * k].reshape(d, k).astype(np.float32), theta[d * k :].astype(np.float32)
        Z = X @ W + b
        E = np.exp(Z - Z.max(axis=1, keepdims=True))
        Em = np.where(M, E, np.float32(0.0))
        total = E.sum(axis=1, keepdims=True)
        accepted = np.maximum(Em.sum(axis=1, keepdims=True), np.float32(1e-30))
        loss = float((cw * (np.log(total) - np.log(accepted))).sum(dtype=np.float64))
        loss += 0.5 * float(l2) * float((W * W).sum(dtype=np.float64))
        G = cw * (E / total - Em / accepted)
        return loss, np.concatenate([(Xt @ G + l2 * W).ravel(), G.sum(axis=0)]).astype(np.float64)

    res = minimize(
        objective,
        np.zeros(d * k + k),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": MAX_ITER, "gtol": 1e-4, "ftol": 64 * np.finfo(float).eps, "maxls": 50},
    )
    W = np.zeros((d, len(seen)), dtype=np.float32)
    b = np.full(len(seen), -30.0, dtype=np.float32)
    W[:, seen] = res.x[: d * k].reshape(d, k)
    b[seen] = res.x[d * k :]
    return W, b


def fit(
    examples: list[Example],
    *,
    C: float = DEFAULT_C,
    threshold=0.5,
    veto: float = 0.0,
    meta: dict | None = None,
    dense: bool = True,
    reader: bool = False,
    scopes: dict[str, frozenset[str] | None] | None = None,
    log=None,
):
    """The sparse logistic regression; with ``dense`` and every example's view read, the dense
    head; with ``reader``, the pair reader (:func:`fit_reader`). ``scopes``: each corpus's
    annotated relation types (None: all), see :func:`targets`."""
    import numpy as np

    train = [e for e in examples if e.label is not None]
    vocabulary = features_of(train)
    X = design_matrix(vocabulary, train)
    labels = {e.label for e in train}
    if len(labels) < 2:
        from kgr.errors import KgrError

        raise KgrError(
            f"cannot train on {len(train)} candidates of {len(labels)} label(s)",
            hint="the annotated folders need related and unrelated pairs of annotated entities",
        )
    M = targets(train, scopes)
    W, b = fit_softmax(X, M, corpus_weights(train), C)
    keep = np.abs(W).max(axis=1) >= 1e-3
    vocabulary = [f for f, k in zip(vocabulary, keep) if k]
    info = {"C": C, "balance": BALANCE, "min_count": MIN_COUNT, "examples": len(train), **(meta or {})}
    arrays = fit_reader(train, scopes=scopes, log=log) if reader else None
    head = fit_dense(train, scopes=scopes) if dense and all(e.view is not None for e in train) else None
    return RelationModel(vocabulary, W[keep], b, list(LABELS), threshold, {**info, "veto": veto}, head, arrays)


def reader_text(e: Example) -> str:
    """What the pair reader reads of an example (as extraction marks a candidate)."""
    return marked(e.window, e.a[0], e.b[0], e.features)


def _length_batches(texts: list[str], rng: random.Random, pool: int = 64) -> list[list[int]]:
    """One pass over ``texts`` in batches of ``READER_BATCH`` of like length (less padding to
    compute: about 30% fewer token positions than batches drawn at random): the texts shuffled,
    each run of ``pool`` batches' worth sorted by length and cut into batches, the batches
    shuffled."""
    order = list(range(len(texts)))
    rng.shuffle(order)
    batches = []
    size = READER_BATCH * pool
    for s in range(0, len(order), size):
        run = sorted(order[s : s + size], key=lambda i: len(texts[i]))
        batches += [run[k : k + READER_BATCH] for k in range(0, len(run), READER_BATCH)]
    rng.shuffle(batches)
    return batches


def fit_reader(train: list[Example], *, seed: int = READER_SEED, scopes=None, log=None) -> dict:
    """The pair reader's arrays (:class:`kgr.stages.relview.PairReader`): adapters of the default
    model's transformer and an output layer, fine-tuned with torch on a sample of the labelled
    examples (every related one up to ``READER_POSITIVES`` per corpus, ``READER_NEGATIVES``
    times as many unrelated), weighted by corpus and with the same acceptable labels
    (:func:`targets`) as the sparse model."""
    import time

    import numpy as np
    import torch

    from kgr.stages.relview import reader_network, tokenize

    rng = random.Random(seed)
    split: dict[str, tuple[list, list]] = collections.defaultdict(lambda: ([], []))
    for e in train:
        if e.label is not None and e.window is not None:
            split[e.corpus][e.label == NONE].append(e)
    picked: list[Example] = []
    for _corpus, (pos, neg) in sorted(split.items()):
        pos = rng.sample(pos, min(len(pos), READER_POSITIVES))
        picked += pos + rng.sample(neg, min(len(neg), int(READER_NEGATIVES * len(pos))))
    rng.shuffle(picked)
    M = torch.from_numpy(targets(picked, scopes))
    weight = np.asarray(corpus_weights(picked), dtype=np.float32)
    w = torch.from_numpy(weight / weight.mean())
    texts = [reader_text(e) for e in picked]
    tokenizer, net = reader_network(len(LABELS), seed=seed)
    params = [q for q in net.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=READER_LR, weight_decay=0.01)
    steps = max(1, int(READER_EPOCHS * len(picked) / READER_BATCH))
    warmup = max(1, int(0.06 * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: min(1.0, k / warmup) * max(0.0, 1 - k / steps))
    net.train()
    step, started = 0, time.perf_counter()
    while step < steps:
        for batch in _length_batches(texts, rng):
            if step >= steps:
                break
            Z = net(tokenize(tokenizer, [texts[k] for k in batch]))
            loss = torch.logsumexp(Z, 1) - torch.logsumexp(Z.masked_fill(~M[batch], float("-inf")), 1)
            optimizer.zero_grad()
            (loss * w[batch]).mean().backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            if log and step % 500 == 0:
                log(f"pair reader: step {step}/{steps}, {time.perf_counter() - started:.0f} s")
    net.eval()
    return net.arrays()


def fit_dense(train: list[Example], *, seed: int = DENSE_SEED, scopes=None) -> DenseHead:
    """The dense head (:class:`kgr.stages.relmodel.DenseHead`) fitted with torch on labelled
    examples' views, weighted by corpus and with the same acceptable labels (:func:`targets`)
    as the sparse model."""
    import numpy as np
    import torch

    train = [e for e in train if e.label is not None]
    keys = DenseHead.one_hot_keys(e.features for e in train)
    vectors = np.stack([e.view for e in train]).astype(np.float32)
    features = [e.features for e in train]
    plain = DenseHead(keys, 0.0, 1.0, *([np.zeros(1)] * 4))
    X = plain.inputs(vectors, features)
    shift, scale = X.mean(axis=0), X.std(axis=0) + 1e-4
    X = torch.from_numpy((X - shift) / scale)
    M = torch.from_numpy(targets(train, scopes))
    weight = np.asarray(corpus_weights(train), dtype=np.float32)
    w = torch.from_numpy(weight / weight.mean())
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Dropout(0.1),
        torch.nn.Linear(X.shape[1], DENSE_HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(DENSE_HIDDEN, len(LABELS)),
    )
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
    net.train()
    for _ in range(DENSE_EPOCHS):
        order = torch.randperm(len(train))
        for start in range(0, len(train), DENSE_BATCH):
            batch = order[start : start + DENSE_BATCH]
            Z = net(X[batch])
            loss = torch.logsumexp(Z, 1) - torch.logsumexp(Z.masked_fill(~M[batch], float("-inf")), 1)
            optimizer.zero_grad()
            (loss * w[batch]).mean().backward()
            optimizer.step()
    first, second = net[1], net[4]
    return DenseHead(
        keys,
        shift,
        scale,
        first.weight.detach().numpy().T,
        first.bias.detach().numpy(),
        second.weight.detach().numpy().T,
        second.bias.detach().numpy(),
    )


def example_probabilities(model: RelationModel, examples: list[Example]):
    """The probabilities extraction decides these examples on (:meth:`kgr.stages.relmodel.Decision.finish`),
    from their stored views."""
    import numpy as np

    probs = model.probabilities([e.features for e in examples])
    rows = model.reads(probs)
    read: dict = {"view": None, "reader": None}
    if model.dense is not None:
        rows = np.array([i for i in rows if examples[i].view is not None], dtype=np.int64)
        if len(rows):
            read["view"] = np.stack([examples[i].view for i in rows]).astype(np.float32)
    if model.reader and len(rows):
        reader = model.pair_reader()
        if reader is not None:
            read["reader"] = reader.probabilities([reader_text(examples[i]) for i in rows])
    return model.combined(probs, rows, read, [examples[i].features for i in rows])


# -- scoring without the rest of the pipeline -----------------------------------------------------


def _said(e: Example) -> list[str]:
    return [f[5:] for f in e.features if f.startswith("rule=") and "|" not in f]


def _readings(examples: list[Example], probs) -> tuple[list[tuple], list[tuple]]:
    """What the rules say, with the model's probability of it, and the model's likeliest
    relation for each pair of names (computed once per set of probabilities)."""
    cached = _READINGS.get(id(probs))
    if cached is not None and cached[0] is probs:
        return cached[1]
    said: list[tuple] = []
    best: dict[tuple, tuple] = {}
    top = probs[:, 1:].argmax(axis=1) + 1  # the likeliest relation, however likely "none" is
    for e, row, k in zip(examples, probs, top):
        for label in _said(e):
            rel, direction = label[:-1], label[-1]
            src, dst = (e.a, e.b) if direction == ">" else (e.b, e.a)
            said.append(((e.corpus, e.doc), float(row[LABELS.index(label)]), src, rel, dst))
        label = LABELS[int(k)]
        p = float(row[k])
        rel, direction = label[:-1], label[-1]
        src, dst = (e.a, e.b) if direction == ">" else (e.b, e.a)
        key = (e.corpus, e.doc, *sorted((src[0], dst[0])))
        if key not in best or p > best[key][0]:
            best[key] = (p, rel, src, dst, e.allowed is None or label in e.allowed)
    out = (said, [(key, *v) for key, v in best.items()])
    while len(_READINGS) >= READINGS_KEPT:
        del _READINGS[next(iter(_READINGS))]  # the oldest
    _READINGS[id(probs)] = (probs, out)
    return out


# The readings of the last few sets of probabilities: the threshold search scores the k-fold and
# the left-out ones in turn, hundreds of times, and each reading is a pass over every candidate.
READINGS_KEPT = 4
_READINGS: dict[int, tuple] = {}


def _triple(src, rel, dst) -> tuple[str, str, str]:
    return (src[1] or f"?{src[0]}", rel, dst[1] or f"?{dst[0]}")


def decide(examples: list[Example], probs, threshold, veto: float = 0.0) -> dict[tuple[str, str], set[tuple]]:
    """The relations a model's probabilities give, per (corpus, doc), as gold-entity triples
    (an end that is no annotated mention stays a name, so it can only be wrong): what the
    rules say unless the model gives it less than ``veto``, then the model's own best
    relation for each other pair of names when it reaches ``threshold`` (one number, or one
    per relation) and fits the relation's signature (:func:`kgr.stages.relmodel.learned_relations`
    decides the same way)."""
    said, best = _readings(examples, probs)

    def limit(rel: str) -> float:
        return alone_threshold(threshold, rel)

    kept: dict[tuple[str, str], list[tuple]] = collections.defaultdict(list)
    covered = set()
    for where, p, src, rel, dst in said:
        if p >= veto:
            kept[where].append((p, src, rel, dst))
            covered.add((*where, *sorted((src[0], dst[0]))))
    for key, p, rel, src, dst, allowed in best:
        if p >= limit(rel) and allowed and key not in covered:
            kept[key[:2]].append((p, src, rel, dst))
    out: dict[tuple[str, str], set[tuple]] = collections.defaultdict(set)
    for where, said_here in kept.items():
        out[where] = {_triple(src, rel, dst) for _, src, rel, dst in said_here}
        # what being located in a place entails (kgr.stages.relmodel._located_through)
        links = [(p, src, dst) for p, src, rel, dst in said_here if rel == "located_in"]
        related = {frozenset((src[0], dst[0])) for _, src, _, dst in said_here}
        for p, a, b in links:
            for q, b2, place in links:
                if b2[0] == b[0] and a[0] != place[0] and frozenset((a[0], place[0])) not in related:
                    if p * q >= limit("located_in"):
                        out[where].add(_triple(a, "located_in", place))
    return out


def pair_scores(
    data: list[CorpusData], examples: list[Example], probs, threshold, veto: float = 0.0
) -> dict[str, dict]:
    """Relation precision, recall and F1 per corpus at the level of gold entities, the way
    ``kgr eval extraction`` counts them (scope applied), but on the candidates' own alignment:
    quick enough to compare settings, not the reported figure."""
    predicted = decide(examples, probs, threshold, veto)
    out = {}
    for d in data:
        c = d.corpus
        tp = npred = ngold = 0
        for doc in d.docs:
            gold = {(r["src"], r["rel"], r["dst"]) for r in c.relations.get(doc, [])}
            pred = {t for t in predicted.get((c.name, doc), set()) if _judged(c, t)}
            tp += len(gold & pred)
            npred += len(pred)
            ngold += len(gold)
        p = tp / npred if npred else 0.0
        r = tp / ngold if ngold else 0.0
        out[c.name] = {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}
    return out


def _judged(c: Corpus, triple: tuple[str, str, str]) -> bool:
    """Does the corpus judge this relation (``kgr eval extraction``'s scope: the relation types
    and entity types its ``scope.json`` names)?"""
    if c.scope.relation_types is not None and triple[1] not in c.scope.relation_types:
        return False
    types = c.scope.entity_types
    return types is None or (c.entity_types.get(triple[0]) in types and c.entity_types.get(triple[2]) in types)


def calibration(
    data: list[CorpusData], examples: list[Example], probs, threshold: dict[str, float]
) -> dict[str, list[float]]:
    """What the decision's probabilities mean, fitted on ``probs`` (predictions for documents the
    model was not trained on): for a relation a rule states ("rule") and for one the model adds
    alone, the best of a pair no rule relates at the relation's ``threshold`` or above
    ("model"), the chance that such a relation is gold, as a
    logistic function of the probability's log-odds (Platt scaling: scikit-learn's logistic
    regression, each corpus weighing alike; smooth where few relations have a probability near 0
    or 1). Only what a corpus judges counts (:func:`_judged`); a relation said by several
    candidates counts once, at its best probability, as extraction keeps it. Returns
    {kind: [slope, intercept]}, what :meth:`RelationModel.confidence` applies."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    corpora = {d.corpus.name: d.corpus for d in data}
    gold = {
        (name, doc): {(r["src"], r["rel"], r["dst"]) for r in c.relations.get(doc, [])}
        for name, c in corpora.items()
        for doc in c.relations
    }
    said, best = _readings(examples, probs)
    ruled: dict[tuple, float] = {}
    covered = set()
    for where, p, src, rel, dst in said:
        covered.add((*where, *sorted((src[0], dst[0]))))
        key = (where, _triple(src, rel, dst))
        ruled[key] = max(p, ruled.get(key, 0.0))
    alone = {
        (key[:2], _triple(src, rel, dst)): p
        for key, p, rel, src, dst, allowed in best
        if allowed and key not in covered and p >= alone_threshold(threshold, rel)
    }
    out = {}
    for kind, rows in (("rule", ruled), ("model", alone)):
        rows = {k: p for k, p in rows.items() if _judged(corpora[k[0][0]], k[1])}
        y = np.array([t in gold.get(where, ()) for where, t in rows], dtype=int)
        if len(set(y.tolist())) < 2:
            continue  # nothing to tell apart (no relation, or all held, or none)
        sizes = collections.Counter(where[0] for where, _ in rows)
        w = np.array([len(rows) / (len(sizes) * sizes[where[0]]) for where, _ in rows])
        x = log_odds(np.array(list(rows.values())))[:, None]
        fitted = LogisticRegression(C=1e4).fit(x, y, sample_weight=w)
        out[kind] = [round(float(fitted.coef_[0, 0]), 4), round(float(fitted.intercept_[0]), 4)]
    return out


def _mean_f1(data, examples, probs, threshold, veto) -> float:
    scores = pair_scores(data, examples, probs, threshold, veto)
    return sum(s["f1"] for s in scores.values()) / max(1, len(scores))


def best_threshold(
    data: list[CorpusData], examples: list[Example], probs, unseen=None
) -> tuple[dict[str, float], float, float]:
    """({relation: threshold}, veto, score). The score is the mean relation F1 over the corpora
    on ``probs`` (k-fold by document), averaged with that on ``unseen`` (each corpus left out)
    when given. One threshold for all relations and a veto first, then each relation's own
    threshold in turn, maximising the score; then each relation's threshold is raised as far
    as the score stays within ``TOLERANCE`` of that best. A relation the model never adds alone
    (:data:`kgr.stages.relations.STATED_ONLY`) keeps ``NEVER``."""

    def score_of(threshold, veto) -> float:
        s = _mean_f1(data, examples, probs, threshold, veto)
        return s if unseen is None else (s + _mean_f1(data, examples, unseen, threshold, veto)) / 2

    best = (0.5, 0.0, -1.0)
    for veto in VETOES:
        for t in THRESHOLDS:
            mean = score_of(t, veto)
            if mean > best[2] + 1e-9:
                best = (t, veto, mean)
    t0, veto, score = best
    thresholds = {rel: alone_threshold(t0, rel) for rel in VOCABULARY}
    score = score_of(thresholds, veto)
    for rel in VOCABULARY:
        if thresholds[rel] == NEVER:
            continue
        for t in THRESHOLDS + [NEVER]:
            trial = {**thresholds, rel: t}
            mean = score_of(trial, veto)
            if mean > score + 1e-9:
                thresholds, score = trial, mean
    top = score
    for rel in VOCABULARY:
        for t in sorted(THRESHOLDS + [NEVER], reverse=True):
            if t <= thresholds[rel]:
                break
            trial = {**thresholds, rel: t}
            mean = score_of(trial, veto)
            if mean >= top - TOLERANCE:
                thresholds, score = trial, mean
                break
    return thresholds, veto, score


# -- cross-validation -----------------------------------------------------------------------------


def folds_of(data: list[CorpusData], k: int = FOLDS, seed: int = SEED) -> dict[tuple[str, str], int]:
    """Each document's fold: the documents of every corpus shuffled and dealt into k folds."""
    out = {}
    for d in data:
        docs = sorted(d.docs)
        random.Random(f"{seed}:{d.corpus.name}").shuffle(docs)
        for i, doc in enumerate(docs):
            out[(d.corpus.name, doc)] = i % k
    return out


@dataclass
class CrossValidation:
    kfold_models: list[RelationModel]
    fold: dict[tuple[str, str], int]
    loco_models: dict[str, RelationModel]
    kfold_probs: Any
    loco_probs: Any
    threshold: dict[str, float]
    veto: float

    def kfold_model_for(self, corpus: str) -> Callable[[str | None], RelationModel | None]:
        return lambda path: self.kfold_models[self.fold[(corpus, path)]] if (corpus, path) in self.fold else None

    def loco_model_for(self, corpus: str) -> Callable[[str | None], RelationModel | None]:
        return lambda path: self.loco_models[corpus]


def crossvalidate(
    data: list[CorpusData],
    *,
    C: float = DEFAULT_C,
    k: int = FOLDS,
    loco: bool = True,
    reader: bool = False,
    log=None,
) -> CrossValidation:
    import numpy as np

    examples = [e for d in data for e in d.examples]
    scopes = scopes_of(data)
    fold = folds_of(data, k)
    kprobs = np.zeros((len(examples), len(LABELS)), dtype=np.float32)
    models = []
    for f in range(k):
        train = [e for e in examples if fold[(e.corpus, e.doc)] != f]
        model = fit(train, C=C, scopes=scopes, reader=reader, log=log)
        models.append(model)
        test = [i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] == f]
        kprobs[test] = example_probabilities(model, [examples[i] for i in test])
        if log:
            log(f"fold {f + 1}/{k}: trained on {len(train)} candidates")
    lprobs = np.zeros_like(kprobs)
    loco_models = {}
    if loco and len(data) > 1:
        for d in data:
            name = d.corpus.name
            model = fit([e for e in examples if e.corpus != name], C=C, scopes=scopes, reader=reader, log=log)
            loco_models[name] = model
            test = [i for i, e in enumerate(examples) if e.corpus == name]
            lprobs[test] = example_probabilities(model, [examples[i] for i in test])
            if log:
                log(f"left out {name}")
    threshold, veto, _ = best_threshold(data, examples, kprobs, lprobs if loco_models else None)
    for m in [*models, *loco_models.values()]:
        m.threshold, m.veto = threshold, veto
    return CrossValidation(models, fold, loco_models, kprobs, lprobs, threshold, veto)


def train(
    roots: Iterable[str | Path],
    out: str | Path,
    *,
    C: float = DEFAULT_C,
    reader: bool = False,
    config=None,
    log=None,
    command: str = "",
) -> dict:
    """Collect, cross-validate for the thresholds (k-fold, and each corpus left out when there
    are several), fit on everything, save. Returns a summary. With ``reader``, each fit
    fine-tunes a pair reader (:func:`fit_reader`) too."""
    data = collect_all(roots, config, progress=log)
    cv = crossvalidate(data, C=C, reader=reader, log=log)
    return ship(data, cv, out, C=C, reader=reader, log=log, command=command)[1]


def ship(
    data: list[CorpusData],
    cv: CrossValidation,
    out: str | Path,
    *,
    C: float = DEFAULT_C,
    reader: bool = False,
    log=None,
    command: str = "",
) -> tuple[RelationModel, dict]:
    """The model fitted on every example with ``cv``'s thresholds, its cross-validated scores
    and calibration in its meta, saved to ``out``; and the summary :func:`train` returns."""
    examples = [e for d in data for e in d.examples]
    scores = pair_scores(data, examples, cv.kfold_probs, cv.threshold, cv.veto)
    meta = {
        "trained_on": {d.corpus.name: len(d.docs) for d in data},
        "command": command,
        "cv_pair_f1": {k: round(v["f1"], 4) for k, v in scores.items()},
    }
    if cv.loco_models:
        left_out = pair_scores(data, examples, cv.loco_probs, cv.threshold, cv.veto)
        meta["left_out_pair_f1"] = {k: round(v["f1"], 4) for k, v in left_out.items()}
    meta["calibration"] = calibration(data, examples, cv.kfold_probs, cv.threshold)
    model = fit(
        examples, C=C, threshold=cv.threshold, veto=cv.veto, meta=meta, scopes=scopes_of(data), reader=reader, log=log
    )
    model.save(out)
    return model, {"threshold": cv.threshold, "veto": cv.veto, "features": len(model.index), **meta}
