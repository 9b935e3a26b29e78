"""Chunking and extraction read a document's Markdown the same way (kgr.stages.markdown).

A setext document ("Title" over "=====" or "-----") has the same sections for both: each
mention's section is the section of the chunk it falls in.
"""

from __future__ import annotations

from kgr import records
from kgr.stages import markdown
from kgr.stages.chunk import chunk_doc
from kgr.stages.extract import extract_doc
from kgr.stages.textmodel import parse_document

SETEXT = """Ferry Operations
================

The Ferry Relay is owned by Team Basin. The Ferry Relay depends on the Harbor Ledger for fares,
and Team Basin reviews the relay every quarter with Marrow Bay Transit.

Harbor Ledger
-------------

The Harbor Ledger stores the fares of Marrow Bay Transit. Team Basin owns the Harbor Ledger,
and the Signal Desk reads it every night before the ferries leave the harbor.

Signal Desk
-----------

Team Basin runs the Signal Desk on weekdays. The Signal Desk uses the Harbor Ledger to
announce delays, and the Ferry Relay forwards its messages to the ferries at sea.
"""


def make_doc(text: str) -> dict:
    return {"kind": "doc", "path": "ops/ferries.md", "title": "Ferries", "text": text, "hash": records.text_hash(text)}


def test_the_reader_finds_setext_headings_and_fences():
    text = "Title\n=====\n\n```\nNot\n---\n```\n\nPart\n----\n\n# Atx\n"
    outline = markdown.read(text)
    found = {line: (n, b.level, b.title) for line, (n, b) in outline.headings.items()}
    assert found == {0: (2, 1, "Title"), 8: (2, 2, "Part"), 11: (1, 1, "Atx")}
    assert outline.fences == [(3, 6)]


def test_extraction_sees_the_sections_chunking_sees(extractor):
    doc = make_doc(SETEXT)
    chunks = chunk_doc(doc, max_tokens=64)
    parsed = parse_document(SETEXT, title=doc["title"], path=doc["path"])

    assert [c["headings"] for c in chunks] == [
        ["Ferry Operations"],
        ["Ferry Operations", "Harbor Ledger"],
        ["Ferry Operations", "Signal Desk"],
    ]
    assert [s.path for s in parsed.sections if s.path] == [c["headings"] for c in chunks]
    assert parsed.title_block is not None and parsed.title_block.text == "Ferry Operations"

    mentions = [r for r in extract_doc(extractor, doc, chunks, parsed) if r["kind"] == records.MENTION]
    assert mentions
    section_of_chunk = {records.chunk_id(doc["path"], c["ord"]): c["section"] for c in chunks}
    for m in mentions:
        assert m["features"]["section"] == section_of_chunk[m["chunk"]], m
    assert {m["features"]["section"] for m in mentions} == {"Ferry Operations", "Harbor Ledger", "Signal Desk"}


def test_an_underline_is_not_a_name(extractor):
    doc = make_doc(SETEXT)
    parsed = parse_document(SETEXT, title=doc["title"], path=doc["path"])
    headings = [b for b in parsed.blocks if b.kind == "heading"]
    assert [(b.level, b.text) for b in headings] == [(1, "Ferry Operations"), (2, "Harbor Ledger"), (2, "Signal Desk")]
    assert all(set(b.masked[b.masked.index("\n") :]) <= {" ", "\n"} for b in headings)
