"""Issue 14 item 3: every traversal ends. explore_neighborhoods with nearby primary nodes (their
parent chains used to cycle), and Python-level traversals stopped by the server's time budget so
one call can never hold the single read lane."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))

from serve_fixtures import Mcp, error_text, make_service  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _two_connected_parkers(db: Path) -> None:
    """Two primary nodes for the term "Parker", each in the other's neighbourhood."""
    from kgr.authoring import nodes as authoring
    from kgr.store import Store

    with Store(db) as store:
        out = authoring.manage_nodes(
            store,
            "create",
            [
                {
                    "name": "Parker Quintet",
                    "summary": "A band",
                    "node_type": "ORG",
                    "relationships": [{"target_id": "Charlie Parker", "relationship_type": "refers_to"}],
                }
            ],
        )
        assert out["results"][0]["status"] == "success", out


def _at_most_4_gb() -> None:
    """A looping chain grows a list without end: let it fail in the child, not fill the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_explore_neighborhoods_ends_when_primary_nodes_are_neighbours(graph):
    """Each primary node's BFS reaches the other, so each one's parent is the other: the parent
    chain used to loop forever. Run in a child process with a timeout so this test cannot hang."""
    db, _ = graph
    _two_connected_parkers(db)
    code = textwrap.dedent(f"""
        import orjson
        from kgr.authoring import nodes as authoring
        from kgr.store import Store
        with Store({str(db)!r}, readonly=True) as store:
            out = authoring.explore_neighborhoods(store, ["Parker"], max_results_per_term=5, neighborhood_depth=2)
        print(orjson.dumps(out).decode())
    """)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            preexec_fn=_at_most_4_gb,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("explore_neighborhoods did not return within 60 s (a parent chain loops)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    import orjson

    hood = orjson.loads(proc.stdout)["neighborhoods"]["Parker"]
    assert {p["name"] for p in hood["primary_nodes"]} >= {"Charlie Parker", "Parker Quintet"}
    near = {n["name"]: n for n in hood["nearby_nodes"]}
    # every path is finite, names each node once, and ends at the node it describes
    for name, n in near.items():
        steps = n["path"].split(" -> ")
        assert steps[-1] == name and len(steps) == len(set(steps)) and len(steps) <= n["distance"] + 1, n
    assert near["Kansas City"]["path"] == "Charlie Parker -> Kansas City"


def test_a_looping_graph_through_mcp_answers_and_leaves_the_lane_free(graph):
    """The same graph through the MCP tool: the call answers, and a later call is served."""
    from kgr import config
    from kgr.mcp import server as serve

    db, _ = graph
    _two_connected_parkers(db)
    svc = make_service(db, config.load(None))
    try:
        client = Mcp(serve.build_server(svc, "authoring"))
        import threading

        results = []
        t = threading.Thread(
            target=lambda: results.append(
                client.call("explore_neighborhoods", {"search_terms": ["Parker"], "max_results_per_term": 5})
            ),
            daemon=True,
        )
        t.start()
        t.join(60)
        assert not t.is_alive(), "explore_neighborhoods held the read lane for over 60 s"
        assert not results[0].is_error, results[0]
        later = client.call(
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": "Miles Davis", "target_node_id": "Kansas City"}]},
        )
        assert not later.is_error and later.structured_content["path_results"][0]["paths"]
    finally:
        if svc.lock.acquire(timeout=0):  # never close a store a runaway call still uses
            svc.lock.release()
            svc.close()


def _complete_graph(db: Path, n: int) -> list[str]:
    """n nodes, every pair linked: the simple paths between two of them are too many to walk."""
    from kgr.authoring import nodes as authoring
    from kgr.store import Store

    names = [f"K{i}" for i in range(n)]
    with Store(db) as store:
        specs = [
            {
                "name": a,
                "summary": "a node of a complete graph",
                "relationships": [
                    {"target_id": b, "relationship_type": "refers_to", "relevance_strength": "strong"}
                    for b in names[:i]
                ],
            }
            for i, a in enumerate(names)
        ]
        out = authoring.manage_nodes(store, "create", specs)
        assert all(r["status"] == "success" for r in out["results"]), out
    return names


def test_the_time_budget_stops_a_path_search_in_python_and_frees_the_lane(tmp_path):
    """Through the server: a path search on a complete graph is stopped with the budget's error,
    and the next call is served (the read lane is free again)."""
    import time

    from kgr import config
    from kgr.mcp import server as serve

    db = tmp_path / "kb.sqlite"
    names = _complete_graph(db, 12)
    svc = make_service(db, config.load(None), time_budget=0.3)
    try:
        client = Mcp(serve.build_server(svc, "authoring"))
        pairs = [{"source_node_id": names[i], "target_node_id": names[-1 - i]} for i in range(6)] * 3
        t0 = time.monotonic()
        err = client.call(
            "find_relationship_paths",
            {"node_pairs": pairs, "max_path_length": 6, "max_paths_per_pair": 50, "min_path_strength": 0.0},
        )
        took = time.monotonic() - t0
        assert err.is_error and "took longer than 0.3 s and was stopped" in error_text(err), err
        assert took < 30, took  # generous: only "it stopped", not how fast
        later = client.call(
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": "K0", "target_node_id": "K1"}], "max_path_length": 1},
        )
        assert not later.is_error and later.structured_content["path_results"][0]["paths"][0]["length"] == 1
    finally:
        svc.close()


def test_a_spent_budget_stops_the_python_walks(tmp_path):
    """The walks in Python (find_paths' depth-first search over cached edges, the Python BFS) check
    the budget themselves: SQLite's progress handler never sees that work."""
    import apsw

    from kgr.authoring import nodes as authoring
    from kgr.store import Store
    from kgr.store import bfs as graph

    db = tmp_path / "kb.sqlite"
    _complete_graph(db, 12)
    with Store(db) as store:
        assert authoring.find_paths(store, "K0", "K11", max_length=2, min_strength=0.0)["paths"]
        calls = []
        store.budget = lambda: bool(calls.append(1)) or len(calls) > 3  # spent after three looks
        with pytest.raises(apsw.InterruptError):
            authoring.find_paths(store, "K0", "K11", max_length=6, min_strength=0.0)
        store.budget = lambda: True
        sql, params = graph._edge_sql("graph_edges", "src", "dst", "both", None)
        with pytest.raises(apsw.InterruptError):
            graph._bfs_python(store.conn, 1, sql, params, None, check=store.check_deadline)


def test_the_time_budget_is_a_setting_and_must_be_positive(tmp_path):
    """serve.time_budget_s (KGR_SERVE_TIME_BUDGET_S) sets the budget; a useless value is refused
    before the server starts."""
    from click.testing import CliRunner

    from kgr.cli import cli
    from kgr.store import Store

    db = tmp_path / "kb.sqlite"
    Store(db).close()
    for bad in ("0", "-1"):
        res = CliRunner().invoke(cli, ["serve", "--db", str(db)], env={"KGR_SERVE_TIME_BUDGET_S": bad})
        assert res.exit_code == 2 and "serve.time_budget_s must be a positive number" in res.stderr, res.stderr


def test_a_call_waiting_for_a_stuck_lane_gets_an_error_not_a_hang(graph):
    """Should a call ever hold the read lane past its budget (work the budget cannot stop), later
    calls give up after lane_wait with a clear error instead of waiting for ever."""
    import threading

    from kgr import config
    from kgr.mcp import server as serve

    db, _ = graph
    svc = make_service(db, config.load(None), lane_wait=0.5)
    try:
        client = Mcp(serve.build_server(svc, "authoring"))
        args = {"node_pairs": [{"source_node_id": "Miles Davis", "target_node_id": "Kansas City"}]}
        results = []
        assert svc.lock.acquire(timeout=5)  # the stuck call
        try:
            t = threading.Thread(
                target=lambda: results.append(client.call("find_relationship_paths", args)), daemon=True
            )
            t.start()
            t.join(60)
            assert not t.is_alive(), "the call waited for the stuck lane for over 60 s"
        finally:
            svc.lock.release()
        assert "still busy with an earlier request" in error_text(results[0])
        assert not client.call("find_relationship_paths", args).is_error  # the lane is free again
    finally:
        svc.close()
