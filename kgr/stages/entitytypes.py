"""Entity types decided over all of an entity's mentions, by a small learned model.

Each mention contributes features that carry across corpora: the type the extractor
guessed and why (regex family, code font, gazetteer source, head-noun extension), spaCy's
NER label, the shape of the surface ("Xx Xx", "x-x", "X_X", "X-d", "xd.d.d"), its head and
first word, the words right before and after it ("the X team", "X leads", "by X"), the ordinary
(lower-case) words of its sentence near it, the head noun of what an apposition or a copula says
it is ("X, the payments team", "X is a library that ..."), the words of the section heading
it is under and of the header of its table column, and the last word of a multi-word name; its
words are stemmed (Snowball English: "leads", "leading" -> "lead").
An entity's features are counted over its mentions and divided by the square root of their
number, at most 1 (so that one noisy mention does not decide, and a feature most mentions
share counts fully), and a multinomial logistic model, trained with scikit-learn on annotated corpora
(``python -m kgr.eval.typetrain train``), turns them into one type. Inference is numpy only: the
weights ship with the package (``kgr/stages/models/types.json``).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import math
import re
from pathlib import Path
from typing import Iterator, Mapping

MODEL_FILE = Path(__file__).parent / "models" / "types.json"

_WORDS = re.compile(r"[A-Za-z\u00C0-\u024F][A-Za-z\u00C0-\u024F'’]*|\d+|[^\s\w]")

# Head nouns that say what kind of thing a name denotes (generic English); a mention whose
# last word is one of them has strong evidence of its type.
_HEADS: dict[str, str] | None = None


def _heads() -> dict[str, str]:
    global _HEADS
    if _HEADS is None:
        from kgr.stages.extract import HEAD_TYPES

        _HEADS = {h: typ for typ, heads in HEAD_TYPES.items() for h in heads if " " not in h}
    return _HEADS


def context(text: str, start: int, end: int) -> list[str]:
    """[word before the previous, previous, next, the one after] on the mention's line, then
    the words of a wider window: up to WINDOW words before, "|", up to WINDOW after (same line,
    same sentence); "^" and "$" stand for the line's start and end."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if line_end < 0:
        line_end = len(text)
    left = _WORDS.findall(text[max(line_start, start - WIDE_CHARS) : start])
    right = _WORDS.findall(text[end : min(line_end, end + WIDE_CHARS)])
    before = left[-2:]
    after = right[:2]
    before = ["^"] * (2 - len(before)) + before
    after = after + ["$"] * (2 - len(after))
    heading = _heading(text, line_start)
    out = before + after + _sentence(left, reverse=True) + [SEP] + _sentence(right) + [HEADING] + heading
    if text.startswith("|", line_start):
        out += [COLUMN] + _column(text, line_start, start)
    return out


SEP, HEADING, COLUMN = "<sep>", "<heading>", "<column>"  # no word reads so: they part the window's lists


def _column(text: str, line_start: int, start: int) -> list[str]:
    """The words of the header cell of the table column a mention is in ("| Owner | Region |")."""
    top = line_start
    while top > 0:
        prev = text.rfind("\n", 0, top - 1) + 1
        if not text.startswith("|", prev):
            break
        top = prev
    if top == line_start:  # the mention is in the header row
        return []
    cell = text.count("|", line_start, start)
    header = text[top : text.find("\n", top)].split("|")
    if cell >= len(header):
        return []
    return [w.lower() for w in _WORDS.findall(header[cell]) if w.isalpha()][:4]


@functools.lru_cache(maxsize=4)
def _headings(text: str) -> tuple[list[int], list[tuple[int, list[str]]]]:
    """The markdown headings of a text: their line starts, and (level, lower-case words)."""
    starts, heads = [], []
    for m in _HEADING_LINE.finditer(text):
        starts.append(m.start())
        heads.append((len(m.group(1)), [w.lower() for w in _WORDS.findall(m.group(2)) if w.isalpha()]))
    return starts, heads


_HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+(.*)$", re.M)


def _heading(text: str, line_start: int) -> list[str]:
    """The words of the section heading a line is under (for a heading line, of its parent):
    a list under "Vendors" or "Teams" says what its names are."""
    starts, heads = _headings(text)
    i = bisect.bisect_right(starts, line_start) - 1
    if i < 0:
        return []
    level = 7
    if starts[i] == line_start:  # the mention is in a heading: read the one above it
        level = heads[i][0]
        i -= 1
    while i >= 0 and heads[i][0] >= level:
        i -= 1
    return heads[i][1][:8] if i >= 0 else []


WINDOW = 10  # words of the wider window on each side
WIDE_CHARS = 120
_SENTENCE_END = frozenset(".!?;:")


def _sentence(words: list[str], reverse: bool = False) -> list[str]:
    """The words nearest the mention up to a sentence end, at most WINDOW of them."""
    seq = words[::-1] if reverse else words
    out: list[str] = []
    for w in seq:
        if w in _SENTENCE_END or len(out) >= WINDOW:
            break
        out.append(w)
    return out[::-1] if reverse else out


_DETERMINERS = frozenset(("a", "an", "the", "our", "its", "their", "this", "one"))
_COPULAS = frozenset(("is", "was", "are", "were", "be", "becomes", "remains"))
_HEAD_STOP = frozenset(
    "that which who whose where for of in to with and or on by at from as is are was were "
    "it its runs owns uses calls since until when while inside within into onto over under "
    "between across through behind about after before against during without via per than".split()
)


def descriptor(after: list[str]) -> str | None:
    """The head noun of what the text says a name is, from the words after it: "X, the payments
    team ..." -> "team", "X is an open-source library that ..." -> "library"."""
    i = 0
    if after[:1] == [","]:
        i = 1
    elif after[:1] and after[0].lower() in _COPULAS:
        i = 1
    else:
        return None
    if i >= len(after) or after[i].lower() not in _DETERMINERS:
        return None
    head = None
    for w in after[i + 1 : i + 6]:
        low = w.lower()
        if low in _HEAD_STOP or not (w.isalpha() or "-" in w):
            break
        if w != low:  # a name inside the description: "the Kafka-based bus" goes on
            continue
        head = low
    return head


_LOWER_WORD = re.compile(r"(?<![\w-])[a-z][a-z']+(?![\w-])")


def lower_words(text: str) -> frozenset[str]:
    """The words a text writes in lower case: its common nouns, verbs and such."""
    return frozenset(_LOWER_WORD.findall(text))


def commonness(surface: str, common: frozenset[str] | set[str]) -> str:
    """Are a name's words ones the document also uses as ordinary words ("Ledger Store": ledger,
    store) or not ("Dmitri Hale")? "all", "some", "none", or "" for a name without such words."""
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", surface) if w[:1].isupper() and len(w) > 2]
    if not words:
        return ""
    hits = sum(w in common for w in words)
    return "all" if hits == len(words) else "some" if hits else "none"


def shape(surface: str) -> str:
    """ "Ledger Service" -> "Xx Xx", "ledger-svc" -> "x-x", "ADR-012" -> "X-d", "v3.2.1" -> "xd.d.d"."""
    out: list[str] = []
    for c in surface[:40]:
        k = "X" if c.isupper() else "x" if c.isalpha() else "d" if c.isdigit() else " " if c.isspace() else c
        if not out or out[-1] != k:
            out.append(k)
    return "".join(out)


def _word(w: str) -> str:
    """A neighbouring word as a feature: common words as they are (lower case), names by their shape
    ("Xx"), so that what is learned is how the text writes about a thing, not what it is called."""
    low = w.lower()
    if w == low or low in _stop():
        return low
    return shape(w)


@functools.lru_cache(maxsize=1)
def _stop() -> frozenset[str]:
    from kgr.stages.extract import STOP_NAMES

    return frozenset(STOP_NAMES)


def strong_type(surface: str, mtype: str | None, source: str | None, features: Mapping | None) -> str | None:
    """The type a mention shows by itself, when it has strong evidence of it: a regex family
    (versions, ids, regions, standards), a head noun ("X team", "Porto office"). None otherwise
    (a capitalised run, spaCy's guess)."""
    features = features or {}
    if source == "regex" or features.get("pattern"):
        return mtype
    if source == "coref":
        return None
    words = surface.lower().split()
    if len(words) > 1 and words[-1] in _heads():
        return _heads()[words[-1]]
    return None


def mention_features(
    surface: str, mtype: str | None, source: str | None, features: Mapping | None, ctx: list[str] | None
) -> list[str]:
    """The features one mention contributes to its entity's type."""
    features = features or {}
    if source == "coref":
        return [f"coref={surface.lower()}", f"coref_kind={features.get('coref', '')}"]
    out = [f"t={mtype or 'CONCEPT'}", f"s={source or ''}", f"sh={shape(surface)}"]
    if features.get("ner_label"):
        out.append(f"ner={features['ner_label']}")
    for key in ("pattern", "gaz_source", "common"):
        if features.get(key):
            out.append(f"{key}={features[key]}")
    for key in ("code_font", "extended", "in_title"):
        if features.get(key):
            out.append(key)
    for other in set(features.get("also") or ()):
        out.append(f"also={other}")
    for role in features.get("roles") or ():  # what the rules say it does ("owned_by<": owns something)
        out.append(f"role={role}")
    words = [w for w in re.split(r"[\s/]+", surface) if w]
    out.append(f"nw={min(len(words), 4)}")
    if words:
        head, first = words[-1], words[0]
        if head.isalpha() and head.islower():  # "Mercury SMS adapter": a common noun names the kind
            out.append(f"head={head}")
        typ = _heads().get(head.lower())
        if typ:
            out.append(f"headtype={typ}")
        if len(words) > 1 and first.lower() in _stop():
            out.append(f"first={first.lower()}")
        if len(words) > 1 and head.isalpha():  # "Payments Team", "Beacon Service": the last word says the kind
            out.append(f"last={head.lower()}")
    if any(c.isdigit() for c in surface):
        out.append("digit")
    if surface.isupper():
        out.append("caps")
    if ctx:
        p2, p1, n1, n2 = (_word(w) for w in ctx[:4])
        out += [f"p1={p1}", f"n1={n1}", f"p2={p2} {p1}", f"n2={n1} {n2}"]
        for w in (p1, n1):
            typ = _heads().get(w)
            if typ:
                out.append(f"ctxhead={typ}")
        if SEP in ctx:
            bar = ctx.index(SEP)
            hd = ctx.index(HEADING) if HEADING in ctx else len(ctx)
            col = ctx.index(COLUMN) if COLUMN in ctx else len(ctx)
            out += _window(ctx[4:bar], ctx[bar + 1 : hd])
            own = {w.lower() for w in words}
            out += [f"hd={w}" for w in set(ctx[hd + 1 : col]) if len(w) > 2 and w not in own]
            out += [f"col={w}" for w in ctx[col + 1 :] if len(w) > 2]
    return [_stemmed(f) if f.startswith(_STEMMED) else f for f in out]


_STEMMED = ("w=", "p1=", "n1=", "p2=", "n2=", "desc=", "hd=", "col=", "head=")


@functools.lru_cache(maxsize=65536)
def _stemmed(feature: str) -> str:
    """A word feature with its words' inflection cut off ("leads", "leading" -> "lead"), so that
    what one text says in another form still counts."""
    key, value = feature.split("=", 1)
    return key + "=" + " ".join(stem(w) for w in value.split(" "))


def stem(word: str) -> str:
    """The word's Snowball (Porter 2) English stem: "services" -> "servic", "owned" -> "own",
    "running" -> "run"."""
    return _stemmer().stemWord(word) if word.isalpha() else word


@functools.cache
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def _window(left: list[str], right: list[str]) -> list[str]:
    """What the sentence around a mention says of it: the head noun of an apposition or a
    copula ("X, the payments team"; "X is a library"), and the ordinary words near it."""
    out = []
    head = descriptor(right)
    if head:
        out.append(f"desc={head}")
        typ = _heads().get(head)
        if typ:
            out.append(f"desctype={typ}")
    for w in set(left[-WINDOW:] + right[:WINDOW]):
        if w.isalpha() and w.islower() and len(w) > 2:
            out.append(f"w={w}")
    return out


CONTEXT_PREFIXES = ("p1=", "n1=", "p2=", "n2=", "ctxhead=", "coref", "desc", "w=", "hd=", "col=", "role=")


def entity_features(counts: Mapping[str, float], n: int) -> dict[str, float]:
    """An entity's features: how many of its mentions have each, over the square root of how many
    mentions it has (at most 1: a feature of one mention in nine counts a third, of all of them
    fully), and how often it is named."""
    n = max(1, n)
    scale = math.sqrt(n)
    out = {f: min(1.0, c / scale) for f, c in counts.items()}
    out[f"n={min(int(math.log2(n)), 5)}"] = 1.0
    return out


def add_mention(counts: dict[str, float], feats: list[str]) -> None:
    for f in feats:
        counts[f] = counts.get(f, 0.0) + 1.0


class Typer:
    """A multinomial logistic model over entity features: weights per feature and type."""

    def __init__(self, model: Mapping):
        import numpy as np

        self.types: list[str] = list(model["types"])
        self.index = {f: i for i, f in enumerate(model["features"])}
        self.weights = np.asarray(model["weights"], dtype=np.float64).reshape(len(self.index), len(self.types))
        self.bias = np.asarray(model["bias"], dtype=np.float64)
        # weights shared by every type: ``{"headtype": w}`` adds w times the entity's feature
        # "headtype=T" to type T's score, whatever T is (see kgr.eval.typetrain.AGREEMENT)
        self.agreement: dict[str, float] = dict(model.get("agreement") or {})

    @classmethod
    def load(cls, path: str | Path = MODEL_FILE) -> "Typer":
        import orjson

        return cls(orjson.loads(Path(path).read_bytes()))

    def probabilities(self, feats: Mapping[str, float]):
        import numpy as np

        z = self.bias.copy()
        for f, v in feats.items():
            i = self.index.get(f)
            if i is not None:
                z += v * self.weights[i]
        for prefix, w in self.agreement.items():
            for k, typ in enumerate(self.types):
                z[k] += w * feats.get(f"{prefix}={typ}", 0.0)
        z -= z.max()
        p = np.exp(z)
        return p / p.sum()

    def predict(self, feats: Mapping[str, float]) -> tuple[str, float]:
        p = self.probabilities(feats)
        i = int(p.argmax())
        return self.types[i], float(p[i])


_override: list[str | Path | None] = []


@contextlib.contextmanager
def model(path: str | Path | None) -> Iterator[None]:
    """Linkers made inside use the model at ``path`` (None: no model, types by vote), e.g. to
    collect training data with the types the model does not decide."""
    _override.append(path)
    try:
        yield
    finally:
        _override.pop()


def default_typer() -> Typer | None:
    """The model new linkers use: the packaged one, unless :func:`model` says otherwise."""
    path = _override[-1] if _override else MODEL_FILE
    if path is None:
        return None
    return _load(str(path))


@functools.lru_cache(maxsize=4)
def _load(path: str) -> Typer | None:
    if not Path(path).exists():
        return None
    return Typer.load(path)
