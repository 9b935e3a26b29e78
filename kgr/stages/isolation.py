"""Parsing in child processes, so a parser that hangs, explodes in memory or crashes
costs one error record instead of the run.

Children are started with ``spawn`` (no inherited database descriptors or locks), with
RLIMIT_AS and RLIMIT_CPU set, and each file has a wall-clock timeout; a child that
times out or dies is replaced. The pool is created lazily, on the first file that needs
it, so a run over unchanged files starts no process at all. Results come back in input
order while up to ``workers`` files are parsed at once.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterable, Iterator

from kgr.stages.parsers import Limits, parse_in_child


def _limit(memory_mb: int, cpu_s: int) -> None:
    if memory_mb:
        size = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    if cpu_s:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))


class ParserPool:
    def __init__(self, *, workers: int = 0, timeout_s: float = 90, memory_mb: int = 1024, cpu_s: int = 60):
        self.workers = workers or os.cpu_count() or 1
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.cpu_s = cpu_s
        self._pool = None

    @property
    def pool(self):
        if self._pool is None:
            import pebble

            self._pool = pebble.ProcessPool(
                max_workers=self.workers,
                context=multiprocessing.get_context("spawn"),
                initializer=_limit,
                initargs=(self.memory_mb, self.cpu_s),
            )
        return self._pool

    def submit(self, path: str, fmt: str, limits: Limits, parser: str | None = None):
        return self.pool.schedule(parse_in_child, args=(path, fmt, limits, parser), timeout=self.timeout_s)

    def result(self, future) -> dict[str, Any]:
        import pebble

        try:
            return future.result()
        except FutureTimeout:
            return {"ok": False, "reason": "timeout", "message": f"parsing took longer than {self.timeout_s:g}s"}
        except pebble.ProcessExpired as exc:
            code = exc.exitcode
            if code in (-24, 152):  # SIGXCPU: the CPU limit
                return {"ok": False, "reason": "timeout", "message": f"parsing used more than {self.cpu_s}s of CPU"}
            if code == -9:
                return {"ok": False, "reason": "memory", "message": "the parser was killed (out of memory)"}
            return {"ok": False, "reason": "crash", "message": f"the parser process died (exit {code})"}
        except MemoryError:
            return {"ok": False, "reason": "memory", "message": "the parser ran out of memory"}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join(timeout=10)
            self._pool = None


def ordered(
    items: Iterable[Any], start: Callable[[Any], Any], finish: Callable[[Any, Any], Any], window: int
) -> Iterator[Any]:
    """Run ``start`` on up to ``window`` items ahead, yield ``finish(item, started)`` in input order."""
    pending: deque = deque()
    for item in items:
        pending.append((item, start(item)))
        if len(pending) >= window:
            it, started = pending.popleft()
            yield finish(it, started)
    while pending:
        it, started = pending.popleft()
        yield finish(it, started)
