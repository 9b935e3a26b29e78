"""BFS: the bfsvtab extension against the recursive CTE, on synthetic graphs of 10k, 100k and 1M edges.

    python bench/bench_bfs.py [--sizes 10000,100000,1000000] [--depth 3] [--roots 5] [--runs 5]

Each graph is random (fixed seed): N edges between N/5 nodes with six relation
types, in a file database with kgr's own ``relations`` table, its two indexes
(src_id, rel) and (dst_id, rel), and the ``graph_edges`` view over it (as in
kgr/store/migrations.py). From the same roots, both methods run through kgr.store.bfs
(``bfs(method="vtab")`` and ``bfs_cte``, Python fetch included) and must return
the same rows; the table shows the median milliseconds per query, with a warm
cache: each method runs once untimed, then --runs times (fewer when a run takes
seconds), before the next method runs from the same root.
"in SQLite" is bfsvtab alone: the same search as SELECT count(*), no rows to Python.

floor: the physical limit for any traversal that reads the edges from SQLite:
one SQL statement reading, through the same index, exactly the edges the BFS has
to read (those of every node it expands), with the expanded ids given to it in a
temporary table; no per-node statement, no visited set, no result rows.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import apsw

from kgr.store.bfs import bfs, bfs_cte, bfs_method

# kgr/store/migrations.py: the relations table, its indexes and the graph_edges view.
SCHEMA = """
CREATE TABLE relations (
  id         INTEGER PRIMARY KEY,
  src_id     INTEGER NOT NULL,
  dst_id     INTEGER NOT NULL,
  rel        TEXT NOT NULL,
  confidence REAL NOT NULL DEFAULT 1.0,
  strength   TEXT NOT NULL DEFAULT 'medium',
  origin     TEXT NOT NULL DEFAULT 'extracted',
  meta       TEXT NOT NULL DEFAULT '{}',
  created_ms INTEGER,
  UNIQUE (src_id, dst_id, rel)
);
CREATE VIEW graph_edges AS SELECT src_id AS src, dst_id AS dst, rel FROM relations;
"""
INDEXES = """
CREATE INDEX idx_rel_src_rel ON relations(src_id, rel);
CREATE INDEX idx_rel_dst_rel ON relations(dst_id, rel);
"""
RELS = ["uses", "part_of", "owned_by", "depends_on", "mentions", "related_to"]


def build(path: Path, n_edges: int, seed: int) -> tuple[apsw.Connection, int]:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute(SCHEMA)
    n_nodes = max(n_edges // 5, 2)
    rnd = random.Random(seed)
    with conn:
        done = 0
        while done < n_edges:
            batch = [
                (rnd.randrange(n_nodes), rnd.randrange(n_nodes), rnd.choice(RELS))
                for _ in range(min(100_000, n_edges - done))
            ]
            conn.executemany("INSERT OR IGNORE INTO relations(src_id, dst_id, rel) VALUES (?, ?, ?)", batch)
            done = conn.execute("SELECT count(*) FROM relations").fetchone()[0]
        conn.execute(INDEXES)
    conn.execute("ANALYZE")
    return conn, n_nodes


def floor_ms(conn: apsw.Connection, rows, depth: int, direction: str, runs: int) -> tuple[float, int]:
    """Milliseconds to read, in one statement through the index, the edges of every node the BFS expands."""
    expanded = [r[0] for r in rows if r[2] < depth]
    conn.execute("DROP TABLE IF EXISTS temp.expanded; CREATE TEMP TABLE expanded(id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO temp.expanded VALUES (?)", [(i,) for i in expanded])
    parts = []
    if direction in ("out", "both"):
        parts.append("SELECT count(e.dst) FROM temp.expanded x CROSS JOIN graph_edges e ON e.src = x.id")
    if direction in ("in", "both"):
        parts.append("SELECT count(e.src) FROM temp.expanded x CROSS JOIN graph_edges e ON e.dst = x.id")
    sql = "SELECT " + " + ".join(f"({p})" for p in parts)
    for p in parts:  # the plan must be: each expanded id (CROSS JOIN keeps it outer), then an index seek
        plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + p))
        assert "SEARCH relations USING" in plan and "INDEX" in plan, plan
    times, edges = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        edges = conn.execute(sql).fetchone()[0]
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, edges


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000", help="edge counts, comma-separated")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--roots", type=int, default=10, help="roots per graph")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per root and method")
    ap.add_argument("--directions", default="out,both")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    probe = apsw.Connection(":memory:")
    method = bfs_method(probe)
    if not method.startswith("bfsvtab"):
        print("skipped: bfsvtab is not built (pip install -e . with a C compiler builds kgr/_bfsvtab*.so)")
        return
    print(
        f"{method} vs recursive CTE, SQLite {apsw.sqlite_lib_version()}, depth {args.depth}, "
        f"{args.roots} roots x {args.runs} runs, median ms per query (Python fetch included)"
    )
    header = (
        f"{'edges':>9} {'nodes':>7} {'dir':>4} {'reached':>8} {'edges read':>10} "
        f"{'CTE ms':>9} {'bfsvtab ms':>10} {'CTE/bfsvtab':>11} {'in SQLite ms':>12} {'floor ms':>9}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            t = time.perf_counter()
            conn, n_nodes = build(Path(tmp) / f"g{size}.sqlite", size, args.seed)
            build_s = time.perf_counter() - t
            assert bfs_method(conn).startswith("bfsvtab")
            rnd = random.Random(args.seed + size)
            with_edges = [r[0] for r in conn.execute("SELECT DISTINCT src_id FROM relations")]
            roots = rnd.sample(with_edges, min(args.roots, len(with_edges)))
            for direction in args.directions.split(","):
                cte_t, vtab_t, sql_t, floors, reached, read = [], [], [], [], [], []
                for root in roots:

                    def vtab():
                        return bfs(conn, root, max_depth=args.depth, direction=direction, method="vtab")

                    def cte():
                        return bfs_cte(conn, root, max_depth=args.depth, direction=direction)

                    def in_sqlite():
                        return conn.execute(
                            "SELECT count(*) FROM bfsvtab WHERE tablename='graph_edges' AND root=? "
                            "AND max_depth=? AND direction=?",
                            (root, args.depth, direction),
                        ).fetchall()

                    want = cte()  # the reference
                    assert vtab() == want, (size, direction, root)
                    for fn, times in ((cte, cte_t), (vtab, vtab_t), (in_sqlite, sql_t)):
                        fn()  # warm-up: the pages this root needs are in the cache for each method alike
                        spent = 0.0
                        for _ in range(args.runs):
                            t = time.perf_counter()
                            fn()
                            times.append(time.perf_counter() - t)
                            spent += times[-1]
                            if spent > 2.0:  # the CTE at 1M edges both ways: seconds a query
                                break
                    ms, edges = floor_ms(conn, want, args.depth, direction, args.runs)
                    floors.append(ms)
                    reached.append(len(want))
                    read.append(edges)
                cte_ms = statistics.median(cte_t) * 1000
                vtab_ms = statistics.median(vtab_t) * 1000
                print(
                    f"{size:>9} {n_nodes:>7} {direction:>4} {statistics.median(reached):>8.0f} "
                    f"{statistics.median(read):>10.0f} {cte_ms:>9.2f} {vtab_ms:>10.3f} {cte_ms / vtab_ms:>10.1f}x "
                    f"{statistics.median(sql_t) * 1000:>12.3f} {statistics.median(floors):>9.3f}",
                    flush=True,
                )
            conn.close()
            print(f"{'':>9} (graph of {size} edges built in {build_s:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
