"""The writer lock of a database: one writer process per database file.

An exclusive ``flock`` on ``<db>.writer.lock`` (the file holds its pid) is held by the one
process allowed to write (``kgr ingest``, ``kgr watch``, ``kgr serve``'s writer, every write
command). Whether a writer is alive is asked of the lock, not of the pid: the kernel drops an
``flock`` when its process dies, even by SIGKILL. The writer's published state (``meta``
key ``writer``) is read here too, so ``kgr status`` needs nothing from the ingest layer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from kgr.errors import StoreError, UsageError
from kgr.store.db import Store, check_kgr_file, loads

LOCK_SUFFIX = ".writer.lock"
META_KEY = "writer"
# A lock probe by `kgr status` holds a shared lock for microseconds: a starting writer
# retries for this long before it calls the lock taken.
ACQUIRE_RETRY_S = 0.25


class WriterBusy(StoreError):
    """Another live process holds the writer lock of this database."""

    def __init__(self, db_path: str | os.PathLike, pid: int | None):
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"{db_path} is being written by another kgr process ({who})",
            hint=(
                "let it finish (`kgr status --db DB --wait-idle`) or stop it"
                + (f" (`kill {pid}`)" if pid else "")
                + "; while `kgr watch` or `kgr serve --watch` runs, "
                "it keeps the folder ingested"
            ),
        )
        self.pid = pid


def lock_path(db_path: str | os.PathLike) -> Path:
    return Path(os.fspath(db_path) + LOCK_SUFFIX)


def check_db_path(db_path: str | os.PathLike) -> Path:
    """A usable database path: not a folder nor another application's file, its folder created when missing."""
    path = Path(db_path)
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a database file", hint="give --db a file path, e.g. kb.sqlite")
    check_kgr_file(path)  # before the lock file is made beside it
    if str(path.parent) and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


class WriterLock:
    """An exclusive ``flock`` on ``<db>.writer.lock`` holding the owner's pid.

    ``flock`` locks belong to the open file, not to the process's other descriptors,
    so SQLite closing its own files never drops it (unlike POSIX ``fcntl`` locks)."""

    def __init__(self, db_path: str | os.PathLike):
        self.db_path = check_db_path(db_path)
        self.path = lock_path(self.db_path)
        self.fd: int | None = None

    def acquire(self, retry_s: float = ACQUIRE_RETRY_S) -> "WriterLock":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + retry_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    pid = _read_pid(fd)
                    os.close(fd)
                    raise WriterBusy(self.db_path, pid) from None
                time.sleep(0.01)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)  # drops the lock
        self.fd = None

    def __enter__(self) -> "WriterLock":
        return self.acquire() if self.fd is None else self

    def __exit__(self, *exc: object) -> None:
        self.release()


class LockedWrites:
    """The writes of a process that is not the database's :class:`kgr.ingest.writer.Writer`.

    Each write takes the writer lock (waiting up to ``wait_s`` while another process writes, then
    ``WriterBusy``), runs on a read-write ``Store`` and releases the lock: the only place where the
    lock and a read-write open go together. With ``keep_open`` the store (opened under the lock
    on the first write, so its migrations are written under it too) stays open for the next
    write: a lock taken per call costs microseconds, opening a store milliseconds. Writes of
    one ``LockedWrites`` run one at a time.
    """

    def __init__(self, db_path: str | os.PathLike, *, wait_s: float = ACQUIRE_RETRY_S, keep_open: bool = False):
        self.lock = WriterLock(db_path)
        self.wait_s = wait_s
        self.keep_open = keep_open
        self.store: Store | None = None
        self._mutex = threading.Lock()

    @contextlib.contextmanager
    def __call__(self) -> Iterator[Store]:
        with self._mutex:
            self.lock.acquire(self.wait_s)
            try:
                if self.store is None:
                    self.store = Store(self.lock.db_path)
                yield self.store
            finally:
                if not self.keep_open:
                    self._close_store()  # before the lock goes: closing may checkpoint the WAL
                self.lock.release()

    def _close_store(self) -> None:
        if self.store is not None:
            store, self.store = self.store, None
            store.close()

    def close(self) -> None:
        with self._mutex:
            self._close_store()


def writing(db_path: str | os.PathLike, *, wait_s: float = ACQUIRE_RETRY_S) -> contextlib.AbstractContextManager[Store]:
    """``with writing(db) as store:`` one write of ``db`` under its writer lock (see :class:`LockedWrites`).

    By default a lock held by another process (``kgr watch``, a server's writer, another
    ingest) is refused at once with ``WriterBusy``, naming the holder."""
    return LockedWrites(db_path, wait_s=wait_s)()


def create_if_missing(db_path: str | os.PathLike, *, project: str | None = None, wait_s: float = 5.0) -> bool:
    """Make an empty kgr database (the normal schema, through the normal open and migrations,
    under the writer lock) where there is none: no file, or a 0-byte one, stamped with the
    ``project`` id (:func:`kgr.store.root.check_project`). True when this call made it. The folder must exist and be writable: a mistyped path never creates folders.
    Another process making it at the same time is waited for (``wait_s``)."""
    path = Path(db_path)
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a database file", hint="give --db a file path, e.g. kb.sqlite")
    with contextlib.suppress(OSError):
        if path.stat().st_size > 0:
            return False
    folder = path.parent
    if not folder.is_dir():
        raise StoreError(
            f"database not found: {path}, and its folder {folder} does not exist",
            hint="create the folder first, or give --db a path in an existing folder",
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(
            f"database not found: {path}, and its folder {folder} is not writable (cannot create it)",
            hint="make the folder writable, or give --db a path in a writable folder",
        )
    try:
        with LockedWrites(path, wait_s=wait_s)() as store:
            if store.created:
                from kgr.store.root import check_project

                check_project(store, project)
            return store.created
    except WriterBusy:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 0:  # the writer holding the lock (kgr watch) made it meanwhile
                return False
        raise


def reading(db_path: str | os.PathLike) -> Store:
    """The database opened read-only (no lock: readers never wait for the writer)."""
    return Store(db_path, readonly=True)


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None


def writer_pid(db_path: str | os.PathLike) -> int | None:
    """The pid of the live writer process of this database, or None when there is none.

    Asks the lock itself (a dead process holds no ``flock``), so a stale pid in the lock
    file or in the database's meta table is never taken for a live writer."""
    try:
        fd = os.open(lock_path(db_path), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return _read_pid(fd) or -1
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def published_state(store: Store) -> dict[str, Any] | None:
    """The state a writer last published in this database (it may be dead since)."""
    value = store.get_meta(META_KEY)
    return loads(value) if value else None
