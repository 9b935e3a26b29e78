"""The SQLite store: opening, extensions, transactions and migrations.

apsw gives a current SQLite with FTS5 and extension loading everywhere. Every write
happens inside ``Store.write()``, which is ``BEGIN IMMEDIATE`` ... ``COMMIT`` (never a
deferred transaction that upgrades to a write: that fails at once with SQLITE_BUSY
whatever the busy timeout).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import apsw
import orjson

from . import migrations
from .errors import SchemaTooNew, StoreError

BUSY_TIMEOUT_MS = 5000


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
        if readonly:
            if not self.path.exists():
                raise StoreError(f"database not found: {self.path}", hint="create it with `kgr ingest DIR --db PATH`")
            flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        else:
            if self.path.parent and not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI
        try:
            self.conn = apsw.Connection(str(self.path), flags=flags)
            self.conn.setbusytimeout(busy_timeout_ms)
            self._pragmas()
        except apsw.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from None
        self.extensions: dict[str, str | None] = {}
        # The time budget of the current call (``kgr serve`` sets it): a callable that is true once
        # the budget is spent. SQLite's progress handler stops SQL; Python loops ask check_deadline.
        self.budget: Callable[[], bool] | None = None
        self._load_extensions()
        if not readonly:
            self.migrate()
        else:
            self._check_version()

    # -- setup ---------------------------------------------------------------

    def _pragmas(self) -> None:
        c = self.conn
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
        """Apply pending migrations; return how many were applied."""
        self._check_version()
        applied = 0
        for number, (name, sql) in enumerate(migrations.MIGRATIONS, 1):
            if self.user_version >= number:
                continue
            with self.write():
                if self.user_version >= number:  # another process got there first
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
    def write(self) -> Iterator[apsw.Connection]:
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on error."""
        if self.readonly:
            raise StoreError(f"{self.path} is open read-only")
        if not self.conn.getautocommit():
            raise StoreError("nested write transaction")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            if not self.conn.getautocommit():
                self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

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


def open_store(path: str | os.PathLike, *, readonly: bool = False) -> Store:
    return Store(path, readonly=readonly)
