"""Property test: any Markdown-ish text gives exact offsets and chunks within the model's input."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgr import records
from kgr.stages.chunk import chunk
from kgr.stages.tokens import get_counter

COUNTER = get_counter()

WORDS = st.sampled_from(
    [
        "the",
        "Get-Process",
        "configure",
        "option",
        "café",
        "naïve",
        "中文",
        "東京",
        "😀",
        "👩‍💻",
        "e\u0301",
        "x" * 30,
        "y" * 150,
        "a.b.c",
        "https://example.com/a?b=c",
        "v1.2.3",
        "**bold**",
        "`code`",
        "[link](x.md)",
        "end.",
        "why?",
        "wow!",
        "—",
        "|",
        "#tag",
        "1.",
        "-",
        "\t",
        "z\u0351\u0352",
    ]
)
SENTENCE = st.lists(WORDS, min_size=1, max_size=40).map(" ".join)
LINE = st.one_of(
    SENTENCE,
    st.builds(lambda n, s: "#" * n + " " + s, st.integers(1, 7), SENTENCE),  # 7 #s is not a heading
    st.builds(lambda s: "- " + s, SENTENCE),
    st.builds(lambda n, s: f"{n}. " + s, st.integers(1, 12), SENTENCE),
    st.builds(lambda s: "   " + s, SENTENCE),
    st.builds(lambda s: "| " + s + " |", SENTENCE),
    st.sampled_from(["```", "```python", "~~~", "", "", "---", "===", "Step 1: do it", "**Term**: meaning"]),
    st.builds(lambda n: "w" * n, st.integers(200, 5000)),  # a long line with no spaces
)
TEXT = st.lists(LINE, max_size=60).map("\n".join)


def only_headings(text: str) -> bool:
    """Every non-blank line is a heading: ATX ("# x") or setext ("x" over "---" or "===")."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        underline = re.fullmatch(r" {0,3}(-+|=+)\s*", line)
        if underline and i > 0 and lines[i - 1].strip():
            continue  # the underline of a setext heading
        if i + 1 < len(lines) and re.fullmatch(r" {0,3}(-+|=+)\s*", lines[i + 1]):
            continue  # the text of a setext heading
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=TEXT,
    max_tokens=st.sampled_from([8, 24, 64, 160, 256]),
    overlap=st.sampled_from([0, 0.1, 0.2]),
    path=st.sampled_from(["a.md", "docs/faq.md", "glossary.md", "how-to/x.md", "d/" * 40 + "long.md"]),
)
def test_offsets_exact_and_tokens_bounded(text, max_tokens, overlap, path):
    doc = {"kind": "doc", "path": path, "text": text, "hash": records.text_hash(text), "title": "T"}
    out = list(chunk([doc], max_tokens=max_tokens, overlap=overlap))
    assert out[0] is doc
    chunks = out[1:]
    assert all(c["kind"] == "chunk" for c in chunks)
    counts = COUNTER.count_batch([c["text"] for c in chunks])
    preludes = COUNTER.count_batch([c["prelude"] for c in chunks])
    for i, (c, n, pn) in enumerate(zip(chunks, counts, preludes)):
        assert c["ord"] == i
        assert text[c["start"] : c["end"]] == c["text"]
        assert c["tokens"] == n
        assert n <= max_tokens
        assert n + pn + 2 <= COUNTER.max_length
    if text.strip() and any(not ch.isspace() for ch in text):
        assert chunks or only_headings(text)
    again = list(chunk([dict(doc)], max_tokens=max_tokens, overlap=overlap))
    assert again[1:] == chunks
