"""manage_nodes, manage_relationships and the relation type registry; hand-made graph survives ingest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgr.authoring import nodes as authoring
from kgr.store import Store, loads

REPO = Path(__file__).resolve().parents[2]


def rel_rows(store):
    return sorted(
        (a, r, b, s, o)
        for a, r, b, s, o in store.query(
            "SELECT x.name, rel, y.name, strength, r.origin FROM relations r JOIN entities x ON x.id = r.src_id "
            "JOIN entities y ON y.id = r.dst_id"
        )
    )


def test_created_nodes_and_relationships_are_manual_with_direction_and_strength(store, ids):
    assert store.scalar("SELECT count(*) FROM entities WHERE origin != 'manual'") == 0
    assert rel_rows(store) == [
        ("Charlie Parker", "located_in", "Kansas City", "strong", "manual"),  # reverse: written from Kansas City
        ("Dizzy Gillespie", "same_as", "Charlie Parker", "medium", "manual"),
        ("Miles Davis", "refers_to", "Charlie Parker", "strong", "manual"),
    ]
    row = store.conn.execute("SELECT type, description, meta FROM entities WHERE name='Charlie Parker'").fetchone()
    assert row[0] == "PERSON" and row[1] == "American jazz saxophonist"
    assert loads(row[2])["properties"] == {"born": 1920}


def test_batches_report_each_item_and_a_failure_changes_nothing_of_it(store, ids):
    before = rel_rows(store)
    n_before = store.scalar("SELECT count(*) FROM entities")
    out = authoring.manage_nodes(
        store,
        "create",
        [
            {
                "name": "Max Roach",
                "summary": "drummer",
                "relationships": [
                    {"target_id": "Charlie Parker", "relationship_type": "refers_to"},
                    {"target_id": "Nobody Known", "relationship_type": "refers_to"},
                ],
            },  # fails: the whole node is rolled back
            {"name": "", "summary": "no name"},
            {"name": "Bud Powell", "summary": "pianist"},
        ],
    )
    status = [r["status"] for r in out["results"]]
    assert status == ["error", "error", "success"]
    assert "no node 'Nobody Known'" in out["results"][0]["message"]
    assert store.scalar("SELECT count(*) FROM entities") == n_before + 1
    assert store.scalar("SELECT count(*) FROM entities WHERE name='Max Roach'") == 0
    assert rel_rows(store) == before


def test_update_and_delete_nodes(store, ids):
    out = authoring.manage_nodes(
        store,
        "update",
        [
            {"id": str(ids["Miles Davis"]), "summary": "Trumpeter, bandleader", "properties": {"born": 1926}},
            {"id": "999999", "summary": "x"},
        ],
    )
    assert [r["status"] for r in out["results"]] == ["success", "error"]
    row = store.conn.execute(
        "SELECT name, description, meta FROM entities WHERE id=?", (ids["Miles Davis"],)
    ).fetchone()
    assert row[:2] == ("Miles Davis", "Trumpeter, bandleader") and loads(row[2])["properties"] == {"born": 1926}
    out = authoring.manage_nodes(store, "delete", [{"id": str(ids["Charlie Parker"])}])
    assert out["results"][0]["status"] == "success" and "3 relationships" in out["results"][0]["message"]
    assert rel_rows(store) == []  # its relationships went with it
    assert store.scalar("SELECT count(*) FROM entities WHERE id=?", (ids["Charlie Parker"],)) == 0


def test_relationship_update_delete_and_errors(store, ids):
    out = authoring.manage_relationships(
        store,
        "update",
        [
            {
                "source_id": "Miles Davis",
                "target_id": "Charlie Parker",
                "relationship_type": "refers_to",
                "relevance_strength": "weak",
                "properties": {"years": "1945-1948"},
            }
        ],
    )
    assert out["results"][0]["status"] == "success"
    rid = out["results"][0]["relationship_id"]
    assert store.conn.execute("SELECT strength, meta FROM relations WHERE id=?", (rid,)).fetchone() == (
        "weak",
        '{"years":"1945-1948"}',
    )
    out = authoring.manage_relationships(
        store,
        "create",
        [
            {"source_id": "Miles Davis", "target_id": "Charlie Parker", "relationship_type": "refers_to"},  # exists
            {
                "source_id": "Miles Davis",
                "target_id": "Charlie Parker",
                "relationship_type": "bad-name",
            },  # not a type name
            {"source_id": "Miles Davis", "target_id": "Miles Davis", "relationship_type": "cites"},  # a loop
            {
                "source_id": "Miles Davis",
                "target_id": "Kansas City",
                "relationship_type": "cites",
                "relevance_strength": "huge",
            },
            {
                "source_id": "Miles Davis",
                "target_id": "Kansas City",
                "relationship_type": "located_in",
                "direction": "reverse",
            },
        ],
    )
    assert [r["status"] for r in out["results"]] == ["error"] * 4 + ["success"]
    assert "already exists" in out["results"][0]["message"]
    assert "bad relationship_type 'bad-name'" in out["results"][1]["message"]
    assert ("Kansas City", "located_in", "Miles Davis", "medium", "manual") in rel_rows(store)
    out = authoring.manage_relationships(store, "delete", [{"id": str(rid)}, {"id": "424242"}])
    assert [r["status"] for r in out["results"]] == ["success", "error"]
    assert store.scalar("SELECT count(*) FROM relations WHERE id=?", (rid,)) == 0


def test_relation_type_registry(store):
    names = {t["name"] for t in authoring.relation_types(store)}
    assert {"defines", "part_of", "depends_on", "same_as"} <= names  # seeded with kgr's vocabulary
    with store.write():
        t = authoring.save_relation_type(
            store,
            "CHILD_OF",
            description="src is a child of dst",
            directionality="strong",
            source_types=["PERSON"],
            target_types=["PERSON"],
        )
    assert t == {
        "name": "CHILD_OF",
        "description": "src is a child of dst",
        "directionality": "strong",
        "source_types": ["PERSON"],
        "target_types": ["PERSON"],
    }
    with pytest.raises(authoring.AuthoringError, match="directionality"), store.write():
        authoring.save_relation_type(store, "X", directionality="sideways")
    with pytest.raises(authoring.AuthoringError, match="used by 1"), store.write():
        authoring.delete_relation_type(store, "same_as")
    with store.write():
        authoring.delete_relation_type(store, "CHILD_OF")
    assert "CHILD_OF" not in {t["name"] for t in authoring.relation_types(store)}


def test_ingest_never_removes_the_hand_made_graph(tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# Kestrel\n\nThe Kestrel pump station feeds the harbour. Maria Lopez runs it.\n")
    db = tmp_path / "kb.sqlite"
    env = {**os.environ, "KGR_REDACT_KEY": "test-key", "EMBEDDING_GEMMA_STUB": "1"}

    def ingest():
        proc = subprocess.run(
            [sys.executable, "-m", "kgr", "ingest", str(root), "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
        )
        assert proc.returncode == 0, proc.stderr

    ingest()
    with Store(db) as store:
        extracted = store.scalar("SELECT count(*) FROM entities WHERE origin='extracted'")
        assert extracted > 0
        some = store.scalar("SELECT name FROM entities WHERE origin='extracted' ORDER BY id LIMIT 1")
        out = authoring.manage_nodes(
            store,
            "create",
            [
                {
                    "name": "Pump Manual",
                    "summary": "How to run the pumps",
                    "relationships": [
                        {"target_id": some, "relationship_type": "refers_to", "relevance_strength": "strong"}
                    ],
                },
                {"name": "Night Shift", "summary": "The crew at night"},
            ],
        )
        assert [r["status"] for r in out["results"]] == ["success", "success"]
    for change in ("rewrite", "delete"):
        if change == "rewrite":
            (root / "a.md").write_text("# Other\n\nNothing about pumps here. Ada Byron wrote it.\n")
        else:
            (root / "a.md").unlink()
        ingest()
        with Store(db, readonly=True) as store:
            assert {n for (n,) in store.query("SELECT name FROM entities WHERE origin='manual'")} == {
                "Pump Manual",
                "Night Shift",
            }, change
    with Store(db, readonly=True) as store:
        # the extracted graph went with its document, except the entity the manual edge points at: the edge keeps it
        assert store.scalar("SELECT count(*) FROM docs WHERE source='file'") == 0
        assert [n for (n,) in store.query("SELECT name FROM entities WHERE origin='extracted'")] == [some]
        assert rel_rows(store) == [("Pump Manual", "refers_to", some, "strong", "manual")]


def test_an_unregistered_type_is_registered_balanced_and_said(store, ids):
    assert not store.scalar("SELECT 1 FROM relation_types WHERE name='MENTORED_BY'")
    out = authoring.manage_relationships(
        store,
        "create",
        [{"source_id": "Miles Davis", "target_id": "Charlie Parker", "relationship_type": "MENTORED_BY"}],
    )
    r = out["results"][0]
    assert r["status"] == "success" and r["registered_relationship_types"] == ["MENTORED_BY"]
    assert "registered the relationship type MENTORED_BY (directionality balanced" in r["message"]
    assert {t["name"]: t["directionality"] for t in authoring.relation_types(store)}["MENTORED_BY"] == "balanced"
    # a node's own relationships register theirs too; a type registered once is not reported again
    out = authoring.manage_nodes(
        store,
        "create",
        [
            {
                "name": "Red Garland",
                "summary": "Pianist",
                "relationships": [
                    {"target_id": "Miles Davis", "relationship_type": "PLAYED_WITH"},
                    {"target_id": "Charlie Parker", "relationship_type": "MENTORED_BY"},
                ],
            }
        ],
    )
    r = out["results"][0]
    assert r["status"] == "success" and r["created_relationships"] == 2
    assert r["registered_relationship_types"] == ["PLAYED_WITH"]
    # an update to an unregistered type registers it as well
    rid = store.scalar("SELECT id FROM relations WHERE rel='PLAYED_WITH'")
    out = authoring.manage_relationships(store, "update", [{"id": str(rid), "relationship_type": "GIGGED_WITH"}])
    assert out["results"][0]["registered_relationship_types"] == ["GIGGED_WITH"]
    assert store.scalar("SELECT rel FROM relations WHERE id=?", (rid,)) == "GIGGED_WITH"


def test_strict_relation_types_keep_the_refusal_and_name_the_tool(store, ids):
    before = rel_rows(store)
    out = authoring.manage_relationships(
        store,
        "create",
        [{"source_id": "Miles Davis", "target_id": "Charlie Parker", "relationship_type": "PARENT_OF"}],
        strict=True,
    )
    msg = out["results"][0]["message"]
    assert out["results"][0]["status"] == "error" and "unknown relationship type 'PARENT_OF'" in msg
    assert "manage_relationship_types tool (operation create)" in msg and "refers_to" in msg
    out = authoring.manage_nodes(
        store,
        "create",
        [
            {
                "name": "Kid",
                "summary": "x",
                "relationships": [{"target_id": "Miles Davis", "relationship_type": "KID_OF"}],
            }
        ],
        strict=True,
    )
    assert out["results"][0]["status"] == "error"
    # the node's write is one transaction: neither the node nor the type was kept
    assert not store.scalar("SELECT 1 FROM entities WHERE name='Kid'")
    assert not store.scalar("SELECT 1 FROM relation_types WHERE name IN ('PARENT_OF', 'KID_OF')")
    assert rel_rows(store) == before
