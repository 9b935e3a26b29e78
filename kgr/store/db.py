"""The SQLite store: opening, extensions, transactions and migrations.

apsw gives a current SQLite with FTS5 and extension loading everywhere. Every write
happens inside ``Store.write()``, which is ``BEGIN IMMEDIATE`` ... ``COMMIT`` (never a
deferred transaction that upgrades to a write: that fails at once with SQLITE_BUSY
whatever the busy timeout).
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import apsw
import orjson

from kgr.config import SqliteSettings
from kgr.errors import DatabaseLocked, EmptyDatabase, NotKgrDatabase, ReadOnlyDatabase, SchemaTooNew, StoreError
from kgr.store import migrations  # noqa: I001 - the package exports db, which needs migrations first

BUSY_TIMEOUT_MS = SqliteSettings().busy_timeout_ms
APPLICATION_ID = migrations.APPLICATION_ID
SQLITE_HEADER = b"SQLite format 3\x00"
NOT_KGR_HINT = "give --db a kgr database, or the path of a new file for a new one"
# Seed 000 section 18: "Run PRAGMA incremental_vacuum occasionally if churn is high". A new
# database is made with auto_vacuum=INCREMENTAL; after a write transaction that leaves at least
# this many free pages (4 MiB at the default 4 KiB page), they are given back to the file system.
# A database made before (auto_vacuum=NONE) keeps its free pages until `kgr vacuum` converts it.
VACUUM_MIN_FREE_PAGES = 1024
AUTO_VACUUM_MODES = {0: "none", 1: "full", 2: "incremental"}
TX_SAMPLE = 256  # write transactions whose durations status reports (median, p95)


def now_ms() -> int:
    return int(time.time() * 1000)


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(text: str | None, default: Any = None) -> Any:
    if text is None:
        return default
    return orjson.loads(text)


class Store:
    """One open knowledge-base database."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False, busy_timeout_ms: int = BUSY_TIMEOUT_MS):
        self.path = Path(path)
        self.readonly = readonly
        self.busy_timeout_ms = busy_timeout_ms
        if readonly:
            if not self.path.exists():
                raise StoreError(f"database not found: {self.path}", hint="create it with `kgr ingest DIR --db PATH`")
            flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        else:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI
        check_header(self.path)
        try:
            self.conn = apsw.Connection(str(self.path), flags=flags)
        except apsw.CantOpenError as exc:
            raise self._cannot_open(exc) from None
        except apsw.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        try:
            self.conn.setbusytimeout(busy_timeout_ms)
            # Nothing may be written (not even WAL mode) before the file is known to be kgr's.
            kind = identify(self.conn, self.path)
            if readonly and kind == "empty":
                raise EmptyDatabase(
                    f"{self.path} is empty: not a kgr database yet",
                    hint=f"create it with `kgr ingest DIR --db {self.path}`",
                )
            if not readonly and self.conn.readonly("main"):
                raise ReadOnlyDatabase(
                    f"cannot write {self.path}: read-only file (permissions)",
                    hint=f"make it writable (`chmod u+w {self.path}`), or give --db a copy of it",
                )
            self.created = kind == "empty" and not readonly  # this open makes the schema
            self._pragmas()
        except StoreError:
            self.conn.close()
            raise
        except apsw.BusyError as exc:  # another program holds an exclusive lock (rollback-journal mode)
            err = self._write_failed(exc)
            self.conn.close()
            raise err from None
        except apsw.CantOpenError as exc:
            self.conn.close()
            raise self._cannot_open(exc) from None
        except apsw.Error as exc:
            self.conn.close()
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        self.extensions: dict[str, str | None] = {}
        # The time budget of the current call (``kgr serve`` sets it): a callable that is true once
        # the budget is spent. SQLite's progress handler stops SQL; Python loops ask check_deadline.
        self.budget: Callable[[], bool] | None = None
        # the durations of this connection's last write transactions (BEGIN IMMEDIATE to COMMIT)
        self.tx_ms: collections.deque[float] = collections.deque(maxlen=TX_SAMPLE)
        self.tx_count = 0
        self.vacuumed_pages = 0
        self.vacuum_min_pages = VACUUM_MIN_FREE_PAGES
        self._load_extensions()
        if not readonly:
            self.migrate()
        else:
            self._check_version()

    # -- setup ---------------------------------------------------------------

    def _cannot_open(self, exc: apsw.Error) -> StoreError:
        shm = Path(f"{self.path}-shm")
        if self.readonly and self.path.exists() and not shm.exists():
            # A WAL database is read through its -shm file; a reader that cannot create it
            # (the folder is not writable) cannot read the database at all.
            return StoreError(
                f"cannot read {self.path}: SQLite cannot create {shm} beside it (read-only folder?)",
                hint="make the folder writable, or copy the database to a writable folder",
            )
        return StoreError(f"cannot open database {self.path}: {exc}")

    def _pragmas(self) -> None:
        c = self.conn
        if not self.readonly and self.created:
            # only takes effect before the first table is made (an existing file keeps its mode)
            c.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.auto_vacuum = AUTO_VACUUM_MODES.get(c.execute("PRAGMA auto_vacuum").fetchone()[0], "none")
        if not self.readonly:
            mode = c.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"cannot switch {self.path} to WAL mode (got {mode})")
        c.execute("PRAGMA synchronous=NORMAL")
        c.execute("PRAGMA foreign_keys=ON")
        # Deleted content (a redacted secret, a purged document) must not linger in free pages.
        c.execute("PRAGMA secure_delete=ON")

    def _load_extensions(self) -> None:
        try:
            import sqlite_vec

            self.conn.enable_load_extension(True)
            self.conn.load_extension(sqlite_vec.loadable_path())
            self.extensions["sqlite-vec"] = self.conn.execute("SELECT vec_version()").fetchone()[0]
        except (ImportError, apsw.Error) as exc:  # reported by `kgr status`
            self.extensions["sqlite-vec"] = None
            self.extension_errors = getattr(self, "extension_errors", {})
            self.extension_errors["sqlite-vec"] = str(exc)
        finally:
            with contextlib.suppress(apsw.Error):
                self.conn.enable_load_extension(False)

    @property
    def user_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def _check_version(self) -> None:
        if self.user_version > migrations.LATEST:
            raise SchemaTooNew(
                f"{self.path} has schema version {self.user_version}, newer than this kgr ({migrations.LATEST})",
                hint="upgrade kgr",
            )

    def migrate(self) -> int:
        """Apply pending migrations in one transaction (a crash leaves the database as it was,
        never half upgraded); return how many were applied."""
        self._check_version()
        if self.user_version >= migrations.LATEST:
            return 0
        applied = 0
        with self.write():
            for number, (name, sql) in enumerate(migrations.MIGRATIONS, 1):
                if self.user_version >= number:  # applied before, or by another process first
                    continue
                self.conn.execute(sql)
                self.conn.execute(f"PRAGMA user_version={number}")
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('migration', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (name,),
                )
                applied += 1
        return applied

    # -- transactions --------------------------------------------------------

    @contextlib.contextmanager
    def write(self, *, timed: bool = True) -> Iterator[apsw.Connection]:
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on error.

        Its duration joins ``tx_ms`` (``timed=False``: bookkeeping writes that would only
        dilute the figures); after a commit that leaves many free pages, they are vacuumed."""
        if self.readonly:
            raise StoreError(f"{self.path} is open read-only")
        if not self.conn.getautocommit():
            raise StoreError("nested write transaction")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except (apsw.BusyError, apsw.ReadOnlyError) as exc:
            raise self._write_failed(exc) from exc
        started = time.perf_counter()
        try:
            yield self.conn
        except BaseException as exc:
            if not self.conn.getautocommit():
                self.conn.execute("ROLLBACK")
            if isinstance(exc, (apsw.BusyError, apsw.ReadOnlyError)):
                raise self._write_failed(exc) from exc
            raise
        else:
            try:
                self.conn.execute("COMMIT")
            except (apsw.BusyError, apsw.ReadOnlyError) as exc:
                if not self.conn.getautocommit():
                    self.conn.execute("ROLLBACK")
                raise self._write_failed(exc) from exc
            if timed:
                self.tx_ms.append((time.perf_counter() - started) * 1000)
                self.tx_count += 1
            # best effort: the write is committed; free pages left now go with a later write
            with contextlib.suppress(StoreError, apsw.Error):
                self.incremental_vacuum()

    def tx_stats(self) -> dict[str, Any]:
        """This connection's write transactions: how many, and the last, median, mean, p95 and
        longest duration (ms) of the last ``TX_SAMPLE``."""
        ms = list(self.tx_ms)
        if not ms:
            return {
                "count": self.tx_count,
                "last_ms": None,
                "median_ms": None,
                "mean_ms": None,
                "p95_ms": None,
                "max_ms": None,
            }
        ordered = sorted(ms)
        return {
            "count": self.tx_count,
            "last_ms": round(ms[-1], 2),
            "median_ms": round(statistics.median(ordered), 2),
            "mean_ms": round(statistics.fmean(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
            "max_ms": round(ordered[-1], 2),
        }

    # -- free pages ----------------------------------------------------------

    def storage(self) -> dict[str, Any]:
        """The file's pages: size, free pages, and whether free pages are given back (auto_vacuum)."""
        page_size, pages, free = (
            self.scalar("PRAGMA page_size"),
            self.scalar("PRAGMA page_count"),
            self.scalar("PRAGMA freelist_count"),
        )
        return {
            "auto_vacuum": self.auto_vacuum,
            "page_size": page_size,
            "page_count": pages,
            "freelist_count": free,
            "bytes": page_size * pages,
            "free_bytes": page_size * free,
        }

    def incremental_vacuum(self, *, min_pages: int | None = None) -> int:
        """Give the free pages back to the file system when at least ``min_pages`` are free
        (default ``vacuum_min_pages``; a database with auto_vacuum=INCREMENTAL only); the number
        of pages freed."""
        min_pages = self.vacuum_min_pages if min_pages is None else min_pages
        if self.readonly or self.auto_vacuum != "incremental" or not self.conn.getautocommit():
            return 0
        free = self.scalar("PRAGMA freelist_count")
        if not free or free < min_pages:
            return 0
        try:
            self.conn.execute("PRAGMA incremental_vacuum").fetchall()
        except (apsw.BusyError, apsw.ReadOnlyError) as exc:
            raise self._write_failed(exc) from exc
        done = free - self.scalar("PRAGMA freelist_count")
        self.vacuumed_pages += done
        return done

    def vacuum(self) -> dict[str, Any]:
        """``kgr vacuum``: give every free page back; a database made before auto_vacuum=INCREMENTAL
        is converted to it first (a full VACUUM: it rewrites the file, and needs as much free disk)."""
        if self.readonly:
            raise StoreError(f"{self.path} is open read-only")
        before = self.storage()
        converted = self.auto_vacuum != "incremental"
        try:
            if converted:
                self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
                self.conn.execute("VACUUM")
                self.auto_vacuum = AUTO_VACUUM_MODES.get(self.scalar("PRAGMA auto_vacuum"), "none")
            else:
                self.conn.execute("PRAGMA incremental_vacuum").fetchall()
        except (apsw.BusyError, apsw.ReadOnlyError) as exc:
            raise self._write_failed(exc) from exc
        return {
            "kind": "vacuum",
            "db": str(self.path),
            "converted": converted,
            "before": before,
            "after": self.storage(),
        }

    def _write_failed(self, exc: apsw.Error) -> StoreError:
        """The one-line error of a write that SQLite refused: a lock held too long, or a read-only file."""
        if isinstance(exc, apsw.ReadOnlyError):
            why = "read-only file (permissions)" if self.conn.readonly("main") else f"read-only ({exc})"
            return ReadOnlyDatabase(
                f"cannot write {self.path}: {why}",
                hint=f"make {self.path} and its folder writable, or give --db a copy of it",
            )
        from kgr.store.lock import writer_pid

        pid = writer_pid(self.path)
        holder = f"kgr (pid {pid})" if pid and pid != os.getpid() else "another program"
        return DatabaseLocked(
            f"{self.path} is locked by {holder} (a write transaction open for more than {self.busy_timeout_ms / 1000:g} s)",
            hint=(
                "let it finish, or end that program's transaction (an open BEGIN in the sqlite3 shell, say), "
                f"then retry; `fuser {self.path}` lists the processes that have it open"
            ),
        )

    def execute(self, sql: str, params: Any = None) -> apsw.Cursor:
        return self.conn.execute(sql, params)

    def query(self, sql: str, params: Any = None) -> list[tuple]:
        """Run a read and return all rows (never leaves a cursor holding a snapshot)."""
        return self.conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: Any = None) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def check_deadline(self) -> None:
        """Raise ``apsw.InterruptError`` (as SQLite does for an interrupted statement) once the
        current call's time budget is spent: traversals in Python call this in their loops."""
        if self.budget is not None and self.budget():
            raise apsw.InterruptError("the time budget is spent")

    # -- meta and events -----------------------------------------------------

    def get_meta(self, key: str, default: Any = None) -> Any:
        value = self.scalar("SELECT value FROM meta WHERE key=?", (key,))
        return default if value is None else value

    def set_meta(self, key: str, value: Any) -> None:
        """Set a meta value; call inside ``write()``."""
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, None if value is None else str(value)),
        )

    def log_event(self, kind: str, path: str | None = None, message: str | None = None) -> None:
        """Record an event; call inside ``write()``. Old events are trimmed."""
        self.conn.execute(
            "INSERT INTO events(ts_ms, kind, path, message) VALUES (?, ?, ?, ?)",
            (now_ms(), kind, path, message),
        )

    def trim_events(self, keep: int = 10000) -> None:
        self.conn.execute("DELETE FROM events WHERE id <= (SELECT max(id) FROM events) - ?", (keep,))

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        with contextlib.suppress(apsw.Error):
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_M001_TABLES = set(re.findall(r"^CREATE TABLE (\w+)", migrations.M001_INITIAL, re.M))


def check_header(path: Path) -> None:
    """Refuse a non-empty file that does not start as an SQLite database does, before SQLite opens it."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except (FileNotFoundError, IsADirectoryError):
        return
    except PermissionError:
        return  # SQLite will say so
    if head and head != SQLITE_HEADER:
        raise NotKgrDatabase(f"{path} is not a kgr database (not an SQLite file)", hint=NOT_KGR_HINT)


def identify(conn: apsw.Connection, path: Path) -> str:
    """Whose database ``conn`` is: "kgr" (kgr's application_id, or the schema of a kgr made
    before it set one) or "empty" (a 0-byte file, or SQLite with no tables and no version).
    Anything else raises ``NotKgrDatabase``. Only reads."""
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
    except apsw.NotADBError:
        raise NotKgrDatabase(f"{path} is not a kgr database (not an SQLite file)", hint=NOT_KGR_HINT) from None
    if app_id == APPLICATION_ID:
        return "kgr"
    if app_id == 0:
        if not tables and version == 0:
            return "empty"
        if "meta" in tables and version >= 1:
            # made before kgr set its application_id (stamped by the next migration): the name of
            # its last migration in its meta table, or at least the tables of the first one
            names = {name for name, _ in migrations.MIGRATIONS}
            try:
                migration = conn.execute("SELECT value FROM meta WHERE key='migration'").fetchone()
            except apsw.SQLError:  # someone else's meta table, with other columns
                migration = None
            if (migration is not None and migration[0] in names) or _M001_TABLES <= set(tables):
                return "kgr"
    n = len(tables)
    raise NotKgrDatabase(
        f"{path} is not a kgr database (application_id 0x{app_id & 0xFFFFFFFF:08x}, {n} table{'s' if n != 1 else ''})",
        hint=NOT_KGR_HINT,
    )


def check_kgr_file(path: str | os.PathLike) -> None:
    """Raise ``NotKgrDatabase`` if ``path`` exists and is not a kgr database (nor empty), without
    writing anything; any other trouble is left for ``Store`` to report."""
    path = Path(path)
    check_header(path)
    try:
        if path.stat().st_size == 0:
            return
    except OSError:
        return
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return
    try:
        identify(conn, path)
    except apsw.Error:
        return
    finally:
        conn.close()


def open_store(path: str | os.PathLike, *, readonly: bool = False) -> Store:
    return Store(path, readonly=readonly)
