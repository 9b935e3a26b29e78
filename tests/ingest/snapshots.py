"""Two ingests of the same files compared table by table (what each table holds), for the tests
that run the per-document work elsewhere (test_ingest_ray.py, test_ingest_processes.py)."""

from __future__ import annotations

from pathlib import Path

from kgr import config as config_mod
from kgr.ingest import pipeline
from kgr.store import Store

# What each table holds, without when it was written (created_ms, updated_ms) or where a
# file was last seen (mtime_ms: the copies are made at different moments).
TABLES = {
    "docs": "SELECT id, path, source, format, size, file_hash, hash, sig, graph_sig, title, lang, text, meta, status, "
    "error FROM docs ORDER BY id",
    "chunks": 'SELECT id, doc_id, ord, text, prelude, section, headings, start, "end", tokens, hash, meta FROM chunks '
    "ORDER BY id",
    "entities": "SELECT id, key, name, type, norm, aliases, description, popularity, origin, status, meta FROM entities "
    "ORDER BY id",
    "mentions": 'SELECT id, entity_id, doc_id, chunk_id, start, "end", surface, type, score, source, link_score, '
    "features FROM mentions ORDER BY id",
    "relations": "SELECT id, src_id, dst_id, rel, confidence, strength, origin, meta FROM relations ORDER BY id",
    "relation_evidence": 'SELECT id, relation_id, doc_id, chunk_id, start, "end", sentence, pattern, confidence '
    "FROM relation_evidence ORDER BY id",
    "gazetteer": "SELECT term, type, freq, source FROM gazetteer ORDER BY term, type, source",
    "vec_src": "SELECT kind, id, hash FROM vec_src ORDER BY kind, id",
    "chunk_vec": "SELECT rowid, vec_to_json(embedding) FROM chunk_vec ORDER BY rowid",
    "entity_vec": "SELECT rowid, vec_to_json(embedding) FROM entity_vec ORDER BY rowid",
    "sentence_vec": "SELECT chunk_id, hash, hex(vectors) FROM sentence_vec ORDER BY chunk_id",
}


def snapshot(db: Path) -> dict[str, list[tuple]]:
    store = Store(db)
    try:
        return {name: [tuple(r) for r in store.query(sql)] for name, sql in TABLES.items()}
    finally:
        store.close()


def assert_same(local: Path, other: Path) -> dict[str, int]:
    a, b = snapshot(local), snapshot(other)
    for name in TABLES:
        assert len(a[name]) == len(b[name]), f"{name}: {len(a[name])} rows locally, {len(b[name])} on the other engine"
        for x, y in zip(a[name], b[name]):
            assert x == y, f"{name}: first differing row\n local: {str(x)[:400]}\n other: {str(y)[:400]}"
    return {name: len(rows) for name, rows in a.items()}


def ingest_into(src: Path, db: Path, engine):
    """Ingest ``src`` into a new database at ``db`` with ``engine`` (None: this process), with the
    default settings; the store and the engine are closed after. Returns the run's summary."""
    store = Store(db)
    try:
        return pipeline.ingest([str(src)], store, config=config_mod.load(), engine=engine)
    finally:
        store.close()
        if engine is not None:
            engine.close()
