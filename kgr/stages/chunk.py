"""The chunk stage: split ``doc`` records into ``chunk`` records sized for the embedder.

Budgets are counted in the embedding model's own tokenizer (``kgr.stages.tokens``) and never
exceed what the model reads: the embedder embeds ``prelude + "\\n" + text``, so every
chunk satisfies ``tokens(prelude) + tokens(text) + special tokens <= max_length``
(254 text-and-prelude tokens for all-MiniLM-L6-v2).

How a document is cut (seed 000 section 5, adapted to a 256-token model):

1. The Markdown text is split into sections at ATX headings (``#`` .. ``######``) and
   setext headings, ignoring lines inside fenced code blocks (``kgr.stages.markdown``,
   whose sections extraction sees as well).
2. A section is a run of blocks: paragraphs, list items (with their nested lines),
   tables and fenced code. Blocks are packed into chunks up to the budget and never
   cut when they fit in one. A longer block is cut at line boundaries, then at
   sentence boundaries, then between words, and a word longer than the budget (a
   5 MB line without spaces) is cut between tokens or characters, so every chunk
   fits. Every step is linear in the size of the text.
3. The document's kind picks the budget: ``faq`` (question headings, "FAQ" in the
   title or path) and ``definitions`` (glossaries, lists of ``**Term**: meaning``
   lines) get the shorter one; ``procedure`` documents (numbered steps, "How to"
   titles, runbooks) keep each run of steps in one chunk when it fits, and cut a
   longer run only between steps.
4. Consecutive chunks of one section overlap by ``overlap`` of the budget: the next
   chunk starts with the tail of the previous one, cut at a block or sentence
   boundary when one is near enough, else between words. Sections never share a chunk,
   except that a tiny section is merged with the following sections under the same
   parent when together they fit in one chunk (the merged chunk keeps the first
   section's ``section`` and ``headings``), and a heading with no text of its own is
   carried into the section that follows it.
5. Chunk text is an exact slice of the document: ``doc["text"][start:end] == text``.

Output: each doc record unchanged, then its chunk records; other kinds pass through in
order. A document that would need more than ``max_chunks_per_doc`` chunks is replaced
by an error record (``reason: too_many_chunks``), sent *instead of* the doc record so
that the loader never stores a document without its chunks; the error carries the
doc's ``size``/``mtime_ms``/``file_hash`` so the loader remembers the file as failed.

Records are read in small batches (``batch_docs`` records or about a megabyte of text)
so that the tokenizer can work on both cores; pass ``batch_docs=1`` when every record
must come out before the next one is read.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from array import array
from typing import Any, Iterable, Iterator, Sequence

from kgr import records
from kgr.config import ChunkSettings, settings_of
from kgr.errors import ConfigError
from kgr.stages.markdown import Block as _Block
from kgr.stages.markdown import clean_title
from kgr.stages.markdown import parse_blocks as _parse_blocks
from kgr.stages.tokens import DEFAULT_MODEL, TokenCounter, get_counter

STAGE = "chunk"

GENERAL, FAQ, DEFINITIONS, PROCEDURE = "general", "faq", "definitions", "procedure"
CHUNK_KINDS = (GENERAL, FAQ, DEFINITIONS, PROCEDURE)
_DEFAULTS = ChunkSettings()  # the defaults of chunk()'s options are the settings'
DEFAULT_BUDGETS = _DEFAULTS.budgets.as_dict()

MIN_BUDGET = 8
# A section under this share of the budget is "tiny" and may merge with the next.
TINY_SHARE = 0.2
# A chunk never has more characters than this many per token of budget: a word the
# tokenizer reads as one [UNK] token can be megabytes long.
CHARS_PER_TOKEN = 16
# The prelude may use at most this share of the model's input.
PRELUDE_SHARE = 0.25
# Overlap between words (not at a block or sentence boundary) is used only when at
# least this many tokens of overlap are allowed.
MIN_WORD_OVERLAP = 8
# Texts longer than this are tokenized in line-aligned pieces (bounded memory, and
# the pieces are tokenized in parallel).
PIECE_CHARS = 1 << 16

BATCH_DOCS = 32
BATCH_CHARS = 1 << 20

# Atom boundary strengths: where an atom starts relative to the text before it.
BLOCK, LINE, SENTENCE, WORD, MID_WORD = 3, 2, 1, 0, -1


# --- public API ------------------------------------------------------------------------


def options_from_config(cfg: Any) -> dict:
    """The keyword arguments of ``chunk()`` from the settings (``kgr.config.settings_of``)."""
    section = settings_of(cfg).chunk
    options = {
        "model": section.model,
        "max_tokens": section.max_tokens,
        "overlap": section.overlap,
        "max_chunks_per_doc": section.max_chunks_per_doc,
        "budgets": section.budgets.as_dict(),
    }
    _check_options(options["max_tokens"], options["overlap"], options["budgets"], options["max_chunks_per_doc"])
    return options


def chunk(
    records_in: Iterable[dict],
    *,
    max_tokens: int = _DEFAULTS.max_tokens,
    overlap: float = _DEFAULTS.overlap,
    budgets: dict | None = None,
    max_chunks_per_doc: int = _DEFAULTS.max_chunks_per_doc,
    tokenizer: TokenCounter | None = None,
    model: str = DEFAULT_MODEL,
    batch_docs: int = BATCH_DOCS,
) -> Iterator[dict]:
    """Yield each doc record followed by its chunk records; pass other kinds through."""
    _check_options(max_tokens, overlap, budgets, max_chunks_per_doc)
    counter = tokenizer if tokenizer is not None else get_counter(model)
    chunker = Chunker(
        counter, max_tokens=max_tokens, overlap=overlap, budgets=budgets, max_chunks_per_doc=max_chunks_per_doc
    )
    for batch in _batches(iter(records_in), max(1, int(batch_docs))):
        yield from chunker.run_batch(batch)


def chunk_doc(doc: dict, **options: Any) -> list[dict]:
    """The chunk records of one doc record (a convenience for tests and tools)."""
    out = list(chunk([doc], **options))
    return [r for r in out if r.get("kind") == records.CHUNK]


def doc_kind(path: str, title: str, text: str) -> str:
    """The chunking kind of a document: general, faq, definitions or procedure."""
    return _classify(path, title, text, _parse_blocks(text))


# --- options and batching --------------------------------------------------------------


def _check_options(max_tokens: Any, overlap: Any, budgets: Any, max_chunks: Any) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < MIN_BUDGET:
        raise ConfigError(f"chunk.max_tokens must be an integer of at least {MIN_BUDGET}, got {max_tokens!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0 <= overlap <= 0.5:
        raise ConfigError(f"chunk.overlap must be a share between 0 and 0.5, got {overlap!r}")
    if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:
        raise ConfigError(f"chunk.max_chunks_per_doc must be a positive integer, got {max_chunks!r}")
    for kind, value in (budgets or {}).items():
        if kind not in CHUNK_KINDS:
            raise ConfigError(f"chunk.budgets: unknown kind {kind!r}", hint=f"kinds are {', '.join(CHUNK_KINDS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_BUDGET:
            raise ConfigError(f"chunk.budgets.{kind} must be an integer of at least {MIN_BUDGET}, got {value!r}")


def _batches(it: Iterator[dict], size: int) -> Iterator[list[dict]]:
    """Groups of up to ``size`` records, closed early after about BATCH_CHARS of text."""
    while True:
        batch: list[dict] = []
        chars = 0
        for rec in itertools.islice(it, size):
            batch.append(rec)
            if rec.get("kind") == records.DOC and isinstance(rec.get("text"), str):
                chars += len(rec["text"])
                if chars >= BATCH_CHARS:
                    break
        if not batch:
            return
        yield batch


class _TooManyChunks(Exception):
    pass


# --- sections --------------------------------------------------------------------------


class _Section:
    __slots__ = ("headings", "title", "blocks")

    def __init__(self, headings: list[str], title: str, blocks: list[_Block]):
        self.headings = headings
        self.title = title
        self.blocks = blocks  # the heading block first, when there is one

    @property
    def start(self) -> int:
        return self.blocks[0].start

    @property
    def end(self) -> int:
        return self.blocks[-1].end

    @property
    def heading_only(self) -> bool:
        return len(self.blocks) == 1 and self.blocks[0].kind == "heading"


def _sections(blocks: list[_Block], doc_title: str) -> list[_Section]:
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    current: _Section | None = None
    for block in blocks:
        if block.kind == "heading":
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, block.title))
            headings = [t for _, t in stack]
            title = next((t for t in reversed(headings) if t), doc_title)
            current = _Section(headings, title, [block])
            sections.append(current)
        else:
            if current is None:
                current = _Section([], doc_title, [])
                sections.append(current)
            current.blocks.append(block)
    return sections


# --- document kinds --------------------------------------------------------------------

_WORDS = re.compile(r"[a-z]+")
_DEF_LINE = re.compile(
    r"[ \t]*(?:[-*+][ \t]+)?(?:\*\*[^*\n]{1,80}\*\*|__[^_\n]{1,80}__|`[^`\n]{1,80}`)[ \t]*[:—–-]"  # **Term**: meaning
    r"|[ \t]*(?:[-*+][ \t]+)?[^\s:—–|#>][^:—–\n]{0,60}?[ \t]+[—–][ \t]+\S"  # Term — meaning
    r"|[ \t]*:[ \t]+\S"  # a definition-list line
)
_HOWTO_TITLE = re.compile(r"\s*(?:how[ -]?to\b|step[ -]by[ -]step\b)", re.IGNORECASE)
_PROCEDURE_WORDS = {"runbook", "runbooks", "playbook", "playbooks", "procedure", "procedures", "howto", "walkthrough"}
_DEFINITION_WORDS = {"glossary", "definitions", "terminology", "glossaries"}
_FAQ_WORDS = {"faq", "faqs"}


def _classify(path: str, title: str, text: str, blocks: list[_Block]) -> str:
    name = f"{path} {title}".lower()
    words = set(_WORDS.findall(name))
    if words & _FAQ_WORDS or "frequently asked" in name:
        return FAQ
    if words & _DEFINITION_WORDS:
        return DEFINITIONS
    if _HOWTO_TITLE.match(title or "") or words & _PROCEDURE_WORDS or "how-to" in name or "how_to" in name:
        return PROCEDURE

    headings = [b.title for b in blocks if b.kind == "heading" and b.level > 1]
    questions = sum(1 for t in headings if t.endswith("?"))
    if questions >= 2 and questions * 2 >= len(headings):
        return FAQ

    body = [b for b in blocks if b.kind in ("para", "item")]
    if body:
        definitions = 0
        lines = 0
        for b in body:
            for line in text[b.start : b.end].split("\n"):
                if line.strip():
                    lines += 1
                    if _DEF_LINE.match(line):
                        definitions += 1
        if definitions >= 5 and definitions * 5 >= lines * 2:
            return DEFINITIONS
        steps = sum(1 for b in body if b.ordered)
        if steps >= 3 and steps * 3 >= len(body):
            return PROCEDURE
    return GENERAL


# --- prelude ---------------------------------------------------------------------------


PRELUDE_SEP = " • "
HEADING_SEP = " > "


def make_prelude(path: str, section: str, headings: Sequence[str]) -> str:
    """``path • section • the two headings above it``, without repeating a part."""
    return PRELUDE_SEP.join(HEADING_SEP.join(part) for part in _prelude_parts(path, section, headings))


def moved_prelude(prelude: str | None, old_path: str, new_path: str) -> str | None:
    """A chunk's prelude for its document moved from ``old_path`` to ``new_path``: the path part
    it starts with replaced; None when it does not start with the old path part."""
    old_part, new_part = clean_title(old_path), clean_title(new_path)
    if prelude and prelude.startswith(old_part) and prelude[len(old_part) : len(old_part) + 1] in ("", " "):
        return new_part + prelude[len(old_part) :]
    return None


def _prelude_parts(path: str, section: str, headings: Sequence[str]) -> list[list[str]]:
    trail = [h for h in (clean_title(h) for h in headings) if h]
    section = clean_title(section or "")
    if trail and trail[-1] == section:
        trail.pop()
    parts: list[list[str]] = []
    for part in ([clean_title(path or "")], [section], trail[-2:]):
        part = [p for p in part if p]
        if part and (not parts or parts[-1] != part):
            parts.append(part)
    return parts


# --- sentence boundaries ---------------------------------------------------------------

_SENTENCE_END = re.compile(r"[.!?…][\"'’”)\]]*\s+|[。！？][\"'’”」』)\]]*\s*")


def _is_mark(ch: str) -> bool:
    """A character that must stay with the one before it (combining marks, joiners)."""
    return unicodedata.combining(ch) != 0 or ch in "\u200d\ufe0f\ufe0e" or "\U0001f3fb" <= ch <= "\U0001f3ff"


# --- the chunker -----------------------------------------------------------------------


class _Atom:
    """An unbreakable span for the packer: a block, a line, a sentence or a word run."""

    __slots__ = ("start", "end", "tokens", "strength", "heading")

    def __init__(self, start: int, end: int, tokens: int, strength: int, heading: bool = False):
        self.start = start
        self.end = end
        self.tokens = tokens
        self.strength = strength
        self.heading = heading

    def __repr__(self) -> str:
        return f"<atom {self.start}:{self.end} {self.tokens}t s{self.strength}>"


class _Doc:
    """One document being chunked: its text, token starts and limits."""

    def __init__(self, chunker: "Chunker", rec: dict, starts: array):
        self.chunker = chunker
        self.counter = chunker.counter
        self.rec = rec
        self.path = str(rec.get("path", ""))
        self.text: str = rec["text"]
        self.starts = starts

    def ntok(self, a: int, b: int) -> int:
        """Tokens in text[a:b], for a and b at word boundaries."""
        starts = self.starts
        return bisect.bisect_left(starts, b) - bisect.bisect_left(starts, a)


class _Plan:
    __slots__ = ("doc", "kind", "sections", "parts", "preludes", "prelude_tokens")

    def __init__(self, doc: _Doc, kind: str, sections: list[_Section], parts: list[list[list[str]]]):
        self.doc = doc
        self.kind = kind
        self.sections = sections
        self.parts = parts
        self.preludes: list[str] = []
        self.prelude_tokens: dict[str, int] = {}


class Chunker:
    def __init__(
        self,
        counter: TokenCounter,
        *,
        max_tokens: int = _DEFAULTS.max_tokens,
        overlap: float = _DEFAULTS.overlap,
        budgets: dict | None = None,
        max_chunks_per_doc: int = _DEFAULTS.max_chunks_per_doc,
    ):
        self.counter = counter
        self.text_limit = counter.text_limit  # prelude + text, special tokens already removed
        self.max_tokens = min(max_tokens, self.text_limit)
        merged = dict(DEFAULT_BUDGETS)
        merged.update(budgets or {})
        # --max-tokens bounds every kind; a kind's own budget may only be smaller
        self.budgets = {k: max(MIN_BUDGET, min(v, self.max_tokens)) for k, v in merged.items()}
        self.overlap = float(overlap)
        self.max_chunks = max_chunks_per_doc
        self.max_prelude = max(MIN_BUDGET, int(self.text_limit * PRELUDE_SHARE))
        self._part_tokens: dict[str, int] = {}

    # -- batches ------------------------------------------------------------------

    def run_batch(self, batch: list[dict]) -> Iterator[dict]:
        docs = [r for r in batch if r.get("kind") == records.DOC and isinstance(r.get("text"), str) and "path" in r]
        starts = self._token_starts([d["text"] for d in docs])
        plans = {id(d): self._plan(_Doc(self, d, s)) for d, s in zip(docs, starts)}
        self._count_preludes(plans.values())
        for rec in batch:
            if rec.get("kind") != records.DOC:
                yield rec
                continue
            plan = plans.get(id(rec))
            if plan is None:
                yield records.error(STAGE, _bad_doc_reason(rec), path=rec.get("path"), reason="bad_record")
                continue
            yield from self._one(plan)

    def _token_starts(self, texts: list[str]) -> list[array]:
        """Start offsets of every token of each text, tokenizing line-aligned pieces in parallel."""
        pieces: list[str] = []
        owners: list[tuple[int, int]] = []  # (text index, offset of the piece in the text)
        for i, text in enumerate(texts):
            for offset, piece in _pieces(text, PIECE_CHARS):
                pieces.append(piece)
                owners.append((i, offset))
        result = [array("q") for _ in texts]
        if pieces:
            for (i, offset), enc in zip(owners, self.counter.encode_batch(pieces)):
                if offset:
                    result[i].extend([a + offset for a, _ in enc.offsets])
                else:
                    result[i].extend([a for a, _ in enc.offsets])
        return result

    # -- one document -------------------------------------------------------------

    def _one(self, plan: "_Plan") -> Iterator[dict]:
        try:
            chunks = self._chunks(plan)
        except _TooManyChunks:
            rec = plan.doc.rec
            fields = {k: rec.get(k) for k in ("size", "mtime_ms", "file_hash", "format")}
            yield records.error(
                STAGE,
                f"{plan.doc.path}: more than {self.max_chunks} chunks (chunk.max_chunks_per_doc); the document is not stored",
                path=plan.doc.path,
                reason="too_many_chunks",
                **fields,
            )
            return
        yield plan.doc.rec
        yield from chunks

    def _plan(self, doc: _Doc) -> "_Plan":
        """Parse a document and name its sections; chunking waits for the prelude counts."""
        text = doc.text
        blocks = _parse_blocks(text) if text.strip() else []
        title = clean_title(str(doc.rec.get("title") or "")) or _first_heading(blocks) or _stem(doc.path)
        kind = _classify(doc.path, title, text, blocks) if blocks else GENERAL
        sections = _sections(blocks, title)
        parts = [_prelude_parts(doc.path, s.title, s.headings) for s in sections]
        return _Plan(doc, kind, sections, parts)

    def _count_preludes(self, plans: Iterable["_Plan"]) -> None:
        """Token counts of every prelude of a batch, in one call to the tokenizer.

        With an additive tokenizer a prelude counts as the sum of its parts (the
        path and heading titles, which repeat across sections and documents, so
        they are cached), and of its separators.
        """
        plans = list(plans)
        if self.counter.additive:
            cache = self._part_tokens
            if len(cache) > 200_000:
                cache.clear()
            missing = list(
                dict.fromkeys(
                    x for plan in plans for parts in plan.parts for part in parts for x in part if x not in cache
                )
            )
            missing += [sep.strip() for sep in (PRELUDE_SEP, HEADING_SEP) if sep.strip() not in cache]
            cache.update(zip(missing, self.counter.count_batch(missing)))
            sep_tokens = cache[PRELUDE_SEP.strip()]
            heading_sep_tokens = cache[HEADING_SEP.strip()]
            counts = {}
            for plan in plans:
                for parts in plan.parts:
                    prelude = PRELUDE_SEP.join(HEADING_SEP.join(part) for part in parts)
                    counts[prelude] = (
                        sum(cache[x] for part in parts for x in part)
                        + sep_tokens * (len(parts) - 1)
                        + heading_sep_tokens * sum(len(part) - 1 for part in parts)
                    )
        else:
            unique = list(
                dict.fromkeys(
                    PRELUDE_SEP.join(HEADING_SEP.join(part) for part in parts) for plan in plans for parts in plan.parts
                )
            )
            counts = dict(zip(unique, self.counter.count_batch(unique)))
        for plan in plans:
            preludes = [PRELUDE_SEP.join(HEADING_SEP.join(part) for part in parts) for parts in plan.parts]
            for i, prelude in enumerate(preludes):
                if counts[prelude] > self.max_prelude:
                    prelude = self._shorten_prelude(plan.doc.path, plan.sections[i].title)
                    counts.setdefault(prelude, self.counter.count(prelude))
                    preludes[i] = prelude
            plan.preludes = preludes
            plan.prelude_tokens = {p: counts[p] for p in preludes}

    def _chunks(self, plan: "_Plan") -> list[dict]:
        doc, kind, sections, preludes = plan.doc, plan.kind, plan.sections, plan.preludes
        text = doc.text
        if not sections:
            return []
        budget = self.budgets.get(kind, self.max_tokens)
        prelude_tokens = plan.prelude_tokens

        def limit_of(i: int) -> int:
            return max(MIN_BUDGET, min(budget, self.text_limit - prelude_tokens[preludes[i]]))

        spans: list[tuple[int, int, int, int]] = []  # (section index, start, end, tokens)
        for first, group in self._groups(doc, sections, limit_of):
            limit = limit_of(first)
            atoms = self._atoms(doc, group, limit, kind == PROCEDURE)
            for start, end, tokens in self._pack(doc, atoms, limit):
                spans.append((first, start, end, tokens))
                if len(spans) > self.max_chunks:
                    raise _TooManyChunks()

        if not self.counter.additive:
            spans = self._verify(plan, spans, limit_of)

        out = []
        for ord_, (i, start, end, tokens) in enumerate(spans):
            section = sections[i]
            body = text[start:end]
            prelude = preludes[i]
            out.append(
                {
                    "kind": records.CHUNK,
                    "doc": doc.path,
                    "ord": ord_,
                    "text": body,
                    "prelude": prelude,
                    "section": section.title,
                    "headings": list(section.headings),
                    "start": start,
                    "end": end,
                    "tokens": tokens,
                    "hash": records.text_hash(prelude + "\n" + body),
                    "chunk_kind": kind,
                }
            )
        return out

    def _shorten_prelude(self, path: str, section: str) -> str:
        prelude = make_prelude(path, section, [])
        if self.counter.count(prelude) <= self.max_prelude:
            return prelude
        offsets = self.counter.offsets(prelude)
        cut = offsets[self.max_prelude - 1][0]
        return prelude[:cut].rstrip() + "…"

    # -- grouping sections ------------------------------------------------------

    def _groups(self, doc: _Doc, sections: list[_Section], limit_of) -> Iterator[tuple[int, list[_Block]]]:
        """Sections to chunk on their own, as (index of the section named, blocks)."""
        cap_per_token = CHARS_PER_TOKEN
        i = 0
        carried: list[_Block] = []  # headings with no text, carried into the next section
        carried_parent: list[str] | None = None  # the parent of the first of them
        n = len(sections)
        while i < n:
            sec = sections[i]
            if sec.heading_only and i + 1 < n:
                # a heading with no text: its line goes with the next section, named by its own headings
                carried.append(sec.blocks[0])
                if carried_parent is None:
                    carried_parent = sec.headings[:-1]
                i += 1
                continue
            if sec.heading_only and i + 1 == n and i > 0:
                break  # a last, empty heading ("## See also" with nothing under it) makes no chunk
            first = i
            blocks = carried + sec.blocks
            parent = sec.headings[:-1] if carried_parent is None else carried_parent
            carried, carried_parent = [], None
            limit = limit_of(first)
            start = blocks[0].start
            tokens = doc.ntok(start, sec.end)
            tiny = max(1, int(limit * TINY_SHARE))
            j = i + 1
            while tokens < tiny and j < n:
                nxt = sections[j]
                if not (len(nxt.headings) > len(parent) and nxt.headings[: len(parent)] == parent):
                    break
                more = doc.ntok(start, nxt.end)
                if more > limit or nxt.end - start > limit * cap_per_token:
                    break
                blocks = blocks + nxt.blocks
                tokens = more
                j += 1
            i = j
            yield first, blocks

    # -- atoms ------------------------------------------------------------------

    def _atoms(self, doc: _Doc, blocks: list[_Block], limit: int, procedure: bool) -> list[_Atom]:
        atoms: list[_Atom] = []
        cap = limit * CHARS_PER_TOKEN
        i = 0
        n = len(blocks)
        while i < n:
            block = blocks[i]
            if procedure and block.ordered:
                j = i
                while j + 1 < n and blocks[j + 1].ordered:
                    j += 1
                if j > i:
                    start, end = block.start, blocks[j].end
                    tokens = doc.ntok(start, end)
                    if tokens <= limit and end - start <= cap:
                        atoms.append(_Atom(start, end, tokens, BLOCK))
                        i = j + 1
                        continue
            self._split(doc, block.start, block.end, limit, BLOCK, atoms, heading=block.kind == "heading")
            i += 1
        return atoms

    def _split(
        self, doc: _Doc, a: int, b: int, limit: int, strength: int, out: list[_Atom], heading: bool = False
    ) -> None:
        """Append atoms covering text[a:b]: whole if it fits, else cut at lines, sentences, words."""
        tokens = doc.ntok(a, b)
        cap = limit * CHARS_PER_TOKEN
        if tokens <= limit and b - a <= cap:
            out.append(_Atom(a, b, tokens, strength, heading))
            return
        text = doc.text
        if strength >= LINE and text.find("\n", a, b) >= 0:
            pos = a
            first = True
            while pos < b:
                nl = text.find("\n", pos, b)
                line_end = b if nl < 0 else nl
                seg = text[pos:line_end]
                s = seg.strip()
                if s:
                    ls = pos + (len(seg) - len(seg.lstrip()))
                    le = pos + len(seg.rstrip())
                    self._split(doc, ls, le, limit, strength if first else LINE, out)
                    first = False
                pos = line_end + 1
            return
        if strength >= SENTENCE:
            cuts = [m.end() for m in _SENTENCE_END.finditer(text, a, b) if m.end() < b]
            if cuts:
                bounds = [a] + cuts + [b]
                for k in range(len(bounds) - 1):
                    s, e = bounds[k], bounds[k + 1]
                    e = s + len(text[s:e].rstrip())
                    if e <= s:
                        continue
                    piece = strength if k == 0 else SENTENCE
                    tokens = doc.ntok(s, e)
                    if tokens <= limit and e - s <= cap:
                        out.append(_Atom(s, e, tokens, piece))
                    else:
                        self._split_words(doc, s, e, limit, piece, out)
                return
        self._split_words(doc, a, b, limit, strength, out)

    def _split_words(self, doc: _Doc, a: int, b: int, limit: int, strength: int, out: list[_Atom]) -> None:
        """Cut text[a:b] between words into runs of at most ``limit`` tokens and the char cap.

        The span starts a word, so its own tokens are the document's. A word longer
        than a chunk is cut between its tokens (the pieces after the first are
        ``MID_WORD`` and counted on their own), or between characters when one token
        is longer than the character cap (a word the tokenizer reads as [UNK]).
        """
        text = doc.text
        cap = limit * CHARS_PER_TOKEN
        enc = self.counter.encode(text[a:b])
        offsets = enc.offsets
        word_ids = enc.word_ids
        n = len(offsets)
        if n == 0:
            if b - a <= cap:
                out.append(_Atom(a, b, 0, strength))
            else:
                self._split_chars(doc, a, b, limit, strength, out)
            return

        def word_start(k: int) -> bool:
            return k == 0 or word_ids[k] is None or word_ids[k] != word_ids[k - 1]

        i = 0
        piece_strength = strength
        while i < n:
            j = min(n, i + limit)
            base = offsets[i][0]
            if offsets[j - 1][1] - base > cap:
                lo, hi = i + 1, j  # the largest j whose tokens i..j-1 fit in the char cap
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if offsets[mid - 1][1] - base <= cap:
                        lo = mid
                    else:
                        hi = mid - 1
                j = lo
            if j < n and not word_start(j):
                k = j - 1
                while k > i and not word_start(k):
                    k -= 1
                if k > i:
                    j = k
            s = a + base
            if j < n:
                e = a + offsets[j - 1][1]
                following = a + offsets[j][0]
                while e < following and _is_mark(text[e]):
                    e += 1
            else:
                e = b
            if e - s > cap:
                self._split_chars(doc, s, e, limit, piece_strength, out)
            elif piece_strength == MID_WORD:
                tokens = self.counter.count(text[s:e])
                if tokens <= limit:
                    out.append(_Atom(s, e, tokens, MID_WORD))
                else:
                    self._split_chars(doc, s, e, limit, MID_WORD, out)
            else:
                out.append(_Atom(s, e, j - i, piece_strength))
            piece_strength = WORD if j < n and word_start(j) else MID_WORD
            i = j

    def _split_chars(self, doc: _Doc, a: int, b: int, limit: int, strength: int, out: list[_Atom]) -> None:
        """Cut a span with no usable token boundary into pieces of at most the char cap."""
        text = doc.text
        cap = limit * CHARS_PER_TOKEN
        pos = a
        while pos < b:
            end = min(b, pos + cap)
            while end < b and end > pos + 1 and _is_mark(text[end]):
                end -= 1
            tokens = self.counter.count(text[pos:end])
            while tokens > limit and end - pos > 1:
                end = pos + (end - pos) // 2
                tokens = self.counter.count(text[pos:end])
            out.append(_Atom(pos, end, tokens, strength if pos == a else MID_WORD))
            pos = end
            while pos < b and text[pos].isspace():
                pos += 1

    # -- packing ----------------------------------------------------------------

    def _pack(self, doc: _Doc, atoms: list[_Atom], limit: int) -> list[tuple[int, int, int]]:
        """Greedy packing of atoms into (start, end, tokens) chunks, with overlap."""
        cap = limit * CHARS_PER_TOKEN
        overlap_tokens = int(round(self.overlap * limit))
        chunks: list[tuple[int, int, int]] = []
        cs = ce = ct = -1
        bounds: list[int] = []  # starts of block and line atoms inside the current chunk
        only_headings = False
        prev_bounds: list[int] = []
        for atom in atoms:
            if cs >= 0 and atom.strength >= WORD and ct + atom.tokens <= limit and atom.end - cs <= cap:
                if atom.strength >= LINE:
                    bounds.append(atom.start)
                ce = atom.end
                ct += atom.tokens
                only_headings = only_headings and atom.heading
                continue
            dropped = False
            if cs >= 0:
                if only_headings:
                    dropped = True  # a heading alone: its title is in the next chunk's prelude
                else:
                    chunks.append((cs, ce, ct))
                    prev_bounds = bounds
            start = atom.start
            tokens = atom.tokens
            bounds = []
            if chunks and not dropped and overlap_tokens > 0 and atom.strength >= WORD:
                ps, pe, _ = chunks[-1]
                allowed = min(overlap_tokens, limit - atom.tokens)
                room = cap - (atom.end - atom.start)
                tail = self._overlap_start(doc, ps, pe, prev_bounds, allowed, room)
                if tail is not None:
                    start = tail
                    tokens += doc.ntok(tail, pe)
                    bounds = [p for p in prev_bounds if p > tail]
            cs, ce, ct = start, atom.end, tokens
            if atom.strength >= LINE:
                bounds.append(atom.start)
            only_headings = atom.heading
        if cs >= 0:
            chunks.append((cs, ce, ct))
        return chunks

    def _overlap_start(self, doc: _Doc, ps: int, pe: int, bounds: list[int], allowed: int, room: int) -> int | None:
        """Where the tail of chunk [ps, pe) that starts the next chunk begins, if any."""
        if allowed <= 0 or room <= 0:
            return None
        starts = doc.starts
        end_index = bisect.bisect_left(starts, pe)
        first_index = bisect.bisect_left(starts, ps)
        lowest = max(end_index - allowed, first_index + 1)
        if lowest >= end_index:
            return None
        lo = max(starts[lowest], pe - room, ps + 1)
        best = None
        k = bisect.bisect_left(bounds, lo)
        if k < len(bounds) and bounds[k] < pe:
            best = bounds[k]
        for m in _SENTENCE_END.finditer(doc.text, lo, best if best is not None else pe):
            if lo <= m.end() < pe:
                best = m.end() if best is None else min(best, m.end())
                break
        if best is not None:
            return best
        if allowed < MIN_WORD_OVERLAP:
            return None
        # between words: the first word start at or after lo
        enc = self.counter.encode(doc.text[lo:pe])
        word_ids = enc.word_ids
        offsets = enc.offsets
        for k in range(1, len(offsets)):
            if word_ids[k] != word_ids[k - 1]:
                pos = lo + offsets[k][0]
                return pos if pos < pe else None
        return None

    # -- exact counts for tokenizers whose counts do not add up -----------------

    def _verify(self, plan: "_Plan", spans, limit_of) -> list[tuple[int, int, int, int]]:
        """Count the final texts again, and what the embedder reads, and cut what is over.

        Only for tokenizers whose counts do not add up over cut text; chunks over the
        limit are cut again between their own tokens (rare: a count changed by the cut).
        """
        text = plan.doc.text
        preludes = plan.preludes
        bodies = [text[s:e] for _, s, e, _ in spans]
        counts = self.counter.count_batch(bodies)
        embedded = self.counter.count_batch([preludes[i] + "\n" + b for (i, _, _, _), b in zip(spans, bodies)])
        out = []
        for (i, s, e, _), n, m in zip(spans, counts, embedded):
            limit = limit_of(i)
            if n <= limit and m <= self.text_limit:
                out.append((i, s, e, n))
                continue
            # the join with the prelude may cost tokens of its own
            limit = max(1, min(limit, limit - (m - self.text_limit)))
            pos = s
            while pos < e:
                offsets = self.counter.offsets(text[pos:e])
                end = e if len(offsets) <= limit else pos + max(1, offsets[limit - 1][1])
                while True:
                    body = text[pos:end]
                    tokens = self.counter.count(body)
                    if (
                        tokens <= limit and self.counter.count(preludes[i] + "\n" + body) <= self.text_limit
                    ) or end - pos <= 1:
                        break
                    end = pos + (end - pos) // 2
                out.append((i, pos, end, tokens))
                pos = end
                while pos < e and text[pos].isspace():
                    pos += 1
            if len(out) > self.max_chunks:
                raise _TooManyChunks()
        return out


def _pieces(text: str, size: int) -> Iterator[tuple[int, str]]:
    """Line-aligned pieces of about ``size`` characters, with their offsets."""
    n = len(text)
    if n <= size:
        yield 0, text
        return
    pos = 0
    while pos < n:
        end = pos + size
        if end >= n:
            end = n
        else:
            nl = text.find("\n", end)
            if nl < 0 or nl - end > size:
                # no newline near: cut at a space, else leave the whole rest in one piece
                sp = text.find(" ", end, end + size)
                end = n if sp < 0 and nl < 0 else (sp + 1 if sp >= 0 else nl + 1)
            else:
                end = nl + 1
        yield pos, text[pos:end]
        pos = end


def _first_heading(blocks: list[_Block]) -> str:
    return next((b.title for b in blocks if b.kind == "heading" and b.title), "")


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


def _bad_doc_reason(rec: dict) -> str:
    if "path" not in rec:
        return 'doc record has no "path" field'
    if "text" not in rec:
        return 'doc record has no "text" field'
    return f'doc record\'s "text" must be a string, got {type(rec["text"]).__name__}'
