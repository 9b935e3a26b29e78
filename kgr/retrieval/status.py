"""`kgr status`: what a database holds, for people and scripts."""

from __future__ import annotations

import sys
from typing import Any

import apsw

from kgr import __version__
from kgr.store import Store, migrations

TABLES = (
    "docs",
    "chunks",
    "entities",
    "mentions",
    "relations",
    "relation_evidence",
    "observations",
    "templates",
    "document_cache",
    "gazetteer",
    "embed_cache",
    "events",
)


PARTIAL_SAMPLE = 10  # partial documents listed by name; the count covers them all
# The WHERE clause is the index's own (m007), so both read idx_docs_partial, never the texts.
PARTIAL_WHERE = "json_extract(meta, '$.partial') IS NOT NULL"
PARTIAL_QUERY = f"SELECT path, json_extract(meta, '$.partial') FROM docs WHERE {PARTIAL_WHERE} ORDER BY path LIMIT ?"


def partial_docs(store: Store, limit: int = PARTIAL_SAMPLE) -> dict[str, Any]:
    """Documents stored but not whole: how many, and the first ``limit`` by path with why."""
    import orjson

    count = store.scalar(f"SELECT count(*) FROM docs WHERE {PARTIAL_WHERE}")
    docs = []
    for path, partial in store.query(PARTIAL_QUERY, (limit,)) if count else ():
        items = orjson.loads(partial) if partial else []
        reasons = [
            str(p.get("message") or p.get("reason")) if isinstance(p, dict) else str(p)
            for p in (items if isinstance(items, list) else [items])
        ]
        docs.append({"path": path, "reasons": reasons})
    return {"count": count, "docs": docs}


def status(store: Store) -> dict[str, Any]:
    counts = {t: store.scalar(f"SELECT count(*) FROM {t}") for t in TABLES if _has_table(store, t)}
    counts["chunks_fts"] = (
        store.scalar("SELECT count(*) FROM chunks_fts_docsize") if _has_table(store, "chunks_fts_docsize") else None
    )
    by_status = dict(store.query("SELECT status, count(*) FROM docs GROUP BY status"))
    last_event = store.conn.execute(
        "SELECT ts_ms, path, message FROM events WHERE kind='error' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return {
        "kind": "status",
        "db": str(store.path),
        "kgr_version": __version__,
        "schema_version": store.user_version,
        "schema_latest": migrations.LATEST,
        "sqlite_version": apsw.sqlite_lib_version(),
        "extensions": dict(store.extensions),
        "graph_traversal": _traversal(store),
        "root": _root(store),
        "counts": counts,
        "docs_by_status": by_status,
        "partial_docs": partial_docs(store),
        "graph": _graph(store),
        "last_file": store.get_meta("last_file"),
        "last_ingest_ms": _int(store.get_meta("last_ingest_ms")),
        "last_error": store.get_meta("last_error"),
        "last_error_ms": last_event[0] if last_event else None,
        "embedding": _embedding(store),
        "writer": _writer(store),
    }


def _graph(store: Store) -> dict[str, int]:
    """Documents whose graph is still to be built, and those whose extraction failed."""
    from kgr.store.graph_rows import GRAPH_FAILED

    pending, failed = store.query(
        "SELECT coalesce(sum(graph_sig IS NULL), 0), coalesce(sum(graph_sig IS ?), 0) FROM docs WHERE status='ok'",
        (GRAPH_FAILED,),
    )[0]
    return {"pending": pending, "failed": failed}


def _writer(store: Store) -> dict[str, Any]:
    """The live writer process (kgr watch, kgr serve --watch, kgr ingest) and its last published state."""
    from kgr.store.lock import published_state, writer_pid

    pid = writer_pid(store.path)
    state = published_state(store) or {}
    if pid is None:
        return {"alive": False, "pid": None, "state": "none", "last_state": state or None}
    if state.get("pid") != pid:  # a kgr ingest, or a writer that has not published yet
        return {"alive": True, "pid": pid, "state": "running", "last_state": None}
    return {"alive": True, **state}


def _embedding(store: Store) -> dict[str, Any]:
    from kgr.store import vectors

    spec = vectors.stored_spec(store)
    out: dict[str, Any] = {
        "model": spec.model if spec else None,
        "dim": spec.dim if spec else None,
        "quantize": ("int8" if spec.quantize == 8 else "float32") if spec else None,
    }
    out.update(vectors.counts(store))
    return out


def _traversal(store: Store) -> str:
    from kgr.store.bfs import bfs_method

    return bfs_method(store.conn)


def _root(store: Store) -> str | None:
    from kgr.store.root import stored_root

    root = stored_root(store)
    return None if root is None else str(root)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _has_table(store: Store, name: str) -> bool:
    return store.scalar("SELECT 1 FROM sqlite_master WHERE name=?", (name,)) is not None


def print_status(info: dict[str, Any], out=None) -> None:
    out = out or sys.stdout
    w = out.write
    w(f"database   {info['db']}\n")
    w(f"root       {info['root'] or '-'}\n")
    w(f"schema     {info['schema_version']} (kgr {info['kgr_version']}, SQLite {info['sqlite_version']})\n")
    exts = ", ".join(f"{k} {v or 'unavailable'}" for k, v in info["extensions"].items()) or "-"
    w(f"extensions {exts}\n")
    w(f"traversal  {info['graph_traversal']}\n")
    emb = info["embedding"]
    w(
        f"embedding  {emb['model'] or '-'}"
        + (f" ({emb['dim']} dims, {emb['quantize']})" if emb["dim"] else "")
        + (f", {emb['chunk_vectors']} chunk and {emb['entity_vectors']} entity vectors" if emb["model"] else "")
        + "\n"
    )
    wr = info.get("writer") or {}
    if not wr.get("alive"):
        w("writer     none running\n")
    elif "queue_depth" in wr:
        w(
            f"writer     pid {wr['pid']} {wr['state']}, queue {wr['queue_depth']}, pending {wr['pending']}, "
            f"{wr['ingest_rate']} files/s" + (f", last error {wr['last_error']}" if wr.get("last_error") else "") + "\n"
        )
    else:
        w(f"writer     pid {wr['pid']} (no state published)\n")
    w(f"last file  {info['last_file'] or '-'}\n")
    w(f"last error {info['last_error'] or '-'}\n")
    docs = info["docs_by_status"]
    if docs:
        w("documents  " + ", ".join(f"{n} {s}" for s, n in sorted(docs.items())) + "\n")
    partial = info.get("partial_docs") or {}
    if partial.get("count"):
        n = partial["count"]
        w(f"partial    {n} document{'s' if n != 1 else ''} kept but not whole\n")
        for d in partial["docs"]:
            w(f"  {_printable(d['path'])}: {'; '.join(d['reasons'])}\n")
        if n > len(partial["docs"]):
            w(f"  and {n - len(partial['docs'])} more\n")
    graph = info.get("graph") or {}
    if graph.get("pending") or graph.get("failed"):
        w(
            f"graph      {graph['pending']} documents pending, {graph['failed']} failed extraction (kgr verify lists them)\n"
        )
    w("counts\n")
    for table, n in info["counts"].items():
        if n is not None:
            w(f"  {table:<18} {n:>9}\n")


def _printable(text: str) -> str:
    return text.encode("unicode_escape", "backslashreplace").decode("ascii") if not text.isprintable() else text
