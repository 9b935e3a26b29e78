"""Issue 14, items 5 and 6: what kgr does with a --db file that is not (or not yet) a
writable kgr database: another application's SQLite file, a text file, a 0-byte file, a
kgr database made before kgr stamped its application_id, a read-only file, and a
database another program holds locked. Real processes, so a traceback would show.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import apsw
import pytest

KGR_APPLICATION_ID = 0x6B677231  # b"kgr1"
ENV = {**os.environ, "KGR_EMBED_STUB": "1", "KGR_REDACT_KEY": "test-key"}


def kgr(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "kgr", *map(str, args)], capture_output=True, text=True, env=ENV, timeout=timeout
    )


def one_error(proc) -> tuple[str, str | None]:
    """The error line and hint of a failed command, asserting there is nothing else on stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[0].startswith("Error: "), proc.stderr
    assert len(lines) <= 2 and all(line.startswith("Hint: ") for line in lines[1:]), proc.stderr
    return lines[0], (lines[1] if len(lines) > 1 else None)


def snapshot(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_mtime_ns, st.st_size


def siblings(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name))


@pytest.fixture()
def kb(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "intro.md").write_text("# Intro\n\nThe Widget service stores orders in Postgres.\n")
    return root


@pytest.fixture()
def other_app_db(tmp_path):
    """Another application's SQLite file (rollback journal, its own tables, no application_id)."""
    path = tmp_path / "other.db"
    conn = apsw.Connection(str(path))
    conn.execute(
        "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); CREATE TABLE tags(name TEXT);"
        "INSERT INTO notes(body) VALUES ('keep me')"
    )
    conn.close()
    return path


def tables(path) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name")]
    finally:
        conn.close()


def application_id(path) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("PRAGMA application_id").fetchone()[0]
    finally:
        conn.close()


# -- item 5: kgr's own files only -----------------------------------------------------------------


def test_a_new_database_carries_kgrs_application_id(tmp_path, kb):
    db = tmp_path / "kb.sqlite"
    proc = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")
    assert proc.returncode == 0, proc.stderr
    assert application_id(db) == KGR_APPLICATION_ID
    from kgr.store import APPLICATION_ID

    assert APPLICATION_ID == KGR_APPLICATION_ID


def test_ingest_refuses_another_applications_database_and_leaves_it_untouched(tmp_path, kb, other_app_db):
    before = snapshot(other_app_db)
    proc = kgr("ingest", kb, "--db", other_app_db, "--no-embed", "--no-graph")
    assert proc.returncode == 1
    error, hint = one_error(proc)
    assert error == f"Error: {other_app_db} is not a kgr database (application_id 0x00000000, 2 tables)"
    assert hint and "--db" in hint
    assert snapshot(other_app_db) == before
    assert tables(other_app_db) == ["notes", "tags"]
    assert siblings(other_app_db) == ["other.db"]  # no -wal, -shm, nor a writer lock file left beside it


@pytest.mark.parametrize(
    "command",
    [["status"], ["query", "widget"], ["load"], ["remember", "a fact"]],
    ids=["status", "query", "load", "remember"],
)
def test_every_command_refuses_another_applications_database(tmp_path, other_app_db, command):
    conn = apsw.Connection(str(other_app_db))
    conn.execute("PRAGMA application_id=1234")  # and one that does say whose it is
    conn.close()
    before = snapshot(other_app_db)
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", *command, "--db", str(other_app_db)],
        input="",
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 1
    error, hint = one_error(proc)
    assert error == f"Error: {other_app_db} is not a kgr database (application_id 0x000004d2, 2 tables)"
    assert hint
    assert snapshot(other_app_db) == before


@pytest.mark.parametrize(
    "content",
    [b"just some notes\n" * 20, bytes(range(256)) * 8, b"SQLite format 3\x00" + b"\xff" * 84],
    ids=["text", "random-bytes", "bad-sqlite-header"],
)
def test_a_file_that_is_not_sqlite_is_refused_and_untouched(tmp_path, kb, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    before = snapshot(path)
    for args in (["ingest", kb, "--no-embed", "--no-graph"], ["status"], ["query", "widget"]):
        proc = kgr(*args, "--db", path)
        assert proc.returncode == 1, (args, proc.stderr)
        error, hint = one_error(proc)
        assert error == f"Error: {path} is not a kgr database (not an SQLite file)", args
        assert hint
    assert snapshot(path) == before
    assert siblings(path) == ["notes.txt"]


def test_a_zero_byte_file_is_an_empty_database(tmp_path, kb):
    db = tmp_path / "kb.sqlite"
    db.touch()
    proc = kgr("query", "widget", "--db", db)  # a read does not create the schema
    assert proc.returncode == 1, proc.stderr
    error, hint = one_error(proc)
    assert error == f"Error: {db} is empty: not a kgr database yet"
    assert hint and "kgr ingest" in hint
    assert db.stat().st_size == 0
    proc = kgr("status", "--db", db, "--json")  # seed 000: status initializes the database
    assert proc.returncode == 0, proc.stderr
    assert '"empty":true' in proc.stdout.replace(" ", "")
    assert application_id(db) == KGR_APPLICATION_ID
    proc = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")
    assert proc.returncode == 0, proc.stderr
    assert application_id(db) == KGR_APPLICATION_ID
    assert kgr("status", "--db", db).returncode == 0


@pytest.mark.parametrize("how", [["--profile", "memory"], ["--root", "KB"]], ids=["memory", "root"])
def test_serve_starts_a_new_database_in_a_zero_byte_file_as_in_a_missing_one(tmp_path, kb, how):
    db = tmp_path / "kb.sqlite"
    db.touch()
    args = [str(kb) if a == "KB" else a for a in how]
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--db", str(db), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "kgr serve: " in proc.stderr and "Error" not in proc.stderr
    assert application_id(db) == KGR_APPLICATION_ID


@pytest.mark.parametrize("migration_row", [True, False], ids=["meta-migration-row", "first-migration-tables"])
def test_a_kgr_database_made_before_the_application_id_is_recognised_and_stamped(tmp_path, kb, migration_row):
    db = tmp_path / "kb.sqlite"
    assert kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph").returncode == 0
    # what an older kgr left: the first four migrations, no application_id
    conn = apsw.Connection(str(db))
    conn.execute(
        "PRAGMA application_id=0; PRAGMA user_version=4;"
        + (
            "UPDATE meta SET value='m005_title_mentions' WHERE key='migration'"
            if migration_row
            else "DELETE FROM meta WHERE key='migration'"
        )
    )
    conn.close()
    assert application_id(db) == 0
    status = kgr("status", "--db", db, "--json")  # a read leaves it as it is
    assert status.returncode == 0, status.stderr
    assert application_id(db) == 0
    proc = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")
    assert proc.returncode == 0, proc.stderr
    assert application_id(db) == KGR_APPLICATION_ID
    assert "1 unchanged" in proc.stderr  # nothing stored was lost


@pytest.mark.parametrize(
    "meta",
    [
        "meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('migration', '0042')",
        "meta(id INTEGER PRIMARY KEY, data BLOB)",
    ],
    ids=["key-value", "other-columns"],
)
def test_a_database_with_a_meta_table_of_its_own_is_not_taken_for_kgrs(tmp_path, meta):
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute(f"CREATE TABLE {meta}; CREATE TABLE docs(id INTEGER); PRAGMA user_version=3")
    conn.close()
    before = snapshot(path)
    proc = kgr("remember", "a fact", "--db", path)
    assert proc.returncode == 1
    error, _ = one_error(proc)
    assert error == f"Error: {path} is not a kgr database (application_id 0x00000000, 2 tables)"
    assert snapshot(path) == before


# -- item 6: read-only files and locks held by other programs --------------------------------------


@contextlib.contextmanager
def read_only(*paths):
    """Make files (or folders) unwritable, for root too: chattr +i as root, else chmod."""
    done = []
    try:
        for path in paths:
            if os.geteuid() == 0:
                if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
                    pytest.skip("chattr +i is not available here, and root ignores file permissions")
            else:
                os.chmod(path, 0o555 if path.is_dir() else 0o444)
            done.append(path)
        yield
    finally:
        for path in reversed(done):
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(path)], check=True)
            else:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)


def test_ingest_into_a_read_only_file_says_so(tmp_path, kb):
    db = tmp_path / "kb.sqlite"
    assert kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph").returncode == 0
    (kb / "more.md").write_text("# More\n\nAnother page about the Widget service.\n")
    before = snapshot(db)
    with read_only(db):
        proc = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")
        assert proc.returncode == 1
        error, hint = one_error(proc)
        assert error == f"Error: cannot write {db}: read-only file (permissions)"
        assert hint and "chmod" in hint
        # reading it still works: the folder can hold the -shm file a WAL reader needs
        status = kgr("status", "--db", db, "--json")
        assert status.returncode == 0, status.stderr
        assert '"docs":1' in status.stdout.replace(" ", "")
    assert snapshot(db) == before


def test_reading_a_read_only_database_in_a_read_only_folder_says_why_it_cannot(tmp_path, kb):
    # SQLite reads a WAL database through its -shm file; with no -shm there and a folder it
    # cannot create one in, it cannot open the database at all (short of immutable=1, which
    # would read garbage if anyone did write to it).
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "kb.sqlite"
    assert kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph").returncode == 0
    assert siblings(db) == ["kb.sqlite", "kb.sqlite.writer.lock"]
    with read_only(db, folder):
        status = kgr("status", "--db", db, "--json")
        query = kgr("query", "widget", "--db", db, "--json", "--mode", "bm25")
    for proc in (status, query):
        assert proc.returncode == 1
        error, hint = one_error(proc)
        assert error == f"Error: cannot read {db}: SQLite cannot create {db}-shm beside it (read-only folder?)"
        assert hint and "writable folder" in hint


def test_a_database_locked_by_another_program(tmp_path, kb):
    db = tmp_path / "kb.sqlite"
    assert kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph").returncode == 0
    (kb / "more.md").write_text("# More\n\nAnother page about the Widget service.\n")
    other = apsw.Connection(str(db))  # e.g. the sqlite3 shell after BEGIN EXCLUSIVE
    other.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        proc = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")
        waited = time.monotonic() - started
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert proc.returncode == 1
    error, hint = one_error(proc)
    assert error == f"Error: {db} is locked by another program (a write transaction open for more than 5 s)"
    assert hint and "retry" in hint
    assert waited >= 5
    again = kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph")  # and once it lets go, the ingest goes through
    assert again.returncode == 0, again.stderr
    assert "1 ingested" in again.stderr


def test_a_database_locked_exclusively_in_rollback_journal_mode(tmp_path, kb):
    # Another program switched it out of WAL and holds an exclusive lock: even readers wait.
    db = tmp_path / "kb.sqlite"
    assert kgr("ingest", kb, "--db", db, "--no-embed", "--no-graph").returncode == 0
    other = apsw.Connection(str(db))
    assert other.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    other.execute("BEGIN EXCLUSIVE")
    try:
        proc = kgr("status", "--db", db)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert proc.returncode == 1
    error, hint = one_error(proc)
    assert error == f"Error: {db} is locked by another program (a write transaction open for more than 5 s)"
    assert hint and "retry" in hint
