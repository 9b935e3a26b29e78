"""An annotated folder read against kgr's own text of each document.

Gold mentions are located by (surface, n), the n-th occurrence of the surface at token
boundaries, so they are found in kgr's normalized text whatever the HTML, PDF or DOCX
layout; a relation's evidence string is found after inline markup is removed and white
space collapsed on both sides.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from kgr.errors import KgrError

WORD = r"A-Za-z0-9_\u00C0-\u024F"
MAX_MENTION = 200  # characters: no annotated mention is longer


def surface_regex(surface: str) -> re.Pattern:
    return re.compile(rf"(?<![{WORD}])(?<!\d-)" + re.escape(surface) + rf"(?![{WORD}])(?!-\d)")


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@dataclass
class Scope:
    relation_types: frozenset[str] | None = None  # None: every type the corpus annotates can be judged
    entity_types: frozenset[str] | None = None


@dataclass
class Corpus:
    root: Path
    name: str
    entity_types: dict[str, str]  # gold entity id -> type
    mentions: dict[str, list[dict]]  # doc -> gold mentions
    relations: dict[str, list[dict]]  # doc -> gold relations
    scope: Scope = field(default_factory=Scope)

    @property
    def docs(self) -> list[str]:
        return sorted(set(self.mentions) | set(self.relations))


def read_corpus(root: str | Path) -> Corpus:
    root = Path(root)
    ann = root / "annotations"
    for need in (root / "docs", ann / "mentions.jsonl", ann / "entities.jsonl", ann / "relations.jsonl"):
        if not need.exists():
            raise KgrError(f"{need} not found", hint="an annotated folder holds docs/ and annotations/")
    scope = Scope()
    if (ann / "scope.json").exists():
        raw = orjson.loads((ann / "scope.json").read_bytes())
        scope = Scope(
            frozenset(raw["relation_types"]) if raw.get("relation_types") else None,
            frozenset(raw["entity_types"]) if raw.get("entity_types") else None,
        )
    mentions: dict[str, list[dict]] = {}
    for m in read_jsonl(ann / "mentions.jsonl"):
        mentions.setdefault(m["doc"], []).append(m)
    relations: dict[str, list[dict]] = {}
    for r in read_jsonl(ann / "relations.jsonl"):
        if scope.relation_types is None or r["rel"] in scope.relation_types:
            relations.setdefault(r["doc"], []).append(r)
    types = {e["id"]: e["type"] for e in read_jsonl(ann / "entities.jsonl")}
    return Corpus(root, root.name, types, mentions, relations, scope)


@dataclass
class GoldDoc:
    """One document's gold annotation, located in kgr's text of it."""

    spans: list[tuple[int, int, str]]  # (start, end, entity) sorted
    relations: list[tuple[str, str, str, tuple[int, int] | None]]  # (src, rel, dst, evidence range)

    def __post_init__(self):
        self.starts = [s for s, _, _ in self.spans]

    def entity_at(self, start: int, end: int) -> str | None:
        """The gold entity of the annotated mention overlapping [start, end) most."""
        best, overlap = None, 0
        i = bisect.bisect_left(self.starts, end) - 1
        while i >= 0 and self.spans[i][0] > start - MAX_MENTION:
            s, e, ent = self.spans[i]
            o = min(e, end) - max(s, start)
            if o > overlap:
                best, overlap = ent, o
            i -= 1
        return best


def locate(text: str, corpus: Corpus, doc: str) -> GoldDoc:
    spans = []
    for m in corpus.mentions.get(doc, []):
        for k, hit in enumerate(surface_regex(m["surface"]).finditer(text), 1):
            if k == m["n"]:
                spans.append((hit.start(), hit.end(), m["entity"]))
                break
    spans.sort()
    norm, back = _normalized(text)
    rels = []
    for r in corpus.relations.get(doc, []):
        where = None
        ev = _normalized(r.get("evidence") or "")[0]
        if ev:
            at = norm.find(ev)
            if at >= 0:
                where = (back[at], back[at + len(ev) - 1] + 1)
        rels.append((r["src"], r["rel"], r["dst"], where))
    return GoldDoc(spans, rels)


def _normalized(text: str) -> tuple[str, list[int]]:
    """``text`` without inline markup, white space collapsed, and each character's offset in ``text``."""
    out: list[str] = []
    back: list[int] = []
    i, n = 0, len(text)
    space = False
    while i < n:
        if text.startswith(("**", "__"), i):
            i += 2
            continue
        ch = text[i]
        if ch == "`":
            i += 1
            continue
        if ch.isspace():
            space = bool(out)
            i += 1
            continue
        if space:
            out.append(" ")
            back.append(i - 1)
            space = False
        out.append(ch)
        back.append(i)
        i += 1
    return "".join(out), back
