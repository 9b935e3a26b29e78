"""find_relationship_paths: seed 002's strength (relevance x directional weight per edge, the
length penalty 1/length, the minimum strength), narratives and summaries; `kgr path` strengths."""

from __future__ import annotations

import math

import orjson
import pytest
from click.testing import CliRunner

from kgr.authoring import nodes as authoring

# Seed 002's numbers, restated here (not imported) so the test checks the library against the spec.
RELEVANCE = {"weak": 0.2, "medium": 0.6, "strong": 1.0}
DIRECTIONAL = {"strong": (1.0, 0.2), "weak": (0.8, 0.6), "balanced": (0.7, 0.7)}


def expected(*edges):
    """edges: (relevance, directionality, forward)"""
    raw = math.prod(RELEVANCE[r] * DIRECTIONAL[d][0 if f else 1] for r, d, f in edges)
    return raw / len(edges)


def one(store, a, b, **kw):
    return authoring.find_relationship_paths(store, [{"source_node_id": a, "target_node_id": b}], **kw)["path_results"][
        0
    ]


def test_strength_forward_and_backward(store, ids):
    # fixture: refers_to (weak directionality) and located_in (strong), both relevance strong
    r = one(store, "Miles Davis", "Kansas City")
    assert r["summary"]["paths_returned"] == 1
    p = r["paths"][0]
    want = expected(("strong", "weak", True), ("strong", "strong", True))
    assert p["strength"] == pytest.approx(want) == pytest.approx(0.4)
    assert p["strength_breakdown"] == {
        "raw_strength": pytest.approx(0.8),
        "length_penalty": 0.5,
        "final_strength": pytest.approx(0.4),
    }
    assert [n["name"] for n in p["nodes"]] == ["Miles Davis", "Charlie Parker", "Kansas City"]
    assert [(x["type"], x["direction"]) for x in p["relationships"]] == [
        ("refers_to", "forward"),
        ("located_in", "forward"),
    ]
    assert [x["edge_strength"] for x in p["relationships"]] == [pytest.approx(0.8), pytest.approx(1.0)]
    # the other way round every edge is walked backward: much weaker, below the default minimum 0.3
    back = one(store, "Kansas City", "Miles Davis")
    assert back["paths"] == [] and back["summary"]["total_paths_found"] == 0
    back = one(store, "Kansas City", "Miles Davis", min_path_strength=0.0)
    assert back["paths"][0]["strength"] == pytest.approx(
        expected(("strong", "strong", False), ("strong", "weak", False))
    )
    assert [x["direction"] for x in back["paths"][0]["relationships"]] == ["backward", "backward"]


def test_min_strength_and_medium_relevance(store, ids):
    want = expected(("medium", "balanced", True), ("strong", "strong", True))  # 0.21
    assert one(store, "Dizzy Gillespie", "Kansas City")["paths"] == []
    r = one(store, "Dizzy Gillespie", "Kansas City", min_path_strength=0.2)
    assert r["paths"][0]["strength"] == pytest.approx(want)


def test_several_paths_ranked_limited_and_summarised(store, ids):
    out = authoring.manage_relationships(
        store,
        "create",
        [
            {
                "source_id": "Miles Davis",
                "target_id": "Kansas City",
                "relationship_type": "uses",
                "relevance_strength": "weak",
            }
        ],
    )
    assert out["results"][0]["status"] == "success"
    r = one(store, "Miles Davis", "Kansas City", min_path_strength=0.0)
    direct = expected(("weak", "strong", True))  # 0.2
    via = expected(("strong", "weak", True), ("strong", "strong", True))  # 0.4
    assert [p["strength"] for p in r["paths"]] == [pytest.approx(via), pytest.approx(direct)]
    assert [p["path_id"] for p in r["paths"]] == [1, 2]
    s = r["summary"]
    assert s["total_paths_found"] == 2 and s["paths_returned"] == 2
    assert s["strongest_path_strength"] == pytest.approx(via)
    assert s["average_path_strength"] == pytest.approx((via + direct) / 2)
    assert s["relationship_types_used"] == ["located_in", "refers_to", "uses"]
    limited = one(store, "Miles Davis", "Kansas City", min_path_strength=0.0, max_paths_per_pair=1)
    assert limited["summary"]["total_paths_found"] == 2 and limited["summary"]["paths_returned"] == 1
    assert limited["paths"][0]["length"] == 2
    short = one(store, "Miles Davis", "Kansas City", min_path_strength=0.0, max_path_length=1)
    assert [p["length"] for p in short["paths"]] == [1]


def test_directionality_comes_from_the_registry(store, ids):
    with store.write():
        authoring.save_relation_type(store, "refers_to", directionality="balanced")
    p = one(store, "Miles Davis", "Kansas City")["paths"][0]
    assert p["strength"] == pytest.approx(expected(("strong", "balanced", True), ("strong", "strong", True)))
    # an unregistered type (the memory profile writes any) weighs 0.5 both ways
    with store.write():
        store.execute(
            "INSERT INTO relations(src_id, dst_id, rel, strength, origin) VALUES (?, ?, 'jammed_with', 'strong', "
            "'manual')",
            (ids["Bystander"], ids["Dizzy Gillespie"]),
        )
    p = one(store, "Bystander", "Dizzy Gillespie")["paths"][0]
    assert p["strength"] == pytest.approx(0.5)


def test_narrative_names_every_hop(store, ids):
    p = one(store, "Miles Davis", "Kansas City")["paths"][0]
    n = p["narrative"]
    assert n.startswith("Miles Davis reaches Kansas City in 2 steps: ")
    assert "Miles Davis refers to Charlie Parker; Charlie Parker located in Kansas City" in n
    assert "0.400" in n


def test_unknown_nodes_and_unconnected_pairs(store, ids):
    res = authoring.find_relationship_paths(
        store,
        [
            {"source_node_id": "Miles Davis", "target_node_id": "Bystander"},
            {"source_node_id": "qqqzzz xxvv", "target_node_id": "Miles Davis"},
        ],
    )
    a, b = res["path_results"]
    assert a["paths"] == [] and a["summary"]["total_paths_found"] == 0 and "error" not in a
    assert "no node matches" in b["error"]


def test_a_cycle_is_never_walked_twice(store, ids):
    authoring.manage_relationships(
        store,
        "create",
        [
            {
                "source_id": "Dizzy Gillespie",
                "target_id": "Miles Davis",
                "relationship_type": "same_as",
                "relevance_strength": "strong",
            }
        ],
    )
    r = one(store, "Miles Davis", "Kansas City", min_path_strength=0.0, max_path_length=6)
    for p in r["paths"]:
        ids_on_path = [n["id"] for n in p["nodes"]]
        assert len(ids_on_path) == len(set(ids_on_path))
    # Miles -> Parker -> KC, and Miles <- Dizzy -> Parker -> KC
    assert sorted(p["length"] for p in r["paths"]) == [2, 3]


def test_kgr_path_prints_strengths(graph):
    from kgr.cli import cli

    db, _ = graph
    runner = CliRunner()
    res = runner.invoke(cli, ["path", "Miles Davis", "Kansas City", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == (
        "Miles Davis --refers_to--> Charlie Parker --located_in--> Kansas City  (strength 0.400)"
    )
    res = runner.invoke(cli, ["path", "Kansas City", "Miles Davis", "--db", str(db), "--json"])
    info = orjson.loads(res.stdout)
    assert info["strengths"][0]["final_strength"] == pytest.approx(
        expected(("strong", "strong", False), ("strong", "weak", False))
    )
