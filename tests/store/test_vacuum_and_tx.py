"""Free pages after large deletes (seed 000 section 18: "Run PRAGMA incremental_vacuum occasionally
if churn is high"), the write-transaction figures status reports (section 15: "avg tx duration"),
and the project id stamp (section 16)."""

from __future__ import annotations

import apsw
import pytest

from kgr.errors import UsageError
from kgr.store import Store
from kgr.store.lock import create_if_missing
from kgr.store.root import check_project


def fill(store: Store, n: int = 400, size: int = 20_000) -> None:
    """``n`` documents of ``size`` characters each (about n * size bytes of pages)."""
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO docs(path, text) VALUES (?, ?)", [(f"d{i}.md", f"{i} " + "x" * size) for i in range(n)]
        )


def purge(store: Store) -> None:
    with store.write() as conn:
        conn.execute("DELETE FROM docs")


def old_style(path) -> None:
    """Turn a database into one made before auto_vacuum=INCREMENTAL (free pages are kept)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA auto_vacuum=NONE")
    conn.execute("VACUUM")
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    conn.close()


def test_a_new_database_gives_free_pages_back_after_a_large_delete(db):
    with Store(db) as s:
        assert s.auto_vacuum == "incremental" and s.scalar("PRAGMA auto_vacuum") == 2
        fill(s)
        full = s.storage()
        assert full["freelist_count"] == 0 and full["page_count"] > 2000
        purge(s)
        after = s.storage()
        # measured: about 2,000 pages (8 MB) freed by the delete, then given back at once
        assert after["freelist_count"] < s.vacuum_min_pages
        assert after["page_count"] < full["page_count"] / 4
        assert s.vacuumed_pages > 1500


def test_a_small_delete_keeps_its_few_free_pages(db):
    with Store(db) as s:
        fill(s, n=20)
        pages = s.scalar("PRAGMA page_count")
        purge(s)
        assert 0 < s.scalar("PRAGMA freelist_count") < s.vacuum_min_pages  # reused by the next writes
        assert s.scalar("PRAGMA page_count") == pages and s.vacuumed_pages == 0


def test_an_old_database_keeps_free_pages_until_kgr_vacuum_converts_it(db):
    with Store(db) as s:
        fill(s)
    old_style(db)
    with Store(db) as s:
        assert s.auto_vacuum == "none"
        purge(s)
        free = s.scalar("PRAGMA freelist_count")
        assert free > 1500 and s.vacuumed_pages == 0  # nothing given back: no migration rewrites a file
        report = s.vacuum()
        assert report["converted"] is True and report["before"]["freelist_count"] == free
        assert report["after"]["freelist_count"] == 0 and report["after"]["auto_vacuum"] == "incremental"
        assert report["after"]["bytes"] < report["before"]["bytes"] / 4
        assert s.user_version > 0 and s.scalar("SELECT count(*) FROM templates") >= 1  # the content is kept
    with Store(db) as s:
        assert s.auto_vacuum == "incremental"
        fill(s)
        purge(s)
        assert s.scalar("PRAGMA freelist_count") < s.vacuum_min_pages  # from now on it is automatic


def test_write_transactions_are_timed_and_bookkeeping_is_not(db):
    with Store(db) as s:
        base = s.tx_count
        fill(s, n=5)
        with s.write(timed=False):
            s.set_meta("writer", "{}")
        purge(s)
        stats = s.tx_stats()
        assert stats["count"] == base + 2
        assert stats["last_ms"] is not None and 0 <= stats["median_ms"] <= stats["p95_ms"] <= stats["max_ms"]
        assert stats["last_ms"] > 0


def test_create_if_missing_makes_the_schema_once(tmp_path):
    db = tmp_path / "new.sqlite"
    assert create_if_missing(db, project="acme") is True
    assert create_if_missing(db, project="other") is False  # exists: left as it is
    with Store(db, readonly=True) as s:
        assert s.get_meta("project") == "acme" and s.scalar("SELECT count(*) FROM docs") == 0


def test_create_if_missing_refuses_a_missing_folder(tmp_path):
    from kgr.errors import StoreError

    with pytest.raises(StoreError, match="does not exist"):
        create_if_missing(tmp_path / "no" / "where.sqlite")
    assert not (tmp_path / "no").exists()


def test_project_stamp_refuses_another_project_with_documents(db):
    with Store(db) as s:
        check_project(s, "acme")
        assert s.get_meta("project") == "acme"
        check_project(s, "kgr")  # the default (no project configured) writes anywhere, stamps nothing
        assert s.get_meta("project") == "acme"
        check_project(s, "beta")  # no documents yet: the stamp follows the configuration
        assert s.get_meta("project") == "beta"
        with s.write() as conn:
            conn.execute("INSERT INTO docs(path, text) VALUES ('a.md', 'a')")
        with pytest.raises(UsageError, match="project 'beta', not 'gamma'") as info:
            check_project(s, "gamma")
        assert "KGR_PROJECT=beta" in info.value.hint
