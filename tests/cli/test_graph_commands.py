"""entities, explain, path, review and eval on the examples knowledge base (real models)."""

from __future__ import annotations

import shutil

import orjson
import pytest
from click.testing import CliRunner

from kgr.cli import cli


@pytest.fixture(scope="module")
def kb(tmp_path_factory, examples):
    tmp = tmp_path_factory.mktemp("kb")
    shutil.copytree(examples / "kb", tmp / "kb")
    db = tmp / "kb.sqlite"
    result = CliRunner().invoke(cli, ["ingest", str(tmp / "kb"), "--db", str(db)])
    assert result.exit_code == 0, result.stderr
    return db


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_entities_finds_aliases_and_code_names(kb):
    for query in ("Fare Engine", "FE", "fare-engine", "fare engine"):
        hits = [orjson.loads(x) for x in run("entities", query, "--db", kb, "--json").stdout.splitlines()]
        assert hits and hits[0]["name"] == "Fare Engine", query
    assert run("entities", "zzzz nothing", "--db", kb).exit_code == 1


def test_explain_gives_relations_with_evidence_and_sources(kb):
    info = orjson.loads(run("explain", "VLS", "--db", kb, "--json").stdout)
    assert info["name"] == "Vehicle Locator Service"
    assert "VLS" in info["aliases"]
    rels = {(r["src_name"], r["rel"], r["dst_name"]) for r in info["relations"]}
    assert ("Vehicle Locator Service", "owned_by", "Fleet Operations") in rels
    assert all(r["evidence"] and r["evidence"][0]["sentence"] for r in info["relations"])
    assert any(s["path"] == "services/vehicle-locator.md" for s in info["sources"])
    assert any(n["distance"] == 1 for n in info["neighbourhood"]["nodes"])
    human = run("explain", "VLS", "--db", kb)
    assert human.exit_code == 0 and "owned_by" in human.stdout


def test_path_between_two_entities(kb):
    info = orjson.loads(run("path", "Ines Okafor", "Fare Engine", "--db", kb, "--json").stdout)
    assert info["length"] == 2 and info["paths"]
    steps = info["paths"][0]
    assert steps[0]["rel"] == "part_of" and steps[-1]["rel"] == "owned_by"
    none = run("path", "Ines Okafor", "Fare Engine", "--db", kb, "--rels", "cites")
    assert none.exit_code == 1 and "no path" in none.stderr


def test_review_lists_the_least_certain_items(kb):
    info = orjson.loads(run("review", "--db", kb, "--json", "--limit", "5").stdout)
    confidences = [e["confidence"] for e in info["edges"]]
    assert confidences == sorted(confidences) and len(confidences) == 5


def test_unknown_entity_is_a_clear_error(kb):
    result = run("explain", "no such thing at all", "--db", kb)
    assert result.exit_code == 1 and result.stderr.startswith("Error: no entity matches")


def test_eval_extraction_on_a_small_annotated_corpus(tmp_path):
    root = tmp_path / "g"
    (root / "docs").mkdir(parents=True)
    (root / "annotations").mkdir()
    (root / "docs" / "a.md").write_text("# Ferry Relay\n\nThe Ferry Relay is owned by Team Basin.\n")
    mentions = [
        {"doc": "a.md", "surface": "Ferry Relay", "entity": "E1", "n": 1},
        {"doc": "a.md", "surface": "Ferry Relay", "entity": "E1", "n": 2},
        {"doc": "a.md", "surface": "Team Basin", "entity": "E2", "n": 1},
    ]
    (root / "annotations" / "mentions.jsonl").write_text("\n".join(orjson.dumps(m).decode() for m in mentions))
    (root / "annotations" / "entities.jsonl").write_text('{"id": "E1"}\n{"id": "E2"}\n')
    (root / "annotations" / "relations.jsonl").write_text(
        '{"src": "E1", "rel": "owned_by", "dst": "E2", "doc": "a.md", "evidence": "The Ferry Relay is owned by Team Basin."}\n'
    )
    result = run("eval", "extraction", "--golden", root, "--json")
    assert result.exit_code == 0, result.stderr
    scores = orjson.loads(result.stdout)
    assert scores["mention"]["recall"] == 1.0
    assert scores["canonical"]["f1"] == 1.0
    assert scores["relation"]["recall"] == 1.0 and set(scores) >= {"mention", "canonical", "relation"}
