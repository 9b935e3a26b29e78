"""Ingest real corpora end to end: the PowerShell docs and the golden knowledge base."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgr.store import Store

HEAVY = ("torch", "sentence_transformers", "spacy", "transformers", "pdfplumber", "docx")


def run_kgr(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kgr", *args], input=stdin, capture_output=True, cwd=cwd, timeout=1800)


def ingest_in_child(corpus: Path, db: Path, graph: bool = True, embed: bool | None = None) -> dict:
    """Ingest in a fresh interpreter and report the summary plus which heavy modules it imported.
    Embedding follows ``graph`` unless given: the 68k-chunk corpus is not embedded in the default run."""
    embed = graph if embed is None else embed
    code = (
        "import json, sys\n"
        "from kgr.config import load\n"
        "from kgr.ingest.pipeline import ingest\n"
        "from kgr.store import Store\n"
        f"with Store({str(db)!r}) as s:\n"
        f"    summary = ingest([{str(corpus)!r}], s, config=load(None), graph={graph!r}, embed={embed!r})\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in %r)\n"
        "print(json.dumps({'summary': summary.as_dict(), 'heavy': heavy}))\n" % (HEAVY,)
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def powershell(shared) -> Path:
    corpus = shared / "corpora" / "powershell-docs"
    if not corpus.is_dir():
        pytest.skip(f"PowerShell corpus absent at {corpus}")
    return corpus


def test_powershell_corpus_is_stored_whole_and_second_run_is_free(powershell, tmp_path):
    files = [
        p
        for p in powershell.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(powershell).parts)
    ]
    md = [p for p in files if p.suffix.lower() in (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")]
    db = tmp_path / "ps.sqlite"
    first = ingest_in_child(powershell, db, graph=False)["summary"]
    assert first["seen"] == len(md)
    with Store(db, readonly=True) as s:
        ok = s.scalar("SELECT count(*) FROM docs WHERE status='ok'")
        failed = s.query("SELECT path, error FROM docs WHERE status!='ok'")
        assert ok + len(failed) == len(md), "every file is either stored or explained by an error"
        assert all(err for _, err in failed)
        assert s.scalar("SELECT count(*) FROM chunks") > len(md)
        assert s.scalar("SELECT count(*) FROM chunks_fts_docsize") == s.scalar("SELECT count(*) FROM chunks")
        before = s.query("SELECT path, sig, mtime_ms FROM docs ORDER BY path")
        changes = s.scalar("SELECT count(*) FROM events")
    t = time.perf_counter()
    second = ingest_in_child(powershell, db, graph=False)
    wall = time.perf_counter() - t
    assert second["summary"]["unchanged"] == len(md)
    assert second["summary"]["ingested"] == 0
    assert second["heavy"] == [], f"an unchanged re-run imported {second['heavy']}"
    assert wall < 5.0, f"unchanged re-run took {wall:.1f}s"
    with Store(db, readonly=True) as s:
        assert s.query("SELECT path, sig, mtime_ms FROM docs ORDER BY path") == before
        assert s.scalar("SELECT count(*) FROM events") == changes


def db_content(db: Path) -> dict:
    with Store(db, readonly=True) as s:
        return {
            "docs": s.query(
                "SELECT path, source, format, mtime_ms, size, file_hash, hash, sig, title, lang, text, meta, status, error "
                "FROM docs ORDER BY path"
            ),
            "chunks": s.query(
                'SELECT d.path, c.ord, c.text, c.prelude, c.section, c.headings, c.start, c."end", c.tokens, c.hash, c.meta '
                "FROM chunks c JOIN docs d ON d.id = c.doc_id ORDER BY d.path, c.ord"
            ),
            "fts": s.scalar("SELECT count(*) FROM chunks_fts_docsize"),
        }


def test_pipe_and_ingest_give_the_same_database(shared, tmp_path):
    docs = shared / "golden" / "docs"
    a, b = tmp_path / "ingest.sqlite", tmp_path / "pipe.sqlite"
    ingest_in_child(docs, a)
    normalized = run_kgr("normalize", str(docs))
    assert normalized.returncode == 0, normalized.stderr
    chunked = run_kgr("chunk", stdin=normalized.stdout)
    assert chunked.returncode == 0, chunked.stderr
    loaded = run_kgr("load", "--db", str(b), stdin=chunked.stdout)
    assert loaded.returncode == 0, loaded.stderr
    left, right = db_content(a), db_content(b)
    assert len(left["docs"]) == 31
    assert left == right


def test_planted_secrets_never_reach_the_database_or_its_wal(shared, tmp_path):
    docs = shared / "golden" / "docs"
    secrets = [
        json.loads(line)["surface"]
        for line in (shared / "golden" / "annotations" / "secrets.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert secrets
    planted = len(secrets)
    # A password line leaks if its value survives, even when the key word stays.
    secrets += [s.split(":", 1)[1].strip() for s in secrets if ": " in s]
    db = tmp_path / "golden.sqlite"
    # A second connection held open keeps the WAL file in place, so it can be searched too.
    holder = Store(db)
    ingest_in_child(docs, db)
    blobs = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("golden.sqlite")}
    holder.close()
    assert "golden.sqlite" in blobs and "golden.sqlite-wal" in blobs
    for secret in secrets:
        for name, data in blobs.items():
            assert secret.encode() not in data, f"a planted secret is in {name}"
    with Store(db, readonly=True) as s:
        assert s.scalar("SELECT sum(json_extract(meta, '$.redactions')) FROM docs") >= planted


def test_golden_is_embedded_once_and_the_rerun_loads_no_model(shared, tmp_path):
    docs = shared / "golden" / "docs"
    db = tmp_path / "golden.sqlite"
    first = ingest_in_child(docs, db)["summary"]
    with Store(db, readonly=True) as s:
        chunks = s.scalar("SELECT count(*) FROM chunks")
        entities = s.scalar("SELECT count(*) FROM entities WHERE status != 'merged'")
        assert s.scalar("SELECT count(*) FROM chunk_vec") == chunks
        assert s.scalar("SELECT count(*) FROM entity_vec") == entities
        assert s.get_meta("embed.model") == "all-MiniLM-L6-v2" and s.get_meta("embed.dim") == "384"
    assert first["embedded"] == chunks + entities
    second = ingest_in_child(docs, db)
    assert second["summary"]["embedded"] == 0 and second["summary"]["ingested"] == 0
    assert second["heavy"] == [], f"an unchanged re-run imported {second['heavy']}"
