"""M8 (RELIABILITY.md section 4): stdio discipline and error hygiene.

A real `kgr serve` over stdio, spoken to with raw JSON-RPC lines, while parsers warn on
broken files, library code prints to stdout (Python print and a raw write to fd 1), and
tools fail in every way (bad arguments, a library error, an unexpected SQLite error).
Pass: 100% of stdout lines parse as JSON-RPC frames; error texts carry no traceback, no
host path and no secret.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from serve_fixtures import RawStdio, built_kb  # noqa: E402,F401 - built_kb is a fixture

SECRET = "AKIAQ7RZT4WX2M9KJ5NB"  # an AWS key id by format (gitleaks allows *EXAMPLE*)
NOISY = r"""
import os, sys, warnings
import kgr.retrieval.entities as ents

real = ents.review
def noisy(*a, **kw):
    print("stray print from library code")
    os.write(1, b"stray raw write to fd 1\n")
    warnings.warn("a library warning")
    return real(*a, **kw)
ents.review = noisy
if __name__ == "__main__":  # parser processes are spawned: they import this file again
    from kgr.cli import main
    sys.argv = ["kgr", *sys.argv[1:]]
    main()
"""


def error_texts(frames: list[dict]) -> list[str]:
    out = []
    for f in frames:
        if "error" in f:
            out.append(json.dumps(f["error"]))
        res = f.get("result") or {}
        if res.get("isError"):
            out.append(" ".join(c.get("text", "") for c in res.get("content", [])))
    return out


def test_m8_stdio_frames_and_error_hygiene(built_kb, tmp_path):
    src_db, src_root = built_kb
    work = tmp_path / "w"
    shutil.copytree(src_db.parent, work, ignore=shutil.ignore_patterns("*.writer.lock"))
    db, root = work / "kb.sqlite", work / "kb"
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage \x00\xff" * 50)
    (root / "weird.html").write_text("<html><body><p>unclosed <b>tags <i>everywhere" + "<div>" * 500)
    (root / "keys.md").write_text(f"# Keys\n\nThe deploy key is {SECRET} and must never leak.\n")
    wrapper = tmp_path / "noisy_kgr.py"
    wrapper.write_text(NOISY)

    raw = RawStdio(
        ["serve", "--db", str(db), "--root", str(root), "--profile", "all"],
        env={"PYTHONWARNINGS": "always"},
        command=[sys.executable, str(wrapper)],
    )
    answers = []
    try:
        answers.append(raw.request("tools/list"))
        answers.append(raw.call("ingest_docs", {"paths": ["broken.pdf", "weird.html", "keys.md"]}, timeout=300))
        answers.append(raw.call("review_links", {"limit": 2}))  # prints and warns inside
        answers.append(raw.call("hybrid_query", {"query": "deploy key", "k": 3, "mode": "bm25"}))
        answers.append(raw.call("hybrid_query", {"query": "x", "k": "lots"}))
        answers.append(raw.call("explain_entity", {"entity": "no such thing at all"}))
        answers.append(raw.call("ingest_docs", {"paths": [str(tmp_path / "secret.txt")]}))
        answers.append(raw.call("ingest_docs", {"paths": ["../../etc/passwd"]}))
        answers.append(raw.call("no_such_tool"))
        answers.append(raw.request("resources/read", {"uri": "kgr://doc/../../etc/passwd"}))
        answers.append(raw.request("no/such/method"))
        raw.send(b"{this is not json")
        # an unexpected failure inside a tool: the relation_types table goes away under the server
        with _rw(db) as conn:
            conn.execute("ALTER TABLE relation_types RENAME TO relation_types_gone")
        answers.append(raw.call("hybrid_query", {"query": "fare cap", "k": 3, "mode": "bm25", "rels": ["uses"]}))
        answers.append(raw.call("status"))  # and the server still answers
    finally:
        raw.close()

    lines = [ln for ln in raw.lines if ln.strip()]
    parsed = [json.loads(ln) for ln in lines]  # raises on any non-JSON line
    assert all(f.get("jsonrpc") == "2.0" for f in parsed)
    assert len(parsed) >= len(answers)
    assert not any(b"stray" in ln for ln in lines)
    assert "stray print from library code" in raw.stderr  # it went to stderr instead

    ingest = answers[1]["result"]
    assert ingest["structuredContent"]["ingested"] + ingest["structuredContent"]["failed"] == 3
    assert answers[-1]["result"]["structuredContent"]["counts"]["docs"] >= 18
    unexpected = answers[-2]["result"]
    assert unexpected["isError"] and unexpected["content"][0]["text"] == "Error executing tool hybrid_query"
    assert "Traceback" in raw.stderr  # the traceback is the operator's, on stderr

    errors = error_texts(parsed)
    assert len(errors) >= 8
    for text in errors:
        assert "Traceback" not in text and 'File "' not in text, text
        assert str(tmp_path) not in text and "/tmp/" not in text and os.path.expanduser("~") + "/" not in text, text
        assert SECRET not in text and "test-key" not in text, text
        assert not re.search(r"/(usr|root|home|etc)/", text.replace("../../etc/passwd", "")), text
    for f in parsed:  # and no tool output at all carries the planted secret
        assert SECRET not in json.dumps(f)
    print(
        f"M8: {len(lines)} stdout lines, {len(parsed)} parsed (100%), {len(errors)} error texts, 0 traces/paths/secrets"
    )


class _rw:
    def __init__(self, db):
        from kgr.store import Store

        self.store = Store(db)

    def __enter__(self):
        self.store.conn.execute("BEGIN IMMEDIATE")
        return self.store.conn

    def __exit__(self, *exc):
        self.store.conn.execute("COMMIT")
        self.store.close()
