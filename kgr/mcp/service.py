"""What the tools of one ``kgr serve`` share: the :class:`Service`.

One database, opened once read-only for every read (one call at a time, within a time budget);
the knowledge root; the config; and the one write path of the tools, :meth:`Service.write`.
Writes go to the database's single writer (:class:`kgr.ingest.writer.Writer`), created on the
first write so that a read-only server never takes the writer lock, or, on a server without a
knowledge root, run under the writer lock taken for the call.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import orjson

from kgr import confine
from kgr.config import ServeSettings, Settings, settings_of
from kgr.errors import KgrError, StoreError, UsageError

log = logging.getLogger("kgr.serve")

T = TypeVar("T")

TIME_BUDGET_S = ServeSettings().time_budget_s
# How long a call waits for the read lane (calls run one at a time) before it gives up with an
# error: a call stuck in work the budget cannot stop must not stall every later call.
LANE_WAIT_S = 60.0
# The compact JSON of a result; the SDK sends it twice (text and structured content), so a
# response stays under 1 MB.
MAX_RESULT_BYTES = 400_000
# How long a write waits for this server's writer to run it (it stays queued after that).
WRITE_WAIT_S = 600.0
# How long a write of a server without a writer waits for another process's write (the writer
# lock): two memory servers on one database take turns; a long-running writer refuses them.
LOCK_WAIT_S = 5.0


class Budget:
    """A deadline for the SQLite work of one call, enforced by the progress handler."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.expired = False

    def start(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.expired = False

    def stop(self) -> None:
        self.deadline = None

    def __call__(self) -> bool:  # the progress handler: True interrupts the statement
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.expired = True
            return True
        return False


@dataclass
class Service:
    """What the tools share: the read-only store, the knowledge root, config and writer.

    ``writer``: a writer this server already started (a new database built from --root); else
    one is started on the first write that needs it.
    """

    db: Path
    cfg: Settings  # kgr.config.settings_of also takes a mapping, as the library does
    root: Path | None = None
    secrets: list[str] = field(default_factory=list)
    time_budget: float = TIME_BUDGET_S
    max_result_bytes: int = MAX_RESULT_BYTES
    lane_wait: float = LANE_WAIT_S
    writer: Any = None
    lock_wait: float = LOCK_WAIT_S

    def __post_init__(self) -> None:
        from kgr.store.lock import reading

        self.db = Path(self.db)
        self.cfg = settings_of(self.cfg)
        self.store = reading(self.db)
        if self.root is None:
            from kgr.store.root import stored_root

            self.root = stored_root(self.store)
        self.lock = threading.Lock()
        self.budget = Budget()
        self.store.conn.setprogresshandler(self.budget, 1000)
        self.store.budget = self.budget  # Python loops in the library check it too (Store.check_deadline)
        self.watcher = None
        self.tool_names: list[str] = []
        self._writer_lock = threading.Lock()
        self._locked = None
        self._embed = None
        self._hidden: list[str] | None = None
        self.closers: list[Callable[[], None]] = []  # run first by close() (a tool's page server)

    def expose(self, names: list[str]) -> None:
        """The tools this service is served with (the status tool reports them)."""
        self.tool_names = list(names)

    # -- reads ------------------------------------------------------------------

    @contextlib.contextmanager
    def lane(self):
        """The read connection, one call at a time; a call that waits past ``lane_wait`` gets an error."""
        if not self.lock.acquire(timeout=self.lane_wait):
            raise StoreError(
                f"the server is still busy with an earlier request after {self.lane_wait:g} s",
                hint="call again shortly",
            )
        try:
            yield self.store
        finally:
            self.lock.release()

    def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(store, ...)`` on the read connection, one call at a time, within the budget."""
        import apsw

        with self.lane():
            self.budget.start(self.time_budget)
            try:
                return fn(self.store, *args, **kwargs)
            except apsw.InterruptError:
                raise UsageError(
                    f"the request took longer than {self.time_budget:g} s and was stopped",
                    hint="ask for fewer results or fewer hops",
                ) from None
            finally:
                self.budget.stop()

    def embed_query(self):
        """The query embedder of the database's model (None without vectors), loaded once.

        Embedding restarts the time budget: loading the model is not the query's cost.
        """
        if self._embed is None:
            from kgr.retrieval.query import query_embedder

            inner = query_embedder(self.store, self.cfg)
            if inner is None:
                return None

            def embed(text: str):
                vec = inner(text)
                if self.budget.deadline is not None:
                    self.budget.start(self.time_budget)
                return vec

            self._embed = embed
        return self._embed

    def embedder(self):
        """The loaded embedder of the server's queries (the light ONNX path for the default model).

        :func:`kgr.embedders.get_embedder` shares one instance per configuration and process, so
        this is the very model :meth:`embed_query` runs: the authoring tools embed the nodes they
        write with it, and it loads once."""
        from kgr.embedders import get_embedder

        return get_embedder(self.cfg, purpose="query")

    def warm_up(self) -> None:
        """Load the query model and the vector matrix now, so the first query is warm."""
        try:
            from kgr.embedders import get_embedder
            from kgr.store import vectors

            with self.lock:
                has_vectors = vectors.stored_spec(self.store) is not None
            if not has_vectors:
                return
            vec = get_embedder(self.cfg, purpose="query").embed_queries(["warm up"])[0]  # outside the lock: slow
            with self.lock:
                self.embed_query()
                vectors.knn(self.store, vectors.CHUNK, vec, 1, in_memory=True)
        except Exception as exc:  # noqa: BLE001 - a failed warm-up is only slower queries
            log.warning("kgr serve: warm-up failed: %s", self.scrub(str(exc)))

    # -- writes ------------------------------------------------------------------

    def need_root(self) -> Path:
        if self.root is None:
            raise UsageError("this server has no knowledge root", hint="start it with --root DIR or --watch DIR")
        return self.root

    def get_writer(self):
        """The single writer, started on first use (so a read-only server takes no lock)."""
        with self._writer_lock:
            if self.writer is None:
                from kgr.ingest.writer import Writer

                self.writer = Writer(self.db, root=self.need_root(), config=self.cfg).start()
            return self.writer

    def write(self, job: Callable[[Any], T], *, start_writer: bool = True, label: str | None = None) -> T:
        """Run ``job(store)`` as a write: the one write path of the tools (:func:`kgr.ingest.writer.run_write`).

        On this server's writer when it runs, or, with ``start_writer``, when the server keeps a
        knowledge root (the writer starts now); ``StillQueued`` if it waits past WRITE_WAIT_S.
        Otherwise under the database's writer lock, taken for the call and waited for up to
        ``lock_wait`` while another process writes (then ``WriterBusy``).
        """
        from kgr.ingest.writer import run_write

        writer = self.writer
        if writer is None and start_writer and self.root is not None and Path(self.root).is_dir():
            writer = self.get_writer()
        locked = None if writer is not None else self._locked_writes()
        return run_write(job, writer=writer, locked=locked, timeout=WRITE_WAIT_S, label=label)

    def _locked_writes(self):
        with self._writer_lock:
            if self._locked is None:
                from kgr.store.lock import LockedWrites

                self._locked = LockedWrites(self.db, wait_s=self.lock_wait, keep_open=True)
            return self._locked

    def wait(self, future, timeout: float) -> Any:
        """The future's result, or None when it is not done within ``timeout`` seconds."""
        import concurrent.futures

        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            return None

    def writer_status(self) -> dict[str, Any]:
        """The writer's own state (queue depth, busy, last file and error, counts, ingest rate), with
        ``active``: whether this server has started its writer."""
        if self.writer is None:
            return {"active": False}
        try:
            st = dict(self.writer.status())
        except Exception as exc:  # noqa: BLE001
            return {"active": True, "error": self.scrub(str(exc))}
        st.pop("root", None)  # a host path; the root's name is in status.root
        return {"active": True, **st}

    def start_watch(self, directory: str) -> None:
        """The watcher of ``kgr watch``, feeding this server's one writer."""
        from kgr.ingest.watch import Watcher

        writer = self.get_writer()
        self.watcher = Watcher(directory, writer, config=self.cfg).start()
        writer.run(functools.partial(warm_writer, cfg=self.cfg), label="warm up")

    def close(self) -> None:
        for closer in self.closers:
            try:
                closer()
            except Exception as exc:  # noqa: BLE001
                log.warning("kgr serve: closing: %s", self.scrub(str(exc)))
        if self.watcher is not None:
            try:
                self.watcher.stop()
            except Exception as exc:  # noqa: BLE001
                log.warning("kgr serve: stopping the watcher: %s", self.scrub(str(exc)))
        if self.writer is not None:
            self.writer.close()
        if self._locked is not None:
            self._locked.close()
        self.store.close()

    # -- output hygiene ----------------------------------------------------------------

    def scrub(self, text: str) -> str:
        if self._hidden is None:
            hidden = {s for s in self.secrets if s}
            for p in (self.root, self.db.parent, self.db):
                if p is None:
                    continue
                for form in (Path(p).absolute(), Path(p).resolve()):
                    if len(form.parts) > 1:  # never "/" or "." (that would scrub every path)
                        hidden.add(str(form))
            self._hidden = sorted(hidden, key=len, reverse=True)
        if not any(h in text for h in self._hidden):
            return text
        return confine.scrub(text, *self._hidden)

    def fail(self, exc: KgrError) -> Exception:
        from mcp.server.mcpserver.exceptions import ToolError

        msg = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
        return ToolError(self.scrub(msg))

    def scrub_all(self, value: Any) -> Any:
        """Every string inside ``value`` scrubbed of host paths and secrets."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self.scrub_all(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub_all(v) for v in value]
        return value

    def reply(self, result: dict[str, Any]) -> Any:
        """A tool's own fresh ``result`` as the MCP result @boundary and the SDK would make of it
        (scrubbed, fitted to the byte budget, in text and structured content), in fewer passes: a
        result with no host path or secret in its JSON (a string holding one holds its escaped
        form: escaping is per character) is not walked string by string, and the text is its
        compact JSON (the SDK writes it indented, in two more passes over the result), the one
        serialisation that also measured it when nothing had to be scrubbed or cut."""
        from mcp_types import CallToolResult, TextContent

        self.scrub("")  # the hidden strings, computed once
        result.setdefault("truncated", False)
        data = orjson.dumps(result, default=str)
        if any(orjson.dumps(h)[1:-1] in data for h in self._hidden or ()):
            result = self.scrub_all(result)
            data = orjson.dumps(result, default=str)
        if len(data) > self.max_result_bytes:
            result = self.fit(result)
            data = orjson.dumps(result, default=str)
        return CallToolResult(content=[TextContent(type="text", text=data.decode())], structured_content=result)

    def fit(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` within the byte budget: its longest lists are halved until it fits. A list's
        last item goes only when no list has more than one, and the first list of the result (the
        tool's answer: chunks, entities, results) keeps its last item longest."""
        size = len(orjson.dumps(result, default=str))
        if size <= self.max_result_bytes:
            result.setdefault("truncated", False)
            return result
        while size > self.max_result_bytes:
            lists = [
                (len(orjson.dumps(v, default=str)), k, None) for k, v in result.items() if isinstance(v, list) and v
            ]
            lists += [
                (len(orjson.dumps(vv, default=str)), k, kk)
                for k, v in result.items()
                if isinstance(v, dict)
                for kk, vv in v.items()
                if isinstance(vv, list) and vv
            ]
            if not lists:
                break
            primary = next((k for k, v in result.items() if isinstance(v, list)), None)
            longer = [x for x in lists if len(result[x[1]] if x[2] is None else result[x[1]][x[2]]) > 1]
            _, key, sub = max(longer or [x for x in lists if (x[1], x[2]) != (primary, None)] or lists)
            seq = result[key] if sub is None else result[key][sub]
            del seq[max(1, len(seq) // 2) if len(seq) > 1 else 0 :]
            size = len(orjson.dumps(result, default=str))
        result["truncated"] = True
        return result


def warm_writer(store, *, cfg) -> None:
    """Load the writer's models (spaCy, the document embedder) now, on its own thread: the
    first saved edit is then answerable in about a second, not after the models load."""
    from kgr.stages.extract import load_nlp
    from kgr.store import vectors

    try:
        load_nlp(settings_of(cfg).extract.ner)("Warm up the pipeline.")
        if vectors.stored_spec(store) is not None:
            from kgr.embedders import get_embedder

            get_embedder(cfg, purpose="document").embed_documents(["warm up"])
    except Exception as exc:  # noqa: BLE001 - the first ingest will load them, or report why not
        log.warning("kgr serve: warming the writer failed: %s", exc)
