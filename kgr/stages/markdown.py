"""The one reading of a document's Markdown structure, for chunking and for extraction.

:func:`read` goes once over the lines and finds what both stages must agree on: ATX
headings (``#`` .. ``######``, up to three spaces in) and setext headings (one line of
text over ``===`` or ``---``), fenced code (three or more backticks or tildes, closed by
a fence of the same character at least as long, or by the end of the text), and the
blocks between them: paragraphs, list items with their nested lines, tables. Chunking
packs these blocks; extraction takes its headings and code from here and reads the text
between them more finely (:mod:`kgr.stages.textmodel`), so both see the same sections.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\Z")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*\Z")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*\Z")
_ITEM = re.compile(r"[ \t]*(?:([-*+])|(\d{1,9})[.)])(?:[ \t]+|\Z)")
_STEP = re.compile(r"(?:\*\*|__)?step[ \t]+\d+\b", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


class Block:
    """A run of the text: ``start``/``end`` are offsets of its first and last non-blank characters."""

    __slots__ = ("kind", "start", "end", "level", "title", "ordered", "indent", "content", "line")

    def __init__(
        self,
        kind: str,
        start: int,
        end: int,
        *,
        level: int = 0,
        title: str = "",
        ordered: bool = False,
        indent: int = 0,
        content: int = 0,
        line: int = 0,
    ):
        self.kind = kind  # heading, para, item, code, table
        self.start = start
        self.end = end
        self.level = level
        self.title = title
        self.ordered = ordered  # a numbered list item or a "Step N" paragraph
        self.indent = indent
        self.content = content
        self.line = line  # index of its first line

    def __repr__(self) -> str:  # for debugging failed tests
        return f"<{self.kind} {self.start}:{self.end}>"


class Outline:
    """What :func:`read` found in a text.

    ``blocks``: the blocks in order, headings included. ``fences``: (first line, last
    line) of every fenced code block, those inside list items too. ``headings``: for the
    first line of each heading, (its number of lines: 1 for ATX, 2 for setext, the block).
    """

    __slots__ = ("blocks", "fences", "headings")

    def __init__(self, blocks: list[Block], fences: list[tuple[int, int]], headings: dict[int, tuple[int, Block]]):
        self.blocks = blocks
        self.fences = fences
        self.headings = headings


def clean_title(title: str) -> str:
    """A heading's (or a document's) title on one line, spaces collapsed."""
    return _SPACES.sub(" ", title).strip()


def indent_of(line: str) -> int:
    """The width of a line's leading white space, a tab to the next multiple of four."""
    n = 0
    for ch in line:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


def parse_blocks(text: str) -> list[Block]:
    """Blocks of a Markdown text in order, headings included; one pass over the lines."""
    return read(text).blocks


def read(text: str) -> Outline:
    """The Markdown structure of a text; one pass over the lines."""
    blocks: list[Block] = []
    fences: list[tuple[int, int]] = []
    headings: dict[int, tuple[int, Block]] = {}
    cur: Block | None = None  # an open paragraph, list item or table
    fence: tuple[str, int, Block, int] | None = None
    prev_blank = True
    pos = 0
    n = -1
    for n, line in enumerate(text.split("\n")):
        start = pos
        pos += len(line) + 1
        stripped = line.strip()
        end = start + len(line.rstrip())
        if fence is not None:
            char, length, block, opened = fence
            if stripped:
                block.end = end
                if stripped[0] == char and len(stripped) >= length and stripped.strip(char) == "":
                    fence = None
                    fences.append((opened, n))
                    if block.kind == "code":
                        cur = None
            continue
        if not stripped:
            prev_blank = True
            if cur is not None and cur.kind != "item":
                cur = None
            continue
        lead = len(line) - len(line.lstrip())
        first_pos = start + lead
        indent = indent_of(line)
        first = stripped[0]
        was_blank, prev_blank = prev_blank, False

        if first in "`~":
            m = _FENCE.match(line)
            if m and not (first == "`" and "`" in m.group(2)):
                if cur is not None and cur.kind == "item" and (indent >= cur.content or not was_blank):
                    cur.end = end
                    fence = (first, len(m.group(1)), cur, n)
                else:
                    block = Block("code", first_pos, end, line=n)
                    blocks.append(block)
                    cur = block
                    fence = (first, len(m.group(1)), block, n)
                continue

        if first == "#" and indent <= 3:
            m = _ATX.match(line)
            if m:
                title = _ATX_CLOSE.sub("", m.group(2) or "")
                block = Block("heading", first_pos, end, level=len(m.group(1)), title=clean_title(title), line=n)
                blocks.append(block)
                headings[n] = (1, block)
                cur = None
                continue

        if first in "=-" and indent <= 3 and cur is not None and cur.kind == "para" and not was_blank:
            # only a one-line paragraph: "---" under several lines closes front matter more often
            # than it underlines a heading
            if _SETEXT.match(line) and "\n" not in text[cur.start : cur.end]:
                cur.kind = "heading"
                cur.level = 1 if first == "=" else 2
                cur.title = clean_title(text[cur.start : cur.end])
                cur.end = end
                headings[cur.line] = (2, cur)
                cur = None
                continue

        if first in "-*+" or first.isdigit():
            m = _ITEM.match(line)
            if m:
                if cur is not None and cur.kind == "item" and indent >= cur.content:
                    cur.end = end  # a nested item belongs to its parent
                else:
                    content = len(line[: m.end()].expandtabs(4)) if m.end() < len(line) else indent + 2
                    cur = Block(
                        "item", first_pos, end, ordered=m.group(2) is not None, indent=indent, content=content, line=n
                    )
                    blocks.append(cur)
                continue

        if cur is not None:
            if cur.kind == "item" and (not was_blank or indent >= cur.content):
                cur.end = end
                continue
            if cur.kind == "table" and first == "|" and not was_blank:
                cur.end = end
                continue
            if cur.kind == "para" and not was_blank and first != "|":
                cur.end = end
                continue
        if first == "|":
            cur = Block("table", first_pos, end, line=n)
        else:
            cur = Block("para", first_pos, end, ordered=_STEP.match(stripped) is not None, line=n)
        blocks.append(cur)
    if fence is not None:
        fences.append((fence[3], n))  # a fence never closed runs to the end of the text
    return Outline(blocks, fences, headings)
