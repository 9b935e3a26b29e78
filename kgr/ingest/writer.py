"""The single writer: one process, one thread, one connection for every write.

SQLite allows one writer at a time. kgr goes further and allows one writer *process*
per database: a ``Writer`` holds an exclusive ``flock`` on ``<db>.writer.lock`` (the
file holds its pid) for as long as it lives, and every write job of that process
(file events from ``kgr watch``, ``ingest_docs`` from ``kgr serve``) runs in order on
its one thread with its one read-write ``Store``. A second writer process is refused
with ``WriterBusy`` naming the holder; ``kgr ingest`` takes the same lock.

The writer publishes its state (pid, idle or busy, queue depth, last file, last error,
heartbeat) as JSON in the ``meta`` table under ``writer``, so ``kgr status`` in another
process can show it and ``kgr status --wait-idle`` can wait for quiet. Whether a writer
is alive is asked of the lock, not of the pid (the kernel drops an ``flock`` when its
process dies, even by SIGKILL).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

from kgr.errors import StoreError, UsageError
from kgr.store import Store, dumps, now_ms
from kgr.store.lock import (
    META_KEY,
    LockedWrites,
    WriterLock,
    check_db_path,
    published_state,
    reading,
    writer_pid,
)

log = logging.getLogger("kgr.writer")

T = TypeVar("T")


class WriterClosed(StoreError):
    """A job was given to, or left queued in, a writer that is closing."""


# No periodic heartbeat by default: every write bumps PRAGMA data_version, which makes
# readers (kgr serve's in-memory vector matrix) reload. Liveness is asked of the lock;
# heartbeat_ms is the time of the last published state change.
HEARTBEAT_S: float | None = None


class Writer:
    """The one writer of a database: a lock, a thread and a job queue.

    ``ingest(paths)`` and ``run(fn)`` queue jobs and return futures; jobs run one after
    another on the writer thread with its own read-write ``Store``. Use as a context
    manager, or ``start()`` and ``close()``.
    """

    def __init__(
        self,
        db_path: str | os.PathLike,
        *,
        root: str | os.PathLike,
        config=None,
        embed: bool = True,
        graph: bool = True,
        heartbeat_s: float | None = HEARTBEAT_S,
    ):
        from kgr import config as config_mod
        from kgr.ingest import pipeline

        self.db_path = check_db_path(db_path)
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"{root}: no such directory", hint="give the knowledge folder to keep ingested")
        self.config = config_mod.settings_of(config) if config is not None else config_mod.load()
        self.embed = embed
        self.graph = graph
        self.heartbeat_s = heartbeat_s
        self._lock = WriterLock(self.db_path).acquire()
        try:
            self.store = Store(self.db_path)
            pipeline.check_root(self.store, self.root)
            pipeline.check_project(self.store, self.config.project)
        except BaseException:
            if getattr(self, "store", None) is not None:
                self.store.close()
            self._lock.release()
            raise
        self._jobs: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = False
        self._busy = False
        self._pending = 0  # changes seen by a watcher and not yet queued (set_pending)
        self._extra: dict[str, Any] = {}
        self._dirty = True
        self._last_publish = 0.0
        self._last_published_busy: bool | None = None
        self.pid = os.getpid()
        self.started_at = time.time()
        self.idle_since = time.time()
        self.last_file: str | None = None
        self.last_error: str | None = None
        self._logged_errors: set[tuple[str, str | None]] = set()  # see _on_error
        self.jobs_done = 0
        self.files_done = 0
        self.busy_seconds = 0.0
        self.counts = self._count()

    # -- public API ------------------------------------------------------------------

    def start(self) -> "Writer":
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="kgr-writer", daemon=True)
                self._thread.start()
        return self

    def run(self, fn: Callable[[Store], T], *, label: str | None = None) -> concurrent.futures.Future:
        """Queue ``fn(store)`` to run on the writer thread; its result or exception goes to the future."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._closing:
                raise WriterClosed(f"the writer of {self.db_path} is closing")
            self._jobs.append((fn, future, label or getattr(fn, "__name__", "job")))
            self._dirty = True
            self._cond.notify_all()
        return future

    def ingest(
        self,
        paths: list[str] | None = None,
        *,
        force: bool = False,
        tags: list[str] | None = None,
        on_error: Callable[[dict], None] | None = None,
    ) -> concurrent.futures.Future:
        """Bring ``paths`` (files or folders under the root, present or gone) up to date;
        None reconciles the whole root. The future's result is a ``pipeline.IngestSummary``.
        ``force`` and ``tags`` as in :func:`pipeline.sync_paths`; ``on_error`` also gets each
        error record of this job."""
        from kgr.ingest import pipeline

        targets = None if paths is None else list(paths)

        def errors(rec: dict) -> None:
            self._on_error(rec)
            if on_error is not None:
                on_error(rec)

        def job(store: Store):
            return pipeline.sync_paths(
                store,
                self.root,
                targets,
                config=self.config,
                graph=self.graph,
                embed=self.embed,
                on_error=errors,
                on_partial=self._on_partial,
                force=force,
                tags=tags,
            )

        label = "reconcile" if targets is None else f"ingest {len(targets)} path{'s' if len(targets) != 1 else ''}"
        return self.run(job, label=label)

    def set_pending(self, n: int, **extra: Any) -> None:
        """A watcher says how many changes it holds back (debouncing); published with the state.
        ``extra`` adds fields to the published state (the watcher's debounce, say)."""
        with self._cond:
            if n != self._pending or extra:
                was_busy = self._busy_now()
                self._pending = n
                self._extra.update(extra)
                if was_busy and not self._busy_now():
                    self.idle_since = time.time()
                self._dirty = True
                self._cond.notify_all()

    def status(self) -> dict[str, Any]:
        with self._cond:
            return self._state()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is queued or running and no change is pending; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._jobs or self._busy or self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
        return True

    def close(self, timeout: float = 30) -> None:
        """Finish the queued jobs (for up to ``timeout`` seconds), stop the thread, release the lock.
        Jobs still queued after that fail with ``WriterClosed``."""
        with self._cond:
            if self._closed:
                return
            self._closing = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                with self._cond:
                    dropped = list(self._jobs)
                    self._jobs.clear()
                for _, future, _ in dropped:
                    future.set_exception(WriterClosed(f"the writer of {self.db_path} closed before this job ran"))
                thread.join(timeout)
            if thread.is_alive():
                # A job still runs: keep the store and the lock; the process exit ends both
                # (an interrupted transaction rolls back, as after a crash).
                log.warning("writer: a job is still running after %.0fs; leaving it to the process exit", 2 * timeout)
                self._closed = True
                return
        else:
            for _, future, _ in self._jobs:
                future.set_exception(WriterClosed(f"the writer of {self.db_path} was never started"))
            self._jobs.clear()
        with contextlib.suppress(Exception):
            self._publish(state="stopped")
        self.store.close()
        self._lock.release()
        self._closed = True

    def __enter__(self) -> "Writer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the writer thread -------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closing:
                    self._maybe_publish()
                    self._cond.wait(self._wait_time())
                if not self._jobs and self._closing:
                    return
                fn, future, label = self._jobs.popleft()
                self._busy = True
                self._dirty = True
            if not future.set_running_or_notify_cancel():
                with self._cond:
                    self._busy = False
                continue
            self._maybe_publish(force=True)
            started = time.perf_counter()
            try:
                result = fn(self.store)
            except BaseException as exc:  # a job's failure is its caller's, never the thread's
                log.error("writer: %s failed: %s", label, exc)
                self.last_error = f"{label}: {exc}"
                future.set_exception(exc)
                result = None
            else:
                future.set_result(result)
            seconds = time.perf_counter() - started
            self._account(result, seconds)
            with self._cond:
                self._busy = False
                if not self._jobs and not self._pending:
                    self.idle_since = time.time()
                self._dirty = True
                self._cond.notify_all()

    def _account(self, result: Any, seconds: float) -> None:
        self.jobs_done += 1
        self.busy_seconds += seconds
        files = getattr(result, "ingested", 0) + getattr(result, "moved", 0) + getattr(result, "pruned", 0)
        self.files_done += files
        with contextlib.suppress(Exception):
            last = self.store.get_meta("last_file")
            if last:
                self.last_file = last
        with contextlib.suppress(Exception):
            self.counts = self._count()

    def _count(self) -> dict[str, int]:
        return {
            "docs": self.store.scalar("SELECT count(*) FROM docs"),
            "chunks": self.store.scalar("SELECT count(*) FROM chunks"),
        }

    # Errors about a path that never becomes a document (a symlink loop, a broken link, a name
    # that cannot be stored): every reconcile meets them again, with nothing changed. Each is
    # logged once per writer; a failed document is not, since it is parsed again only when it changed.
    _REPEATING = frozenset({"symlink_loop", "broken_symlink", "unreadable", "bad_filename"})

    def _on_error(self, rec: dict) -> None:
        where = rec.get("path") or "?"
        self.last_error = f"{where}: {rec.get('message', 'error')}"
        if rec.get("reason") in self._REPEATING:
            if (where, rec.get("message")) in self._logged_errors:
                return
            self._logged_errors.add((where, rec.get("message")))
        log.warning("%s: %s", rec.get("stage", "ingest"), self.last_error)

    def _on_partial(self, doc: dict) -> None:
        reasons = "; ".join(str(p.get("message")) for p in (doc.get("meta") or {}).get("partial") or [])
        log.warning("normalize: %s: partial document: %s", doc.get("path"), reasons)

    def _wait_time(self) -> float | None:
        if self._dirty:
            return max(0.0, 0.1 - (time.monotonic() - self._last_publish))
        return self.heartbeat_s  # None: sleep until a job or a change arrives

    def _busy_now(self) -> bool:
        return bool(self._jobs or self._busy or self._pending)

    def _maybe_publish(self, force: bool = False) -> None:
        """Publish the state when it changed (at once on idle <-> busy, else at most every
        0.1 s) and as a heartbeat every ``heartbeat_s``. Called with or without the lock."""
        now = time.monotonic()
        busy = self._busy_now()
        due = (
            force
            or busy != self._last_published_busy
            or (self._dirty and now - self._last_publish >= 0.1)
            or (self.heartbeat_s is not None and now - self._last_publish >= self.heartbeat_s)
        )
        if due:
            try:
                self._publish()
            except Exception as exc:  # a failed status write must not stop the writer
                log.warning("writer: cannot publish its state: %s", exc)
                self._last_publish = now

    def _state(self, state: str | None = None) -> dict[str, Any]:
        busy = self._busy_now()
        return {
            "pid": self.pid,
            "state": state or ("busy" if busy else "idle"),
            "busy": busy,
            "running": self._busy,
            "queue_depth": len(self._jobs),
            "pending": self._pending,
            "last_file": self.last_file,
            "last_error": self.last_error,
            "counts": dict(self.counts),
            "jobs": self.jobs_done,
            "ingest_rate": round(self.files_done / self.busy_seconds, 2) if self.busy_seconds else 0.0,
            "files_done": self.files_done,
            "busy_seconds": round(self.busy_seconds, 3),
            # seed 000 section 15's transaction time: this writer's write transactions (ms)
            "transactions": self.store.tx_stats(),
            "vacuumed_pages": self.store.vacuumed_pages,
            "started_at": round(self.started_at, 3),
            "idle_since": None if busy else round(self.idle_since, 3),
            "heartbeat_ms": now_ms(),
            "root": str(self.root),
            **self._extra,
        }

    def _publish(self, state: str | None = None) -> None:
        info = self._state(state)
        with self.store.write(timed=False):  # bookkeeping: not one of the transactions it reports
            self.store.set_meta(META_KEY, dumps(info))
        self._last_publish = time.monotonic()
        self._last_published_busy = info["busy"]
        self._dirty = False


class StillQueued(StoreError):
    """A write handed to the running writer has not run within the caller's wait (it stays queued)."""

    def __init__(self, message: str = "the write is still queued behind other work", *, hint: str | None = None):
        super().__init__(message, hint=hint or "call again shortly")


def run_write(
    job: Callable[[Store], T],
    *,
    writer: Writer | None = None,
    locked: LockedWrites | None = None,
    timeout: float | None = None,
    label: str | None = None,
) -> T:
    """Run ``job(store)`` as one write of a database: the write path of the MCP tools.

    With this process's running ``writer``, the job queues behind its work and runs on its
    thread; ``StillQueued`` if it has not finished within ``timeout`` seconds (it runs later).
    Without one, it runs under the database's writer lock, through ``locked``
    (:class:`kgr.store.lock.LockedWrites`, which waits for another process's write within its bound).
    """
    if writer is not None:
        future = writer.run(job, label=label)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise StillQueued() from None
    if locked is None:
        raise ValueError("run_write needs a writer or a LockedWrites")
    with locked() as store:
        return job(store)


def wait_for_idle(
    db_path: str | os.PathLike, timeout: float, *, settle: float | None = None, poll: float = 0.05
) -> tuple[bool, dict[str, Any] | None]:
    """Wait until the database's writer is idle (or no writer is alive).

    A database that does not exist yet is waited for: a `kgr watch` started at the same
    time creates it (taking the writer lock first). Idle must hold, unchanged, for
    ``settle`` seconds of polling (default: the watcher's debounce plus the time file events
    may take to arrive, ``watch.EVENT_LATENCY_S``), so that a change made just before the
    call has reached the watcher. Returns (True, state) when idle, (False, last state) on
    timeout (the database still missing included)."""

    deadline = time.monotonic() + timeout
    store: Store | None = None
    seen_idle: tuple[float, Any] | None = None
    info: dict[str, Any] | None = None
    try:
        while True:
            pid = writer_pid(db_path)
            if pid is None and Path(db_path).exists():
                return True, info
            if store is None and Path(db_path).exists():
                with contextlib.suppress(StoreError):
                    store = reading(db_path)
            if store is not None:
                with contextlib.suppress(Exception):
                    info = published_state(store)
            if info is not None and info.get("pid") == pid and not info.get("busy"):
                wait = settle if settle is not None else float(info.get("debounce_ms") or 0) / 1000 + 0.6
                if seen_idle is None or seen_idle[1] != info.get("idle_since"):
                    seen_idle = (time.monotonic(), info.get("idle_since"))
                elif time.monotonic() - seen_idle[0] >= wait:
                    return True, info
            else:
                seen_idle = None
            if time.monotonic() >= deadline:
                return False, info
            time.sleep(poll)
    finally:
        if store is not None:
            store.close()
