"""kgr.retrieval.status: empty, the project id and seed 000 section 15's metrics ("ingest rate, avg tx
duration, vector count, orphaned entities"), as another process reads them from the writer's
published state."""

from __future__ import annotations

from kgr import config as config_mod
from kgr.ingest.writer import Writer
from kgr.retrieval import status as status_mod
from kgr.store import Store


def cfg(**over):
    return config_mod.load(None, overrides={"embed.stub": True, "normalize.workers": 1, **over})


def test_a_new_database_is_empty_with_quiet_metrics(db):
    with Store(db) as s:
        info = status_mod.status(s, project="acme")
    assert info["empty"] is True and info["project"] == "acme"  # nothing stamped: the configured id
    m = info["metrics"]
    assert (m["queue_depth"], m["pending"], m["vector_count"], m["orphaned_entities"]) == (0, 0, 0, 0)
    assert m["transactions"] is None and m["from"] is None
    assert info["storage"]["auto_vacuum"] == "incremental" and info["storage"]["freelist_count"] == 0


def test_metrics_of_the_last_writer_and_orphans(tmp_path, db):
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(3):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nThe pump station {i} feeds the harbour.\n")
    with Writer(db, root=root, config=cfg(project="harbour"), graph=False) as w:
        summary = w.ingest(None).result(timeout=120)
        assert summary.ingested == 3
    with Store(db) as s:
        with s.write() as conn:  # an entity nothing mentions, relates or observes
            conn.execute("INSERT INTO entities(key, name, norm, type) VALUES ('x', 'Lonely', 'lonely', 'THING')")
            conn.execute(  # one made by hand is not orphaned
                "INSERT INTO entities(key, name, norm, type, origin) VALUES ('y', 'Mine', 'mine', 'THING', 'manual')"
            )
        info = status_mod.status(s, project="other")
    assert info["empty"] is False and info["project"] == "harbour" and info["project_configured"] == "other"
    m = info["metrics"]
    assert m["from"] == "last writer" and m["queue_depth"] == 0  # the writer has stopped: nothing queued
    assert m["files_done"] == 3 and m["ingest_rate"] > 0
    tx = m["transactions"]
    assert tx["count"] >= 3 and 0 < tx["median_ms"] <= tx["p95_ms"] <= tx["max_ms"]
    assert m["vector_count"] == info["counts"]["chunks"] > 0  # stub vectors for every chunk
    assert m["orphaned_entities"] == 1


def test_print_status_says_empty_and_shows_the_metrics(db, capsys):
    import io

    with Store(db) as s:
        out = io.StringIO()
        status_mod.print_status(status_mod.status(s, project="acme"), out)
    text = out.getvalue()
    assert "empty      yes" in text and "project    acme" in text
    assert "auto_vacuum incremental" in text and "orphaned entities 0" in text
