"""Writing the graph of one document: entities, mentions, relations and their evidence.

Called by the loader inside the document's write transaction. Evidence ties each
edge to the chunk that supports it, so re-ingesting or deleting a file removes
exactly what that file supported: an extracted edge left without evidence
disappears, and an extracted entity left without mentions or edges is removed.
Entities and edges created by hand (origin 'manual') are never collected.
"""

from __future__ import annotations

from kgr.store.db import Store, dumps, now_ms

GRAPH_FAILED = "failed"  # docs.graph_sig of a document whose extraction failed on its current text


def upsert_entity(store: Store, rec: dict) -> int:
    conn = store.conn
    row = conn.execute("SELECT id FROM entities WHERE key=?", (rec["key"],)).fetchone()
    values = (
        rec["name"],
        rec["type"],
        rec.get("norm") or "",
        dumps(rec.get("aliases") or []),
        rec.get("description"),
        rec.get("popularity") or 0.0,
        now_ms(),
    )
    if row is None:
        conn.execute(
            "INSERT INTO entities(key, name, type, norm, aliases, description, popularity, updated_ms, created_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rec["key"], *values, now_ms()),
        )
        return conn.last_insert_rowid()
    # An entity made by hand (the memory tools, authoring) keeps the name and type it was given:
    # a document that mentions it links to it, and never renames or retypes it.
    conn.execute(
        "UPDATE entities SET name=iif(origin='manual', name, ?), type=iif(origin='manual', type, ?), "
        "norm=iif(origin='manual', norm, ?), aliases=?, description=coalesce(?, description), "
        "popularity=?, updated_ms=?, status='active' WHERE id=?",
        (*values, row[0]),
    )
    return row[0]


def entity_id(store: Store, key: str, cache: dict[str, int]) -> int | None:
    if key in cache:
        return cache[key]
    row = store.conn.execute("SELECT id FROM entities WHERE key=?", (key,)).fetchone()
    if row is None:
        return None
    cache[key] = row[0]
    return row[0]


def doc_graph(store: Store, doc_id: int) -> tuple[set[int], set[int]]:
    """The entities and relations a document's mentions and evidence touch (for targeted collection)."""
    conn = store.conn
    ents = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT entity_id FROM mentions WHERE doc_id=? AND entity_id IS NOT NULL", (doc_id,)
        )
    }
    rels = set()
    for rid, src, dst in conn.execute(
        "SELECT DISTINCT r.id, r.src_id, r.dst_id FROM relation_evidence e JOIN relations r ON r.id = e.relation_id WHERE e.doc_id=?",
        (doc_id,),
    ):
        rels.add(rid)
        ents.update((src, dst))
    return ents, rels


def replace_derived(store: Store, doc_id: int, derived: list[dict], graph_sig: str) -> None:
    """Replace the mentions and relation evidence of one document."""
    conn = store.conn
    old_entities, old_relations = doc_graph(store, doc_id)
    conn.execute("DELETE FROM mentions WHERE doc_id=?", (doc_id,))
    conn.execute("DELETE FROM relation_evidence WHERE doc_id=?", (doc_id,))
    path = conn.execute("SELECT path FROM docs WHERE id=?", (doc_id,)).fetchone()[0]
    chunk_ids = {
        f"{path}#{ord_}": cid for cid, ord_ in conn.execute("SELECT id, ord FROM chunks WHERE doc_id=?", (doc_id,))
    }
    ids: dict[str, int] = {}
    for rec in derived:
        if rec.get("kind") == "entity":
            ids[rec["key"]] = upsert_entity(store, rec)
    mention_rows = []
    for rec in derived:
        if rec.get("kind") != "mention":
            continue
        cid = chunk_ids.get(rec.get("chunk"))
        if cid is None:
            continue
        eid = entity_id(store, rec["entity"], ids) if rec.get("entity") else None
        features = dict(rec.get("features") or {})
        if rec.get("refers_to"):
            features["refers_to"] = rec["refers_to"]
        mention_rows.append(
            (
                eid,
                doc_id,
                cid,
                rec.get("start"),
                rec.get("end"),
                rec["surface"],
                rec.get("type"),
                rec.get("score"),
                rec.get("source"),
                rec.get("link_score"),
                dumps(features),
            )
        )
    conn.executemany(
        'INSERT INTO mentions(entity_id, doc_id, chunk_id, start, "end", surface, type, score, source, link_score, features) '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        mention_rows,
    )
    for rec in derived:
        if rec.get("kind") != "relation":
            continue
        src = entity_id(store, rec["src"], ids)
        dst = entity_id(store, rec["dst"], ids)
        if src is None or dst is None or src == dst:
            continue
        conf = float(rec.get("confidence") or 0.5)
        conn.execute(
            "INSERT INTO relations(src_id, dst_id, rel, confidence, created_ms) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(src_id, dst_id, rel) DO UPDATE SET confidence=max(confidence, excluded.confidence)",
            (src, dst, rec["rel"], conf, now_ms()),
        )
        rid = conn.execute(
            "SELECT id FROM relations WHERE src_id=? AND dst_id=? AND rel=?", (src, dst, rec["rel"])
        ).fetchone()[0]
        ev = rec.get("evidence") or {}
        conn.execute(
            'INSERT INTO relation_evidence(relation_id, doc_id, chunk_id, start, "end", sentence, pattern, confidence) '
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                doc_id,
                chunk_ids.get(ev.get("chunk")),
                ev.get("start"),
                ev.get("end"),
                ev.get("sentence"),
                rec.get("pattern"),
                conf,
            ),
        )
    conn.execute("UPDATE docs SET graph_sig=? WHERE id=?", (graph_sig, doc_id))
    collect_garbage(store, old_entities, old_relations)


def collect_garbage(store: Store, entity_ids: set[int] | None = None, relation_ids: set[int] | None = None) -> None:
    """Drop extracted edges without evidence, then extracted entities nothing refers to.

    With id sets, only those candidates are checked (the usual case: what one
    document touched); without, the whole graph is scanned.
    """
    conn = store.conn
    rel_sql = (
        "DELETE FROM relations WHERE {where} origin != 'manual' AND NOT EXISTS "
        "(SELECT 1 FROM relation_evidence e WHERE e.relation_id = relations.id)"
    )
    ent_sql = (
        "DELETE FROM entities WHERE {where} origin != 'manual' "
        "AND NOT EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = entities.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.src_id = entities.id) "
        "AND NOT EXISTS (SELECT 1 FROM relations r WHERE r.dst_id = entities.id) "
        "AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.entity_id = entities.id)"
    )
    if relation_ids is None and entity_ids is None:
        conn.execute(rel_sql.format(where=""))
        conn.execute(ent_sql.format(where=""))
        return
    if relation_ids:
        conn.executemany(rel_sql.format(where="id=? AND"), [(r,) for r in relation_ids])
    if entity_ids:
        conn.executemany(ent_sql.format(where="id=? AND"), [(e,) for e in entity_ids])
