"""The knowledge base seen as concepts (the kb profile, seed 004): search, fetch, traverse, list, health.

Concepts are the graph's canonical entities; their typed relations are the edges. One
library for the ``kb`` MCP profile (search_concepts, get_concept, get_related,
list_concepts, kb_health); the lookups themselves are those of :mod:`kgr.retrieval.entities`.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kgr import confine
from kgr.errors import OutsideRoot, UsageError
from kgr.retrieval import entities
from kgr.retrieval.entities import fts_query
from kgr.store import Store, loads
from kgr.store import bfs as graph

MAX_HOPS = 3
MAX_NODES = 10000


def search_concepts(store: Store, q: str, *, type_: str | None = None, limit: int = 10) -> dict[str, Any]:
    """Concepts for a text: by name and alias first, then those the best matching passages mention."""
    q = (q or "").strip()
    if not q:
        raise UsageError("the query is empty")
    hits = entities.lookup(store, q, type_=type_, limit=limit)
    for h in hits:
        h["why"] = "name or alias match"
    seen = {h["id"] for h in hits}
    match = fts_query(q)
    if len(hits) < limit and match:
        rows = store.query(
            "SELECT e.id, e.key, e.name, e.type, e.aliases, e.popularity, min(f.rank) AS r FROM "
            "(SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT 20) f "
            "JOIN mentions m ON m.chunk_id = f.rowid JOIN entities e ON e.id = m.entity_id "
            "WHERE e.status = 'active' AND m.source != 'coref' AND e.type NOT IN ('DATE', 'VERSION') "
            "GROUP BY e.id ORDER BY r, count(*) DESC, e.id LIMIT ?",
            (match, 4 * limit),
        )
        for eid, key, name, typ, aliases, pop, _ in rows:
            if eid in seen or (type_ and typ.upper() != type_.upper()):
                continue
            seen.add(eid)
            hits.append(
                {
                    "id": eid,
                    "key": key,
                    "name": name,
                    "type": typ,
                    "aliases": loads(aliases, []),
                    "popularity": pop,
                    "score": 0.0,
                    "why": "mentioned in a matching passage",
                }
            )
            if len(hits) >= limit:
                break
    for rank, h in enumerate(hits, 1):
        h["rank"] = rank
    return {"query": q, "concepts": hits[:limit]}


def get_concept(store: Store, ref: str | int, *, relations: int = 20, sources: int = 10) -> dict[str, Any]:
    """One concept by id, key, name or alias: its definition, relations with evidence and sources."""
    ent = entities.resolve(store, ref)
    return {
        **ent,
        "definition": entities.definition_of(store, ent),
        "relations": entities.relations_of(store, ent["id"], limit=relations),
        "sources": entities.sources_of(store, ent["id"], limit=sources),
    }


def get_related(
    store: Store,
    ref: str | int,
    *,
    hops: int = 1,
    rels: list[str] | None = None,
    direction: str = "both",
    max_nodes: int = 200,
) -> dict[str, Any]:
    """The subgraph reached from a concept within ``hops``, with the exact edges traversed.

    Each reached concept has its distance and the concept it was reached from; each edge is
    the stored relation (id, src, rel, dst, confidence) that links a node to its parent.
    """
    if not 0 <= hops <= MAX_HOPS:
        raise UsageError(f"hops must be between 0 and {MAX_HOPS}, got {hops}")
    if not 1 <= max_nodes <= MAX_NODES:
        raise UsageError(f"max_nodes must be between 1 and {MAX_NODES}, got {max_nodes}")
    if direction not in ("out", "in", "both"):
        raise UsageError(f"direction must be out, in or both, not {direction!r}")
    if rels:
        known = {r[0] for r in store.query("SELECT name FROM relation_types")}
        bad = [r for r in rels if r not in known]
        if bad:
            raise UsageError(f"unknown relation type {', '.join(bad)}; known: {', '.join(sorted(known))}")
    root = entities.resolve(store, ref)
    rows = graph.bfs(
        store.conn,
        root["id"],
        max_depth=hops,
        edges="relations",
        src="src_id",
        dst="dst_id",
        rels=rels or None,
        direction=direction,
        max_nodes=max_nodes + 1,
        check=store.check_deadline,
    )
    truncated = len(rows) > max_nodes
    rows = rows[:max_nodes]
    ids = [r[0] for r in rows]
    info: dict[int, tuple] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        for eid, name, typ in store.query(
            f"SELECT id, name, type FROM entities WHERE id IN ({','.join('?' * len(part))})", part
        ):
            info[eid] = (name, typ)
    nodes = [
        {
            "id": eid,
            "name": info.get(eid, (None,))[0],
            "type": info.get(eid, (None, None))[1],
            "distance": dist,
            "parent": parent,
        }
        for eid, parent, dist in rows
    ]
    edges = []
    rel_sql = f" AND rel IN ({','.join('?' * len(rels))})" if rels else ""
    for eid, parent, _ in rows:
        if parent is None:
            continue
        pairs = {"out": "(src_id=? AND dst_id=?)", "in": "(dst_id=? AND src_id=?)"}
        where = pairs.get(direction) or "((src_id=? AND dst_id=?) OR (dst_id=? AND src_id=?))"
        params = (parent, eid) if direction != "both" else (parent, eid, parent, eid)
        row = store.query(
            f"SELECT id, src_id, dst_id, rel, confidence FROM relations WHERE {where}{rel_sql} "
            "ORDER BY confidence DESC, id LIMIT 1",
            (*params, *(rels or [])),
        )
        if row:
            rid, s, d, rel, conf = row[0]
            edges.append(
                {
                    "id": rid,
                    "src": s,
                    "src_name": info.get(s, (None,))[0],
                    "rel": rel,
                    "dst": d,
                    "dst_name": info.get(d, (None,))[0],
                    "confidence": round(conf, 4),
                }
            )
    return {
        "root": {"id": root["id"], "name": root["name"], "type": root["type"]},
        "hops": hops,
        "direction": direction,
        "nodes": nodes,
        "edges": edges,
        "truncated": truncated,
        "method": graph.bfs_method(store.conn),
    }


def list_concepts(
    store: Store, *, type_: str | None = None, prefix: str | None = None, limit: int = 50, offset: int = 0
) -> dict[str, Any]:
    """Concepts in a stable order (most mentioned first), filtered by type and name prefix, a page at a time."""
    where = ["e.status = 'active'"]
    params: list[Any] = []
    if type_:
        where.append("upper(e.type) = upper(?)")
        params.append(type_)
    if prefix:
        where.append("e.name LIKE ? ESCAPE '\\'")
        params.append(prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
    cond = " AND ".join(where)
    total = store.scalar(f"SELECT count(*) FROM entities e WHERE {cond}", params)
    rows = store.query(
        f"SELECT e.id, e.key, e.name, e.type, e.aliases, (SELECT count(*) FROM mentions m WHERE m.entity_id = e.id) AS n "
        f"FROM entities e WHERE {cond} ORDER BY n DESC, e.name, e.id LIMIT ? OFFSET ?",
        (*params, limit, offset),
    )
    concepts = [
        {"id": i, "key": k, "name": n, "type": t, "aliases": loads(a, []), "mentions": c} for i, k, n, t, a, c in rows
    ]
    types = dict(store.query("SELECT type, count(*) FROM entities WHERE status = 'active' GROUP BY type ORDER BY type"))
    nxt = offset + len(concepts)
    return {
        "total": total,
        "offset": offset,
        "concepts": concepts,
        "next_offset": nxt if nxt < total else None,
        "types": types,
    }


def _has(store: Store, name: str) -> bool:
    return store.scalar("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)) is not None


def kb_health(
    store: Store, root: str | os.PathLike | None, *, full: bool = False, sample: int = 20, max_files: int = 100000
) -> dict[str, Any]:
    """What is wrong with the knowledge base, with counts and a few examples of each problem.

    Dangling edges and references, orphan concepts, chunks without vectors, files gone from
    disk, the full-text and vector indexes counted against the chunks, and SQLite's own
    check (``quick_check``, or ``integrity_check`` with ``full``) plus FTS5's integrity-check.
    """
    started = time.perf_counter()
    problems: dict[str, Any] = {}

    def check(name: str, count_sql: str, sample_sql: str) -> None:
        n = store.scalar(count_sql)
        problems[name] = {
            "count": n,
            "sample": [list(r) for r in store.query(sample_sql + f" LIMIT {int(sample)}")] if n else [],
        }

    missing_ent = "NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = {col})"
    check(
        "dangling_edges",
        f"SELECT count(*) FROM relations r WHERE {missing_ent.format(col='r.src_id')} OR {missing_ent.format(col='r.dst_id')}",
        f"SELECT r.id, r.src_id, r.rel, r.dst_id FROM relations r WHERE {missing_ent.format(col='r.src_id')} "
        f"OR {missing_ent.format(col='r.dst_id')} ORDER BY r.id",
    )
    check(
        "dangling_evidence",
        "SELECT count(*) FROM relation_evidence v WHERE NOT EXISTS (SELECT 1 FROM relations r WHERE r.id = v.relation_id) "
        "OR NOT EXISTS (SELECT 1 FROM docs d WHERE d.id = v.doc_id) "
        "OR (v.chunk_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = v.chunk_id))",
        "SELECT v.id, v.relation_id, v.doc_id, v.chunk_id FROM relation_evidence v WHERE NOT EXISTS "
        "(SELECT 1 FROM relations r WHERE r.id = v.relation_id) OR NOT EXISTS (SELECT 1 FROM docs d WHERE d.id = v.doc_id) "
        "OR (v.chunk_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = v.chunk_id)) ORDER BY v.id",
    )
    check(
        "dangling_mentions",
        "SELECT count(*) FROM mentions m WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = m.chunk_id) "
        "OR (m.entity_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = m.entity_id))",
        "SELECT m.id, m.chunk_id, m.entity_id FROM mentions m WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.id = m.chunk_id) "
        "OR (m.entity_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM entities e WHERE e.id = m.entity_id)) ORDER BY m.id",
    )
    orphan = (
        "e.origin != 'manual' AND NOT EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.src_id = e.id OR r.dst_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.entity_id = e.id)"
    )
    check(
        "orphan_concepts",
        f"SELECT count(*) FROM entities e WHERE {orphan}",
        f"SELECT e.id, e.name, e.type FROM entities e WHERE {orphan} ORDER BY e.id",
    )
    check(
        "orphan_chunks",
        "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM docs d WHERE d.id = c.doc_id)",
        "SELECT c.id, c.doc_id FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM docs d WHERE d.id = c.doc_id) ORDER BY c.id",
    )

    n_chunks = store.scalar("SELECT count(*) FROM chunks")
    has_vec = _has(store, "vec_src") and _has(store, "chunk_vec")
    counts: dict[str, Any] = {
        "docs": store.scalar("SELECT count(*) FROM docs"),
        "chunks": n_chunks,
        "chunks_fts": store.scalar("SELECT count(*) FROM chunks_fts_docsize")
        if _has(store, "chunks_fts_docsize")
        else None,
        "chunk_vectors": store.scalar("SELECT count(*) FROM chunk_vec") if has_vec else 0,
        "concepts": store.scalar("SELECT count(*) FROM entities"),
        "edges": store.scalar("SELECT count(*) FROM relations"),
    }
    if has_vec:
        check(
            "chunks_without_vectors",
            "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM vec_src v WHERE v.kind = 'chunk' AND v.id = c.id)",
            "SELECT c.id, d.path, c.ord FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE NOT EXISTS "
            "(SELECT 1 FROM vec_src v WHERE v.kind = 'chunk' AND v.id = c.id) ORDER BY c.id",
        )
    else:
        problems["chunks_without_vectors"] = {
            "count": n_chunks,
            "sample": [],
            "note": "the database has no vectors yet",
        }
    problems["fts_mismatch"] = {"count": abs((counts["chunks_fts"] or 0) - n_chunks), "sample": []}
    problems["vector_mismatch"] = {"count": abs(counts["chunk_vectors"] - n_chunks) if has_vec else 0, "sample": []}

    gone: list[str] = []
    checked = 0
    files_note = None
    if root is None:
        files_note = "no knowledge root recorded: files not checked"
    else:
        try:
            base = confine.real_root(root)
        except OSError:
            base = None
            files_note = "the knowledge root is missing"
        if base is not None:
            for (path,) in store.query(
                "SELECT path FROM docs WHERE source = 'file' ORDER BY path LIMIT ?", (max_files,)
            ):
                checked += 1
                try:
                    confine.resolve_under(base, path, dirs=False)
                except OutsideRoot:
                    gone.append(path)
    problems["files_gone"] = {
        "count": len(gone),
        "sample": gone[:sample],
        "checked": checked,
        **({"note": files_note} if files_note else {}),
    }

    integrity = [r[0] for r in store.query("PRAGMA integrity_check(20)" if full else "PRAGMA quick_check(20)")]
    fk = store.query("PRAGMA foreign_key_check")
    fts_ok, fts_error = True, None
    try:
        store.query("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 0)")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        msg = str(exc)
        if "readonly" in msg.lower():
            fts_ok, fts_error = None, "not run: the database is open read-only"
        else:
            fts_ok, fts_error = False, msg.split(":", 1)[-1].strip()[:200]
    checks = {
        "integrity_check" if full else "quick_check": integrity,
        "foreign_key_violations": len(fk),
        "fts_integrity": fts_ok,
        **({"fts_error": fts_error} if fts_error else {}),
    }
    bad = {
        k: v["count"]
        for k, v in problems.items()
        if v["count"] and k != "chunks_without_vectors" or (k == "chunks_without_vectors" and has_vec and v["count"])
    }
    ok = not bad and integrity == ["ok"] and not fk and fts_ok is not False
    return {
        "ok": ok,
        "problems": problems,
        "counts": counts,
        "checks": checks,
        "seconds": round(time.perf_counter() - started, 3),
    }
