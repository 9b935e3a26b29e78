"""The recursive CTE and the reference BFS agree on random graphs (cycles, self-loops, missing roots)."""

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from kgr.store.bfs import _bfs_python, _edge_sql, bfs, bfs_cte, bfs_method

edges = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["uses", "part_of"])), max_size=50)


@settings(max_examples=200, deadline=None)
@given(
    edges=edges,
    root=st.integers(0, 14),
    depth=st.integers(0, 4),
    direction=st.sampled_from(["out", "in", "both"]),
    rels=st.sampled_from([None, ["uses"], ["part_of", "uses"]]),
)
def test_cte_equals_reference_bfs(edges, root, depth, direction, rels):
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT)")
    conn.executemany("INSERT INTO g VALUES (?, ?, ?)", edges)
    got = bfs_cte(conn, root, max_depth=depth, edges="g", direction=direction, rels=rels)
    sql, params = _edge_sql("g", "src", "dst", direction, rels)
    assert got == _bfs_python(conn, root, sql, params, depth)
    assert got[0] == (root, None, 0)  # the root is always there, even when it has no edges
    assert all(d <= depth for _, _, d in got)


def test_depth_zero_and_method_report():
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT)")
    conn.execute("INSERT INTO g VALUES (1, 2, 'uses'), (2, 3, 'uses'), (3, 1, 'uses')")
    assert bfs(conn, 1, max_depth=0, edges="g") == [(1, None, 0)]
    assert bfs(conn, 1, edges="g") == [(1, None, 0), (2, 1, 1), (3, 2, 2)]
    assert bfs_method(conn) in ("recursive CTE",) or bfs_method(conn).startswith("bfsvtab")


# --- bfsvtab (vendor/bfsvtab), the C extension ------------------------------------------------

import pytest  # noqa: E402

from kgr.store.bfs import load_bfs  # noqa: E402

HAS_VTAB = load_bfs(apsw.Connection(":memory:")) is not None
needs_vtab = pytest.mark.skipif(
    not HAS_VTAB,
    reason="bfsvtab is not built (no kgr/_bfsvtab*.so: `pip install -e .` builds it with a C compiler); "
    "kgr uses the recursive CTE instead",
)

directions = st.sampled_from(["out", "in", "both"])
rel_filters = st.sampled_from([None, ["uses"], ["part_of"], ["part_of", "uses"], ["nosuch"]])
# Dense small graphs (cycles, self-loops, duplicate edges), ids that may be negative or absent.
dense_edges = st.lists(
    st.tuples(st.integers(-2, 12), st.integers(-2, 12), st.sampled_from(["uses", "part_of"])), max_size=80
)


def _graph(edges, layout):
    """The edges as a bare table (bfsvtab reads them into a list), an indexed table (index lookups),
    or the relations table behind a graph_edges view as kgr's schema has it (lookups through the view)."""
    conn = apsw.Connection(":memory:")
    assert load_bfs(conn)
    if layout == "view":
        conn.execute(
            "CREATE TABLE relations(id INTEGER PRIMARY KEY, src_id INTEGER NOT NULL, dst_id INTEGER NOT NULL,"
            " rel TEXT NOT NULL, UNIQUE (src_id, dst_id, rel));"
            "CREATE INDEX idx_rel_src_rel ON relations(src_id, rel);"
            "CREATE INDEX idx_rel_dst_rel ON relations(dst_id, rel);"
            "CREATE VIEW graph_edges AS SELECT src_id AS src, dst_id AS dst, rel FROM relations"
        )
        conn.executemany("INSERT OR IGNORE INTO relations(src_id, dst_id, rel) VALUES (?, ?, ?)", edges)
        return conn, "graph_edges"
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT)")
    if layout == "indexed":
        conn.execute("CREATE INDEX g_src ON g(src, rel); CREATE INDEX g_dst ON g(dst, rel)")
    conn.executemany("INSERT INTO g VALUES (?, ?, ?)", edges)
    return conn, "g"


@needs_vtab
@settings(max_examples=300, deadline=None)
@given(
    edges=dense_edges,
    root=st.integers(-3, 14),
    depth=st.one_of(st.none(), st.integers(0, 5)),
    direction=directions,
    rels=rel_filters,
    layout=st.sampled_from(["table", "indexed", "view"]),
)
def test_vtab_equals_cte_and_reference(edges, root, depth, direction, rels, layout):
    conn, table = _graph(edges, layout)
    got = bfs(conn, root, max_depth=depth, edges=table, direction=direction, rels=rels, method="vtab")
    assert got == bfs_cte(conn, root, max_depth=depth, edges=table, direction=direction, rels=rels)
    sql, params = _edge_sql(table, "src", "dst", direction, rels)
    assert got == _bfs_python(conn, root, sql, params, depth)
    assert got[0] == (root, None, 0)


@needs_vtab
@settings(max_examples=100, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.just("uses")), max_size=120),
    root=st.integers(0, 30),
    direction=directions,
    layout=st.sampled_from(["table", "indexed"]),
)
def test_vtab_path_follows_parents(edges, root, direction, layout):
    conn, table = _graph(edges, layout)
    rows = conn.execute(
        "SELECT id, parent, distance, path FROM bfsvtab WHERE tablename=? AND root=? AND direction=?",
        (table, root, direction),
    ).fetchall()
    parent = {i: p for i, p, _, _ in rows}
    for i, _, d, path in rows:
        chain = [i]
        while parent[chain[-1]] is not None:
            chain.append(parent[chain[-1]])
        assert path == ",".join(map(str, reversed(chain)))
        assert len(chain) == d + 1
    assert [(r[2], r[0]) for r in rows] == sorted((r[2], r[0]) for r in rows)  # (distance, id) order


@needs_vtab
def test_vtab_larger_graph_and_unlimited_depth():
    import random

    rnd = random.Random(7)
    edges = [(rnd.randrange(2000), rnd.randrange(2000), rnd.choice(["uses", "part_of"])) for _ in range(8000)]
    for layout in ("table", "view"):
        conn, table = _graph(edges, layout)
        for direction in ("out", "in", "both"):
            for depth in (None, 2):
                got = bfs(conn, 5, max_depth=depth, edges=table, direction=direction, method="vtab")
                sql, params = _edge_sql(table, "src", "dst", direction, None)
                assert got == _bfs_python(conn, 5, sql, params, depth)
                assert len(got) > (1000 if depth is None else 10)


@needs_vtab
def test_vtab_reads_a_level_per_statement_when_indexed_and_the_table_once_otherwise():
    edges = [(i, c, "uses") for i in range(63) for c in (2 * i + 1, 2 * i + 2)]  # a binary tree: 127 nodes, 7 levels
    for layout, indexed in (("indexed", True), ("view", True), ("table", False)):
        conn, table = _graph(edges, layout)
        nested = []
        conn.trace_v2(apsw.SQLITE_TRACE_STMT, lambda ev: nested.append(ev["sql"]) if ev["trigger"] else None)
        assert len(bfs(conn, 0, edges=table, method="vtab")) == 127
        conn.trace_v2(0, None)
        levels = [s for s in nested if "bfsvtab_frontier(?1)" in s]
        scans = [s for s in nested if "bfsvtab_frontier(?1)" not in s]
        if indexed:  # one statement of index seeks per level (the last level finds no edge)
            assert len(levels) == 7 and not scans, nested
        else:  # the first level's lookup scans: the edges are read once instead
            assert len(levels) == 1 and len(scans) == 1, nested


def _table_conn():
    conn = apsw.Connection(":memory:")
    conn.execute(
        "CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT);"
        "INSERT INTO g VALUES (1, 2, 'uses'), (2, 3, 'uses'), (3, 1, 'uses'), (3, 4, 'part_of')"
    )
    return conn


@needs_vtab
@pytest.mark.parametrize(
    "name",
    [
        "g; DROP TABLE g",
        'g" ; DROP TABLE g; --',
        "g WHERE 0) UNION SELECT 1, 2 --",
        "sqlite_master",
        "",
        "[g]",
        "nosuch",
        "g AS x",
        "'g'",
        "g\x00",
    ],
)
def test_vtab_bad_table_names_are_clean_errors(name):
    conn = _table_conn()
    assert load_bfs(conn)
    with pytest.raises(apsw.Error) as err:
        conn.execute("SELECT * FROM bfsvtab WHERE tablename=? AND root=1", (name,)).fetchall()
    assert "bfsvtab" in str(err.value)
    for method in ("vtab", "cte"):  # through kgr.store.bfs too, both ways: the name is never SQL
        with pytest.raises((apsw.Error, ValueError)):
            bfs(conn, 1, edges=name, method=method)
    assert conn.execute("SELECT count(*) FROM g").fetchone()[0] == 4


@needs_vtab
@pytest.mark.parametrize("column", ["nosuch", 'src" FROM g; --', "rel", "", "src, dst"])
def test_vtab_bad_column_names_are_clean_errors(column):
    conn = _table_conn()
    assert load_bfs(conn)
    for which in ("fromcolumn", "tocolumn"):
        with pytest.raises(apsw.Error, match="bfsvtab"):
            conn.execute(f"SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND {which}=?", (column,)).fetchall()
    with pytest.raises((apsw.Error, ValueError)):
        bfs(conn, 1, edges="g", src=column, method="vtab")


@needs_vtab
@pytest.mark.parametrize(
    "sql, message",
    [
        ("SELECT * FROM bfsvtab", "tablename and root constraints are required"),
        ("SELECT * FROM bfsvtab WHERE tablename='g'", "root constraint is required"),
        ("SELECT * FROM bfsvtab WHERE root=1", "tablename constraint is required"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root > 1", "root constraint is required"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root='one'", "root must be an integer"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root=NULL", "root must be an integer"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND direction='up'", "direction must be"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND max_depth=-2", "max_depth must be"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND max_depth='x'", "max_depth must be"),
        ("SELECT * FROM bfsvtab WHERE tablename=NULL AND root=1", "tablename must not be NULL"),
        ("SELECT * FROM bfsvtab WHERE tablename=1 AND root=1", "tablename must be text"),
        ("SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND tocolumn='rel'", "non-integer value"),
    ],
)
def test_vtab_missing_or_bad_constraints_are_clean_errors(sql, message):
    conn = _table_conn()
    assert load_bfs(conn)
    with pytest.raises(apsw.SQLError, match=message):
        conn.execute(sql).fetchall()


@needs_vtab
def test_vtab_inputs_from_a_join_and_defaults():
    conn = _table_conn()
    assert load_bfs(conn)
    conn.execute("CREATE TABLE roots(r INTEGER); INSERT INTO roots VALUES (1), (4)")
    # root comes from another table: SQLite must put `roots` first (the other order is refused).
    rows = conn.execute(
        "SELECT r, b.id, b.distance FROM bfsvtab b JOIN roots ON b.root = roots.r "
        "WHERE b.tablename = 'g' ORDER BY r, b.distance, b.id"
    ).fetchall()
    assert rows == [(1, 1, 0), (1, 2, 1), (1, 3, 2), (1, 4, 3), (4, 4, 0)]
    assert conn.execute(
        "SELECT tablename, fromcolumn, tocolumn, root, max_depth, direction, rels FROM bfsvtab "
        "WHERE tablename='g' AND root=9"
    ).fetchall() == [("g", "src", "dst", 9, -1, "out", "")]
    assert conn.execute(
        "SELECT id FROM bfsvtab WHERE tablename='g' AND root IN (4, 3) ORDER BY distance, id"
    ).fetchall() == [(3,), (4,), (1,), (4,), (2,)]
    assert conn.execute("SELECT bfsvtab_version()").fetchone()[0] == "1.0.0"
    assert bfs_method(conn) == "bfsvtab 1.0.0"


@needs_vtab
def test_vtab_kept_statements_follow_schema_changes_nesting_and_close():
    conn = _table_conn()
    assert load_bfs(conn)
    want = [(1, None, 0), (2, 1, 1), (3, 2, 2), (4, 3, 3)]
    assert bfs(conn, 1, edges="g", method="vtab") == want
    conn.execute("CREATE INDEX g_src ON g(src)")  # the kept lookup is prepared again, now with the index
    assert bfs(conn, 1, edges="g", method="vtab") == want
    assert bfs(conn, 1, edges="g", rels=["uses"], method="vtab") == want[:3]
    conn.execute("DROP TABLE g")
    with pytest.raises(apsw.SQLError, match="no such table"):
        bfs(conn, 1, edges="g", method="vtab")
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT); INSERT INTO g VALUES (1, 5, 'uses')")
    assert bfs(conn, 1, edges="g", method="vtab") == [(1, None, 0), (5, 1, 1)]
    # An edge view that runs bfsvtab itself: the nested search has statements of its own.
    conn.execute(
        "INSERT INTO g VALUES (5, 6, 'uses'), (6, 7, 'uses');"
        "CREATE VIEW tree AS SELECT parent AS src, id AS dst, 'uses' AS rel FROM bfsvtab "
        "WHERE tablename = 'g' AND root = 1 AND parent IS NOT NULL"
    )
    for _ in range(2):
        assert bfs(conn, 5, edges="tree", direction="both", method="vtab") == bfs_cte(
            conn, 5, edges="tree", direction="both"
        )
    conn.close()  # the kept statements are finalized with the connection


# --- the node cap (issue 14 item 3): every method visits whole levels and keeps the first rows ---------


@settings(max_examples=200, deadline=None)
@given(
    edges=dense_edges,
    root=st.integers(-3, 14),
    depth=st.one_of(st.none(), st.integers(0, 5)),
    direction=directions,
    cap=st.integers(1, 16),
)
def test_max_nodes_keeps_the_first_rows_of_every_method(edges, root, depth, direction, cap):
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT)")
    conn.executemany("INSERT INTO g VALUES (?, ?, ?)", edges)
    full = bfs_cte(conn, root, max_depth=depth, edges="g", direction=direction)
    sql, params = _edge_sql("g", "src", "dst", direction, None)
    assert bfs_cte(conn, root, max_depth=depth, edges="g", direction=direction, max_nodes=cap) == full[:cap]
    assert _bfs_python(conn, root, sql, params, depth, max_nodes=cap) == full[:cap]
    if HAS_VTAB:
        assert load_bfs(conn)
        assert (
            bfs(conn, root, max_depth=depth, edges="g", direction=direction, max_nodes=cap, method="vtab") == full[:cap]
        )


def test_the_python_walk_stops_visiting_at_the_cap():
    """A long chain walked without a depth limit: the cap ends the walk, not the chain's end."""
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT)")
    conn.executemany("INSERT INTO g VALUES (?, ?, 'uses')", [(i, i + 1) for i in range(5000)])
    levels = []
    sql, params = _edge_sql("g", "src", "dst", "out", None)
    rows = _bfs_python(conn, 0, sql, params, None, max_nodes=10, check=lambda: levels.append(1))
    assert rows == [(i, None if i == 0 else i - 1, i) for i in range(10)]
    assert len(levels) < 20  # it stopped near the cap, not after 5000 levels
    assert bfs(conn, 0, edges="g", method="cte", max_nodes=10) == rows
    with pytest.raises(ValueError, match="max_nodes"):
        bfs(conn, 0, edges="g", max_nodes=0)
