"""Where `kgr ingest` runs its per-document work: in this process, in worker processes on this
machine, or as Ray tasks.

The per-document work of an ingest (normalize + chunk a shard of files, extract a batch of
stored documents, embed a batch of texts) is three plain functions of this module, each
calling the stage functions behind the filters of those names. An engine maps one of them
over shards and hands the results back **in submission order**, so the one writer (the
pipeline, in this process) loads them in the order a single-process ingest does: document
ids, entity ids and linking never depend on which worker finished first. The corpus-wide
steps (gazetteer mining, aliases, linking) and every database write stay with the writer.

``LocalEngine`` calls the function in this process. ``ProcessEngine`` (the default of `kgr
ingest`) runs the extract step, whose time is spaCy's parse and the relation model, in worker
processes, one per core: each loads the models once and reads a batch of documents at a time,
while this process links and writes what comes back; normalizing (already a child process per
file) and embedding (already on every core) stay here. ``RayEngine`` (``pip install
'kgr[ray]'``) submits each shard as a Ray task (Ray's scheduler, object store and retries:
a worker that dies costs a retry of its shard, and since a shard's records reach the writer
only once the whole shard is done, never a half-loaded document), keeping a bounded window
of shards in flight so results stream back in batches rather than all at once. On ^C the
tasks in flight are cancelled and the writer stops where a single-process ingest would:
every document written so far is whole, in its own transaction.

Workers read the files by path: on a cluster of several machines the corpus must be on a
filesystem they share (the same path on each).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Iterable, Iterator

NORMALIZE_SHARD = 32  # files per normalize + chunk task
EMBED_SHARD = 256  # texts per embedding task (the local batch: vectors equal to the int8 value)


class LocalEngine:
    """The per-document work in this process, shard after shard."""

    name = "local"
    workers = 1

    def runs(self, step: str) -> bool:
        """Does this engine take ``step`` ("normalize", "extract", "embed") out of this process?"""
        return False

    def map(self, fn: Callable, shards: Iterable, *shared: Any) -> Iterator:
        for shard in shards:
            yield fn(shard, *shared)

    def close(self) -> None:
        pass


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _worker_start(parent: int) -> None:
    """A worker's numeric libraries use one thread each (the workers share the cores among them),
    and the worker ends when the process that started it is gone (killed with -9 it cannot
    stop them: they would wait for work forever, each holding its models)."""
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C is the writer's to handle: it stops the workers
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="kgr-parent-watch", daemon=True).start()


class ProcessEngine:
    """The extract step in worker processes on this machine (``workers``, one per core by
    default), results in submission order. The workers are started on first use (a fresh
    interpreter each: no thread or lock of this process is copied into them) and load the
    models once. At most twice as many shards as workers are in flight. When a worker dies
    (killed, out of memory), the shards it leaves undone are extracted in this process, so a
    run never ends worse than with ``LocalEngine``."""

    name = "processes"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or cores())
        self._pool = None
        self.fallbacks = 0  # shards extracted here after a worker died

    def runs(self, step: str) -> bool:
        return step == "extract" and self.workers > 1

    def _start(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_start,
                initargs=(os.getpid(),),
            )
        return self._pool

    def map(self, fn: Callable, shards: Iterable, *shared: Any) -> Iterator:
        from concurrent.futures.process import BrokenProcessPool

        pool = self._start()
        window = 2 * self.workers
        inflight: list = []  # (shard, future), oldest first
        broken = False
        try:
            for shard in shards:
                inflight.append((shard, None if broken else pool.submit(fn, shard, *shared)))
                while len(inflight) >= window or (broken and inflight):
                    result, broken = self._next(inflight, fn, shared, broken, BrokenProcessPool)
                    yield result
            while inflight:
                result, broken = self._next(inflight, fn, shared, broken, BrokenProcessPool)
                yield result
        except BaseException:  # ^C, or the writer stopped reading: the work in flight is dropped
            self._stop()
            raise

    def _next(self, inflight: list, fn: Callable, shared: tuple, broken: bool, BrokenProcessPool) -> tuple[Any, bool]:
        shard, future = inflight[0]
        if future is not None and not broken:
            try:
                result = future.result()
                inflight.pop(0)
                return result, broken
            except BrokenProcessPool:
                import logging

                logging.getLogger("kgr").warning("ingest: a worker process died; the rest is extracted here")
                broken = True
        self.fallbacks += 1
        result = fn(shard, *shared)
        inflight.pop(0)
        return result, broken

    def _stop(self) -> None:
        """End the workers now, whatever they are doing."""
        if self._pool is not None:
            for proc in list((self._pool._processes or {}).values()):
                proc.terminate()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class RayEngine:
    """The per-document work as Ray tasks, results in submission order.

    ``address``: a running cluster (``ray start --head``, or ``auto``); None starts a local
    one for this run (``num_cpus`` of it, all cores by default) and stops it at the end.
    """

    name = "ray"

    def runs(self, step: str) -> bool:
        return True

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None, max_retries: int = 3):
        try:
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the extra being installed
            from kgr.errors import ConfigError

            raise ConfigError("--engine ray needs Ray: pip install 'kgr[ray]'") from exc
        self.ray = ray
        self.address, self.num_cpus, self.max_retries = address, num_cpus, max_retries
        self.started = False  # a Ray this engine started (and stops on close)
        self.workers = 0  # the cluster's CPUs, once connected
        self._remote: dict[Callable, Any] = {}
        self.waited = 0.0  # seconds the writer spent waiting for results (bench/bench_ray.py)

    def connect(self) -> None:
        """Join the cluster (or start a local one) on first use: an ingest with nothing to
        parse, extract or embed starts no Ray at all."""
        ray = self.ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                kwargs["address"] = self.address
            elif self.num_cpus:
                kwargs["num_cpus"] = self.num_cpus
            # the workers import kgr from where this process does (on other machines kgr is
            # installed with the same version)
            kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": os.pathsep.join(_import_paths())}}
            ray.init(**kwargs)
            self.started = True
        self.workers = max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _task(self, fn: Callable):
        if fn not in self._remote:
            self._remote[fn] = self.ray.remote(num_cpus=1, max_retries=self.max_retries)(fn)
        return self._remote[fn]

    def map(self, fn: Callable, shards: Iterable, *shared: Any) -> Iterator:
        """``fn(shard, *shared)`` for each shard as a task, yielded in order; ``shared`` goes
        into the object store once. At most twice as many shards as workers are in flight."""
        ray = self.ray
        if not self.workers:
            self.connect()
        task = self._task(fn)
        refs = [ray.put(s) for s in shared]
        window = 2 * self.workers
        inflight: list = []
        try:
            for shard in shards:
                inflight.append(task.remote(shard, *refs))
                if len(inflight) >= window:
                    yield self._next(inflight)
            while inflight:
                yield self._next(inflight)
        finally:
            for ref in inflight:  # ^C, or the writer stopped reading: stop the cluster work
                ray.cancel(ref, force=True)

    def _next(self, inflight: list):
        """The oldest task's result, taken off ``inflight`` only once it is here (so that ^C
        while waiting for it cancels it too)."""
        began = time.perf_counter()
        try:
            result = self.ray.get(inflight[0])
        finally:
            self.waited += time.perf_counter() - began
        inflight.pop(0)
        return result

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def make(name: str | None, address: str | None = None, *, num_cpus: int | None = None):
    """The engine called ``name`` ("local", the default; "processes", with ``num_cpus``
    workers, one per core by default; or "ray")."""
    if name in (None, "local"):
        return LocalEngine()
    if name == "processes":
        return ProcessEngine(num_cpus)
    if name == "ray":
        return RayEngine(address, num_cpus=num_cpus)
    from kgr.errors import ConfigError

    raise ConfigError(f"unknown engine {name!r}: expected 'local', 'processes' or 'ray'")


def _import_paths() -> list[str]:
    import kgr

    here = os.path.dirname(os.path.dirname(os.path.abspath(kgr.__file__)))
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return list(dict.fromkeys([here, *extra]))


def shards(items: list, size: int) -> Iterator[list]:
    for at in range(0, len(items), size):
        yield items[at : at + size]


# -- the per-document work: plain functions over one shard, run by either engine ------------


def normalize_chunk_shard(files: list, options, root: str, chunk_options: dict) -> list[dict]:
    """``kgr normalize | kgr chunk`` over a shard of files: doc, chunk and error records in file order."""
    from kgr.stages import chunk as chunking
    from kgr.stages import normalize as norm

    return list(chunking.chunk(norm.normalize_files(files, options=options, root=root), **chunk_options))


_EXTRACTORS: dict[str, Any] = {}


def extractor(cfg, terms: list[tuple], stamp: str):
    """The extractor of ``cfg`` with the gazetteer of ``terms``, built once per process and gazetteer."""
    if stamp not in _EXTRACTORS:
        from kgr.stages.extract import Gazetteer, GazTerm, extractor_from_config

        _EXTRACTORS.clear()
        _EXTRACTORS[stamp] = extractor_from_config(cfg, Gazetteer(GazTerm(*t) for t in terms))
    return _EXTRACTORS[stamp]


def extract_shard(docs: list[list[dict]], cfg, terms: list[tuple], stamp: str) -> list[tuple[list[dict], str | None]]:
    """``kgr extract`` over a batch of stored documents (each its doc record, then its chunk
    records): for each, (the extract stage's records, None) or ([], why it failed). The
    batch's blocks go through spaCy in one stream, as a single-process ingest parses them."""
    from kgr.ingest.graphbuild import extract_batch

    return extract_batch(extractor(cfg, terms, stamp), docs)


_EMBEDDERS: dict[str, Any] = {}


def embed_shard(texts: list[str], cfg) -> Any:
    """The document vectors of ``texts`` (float32 rows), the embedding model loaded once per process."""
    from kgr.embedders import get_embedder

    key = repr(cfg.embed)
    if key not in _EMBEDDERS:
        _EMBEDDERS.clear()
        _EMBEDDERS[key] = get_embedder(cfg, purpose="document")
    return _EMBEDDERS[key].embed_documents(texts)
