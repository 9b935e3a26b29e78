"""The chunk stage over the PowerShell docs corpus: invariants and throughput (slow).

    KGR_SLOW=1 pytest tests/stages/test_chunk_corpus.py -s

The doc records are built here from the .md files (front matter cut off, title from
the first H1), standing in for the normalize stage.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from collections import Counter
from pathlib import Path

import pytest

from kgr import records
from kgr.stages.chunk import chunk
from kgr.stages.tokens import get_counter

FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
H1 = re.compile(r"^# (.+)$", re.M)


def corpus_docs(root: Path) -> list[dict]:
    docs = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".md"):
                continue
            path = Path(dirpath) / name
            text = FRONT_MATTER.sub("", path.read_text(encoding="utf-8", errors="replace"), count=1)
            m = H1.search(text)
            docs.append(
                {
                    "kind": "doc",
                    "path": path.relative_to(root).as_posix(),
                    "text": text,
                    "title": m.group(1).strip() if m else path.stem,
                    "hash": records.text_hash(text),
                }
            )
    return docs


@pytest.mark.slow
def test_powershell_corpus(shared):
    root = shared / "corpora" / "powershell-docs"
    docs = corpus_docs(root)
    assert len(docs) > 3000
    counter = get_counter()
    t0 = time.perf_counter()
    out = list(chunk(iter(docs)))
    seconds = time.perf_counter() - t0
    chunks = [r for r in out if r["kind"] == "chunk"]
    assert sum(1 for r in out if r["kind"] == "doc") == len(docs)
    assert not [r for r in out if r["kind"] == "error"]

    texts = {d["path"]: d["text"] for d in docs}
    counts = counter.count_batch([c["text"] for c in chunks])
    prelude_counts = counter.count_batch([c["prelude"] for c in chunks])
    for c, n, pn in zip(chunks, counts, prelude_counts):
        assert texts[c["doc"]][c["start"] : c["end"]] == c["text"]
        assert c["tokens"] == n
        assert n + pn + counter.special_tokens <= counter.max_length

    sizes = sorted(c["tokens"] for c in chunks)
    mb = sum(len(d["text"]) for d in docs) / 1e6
    print(
        f"\n{len(docs)} docs ({mb:.1f} MB), {len(chunks)} chunks in {seconds:.1f}s: "
        f"{len(docs) / seconds:.0f} docs/s, {len(chunks) / seconds:.0f} chunks/s, {mb / seconds:.2f} MB/s\n"
        f"tokens per chunk: median {statistics.median(sizes):.0f}, p95 {sizes[int(0.95 * len(sizes))]}, "
        f"max {sizes[-1]}, under 32: {sum(1 for s in sizes if s < 32)}\n"
        f"kinds: {dict(Counter(c['chunk_kind'] for c in chunks))}"
    )
