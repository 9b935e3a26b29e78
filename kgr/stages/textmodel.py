"""A light reading of a normalized Markdown document: blocks, sections, sentences.

Extraction needs to know where headings, list items, numbered steps, tables and
code fences are, and needs the text without Markdown syntax for the NLP models.
Headings (ATX and setext) and fenced code come from :mod:`kgr.stages.markdown`, the
reading chunking uses, so extraction and chunking see the same sections; the text
between them is read more finely here (one block per table row, quotes, numbered steps).
``masked`` is the block's text with syntax characters (heading hashes, list
markers, ``**``, backticks, link targets, table pipes) and redaction tags replaced
by spaces or line breaks of the same length, so every offset found in it is an
offset in the raw text as well.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from kgr.stages import markdown
from kgr.stages.redact import TAG_PATTERN

LIST_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,3}[.)])[ \t]+")
TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}:?[ \t]*(\|[ \t]*:?-{3,}:?[ \t]*)*\|?[ \t]*$")
STEP = re.compile(r"^[ \t]*(?:(\d{1,3})[.)]|Step\s+(\d{1,3})\s*[:.)-])[ \t]+", re.I)
SENTENCE_END = re.compile(r"[.!?](?:[\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9`*])")
# a full stop the writer forgot the space after ("... in a list.The result of ..."): a lower-case
# word, then a word that opens sentences; not a dotted name ("System.Management", "$this.ToString")
GLUED_SENTENCE = re.compile(r"(?<=[a-z]{3}\.)(?=(?:The|This|These|It|In|If|To|For|When|You|A|An)\s)")
LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\n]*)\)")
REDACTION = re.compile(TAG_PATTERN)
SUBORDINATORS = (
    r"(?:when|whenever|if|once|after|before|until|since|because|although|though|while|unless|as\s+soon\s+as)"
)
# a sentence that opens with a subordinate clause ("When used with SSH, ...") or a purpose ("To
# minimize the PowerShell console, X uses ..."): a name in it is not the sentence's subject
PURPOSE = r"(?:in\s+order\s+)?to(?=\s+(?-i:[a-z]))"  # "to" and a verb: "To Alice, ..." is no purpose
LEADING_CLAUSE = re.compile(rf"\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:{SUBORDINATORS}|{PURPOSE})\b[^,;]{{0,160}},", re.I)


@dataclass
class Block:
    kind: str  # heading, para, item, row, code, quote
    start: int  # offset of raw in the document text
    raw: str
    masked: str
    level: int = 0  # heading level; list indentation for items
    step: int | None = None  # number of a numbered step
    links: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, target) in doc offsets
    sentence_starts: set[int] = field(default_factory=set)  # offsets in the block

    @property
    def end(self) -> int:
        return self.start + len(self.raw)

    @property
    def text(self) -> str:
        return self.masked.strip()

    def sentences(self) -> list[tuple[int, int]]:
        """(start, end) of each sentence, in block offsets (computed once: callers ask per
        mention, and a block of a long text holds tens of thousands of sentences)."""
        key = (id(self.sentence_starts), len(self.sentence_starts), len(self.raw))
        cached = self.__dict__.get("_sentences")
        if cached is not None and cached[0] == key:
            return cached[1]
        cuts = sorted(self.sentence_starts | {0})
        out = []
        for i, s in enumerate(cuts):
            e = cuts[i + 1] if i + 1 < len(cuts) else len(self.raw)
            if self.masked[s:e].strip():
                out.append((s, e))
        self.__dict__["_sentences"] = (key, out, [s for s, _ in out])
        return out

    def sentence_start(self, rel: int) -> int:
        """The start (block offset) of the last sentence starting at or before ``rel``; 0 if none."""
        self.sentences()
        starts = self.__dict__["_sentences"][2]
        i = bisect.bisect_right(starts, rel)
        return starts[i - 1] if i else 0

    def sentence_index(self, rel: int) -> int | None:
        """The index in :meth:`sentences` of the sentence holding ``rel``, or None."""
        sentences = self.sentences()
        i = bisect.bisect_right(self.__dict__["_sentences"][2], rel) - 1
        if i >= 0 and sentences[i][0] <= rel < sentences[i][1]:
            return i
        return None


@dataclass
class Section:
    start: int
    heading: Block | None
    path: list[str]  # heading titles from the top


class Document:
    def __init__(self, text: str, blocks: list[Block], sections: list[Section], title: str | None, path: str | None):
        self.text = text
        self.blocks = blocks
        self.sections = sections
        self.title = title
        self.path = path
        self._section_starts = [s.start for s in sections]
        first_heading = next((b for b in blocks if b.kind == "heading"), None)
        self.title_block = first_heading if first_heading is not None and first_heading.level == 1 else None
        self.title_end = self.title_block.end if self.title_block is not None else 0
        self.subject: Any = None  # a Span, set by set_subject
        self._prose_words: set[str] | None = None
        self.section_subjects: dict[int, Any] = {}

    def prose_word(self, word: str) -> bool:
        """Does the prose (outside code) use this word in lower case? Then, written as `using` or
        DESCRIPTION, it is a keyword or a label, not the name of something."""
        if not re.fullmatch(r"[A-Za-z]+", word):
            return False
        if self._prose_words is None:
            words: set[str] = set()
            for b in self.blocks:
                if b.kind != "code":
                    words.update(re.findall(r"(?<![\w`.-])[a-z]+(?![\w`-])", re.sub(r"`[^`]*`", " ", b.raw)))
            self._prose_words = words
        return word.lower() in self._prose_words

    def blocks_of(self, spans: list):
        """(block, span) for every span that starts inside a block, in document order."""
        blocks = self.blocks
        i = 0
        for sp in sorted(spans, key=lambda x: x.start):
            while i < len(blocks) and blocks[i].end <= sp.start:
                i += 1
            if i < len(blocks) and blocks[i].start <= sp.start:
                yield blocks[i], sp

    def section_of(self, pos: int) -> int:
        return max(0, bisect.bisect_right(self._section_starts, pos) - 1)

    def section(self, pos: int) -> Section:
        return self.sections[self.section_of(pos)]

    def section_title(self, pos: int) -> str | None:
        path = self.section(pos).path
        return path[-1] if path else None

    COLLECTION = re.compile(
        r"\b(?:glossary|faq|faqs|overview|notes|handbook|directory|minutes|welcome|readme|table of contents)\s*$", re.I
    )

    def set_subject(self, spans: list) -> None:
        """The document's subject: the main name in its title; each section's: the name in its heading."""
        ordered = sorted(spans, key=lambda s: s.start)
        starts = [s.start for s in ordered]
        for idx, sec in enumerate(self.sections):
            if sec.heading is None:
                continue
            inside = [
                s
                for s in ordered[
                    bisect.bisect_left(starts, sec.heading.start) : bisect.bisect_left(starts, sec.heading.end)
                ]
                if s.source != "coref" and s.type != "DATE"
            ]
            if inside:
                best = max(inside, key=lambda s: (s.end - s.start, -s.start))
                first = min(inside, key=lambda s: s.start)
                # "ADR-019: Store money ...", "v3.2.1 (2024-05-14)": a leading id names the section
                lead = sec.heading.masked[: first.start - sec.heading.start].strip()
                if not lead and (first.features.get("pattern") in ("ticket", "version") or first.type == "VERSION"):
                    best = first
                else:
                    # "ledger-svc v3.2.1 rollout": a name its version follows names that release
                    after = next((s for s in inside if s.start > best.start), None)
                    if (
                        after is not None
                        and (after.type == "VERSION" or after.features.get("pattern") == "version")
                        and not self.text[best.end : after.start].strip()
                    ):
                        best = after
                if self.COLLECTION.search(best.surface):
                    continue
                self.section_subjects[idx] = best
                if self.title_block is not None and sec.heading is self.title_block:
                    self.subject = best
        if self.subject is None and self.title:
            title = self.title.lower()
            # a name the title writes as a word of its own (or its plural): not "dir" inside "about_redirection"
            named = [
                s
                for s in spans
                if s.source != "coref"
                and len(s.surface) > 2
                and s.surface.lower() in title  # the cheap test first: most names are not in the title at all
                and re.search(rf"(?<![a-z0-9]){re.escape(s.surface.lower())}(?:e?s)?(?![a-z0-9])", title)
            ]
            if named:
                self.subject = max(named, key=lambda s: (len(s.surface), -s.start))
        # A collection page (a glossary, an FAQ, meeting notes) is about many things, not one.
        if self.subject is not None and self.COLLECTION.search(self.subject.surface):
            self.subject = None

    def subject_at(self, pos: int):
        """The nearest subject for a position: its section's (or a parent's), else the document's."""
        idx = self.section_of(pos)
        level = None
        while idx >= 0:
            sec = self.sections[idx]
            lvl = sec.heading.level if sec.heading is not None else 0
            if (level is None or lvl < level) and idx in self.section_subjects:
                return self.section_subjects[idx]
            level = lvl if level is None else min(level, lvl)
            idx -= 1
        return self.subject


def parse_document(text: str, *, title: str | None = None, path: str | None = None) -> Document:
    outline = markdown.read(text)
    fence_end = dict(outline.fences)  # first line of a fence -> its last line
    headings = outline.headings  # first line of a heading -> (its number of lines, block)
    blocks: list[Block] = []
    lines = text.split("\n")
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    i = 0
    para: list[int] = []

    def flush_para():
        if para:
            s = offsets[para[0]]
            e = offsets[para[-1]] + len(lines[para[-1]])
            blocks.append(_block("para", s, text[s:e]))
            para.clear()

    while i < len(lines):
        line = lines[i]
        if i in fence_end:
            flush_para()
            j = fence_end[i]
            s, e = offsets[i], offsets[j] + len(lines[j])
            raw = text[s:e]
            blocks.append(Block("code", s, raw, " " * len(raw)))
            i = j + 1
            continue
        if not line.strip():
            flush_para()
            i += 1
            continue
        if i in headings:
            flush_para()
            n, heading = headings[i]
            s, e = offsets[i], offsets[i + n - 1] + len(lines[i + n - 1])
            blocks.append(_block("heading", s, text[s:e], level=heading.level))
            i += n
            continue
        if TABLE_ROW.match(line):
            flush_para()
            if not TABLE_RULE.match(line):
                blocks.append(_block("row", offsets[i], line))
            i += 1
            continue
        li = LIST_ITEM.match(line)
        if li:
            flush_para()
            j = i + 1
            indent = len(li.group(1))
            while (
                j < len(lines)
                and lines[j].strip()
                and not LIST_ITEM.match(lines[j])
                and j not in headings
                and (len(lines[j]) - len(lines[j].lstrip())) > indent
            ):
                j += 1
            s, e = offsets[i], offsets[j - 1] + len(lines[j - 1])
            step = STEP.match(line)
            number = int(step.group(1) or step.group(2)) if step else None
            blocks.append(_block("item", s, text[s:e], level=indent, step=number))
            i = j
            continue
        if line.lstrip().startswith(">"):
            flush_para()
            # the lines of one quoted paragraph are one block (a note wrapped over "> " lines);
            # an empty "> ", a quoted list item, table, fence or "[!NOTE]" marker is a line of its own
            j = i + 1
            while j < len(lines) and _quoted_prose(lines[j - 1]) and _quoted_prose(lines[j]):
                j += 1
            s, e = offsets[i], offsets[j - 1] + len(lines[j - 1])
            blocks.append(_block("quote", s, text[s:e]))
            i = j
            continue
        step = STEP.match(line)
        if step and not para:
            blocks.append(_block("item", offsets[i], line, step=int(step.group(1) or step.group(2))))
            i += 1
            continue
        para.append(i)
        i += 1
    flush_para()
    _join_wrapped_lines(blocks)

    sections = [Section(0, None, [])]
    stack: list[tuple[int, str]] = []
    for b in blocks:
        if b.kind == "heading":
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            stack.append((b.level, b.text))
            sections.append(Section(b.start, b, [t for _, t in stack]))
    return Document(text, blocks, sections, title, path)


def _block(kind: str, start: int, raw: str, *, level: int = 0, step: int | None = None) -> Block:
    masked, links = _mask(raw, kind)
    block = Block(
        kind, start, raw, masked, level=level, step=step, links=[(start + s, start + e, t) for s, e, t in links]
    )
    block.sentence_starts = _sentence_starts(masked)
    return block


QUOTE_MARK = re.compile(r"^[ \t]*>+[ \t]?", re.M)
QUOTED_NOT_PROSE = re.compile(r"^\s*(?:$|[-*+]\s|\d{1,3}[.)]\s|#|\||```|~~~|\[!|<)")


def _quoted_prose(line: str) -> bool:
    """Is a "> " line a line of a quoted paragraph (not empty, no list item, table, fence,
    heading or "[!NOTE]" marker)?"""
    m = QUOTE_MARK.match(line)
    return m is not None and not QUOTED_NOT_PROSE.match(line[m.end() :])


def _mask(raw: str, kind: str) -> tuple[str, list[tuple[int, int, str]]]:
    chars = list(raw)
    links = []

    def blank(s: int, e: int, fill: str = " ") -> None:
        for k in range(s, e):
            if chars[k] != "\n":
                chars[k] = fill

    if kind == "heading" and "\n" in raw:  # setext: the title over its underline
        blank(raw.index("\n"), len(raw))
    elif kind == "heading":  # ATX
        m = re.match(r"^ {0,3}#{1,6}(?:[ \t]+|$)", raw)
        if m:
            blank(0, m.end())
        tail = re.search(r"[ \t]#+[ \t]*$", raw)
        if tail:
            blank(tail.start(), len(raw))
    if kind in ("item",):
        m = LIST_ITEM.match(raw)
        if m:
            blank(0, m.end())
    if kind == "quote":
        for m in QUOTE_MARK.finditer(raw):
            blank(m.start(), m.end())
    if kind == "row":
        for k, ch in enumerate(raw):
            if ch == "|":
                chars[k] = "\n"
    for m in LINK.finditer(raw):
        blank(m.start(), m.start(1))  # "[" or "!["
        blank(m.end(1), m.end())  # "](target)"
        links.append((m.start(1), m.end(1), m.group(2)))
    for m in re.finditer(r"\*\*|__|`", raw):
        blank(m.start(), m.end())
    # <https://...> autolinks and bare URLs are not prose
    for m in re.finditer(r"<?https?://[^\s>)]+>?", raw):
        blank(m.start(), m.end())
    # a redaction tag stands for a secret; nothing in it is a name
    for m in REDACTION.finditer(raw):
        blank(m.start(), m.end())
    return "".join(chars), links


def _sentence_starts(masked: str, wrap: int | None = None, raw: str | None = None) -> set[int]:
    """Where the sentences of a block start: after a sentence's end, and at each new line
    unless the line before was only wrapped there (``wrap``: the document's wrap column)."""
    starts = {len(masked) - len(masked.lstrip())}
    for m in SENTENCE_END.finditer(masked):
        starts.add(m.end())
    for m in GLUED_SENTENCE.finditer(masked):
        starts.add(m.end())
    for m in re.finditer(r"\n[ \t]*(?=\S)", masked):
        if wrap is None or not _wrapped(masked, raw or masked, m.start(), wrap):
            starts.add(m.end())
    return starts


# A hard-wrapped text (a Markdown source wrapped at 80 or 100 columns, a PDF's lines) breaks
# its sentences at a column: such a line break starts no sentence. Tools wrap at 60 columns or
# more; a text whose lines are shorter was broken by hand, line by line.
MIN_WRAP = 60


def _wrap_width(blocks: list[Block]) -> int | None:
    """The column the document's paragraphs are wrapped at (the median of the longest line of
    each paragraph or list item of several lines), or None when it has none or they are short."""
    longest = sorted(
        max(len(line) for line in b.masked.split("\n"))
        for b in blocks
        if b.kind in ("para", "item", "quote") and "\n" in b.masked.strip()
    )
    if not longest:
        return None
    width = longest[len(longest) // 2]
    return width if width >= MIN_WRAP else None


def _wrapped(masked: str, raw: str, newline: int, wrap: int) -> bool:
    """Was the line ending at ``newline`` broken only because the next line's first word (as
    written, markup and all) did not fit in ``wrap`` columns? A line that ends a label
    ("Owner:") is a line of its own."""
    line = masked[masked.rfind("\n", 0, newline) + 1 : newline].rstrip()
    if not line.strip() or line.endswith(":"):
        return False
    word = NEXT_WORD.match(raw, newline + 1).group(1)
    return len(line) + 1 + len(word) > wrap


NEXT_WORD = re.compile(r"[ \t]*(?:>+[ \t]*)?(\S*)")


def _join_wrapped_lines(blocks: list[Block]) -> None:
    """Sentences of the paragraphs and list items of a hard-wrapped document run across its
    line breaks."""
    wrap = _wrap_width(blocks)
    if wrap is None:
        return
    for b in blocks:
        if b.kind in ("para", "item", "quote") and "\n" in b.masked:
            b.sentence_starts = _sentence_starts(b.masked, wrap, b.raw)


# -- positions in a spaCy parse ------------------------------------------------------------
# A block of a long text has hundreds of thousands of tokens: finding the token at a
# character offset by scanning them, once per mention, is quadratic. The token offsets are
# kept (in the parse's own user_data) and searched by bisection.


def _token_starts(sdoc) -> list[int]:
    starts = sdoc.user_data.get("kgr.token_starts")
    if starts is None or len(starts) != len(sdoc):
        starts = [t.idx for t in sdoc]
        sdoc.user_data["kgr.token_starts"] = starts
    return starts


def token_starting_at(sdoc, pos: int):
    """The token of ``sdoc`` that starts exactly at character ``pos``, or None."""
    starts = _token_starts(sdoc)
    i = bisect.bisect_left(starts, pos)
    return sdoc[i] if i < len(starts) and starts[i] == pos else None


def token_covering(sdoc, pos: int):
    """The token of ``sdoc`` whose characters include ``pos``, or None."""
    starts = _token_starts(sdoc)
    i = bisect.bisect_right(starts, pos) - 1
    if i < 0:
        return None
    tok = sdoc[i]
    return tok if pos < tok.idx + len(tok) else None


_LEMMATIZERS: dict[int, tuple[Any, Any]] = {}  # id(vocab) -> (vocab, its pipeline's lemmatizer)


def defer_lemmas(nlp) -> None:
    """Lemmatize the tokens of ``nlp``'s docs only when :func:`lemma` asks: its lemmatizer
    (when it has one) is switched off in the pipeline and kept here. The relation features
    read the lemma of a few tokens per candidate; lemmatizing every token cost a twentieth
    of the graph build."""
    if "lemmatizer" not in nlp.component_names:
        return
    if "lemmatizer" in nlp.pipe_names:
        nlp.disable_pipe("lemmatizer")
    _LEMMATIZERS[id(nlp.vocab)] = (nlp.vocab, nlp.get_pipe("lemmatizer"))


def lemma(tok) -> str:
    """The token's lemma, as the pipeline's lemmatizer gives it; computed on first use when
    the pipeline defers lemmas (:func:`defer_lemmas`) and kept in the doc. Empty when the
    pipeline has no lemmatizer."""
    if tok.lemma:
        return tok.lemma_
    entry = _LEMMATIZERS.get(id(tok.vocab))
    if entry is None or entry[0] is not tok.vocab:
        return ""
    found = entry[1].lemmatize(tok)
    tok.lemma_ = found[0] if found else tok.text
    return tok.lemma_


def tokens_starting_in(sdoc, start: int, end: int):
    """The tokens of ``sdoc`` that start at a character in [start, end)."""
    starts = _token_starts(sdoc)
    return (sdoc[i] for i in range(bisect.bisect_left(starts, start), bisect.bisect_left(starts, end)))
