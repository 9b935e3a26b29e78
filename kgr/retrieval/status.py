"""`kgr status`: what a database holds, for people and scripts."""

from __future__ import annotations

import sys
from typing import Any

import apsw

from kgr import __version__
from kgr.store import Store, loads, migrations

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


# What makes a knowledge base non-empty: any row in these (events, meta, caches and the built-in
# template do not count).
CONTENT_TABLES = ("docs", "chunks", "entities", "relations", "observations")


def status(store: Store, *, project: str | None = None) -> dict[str, Any]:
    """What ``store`` holds. ``project``: the configured project id, reported when the database
    has none stamped (and beside the stamped one when they differ)."""
    counts = {t: store.scalar(f"SELECT count(*) FROM {t}") for t in TABLES if _has_table(store, t)}
    counts["chunks_fts"] = (
        store.scalar("SELECT count(*) FROM chunks_fts_docsize") if _has_table(store, "chunks_fts_docsize") else None
    )
    by_status = dict(store.query("SELECT status, count(*) FROM docs GROUP BY status"))
    last_event = store.conn.execute(
        "SELECT ts_ms, path, message FROM events WHERE kind='error' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    writer = _writer(store)
    embedding = _embedding(store)
    stamped = store.get_meta("project")
    info: dict[str, Any] = {
        "kind": "status",
        "db": str(store.path),
        # seed 000 section 16's project id: the one stamped in the database, else the configured one
        "project": stamped or project,
        "kgr_version": __version__,
        "schema_version": store.user_version,
        "schema_latest": migrations.LATEST,
        "sqlite_version": apsw.sqlite_lib_version(),
        "extensions": dict(store.extensions),
        "graph_traversal": _traversal(store),
        "root": _root(store),
        "empty": not any(counts.get(t) for t in CONTENT_TABLES),
        "counts": counts,
        "docs_by_status": by_status,
        "partial_docs": partial_docs(store),
        "graph": _graph(store),
        "last_file": store.get_meta("last_file"),
        "last_ingest_ms": _int(store.get_meta("last_ingest_ms")),
        "last_error": store.get_meta("last_error"),
        "last_error_ms": last_event[0] if last_event else None,
        "embedding": embedding,
        "writer": writer,
        "metrics": metrics(store, writer, embedding),
        "storage": store.storage(),
    }
    info["queue_depth"] = info["metrics"]["queue_depth"]  # seed 000 section 11.6 names it first
    if stamped and project and stamped != project:
        info["project_configured"] = project
    return info


def metrics(store: Store, writer: dict[str, Any], embedding: dict[str, Any] | None = None) -> dict[str, Any]:
    """Seed 000 section 15's metrics: queue depth, ingest rate, transaction time (of the live
    writer, else of the last one that published its state), vector count, orphaned entities."""
    live = bool(writer.get("alive"))
    state = writer if live and "queue_depth" in writer else writer.get("last_state") or {}
    source = "live writer" if live and state else "last writer" if state else None
    run = store.get_meta("ingest_run")  # a kgr ingest that has exited (kgr.ingest.pipeline.record_run)
    run = loads(run) if run else None
    if run and not (live and state) and run.get("ts_ms", 0) >= (state.get("heartbeat_ms") or 0):
        state, source = run, "last kgr ingest"
    embedding = embedding if embedding is not None else _embedding(store)
    return {
        # nothing is queued without a live writer; a live one that has published nothing yet: unknown
        "queue_depth": state.get("queue_depth") if live else 0,
        "pending": state.get("pending") if live else 0,
        "ingest_rate": state.get("ingest_rate"),  # files per busy second of that writer
        "files_done": state.get("files_done"),
        "transactions": state.get("transactions"),
        "vector_count": (embedding.get("chunk_vectors") or 0) + (embedding.get("entity_vectors") or 0),
        "orphaned_entities": orphaned_entities(store),
        "from": source,
    }


def with_live_writer(m: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """``m`` (from :func:`metrics`) with the live figures of a writer running in this process."""
    if "queue_depth" not in state:
        return m
    keys = ("queue_depth", "pending", "ingest_rate", "files_done", "transactions")
    return {**m, **{k: state.get(k) for k in keys}, "from": "live writer"}


def orphaned_entities(store: Store) -> int:
    """Entities nothing points at: no mention, no relation either way, no observation (one made
    by hand is not orphaned; kb_health's orphan_concepts are the same)."""
    return store.scalar(
        "SELECT count(*) FROM entities e WHERE e.origin != 'manual' "
        "AND NOT EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.src_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.dst_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.entity_id = e.id)"
    )


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
    if info.get("empty"):
        w("empty      yes: no documents, entities or memories yet (kgr ingest DIR --db DB fills it)\n")
    w(f"project    {info.get('project') or '-'}")
    if info.get("project_configured"):
        w(f" (configured: {info['project_configured']})")
    w("\n")
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
        + (f", sentence vectors of {emb['sentence_chunks']} chunks" if emb["model"] else "")
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
    m = info.get("metrics") or {}
    tx = m.get("transactions") or {}
    if tx.get("count"):
        w(
            f"metrics    {m.get('from')}: {tx['count']} transactions, last {tx['last_ms']} ms, median "
            f"{tx['median_ms']} ms, p95 {tx['p95_ms']} ms; ingest {m.get('ingest_rate')} files/s; "
            f"queue {m.get('queue_depth')}\n"
        )
    if m:
        w(f"vectors    {m.get('vector_count', 0)}; orphaned entities {m.get('orphaned_entities', 0)}\n")
    sto = info.get("storage") or {}
    if sto:
        w(
            f"storage    {sto['bytes']} bytes, {sto['freelist_count']} free pages, auto_vacuum {sto['auto_vacuum']}"
            + (" (kgr vacuum converts it)" if sto["auto_vacuum"] != "incremental" else "")
            + "\n"
        )
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
