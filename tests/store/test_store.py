import apsw
import pytest

from kgr.errors import SchemaTooNew, StoreError
from kgr.store import Store, migrations


def test_new_database_has_the_whole_schema_wal_and_foreign_keys(db):
    with Store(db) as s:
        assert s.user_version == migrations.LATEST
        assert s.scalar("PRAGMA journal_mode") == "wal"
        assert s.scalar("PRAGMA foreign_keys") == 1
        assert s.scalar("PRAGMA secure_delete") == 1
        names = {n for (n,) in s.query("SELECT name FROM sqlite_master")}
        for table in (
            "docs",
            "chunks",
            "chunks_fts",
            "entities",
            "entities_fts",
            "mentions",
            "relations",
            "relation_evidence",
            "observations",
            "relation_types",
            "templates",
            "document_cache",
            "gazetteer",
            "embed_cache",
            "meta",
            "events",
            "graph_edges",
        ):
            assert table in names
        assert s.scalar("SELECT count(*) FROM relation_types") == 10
        assert s.extensions["sqlite-vec"].startswith("v")


def test_fts5_is_compiled_in_and_secure_delete_state_known():
    opts = {o for (o,) in apsw.Connection(":memory:").execute("PRAGMA compile_options")}
    assert "ENABLE_FTS5" in opts


def test_migrations_apply_once(db):
    Store(db).close()
    with Store(db) as s:
        assert s.migrate() == 0
        assert s.get_meta("migration") == migrations.MIGRATIONS[-1][0]


def test_newer_schema_is_refused(db):
    with Store(db) as s:
        s.execute(f"PRAGMA user_version={migrations.LATEST + 1}")
    with pytest.raises(SchemaTooNew, match="newer than this kgr"):
        Store(db)


def test_readonly_open_of_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="database not found") as info:
        Store(tmp_path / "nope.sqlite", readonly=True)
    assert "kgr ingest" in info.value.hint


def test_write_rolls_back_on_error(db):
    with Store(db) as s:
        with pytest.raises(RuntimeError):
            with s.write():
                s.set_meta("x", "1")
                raise RuntimeError("boom")
        assert s.get_meta("x") is None
        assert s.conn.getautocommit()


def _insert_doc(conn, path="a.md"):
    conn.execute("INSERT INTO docs(path, hash, text) VALUES (?, 'h', 't')", (path,))
    return conn.last_insert_rowid()


def test_fts_follows_chunk_inserts_updates_and_cascading_deletes(db):
    with Store(db) as s:
        with s.write() as c:
            d = _insert_doc(c)
            c.execute("INSERT INTO chunks(doc_id, ord, text, prelude) VALUES (?, 0, 'alpha bravo', 'a.md')", (d,))
        assert s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'bravo'") == [(1,)]
        with s.write() as c:
            c.execute("UPDATE chunks SET text='charlie' WHERE id=1")
        assert s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'bravo'") == []
        assert s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'charlie'") == [(1,)]
        with s.write() as c:
            c.execute("DELETE FROM docs WHERE id=?", (d,))
        assert s.scalar("SELECT count(*) FROM chunks") == 0
        assert s.query("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'charlie'") == []
        s.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        assert s.scalar("PRAGMA integrity_check") == "ok"


def test_deferred_upgrade_trap_and_begin_immediate(db):
    """RELIABILITY S4: a deferred read that upgrades to a write after another commit fails at once."""
    Store(db).close()
    a = apsw.Connection(str(db))
    a.setbusytimeout(2000)
    b = Store(db)
    a.execute("BEGIN")
    a.execute("SELECT count(*) FROM meta").fetchall()
    with b.write():
        b.set_meta("k", "v")
    with pytest.raises(apsw.BusyError):
        a.execute("INSERT INTO meta(key, value) VALUES ('k2', 'v2')")
    a.execute("ROLLBACK")
    # kgr's path: BEGIN IMMEDIATE takes the write lock first, so it waits instead of failing.
    with b.write():
        b.set_meta("k3", "v3")
    assert b.get_meta("k3") == "v3"
    b.close()
    a.close()


def test_every_write_statement_runs_inside_begin_immediate(db, tmp_path):
    """Audit with an exec tracer: no write outside a transaction opened with BEGIN IMMEDIATE."""
    from kgr.stages.load import load

    s = Store(db)
    statements = []
    begins = []

    def trace(cursor, sql, bindings):
        verb = sql.strip().split()[0].upper()
        statements.append((verb, s.conn.getautocommit()))
        if verb == "BEGIN":
            begins.append(" ".join(sql.upper().split()))
        return True

    s.conn.exec_trace = trace
    recs = [
        {"kind": "doc", "path": "a.md", "text": "alpha", "hash": "h1"},
        {"kind": "chunk", "doc": "a.md", "ord": 0, "text": "alpha"},
        {"kind": "error", "stage": "normalize", "path": "b.pdf", "message": "bad", "reason": "malformed", "size": 3},
    ]
    load(recs, s)
    writes = [(verb, auto) for verb, auto in statements if verb in ("INSERT", "UPDATE", "DELETE", "REPLACE")]
    assert writes, "the tracer saw no writes"
    assert all(not auto for _, auto in writes), writes
    assert begins and set(begins) == {"BEGIN IMMEDIATE"}
    s.close()
