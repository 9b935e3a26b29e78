"""Library layer of issue 14 items 5-6: Store tells kgr's files from others' and types its write failures."""

from __future__ import annotations

import apsw
import pytest

from kgr.errors import DatabaseLocked, EmptyDatabase, NotKgrDatabase
from kgr.store import APPLICATION_ID, Store, migrations


def test_store_refuses_a_foreign_database_for_reading_and_writing(tmp_path):
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE things(x); PRAGMA application_id=7")
    conn.close()
    before = path.read_bytes()
    for readonly in (False, True):
        with pytest.raises(NotKgrDatabase, match=r"application_id 0x00000007, 1 table\)$"):
            Store(path, readonly=readonly)
    assert path.read_bytes() == before


def test_store_reads_no_empty_file_and_makes_a_kgr_database_of_one(tmp_path):
    path = tmp_path / "kb.sqlite"
    path.touch()
    with pytest.raises(EmptyDatabase):
        Store(path, readonly=True)
    with Store(path) as s:
        assert s.scalar("PRAGMA application_id") == APPLICATION_ID
    with Store(path, readonly=True) as s:
        assert s.get_meta("migration") == migrations.MIGRATIONS[-1][0]


def test_a_write_blocked_by_another_connection_is_database_locked(tmp_path):
    path = tmp_path / "kb.sqlite"
    Store(path).close()
    other = apsw.Connection(str(path))
    other.execute("BEGIN EXCLUSIVE")
    try:
        with Store(path, busy_timeout_ms=100) as s:
            with pytest.raises(DatabaseLocked, match="is locked by another program"):
                with s.write():
                    s.set_meta("k", "v")
            assert s.conn.getautocommit()  # nothing left open
    finally:
        other.execute("ROLLBACK")
        other.close()
    with Store(path) as s:
        with s.write():
            s.set_meta("k", "v")
        assert s.get_meta("k") == "v"
