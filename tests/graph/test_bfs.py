"""The recursive CTE and the reference BFS agree on random graphs (cycles, self-loops, missing roots)."""

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from kgr.graph import _bfs_python, _edge_sql, bfs, bfs_cte, bfs_method

edges = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.sampled_from(["uses", "part_of"])), max_size=50)


@settings(max_examples=200, deadline=None)
@given(edges=edges, root=st.integers(0, 14), depth=st.integers(0, 4), direction=st.sampled_from(["out", "in", "both"]),
       rels=st.sampled_from([None, ["uses"], ["part_of", "uses"]]))
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
