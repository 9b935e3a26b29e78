"""Learned relations: a classifier decides which relation, if any, a pair of mentions states.

Candidates are pairs of mentions a document puts together:

- ``sentence``: two mentions in one sentence;
- ``near``: two mentions in neighbouring sentences of one paragraph (a relation stated
  across a sentence boundary, "X is a town. It lies in Y" once "It" is resolved);
- ``subject``: the subject of a section or page (the name in its heading or title) and a
  mention in a list item, table row, key/value line or sentence under it;
- ``row``: two mentions in one table row, with their columns' headers;
- ``rule``: a pair the high-precision rules of :mod:`kgr.stages.relations` relate and no
  other candidate covers (numbered steps, "A -> B" sequences).

Each candidate is described by features that carry across writing styles rather than by
any corpus's words: the entity types of both ends (the extractor's guess for the mention, and
the type model's decision over every mention of that name in the document, as linking
decides an entity's type over all its mentions: :func:`document_types`), the dependency path between them in
spaCy's parse and the lemma where the two meet, the role of each end (subject, object, the
preposition that governs it), the words between them, the section heading's words, the
label of a key/value line, a table column's header, and what the rules say about the pair.
A multinomial logistic regression over those features gives, for each candidate, the
probability of every relation in each direction and of none. For the candidates it finds
plausible (some relation at least ``CASCADE``), a small network (:class:`DenseHead`) also
reads the candidate's two names in context, as the default embedding model's transformer
reads them in the evidence (:mod:`kgr.stages.relview`), and the two models' probabilities
are averaged; a model trained with a reader also has a fine-tuned copy of that transformer
read the evidence with both names marked (:class:`kgr.stages.relview.PairReader`), a third
opinion in the mean. A pair of names is related when its best candidate's probability passes the
model's threshold (chosen on documents left out of training), and keeps that candidate's
sentence as evidence. Its confidence is what that probability has meant on documents left out
of training: the share of relations given it that held, for a rule's relation and for one the
model adds alone (``RelationModel.confidence``).

The weights ship in ``kgr/stages/models/relations.npz`` (no download) and come from
``kgr train relations`` over annotated folders (see :mod:`kgr.learn.relations`).
Inference needs numpy, and the default embedding model (a package dependency) for the
dense view; without it, the sparse model decides alone.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from kgr.stages.relations import STATED_ONLY, VOCABULARY, conditional, evidence, is_element, types_ok
from kgr.stages.textmodel import Block, Document, lemma, tokens_starting_in

NONE = "none"
LABELS = (NONE,) + tuple(f"{rel}{d}" for rel in VOCABULARY for d in (">", "<"))  # ">": a is the source
MODEL_FILE = Path(__file__).parent / "models" / "relations.npz"

log = logging.getLogger(__name__)

CASCADE = 0.01  # the dense view is read for candidates the sparse model gives a relation at least this
MAX_APART = 24  # mentions between the two ends of a sentence or near candidate, at most
# sentences between the two ends of a near candidate, at most: an article's introduction
# says where a place lies a few sentences after it names it
MAX_SENTENCE_GAP = 4
SUBJECT_SPANS = 12  # mentions of one block paired with the section's subject, at most
MAX_BETWEEN = 8  # words between two ends described one by one; more is "long"
MAX_PATH = 5  # dependency arcs between two ends described as a path; more is "long"
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


@dataclass
class Candidate:
    a: Any  # a Span (kgr.stages.extract.Span); the label's direction is read from a to b
    b: Any
    kind: str
    start: int  # the evidence: document offsets
    end: int
    features: list[str] = field(default_factory=list)


def name_of(sp) -> str:
    return (sp.refers or sp.surface).strip()


def usable(sp) -> bool:
    return bool(name_of(sp))


NEVER = 1.01  # a threshold no probability reaches


def alone_threshold(threshold: float | dict[str, float], rel: str) -> float:
    """The probability a relation needs when no rule says it (one threshold for all, or one per
    relation); a relation only the text's words make (:data:`kgr.stages.relations.STATED_ONLY`)
    is never added alone, whatever a model's thresholds say."""
    if rel in STATED_ONLY:
        return NEVER
    return threshold.get(rel, 1.0) if isinstance(threshold, dict) else threshold


# -- the learned type of each name -------------------------------------------------------------

# Training and cross-validation choose the type model the features read (a callable from a
# document's path to a kgr.stages.entitytypes.Typer, or None), so that a document's types come
# from a model not trained on it; otherwise the packaged one.
_typers: list[Callable[[str | None], Any]] = []


@contextlib.contextmanager
def _chosen(stack: list, chooser: Callable[[str | None], Any]) -> Iterator[None]:
    """``chooser`` (a document's path -> what to use for it) on top of ``stack`` for the block."""
    stack.append(chooser)
    try:
        yield
    finally:
        stack.remove(chooser)


def typing_with(chooser: Callable[[str | None], Any]):
    """``with typing_with(lambda path: typer):`` relation features in this process read the types
    that ``typer`` gives (None: no learned types)."""
    return _chosen(_typers, chooser)


def document_types(doc: Document, spans: Iterable) -> dict[str, str]:
    """Each name's type as the type model (:mod:`kgr.stages.entitytypes`) decides it over all the
    document's mentions of that name, reading what linking reads of each mention (its features,
    the words around it, whether the text also writes it in lower case). Empty without a model."""
    from kgr.stages import entitytypes

    typer = _typers[-1](doc.path) if _typers else entitytypes.default_typer()
    if typer is None:
        return {}
    text = doc.text
    common = entitytypes.lower_words(text)
    counts: dict[str, dict[str, float]] = {}
    n: dict[str, int] = {}
    for sp in spans:
        name = name_of(sp)
        if not name:
            continue
        features = {**sp.features, "in_title": sp.start < doc.title_end}
        if sp.source != "coref":
            features["common"] = entitytypes.commonness(sp.surface, common)
        ctx = entitytypes.context(text, sp.start, sp.end)
        entitytypes.add_mention(
            counts.setdefault(name, {}), entitytypes.mention_features(sp.surface, sp.type, sp.source, features, ctx)
        )
        n[name] = n.get(name, 0) + 1
    return {name: typer.predict(entitytypes.entity_features(c, n[name]))[0] for name, c in counts.items()}


# -- the parse around a mention ---------------------------------------------------------------


class _Parses:
    """Each block's spaCy parse, and per mention the token that heads it."""

    def __init__(self, doc: Document):
        self.doc = doc
        sdocs = getattr(doc, "nlp_docs", None) or getattr(doc, "parsed_blocks", None)
        self.sdocs = list(sdocs) if sdocs is not None and len(sdocs) == len(doc.blocks) else [None] * len(doc.blocks)
        self.block_starts = [b.start for b in doc.blocks]
        self._heads: dict[int, Any] = {}

    def block_index(self, pos: int) -> int:
        return max(0, bisect.bisect_right(self.block_starts, pos) - 1)

    def head(self, sp):
        key = id(sp)
        if key not in self._heads:
            bi = self.block_index(sp.start)
            sdoc = self.sdocs[bi]
            head = None
            if sdoc is not None:
                base = self.doc.blocks[bi].start
                toks = list(tokens_starting_in(sdoc, sp.start - base, sp.end - base))
                inside = {t.i for t in toks}
                for t in toks:
                    if t.head.i not in inside or t.head.i == t.i:
                        head = t
                        break
            self._heads[key] = (bi, head)
        return self._heads[key]


def _lemma(tok) -> str:
    return (lemma(tok) or tok.text).lower()


def _role(tok) -> list[str]:
    """The mention's place in its clause: its arc, the preposition over it, the word it hangs from."""
    if tok is None:
        return ["r=?"]
    dep = tok.dep_ or "?"
    out = [f"r={dep}"]
    head = tok.head
    if dep in ("pobj", "pcomp") and head is not tok:
        out.append(f"p={head.lower_}")
        gov = head.head
        if gov is not head:
            out.append(f"p={head.lower_}|g={_lemma(gov)}")
            out.append(f"g={_lemma(gov)}")
    elif head is not tok:
        out.append(f"g={_lemma(head)}")
        out.append(f"r={dep}|g={_lemma(head)}")
    if dep == "compound" or dep == "poss":
        out.append(f"{dep}={_lemma(head)}")
    return out


def _climb(ta, tb) -> tuple[list, list] | None:
    """The two head tokens' ways up to their lowest common ancestor: each from the token to the
    ancestor, both ending in it; None when they share none (or a parse)."""
    if ta is None or tb is None or ta.doc is not tb.doc:
        return None
    up_a = [ta, *ta.ancestors]
    index_a = {t.i: k for k, t in enumerate(up_a)}
    up_b = [tb, *tb.ancestors]
    for k_b, t in enumerate(up_b):
        if t.i in index_a:
            return up_a[: index_a[t.i] + 1], up_b[: k_b + 1]
    return None


def _path(ta, tb) -> list[str]:
    """The dependency path from one head token to the other, through their lowest common ancestor."""
    climb = _climb(ta, tb)
    if climb is None:
        return ["dp=none"]
    up_a, up_b = climb
    k_a, k_b, lca = len(up_a) - 1, len(up_b) - 1, up_a[-1]
    length = k_a + k_b
    out = [f"dpl={min(length, MAX_PATH + 1)}"]
    lca_lemma = _lemma(lca)
    if lca.i not in (ta.i, tb.i):
        out.append(f"lca={lca_lemma}")
        out.append(f"lca={lca.pos_}")
    if length <= MAX_PATH:
        ups = [x.dep_ for x in up_a[:k_a]]
        downs = [x.dep_ for x in reversed(up_b[:k_b])]
        arcs = "^".join(ups) + "|" + "v".join(downs)
        out.append(f"dp={arcs}")
        out.append(f"dp={arcs}|{lca_lemma}")
    else:
        out.append("dp=long")
    return out


# -- candidates -----------------------------------------------------------------------------


def candidates(doc: Document, spans: list, rules: Iterable[dict] = ()) -> list[Candidate]:
    """The candidate pairs of one document, with their features."""
    parses = _Parses(doc)
    ordered = sorted((sp for sp in spans if usable(sp)), key=lambda sp: (sp.start, sp.end))
    by_block: dict[int, list] = {}
    for sp in ordered:
        by_block.setdefault(parses.block_index(sp.start), []).append(sp)
    rule_list = list(rules)
    out: list[Candidate] = []
    seen: set[tuple[int, int]] = set()

    def emit(a, b, kind: str, start: int, end: int, block: Block, extra: list[str]) -> None:
        if name_of(a).lower() == name_of(b).lower() or (id(a), id(b)) in seen:
            return
        seen.add((id(a), id(b)))
        out.append(Candidate(a, b, kind, start, end, extra))

    headers = _table_headers(doc)
    for bi, block in enumerate(doc.blocks):
        if block.kind == "code" or (block.kind == "row" and bi not in headers):
            continue  # a table's header row names its columns ("| Input Type | Output Type |"), no things
        bspans = by_block.get(bi, [])
        sentence_of = [block.sentence_index(sp.start - block.start) or 0 for sp in bspans]
        sentences = block.sentences()
        for i, a in enumerate(bspans):
            for j in range(i + 1, min(len(bspans), i + 1 + MAX_APART)):
                b = bspans[j]
                if b.start < a.end:
                    continue
                gap = sentence_of[j] - sentence_of[i]
                if gap > MAX_SENTENCE_GAP:
                    break
                if block.kind == "row":
                    kind = "row"
                elif gap == 0:
                    kind = "sentence"
                else:
                    kind = "near"
                s0 = sentences[sentence_of[i]][0] if sentences else 0
                e0 = sentences[sentence_of[j]][1] if sentences else len(block.raw)
                extra = [f"sd={gap}", f"nb={min(j - i - 1, 3)}"]
                if kind == "row":
                    extra += _columns(block, headers.get(bi), a, b)
                    s0, e0 = 0, len(block.raw)
                emit(a, b, kind, block.start + s0, block.start + e0, block, extra)
        # the section's and the page's subject with what is said under them
        if block.kind != "heading":
            subjects = []
            for sj in (doc.subject_at(block.start), doc.subject):
                if sj is not None and usable(sj) and all(sj is not x for x in subjects):
                    subjects.append(sj)
            for sj in subjects:
                for b in bspans[:SUBJECT_SPANS]:
                    if b is sj or (b.start >= block.start and sj.start >= block.start and sj.start < block.end):
                        continue  # in the same block: a sentence or near candidate already
                    k = block.sentence_index(b.start - block.start) or 0
                    s0, e0 = sentences[k] if sentences else (0, len(block.raw))
                    extra = ["subj=page" if sj is doc.subject else "subj=section"]
                    extra += _line_key(doc, block, b)
                    emit(sj, b, "subject", block.start + s0, block.start + e0, block, extra)
    # every pair a rule relates is a candidate, with what the rule says (numbered steps, "A -> B",
    # "Owner: T" and the like put together pairs no sentence does)
    by_spans: dict[tuple[int, int], list[tuple[str, str, str]]] = {}
    for r in rule_list:
        pair = r.get("_spans")
        if not pair or pair[0] is None or pair[1] is None:
            continue
        src, dst = pair
        a, b = (src, dst) if (src.start, src.end) <= (dst.start, dst.end) else (dst, src)
        by_spans.setdefault((id(a), id(b)), []).append((r["rel"], ">" if a is src else "<", r.get("pattern", "")))
        if (id(a), id(b)) not in seen and (id(b), id(a)) not in seen:
            ev = r["evidence"]
            emit(a, b, "rule", ev["start"], ev["end"], doc.blocks[parses.block_index(b.start)], [])
    names = _rule_names(rule_list)
    learned = document_types(doc, ordered) if out else {}
    for c in out:
        said = by_spans.get((id(c.a), id(c.b)), []) + [
            (rel, "<" if d == ">" else ">", p) for rel, d, p in by_spans.get((id(c.b), id(c.a)), [])
        ]
        c.features = describe(doc, parses, c, said, names, learned)
    return out


def _table_headers(doc: Document) -> dict[int, list[tuple[int, int, str]]]:
    """For each table row block, the header cells of its table (document offsets, words)."""
    out: dict[int, list[tuple[int, int, str]]] = {}
    header = None
    for bi, block in enumerate(doc.blocks):
        if block.kind != "row":
            header = None
            continue
        cells = _cells(block)
        if header is None:
            header = cells
            continue
        out[bi] = header
    return out


def _cells(block: Block) -> list[tuple[int, int, str]]:
    out, pos = [], block.start
    for part in block.raw.split("|"):
        out.append((pos, pos + len(part), part))
        pos += len(part) + 1
    return out[1:-1] if block.raw.strip().startswith("|") else out


def _cell_index(cells: list[tuple[int, int, str]], pos: int) -> int | None:
    for k, (s, e, _) in enumerate(cells):
        if s <= pos < e:
            return k
    return None


def _words(text: str, limit: int = 4) -> list[str]:
    return [w.lower() for w in WORD.findall(text)][:limit]


def _columns(block: Block, header, a, b) -> list[str]:
    cells = _cells(block)
    ka, kb = _cell_index(cells, a.start), _cell_index(cells, b.start)
    out = [f"ca={'first' if ka == 0 else 'other'}", f"cb={'first' if kb == 0 else 'other'}"]
    if ka == kb:
        out.append("cell=same")
    if header:
        for k, side in ((ka, "a"), (kb, "b")):
            if k is not None and k < len(header):
                out += [f"col{side}={w}" for w in _words(header[k][2])]
    if len(cells) == 2 and ka == 0 and kb == 1:
        out += [f"key={w}" for w in _words(cells[0][2])]
    return out


def _line_key(doc: Document, block: Block, sp) -> list[str]:
    """The label of a key/value line before a mention ("Owner: X"), or the line's first words."""
    line_start = doc.text.rfind("\n", block.start, sp.start) + 1 or block.start
    before = block.masked[max(0, line_start - block.start) : sp.start - block.start]
    out = [f"bk={block.kind}"]
    if ":" in before:
        label = before[: before.rfind(":")]
        words = _words(label, 6)
        if 0 < len(words) <= 4:
            out += [f"key={w}" for w in words]
    else:
        out += [f"lead={w}" for w in _words(before, 2)]
    if block.kind == "row":
        cells = _cells(block)
        k = _cell_index(cells, sp.start)
        if len(cells) == 2 and k == 1:
            out += [f"key={w}" for w in _words(cells[0][2])]
    return out


def _rule_names(rules: list[dict]) -> dict[tuple[str, str], set[str]]:
    """(source name, destination name) -> the relations the rules give them in the document."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in rules:
        out.setdefault((r["src"], r["dst"]), set()).add(r["rel"])
    return out


def _pattern_family(pattern: str) -> str:
    return re.split(r"[:\s]", pattern or "", maxsplit=1)[0].lower() or "rule"


@functools.lru_cache(maxsize=4096)
def _heading_words(title: str) -> tuple[str, ...]:
    return tuple(w for w in _words(title, 6) if len(w) > 2)


def describe(
    doc: Document, parses: _Parses, c: Candidate, said: list, names: dict, learned: dict | None = None
) -> list[str]:
    a, b = c.a, c.b
    ta, tb = a.type or "CONCEPT", b.type or "CONCEPT"
    pair = f"{ta}|{tb}"
    f = [f"k={c.kind}", f"t={pair}", f"ta={ta}", f"tb={tb}", f"k={c.kind}|t={pair}"]
    if learned:  # the type model's decision over the name's mentions in the document
        la, lb = learned.get(name_of(a), ta), learned.get(name_of(b), tb)
        f += [f"lt={la}|{lb}", f"lta={la}", f"ltb={lb}", f"k={c.kind}|lt={la}|{lb}"]
    f += [x for x in c.features]
    bia, ha = parses.head(a)
    bib, hb = parses.head(b)
    role_a, role_b = _role(ha), _role(hb)
    f += [f"a:{x}" for x in role_a] + [f"b:{x}" for x in role_b]
    if a.source == "coref":
        f.append("a:coref")
    if b.source == "coref":
        f.append("b:coref")
    subject = doc.subject
    if subject is not None:
        if name_of(a) == name_of(subject):
            f.append("a:page")
        if name_of(b) == name_of(subject):
            f.append("b:page")
    block = doc.blocks[bib]
    f.append(f"bk={block.kind}")
    if block.step is not None:
        f.append("step")
    sec = doc.section(b.start)
    if sec.path:
        f += [f"h={w}" for w in _heading_words(sec.path[-1])]
    if c.kind in ("sentence", "row", "near", "rule") and bia == bib:
        between = doc.text[a.end : b.start]
        words = [w.lower() for w in WORD.findall(_unmark(between))]
        if c.kind == "sentence":
            f += _path(ha, hb)
            for x in f[-3:]:
                if x.startswith("lca=") and not x.endswith(("VERB", "NOUN", "AUX", "ADP", "PROPN")):
                    f.append(f"{x}|t={pair}")
        if len(words) <= MAX_BETWEEN:
            sdoc = parses.sdocs[bib]
            lemmas = _between_lemmas(sdoc, block, a.end, b.start) if sdoc is not None else words
            w = "w" if c.kind != "near" else "xw"  # words across a sentence end say less
            f += [f"{w}={x}" for x in lemmas]
            if lemmas:
                f += [f"{w}0={lemmas[0]}", f"{w}l={lemmas[-1]}", f"{w}l={lemmas[-1]}|t={pair}"]
                f += [f"{w}2={x}_{y}" for x, y in zip(lemmas, lemmas[1:])]
            else:
                f.append(f"{w}=∅")
            punct = re.sub(r"[\w\s]", "", between)[:3]
            if punct:
                f.append(f"punct={punct}")
        else:
            f.append("w=long")
    for rel, direction, pattern in said:  # what a rule says of these two mentions
        f.append(f"rule={rel}{direction}")
        f.append(f"rulep={_pattern_family(pattern)}{direction}")
    if not said:  # what a rule says of the two names elsewhere in the document
        na, nb = name_of(a), name_of(b)
        f += [f"rule={rel}>|elsewhere" for rel in sorted(names.get((na, nb), ()))]
        f += [f"rule={rel}<|elsewhere" for rel in sorted(names.get((nb, na), ()))]
    return f


def _unmark(text: str) -> str:
    return re.sub(r"\*\*|__|`", "", text)


def _between_lemmas(sdoc, block: Block, start: int, end: int) -> list[str]:
    base = block.start
    return [
        _lemma(t)
        for t in tokens_starting_in(sdoc, start - base, end - base)
        if t.is_alpha or t.text in ("'s", "’s", "->", "→", "(", ":")
    ]


# -- the model --------------------------------------------------------------------------------


def log_odds(p):
    """log(p / (1 - p)), with p kept within [1e-4, 1 - 1e-4] (numpy arrays or a number)."""
    import numpy as np

    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


class RelationModel:
    """Weights of a multinomial logistic regression over string features (numpy only), and of
    the dense head when the model has one."""

    def __init__(
        self,
        vocabulary: list[str],
        weights,
        bias,
        labels: list[str],
        threshold,
        meta: dict,
        dense: "DenseHead | None" = None,
        reader: dict | None = None,
    ):
        import numpy as np

        self.index = {f: i for i, f in enumerate(vocabulary)}
        self.weights = np.asarray(weights, dtype=np.float32)
        self.bias = np.asarray(bias, dtype=np.float32)
        self.labels = list(labels)
        # the probability a relation needs when no rule says it: one for all, or one per relation
        self.threshold = dict(threshold) if isinstance(threshold, dict) else float(threshold)
        self.veto = float(meta.get("veto", 0.0))  # a rule's relation the model gives less is dropped
        self.meta = meta
        self.dense = dense
        self.reader = reader or None  # the pair reader's arrays (kgr.stages.relview.PairReader)
        # the dense view is read for a candidate the sparse model gives some relation at least this
        self.cascade = float(meta.get("cascade", CASCADE))

    def threshold_for(self, rel: str) -> float:
        """The probability the model needs to add ``rel`` alone (above 1: never)."""
        return alone_threshold(self.threshold, rel)

    def confidence(self, p: float, said: bool) -> float:
        """What the model's probability ``p`` of a relation means: the chance that such a
        relation holds, as measured on documents the model was not trained on, for a relation a
        rule states (``said``) or one the model adds alone (``meta["calibration"]``: a logistic
        function of ``p``'s log-odds, fitted by :func:`kgr.learn.relations.calibration`); ``p``
        itself for a model that has none."""
        import math

        fitted = self.meta.get("calibration", {}).get("rule" if said else "model")
        if not fitted:
            return p
        slope, intercept = fitted
        return 1.0 / (1.0 + math.exp(-(slope * float(log_odds(p)) + intercept)))

    @classmethod
    def load(cls, path: str | Path = MODEL_FILE) -> "RelationModel":
        import json

        import numpy as np

        with np.load(path, allow_pickle=False) as z:
            vocabulary = str(z["vocabulary"]).split("\n") if z["vocabulary"].size else []
            meta = json.loads(str(z["meta"]))
            dense = DenseHead.from_arrays(z) if "dense_w1" in z.files else None
            reader = {k: z[k] for k in z.files if k.startswith("reader_")}
            return cls(
                vocabulary,
                z["weights"].astype(np.float32),
                z["bias"],
                meta["labels"],
                meta["threshold"],
                meta,
                dense,
                reader,
            )

    def save(self, path: str | Path) -> None:
        import json

        import numpy as np

        vocabulary = [""] * len(self.index)
        for f, i in self.index.items():
            vocabulary[i] = f
        meta = {**self.meta, "labels": self.labels, "threshold": self.threshold, "veto": self.veto}
        if self.dense is not None or self.reader:
            meta["cascade"] = self.cascade
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez_compressed(
                fh,
                vocabulary=np.array("\n".join(vocabulary)),
                weights=self.weights.astype(np.float16),
                bias=self.bias.astype(np.float32),
                meta=np.array(json.dumps(meta, sort_keys=True)),
                **(self.dense.arrays() if self.dense is not None else {}),
                **(self.reader or {}),
            )

    def probabilities(self, feature_lists: list[list[str]]):
        """One row of label probabilities per candidate."""
        import numpy as np

        n = len(feature_lists)
        scores = np.tile(self.bias, (n, 1))
        for row, feats in enumerate(feature_lists):
            idx = [self.index[x] for x in set(feats) if x in self.index]
            if idx:
                scores[row] += self.weights[idx].sum(axis=0)
        return _softmax(scores)

    def reads(self, probs):
        """The rows of ``probs`` (the sparse model's) whose candidates the dense head or the pair
        reader reads too."""
        import numpy as np

        if (self.dense is None and not self.reader) or not len(probs):
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(probs[:, 1:].max(axis=1) >= self.cascade)

    def items(self, evidence: list, names: list[tuple[str, str]], feature_lists: list[list[str]]) -> list:
        """What :meth:`read` reads of candidates, from their evidence (``relview.evidence_of``),
        names and features: the evidence (the dense view's input) and, with a pair reader, the
        marked text (its input)."""
        if not self.reader:
            return [(ev, None) for ev in evidence]
        from kgr.stages.relview import marked

        return [(ev, marked(ev, a, b, f)) for ev, (a, b), f in zip(evidence, names, feature_lists)]

    def read(self, items: list) -> dict:
        """What the transformer makes of ``items``: ``{"view": the dense views, "reader": the pair
        reader's probabilities}``, each None when the model has no use for it or the
        transformer cannot be loaded (the other models then decide without it)."""
        got: dict = {"view": None, "reader": None}
        if self.dense is not None:
            from kgr.stages.relview import default_reader

            view = default_reader()
            if view is not None:
                got["view"] = view.vectors([ev for ev, _ in items])
        if self.reader:
            reader = self.pair_reader()
            if reader is not None:
                got["reader"] = reader.probabilities([text for _, text in items])
        return got

    def pair_reader(self):
        """The pair reader, loaded once per model; None (with a warning) when it cannot be."""
        if not hasattr(self, "_pair_reader"):
            from kgr.stages.relview import PairReader

            try:
                self._pair_reader = PairReader.from_arrays(self.reader)
            except (ImportError, OSError, ValueError, KeyError) as exc:
                log.warning("relations: the pair reader cannot be loaded (%s); the other models decide", exc)
                self._pair_reader = None
        return self._pair_reader

    def combined(self, probs, rows, read: dict, feature_lists):
        """``probs`` with the ``rows`` read replaced by the mean of the sparse model's
        probabilities and those of the dense head (on ``read["view"]``) and the pair reader
        (``read["reader"]``), each that the model has and could read."""
        out = probs.copy()
        if not len(rows):
            return out
        parts = [probs[rows]]
        if self.dense is not None and read.get("view") is not None:
            parts.append(self.dense.probabilities(read["view"], feature_lists))
        if self.reader and read.get("reader") is not None:
            parts.append(read["reader"])
        out[rows] = sum(parts) / len(parts)
        return out


class DenseHead:
    """A network with one hidden layer (ReLU) over a candidate's dense view (its two name vectors,
    :mod:`kgr.stages.relview`), their product, and the candidate's kind, types and block as
    one-hot columns (the features of ``ONE_HOT`` prefixes). Inference is numpy; the weights are
    fitted by :func:`kgr.learn.relations.fit_dense`."""

    ONE_HOT = ("k=", "t=", "ta=", "tb=", "lta=", "ltb=", "sd=", "bk=", "subj=")

    def __init__(self, keys: list[str], shift, scale, w1, b1, w2, b2):
        import numpy as np

        self.keys = list(keys)
        self.column = {k: i for i, k in enumerate(self.keys)}
        self.shift, self.scale = (np.asarray(x, dtype=np.float32) for x in (shift, scale))
        self.w1, self.b1, self.w2, self.b2 = (np.asarray(x, dtype=np.float32) for x in (w1, b1, w2, b2))

    @classmethod
    def one_hot_keys(cls, feature_lists) -> list[str]:
        return sorted({f for feats in feature_lists for f in feats if f.startswith(cls.ONE_HOT) and "|" not in f})

    def inputs(self, vectors, feature_lists):
        """The head's standardised input rows."""
        import numpy as np

        one_hot = np.zeros((len(feature_lists), len(self.keys)), dtype=np.float32)
        for r, feats in enumerate(feature_lists):
            for f in feats:
                k = self.column.get(f)
                if k is not None:
                    one_hot[r, k] = 1.0
        half = vectors.shape[1] // 2
        X = np.hstack([vectors, vectors[:, :half] * vectors[:, half:], one_hot]).astype(np.float32)
        return (X - self.shift) / self.scale

    def probabilities(self, vectors, feature_lists):
        import numpy as np

        hidden = np.maximum(self.inputs(vectors, feature_lists) @ self.w1 + self.b1, 0.0)
        return _softmax(hidden @ self.w2 + self.b2)

    def arrays(self) -> dict:
        import numpy as np

        return {
            "dense_keys": np.array("\n".join(self.keys)),
            "dense_shift": self.shift,
            "dense_scale": self.scale,
            "dense_w1": self.w1.astype(np.float16),
            "dense_b1": self.b1,
            "dense_w2": self.w2.astype(np.float16),
            "dense_b2": self.b2,
        }

    @classmethod
    def from_arrays(cls, z) -> "DenseHead":
        keys = str(z["dense_keys"]).split("\n") if z["dense_keys"].size and str(z["dense_keys"]) else []
        return cls(keys, *(z[f"dense_{k}"] for k in ("shift", "scale", "w1", "b1", "w2", "b2")))


def _softmax(scores):
    import numpy as np

    scores = scores - scores.max(axis=1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=1, keepdims=True)
    return scores


@functools.lru_cache(maxsize=4)
def _cached_model(path: str) -> RelationModel:
    return RelationModel.load(path)


def default_model() -> RelationModel | None:
    if not MODEL_FILE.exists():
        return None
    return _cached_model(str(MODEL_FILE))


# Training and cross-validation put a model of their own here (a callable from a document's
# path to a model, so that each document can be read by a model not trained on it).
_override: list[Callable[[str | None], Any]] = []
_collect: list[list] = []


def using_model(chooser: Callable[[str | None], Any]):
    """``with using_model(lambda path: model):`` extraction in this process uses that model."""
    return _chosen(_override, chooser)


class collecting:
    """``with collecting() as got:`` each document's (path, text, candidates) is appended to ``got``."""

    def __enter__(self) -> list:
        self.got: list = []
        _collect.append(self.got)
        return self.got

    def __exit__(self, *exc):
        _collect.remove(self.got)


@dataclass
class Decision:
    """A document's relations before the dense view is read: its candidates, the sparse model's
    probabilities, and the rows the dense head reads (:func:`decide_all` reads those of many
    documents at once, the transformer being faster on a few large batches than many small)."""

    doc: Document
    rules: list[dict]
    model: RelationModel | None = None
    cands: list[Candidate] = field(default_factory=list)
    probs: Any = None
    rows: Any = ()

    def items(self) -> list:
        """What the model's transformer reads of :attr:`rows` (``RelationModel.items``)."""
        from kgr.stages.relview import evidence_of

        cands = [self.cands[i] for i in self.rows]
        return self.model.items(
            [evidence_of(self.doc.text, c) for c in cands],
            [(name_of(c.a), name_of(c.b)) for c in cands],
            [c.features for c in cands],
        )

    def finish(self, read=None) -> list[dict]:
        """The relation records, with what the transformer read of :attr:`rows` when read."""
        if self.model is None or not self.cands:
            return [_strip(r) for r in self.rules]
        probs = self.probs
        if read is not None and len(self.rows):
            probs = self.model.combined(probs, self.rows, read, [self.cands[i].features for i in self.rows])
        return _decided(self.doc, self.model, self.cands, probs)


def decision(doc: Document, spans: list, rules: list[dict], model: RelationModel | None = None) -> Decision:
    """Everything of :func:`learned_relations` up to reading the dense view."""
    if model is None and _override:
        model = _override[-1](doc.path)
    if model is None:
        model = default_model()
    cands = candidates(doc, spans, rules)
    for got in _collect:
        got.append((doc.path, doc.text, cands))
    if model is None or not cands:
        return Decision(doc, rules, model, cands)
    probs = model.probabilities([c.features for c in cands])
    return Decision(doc, rules, model, cands, probs, model.reads(probs))


def decide_all(decisions: list[Decision]) -> list[list[dict]]:
    """Each decision's relation records, what each model's transformer reads of them read in one
    pass per model."""
    import numpy as np

    by_model: dict[int, list[Decision]] = {}
    for d in decisions:
        if len(d.rows):
            by_model.setdefault(id(d.model), []).append(d)
    read = {}
    for wanted in by_model.values():
        got = wanted[0].model.read([e for d in wanted for e in d.items()])
        bounds = np.cumsum([0] + [len(d.rows) for d in wanted])
        for d, a, b in zip(wanted, bounds, bounds[1:]):
            read[id(d)] = {k: None if v is None else v[a:b] for k, v in got.items()}
    return [d.finish(read.get(id(d))) for d in decisions]


def learned_relations(doc: Document, spans: list, rules: list[dict], model: RelationModel | None = None) -> list[dict]:
    """Relation records (the shape :func:`kgr.stages.relations.extract_relations` gives) for one document."""
    return decide_all([decision(doc, spans, rules, model)])[0]


def _decided(doc: Document, model: RelationModel, cands: list[Candidate], probs) -> list[dict]:
    label_index = {label: k for k, label in enumerate(model.labels)}
    # First what the rules say of two mentions, unless the model finds it unlikely; its
    # probability for that relation decides, and what that probability means is the confidence.
    ruled: dict[tuple[str, str, str], tuple[float, Any, Any, str, Candidate]] = {}
    for c, row in zip(cands, probs):
        for rel, direction in _said(c):
            p = float(row[label_index[f"{rel}{direction}"]])
            if p < model.veto:
                continue
            src, dst = (c.a, c.b) if direction == ">" else (c.b, c.a)
            key = (name_of(src), rel, name_of(dst))
            if key not in ruled or p > ruled[key][0]:
                ruled[key] = (p, src, dst, rel, c)
    covered = {tuple(sorted((k[0], k[2]))) for k in ruled}
    # Then, for every other pair of names, the model's likeliest relation when it is likely enough.
    best: dict[tuple, tuple] = {}
    parses = _Parses(doc)
    peers = _peers(doc)
    aliases = {tuple(sorted((name_of(c.a), name_of(c.b)))) for c in cands if _aliased(doc, c)}
    for c, row in zip(cands, probs):
        if _supposed(parses, c) or _negated(parses, c) or _navigation(parses, c) or _pointer(parses, c):
            continue
        k = 1 + int(row[1:].argmax())  # the likeliest relation; the threshold decides against "none"
        label = model.labels[k]
        p = float(row[k])
        rel, direction = label[:-1], label[-1]
        src, dst = (c.a, c.b) if direction == ">" else (c.b, c.a)
        key = tuple(sorted((name_of(src), name_of(dst))))
        if (
            key in covered
            or key in aliases
            or (rel == "part_of" and peers.get(key[0], set()) & peers.get(key[1], set()))
            # a parameter is no part of another ("One or more **Runspace** names" under "### -RunspaceName")
            or (rel == "part_of" and is_element(doc, src) and is_element(doc, dst))
        ):
            continue
        prev = best.get(key)
        if prev is None or (p, c.start - c.end) > (prev[0], prev[4].start - prev[4].end):
            best[key] = (p, src, dst, rel, c)  # the likeliest; of equals, the shortest evidence
    # what the model adds alone keeps to the relation's signature (a place to be located in, an
    # owner that can own): the rules' own type checks
    kept = [(*t, True) for t in ruled.values()] + [
        (*t, False) for t in best.values() if t[0] >= model.threshold_for(t[3]) and types_ok(t[3], t[1], t[2])
    ]
    out = [_record(doc, src, dst, rel, model.confidence(p, said), c) for p, src, dst, rel, c, said in kept]
    return out + _located_through(doc, model, kept)


def _located_through(doc: Document, model: RelationModel, kept: list[tuple]) -> list[dict]:
    """What being located in a place entails: a thing in a town that lies in a country is in that
    country too ("Tartu is a city in Tartu County" and "Tartu County is a county of Estonia").
    One step, for two names the document relates no other way, when the two links together are as
    likely as a link stated once must be (the product of their probabilities passes the relation's
    threshold). Its evidence is both links' sentences: a record for each, whose confidence is the
    product of the two links' confidences."""
    rel = "located_in"
    links = [t for t in kept if t[3] == rel]
    related = {frozenset((name_of(t[1]), name_of(t[2]))) for t in kept}
    found: dict[tuple[str, str], tuple] = {}
    for p, a, b, _, c1, said1 in links:
        for q, b2, place, _, c2, said2 in links:
            pair = (name_of(a), name_of(place))
            if name_of(b2) != name_of(b) or pair[0] == pair[1] or frozenset(pair) in related:
                continue
            if p * q >= model.threshold_for(rel) and types_ok(rel, a, place) and p * q > found.get(pair, (0,))[0]:
                found[pair] = (p * q, a, place, c1, c2, model.confidence(p, said1) * model.confidence(q, said2))
    out = []
    for _, a, place, c1, c2, confidence in found.values():
        for c in (c1, c2) if (c1.start, c1.end) != (c2.start, c2.end) else (c1,):
            out.append({**_record(doc, a, place, rel, confidence, c), "pattern": "learned:inferred"})
    return out


def _supposed(parses: _Parses, c: Candidate) -> bool:
    """Are both names of a sentence candidate inside an if/unless clause ("If **Dialect** is
    Association, ...")? A supposition states no relation: the rules' own test, for what the model
    would add alone."""
    if c.kind != "sentence":
        return False
    doc = parses.doc
    block = doc.blocks[parses.block_index(c.a.start)]
    return conditional(doc, block, c.a.start) and conditional(doc, block, c.b.start)


def _peers(doc: Document) -> dict[str, set[tuple]]:
    """Each name that is the subject of a section, with the sibling groups it is in: headings of
    one level under the same parent ("### -Force" and "### -DisplayError" under "## Parameters",
    two components' sections under "## Components"). Sibling sections describe peers, and what
    one says of the other does not make either a part of the other."""
    out: dict[str, set[tuple]] = {}
    for idx, sp in doc.section_subjects.items():
        sec = doc.sections[idx]
        if sec.heading is not None and sp is not doc.subject:
            out.setdefault(name_of(sp), set()).add((sec.heading.level, tuple(sec.path[:-1])))
    return out


ALIAS = re.compile(r"\balias(?:es)?\b")  # the common noun: "Alias" may be a title ("Lost, Alias and Fringe")


def _aliased(doc: Document, c: Candidate) -> bool:
    """Does a sentence say one of its two names is an alias ("The alias for X is Y", "X has the
    aliases Y and Z")? Two names of one thing are in none of the relations the model adds, from
    that sentence or any other (a former name is ``same_as``, which only the text's own words
    state)."""
    if c.kind != "sentence":
        return False
    return bool(ALIAS.search(doc.text, c.start, max(c.a.end, c.b.end)))


def _navigation(parses: _Parses, c: Candidate) -> bool:
    """Is an end of the candidate in a list item or a paragraph that is nothing but a link
    ("- [Out-Host](Out-Host.md)" under "See also" or "Related links")? Such a line points the reader
    to another page and says nothing of how its target relates to the page or the section it is
    under, so the model adds no relation from it (a rule that reads a relation in it still may)."""
    doc = parses.doc
    for sp in (c.a, c.b):
        block = doc.blocks[parses.block_index(sp.start)]
        if block.kind not in ("item", "para") or len(block.links) != 1 or not block.start <= sp.start < block.end:
            continue
        s, e, _ = block.links[0]
        if block.masked[s - block.start : e - block.start].strip() == block.text:
            return True
    return False


def _pointer(parses: _Parses, c: Candidate) -> bool:
    """Is an end of the candidate what a sentence sends the reader to ("For more information, see
    [Wait-Job]", "see Example 7 of [Set-Option]")? An imperative "see" points to where to read more;
    it says nothing of how that page's subject relates to the names around it."""
    for sp in (c.a, c.b):
        tok = parses.head(sp)[1]
        for _ in range(4):
            if tok is None:
                break
            if tok.lower_ == "see" and tok.pos_ == "VERB":
                if not any(ch.dep_ in ("nsubj", "nsubjpass") for ch in tok.children):
                    return True
                break
            if tok.dep_ not in ("dobj", "pobj", "prep", "compound", "appos", "conj") or tok.head is tok:
                break
            tok = tok.head
    return False


def _negated(parses: _Parses, c: Candidate) -> bool:
    """Is a sentence candidate's link negated ("it does not work on Windows Server Core", "never
    calls X")? A word on the dependency path between the two names, or the word that joins them,
    has a negation: the statement denies the relation. The rules' own test (``NEGATION``), for
    what the model would add alone."""
    if c.kind != "sentence":
        return False
    (bia, ta), (bib, tb) = parses.head(c.a), parses.head(c.b)
    climb = _climb(ta, tb) if bia == bib else None
    if climb is None:
        return False
    return any(child.dep_ == "neg" for t in climb[0] + climb[1] for child in t.children)


def _said(c: Candidate) -> list[tuple[str, str]]:
    """(relation, direction) of what a rule says of the candidate's two mentions."""
    return [(f[5:-1], f[-1]) for f in c.features if f.startswith("rule=") and "|" not in f]


def _record(doc: Document, src, dst, rel: str, p: float, c: Candidate) -> dict:
    said = dict(_said(c))
    pattern = "learned+rule" if said.get(rel) else "learned"
    from kgr import records

    return {
        "kind": records.RELATION,
        "src": name_of(src),
        "dst": name_of(dst),
        "rel": rel,
        "confidence": round(p, 4),
        "pattern": f"{pattern}:{c.kind}",
        "src_type": src.type,
        "dst_type": dst.type,
        "evidence": evidence(doc.text, c.start, c.end),
    }


def _strip(r: dict) -> dict:
    r.pop("_spans", None)
    return r
