"""`kgr verify`: does the database still agree with the folder? (RELIABILITY.md I1-I3)

The ingest fast path trusts a file's mtime and size. A change that restores both
(``touch -r``, a clock jump, a copy tool that keeps times) is invisible to it; a full
re-hash is not. ``check`` re-hashes every file and compares:

- I1, database = folder: the (path, sha256 of the bytes) pairs stored equal those found
  by walking the root with the discovery rules (missing, extra and stale paths);
- I2, indexes agree: every chunk has its full-text row and (once vectors exist) its
  vector, and no full-text or vector row is left without its chunk;
- I3, storage sane: ``PRAGMA integrity_check``, ``foreign_key_check`` and the FTS5
  integrity-check (SQLite before 3.44 does not check FTS5 in integrity_check);
- complete: every document has its graph (``docs.graph_sig`` set: extraction ran on its
  current text) and a vector for each chunk. An interrupted ingest leaves documents loaded
  without them; a document whose extraction failed is listed apart, with its error.

``fix`` re-ingests what I1 found wrong, through ``pipeline.sync_paths``, which also builds
the missing graphs and vectors; failed extractions are tried again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import apsw

from kgr.store.db import BUSY_TIMEOUT_MS, Store


def disk_hashes(root: str | os.PathLike, allowlist: tuple[str, ...] = ()) -> dict[str, str]:
    """{relative path: sha256 of the bytes} of every file discovery would ingest (and the path
    allowlist, ``security.allowlist``, lets be read)."""
    from kgr import confine
    from kgr.stages import normalize as norm

    root_path = Path(root).resolve()
    out = {}
    for item in norm.discover([str(root_path)], root=str(root_path)):
        if isinstance(item, norm.FileRef) and confine.allowed(item.rel_path, allowlist, root=root_path):
            try:
                out[item.rel_path] = norm.file_hash(item.abs_path)
            except OSError:
                continue  # vanished meanwhile
    return out


def check(
    store: Store,
    root: str | os.PathLike,
    *,
    storage: bool = True,
    graph: bool = True,
    embed: bool = True,
    allowlist: tuple[str, ...] = (),
) -> dict[str, Any]:
    """I1, I2, (with ``storage``) I3 and completeness for ``store`` against the folder
    ``root``; ``graph`` and ``embed`` say whether documents are expected to have their
    graph and their vectors (not when ingested with --no-graph or --no-embed);
    ``allowlist`` is the path allowlist the database was ingested under."""
    disk = disk_hashes(root, allowlist)
    stored = dict(store.query("SELECT path, file_hash FROM docs WHERE source='file'"))
    missing = sorted(set(disk) - set(stored))
    extra = sorted(set(stored) - set(disk))
    stale = sorted(p for p in set(disk) & set(stored) if stored[p] != disk[p])
    report: dict[str, Any] = {
        "kind": "verify",
        "root": str(Path(root).resolve()),
        "files": len(disk),
        "docs": len(stored),
        "missing": missing,
        "extra": extra,
        "stale": stale,
        "index": index_check(store),
    }
    report.update(completeness(store, graph=graph, embed=embed))
    if storage:
        report["storage"] = storage_check(store)
    report["ok"] = (
        not missing
        and not extra
        and not stale
        and report["index"]["ok"]
        and not report["incomplete"]
        and not report["extract_failed"]
        and (not storage or report["storage"]["ok"])
    )
    return report


def completeness(store: Store, *, graph: bool = True, embed: bool = True) -> dict[str, Any]:
    """Documents loaded but not finished: ``incomplete`` ({path, missing: ["graph", "vectors"]})
    and ``extract_failed`` ({path, error})."""
    from kgr.store import vectors
    from kgr.store.graph_rows import GRAPH_FAILED

    missing: dict[str, list[str]] = {}
    failed = []
    if graph:
        for (path,) in store.query("SELECT path FROM docs WHERE status='ok' AND graph_sig IS NULL ORDER BY path"):
            missing.setdefault(path, []).append("graph")
        failed = [
            {"path": p, "error": e}
            for p, e in store.query(
                "SELECT path, error FROM docs WHERE status='ok' AND graph_sig = ? ORDER BY path", (GRAPH_FAILED,)
            )
        ]
    if embed:
        if vectors.has_tables(store):
            sql = (
                "SELECT DISTINCT d.path FROM docs d JOIN chunks c ON c.doc_id = d.id WHERE d.status='ok' "
                "AND c.id NOT IN (SELECT rowid FROM chunk_vec) ORDER BY d.path"
            )
        else:
            sql = "SELECT DISTINCT d.path FROM docs d JOIN chunks c ON c.doc_id = d.id WHERE d.status='ok' ORDER BY d.path"
        for (path,) in store.query(sql):
            missing.setdefault(path, []).append("vectors")
    return {"incomplete": [{"path": p, "missing": m} for p, m in sorted(missing.items())], "extract_failed": failed}


def index_check(store: Store) -> dict[str, Any]:
    """I2: chunks, full-text rows and vectors agree, row for row."""
    from kgr.store import vectors

    chunks = store.scalar("SELECT count(*) FROM chunks")
    fts = store.scalar("SELECT count(*) FROM chunks_fts_docsize")
    fts_orphans = store.scalar("SELECT count(*) FROM chunks_fts_docsize WHERE id NOT IN (SELECT id FROM chunks)")
    fts_missing = store.scalar("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT id FROM chunks_fts_docsize)")
    out: dict[str, Any] = {
        "chunks": chunks,
        "fts_rows": fts,
        "fts_orphans": fts_orphans,
        "fts_missing": fts_missing,
        "vectors": None,
        "vec_orphans": 0,
        "vec_missing": 0,
        "vec_src_orphans": 0,
    }
    if vectors.has_tables(store):
        out["vectors"] = store.scalar("SELECT count(*) FROM chunk_vec")
        out["vec_orphans"] = store.scalar("SELECT count(*) FROM chunk_vec WHERE rowid NOT IN (SELECT id FROM chunks)")
        out["vec_missing"] = store.scalar("SELECT count(*) FROM chunks WHERE id NOT IN (SELECT rowid FROM chunk_vec)")
        out["vec_src_orphans"] = store.scalar(
            "SELECT count(*) FROM vec_src WHERE kind='chunk' AND id NOT IN (SELECT id FROM chunks)"
        )
    out["ok"] = not (fts_orphans or fts_missing or fts != chunks or out["vec_orphans"] or out["vec_src_orphans"])
    # Chunks still waiting for a vector (vec_missing) are work, not damage: embedding may be off.
    return out


def storage_check(store: Store) -> dict[str, Any]:
    """I3: SQLite's own checks, and FTS5's (not part of integrity_check before SQLite 3.44)."""
    integrity = [r[0] for r in store.query("PRAGMA integrity_check(20)")]
    foreign = len(store.query("PRAGMA foreign_key_check"))
    # The FTS5 check is spelled as an INSERT, so it needs a read-write connection (it writes nothing).
    conn = store.conn
    if store.readonly:
        conn = apsw.Connection(str(store.path), flags=apsw.SQLITE_OPEN_READWRITE)
        conn.setbusytimeout(BUSY_TIMEOUT_MS)
    try:
        conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        fts = "ok"
    except apsw.Error as exc:
        fts = str(exc)
    finally:
        if conn is not store.conn:
            conn.close()
    return {
        "integrity_check": integrity,
        "foreign_key_errors": foreign,
        "fts_integrity": fts,
        "ok": integrity == ["ok"] and not foreign and fts == "ok",
    }


def fix(
    store: Store,
    root: str | os.PathLike,
    report: dict[str, Any],
    *,
    config=None,
    graph: bool = True,
    embed: bool = True,
    on_error: Callable[[dict], None] | None = None,
    on_partial: Callable[[dict], None] | None = None,
):
    """Re-ingest every path ``report`` (from ``check``) found missing, extra or stale.

    A stale document's stored stat is cleared first, so the fast path cannot skip it
    again. Returns the ``IngestSummary``. Call on the writer (``Writer.run``) or under
    the writer lock."""
    from kgr.ingest.pipeline import sync_paths

    paths = sorted(set(report["missing"]) | set(report["extra"]) | set(report["stale"]))
    if report["stale"]:
        with store.write() as conn:
            conn.executemany("UPDATE docs SET mtime_ms=NULL, size=NULL WHERE path=?", [(p,) for p in report["stale"]])
    if graph and report.get("extract_failed"):
        with store.write() as conn:  # asked for: try them again (they are recorded again if they still fail)
            conn.executemany(
                "UPDATE docs SET graph_sig=NULL WHERE path=?", [(f["path"],) for f in report["extract_failed"]]
            )
    # sync_paths builds every pending graph and embeds every chunk without a vector, so the
    # incomplete documents are finished with the re-ingested ones
    return sync_paths(
        store, root, paths, config=config, graph=graph, embed=embed, on_error=on_error, on_partial=on_partial
    )
