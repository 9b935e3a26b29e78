"""`kgr watch`: keep a knowledge folder ingested, driven by file events.

Events are hints, never data (Syncthing's rule): an event only marks a path as worth a
look. Each path waits for a quiet spell (the debounce, 300 ms by default, pushed back by
every new event on it, forced after ``max_delay``); then the writer looks at what is on
disk *now* (``pipeline.sync_paths``): a changed file is ingested, a gone one purged, and
bytes that turned up at a new path move their document there with its vectors kept.

So editor save styles converge by construction: vim's rename-to-backup, VS Code's
temp-and-rename and ``sed -i`` all end with the real path holding the new bytes, and
temporary names (``file~``, ``.file.swp``, ``4913``, ``.#file``, ``*.tmp``) are ignored by the
same rules discovery uses. More than ``burst_threshold`` pending paths, a lost-events
report from the kernel (inotify queue overflow), a dead observer thread or a changed
``.kgrignore`` turn into one scan of the whole root; a periodic scan (``scan_interval``)
is the backstop for anything else, and one runs at start-up (changes made while nothing
was watching). Every write goes through the one ``Writer``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from kgr.config import WatchSettings, settings_of
from kgr.ingest.writer import Writer

log = logging.getLogger("kgr.watch")

DEBOUNCE_MS = WatchSettings().debounce_ms
SCAN_INTERVAL_S = 600.0
# Syncthing's maxFiles: more pending paths than this become one scan of the whole root.
BURST_THRESHOLD = 512
# A path that keeps changing is still looked at after this long (Syncthing's notifyTimeout idea).
MAX_DELAY_S = 10.0
# watchdog holds an unpaired IN_MOVED_FROM (a move out of the root) for 0.5 s hoping for its
# IN_MOVED_TO: quiet must last longer than that before "idle" can be trusted.
EVENT_LATENCY_S = 0.6

# Opened and closed-without-writing events are noise (kgr's own parser reads files);
# folder modified events only say that a name inside changed, and that name has its own event.
EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


@dataclass
class WatchStats:
    events: int = 0  # events that marked a path
    ignored: int = 0  # events for ignored names (temp files, dotfiles, the database, .kgr/)
    batches: int = 0  # writer jobs for marked paths
    scans: int = 0  # writer jobs for the whole root
    scan_reasons: list[str] = field(default_factory=list)
    bursts: int = 0
    overflows: int = 0
    restarts: int = 0  # observer restarted after its thread died
    parsed: int = 0  # files parsed and loaded (IngestSummary.ingested + failed)
    moved: int = 0
    pruned: int = 0
    embedded: int = 0
    errors: int = 0  # writer jobs that raised

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["scan_reasons"] = self.scan_reasons[-20:]
        return d


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: "Watcher"):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        # An exception here would kill the observer thread silently (watchdog #793).
        try:
            self.watcher._on_event(event)
        except Exception:  # noqa: BLE001 - logged, and the periodic scan covers the loss
            log.exception("watch: cannot handle %s; the next scan will catch up", event)


class _OverflowLog(logging.Handler):
    """watchdog reports a kernel queue overflow only as a log line: turn it into a scan."""

    def __init__(self, watcher: "Watcher"):
        super().__init__(logging.WARNING)
        self.watcher = watcher

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.watcher._overflowed()


class Watcher:
    """Watch ``root`` and keep ``writer``'s database in step with it.

    ``Watcher(root, writer).start()`` returns at once; ``stop()`` ends the observer and
    the flusher thread (the writer stays open: its owner closes it). ``wait_idle()``
    waits until nothing is pending, queued or running.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        writer: Writer,
        *,
        debounce_ms: int | None = None,
        config=None,
        scan_interval: float | None = SCAN_INTERVAL_S,
        burst_threshold: int = BURST_THRESHOLD,
        max_delay: float = MAX_DELAY_S,
        polling: bool = False,
    ):
        from kgr.stages import normalize as norm

        if debounce_ms is None:  # the flag, else the config's watch.debounce_ms, else 300
            debounce_ms = settings_of(config).watch.debounce_ms or DEBOUNCE_MS

        self.root = Path(root).resolve()
        if not self.root.is_dir():
            from kgr.errors import UsageError

            raise UsageError(f"{root}: no such directory", hint="give the knowledge folder to watch")
        if self.root != writer.root:
            from kgr.errors import UsageError

            raise UsageError(f"the watcher's root {self.root} is not the writer's root {writer.root}")
        self.writer = writer
        self.debounce = max(0, int(debounce_ms)) / 1000
        self.scan_interval = scan_interval if scan_interval and scan_interval > 0 else None
        self.burst_threshold = max(1, int(burst_threshold))
        self.max_delay = max(self.debounce, float(max_delay))
        self.polling = polling
        self.stats = WatchStats()
        self._ignore = norm.read_kgrignore(self.root)
        self._db_names = self._database_names()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pending: dict[str, list[float]] = {}  # rel path -> [due, first seen]
        self._partners: dict[str, set[str]] = {}  # the two sides of a move are flushed together
        self._scan_due: list[float] | None = None  # [due, first seen] of a whole-root scan
        self._scan_reason = ""
        self._inflight = None  # the future of the writer job this watcher is waiting for
        self._last_scan = time.monotonic()
        self._observer = None
        self._thread: threading.Thread | None = None
        self._overflow_log = _OverflowLog(self)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> "Watcher":
        """Start watching (events first, so nothing changed during the start-up scan is
        missed), then reconcile the whole root."""
        for name in ("watchdog.observers.inotify_c", "watchdog.observers.inotify"):
            logging.getLogger(name).addHandler(self._overflow_log)
        self._start_observer()
        self.writer.set_pending(0, debounce_ms=int(self.debounce * 1000), watch=self.stats.as_dict())
        self._request_scan("start-up reconcile", now=True)
        self._thread = threading.Thread(target=self._run, name="kgr-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10) -> None:
        """Stop the observer and the flusher. Changes still pending are not lost: the next
        start-up scan finds them."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._stop_observer(timeout)
        for name in ("watchdog.observers.inotify_c", "watchdog.observers.inotify"):
            logging.getLogger(name).removeHandler(self._overflow_log)
        self.writer.set_pending(0)

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {
                "pending": len(self._pending),
                "scan_pending": self._scan_due is not None,
                "inflight": self._inflight is not None and not self._inflight.done(),
                "observer": type(self._observer).__name__ if self._observer else None,
                **self.stats.as_dict(),
            }

    def wait_idle(self, timeout: float, settle: float | None = None) -> bool:
        """Wait until nothing is pending, queued or running, unchanged for ``settle`` seconds
        (default: the debounce plus watchdog's move-pairing delay) so that a change made
        just before the call has reached the watcher. False on timeout."""
        settle = self.debounce + EVENT_LATENCY_S if settle is None else settle
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            if self._idle():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return True
            else:
                quiet_since = None
            time.sleep(0.02)
        return False

    def _idle(self) -> bool:
        with self._lock:
            if (
                self._pending
                or self._scan_due is not None
                or (self._inflight is not None and not self._inflight.done())
            ):
                return False
        st = self.writer.status()
        return not st["running"] and not st["queue_depth"]

    # -- the observer --------------------------------------------------------------------

    def _start_observer(self) -> None:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        handler = _Handler(self)
        observer = PollingObserver(timeout=1) if self.polling else Observer()
        try:
            observer.schedule(handler, str(self.root), recursive=True, event_filter=EVENTS)
            observer.start()
        except OSError as exc:
            if self.polling:
                raise
            # inotify limits (watchdog #673, #846): say which, and poll instead.
            log.error(
                "watch: cannot watch %s with inotify (%s); falling back to polling every second "
                "(raise fs.inotify.max_user_watches / max_user_instances to avoid this)",
                self.root,
                exc,
            )
            with _suppress():
                observer.stop()
            observer = PollingObserver(timeout=1)
            observer.schedule(handler, str(self.root), recursive=True)
            observer.start()
        self._observer = observer

    def _stop_observer(self, timeout: float) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            with _suppress():
                observer.stop()
                observer.join(timeout)

    def _observer_alive(self) -> bool:
        obs = self._observer
        if obs is None or not obs.is_alive():
            return False
        return all(e.is_alive() for e in getattr(obs, "emitters", ()))

    # -- events --------------------------------------------------------------------------

    def _rel(self, path: str | bytes) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        rel = os.path.relpath(path, self.root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
            return None
        return rel.replace(os.sep, "/")

    def _database_names(self) -> set[str]:
        db = self.writer.db_path.resolve()
        names = {db.name + suffix for suffix in ("", "-wal", "-shm", "-journal", ".writer.lock")}
        return names if db.parent == self.root or self.root in db.parents else set()

    def _wanted(self, rel: str, is_dir: bool) -> bool:
        from kgr.stages import normalize as norm

        if norm.ignored_path(rel, self._ignore):
            return False
        if rel.rsplit("/", 1)[-1] in self._db_names:
            return False
        return is_dir or Path(rel).suffix.lower() in norm.FORMATS

    def _on_event(self, event: FileSystemEvent) -> None:
        paths = [event.src_path]
        if getattr(event, "dest_path", None):
            paths.append(event.dest_path)
        marked = []
        for p in paths:
            rel = self._rel(p)
            if rel is None:
                continue
            if rel == ".kgrignore":
                from kgr.stages import normalize as norm

                self._ignore = norm.read_kgrignore(self.root)
                self._request_scan(".kgrignore changed")
                continue
            if self._wanted(rel, event.is_directory):
                marked.append(rel)
        if not marked:
            self.stats.ignored += 1
            return
        self.stats.events += 1
        now = time.monotonic()
        with self._lock:
            if self._scan_due is not None:
                # A whole-root scan is coming: it covers these; just let things settle first.
                self._scan_due[0] = min(max(self._scan_due[0], now + self.debounce), self._scan_due[1] + self.max_delay)
            else:
                for rel in marked:
                    entry = self._pending.get(rel)
                    if entry is None:
                        self._pending[rel] = [now + self.debounce, now]
                    else:
                        entry[0] = min(now + self.debounce, entry[1] + self.max_delay)
                if len(marked) == 2:
                    a, b = marked
                    self._partners.setdefault(a, set()).add(b)
                    self._partners.setdefault(b, set()).add(a)
                if len(self._pending) > self.burst_threshold:
                    n = len(self._pending)
                    self._pending.clear()
                    self._partners.clear()
                    self.stats.bursts += 1
                    log.info(
                        "watch: burst of %d changed paths (over %d): scanning the whole root instead",
                        n,
                        self.burst_threshold,
                    )
                    self._scan_due = [now + self.debounce, now]
                    self._scan_reason = f"burst of {n} paths"
            pending = len(self._pending) + (self._scan_due is not None)
        self.writer.set_pending(pending)
        self._wake.set()

    def _overflowed(self) -> None:
        self.stats.overflows += 1
        self._request_scan("the kernel dropped file events (inotify queue overflow)")

    def _request_scan(self, reason: str, *, now: bool = False) -> None:
        t = time.monotonic()
        with self._lock:
            self._pending.clear()
            self._partners.clear()
            due = t if now else t + self.debounce
            if self._scan_due is None:
                self._scan_due = [due, t]
                self._scan_reason = reason
            else:
                self._scan_due[0] = min(self._scan_due[0], due) if now else max(self._scan_due[0], due)
        self.writer.set_pending(1)
        self._wake.set()

    # -- the flusher -----------------------------------------------------------------------

    def _run(self) -> None:
        tick = max(0.02, min(0.1, self.debounce / 3 if self.debounce else 0.05))
        last_liveness = time.monotonic()
        while not self._stopping.is_set():
            self._wake.wait(tick)
            self._wake.clear()
            if self._stopping.is_set():
                break
            try:
                now = time.monotonic()
                if now - last_liveness >= 1.0:
                    last_liveness = now
                    self._check_observer()
                if self.scan_interval and now - self._last_scan >= self.scan_interval:
                    with self._lock:
                        idle_scan = self._scan_due is None
                    if idle_scan:
                        self._request_scan("periodic reconcile", now=True)
                self._flush()
            except Exception:  # noqa: BLE001 - the flusher must outlive any one failure
                log.exception("watch: flusher error; retrying")
                time.sleep(tick)

    def _check_observer(self) -> None:
        if self._observer_alive():
            return
        self.stats.restarts += 1
        log.error("watch: the file observer stopped; restarting it and scanning the whole root")
        self._stop_observer(2)
        self._start_observer()
        self._request_scan("observer restarted", now=True)

    def _flush(self) -> None:
        with self._lock:
            if self._inflight is not None:
                if not self._inflight.done():
                    return  # one job at a time: what becomes due meanwhile is batched together
                self._inflight = None
            now = time.monotonic()
            if self._scan_due is not None and self._scan_due[0] <= now:
                reason, self._scan_due = self._scan_reason, None
                paths = None
            else:
                due = {p for p, (when, _) in self._pending.items() if when <= now}
                if not due:
                    return
                todo = list(due)
                while todo:  # both sides of a move go together, whatever their own deadline
                    for other in self._partners.get(todo.pop(), ()):
                        if other in self._pending and other not in due:
                            due.add(other)
                            todo.append(other)
                for p in due:
                    self._pending.pop(p, None)
                    for other in self._partners.pop(p, ()):
                        self._partners.get(other, set()).discard(p)
                paths = sorted(due)
                reason = ""
            pending = len(self._pending) + (self._scan_due is not None)
        if paths is None:
            self.stats.scans += 1
            self.stats.scan_reasons.append(reason)
            self._last_scan = time.monotonic()
            log.info("watch: scanning %s (%s)", self.root, reason)
        else:
            self.stats.batches += 1
        future = self.writer.ingest(paths)
        started = time.monotonic()
        future.add_done_callback(lambda f: self._done(f, paths, reason, started))
        with self._lock:
            self._inflight = future
        self.writer.set_pending(pending, watch=self.stats.as_dict())

    def _done(self, future, paths, reason: str, started: float) -> None:
        exc = future.exception()
        if exc is not None:
            self.stats.errors += 1
            log.error("watch: %s failed: %s; a scan will retry", "scan" if paths is None else "update", exc)
            if paths is not None:
                self._request_scan(f"retry after a failed update ({exc})")
        else:
            s = future.result()
            self.stats.parsed += s.ingested + s.failed
            self.stats.moved += s.moved
            self.stats.pruned += s.pruned
            self.stats.embedded += s.embedded
            if s.ingested or s.moved or s.pruned or s.failed or paths is None:
                what = "scan" if paths is None else (paths[0] if len(paths) == 1 else f"{len(paths)} paths")
                log.info(
                    "watch: %s: %d ingested, %d moved, %d purged, %d failed, %d vectors (%.2fs)",
                    what,
                    s.ingested,
                    s.moved,
                    s.pruned,
                    s.failed,
                    s.embedded,
                    time.monotonic() - started,
                )
        self.writer.set_pending(self._pending_count(), watch=self.stats.as_dict())
        self._wake.set()

    def _pending_count(self) -> int:
        with self._lock:
            return len(self._pending) + (self._scan_due is not None)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], Exception)


def watch(
    root: str | os.PathLike,
    db_path: str | os.PathLike,
    *,
    config=None,
    debounce_ms: int = DEBOUNCE_MS,
    scan_interval: float | None = SCAN_INTERVAL_S,
    embed: bool = True,
    graph: bool = True,
    stop: threading.Event | None = None,
    polling: bool = False,
) -> None:
    """Watch ``root`` into ``db_path`` until ``stop`` is set (or KeyboardInterrupt)."""
    stop = stop or threading.Event()
    with Writer(db_path, root=root, config=config, embed=embed, graph=graph) as writer:
        watcher = Watcher(root, writer, debounce_ms=debounce_ms, scan_interval=scan_interval, polling=polling)
        log.info(
            "watch: watching %s into %s (pid %d, debounce %d ms)",
            watcher.root,
            writer.db_path,
            os.getpid(),
            debounce_ms,
        )
        watcher.start()
        try:
            while not stop.wait(0.5):
                pass
        finally:
            log.info("watch: stopping")
            watcher.stop()
