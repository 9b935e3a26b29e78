"""A small hand-built graph (no models): jazz musicians, a city and a bystander node."""

from __future__ import annotations

from pathlib import Path

import pytest

NODES = [
    {
        "name": "Charlie Parker",
        "summary": "American jazz saxophonist",
        "node_type": "PERSON",
        "properties": {"born": 1920},
    },
    {
        "name": "Miles Davis",
        "summary": "American jazz trumpeter",
        "node_type": "PERSON",
        "relationships": [
            {"target_id": "Charlie Parker", "relationship_type": "refers_to", "relevance_strength": "strong"}
        ],
    },
    {
        "name": "Kansas City",
        "summary": "A city in Missouri",
        "node_type": "PLACE",
        "relationships": [
            {
                "target_id": "Charlie Parker",
                "relationship_type": "located_in",
                "direction": "reverse",
                "relevance_strength": "strong",
            }
        ],
    },
    {
        "name": "Dizzy Gillespie",
        "summary": "American jazz trumpeter",
        "node_type": "PERSON",
        "relationships": [
            {"target_id": "Charlie Parker", "relationship_type": "same_as", "relevance_strength": "medium"}
        ],
    },
    {"name": "Bystander", "summary": "Not connected to anyone", "node_type": "CONCEPT"},
]


def build_graph(db: Path) -> dict[str, int]:
    from kgr.authoring import nodes as authoring
    from kgr.store import Store

    with Store(db) as store:
        out = authoring.manage_nodes(store, "create", NODES)
        assert all(r["status"] == "success" for r in out["results"]), out
        return dict(store.query("SELECT name, id FROM entities"))


@pytest.fixture()
def graph(tmp_path) -> tuple[Path, dict[str, int]]:
    db = tmp_path / "kb.sqlite"
    return db, build_graph(db)


@pytest.fixture()
def store(graph):
    from kgr.store import Store

    with Store(graph[0]) as s:
        yield s


@pytest.fixture()
def ids(graph) -> dict[str, int]:
    return graph[1]
