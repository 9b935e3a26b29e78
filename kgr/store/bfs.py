"""Graph traversal: breadth-first search over the relations, in SQLite.

The bfsvtab loadable extension (vendor/bfsvtab) is used when it is built and loads;
otherwise an equivalent recursive CTE runs. Both give the same rows: every node
reachable from the root within ``max_depth`` hops, once, at its minimum distance,
with ``parent`` = the smallest id among the nodes one hop closer that reach it.

Every traversal is bounded: ``max_nodes`` keeps the first rows in (distance, id) order (whole
levels are walked, so those rows are exactly the uncapped result's first rows), and the Python
walk calls ``check`` (``Store.check_deadline``) between levels so a time budget stops it; SQL
work is stopped by the connection's progress handler.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Callable

# Per connection: the loaded bfsvtab version, or None. Keyed by the connection itself
# (weakly): an id() would be reused by a later connection that never loaded it.
_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def load_bfs(conn) -> str | None:
    """Load bfsvtab into ``conn`` if the built library exists; return its version or None."""
    try:
        return _LOADED[conn]
    except (KeyError, TypeError):  # TypeError: not weakly referenceable, so checked each time
        pass
    version = None
    libs = sorted(Path(__file__).parent.glob("_bfsvtab*.so")) + sorted(Path(__file__).parent.glob("_bfsvtab*.dylib"))
    if libs:
        try:
            conn.enable_load_extension(True)
            conn.load_extension(str(libs[0]), "sqlite3_bfsvtab_init")
            version = conn.execute("SELECT bfsvtab_version()").fetchone()[0]
        except Exception:  # noqa: BLE001 - any failure means: use the CTE
            version = None
        finally:
            try:
                conn.enable_load_extension(False)
            except Exception:  # noqa: BLE001
                pass
    try:
        _LOADED[conn] = version
    except TypeError:
        pass
    return version


def bfs_method(conn) -> str:
    version = load_bfs(conn)
    return f"bfsvtab {version}" if version else "recursive CTE"


def _ident(name: str, what: str) -> str:
    """``name`` quoted as an SQL identifier: a table or column name is never SQL."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"{what} must be a non-empty name, not {name!r}")
    return '"' + name.replace('"', '""') + '"'


def _edge_sql(edges: str, src: str, dst: str, direction: str, rels: list[str] | None) -> tuple[str, list[Any]]:
    # Columns are qualified with the alias: an unknown "name" is then an error, not a string literal.
    table = f"{_ident(edges, 'edges')} AS e"
    src, dst = f"e.{_ident(src, 'src')}", f"e.{_ident(dst, 'dst')}"
    where = ""
    params: list[Any] = []
    if rels:
        where = f" WHERE e.rel IN ({','.join('?' * len(rels))})"
        params = list(rels)
    out = f"SELECT {src} AS a, {dst} AS b FROM {table}{where}"
    if direction == "in":
        out = f"SELECT {dst} AS a, {src} AS b FROM {table}{where}"
    elif direction == "both":
        out = f"{out} UNION ALL SELECT {dst} AS a, {src} AS b FROM {table}{where}"
        params = params * 2
    return out, params


def bfs_cte(
    conn,
    root: int,
    *,
    max_depth: int | None = None,
    edges: str = "graph_edges",
    src: str = "src",
    dst: str = "dst",
    rels: list[str] | None = None,
    direction: str = "out",
    max_nodes: int | None = None,
    check: Callable[[], None] | None = None,
) -> list[tuple[int, int | None, int]]:
    edge_sql, params = _edge_sql(edges, src, dst, direction, rels)
    depth = 1_000_000 if max_depth is None else max_depth
    # The recursive CTE walks level by level; the outer query keeps each node's minimum
    # distance and, as parent, the smallest id at the level before.
    sql = f"""
    WITH RECURSIVE e(a, b) AS ({edge_sql}),
    walk(id, parent, distance) AS (
      SELECT ?, NULL, 0
      UNION
      SELECT e.b, w.id, w.distance + 1 FROM walk w JOIN e ON e.a = w.id WHERE w.distance < ?
    ),
    best AS (SELECT id, min(distance) AS d FROM walk GROUP BY id)
    SELECT b.id, (SELECT min(w.parent) FROM walk w JOIN best p ON p.id = w.parent AND p.d = b.d - 1
                  WHERE w.id = b.id AND w.distance = b.d), b.d
    FROM best b ORDER BY b.d, b.id LIMIT ?
    """
    if depth > 64 and max_depth is None:
        return _bfs_python(conn, root, edge_sql, params, None, max_nodes=max_nodes, check=check)
    limit = -1 if max_nodes is None else max_nodes
    return [tuple(r) for r in conn.execute(sql, (*params, root, depth, limit)).fetchall()]


def _bfs_python(
    conn,
    root: int,
    edge_sql: str,
    params: list[Any],
    max_depth: int | None,
    *,
    max_nodes: int | None = None,
    check: Callable[[], None] | None = None,
):
    adj: dict[int, list[int]] = {}
    for a, b in conn.execute(edge_sql, params).fetchall():
        adj.setdefault(a, []).append(b)
    dist = {root: 0}  # the visited set
    parent: dict[int, int | None] = {root: None}
    frontier = [root]
    while frontier and (max_depth is None or dist[frontier[0]] < max_depth):
        if max_nodes is not None and len(dist) >= max_nodes:
            break  # the levels walked so far hold the first max_nodes rows
        if check is not None:
            check()
        nxt: dict[int, int] = {}
        for node in frontier:
            for b in adj.get(node, ()):
                if b not in dist and (b not in nxt or node < nxt[b]):
                    nxt[b] = node
        d = dist[frontier[0]] + 1
        for b, p in nxt.items():
            dist[b], parent[b] = d, p
        frontier = sorted(nxt)
    rows = sorted(((n, parent[n], d) for n, d in dist.items()), key=lambda r: (r[2], r[0]))
    return rows if max_nodes is None else rows[:max_nodes]


def bfs(
    conn,
    root: int,
    *,
    max_depth: int | None = None,
    edges: str = "graph_edges",
    src: str = "src",
    dst: str = "dst",
    rels: list[str] | None = None,
    direction: str = "out",
    method: str = "auto",
    max_nodes: int | None = None,
    check: Callable[[], None] | None = None,
) -> list[tuple[int, int | None, int]]:
    """(id, parent, distance) rows sorted by (distance, id): the first ``max_nodes`` of them when
    given (ask for one more than you keep to learn whether there were more)."""
    if direction not in ("out", "in", "both"):
        raise ValueError(f"direction must be out, in or both, not {direction!r}")
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes must be at least 1, not {max_nodes!r}")
    if method in ("auto", "vtab") and load_bfs(conn):
        try:
            return _bfs_vtab(
                conn,
                root,
                max_depth=max_depth,
                edges=edges,
                src=src,
                dst=dst,
                rels=rels,
                direction=direction,
                max_nodes=max_nodes,
            )
        except Exception as exc:  # noqa: BLE001
            if method == "vtab" or _interrupted(exc):
                raise
    return bfs_cte(
        conn,
        root,
        max_depth=max_depth,
        edges=edges,
        src=src,
        dst=dst,
        rels=rels,
        direction=direction,
        max_nodes=max_nodes,
        check=check,
    )


def _interrupted(exc: Exception) -> bool:
    """An interrupt (the time budget) is passed on, never answered by running the CTE instead."""
    import apsw

    return isinstance(exc, apsw.InterruptError)


def _bfs_vtab(conn, root, *, max_depth, edges, src, dst, rels, direction, max_nodes=None):
    # bfsvtab keeps a visited hash set and walks whole levels; its SQL is stopped by the progress handler.
    rows = conn.execute(
        "SELECT id, parent, distance FROM bfsvtab WHERE tablename=? AND fromcolumn=? AND tocolumn=? AND root=? "
        "AND max_depth=? AND direction=? AND rels=? ORDER BY distance, id LIMIT ?",
        (
            edges,
            src,
            dst,
            root,
            -1 if max_depth is None else max_depth,
            direction,
            ",".join(rels or []),
            -1 if max_nodes is None else max_nodes,
        ),
    ).fetchall()
    return [tuple(r) for r in rows]
