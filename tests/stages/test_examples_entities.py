"""One real thing is one entity (issue 13): on the shipped examples, a name repeated across
documents links to one entity, with one type, whatever spaCy guessed in each document."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUB_ENV = {"EMBEDDING_GEMMA_STUB": "1", "KGR_REDACT_KEY": "test-key"}  # linking by name needs no real vectors


@pytest.fixture(scope="module")
def examples_db(tmp_path_factory) -> Path:
    if not (REPO / "examples" / "kb").is_dir():
        pytest.skip("examples/kb not present")
    dest = tmp_path_factory.mktemp("examples-entities")
    shutil.copytree(REPO / "examples", dest / "examples", ignore=shutil.ignore_patterns("*.sqlite*"))
    db = dest / "x.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "ingest", str(dest / "examples" / "kb")]
        + ["--config", str(dest / "examples" / "config.yaml"), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **STUB_ENV},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return db


def entities_named(db: Path, name: str) -> list[tuple[str, str]]:
    from kgr.stages.link import norm
    from kgr.store import Store, loads

    store = Store(db)
    rows = store.query("SELECT key, name, type, aliases FROM entities")
    return [
        (key, typ)
        for key, ename, typ, aliases in rows
        if norm(name) in {norm(ename), *(norm(a) for a in loads(aliases, []))}
    ]


@pytest.mark.parametrize("name", ["Ledger Store", "Dmitri Hale", "Platform Ops", "Beacon", "Tidewater"])
def test_a_name_repeated_across_documents_is_one_entity(examples_db, name):
    found = entities_named(examples_db, name)
    assert len(found) == 1, found


def test_a_person_named_in_several_documents_is_one_person(examples_db):
    assert [t for _, t in entities_named(examples_db, "Dmitri Hale")] == ["PERSON"]
    # a message broker that services publish on is not a place
    assert [t for _, t in entities_named(examples_db, "Tidewater")] != ["LOCATION"]
