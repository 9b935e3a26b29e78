"""Authoring the graph by hand (seed 002): relation types, nodes, relationships, paths, neighbourhoods.

One library for the ``authoring`` MCP profile and its CLI twins (``kgr path``, ``kgr render``,
``kgr template``). Nodes are kgr's entities and relationships its relations; what is created
here has ``origin = 'manual'``, so re-ingesting documents never removes it.

Path strength follows seed 002: each edge weighs its relevance strength (weak 0.2, medium
0.6, strong 1.0) times its type's directional weight (strong [1.0, 0.2], weak [0.8, 0.6],
balanced [0.7, 0.7]; forward when walked from its source, backward otherwise; an
unregistered type [0.5, 0.5]); a path's raw strength is the product over its edges, and its
strength is the raw strength times the length penalty 1 / length. Paths weaker than the
minimum strength (0.3 by default) are left out.

A relationship type used here before it is registered is registered with directionality
balanced (the seed's example value), unless the caller is strict
(``authoring.strict_relation_types``): then it is refused. Types written by other means (the
memory tools, extraction) and never registered weigh [0.5, 0.5].
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from kgr.authoring.templates import NodeNotFound, node, resolve_node
from kgr.errors import KgrError
from kgr.store import Store, dumps, loads, now_ms

RELEVANCE = {"weak": 0.2, "medium": 0.6, "strong": 1.0}
DIRECTIONALITY = {"strong": (1.0, 0.2), "weak": (0.8, 0.6), "balanced": (0.7, 0.7)}
UNKNOWN_DIRECTIONALITY = (0.5, 0.5)
DEFAULT_DIRECTIONALITY = "balanced"  # of a relation type registered without one (the seed's example)
MIN_PATH_STRENGTH = 0.3
MAX_PATH_LENGTH = 4
MAX_PATHS_PER_PAIR = 5
MAX_EXPANSIONS = 200_000
MAX_VISITED = 100_000  # nodes one breadth-first walk may visit
DEADLINE_EVERY = 256  # path expansions between two checks of the time budget
_REL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class AuthoringError(KgrError):
    pass


# -- relation types --------------------------------------------------------------------------------


def relation_types(store: Store) -> list[dict[str, Any]]:
    return [
        {"name": n, "description": d, "directionality": dr, "source_types": loads(s, []), "target_types": loads(t, [])}
        for n, d, dr, s, t in store.query(
            "SELECT name, description, directionality, source_types, target_types FROM relation_types ORDER BY name"
        )
    ]


def save_relation_type(
    store: Store,
    name: str,
    *,
    description: str | None = None,
    directionality: str | None = None,
    source_types: list[str] | None = None,
    target_types: list[str] | None = None,
) -> dict[str, Any]:
    """Create or update a relation type (inside ``store.write()``)."""
    if not isinstance(name, str) or not _REL_NAME.match(name):
        raise AuthoringError(f"bad relation type name {name!r}", hint="letters, digits and _, starting with a letter")
    if directionality is not None and directionality not in DIRECTIONALITY:
        raise AuthoringError(f"directionality must be strong, weak or balanced, not {directionality!r}")
    old = store.conn.execute(
        "SELECT description, directionality, source_types, target_types FROM relation_types WHERE name=?", (name,)
    ).fetchone()
    vals = (
        description if description is not None else (old[0] if old else None),
        directionality or (old[1] if old else "balanced"),
        dumps(source_types) if source_types is not None else (old[2] if old else "[]"),
        dumps(target_types) if target_types is not None else (old[3] if old else "[]"),
    )
    store.execute(
        "INSERT INTO relation_types(name, description, directionality, source_types, target_types) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET description=excluded.description, "
        "directionality=excluded.directionality, source_types=excluded.source_types, "
        "target_types=excluded.target_types",
        (name, *vals),
    )
    return next(t for t in relation_types(store) if t["name"] == name)


def delete_relation_type(store: Store, name: str) -> dict[str, Any]:
    """Delete an unused relation type (inside ``store.write()``); one still in use is refused."""
    used = store.scalar("SELECT count(*) FROM relations WHERE rel=?", (name,))
    if used:
        raise AuthoringError(
            f"relation type {name!r} is used by {used} relationships", hint="delete or retype them first"
        )
    if not store.scalar("SELECT count(*) FROM relation_types WHERE name=?", (name,)):
        raise AuthoringError(f"no relation type {name!r}")
    store.execute("DELETE FROM relation_types WHERE name=?", (name,))
    return {"name": name, "deleted": True}


def _weights(store: Store) -> dict[str, tuple[float, float]]:
    return {
        n: DIRECTIONALITY.get(d, UNKNOWN_DIRECTIONALITY)
        for n, d in store.query("SELECT name, directionality FROM relation_types")
    }


def edge_strength(relevance: str | None, directionality_weights: tuple[float, float], forward: bool) -> float:
    """Relevance strength times the directional weight of walking the edge forward or backward."""
    return RELEVANCE.get(relevance or "medium", RELEVANCE["medium"]) * directionality_weights[0 if forward else 1]


def path_strength(edge_strengths: list[float]) -> dict[str, float]:
    """The seed's breakdown: raw (the product), the length penalty (1 / length) and the final strength."""
    raw = 1.0
    for s in edge_strengths:
        raw *= s
    penalty = 1.0 / len(edge_strengths) if edge_strengths else 1.0
    return {
        "raw_strength": round(raw, 6),
        "length_penalty": round(penalty, 6),
        "final_strength": round(raw * penalty, 6),
    }


# -- nodes -----------------------------------------------------------------------------------------


def _key(store: Store, name: str) -> tuple[str, str]:
    from kgr.stages.link import norm

    n = norm(name) or name.strip().lower()
    key, i = n, 2
    while store.scalar("SELECT 1 FROM entities WHERE key=?", (key,)):
        key = f"{n}~{i}"
        i += 1
    return key, n


def _text(value: Any, what: str, *, required: bool, limit: int = 10_000) -> str | None:
    if value is None:
        if required:
            raise AuthoringError(f"{what} is required")
        return None
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
        raise AuthoringError(f"{what} must be a non-empty string of at most {limit} characters")
    return value.strip()


def _node_ref(store: Store, ref: Any) -> int:
    """An existing node's id: by id, key or exact name (never fuzzy: a write must hit what was meant)."""
    if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isdigit()):
        if store.scalar("SELECT 1 FROM entities WHERE id=?", (int(ref),)):
            return int(ref)
    if isinstance(ref, str) and ref.strip():
        row = (
            store.conn.execute("SELECT id FROM entities WHERE key=?", (ref.strip(),)).fetchone()
            or store.conn.execute(
                "SELECT id FROM entities WHERE name=? COLLATE NOCASE ORDER BY id", (ref.strip(),)
            ).fetchall()
        )
        if isinstance(row, list):
            if len(row) > 1:
                raise AuthoringError(f"{ref!r} names {len(row)} nodes", hint="use the node id")
            row = row[0] if row else None
        if row:
            return row[0]
    raise AuthoringError(f"no node {ref!r}", hint="give an existing node id or exact name")


def manage_nodes(store: Store, operation: str, nodes: list[dict[str, Any]], *, strict: bool = False) -> dict[str, Any]:
    """Create, update or delete nodes in one transaction per node; each gets its own result.

    A relationship type not yet registered is registered with the default directionality
    (the result's message says so), unless ``strict``: then the node's write is refused."""
    if operation not in ("create", "update", "delete"):
        raise AuthoringError(f"operation must be create, update or delete, not {operation!r}")
    results = []
    for spec in nodes:
        try:
            registered: list[str] = []
            with store.write():
                result = _node_op(store, operation, spec, strict=strict, registered=registered)
            results.append(_say_registered(result, registered))
        except (AuthoringError, NodeNotFound, KgrError) as exc:
            results.append(
                {
                    "node_id": spec.get("id"),
                    "operation": operation,
                    "status": "error",
                    "message": exc.message + (f" (hint: {exc.hint})" if exc.hint else ""),
                }
            )
    return {"results": results}


def _say_registered(result: dict[str, Any], registered: list[str]) -> dict[str, Any]:
    """The result, saying which relationship types its write registered (and how)."""
    if registered:
        names = ", ".join(dict.fromkeys(registered))
        note = f"registered the relationship type{'s' if len(set(registered)) > 1 else ''} {names} "
        note += f"(directionality {DEFAULT_DIRECTIONALITY}; change it with manage_relationship_types)"
        result["message"] = f"{result['message']}; {note}" if result.get("message") else note
        result["registered_relationship_types"] = list(dict.fromkeys(registered))
    return result


def _node_op(
    store: Store, operation: str, spec: dict[str, Any], *, strict: bool = False, registered: list[str] | None = None
) -> dict[str, Any]:
    ts = now_ms()
    if operation == "delete":
        eid = _node_ref(store, spec.get("id") if spec.get("id") is not None else spec.get("name"))
        name = store.scalar("SELECT name FROM entities WHERE id=?", (eid,))
        rels = store.scalar("SELECT count(*) FROM relations WHERE src_id=?1 OR dst_id=?1", (eid,))
        store.execute("UPDATE mentions SET entity_id=NULL WHERE entity_id=?", (eid,))
        store.execute("DELETE FROM entities WHERE id=?", (eid,))
        return {
            "node_id": eid,
            "operation": operation,
            "status": "success",
            "message": f"deleted {name!r} and its {rels} relationships",
        }
    template = spec.get("template_id")
    if template is not None:
        from kgr.authoring.templates import get_template

        template = get_template(store, template)["name"]
    props = spec.get("properties")
    if props is not None and not isinstance(props, dict):
        raise AuthoringError("properties must be an object")
    if operation == "create":
        name = _text(spec.get("name"), "name", required=True, limit=512)
        summary = _text(spec.get("summary"), "summary", required=True)
        typ = _text(spec.get("node_type"), "node_type", required=False, limit=64) or "CONCEPT"
        key, n = _key(store, name)
        meta = {"properties": props or {}}
        if template:
            meta["template"] = template
        store.execute(
            "INSERT INTO entities(key, name, type, norm, description, origin, meta, created_ms, updated_ms) "
            "VALUES (?, ?, ?, ?, ?, 'manual', ?, ?, ?)",
            (key, name, typ, n, summary, dumps(meta), ts, ts),
        )
        eid = store.conn.last_insert_rowid()
    else:
        eid = _node_ref(store, spec.get("id") if spec.get("id") is not None else spec.get("name"))
        row = store.conn.execute("SELECT name, description, type, meta FROM entities WHERE id=?", (eid,)).fetchone()
        name = _text(spec.get("name"), "name", required=False, limit=512) or row[0]
        summary = _text(spec.get("summary"), "summary", required=False)
        summary = row[1] if summary is None else summary
        typ = _text(spec.get("node_type"), "node_type", required=False, limit=64) or row[2]
        meta = loads(row[3], {}) or {}
        if props is not None:
            meta["properties"] = {**(meta.get("properties") or {}), **props}
        if template:
            meta["template"] = template
        from kgr.stages.link import norm

        store.execute(
            "UPDATE entities SET name=?, norm=?, description=?, type=?, meta=?, updated_ms=? WHERE id=?",
            (name, norm(name) or name.lower(), summary, typ, dumps(meta), ts, eid),
        )
    created = 0
    for rel in spec.get("relationships") or []:
        rel = dict(rel)
        rel["source_id"] = eid
        _create_relation(store, rel, strict=strict, registered=registered)
        created += 1
    return {"node_id": eid, "operation": operation, "status": "success", "created_relationships": created}


def written_nodes(result: dict[str, Any]) -> list[int]:
    """The ids of the nodes a successful create or update of :func:`manage_nodes` wrote."""
    return [
        r["node_id"]
        for r in result.get("results", [])
        if r.get("status") == "success" and r.get("operation") in ("create", "update") and isinstance(r["node_id"], int)
    ]


def embed_nodes(store: Store, ids: Iterable[int], embedder: Any, *, quantize: int = 8) -> dict[str, Any]:
    """Vectors for the nodes just written, so that a vector search finds them at once.

    Each node's vector is made from what ``kgr embed --pending`` embeds (its name, other names
    and summary: :func:`kgr.store.vectors.entity_text`), and recorded with that text's hash, so
    the next ``kgr embed --pending`` leaves it alone. A node whose text already has its vector
    costs nothing. The model runs outside any transaction. With no vectors in the database yet,
    the vector tables are made for ``embedder`` (``quantize``: 8 for int8, 32 for float32); a
    database holding another model's vectors raises ModelMismatch. Returns ``{"embedded":
    [ids]}``."""
    from kgr.store import vectors

    want = sorted({int(i) for i in ids})
    if not want:
        return {"embedded": []}
    rows = []
    for i in range(0, len(want), 500):
        part = want[i : i + 500]
        rows += store.query(
            "SELECT id, name, type, aliases, description FROM entities "
            f"WHERE status != 'merged' AND id IN ({','.join('?' * len(part))}) ORDER BY id",
            part,
        )
    stored = vectors.stored_spec(store)
    spec = vectors.VectorSpec(embedder.model, int(embedder.dim), stored.quantize if stored else quantize)
    vectors.ensure_tables(store, spec)
    texts = [(eid, vectors.entity_text(name, typ, aliases, desc)) for eid, name, typ, aliases, desc in rows]
    hashes = [vectors.text_hash(t) for _, t in texts]
    current = dict(store.query("SELECT id, hash FROM vec_src WHERE kind = 'entity'")) if texts else {}
    todo = [(eid, t, h) for (eid, t), h in zip(texts, hashes) if current.get(eid) != h]
    have = vectors.cached(store, spec, [h for _, _, h in todo])
    missing = {h: t for _, t, h in todo if h not in have}
    fresh = {}
    if missing:
        fresh = dict(zip(missing, embedder.embed_documents(list(missing.values()))))
    if todo:
        with store.write():
            vectors.remember(store, spec, fresh.items())
            vectors.put(store, spec, vectors.ENTITY, [(eid, h, have.get(h, fresh.get(h))) for eid, _, h in todo])
    return {"embedded": [eid for eid, _ in texts]}


# -- relationships ------------------------------------------------------------------------------------


def _ensure_type(store: Store, rtype: Any, strict: bool, registered: list[str] | None) -> None:
    """Check a relationship type; an unregistered one is registered with the default
    directionality (balanced), or refused when ``strict`` (``authoring.strict_relation_types``)."""
    if not isinstance(rtype, str) or not _REL_NAME.match(rtype):
        raise AuthoringError(f"bad relationship_type {rtype!r}", hint="letters, digits and _, starting with a letter")
    if store.scalar("SELECT 1 FROM relation_types WHERE name=?", (rtype,)):
        return
    if strict:
        raise AuthoringError(
            f"unknown relationship type {rtype!r}",
            hint="register it first with the manage_relationship_types tool (operation create), or use one of: "
            + ", ".join(t["name"] for t in relation_types(store)),
        )
    save_relation_type(store, rtype, directionality=DEFAULT_DIRECTIONALITY)
    if registered is not None:
        registered.append(rtype)


def _create_relation(
    store: Store, spec: dict[str, Any], *, strict: bool = False, registered: list[str] | None = None
) -> int:
    rtype = spec.get("relationship_type")
    _ensure_type(store, rtype, strict, registered)
    strength = spec.get("relevance_strength") or "medium"
    if strength not in RELEVANCE:
        raise AuthoringError(f"relevance_strength must be weak, medium or strong, not {strength!r}")
    direction = spec.get("direction") or "forward"
    if direction not in ("forward", "reverse"):
        raise AuthoringError(f"direction must be forward or reverse, not {direction!r}")
    props = spec.get("properties") or {}
    if not isinstance(props, dict):
        raise AuthoringError("properties must be an object")
    a, b = _node_ref(store, spec.get("source_id")), _node_ref(store, spec.get("target_id"))
    if direction == "reverse":
        a, b = b, a
    if a == b:
        raise AuthoringError("a relationship needs two different nodes")
    if store.scalar("SELECT 1 FROM relations WHERE src_id=? AND dst_id=? AND rel=?", (a, b, rtype)):
        raise AuthoringError(f"the relationship {a} -[{rtype}]-> {b} already exists", hint="update it instead")
    store.execute(
        "INSERT INTO relations(src_id, dst_id, rel, confidence, strength, origin, meta, created_ms) "
        "VALUES (?, ?, ?, 1.0, ?, 'manual', ?, ?)",
        (a, b, rtype, strength, dumps(props), now_ms()),
    )
    return store.conn.last_insert_rowid()


def manage_relationships(
    store: Store, operation: str, relationships: list[dict[str, Any]], *, strict: bool = False
) -> dict[str, Any]:
    """Create, update or delete relationships, one transaction each; each gets its own result.

    A relationship type not yet registered is registered with the default directionality
    (the result's message says so), unless ``strict``: then it is refused."""
    if operation not in ("create", "update", "delete"):
        raise AuthoringError(f"operation must be create, update or delete, not {operation!r}")
    results = []
    for spec in relationships:
        try:
            registered: list[str] = []
            with store.write():
                result = _relation_op(store, operation, spec, strict=strict, registered=registered)
            results.append(_say_registered(result, registered))
        except KgrError as exc:
            results.append(
                {
                    "relationship_id": spec.get("id"),
                    "operation": operation,
                    "status": "error",
                    "message": exc.message + (f" (hint: {exc.hint})" if exc.hint else ""),
                }
            )
    return {"results": results}


def _relation_id(store: Store, spec: dict[str, Any]) -> int:
    rid = spec.get("id")
    if rid is not None:
        if not (isinstance(rid, int) or (isinstance(rid, str) and rid.isdigit())) or not store.scalar(
            "SELECT 1 FROM relations WHERE id=?", (int(rid),)
        ):
            raise AuthoringError(f"no relationship {rid!r}")
        return int(rid)
    if spec.get("source_id") is None or spec.get("target_id") is None or not spec.get("relationship_type"):
        raise AuthoringError("give the relationship id, or its source_id, target_id and relationship_type")
    a, b = _node_ref(store, spec["source_id"]), _node_ref(store, spec["target_id"])
    if (spec.get("direction") or "forward") == "reverse":
        a, b = b, a
    row = store.conn.execute(
        "SELECT id FROM relations WHERE src_id=? AND dst_id=? AND rel=?", (a, b, spec["relationship_type"])
    ).fetchone()
    if row is None:
        raise AuthoringError(f"no relationship {a} -[{spec['relationship_type']}]-> {b}")
    return row[0]


def _relation_op(
    store: Store, operation: str, spec: dict[str, Any], *, strict: bool = False, registered: list[str] | None = None
) -> dict[str, Any]:
    if operation == "create":
        rid = _create_relation(store, spec, strict=strict, registered=registered)
        return {"relationship_id": rid, "operation": operation, "status": "success"}
    rid = _relation_id(store, spec)
    if operation == "delete":
        store.execute("DELETE FROM relations WHERE id=?", (rid,))
        return {"relationship_id": rid, "operation": operation, "status": "success"}
    src, dst, rel, strength, meta = store.conn.execute(
        "SELECT src_id, dst_id, rel, strength, meta FROM relations WHERE id=?", (rid,)
    ).fetchone()
    new_rel = spec.get("relationship_type") or rel
    if new_rel != rel:
        _ensure_type(store, new_rel, strict, registered)
    new_strength = spec.get("relevance_strength") or strength
    if new_strength not in RELEVANCE:
        raise AuthoringError(f"relevance_strength must be weak, medium or strong, not {new_strength!r}")
    props = spec.get("properties")
    if props is not None and not isinstance(props, dict):
        raise AuthoringError("properties must be an object")
    new_meta = {**(loads(meta, {}) or {}), **(props or {})}
    # An edited edge is the author's now: re-ingest must not collect it.
    store.execute(
        "UPDATE relations SET rel=?, strength=?, meta=?, origin='manual' WHERE id=?",
        (new_rel, new_strength, dumps(new_meta), rid),
    )
    return {"relationship_id": rid, "operation": operation, "status": "success"}


# -- paths ---------------------------------------------------------------------------------------------


class _Graph:
    """Edges read on demand, both ways, with their strengths."""

    def __init__(self, store: Store):
        self.store = store
        self.weights = _weights(store)
        self._adj: dict[int, list[tuple]] = {}

    def edges(self, node_id: int) -> list[tuple]:
        """(next node, relation id, type, forward, edge strength, src, dst, meta) for every edge of ``node_id``."""
        if node_id not in self._adj:
            out = []
            for rid, s, d, rel, strength, meta in self.store.query(
                "SELECT id, src_id, dst_id, rel, strength, meta FROM relations WHERE src_id=?1 OR dst_id=?1 ORDER BY id",
                (node_id,),
            ):
                w = self.weights.get(rel, UNKNOWN_DIRECTIONALITY)
                if s == node_id and d != node_id:
                    out.append((d, rid, rel, True, edge_strength(strength, w, True), s, d, meta))
                if d == node_id and s != node_id:
                    out.append((s, rid, rel, False, edge_strength(strength, w, False), s, d, meta))
            self._adj[node_id] = out
        return self._adj[node_id]


def _distances_to(store: Store, target: int, max_depth: int) -> tuple[dict[int, int], bool]:
    """Each node's distance to ``target`` (at most MAX_VISITED nodes), and whether that cap cut it."""
    from kgr.store.bfs import bfs

    rows = bfs(
        store.conn, target, max_depth=max_depth, direction="both", max_nodes=MAX_VISITED + 1, check=store.check_deadline
    )
    return {n: d for n, _, d in rows[:MAX_VISITED]}, len(rows) > MAX_VISITED


def find_paths(
    store: Store,
    source: Any,
    target: Any,
    *,
    max_length: int = MAX_PATH_LENGTH,
    max_paths: int = MAX_PATHS_PER_PAIR,
    min_strength: float = MIN_PATH_STRENGTH,
    max_expansions: int = MAX_EXPANSIONS,
) -> dict[str, Any]:
    """The strongest simple paths from ``source`` to ``target`` (edges walked either way), at most
    ``max_length`` long and at least ``min_strength`` strong, each with a narrative; plus a summary."""
    if not 1 <= max_length <= 8:
        raise AuthoringError("max_path_length must be between 1 and 8")
    src, dst = resolve_node(store, source), resolve_node(store, target)
    g = _Graph(store)
    dist, truncated = _distances_to(store, dst["id"], max_length)
    found: list[tuple[float, list[int], list[tuple]]] = []
    expansions = 0

    def walk(nid: int, raw: float, nodes: list[int], steps: list[tuple]) -> None:
        nonlocal expansions, truncated
        depth = len(steps)
        if nid == dst["id"] and depth:
            if raw / depth >= min_strength - 1e-12:
                found.append((raw / depth, list(nodes), list(steps)))
            return
        if depth >= max_length:
            return
        for edge in g.edges(nid):
            nxt, strength = edge[0], edge[4]
            if nxt in nodes or dist.get(nxt, max_length + 1) > max_length - depth - 1:
                continue
            # every edge weighs at most 1, so a path through here is at most raw * s / (depth + 1) strong
            if raw * strength / (depth + 1) < min_strength - 1e-12:
                continue
            expansions += 1
            if expansions > max_expansions:
                truncated = True
                return
            if expansions % DEADLINE_EVERY == 0:
                store.check_deadline()
            nodes.append(nxt)
            steps.append(edge)
            walk(nxt, raw * strength, nodes, steps)
            nodes.pop()
            steps.pop()

    if src["id"] != dst["id"]:
        walk(src["id"], 1.0, [src["id"]], [])
    found.sort(key=lambda p: (-p[0], len(p[2]), p[1]))
    names = {}
    ids = {i for _, ns, _ in found[:max_paths] for i in ns}
    if ids:
        names = dict(
            store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(ids))})", sorted(ids))
        )
    paths = []
    for i, (_, ns, steps) in enumerate(found[:max_paths], 1):
        rels = [
            {
                "type": rel,
                "direction": "forward" if fwd else "backward",
                "edge_strength": round(s, 6),
                "source": a,
                "target": b,
                "relationship_id": rid,
                "properties": loads(meta, {}) or {},
            }
            for _, rid, rel, fwd, s, a, b, meta in steps
        ]
        breakdown = path_strength([r["edge_strength"] for r in rels])
        paths.append(
            {
                "path_id": i,
                "length": len(steps),
                "strength": breakdown["final_strength"],
                "nodes": [{"id": n, "name": names.get(n)} for n in ns],
                "relationships": rels,
                "narrative": narrative(ns, rels, names, breakdown["final_strength"]),
                "strength_breakdown": breakdown,
            }
        )
    strengths = [p["strength"] for p in paths]
    return {
        "source_node_id": src["id"],
        "target_node_id": dst["id"],
        "source_name": src["name"],
        "target_name": dst["name"],
        "paths": paths,
        "summary": {
            "total_paths_found": len(found),
            "paths_returned": len(paths),
            "strongest_path_strength": max(strengths, default=0.0),
            "average_path_strength": round(sum(strengths) / len(strengths), 6) if strengths else 0.0,
            "relationship_types_used": sorted({r["type"] for p in paths for r in p["relationships"]}),
            "truncated": truncated,
        },
    }


def _words(rel: str) -> str:
    return rel.replace("_", " ").lower()


def narrative(nodes: list[int], rels: list[dict[str, Any]], names: dict[int, str], strength: float) -> str:
    """One sentence per path: each hop said in the relation's own direction."""
    parts = []
    for r in rels:
        a, b = names.get(r["source"], str(r["source"])), names.get(r["target"], str(r["target"]))
        parts.append(f"{a} {_words(r['type'])} {b}")
    first, last = names.get(nodes[0], str(nodes[0])), names.get(nodes[-1], str(nodes[-1]))
    hops = len(rels)
    if hops == 1:
        lead = f"{first} connects directly to {last}"
    else:
        lead = f"{first} reaches {last} in {hops} steps"
    weakest = min(rels, key=lambda r: r["edge_strength"])
    return (
        f"{lead}: "
        + "; ".join(parts)
        + f". Path strength {strength:.3f}"
        + (f" (weakest link: {_words(weakest['type'])}, {weakest['edge_strength']:.2f})." if hops > 1 else ".")
    )


def find_relationship_paths(
    store: Store,
    pairs: Iterable[dict[str, Any]],
    *,
    max_path_length: int = MAX_PATH_LENGTH,
    max_paths_per_pair: int = MAX_PATHS_PER_PAIR,
    min_path_strength: float = MIN_PATH_STRENGTH,
) -> dict[str, Any]:
    """Paths for each pair; a pair whose node is unknown reports its error in place."""
    out = []
    for pair in pairs:
        try:
            out.append(
                find_paths(
                    store,
                    pair["source_node_id"],
                    pair["target_node_id"],
                    max_length=max_path_length,
                    max_paths=max_paths_per_pair,
                    min_strength=min_path_strength,
                )
            )
        except KgrError as exc:
            out.append(
                {
                    "source_node_id": pair.get("source_node_id"),
                    "target_node_id": pair.get("target_node_id"),
                    "error": exc.message,
                    "paths": [],
                    "summary": {
                        "total_paths_found": 0,
                        "paths_returned": 0,
                        "strongest_path_strength": 0.0,
                        "average_path_strength": 0.0,
                        "relationship_types_used": [],
                    },
                }
            )
    return {"path_results": out}


def shortest_paths(
    store: Store, source: Any, target: Any, *, max_hops: int = 4, rels: list[str] | None = None, limit: int = 5
) -> dict[str, Any]:
    """The shortest typed paths between two entities (:func:`kgr.retrieval.entities.paths`), each
    with the strength :func:`find_paths` gives a path (relevance x directional weight per edge,
    divided by the length) in ``strengths``: what `kgr path` shows."""
    from kgr.retrieval import entities

    info = entities.paths(store, source, target, max_hops=max_hops, rels=rels, limit=limit)
    info["strengths"] = [step_strengths(store, p) for p in info["paths"]]
    return info


def step_strengths(store: Store, steps: list[dict[str, Any]]) -> dict[str, float]:
    """The strength breakdown of a path given as `entities.paths` steps (from, rel, to, forward)."""
    weights = _weights(store)
    edge = []
    for s in steps:
        relevance = store.scalar(
            "SELECT strength FROM relations WHERE src_id=? AND dst_id=? AND rel=?", (s["from"], s["to"], s["rel"])
        )
        edge.append(edge_strength(relevance, weights.get(s["rel"], UNKNOWN_DIRECTIONALITY), s["forward"]))
    return path_strength(edge)


# -- neighbourhoods ----------------------------------------------------------------------------------------


def explore_neighborhoods(
    store: Store,
    search_terms: list[str],
    *,
    search_strategy: str = "text",
    max_results_per_term: int = 3,
    neighborhood_depth: int = 2,
    include_relationship_types: bool = True,
    include_templates: bool = True,
    embed_query=None,
    max_nearby: int = 50,
) -> dict[str, Any]:
    """What the graph already holds around each term (seed 002's shape), with recommendations for
    where new information would attach, each with the reason it was made."""
    from collections import Counter

    from kgr.retrieval.entities import lookup
    from kgr.store.bfs import bfs

    neighborhoods: dict[str, Any] = {}
    parent_votes: Counter = Counter()
    parent_why: dict[int, list[str]] = {}
    type_votes: Counter = Counter()
    missing: list[dict[str, Any]] = []
    for term in search_terms:
        store.check_deadline()
        hits = _search(store, term, search_strategy, max_results_per_term, embed_query, lookup)
        primary, rels, nearby, rtypes, tmpls = [], [], [], Counter(), Counter()
        seen_nearby: set[int] = set()
        # Each nearby node's path runs up the parents of the one walk that reached it: the walks from
        # two primary nodes near each other make each the other's parent, so the parents of
        # different walks must never be mixed (that chain looped forever).
        parents: dict[int, dict[int, int | None]] = {}
        for eid, score in hits:
            store.check_deadline()
            n = node(store, eid)
            primary.append(
                {
                    "id": eid,
                    "name": n["name"],
                    "type": n["type"],
                    "summary": n["summary"],
                    "similarity_score": round(score, 4),
                }
            )
            tmpls[_template_name(store, n)] += 1
            for rid, s, d, rel, strength, meta, sname, tname in store.query(
                "SELECT r.id, r.src_id, r.dst_id, r.rel, r.strength, r.meta, a.name, b.name FROM relations r "
                "JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id "
                "WHERE r.src_id = ?1 OR r.dst_id = ?1 ORDER BY r.id LIMIT 100",
                (eid,),
            ):
                rels.append(
                    {
                        "type": rel,
                        "source": s,
                        "target": d,
                        "source_name": sname,
                        "target_name": tname,
                        "relationship_id": rid,
                        "properties": {**(loads(meta, {}) or {}), "relevance_strength": strength},
                    }
                )
                rtypes[rel] += 1
                if s == eid and rel in ("part_of", "located_in", "owned_by", "CHILD_OF"):
                    parent_votes[d] += score
                    parent_why.setdefault(d, []).append(f"{n['name']} {_words(rel)} it")
            # Rows come in (distance, id) order and the loop below keeps at most max_nearby of them
            # after skipping the root and those already kept: max_nearby + 1 rows give the same nodes.
            rows = bfs(
                store.conn,
                eid,
                max_depth=neighborhood_depth,
                direction="both",
                max_nodes=max_nearby + 1,
                check=store.check_deadline,
            )
            parents[eid] = {nid: parent for nid, parent, _ in rows}
            for nid, parent, dist in rows:
                if dist == 0 or nid in seen_nearby or len(nearby) >= max_nearby:
                    continue
                seen_nearby.add(nid)
                nearby.append({"id": nid, "distance": dist, "walk": eid})
        names: dict[int, str] = {}
        on_paths = sorted({p for walk in parents.values() for p in walk})
        for i in range(0, len(on_paths), 500):
            part = on_paths[i : i + 500]
            names.update(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(part))})", part))
        for x in nearby:
            x["name"] = names.get(x["id"])
            x["path"] = " -> ".join(names.get(i) or str(i) for i in _walk_path(parents[x.pop("walk")], x["id"]))
        entry: dict[str, Any] = {"primary_nodes": primary, "relationships": rels, "nearby_nodes": nearby}
        if include_relationship_types:
            entry["common_relationship_types"] = [r for r, _ in rtypes.most_common(5)]
        if include_templates:
            entry["templates_in_use"] = sorted(tmpls)
        neighborhoods[term] = entry
        type_votes.update(rtypes)
        if not primary:
            missing.append({"name": term, "reason": f"no node matches {term!r}: it may be a node to create"})
    total = sum(parent_votes.values()) or 1.0
    suggested_parents = []
    for pid, votes in parent_votes.most_common(5):
        suggested_parents.append(
            {
                "node_id": pid,
                "node_name": store.scalar("SELECT name FROM entities WHERE id=?", (pid,)),
                "confidence": round(min(1.0, votes / total), 4),
                "reason": "found nodes point to it as their container or owner: " + "; ".join(parent_why[pid][:3]),
            }
        )
    known = {t["name"]: t for t in relation_types(store)}
    type_reasons = {}
    for rel, count in type_votes.most_common(5):
        desc = (known.get(rel) or {}).get("description")
        type_reasons[rel] = f"used {count} time{'s' if count != 1 else ''} around the nodes found" + (
            f"; it means: {desc}" if desc else ("" if rel in known else "; not a registered relation type")
        )
    # Terms found far apart (no path within twice the depth) probably lack a node between them.
    found = [(t, neighborhoods[t]["primary_nodes"][0]) for t in search_terms if neighborhoods[t]["primary_nodes"]]
    reach, cut = {}, set()
    for t, p in found:
        store.check_deadline()
        rows = bfs(
            store.conn,
            p["id"],
            max_depth=neighborhood_depth,
            direction="both",
            max_nodes=MAX_VISITED + 1,
            check=store.check_deadline,
        )
        reach[t] = {nid for nid, _, _ in rows[:MAX_VISITED]}
        if len(rows) > MAX_VISITED:
            cut.add(t)  # a reach cut short cannot show that two terms are apart
    for i, (t1, p1) in enumerate(found):
        for t2, p2 in found[i + 1 :]:
            if p1["id"] != p2["id"] and t1 not in cut and t2 not in cut and not (reach[t1] & reach[t2]):
                missing.append(
                    {
                        "name": f"{p1['name']} … {p2['name']}",
                        "reason": f"{p1['name']} and {p2['name']} are not connected within "
                        f"{2 * neighborhood_depth} hops: a node linking them may be missing",
                    }
                )
    return {
        "neighborhoods": neighborhoods,
        "recommendations": {
            "suggested_parents": suggested_parents,
            "suggested_relationship_types": list(type_reasons),
            "missing_intermediate_nodes": [m["name"] for m in missing],
            "explanations": {
                "suggested_relationship_types": type_reasons,
                "missing_intermediate_nodes": {m["name"]: m["reason"] for m in missing},
            },
        },
    }


def _walk_path(parents: dict[int, int | None], nid: int) -> list[int]:
    """The ids from a walk's root to ``nid`` along that walk's parents (each once, so it ends)."""
    path = [nid]
    while (p := parents.get(path[-1])) is not None and p not in path:
        path.append(p)
    return path[::-1]


def _template_name(store: Store, n: dict[str, Any]) -> str:
    from kgr.authoring.templates import template_for

    return template_for(store, n)["name"]


def _search(store: Store, term: str, strategy: str, limit: int, embed_query, lookup) -> list[tuple[int, float]]:
    if strategy not in ("text", "vector", "combined"):
        raise AuthoringError(f"search_strategy must be text, vector or combined, not {strategy!r}")
    scores: dict[int, float] = {}
    if strategy in ("text", "combined"):
        for h in lookup(store, term, limit=limit):
            scores[h["id"]] = max(scores.get(h["id"], 0.0), h["score"])
    if strategy in ("vector", "combined"):
        if embed_query is None:
            if strategy == "vector":
                raise AuthoringError("this knowledge base has no vectors", hint="use search_strategy text")
        else:
            from kgr.store import vectors

            for eid, sim in vectors.knn(store, vectors.ENTITY, embed_query(term), limit, in_memory=True):
                scores[eid] = max(scores.get(eid, 0.0), max(0.0, float(sim)))
    best = sorted(scores.items(), key=lambda kv: -kv[1])[:limit]
    return best
