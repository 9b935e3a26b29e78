"""Reading the knowledge graph: entity lookup, explanations, review lists and paths.

One library for `kgr entities`, `kgr explain`, `kgr review`, `kgr path` and the MCP
tools entity_lookup, explain_entity and review_links.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Iterator

from kgr.errors import EntityNotFound
from kgr.stages.link import norm
from kgr.store import Store, loads


def fts_query(text: str) -> str:
    """User text as an FTS5 query of quoted terms: never FTS syntax ("NEAR(", "col:", "*")."""
    terms = [t for t in re.findall(r"\w+", text, flags=re.UNICODE) if t]
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms[:32])


def lookup(store: Store, q: str, *, type_: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
    """Entities whose name or aliases match ``q``, best first, each with a score in [0, 1]."""
    from rapidfuzz import fuzz

    q = q.strip()
    if not q:
        return []
    n = norm(q)
    scores: dict[int, float] = {}
    rows: dict[int, tuple] = {}
    cols = "id, key, name, type, aliases, popularity, status"

    def consider(row: tuple, score: float) -> None:
        if type_ and row[3].upper() != type_.upper():
            return
        rows[row[0]] = row
        scores[row[0]] = max(scores.get(row[0], 0.0), score)

    for row in store.query(f"SELECT {cols} FROM entities WHERE norm = ?", (n,)):
        consider(row, 1.0)
    match = fts_query(q)
    if match:
        for row in store.query(
            f"SELECT {', '.join('e.' + c for c in cols.split(', '))} FROM entities_fts f JOIN entities e ON e.id = f.rowid "
            "WHERE entities_fts MATCH ? ORDER BY bm25(entities_fts) LIMIT 200",
            (match,),
        ):
            names = [row[2], *loads(row[4], [])]
            best = max(fuzz.WRatio(q.lower(), x.lower()) for x in names) / 100.0
            if any(norm(x) == n for x in names):
                best = max(best, 0.97)
            consider(row, 0.9 * best)
    out = []
    for eid in sorted(scores, key=lambda i: (-scores[i], -rows[i][5], rows[i][2])):
        _, key, name, typ, aliases, pop, status = rows[eid]
        out.append(
            {
                "id": eid,
                "key": key,
                "name": name,
                "type": typ,
                "aliases": loads(aliases, []),
                "popularity": pop,
                "score": round(scores[eid], 4),
            }
        )
    return out[:limit]


def resolve(store: Store, ref: str | int) -> dict[str, Any]:
    """An entity by id, key, exact name or alias, else the best lookup hit."""
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        row = store.conn.execute("SELECT id FROM entities WHERE id=?", (int(ref),)).fetchone()
        if row:
            return entity(store, row[0])
    row = store.conn.execute("SELECT id FROM entities WHERE key=?", (str(ref),)).fetchone()
    if row:
        return entity(store, row[0])
    hits = lookup(store, str(ref), limit=1)
    if hits and hits[0]["score"] >= 0.6:
        return entity(store, hits[0]["id"])
    raise EntityNotFound(f"no entity matches {ref!r}", hint="try `kgr entities QUERY` to search")


ENTITY_COLUMNS = "id, key, name, type, aliases, description, popularity, origin, status"


def entity_row(row) -> dict[str, Any]:
    """An entity as the tools and exports show it, from a row of ``ENTITY_COLUMNS``."""
    return {
        "id": row[0],
        "key": row[1],
        "name": row[2],
        "type": row[3],
        "aliases": loads(row[4], []),
        "description": row[5],
        "popularity": row[6],
        "origin": row[7],
        "status": row[8],
    }


def entity(store: Store, eid: int) -> dict[str, Any]:
    row = store.conn.execute(f"SELECT {ENTITY_COLUMNS} FROM entities WHERE id=?", (eid,)).fetchone()
    if row is None:
        raise EntityNotFound(f"no entity with id {eid}")
    return entity_row(row)


def relations_of(store: Store, eid: int, *, limit: int = 20) -> list[dict[str, Any]]:
    out = []
    for rid, src, sname, rel, dst, dname, conf, origin in store.query(
        "SELECT r.id, r.src_id, a.name, r.rel, r.dst_id, b.name, r.confidence, r.origin FROM relations r "
        "JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id "
        "WHERE r.src_id = ? OR r.dst_id = ? ORDER BY r.confidence DESC, r.id LIMIT ?",
        (eid, eid, limit),
    ):
        ev = store.conn.execute(
            'SELECT d.path, e.sentence, e.start, e."end", e.confidence FROM relation_evidence e JOIN docs d ON d.id = e.doc_id '
            "WHERE e.relation_id = ? ORDER BY e.confidence DESC LIMIT 3",
            (rid,),
        ).fetchall()
        out.append(
            {
                "id": rid,
                "src": src,
                "src_name": sname,
                "rel": rel,
                "dst": dst,
                "dst_name": dname,
                "confidence": round(conf, 4),
                "origin": origin,
                "evidence": [{"path": p, "sentence": s, "start": a, "end": b, "confidence": c} for p, s, a, b, c in ev],
            }
        )
    return out


def sources_of(store: Store, eid: int, *, limit: int = 10) -> list[dict[str, Any]]:
    return [
        {"path": p, "mentions": n, "confidence": round(c or 0.0, 4), "section": sec}
        for p, n, c, sec in store.query(
            "SELECT d.path, count(*), avg(coalesce(m.link_score, 1) * coalesce(m.score, 1)), min(c.section) "
            "FROM mentions m JOIN docs d ON d.id = m.doc_id JOIN chunks c ON c.id = m.chunk_id "
            "WHERE m.entity_id = ? GROUP BY d.path ORDER BY count(*) DESC, d.path LIMIT ?",
            (eid, limit),
        )
    ]


def definition_of(store: Store, ent: dict[str, Any]) -> str | None:
    """The entity's description, else the first sentence that defines it ("**X**: ..." or "X is a ...")."""
    if ent.get("description"):
        return ent["description"]
    return next((d[1] for d in definitions(store, ent["id"], [ent["name"], *ent["aliases"]])), None)


def definitions(store: Store, eid: int, names: list[str], *, limit: int = 200) -> Iterator[tuple[int, str, bool]]:
    """(chunk id, sentence, set off) of each sentence that defines the entity by one of ``names``, in
    the order of its mentions: a line "X: ..." or "X (...): ...", or "X is a/an/the ...". ``set off``:
    the name is written as a term being defined, in bold or code before the colon ("**X**: ..."), as
    a glossary writes it (a changelog's "- X: now defaults to ..." is not)."""
    for chunk_id, text, start in store.query(
        "SELECT c.id, c.text, m.start FROM mentions m JOIN chunks c ON c.id = m.chunk_id WHERE m.entity_id = ? "
        "AND m.source != 'coref' ORDER BY m.id LIMIT ?",
        (eid, limit),
    ):
        tail = text[start : start + 400]
        for name in names:
            if not tail.startswith(name):
                continue
            m = re.match(re.escape(name) + r"(\**|`?)\s*(?:\([^)]*\))?\s*\**\s*:\s*(.+?[.!?])(?:\s|$)", tail, re.S)
            if m:
                marked = bool(m.group(1)) and text[max(0, start - len(m.group(1))) : start] == m.group(1)
                yield chunk_id, re.sub(r"\s+", " ", f"{name}: {m.group(2)}").strip(), marked
                break
            m = re.match(
                re.escape(name) + r"\s+(?:\([^)]*\)\s+)?(is|are|was)\s+((?:a|an|the|our)\s.+?[.!?])(?:\s|$)", tail, re.S
            )
            if m:
                yield chunk_id, re.sub(r"\s+", " ", f"{name} {m.group(1)} {m.group(2)}").strip(), False
                break


def explain(store: Store, ref: str | int, *, hops: int = 2, max_nodes: int = 50) -> dict[str, Any]:
    ent = resolve(store, ref)
    hood = neighbourhood(store, ent["id"], hops=hops, max_nodes=max_nodes)
    return {
        **ent,
        "definition": definition_of(store, ent),
        "relations": relations_of(store, ent["id"]),
        "sources": sources_of(store, ent["id"]),
        "neighbourhood": hood,
    }


def neighbourhood(
    store: Store, eid: int, *, hops: int = 2, max_nodes: int = 50, rels: list[str] | None = None
) -> dict[str, Any]:
    """Entities within ``hops`` (edges followed both ways), through bfsvtab when loaded."""
    from kgr.store import bfs as graph

    rows = graph.bfs(
        store.conn,
        eid,
        max_depth=hops,
        direction="both",
        rels=rels,
        max_nodes=max_nodes + 1,
        check=store.check_deadline,
    )
    truncated = len(rows) > max_nodes
    rows = rows[:max_nodes]
    names = {}
    ids = [r[0] for r in rows]
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        names.update(
            dict(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(part))})", part))
        )
    return {
        "method": graph.bfs_method(store.conn),
        "nodes": [{"id": i, "name": names.get(i), "parent": p, "distance": d} for i, p, d in rows],
        "truncated": truncated,
    }


def review(store: Store, *, limit: int = 20) -> dict[str, Any]:
    """The lowest-confidence links and edges, for a person to check."""
    links = [
        {"mention": mid, "surface": s, "entity": name, "entity_id": eid, "link_score": round(ls, 4), "path": p}
        for mid, s, name, eid, ls, p in store.query(
            "SELECT m.id, m.surface, e.name, e.id, m.link_score, d.path FROM mentions m JOIN entities e ON e.id = m.entity_id "
            "JOIN docs d ON d.id = m.doc_id WHERE m.link_score IS NOT NULL AND m.link_score < 1 "
            "ORDER BY m.link_score, m.id LIMIT ?",
            (limit,),
        )
    ]
    edges = []
    for rid, a, rel, b, conf in store.query(
        "SELECT r.id, x.name, r.rel, y.name, r.confidence FROM relations r JOIN entities x ON x.id = r.src_id "
        "JOIN entities y ON y.id = r.dst_id WHERE r.origin != 'manual' ORDER BY r.confidence, r.id LIMIT ?",
        (limit,),
    ):
        ev = store.conn.execute(
            "SELECT d.path, e.sentence FROM relation_evidence e JOIN docs d ON d.id = e.doc_id WHERE e.relation_id = ? LIMIT 1",
            (rid,),
        ).fetchone()
        edges.append(
            {
                "relation": rid,
                "src": a,
                "rel": rel,
                "dst": b,
                "confidence": round(conf, 4),
                "path": ev[0] if ev else None,
                "sentence": ev[1] if ev else None,
            }
        )
    return {"links": links, "edges": edges}


def paths(
    store: Store,
    a: str | int,
    b: str | int,
    *,
    max_hops: int = 4,
    rels: list[str] | None = None,
    limit: int = 5,
    max_visited: int = 10000,
) -> dict[str, Any]:
    """Shortest typed paths between two entities (edges followed both ways), at most ``max_hops`` long."""
    src, dst = resolve(store, a), resolve(store, b)
    rel_filter = ""
    params: list[Any] = []
    if rels:
        rel_filter = f" AND rel IN ({','.join('?' * len(rels))})"
        params = list(rels)

    def neighbours(node: int) -> list[tuple[int, str, bool]]:
        out = [
            (d, r, True)
            for d, r in store.query(f"SELECT dst_id, rel FROM relations WHERE src_id = ?{rel_filter}", (node, *params))
        ]
        out += [
            (s, r, False)
            for s, r in store.query(f"SELECT src_id, rel FROM relations WHERE dst_id = ?{rel_filter}", (node, *params))
        ]
        return sorted(out)

    # BFS keeping every shortest predecessor, then enumerate paths
    dist = {src["id"]: 0}
    preds: dict[int, list[tuple[int, str, bool]]] = {src["id"]: []}
    frontier = deque([src["id"]])
    truncated = False
    while frontier:
        store.check_deadline()
        node = frontier.popleft()
        if dist[node] >= max_hops or (dst["id"] in dist and dist[node] >= dist[dst["id"]]):
            continue
        for nxt, rel, forward in neighbours(node):
            if nxt not in dist:
                if len(dist) >= max_visited:
                    truncated = True
                    break
                dist[nxt] = dist[node] + 1
                preds[nxt] = [(node, rel, forward)]
                frontier.append(nxt)
            elif dist[nxt] == dist[node] + 1:
                preds[nxt].append((node, rel, forward))
    found: list[list[dict]] = []

    def walk(node: int, tail: list[dict]) -> None:
        if len(found) >= limit:
            return
        if node == src["id"]:
            found.append(list(reversed(tail)))
            return
        for prev, rel, forward in preds.get(node, []):
            step = {"from": prev, "rel": rel, "to": node} if forward else {"from": node, "rel": rel, "to": prev}
            walk(prev, tail + [{**step, "forward": forward}])

    if dst["id"] in dist:
        walk(dst["id"], [])
    ids = {x for p in found for s in p for x in (s["from"], s["to"])}
    names = (
        dict(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(ids))})", list(ids)))
        if ids
        else {}
    )
    for p in found:
        for s in p:
            s["from_name"], s["to_name"] = names.get(s["from"]), names.get(s["to"])
    return {"src": src, "dst": dst, "paths": found, "length": dist.get(dst["id"]), "truncated": truncated}
