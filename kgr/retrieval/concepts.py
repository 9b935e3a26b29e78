"""The knowledge base seen as concepts (the kb profile, seed 004): search, fetch, traverse, list, health.

Concepts are the graph's canonical entities; their typed relations are the edges. One
library for the ``kb`` MCP profile (search_concepts, get_concept, get_related,
list_concepts, kb_health); the lookups themselves are those of :mod:`kgr.retrieval.entities`.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import Any, Iterable

from kgr import confine
from kgr.errors import OutsideRoot, UsageError
from kgr.retrieval import entities
from kgr.retrieval.entities import fts_query
from kgr.stages.parsers import TEXT_FORMATS, decode_text_full
from kgr.store import Store, loads
from kgr.store import bfs as graph

MAX_HOPS = 3
MAX_NODES = 10000
BODY_CHARS = 50_000  # get_concept: the body's default bound, in characters
MAX_BODY_CHARS = 200_000


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


def get_concept(
    store: Store,
    ref: str | int,
    *,
    relations: int = 20,
    sources: int = 10,
    root: str | os.PathLike | None = None,
    max_chars: int = BODY_CHARS,
    redact: bool = True,
    known_external: Iterable[str] = (),
) -> dict[str, Any]:
    """One concept by id, key, name or alias: its definition, relations with evidence and sources,
    and its body: the text of the concept's own document (seed 004's atom), read through
    :mod:`kgr.confine` so that nothing outside ``root`` is ever read.

    The document is the one whose title (or file name) starts with the concept's name or an
    alias, else the one holding its definition, else the one mentioning it most (``body_from``
    says which). ``body`` is None, with ``body_note`` saying why, when the server has no root,
    the file is gone or leaves the root, or the concept is one of ``known_external`` (tenant
    settings: it lives elsewhere, and is not read). At most ``max_chars`` characters; ``truncated``
    says when the body was cut.
    """
    if not 1 <= max_chars <= MAX_BODY_CHARS:
        raise UsageError(f"max_chars must be between 1 and {MAX_BODY_CHARS}, got {max_chars}")
    ent = entities.resolve(store, ref)
    out = {
        **ent,
        "definition": entities.definition_of(store, ent),
        "relations": entities.relations_of(store, ent["id"], limit=relations),
        "sources": entities.sources_of(store, ent["id"], limit=sources),
    }
    doc = own_document(store, ent)
    external = doc is None and bool(_names(ent) & _folded(known_external))
    if doc is None and not external:
        doc = _defining_document(store, ent, out["definition"]) or _most_mentions_document(store, ent)
    out.update(external=external, path=doc["path"] if doc else None, title=doc["title"] if doc else None)
    out["body_from"] = doc["why"] if doc else None
    if external:
        out.update(
            body=None,
            body_note="listed in tenant.knownExternalIds: the concept lives outside this knowledge base "
            "and nothing is read for it",
            truncated=False,
            changed=None,
            body_format=None,
        )
    elif doc is None:
        out.update(
            body=None,
            body_note="no document of this knowledge base is about this concept",
            truncated=False,
            changed=None,
            body_format=None,
        )
    else:
        out.update(read_body(store, doc, root, max_chars=max_chars, redact=redact))
    return out


# -- a concept's own document (the seed's atom) -------------------------------------------------

_SEP = re.compile(r"[\s_-]+")


def _fold(text: str) -> str:
    return _SEP.sub(" ", text).strip().casefold()


def _folded(ids: Iterable[str]) -> set[str]:
    return {_fold(str(i)) for i in ids if str(i).strip()}


def _names(ent: dict[str, Any]) -> set[str]:
    """The concept's name, aliases and key, folded (case, and spaces, hyphens and underscores alike)."""
    return _folded([ent["name"], *ent.get("aliases", []), ent.get("key") or ""])


def _starts_with(text: str, names: set[str]) -> int | None:
    """How many characters of ``text`` follow the longest of ``names`` it starts with (a whole
    word: "ADR-0071" does not start with "ADR-007"), or None."""
    folded = _fold(text)
    best = None
    for n in names:
        if n and folded.startswith(n) and (len(folded) == len(n) or not folded[len(n)].isalnum()):
            rest = len(folded) - len(n)
            best = rest if best is None else min(best, rest)
    return best


def _own_rank(names: set[str], path: str, title: str | None) -> tuple | None:
    """How well a document is a concept's own (smaller is better), or None when it is not: its
    title starts with the concept's name (the closer the title to the name, the better), else
    its file name does."""
    if title:
        rest = _starts_with(title, names)
        if rest is not None:
            return (0, rest, path)
    stem = os.path.splitext(os.path.basename(path))[0]
    rest = _starts_with(stem, names)
    return (1, rest, path) if rest is not None else None


_DOC_COLUMNS = "d.id, d.path, d.title, d.format, d.source, d.file_hash"


def _doc(row: tuple, why: str) -> dict[str, Any]:
    i, path, title, fmt, source, file_hash = row
    return {"id": i, "path": path, "title": title, "format": fmt, "source": source, "file_hash": file_hash, "why": why}


def own_document(store: Store, ent: dict[str, Any], *, limit: int = 2000) -> dict[str, Any] | None:
    """The concept's own document: among those that mention it, the one whose title (else file
    name) starts with its name or an alias, closest first; None when no document is its own."""
    names = _names(ent)
    best = None
    for row in store.query(
        f"SELECT {_DOC_COLUMNS} FROM docs d WHERE d.id IN "
        # the documents whose titles name it (through the title index), then the first of the others
        "(SELECT doc_id FROM mentions WHERE entity_id = ? AND json_extract(features, '$.in_title') "
        "UNION SELECT * FROM (SELECT DISTINCT doc_id FROM mentions WHERE entity_id = ? LIMIT ?))",
        (ent["id"], ent["id"], limit),
    ):
        rank = _own_rank(names, row[1], row[2])
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, row)
    if best is None:
        return None
    return _doc(best[1], "its title names the concept" if best[0][0] == 0 else "its file name names the concept")


def _defining_document(store: Store, ent: dict[str, Any], definition: str | None) -> dict[str, Any] | None:
    """The document holding the sentence that defines the concept (entities.definition_of)."""
    if not definition or definition == ent.get("description"):
        return None
    probe = (
        " ".join(definition[len(ent["name"]) :].split()).strip(" :")[:80] if definition.startswith(ent["name"]) else ""
    )
    if not probe:
        return None
    for row in store.query(
        f"SELECT c.text, {_DOC_COLUMNS} FROM mentions m JOIN chunks c ON c.id = m.chunk_id "
        "JOIN docs d ON d.id = m.doc_id WHERE m.entity_id = ? AND m.source != 'coref' ORDER BY m.id LIMIT 200",
        (ent["id"],),
    ):
        if probe in " ".join(row[0].split()):
            return _doc(row[1:], "it holds the concept's definition")
    return None


def _most_mentions_document(store: Store, ent: dict[str, Any]) -> dict[str, Any] | None:
    row = store.query(
        f"SELECT {_DOC_COLUMNS} FROM mentions m JOIN docs d ON d.id = m.doc_id WHERE m.entity_id = ? "
        "GROUP BY d.id ORDER BY count(*) DESC, d.path LIMIT 1",
        (ent["id"],),
    )
    return _doc(row[0], "it mentions the concept most") if row else None


def read_body(
    store: Store, doc: dict[str, Any], root: str | os.PathLike | None, *, max_chars: int, redact: bool = True
) -> dict[str, Any]:
    """``body`` (the document's text, at most ``max_chars``), ``truncated`` and, when it is not
    read, ``body_note``. The file is read through :func:`kgr.confine.read_under` (or, for PDF, DOCX
    and HTML, opened through it and answered with the text kgr extracted at ingest): a path
    that leaves the root, a link out of it or a file gone is never read, and said so. Secrets are
    redacted as at ingest. ``changed``: whether the file's bytes differ from those ingested (None
    when not known)."""
    none = {"body": None, "truncated": False, "changed": None, "body_format": None}
    if doc["source"] != "file":
        text = store.scalar("SELECT text FROM docs WHERE id = ?", (doc["id"],)) or ""
        return {**none, "body": text[:max_chars], "truncated": len(text) > max_chars, "body_format": "stored"}
    if root is None:
        return {**none, "body_note": "this server has no knowledge root: the document is not read"}
    try:
        base = confine.real_root(root)
    except OSError:
        return {**none, "body_note": "the knowledge root is missing: the document is not read"}
    fmt = doc["format"]
    try:
        if fmt in TEXT_FORMATS.values():
            limit = 4 * max_chars + 4  # bytes enough for max_chars characters in any encoding
            data = confine.read_under(base, doc["path"], max_bytes=limit + 1)
            cut = len(data) > limit
            text = decode_text_full(data[:limit])[0]
            changed = None if cut else hashlib.sha256(data).hexdigest() != doc["file_hash"]
            body_format = "file"
        else:
            with confine.open_under(base, doc["path"]):
                pass  # the file is there, under the root; its text is the one extracted at ingest
            text = store.scalar("SELECT text FROM docs WHERE id = ?", (doc["id"],)) or ""
            cut, changed, body_format = False, None, "extracted"
    except OutsideRoot:
        return {
            **none,
            "body_note": "the document's file cannot be read under the knowledge root (gone, or a link "
            "that leaves the root): not read",
        }
    if redact:
        from kgr.stages.redact import redact as redact_text

        text = redact_text(text)[0]
    truncated = cut or len(text) > max_chars
    return {"body": text[:max_chars], "truncated": truncated, "changed": changed, "body_format": body_format}


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


def dangling_references(store: Store, known_external: Iterable[str] = (), *, sample: int = 20) -> dict[str, Any]:
    """Edges to concepts that name a document by its id (a ticket or decision record id, a
    standard, a policy) when no document of this knowledge base is that concept's own: seed
    004's dangling edges, an edge to an atom this repository does not hold. An edge whose every
    such end is in ``known_external`` (tenant.knownExternalIds: known to live elsewhere) is
    counted as ``suppressed``, not flagged. Nothing is read for them: this only looks at names.
    """
    idlike = [
        i
        for (i,) in store.query(
            "SELECT id FROM entities WHERE status = 'active' AND type IN ('STANDARD', 'POLICY') UNION "
            "SELECT DISTINCT entity_id FROM mentions WHERE entity_id IS NOT NULL "
            "AND json_extract(features, '$.pattern') IN ('ticket', 'standard')"
        )
    ]
    ents: dict[int, dict[str, Any]] = {}
    for i in range(0, len(idlike), 500):
        part = idlike[i : i + 500]
        for row in store.query(
            f"SELECT {entities.ENTITY_COLUMNS} FROM entities WHERE id IN ({','.join('?' * len(part))})", part
        ):
            ents[row[0]] = entities.entity_row(row)
    names = {eid: _names(e) for eid, e in ents.items()}
    owned: set[int] = set()
    for i in range(0, len(idlike), 500):
        part = idlike[i : i + 500]
        for eid, path, title in store.query(
            "SELECT DISTINCT m.entity_id, d.path, d.title FROM mentions m JOIN docs d ON d.id = m.doc_id "
            f"WHERE m.entity_id IN ({','.join('?' * len(part))})",
            part,
        ):
            if eid not in owned and eid in names and _own_rank(names[eid], path, title) is not None:
                owned.add(eid)
    missing = [eid for eid in ents if eid not in owned]
    known = _folded(known_external)
    flagged: list[dict[str, Any]] = []
    suppressed: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i in range(0, len(missing), 250):
        part = missing[i : i + 250]
        marks = ",".join("?" * len(part))
        for rid, src, rel, dst in store.query(
            "SELECT r.id, r.src_id, r.rel, r.dst_id FROM relations r "
            f"WHERE r.src_id IN ({marks}) OR r.dst_id IN ({marks}) ORDER BY r.id",
            (*part, *part),
        ):
            if rid in seen:
                continue
            seen.add(rid)
            ends = [e for e in (src, dst) if e in ents and e not in owned]
            row = {
                "id": rid,
                "src": _name_of(store, ents, src),
                "rel": rel,
                "dst": _name_of(store, ents, dst),
                "missing": [ents[e]["name"] for e in ends],
            }
            (suppressed if all(names[e] & known for e in ends) else flagged).append(row)
    flagged.sort(key=lambda r: r["id"])
    suppressed.sort(key=lambda r: r["id"])
    return {
        "count": len(flagged),
        "sample": flagged[:sample],
        "suppressed": len(suppressed),
        "suppressed_sample": suppressed[:sample],
    }


def _name_of(store: Store, ents: dict[int, dict[str, Any]], eid: int) -> str | None:
    if eid in ents:
        return ents[eid]["name"]
    return store.scalar("SELECT name FROM entities WHERE id = ?", (eid,))


def kb_health(
    store: Store,
    root: str | os.PathLike | None,
    *,
    full: bool = False,
    sample: int = 20,
    max_files: int = 100000,
    known_external: Iterable[str] = (),
    client_id: str | None = None,
) -> dict[str, Any]:
    """What is wrong with the knowledge base, with counts and a few examples of each problem.

    Dangling edges and references, orphan concepts, chunks without vectors, files gone from
    disk, the full-text and vector indexes counted against the chunks, and SQLite's own
    check (``quick_check``, or ``integrity_check`` with ``full``) plus FTS5's integrity-check.

    ``dangling_references`` (seed 004's dangling edges: see :func:`dangling_references`) are
    reported as warnings, which do not make ``ok`` false: a knowledge base of documents cites
    much that lives elsewhere. ``violations`` lists the problems found (seed 004's word).
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
    dangling = dangling_references(store, known_external, sample=sample)
    violations = [{"kind": k, "count": n} for k, n in bad.items()]
    if integrity != ["ok"]:
        violations.append({"kind": "integrity_check" if full else "quick_check", "count": len(integrity)})
    if fk:
        violations.append({"kind": "foreign_key_violations", "count": len(fk)})
    if fts_ok is False:
        violations.append({"kind": "fts_integrity", "count": 1})
    return {
        "ok": ok,
        "clientId": client_id or None,
        "violations": violations,
        "warnings": {"dangling_references": dangling["count"]},
        "dangling_references": dangling,
        "problems": problems,
        "counts": counts,
        "checks": checks,
        "seconds": round(time.perf_counter() - started, 3),
    }
