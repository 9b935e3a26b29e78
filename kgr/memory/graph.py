"""The memory graph: the reference MCP memory server's model (seed 001) on kgr's database.

The reference server (npm ``@modelcontextprotocol/server-memory``) keeps a graph of named
entities (with a type and a list of observations) and typed relations between them in one
JSONL file that it rewrites on every change. Here the same graph lives in the knowledge
base, so retrieval sees it:

* an entity is a row of ``entities`` with ``origin='manual'``, ``type`` = its entityType
  and ``key`` = ``memory:<name>`` (names are unique, as in the reference, and never collide
  with the keys of extracted entities);
* an observation is a row of ``observations`` (``source='manual'``), in insertion order;
  deleting one closes its validity (``valid_until_ms``) unless asked to delete it for good,
  so its history stays queryable; reads show the currently valid ones, like the reference;
* a relation is a row of ``relations`` with ``origin='manual'``; a new relation type is
  added to ``relation_types``.

Document ingest never collects manual entities or relations (:mod:`kgr.store.graph_rows`), and
every write here is one ``BEGIN IMMEDIATE`` transaction, so two processes writing the same
database each see the other's rows and lose nothing (the reference's read-modify-write of
its file loses one of two concurrent writes).

Semantics follow the reference's ``dist/index.js`` (version pinned in ``.ci/run``):
duplicates are skipped (an entity by name, a relation by from/to/type, an observation by
content); ``add_observations`` fails for a missing entity and then changes nothing;
``delete_entities`` removes their relations; ``search_nodes`` is a case-insensitive
substring match over names, types and observations (JavaScript ``toLowerCase``
semantics), and it and ``open_nodes`` return the relations that touch a returned entity.
Two deliberate differences: a relation whose end is not an entity is refused (the
reference stores it dangling), and two entities of one name in one call make one.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from typing import Any, Iterable, Iterator, Sequence

import orjson

from kgr.errors import BadRecord, EntityNotFound, UsageError
from kgr.store import Store, now_ms

KEY_PREFIX = "memory:"
# Memory entities are the key range [memory:, memory;) - ';' follows ':' - so the unique
# index on entities.key serves every memory read.
IN_MEMORY = "e.key >= 'memory:' AND e.key < 'memory;'"
VALID = "(o.valid_until_ms IS NULL OR o.valid_until_ms > ?)"
ORIGIN = "manual"
NEW_RELATION_TYPE = "created by the memory tools (create_relations or kgr import)"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_CHUNK = 500


def _not_found(name: str) -> EntityNotFound:
    """A memory tool named an entity the memory graph does not hold."""
    # the reference's own message, so a client matching on it still works
    return EntityNotFound(f"Entity with name {name} not found", name=name)


def key(name: str) -> str:
    return KEY_PREFIX + name


# -- case-insensitive substring, as JavaScript's toLowerCase().includes() ----------------------

# Characters outside ASCII whose lower case contains an ASCII letter: the only way a
# non-ASCII text can match an ASCII query other than through its ASCII letters.
_FOLDS_TO_ASCII = ("\u0130", "\u212a")


def _icontains(text: str | None, needle_lower: str | None) -> int:
    if text is None or needle_lower is None:
        return 0
    return int(needle_lower in text.lower())


# Connections that have kgr_icontains: registering a function again would expire every
# statement the connection has prepared (SQLite re-prepares them all on their next use).
_HAVE_FUNCTIONS: weakref.WeakSet = weakref.WeakSet()


def ensure_functions(conn) -> None:
    """Register ``kgr_icontains(text, lowered_query)`` on an apsw connection, once (call before a search)."""
    if conn not in _HAVE_FUNCTIONS:
        conn.createscalarfunction("kgr_icontains", _icontains, 2, deterministic=True)
        _HAVE_FUNCTIONS.add(conn)


def _match_sql(column: str) -> tuple[str, int]:
    """SQL for "column contains the query, case-insensitively", and how many parameters it takes.

    SQLite's lower() folds ASCII only, which is exact for an ASCII query except where a
    text holds one of :data:`_FOLDS_TO_ASCII`; those rows (and every row, for a non-ASCII
    query) are checked in Python with str.lower (Unicode's default case mapping, as
    JavaScript's). CASE, not AND/OR: SQLite computes both sides of an AND whose value is
    used, and the Python check is the costly side."""
    folds = " OR ".join(f"instr({column}, '{c}')" for c in _FOLDS_TO_ASCII)
    return (
        f"(CASE WHEN NOT ?1 THEN kgr_icontains({column}, ?2) WHEN instr(lower({column}), ?2) > 0 THEN 1 "
        f"WHEN {folds} THEN kgr_icontains({column}, ?2) ELSE 0 END)"
    ), 0


# -- reads -------------------------------------------------------------------------------------------


def _observations(store: Store, ids: Sequence[int], at: int) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {i: [] for i in ids}
    for i in range(0, len(ids), _CHUNK):
        part = list(ids[i : i + _CHUNK])
        for eid, content in store.conn.execute(
            f"SELECT o.entity_id, o.content FROM observations o WHERE o.entity_id IN ({','.join('?' * len(part))}) "
            f"AND {VALID} ORDER BY o.id",
            (*part, at),
        ):
            out[eid].append(content)
    return out


# The JSON of entities and relations is written by SQLite (json_quote, json_group_array,
# json_object) and parsed once per page by orjson: no Python work per observation. ?1 is a
# JSON array of entity ids (one cached statement whatever their number), ?2 the time of the read.
_ENTITY_JSON = (
    """SELECT e.id, '{"name":' || json_quote(e.name) || ',"entityType":' || json_quote(e.type) """
    """|| ',"observations":' || (SELECT json_group_array(o.content ORDER BY o.id) FROM observations o """
    """WHERE o.entity_id = e.id AND (o.valid_until_ms IS NULL OR o.valid_until_ms > ?2)) || '}' """
    "FROM entities e WHERE e.id IN (SELECT value FROM json_each(?1))"
)
_RELATION_JSON = (
    "SELECT r.id, r.src_id, r.dst_id, json_object('from', a.name, 'to', b.name, 'relationType', r.rel) "
    "FROM relations r JOIN entities a ON a.id = r.src_id JOIN entities b ON b.id = r.dst_id "
    "WHERE r.{end} IN (SELECT value FROM json_each(?1)) AND r.origin = 'manual' "
    "AND a.key >= 'memory:' AND a.key < 'memory;' AND b.key >= 'memory:' AND b.key < 'memory;'"
)
# Entities whose JSON is written by the first query of a page with a byte budget; the next
# ones ask for as many as the bytes left should hold, so a page the budget ends early computes
# few entities it does not return.
_PAGE_CHUNK = 100


def _nbytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _ids(ids: Sequence[int]) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def _relations_touching(store: Store, ids: Sequence[int], *, from_only: bool = False) -> list[tuple[int, int, str]]:
    """(from id, to id, JSON) of the memory relations with an end (with from_only, the start)
    among ``ids``, by insertion."""
    found: dict[int, tuple[int, int, str]] = {}
    for i in range(0, len(ids), MAX_LIMIT):
        part = _ids(ids[i : i + MAX_LIMIT])
        for end in ("src_id",) if from_only else ("src_id", "dst_id"):  # one indexed lookup per end
            for rid, src, dst, text in store.conn.execute(_RELATION_JSON.format(end=end), (part,)):
                found[rid] = (src, dst, text)
    return [found[rid] for rid in sorted(found)]


def _graph(
    store: Store,
    rows: Iterator[tuple[int, str, str]],
    *,
    limit: int,
    names_only: bool,
    from_only: bool,
    at: int,
    max_bytes: int | None = None,
) -> tuple[dict[str, Any], str | None]:
    """A page of the entities ``rows`` yields (id, name, type; in id order, drawn only as far as
    needed) and the cursor after it (None after the last): up to ``limit`` of them and, with
    ``max_bytes``, the longest prefix whose JSON fits (at least one entity), so a page is
    shortened, never cut inside."""
    if names_only:
        got = list(itertools.islice(rows, limit + 1))
        names = [name for _, name, _ in got[:limit]]
        keep = len(names) if max_bytes is None else _fits([len(orjson.dumps(n)) + 1 for n in names], max_bytes)
        return {"names": names[:keep]}, _cursor(got, keep, limit)
    # the entities' JSON, a chunk at a time, until their JSON alone passes the budget: no entity
    # after that one can be on the page; each chunk is sized from the bytes an entity took so far
    ids: list[int] = []
    texts: list[str] = []
    sizes: list[int] = []
    total = 0
    more = False
    while True:
        want = limit - len(ids)
        if max_bytes is not None:
            want = min(want, (max_bytes - total) * len(ids) // total + 2 if ids else _PAGE_CHUNK)
        part = [r[0] for r in itertools.islice(rows, want)]
        if not part:
            break
        got = dict(store.conn.execute(_ENTITY_JSON, (_ids(part), at)))
        for eid in part:
            ids.append(eid)
            texts.append(got[eid])
            sizes.append(_nbytes(got[eid]) + 1)
            total += sizes[-1]
        if max_bytes is not None and total > max_bytes:
            more = True
            break
        if len(ids) == limit:
            more = next(rows, None) is not None
            break
    relations = _relations_touching(store, ids, from_only=from_only)
    rel_sizes = [_nbytes(t) + 1 for _, _, t in relations]
    keep = len(texts)
    # {"entities":[...],"relations":[...]}: 30 bytes around the two lists, one comma fewer than items in each
    if max_bytes is not None and 30 + max(total - 1, 0) + max(sum(rel_sizes) - 1, 0) > max_bytes:
        # each entity's share: its JSON and that of the relations it is the first end of on
        # this page (a relation comes with the first of its ends that is kept)
        per = list(sizes)
        index = {eid: i for i, eid in enumerate(ids)}
        for (src, dst, _), size in zip(relations, rel_sizes):
            ends = [index[x] for x in ((src,) if from_only else (src, dst)) if x in index]
            if ends:
                per[min(ends)] += size
        keep = _fits(per, max_bytes - 40)  # 40: the object around the two lists
        kept = set(ids[:keep])
        relations = [r for r in relations if r[0] in kept or (not from_only and r[1] in kept)]
    out = {
        "entities": orjson.loads("[" + ",".join(texts[:keep]) + "]"),
        "relations": orjson.loads("[" + ",".join(t for _, _, t in relations) + "]"),
    }
    return out, (str(ids[keep - 1]) if keep < len(ids) or more else None)


def _fits(sizes: Sequence[int], budget: int) -> int:
    total = 0
    for n, size in enumerate(sizes):
        total += size
        if total > budget:
            return max(1, n)
    return len(sizes)


def _page_args(limit: int | None, cursor: str | None) -> tuple[int, int]:
    limit = DEFAULT_LIMIT if limit is None else int(limit)
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"limit must be between 1 and {MAX_LIMIT}")
    after = 0
    if cursor:
        try:
            after = int(cursor)
        except ValueError:
            raise UsageError(
                f"not a cursor from this server: {cursor!r}",
                hint="pass the nextCursor of the previous page, or none for the first",
            ) from None
    return limit, after


def _cursor(rows: list[tuple[int, str, str]], kept: int, limit: int) -> str | None:
    """The cursor after the ``kept`` first of ``rows`` (drawn with one more than ``limit``)."""
    if kept < min(len(rows), limit) or len(rows) > limit:
        return str(rows[kept - 1][0])
    return None


def read_graph(
    store: Store,
    *,
    limit: int | None = None,
    cursor: str | None = None,
    names_only: bool = False,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """One page of the memory graph, entities in insertion order.

    A page holds up to ``limit`` entities and the relations that start at them, so the pages
    together hold every entity and every relation once; with ``max_bytes``, fewer when their
    JSON would not fit. ``nextCursor`` is None on the last page.
    """
    limit, after = _page_args(limit, cursor)
    with _read(store):
        at = now_ms()
        rows = store.conn.execute(
            f"SELECT e.id, e.name, e.type FROM {_in_order(store)} WHERE {IN_MEMORY} AND e.id > ? ORDER BY e.id LIMIT ?",
            (after, limit + 1),
        )
        try:
            out, nxt = _graph(
                store, rows, limit=limit, names_only=names_only, from_only=True, at=at, max_bytes=max_bytes
            )
        finally:
            rows.close()  # a page draws only the rows it needs
    out["nextCursor"] = nxt
    return out


def search_nodes(
    store: Store,
    query: str,
    *,
    limit: int | None = None,
    cursor: str | None = None,
    names_only: bool = False,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Entities whose name, type or a current observation contains ``query`` (any case), a page
    at a time in insertion order, with the relations that touch them."""
    limit, after = _page_args(limit, cursor)
    needle = query.lower()
    ascii_q = int(needle.isascii())
    name_m, _ = _match_sql("e.name")
    type_m, _ = _match_sql("e.type")
    obs_m, _ = _match_sql("o.content")
    ensure_functions(store.conn)
    with _read(store):
        at = now_ms()
        params: tuple = (ascii_q, needle, after, at, limit + 1)
        exact = (
            f"({name_m} OR {type_m} OR EXISTS (SELECT 1 FROM observations o WHERE o.entity_id = e.id "
            f"AND (o.valid_until_ms IS NULL OR o.valid_until_ms > ?4) AND {obs_m}))"
        )
        if ascii_q and len(needle) >= 3 and _has_trigram(store):
            # candidates from the trigram indexes (ASCII case folding) and the rows they cannot
            # fold, merged in id order, each checked exactly, until the page is full: the
            # entity index streams its matches in order, so a page of a type shared by
            # thousands reads the page, not them all (CROSS JOIN: the candidates drive)
            sql = (
                f"SELECT e.id, e.name, e.type FROM ("
                f"SELECT rowid AS id FROM entities_trigram WHERE entities_trigram MATCH ?6 AND rowid > ?3 "
                f"UNION SELECT entity_id FROM entities_folding WHERE entity_id > ?3 "
                f"UNION SELECT o.entity_id FROM observations o WHERE o.id IN ("
                f"SELECT rowid FROM observations_trigram WHERE observations_trigram MATCH ?6 "
                f"UNION ALL SELECT observation_id FROM observations_folding) AND o.entity_id > ?3 ORDER BY 1"
                f") AS c CROSS JOIN entities e ON e.id = c.id WHERE {IN_MEMORY} AND {exact} ORDER BY c.id LIMIT ?5"
            )
            params += ('"' + needle.replace('"', '""') + '"',)
        else:
            sql = (
                f"SELECT e.id, e.name, e.type FROM {_in_order(store)} WHERE {IN_MEMORY} AND e.id > ?3 AND {exact} "
                f"ORDER BY e.id LIMIT ?5"
            )
        rows = store.conn.execute(sql, params)
        try:
            out, nxt = _graph(
                store, rows, limit=limit, names_only=names_only, from_only=False, at=at, max_bytes=max_bytes
            )
        finally:
            rows.close()  # a page draws only the rows it needs
    out["nextCursor"] = nxt
    return out


def _in_order(store: Store) -> str:
    """The memory entities, to walk in id order: through migration m009_memory_pages's index (the
    planner would rather sort the key index), or by id on a database opened read-only before it."""
    if _has(store, "idx_entities_memory_pages"):
        return "entities e INDEXED BY idx_entities_memory_pages"
    return "entities e NOT INDEXED"


def _has(store: Store, name: str) -> bool:
    return store.conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def _has_trigram(store: Store) -> bool:
    """Whether the database has migration m002_memory's index (a read-only open of an older
    database does not migrate it: search then scans)."""
    return _has(store, "entities_folding")


def open_nodes(store: Store, names: Sequence[str]) -> dict[str, Any]:
    """The named entities (in insertion order; unknown names are ignored, as in the reference)
    and the relations that touch them."""
    with _read(store):
        at = now_ms()
        rows: list[tuple[int, str, str]] = []
        keys = list(dict.fromkeys(key(n) for n in names))
        for i in range(0, len(keys), _CHUNK):
            part = keys[i : i + _CHUNK]
            rows += store.conn.execute(
                f"SELECT e.id, e.name, e.type FROM entities e WHERE e.key IN ({','.join('?' * len(part))})", part
            ).fetchall()
        rows.sort()
        return _graph(store, iter(rows), limit=max(len(rows), 1), names_only=False, from_only=False, at=at)[0]


@contextlib.contextmanager
def _read(store: Store) -> Iterator[None]:
    """One read snapshot (entities, observations and relations from the same state)."""
    conn = store.conn
    if not conn.getautocommit():  # already inside a transaction (a write job, an export)
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if not conn.getautocommit():
            conn.execute("COMMIT")


# -- writes: each one BEGIN IMMEDIATE transaction ---------------------------------------------------


def _entity_ids(conn, names: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    names = list(dict.fromkeys(names))
    for i in range(0, len(names), _CHUNK):
        part = names[i : i + _CHUNK]
        for k, eid in conn.execute(
            f"SELECT key, id FROM entities WHERE key IN ({','.join('?' * len(part))})", [key(n) for n in part]
        ):
            out[k[len(KEY_PREFIX) :]] = eid
    return out


def _norm(name: str) -> str:
    from kgr.stages.link import norm

    return norm(name)


def _insert_entities(conn, entities: Sequence[dict], at: int) -> list[dict]:
    existing = _entity_ids(conn, (e["name"] for e in entities))
    created = []
    for ent in entities:
        name, typ = ent["name"], ent["entityType"]
        if name in existing:
            continue
        conn.execute(
            "INSERT INTO entities(key, name, type, norm, origin, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key(name), name, typ, _norm(name), ORIGIN, at, at),
        )
        eid = conn.last_insert_rowid()
        existing[name] = eid
        conn.executemany(
            "INSERT INTO observations(entity_id, content, source, valid_from_ms, created_ms) VALUES (?, ?, 'manual', ?, ?)",
            [(eid, o, at, at) for o in ent.get("observations") or []],
        )
        created.append({"name": name, "entityType": typ, "observations": list(ent.get("observations") or [])})
    return created


def create_entities(store: Store, entities: Sequence[dict]) -> list[dict]:
    """Create the entities whose names are new (with their observations); return those created."""
    entities = [_check_entity(e) for e in entities]
    with store.write() as conn:
        return _insert_entities(conn, entities, now_ms())


def _insert_relations(conn, relations: Sequence[dict], at: int, *, line_of: Sequence[int] | None = None) -> list[dict]:
    ids = _entity_ids(conn, [n for r in relations for n in (r["from"], r["to"])])
    created = []
    known_types = {row[0] for row in conn.execute("SELECT name FROM relation_types")}
    for n, rel in enumerate(relations):
        for end in ("from", "to"):
            if rel[end] not in ids:
                if line_of is not None:
                    raise BadRecord(
                        line_of[n],
                        f"relation {end} {rel[end]!r}: no entity of that name",
                        hint="every relation's ends must be entities of the file",
                    )
                raise _not_found(rel[end])
        src, dst, typ = ids[rel["from"]], ids[rel["to"]], rel["relationType"]
        row = conn.execute(
            "SELECT id, origin FROM relations WHERE src_id=? AND dst_id=? AND rel=?", (src, dst, typ)
        ).fetchone()
        if row is not None and row[1] == ORIGIN:
            continue  # a duplicate: skipped
        if typ not in known_types:
            conn.execute(
                "INSERT OR IGNORE INTO relation_types(name, description) VALUES (?, ?)", (typ, NEW_RELATION_TYPE)
            )
            known_types.add(typ)
        if row is None:
            conn.execute(
                "INSERT INTO relations(src_id, dst_id, rel, confidence, origin, created_ms) VALUES (?, ?, ?, 1.0, ?, ?)",
                (src, dst, typ, ORIGIN, at),
            )
        else:  # an edge extraction found is now also stated by hand: it stays whatever documents say
            conn.execute("UPDATE relations SET origin=?, confidence=1.0 WHERE id=?", (ORIGIN, row[0]))
        created.append({"from": rel["from"], "to": rel["to"], "relationType": typ})
    return created


def create_relations(store: Store, relations: Sequence[dict]) -> list[dict]:
    """Create the relations that are new; return those created. Both ends must be entities."""
    relations = [_check_relation(r) for r in relations]
    with store.write() as conn:
        return _insert_relations(conn, relations, now_ms())


def _current(conn, eid: int, at: int) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            f"SELECT o.content FROM observations o WHERE o.entity_id=? AND {VALID} ORDER BY o.id", (eid, at)
        )
    ]


def add_observations(store: Store, observations: Sequence[dict]) -> list[dict]:
    """Add observations to existing entities, skipping those an entity already has; all or nothing."""
    for o in observations:
        _need_str(o, "entityName")
        _need_strs(o, "contents")
    at = now_ms()
    with store.write() as conn:
        ids = _entity_ids(conn, (o["entityName"] for o in observations))
        results = []
        for o in observations:
            eid = ids.get(o["entityName"])
            if eid is None:
                raise _not_found(o["entityName"])
            have = set(_current(conn, eid, at))
            new = [c for c in o["contents"] if c not in have]  # as the reference: duplicates within one call stay
            conn.executemany(
                "INSERT INTO observations(entity_id, content, source, valid_from_ms, created_ms) VALUES (?, ?, 'manual', ?, ?)",
                [(eid, c, at, at) for c in new],
            )
            if new:
                conn.execute("UPDATE entities SET updated_ms=? WHERE id=?", (at, eid))
            results.append({"entityName": o["entityName"], "addedObservations": new})
        return results


def delete_entities(store: Store, names: Sequence[str]) -> int:
    """Delete the named entities, their observations and every relation touching them; return how many."""
    names = [_str_item(n, "entityNames") for n in names]
    with store.write() as conn:
        ids = _entity_ids(conn, names)
        conn.executemany("DELETE FROM entities WHERE id=?", [(i,) for i in ids.values()])
        return len(ids)


def delete_observations(store: Store, deletions: Sequence[dict], *, hard: bool = False) -> int:
    """Close the validity of the given current observations (``hard``: delete the rows); entities
    that do not exist are skipped, as in the reference. Return how many observations changed."""
    for d in deletions:
        _need_str(d, "entityName")
        _need_strs(d, "observations")
    at = now_ms()
    changed = 0
    with store.write() as conn:
        ids = _entity_ids(conn, (d["entityName"] for d in deletions))
        for d in deletions:
            eid = ids.get(d["entityName"])
            if eid is None or not d["observations"]:
                continue
            contents = list(dict.fromkeys(d["observations"]))
            marks = ",".join("?" * len(contents))
            if hard:
                conn.execute(
                    f"DELETE FROM observations AS o WHERE o.entity_id=? AND o.content IN ({marks})", (eid, *contents)
                )
            else:
                conn.execute(
                    f"UPDATE observations AS o SET valid_until_ms=? WHERE o.entity_id=? AND o.content IN ({marks}) "
                    f"AND {VALID}",
                    (at, eid, *contents, at),
                )
            n = conn.changes()
            if n:
                conn.execute("UPDATE entities SET updated_ms=? WHERE id=?", (at, eid))
            changed += n
    return changed


def delete_relations(store: Store, relations: Sequence[dict]) -> int:
    """Delete the given memory relations (those absent are skipped); return how many."""
    relations = [_check_relation(r) for r in relations]
    n = 0
    with store.write() as conn:
        ids = _entity_ids(conn, [x for r in relations for x in (r["from"], r["to"])])
        for r in relations:
            if r["from"] in ids and r["to"] in ids:
                conn.execute(
                    "DELETE FROM relations WHERE src_id=? AND dst_id=? AND rel=? AND origin='manual'",
                    (ids[r["from"]], ids[r["to"]], r["relationType"]),
                )
                n += conn.changes()
    return n


def observation_history(store: Store, name: str) -> list[dict]:
    """Every observation of an entity, current and closed, with its validity (milliseconds)."""
    with _read(store):
        eid = _entity_ids(store.conn, [name]).get(name)
        if eid is None:
            raise _not_found(name)
        return [
            {"content": c, "valid_from_ms": f, "valid_until_ms": u}
            for c, f, u in store.conn.execute(
                "SELECT content, valid_from_ms, valid_until_ms FROM observations WHERE entity_id=? ORDER BY id", (eid,)
            )
        ]


# -- argument checks (the tools' schemas check these too; the library is also called directly) ------


def _need_str(obj: Any, field: str) -> str:
    if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
        raise UsageError(f'"{field}" must be a string')
    return obj[field]


def _need_strs(obj: dict, field: str) -> list[str]:
    value = obj.get(field)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f'"{field}" must be a list of strings')
    return value


def _str_item(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f'"{field}" must be a list of strings')
    return value


def _check_entity(e: Any) -> dict:
    _need_str(e, "name")
    _need_str(e, "entityType")
    _need_strs(e, "observations")
    return e


def _check_relation(r: Any) -> dict:
    for f in ("from", "to", "relationType"):
        _need_str(r, f)
    return r


# -- the reference's JSONL file -------------------------------------------------------------------------


def _js(value: dict) -> str:
    """JSON as JavaScript's JSON.stringify writes it (no spaces; non-ASCII as is)."""
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def jsonl_lines(store: Store) -> Iterator[str]:
    """The memory graph as the reference's file lines: every entity (with its current
    observations), then every relation, each in insertion order."""
    with _read(store):
        at = now_ms()
        after = 0
        while True:
            rows = store.conn.execute(
                f"SELECT e.id, e.name, e.type FROM {_in_order(store)} WHERE {IN_MEMORY} AND e.id > ? "
                "ORDER BY e.id LIMIT ?",
                (after, _CHUNK),
            ).fetchall()
            if not rows:
                break
            obs = _observations(store, [r[0] for r in rows], at)
            for eid, name, typ in rows:
                yield _js({"type": "entity", "name": name, "entityType": typ, "observations": obs[eid]})
            after = rows[-1][0]
        for a, b, rel in store.conn.execute(
            "SELECT a.name, b.name, r.rel FROM relations r JOIN entities a ON a.id = r.src_id "
            "JOIN entities b ON b.id = r.dst_id WHERE r.origin = 'manual' "
            "AND a.key >= 'memory:' AND a.key < 'memory;' AND b.key >= 'memory:' AND b.key < 'memory;' ORDER BY r.id"
        ):
            yield _js({"type": "relation", "from": a, "to": b, "relationType": rel})


def write_jsonl(store: Store, out) -> dict[str, int]:
    """Write the file the reference would write (lines joined by newlines, none at the end)."""
    counts = {"nodes": 0, "edges": 0}
    first = True
    for line in jsonl_lines(store):
        out.write(line if first else "\n" + line)
        first = False
        counts["edges" if line.startswith('{"type":"relation"') else "nodes"] += 1
    return counts


def parse_jsonl(lines: Iterable[str | bytes]) -> tuple[list[dict], list[dict], list[int]]:
    """Entities and relations of a reference memory file, checked; BadRecord names the line.

    Lines that are blank are skipped and unknown ``type`` values ignored, as the reference's
    loader does; anything else it would misread is refused here."""
    entities: list[dict] = []
    relations: list[dict] = []
    rel_lines: list[int] = []
    for n, raw in enumerate(lines, 1):
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            item = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise BadRecord(n, f"not JSON: {exc}") from None
        if not isinstance(item, dict):
            raise BadRecord(n, "not a JSON object")
        try:
            if item.get("type") == "entity":
                entities.append(_check_entity({k: item.get(k) for k in ("name", "entityType", "observations")}))
            elif item.get("type") == "relation":
                relations.append(_check_relation({k: item.get(k) for k in ("from", "to", "relationType")}))
                rel_lines.append(n)
        except UsageError as exc:
            raise BadRecord(n, exc.message) from None
    return entities, relations, rel_lines


def import_jsonl(store: Store, lines: Iterable[str | bytes]) -> dict[str, int]:
    """Import a reference memory file in one transaction: entities, their observations, relations.

    Entities already present are kept as they are (their observations in the file are added
    when new, as add_observations would); relations already present are skipped. A bad line
    or a relation to a missing entity rolls everything back."""
    entities, relations, rel_lines = parse_jsonl(lines)
    at = now_ms()
    with store.write() as conn:
        created = _insert_entities(conn, entities, at)
        made = {e["name"] for e in created}
        added = 0
        for e in entities:
            if e["name"] in made:
                continue
            eid = _entity_ids(conn, [e["name"]])[e["name"]]
            have = set(_current(conn, eid, at))
            new = [c for c in e["observations"] if c not in have]
            conn.executemany(
                "INSERT INTO observations(entity_id, content, source, valid_from_ms, created_ms) VALUES (?, ?, 'manual', ?, ?)",
                [(eid, c, at, at) for c in new],
            )
            added += len(new)
        rels = _insert_relations(conn, relations, at, line_of=rel_lines)
    return {
        "entities": len(created),
        "observations": sum(len(e["observations"]) for e in created) + added,
        "relations": len(rels),
        "skipped_entities": len(entities) - len(created),
        "skipped_relations": len(relations) - len(rels),
    }
