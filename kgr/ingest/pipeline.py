"""`kgr ingest`: the stages composed in one process, record by record, without serialization.

    discover -> skip unchanged -> normalize -> chunk -> load     (the changed files)
             -> extract -> link -> store the graph                (documents without a current graph)
             -> embed                                             (chunks and entities without a vector)

normalize, chunk, load, extract and link are the very functions behind the filters of those
names (``kgr normalize`` ...), handing records on one by one; the stored documents and
chunks are the same as ``kgr normalize | kgr chunk | kgr load`` gives (a test compares
them). Unchanged files are skipped before any parsing: first by mtime and size, then by the
hash of their bytes, so a second run over an unchanged tree reads no file content, starts no
parser process and loads no model.

The graph is built in a second pass over the stored documents (kgr.ingest.graphbuild), not
in the first stream, because linking uses what is mined from the whole corpus (the
gazetteer, declared aliases), the documents of this run included. Vectors come last, from
the database (kgr.store.vectors.embed_pending) rather than through ``kgr embed``'s records:
a chunk or entity whose text already has a vector is skipped by hash, and an entity's text
is final only once every document has been linked.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from kgr import records
from kgr.stages.load import LoadSummary, delete_docs, load
from kgr.store import Store, dumps, loads, now_ms
from kgr.store.root import check_project, check_root


@dataclass
class IngestSummary:
    seen: int = 0
    ingested: int = 0
    unchanged: int = 0
    failed: int = 0
    chunks: int = 0
    pruned: int = 0
    extracted: int = 0  # documents whose graph was (re)built
    extract_failed: int = 0  # documents whose extraction failed (recorded; retried when their text changes)
    embedded: int = 0  # chunk and entity vectors stored (from the model or the cache)
    moved: int = 0  # documents given a new path with their rows and vectors kept (sync_paths)
    partial: int = 0  # documents stored but not whole (truncated, undecodable bytes replaced): see meta.partial
    seconds: float = 0.0

    def line(self) -> str:
        moved = f"{self.moved} moved, " if self.moved else ""
        partial = f"{self.partial} partial, " if self.partial else ""
        return (
            f"{self.seen} files seen, {self.ingested} ingested, {self.unchanged} unchanged, "
            f"{self.failed} failed, {partial}{moved}{self.pruned} pruned, {self.chunks} chunks, {self.extracted} graphed, "
            + (f"{self.extract_failed} not graphed (extraction failed), " if self.extract_failed else "")
            + f"{self.embedded} vectors in {self.seconds:.1f}s"
        )

    def as_dict(self) -> dict:
        return {"kind": "summary", **self.__dict__, "seconds": round(self.seconds, 3)}


def resolve_root(paths: list[str], root: str | None) -> Path:
    if root is not None:
        return Path(root).resolve()
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return Path(paths[0]).resolve()
    return Path.cwd().resolve()


def ingest(
    paths: Iterable,  # paths (files, folders, globs), or normalize.FileRef items already discovered
    store: Store,
    *,
    root: str | None = None,
    config=None,
    prune: bool = True,
    progress: bool = False,
    on_error: Callable[[dict], None] | None = None,
    graph: bool = True,
    embed: bool = True,
    on_partial: Callable[[dict], None] | None = None,
    engine=None,
) -> IngestSummary:
    """``on_error`` is called with each error record; ``on_partial`` with each doc record
    stored but not whole (``meta.partial``), counted in ``summary.partial``. ``engine``
    (kgr.ingest.engine: this process by default, or Ray) runs the per-document work
    (normalize + chunk, extract, embed); this process stays the one writer, loading the
    results in the order it would have made them itself."""
    from kgr import config as config_mod
    from kgr.stages import normalize as norm

    started = time.perf_counter()
    cfg = config_mod.settings_of(config) if config is not None else config_mod.load()
    paths = list(paths)
    root_path = resolve_root(paths, root)
    check_root(store, root_path)
    check_project(store, cfg.project)
    summary = IngestSummary()
    known = {
        path: (mtime, size, fhash)
        for path, mtime, size, fhash in store.query(
            "SELECT path, mtime_ms, size, file_hash FROM docs WHERE source='file'"
        )
    }
    found: list = [p for p in paths if isinstance(p, norm.FileRef)]  # already discovered (sync_paths)
    errors: list[dict] = []
    paths = [p for p in paths if not isinstance(p, norm.FileRef)]
    for item in norm.discover(paths, root=str(root_path)) if paths else ():
        (errors if isinstance(item, dict) else found).append(item)
    found = _allowed_files(found, paths, root_path, cfg.security.allowlist, errors)
    summary.seen = len(found)
    seen_paths = {f.rel_path for f in found}

    touched: list[tuple] = []
    changed = [f for f in found if _changed(f, known, touched)]
    summary.unchanged = len(found) - len(changed)
    if touched:
        with store.write() as conn:
            conn.executemany("UPDATE docs SET mtime_ms=?, size=? WHERE path=?", touched)

    def partial(doc: dict) -> None:
        summary.partial += 1
        if on_partial:
            on_partial(doc)

    # 1. normalize -> chunk -> load, the changed files only
    load_summary = LoadSummary()
    if changed:
        load_summary = _normalize_chunk_load(
            changed, store, cfg, root_path, errors, progress, on_error, partial, engine=engine
        )
    else:
        for err in errors:
            if on_error:
                on_error(err)
    summary.ingested = load_summary.written + load_summary.unchanged
    summary.failed = load_summary.errors if changed else len(errors)
    summary.chunks = load_summary.chunks

    if prune:
        summary.pruned = _prune(store, paths, root_path, seen_paths)
    # 2. extract -> link -> store, every document without a current graph: a second pass,
    # since linking reads what is mined from the whole corpus, this run's documents included
    if graph:
        summary.extracted = _build_graph(store, cfg, summary, on_error, use_vectors=embed, engine=engine)
    # 3. embed what has no vector for its current text, entities with their final names
    if embed:
        summary.embedded = embed_store(store, cfg, engine=engine)
    summary.seconds = time.perf_counter() - started
    return summary


RUN_META_KEY = "ingest_run"


def record_run(store: Store, summary: IngestSummary) -> None:
    """Keep the figures of a one-off ``kgr ingest`` run (files, seconds, rate, its write
    transactions) in the meta table, where ``kgr status`` finds them once it has exited."""
    files = summary.ingested + summary.moved + summary.pruned
    info = {
        "ts_ms": now_ms(),
        "files_done": files,
        "seconds": round(summary.seconds, 3),
        "ingest_rate": round(files / summary.seconds, 2) if summary.seconds else 0.0,
        "transactions": store.tx_stats(),
    }
    with store.write(timed=False):
        store.set_meta(RUN_META_KEY, dumps(info))


def _allowed_files(found: list, paths: list, root: Path, allowlist, errors: list[dict]) -> list:
    """The files of ``found`` that the path allowlist lets be read (seed 000 section 16); a file
    named on its own (not reached by walking a folder or a glob) and refused is an error record."""
    if not allowlist:
        return found
    from kgr import confine

    named = {os.path.realpath(p) for p in paths if isinstance(p, (str, os.PathLike)) and os.path.isfile(p)}
    kept = []
    for f in found:
        if confine.allowed(f.rel_path, allowlist, root=root):
            kept.append(f)
        elif os.path.realpath(root / f.rel_path) in named:
            errors.append(
                records.error(
                    "normalize", f"{f.rel_path}: {confine.NOT_ALLOWED}", path=f.rel_path, reason="not_allowed"
                )
            )
    return kept


def _build_graph(store: Store, cfg, summary: IngestSummary, on_error, *, use_vectors: bool = True, engine=None) -> int:
    """build_pending, counting the documents whose extraction failed into ``summary``."""
    from kgr.ingest.graphbuild import build_pending

    def failed(rec: dict) -> None:
        summary.extract_failed += 1
        if on_error:
            on_error(rec)

    return build_pending(store, cfg, use_vectors=use_vectors, on_error=failed, engine=engine)


def embed_store(store: Store, cfg, *, on_batch=None, light: bool = False, docs=None, engine=None) -> int:
    """Embed the chunks and entities that have no current vector; the model loads only if any.

    This works on the database, not on the embed stage's records (``kgr embed`` stamps each
    chunk and entity record as it passes): what needs a vector is known only from the store
    (a chunk or entity whose text already has one is skipped by its hash, so an unchanged
    corpus loads no model), and an entity's text (name, type, aliases) is final only once
    every document of the run has been linked, after the records that carried it went by.
    ``kgr embed --pending`` runs this same function. ``light``: the default model on the light
    ONNX path (the same vectors, cosine >= 0.9999, without loading torch), for a few texts
    written one at a time (a remembered memory); ``docs``: only these documents' chunks (and
    every entity) are looked at; ``engine``: where the texts are embedded (kgr.ingest.engine),
    this process by default."""
    from kgr.config import settings_of
    from kgr.store import vectors

    cfg = settings_of(cfg)
    embed = cfg.embed

    def get():
        from kgr.embedders import get_embedder

        return get_embedder(cfg, purpose="query" if light else "document")

    embed_many = None
    if engine is not None and engine.runs("embed") and not light:
        from kgr.ingest import engine as engines

        def embed_many(batches):
            return engine.map(engines.embed_shard, batches, cfg)

    counts = vectors.embed_pending(
        store,
        get,
        quantize=embed.quantize,
        batch=max(32, embed.batch_size * 8),
        on_batch=on_batch,
        docs=docs,
        embed_many=embed_many,
        sentences=embed.sentences and not light,  # a remembered memory is recalled by its own vector
    )
    if counts["embedded"] and not light:
        from kgr.embedders import prepare_query_path

        prepare_query_path(cfg)  # torch is loaded now anyway: make `kgr query` start fast
    return counts["chunks"] + counts["entities"]


def _changed(f, known: dict, touched: list) -> bool:
    """True when the file must be parsed; files unchanged but touched are remembered."""
    from kgr.stages import normalize as norm

    stored = known.get(f.rel_path)
    if stored is None:
        return True
    mtime, size, fhash = stored
    if mtime == f.mtime_ms and size == f.size:
        return False
    if size == f.size and fhash is not None:
        try:
            current = norm.file_hash(f.abs_path)
        except OSError:
            return True
        if current == fhash:
            touched.append((f.mtime_ms, f.size, f.rel_path))
            return False
    return True


def _normalize_chunk_load(
    changed, store, cfg, root_path, errors, progress, on_error, on_partial, *, engine=None
) -> LoadSummary:
    """``kgr normalize | kgr chunk | kgr load`` over the changed files: the stage generators
    chained, each record handed on as it is made; the progress bar and the error and partial
    callbacks watch the stream between them. Another ``engine`` runs normalize and chunk over
    shards of the files; their records come back shard by shard in file order, as one
    process makes them."""
    from kgr.stages import chunk as chunking
    from kgr.stages import normalize as norm

    options = norm.NormalizeOptions.from_config(cfg)
    bar = _progress(len(changed)) if progress else None

    def report(recs: Iterable[dict]) -> Iterator[dict]:
        yield from errors
        for rec in recs:
            if rec.get("kind") == records.DOC or (rec.get("kind") == records.ERROR and rec.get("stage") == "normalize"):
                if bar is not None:
                    bar.advance(rec.get("path"))
                if rec.get("kind") == records.DOC and (rec.get("meta") or {}).get("partial"):
                    on_partial(rec)
            yield rec

    def notify(recs: Iterable[dict]) -> Iterator[dict]:
        for rec in recs:
            if rec.get("kind") == records.ERROR and on_error:
                on_error(rec)
            yield rec

    chunk_options = chunking.options_from_config(cfg)
    if engine is None or not engine.runs("normalize"):
        docs = report(norm.normalize_files(changed, options=options, root=str(root_path)))
        stream = notify(chunking.chunk(docs, **chunk_options))
    else:
        import dataclasses

        from kgr.ingest import engine as engines
        from kgr.stages.redact import default_key

        if options.redact and options.redact_key is None:  # this machine's key, not each worker's
            options = dataclasses.replace(options, redact_key=default_key())
        parts = engine.map(
            engines.normalize_chunk_shard,
            engines.shards(changed, engines.NORMALIZE_SHARD),
            options,
            str(root_path),
            chunk_options,
        )
        stream = notify(report(rec for part in parts for rec in part))
    try:
        return load(stream, store)
    finally:
        if bar is not None:
            bar.close()


def _prune(store: Store, paths: list[str], root: Path, seen: set[str]) -> int:
    """Purge documents under the given directories whose files were not found."""
    prefixes = []
    for p in paths:
        if not os.path.isdir(p):
            continue
        rel = os.path.relpath(os.path.abspath(p), root)
        if rel == ".":
            prefixes = [""]
            break
        if not rel.startswith(".."):
            prefixes.append(rel.replace(os.sep, "/") + "/")
    if not prefixes:
        return 0
    stored = [p for (p,) in store.query("SELECT path FROM docs WHERE source='file'")]
    gone = [p for p in stored if p not in seen and any(p.startswith(pre) for pre in prefixes)]
    return delete_docs(store, gone)


class _progress:
    """A rich progress bar on stderr (only used when stderr is a terminal)."""

    def __init__(self, total: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("[bold]ingest"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[path]}", style="dim"),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.progress.add_task("ingest", total=total, path="")
        self.progress.start()

    def advance(self, path: str | None) -> None:
        self.progress.update(self.task, advance=1, path=(path or "")[-50:])

    def close(self) -> None:
        self.progress.stop()


# -- keeping a root in sync from change hints (kgr watch, the writer) --------------------


def sync_paths(
    store: Store,
    root: str | os.PathLike,
    paths: Iterable[str | os.PathLike] | None = None,
    *,
    config=None,
    graph: bool = True,
    embed: bool = True,
    on_error: Callable[[dict], None] | None = None,
    on_partial: Callable[[dict], None] | None = None,
    force: bool = False,
    tags: Iterable[str] | None = None,
) -> IngestSummary:
    """Make the database agree with what is on disk now at ``paths`` (files or folders,
    present or gone, absolute or relative to ``root``); ``None`` reconciles the whole root.

    Paths are hints, as file events are: each is looked at afresh. A file is ingested
    when it changed, a stored document whose file is gone (or now ignored) is purged, and
    a gone document whose bytes turn up at a new path (a rename, a folder move) is moved
    there with its chunks, vectors and graph kept, so nothing is embedded again.

    ``force`` parses, loads and extracts every file found again, changed or not (vectors
    stay cached by content hash); ``tags`` are added to every document found (kept across
    later ingests, see :func:`tag_docs`).
    """
    from kgr import config as config_mod
    from kgr import confine
    from kgr.stages import normalize as norm

    started = time.perf_counter()
    root_path = Path(root).resolve()
    cfg = config_mod.settings_of(config) if config is not None else _default_config()
    check_root(store, root_path)
    check_project(store, cfg.project)
    ignore = norm.kgrignore(root_path)
    allowlist = cfg.security.allowlist

    def permitted(rel: str) -> bool:  # the path allowlist: what is refused is treated as ignored
        return confine.allowed(rel, allowlist, root=root_path)

    stored = {
        path: (fhash, fmt, size)
        for path, fhash, fmt, size in store.query("SELECT path, file_hash, format, size FROM docs WHERE source='file'")
    }
    present: dict[str, norm.FileRef] = {}
    gone: set[str] = set()
    for target in [root_path] if paths is None else paths:
        rel = _rel_to_root(target, root_path)
        if rel is None:
            continue  # outside the root: never ours
        prefix = "" if rel == "" else rel + "/"
        absolute = root_path / rel if rel else root_path
        if rel and (norm.ignored_path(rel, ignore) or _leaves_root(absolute, root_path)):
            found: list = []
        elif absolute.is_dir() and not absolute.is_symlink():
            found = [
                item
                for item in norm.discover([str(absolute)], root=str(root_path))
                if isinstance(item, dict) or permitted(item.rel_path)
            ]
        elif rel and not permitted(rel):
            found = []
            prefix = None
        elif absolute.is_file():
            try:
                found = (
                    [norm.file_ref(absolute, root_path, absolute.stat())]
                    if absolute.suffix.lower() in norm.FORMATS
                    else []
                )
            except OSError:
                found = []
            prefix = None  # a file has nothing under it
        else:
            found = []
        for item in found:
            if isinstance(item, dict):
                if item.get("reason") != "not_found" and on_error:
                    on_error(item)  # a bad file name; a file that vanished meanwhile is just gone
            else:
                present[item.rel_path] = item
        if rel in stored and rel not in present:
            gone.add(rel)
        if prefix is not None:
            gone.update(p for p in stored if p.startswith(prefix) and p not in present)

    moves = _match_moves(present, gone, stored, root_path, ignore)
    summary = IngestSummary()
    moved: list[str] = []
    for old, ref in moves:
        if move_doc(store, old, ref.rel_path, mtime_ms=ref.mtime_ms, size=ref.size):
            summary.moved += 1
            gone.discard(old)
            present.pop(ref.rel_path, None)
            moved.append(ref.rel_path)
    if force and present:
        # forget what was seen of these files, so each is parsed, loaded and extracted again
        with store.write() as conn:
            conn.executemany(
                "UPDATE docs SET mtime_ms=NULL, size=NULL, file_hash=NULL, graph_sig=NULL WHERE path=?",
                [(p,) for p in present],
            )

    inner = ingest(
        list(present.values()),
        store,
        root=str(root_path),
        config=config,
        prune=False,
        graph=False,
        embed=False,
        on_error=on_error,
        on_partial=on_partial,
    )
    for name in ("ingested", "unchanged", "failed", "chunks", "partial"):
        setattr(summary, name, getattr(inner, name))
    summary.seen = inner.seen + summary.moved
    if tags:
        tag_docs(store, [*present, *moved], tags)
    # Purge only what is still missing now: a file written back meanwhile stays.
    still_gone = [p for p in sorted(gone) if not _present_now(root_path / p, root_path, ignore) or not permitted(p)]
    summary.pruned = delete_docs(store, still_gone)
    # Chunk vectors before the graph, so an edit is answerable by hybrid search as soon as
    # possible (extraction is the slow part); then the new entities' vectors.
    if embed:
        summary.embedded += embed_store(store, cfg)
    if graph:
        summary.extracted = _build_graph(store, cfg, summary, on_error)
        if embed and summary.extracted:
            summary.embedded += embed_store(store, cfg)
    summary.seconds = time.perf_counter() - started
    return summary


def clean_tags(tags: Iterable[str] | None) -> list[str]:
    """The tags stripped, empty ones dropped, each once (compared without case), in order."""
    out: list[str] = []
    for t in tags or ():
        t = str(t).strip()
        if t and t.lower() not in {x.lower() for x in out}:
            out.append(t)
    return out


def tag_docs(store: Store, paths: Iterable[str], tags: Iterable[str]) -> int:
    """Add ``tags`` (origin 'ingest') to the stored documents at ``paths``; return how many
    documents were found. Tags are added, never replaced: a later ingest without tags keeps them."""
    tags = clean_tags(tags)
    paths = list(paths)
    if not tags or not paths:
        return 0
    found = 0
    with store.write() as conn:
        for path in paths:
            row = conn.execute("SELECT id FROM docs WHERE path=?", (path,)).fetchone()
            if row is None:
                continue
            found += 1
            conn.executemany(
                "INSERT OR IGNORE INTO doc_tags(doc_id, tag, origin) VALUES (?, ?, 'ingest')",
                [(row[0], t) for t in tags],
            )
    return found


def _default_config():
    from kgr import config as config_mod

    return config_mod.load()


def _rel_to_root(target: str | os.PathLike, root: Path) -> str | None:
    """``target`` relative to the root, in POSIX form ("" for the root); None when outside.

    Symlinks in the target's own name are not resolved (a link is judged where it points
    when it is read), but its parent folders are, so a root reached through a link works.
    """
    p = Path(target)
    if not p.is_absolute():
        p = root / p
    parent = Path(os.path.realpath(p.parent)) if p.name else Path(os.path.realpath(p))
    full = parent / p.name if p.name not in ("", ".", "..") else Path(os.path.realpath(p))
    try:
        rel = full.relative_to(root).as_posix()
    except ValueError:
        return None
    return "" if rel == "." else rel


def _leaves_root(path: Path, root: Path) -> bool:
    """True when a symlink (the path itself or a folder above it) points out of the root."""
    try:
        Path(os.path.realpath(path)).relative_to(root)
        return False
    except ValueError:
        return True


def _present_now(path: Path, root: Path, ignore: list[str]) -> bool:
    from kgr.stages import normalize as norm

    rel = path.relative_to(root).as_posix()
    return (
        path.is_file()
        and path.suffix.lower() in norm.FORMATS
        and not norm.ignored_path(rel, ignore)
        and not _leaves_root(path, root)
    )


def _match_moves(
    present: dict, gone: set[str], stored: dict, root: Path, ignore: list[str]
) -> list[tuple[str, object]]:
    """(old path, new file) pairs: a new file whose bytes and format are those of a stored
    document whose own file is gone, whether or not that path is among the hints (the two
    sides of a move may arrive in different batches)."""
    from kgr.stages import normalize as norm
    from kgr.stages.parsers import FORMATS

    by_key: dict[tuple, list[str]] = {}
    for old, (fhash, fmt, size) in stored.items():
        if fhash and old not in present:
            by_key.setdefault((size, fmt), []).append(old)
    if not by_key:
        return []
    moves = []
    taken: set[str] = set()
    for rel, ref in sorted(present.items()):
        if rel in stored:
            continue
        olds = by_key.get((ref.size, FORMATS.get(Path(rel).suffix.lower())))
        if not olds:
            continue
        try:
            fhash = norm.file_hash(ref.abs_path)
        except OSError:
            continue
        for old in sorted(olds, key=lambda p: p not in gone):  # the hinted ones first
            if old in taken or stored[old][0] != fhash:
                continue
            if old in gone or not _present_now(root / old, root, ignore):
                taken.add(old)
                moves.append((old, ref))
                break
    return moves


def move_doc(store: Store, old: str, new: str, *, mtime_ms: int | None = None, size: int | None = None) -> bool:
    """Give the stored document at ``old`` the path ``new``, keeping its chunks, vectors and
    graph: the file was renamed or moved with its bytes unchanged. The path-derived parts
    (chunk preludes, a title taken from the file name, breadcrumbs) follow; the vectors,
    made from the old prelude, are kept on purpose (a move is not worth re-embedding).
    Returns False when there is nothing at ``old`` or something already at ``new``."""
    from kgr.stages.chunk import moved_prelude

    with store.write() as conn:
        row = conn.execute("SELECT id, title, meta FROM docs WHERE path=?", (old,)).fetchone()
        if row is None or conn.execute("SELECT 1 FROM docs WHERE path=?", (new,)).fetchone():
            return False
        doc_id, title, meta_text = row
        meta = loads(meta_text, {}) or {}
        if meta.get("breadcrumbs") == old.split("/")[:-1]:
            meta["breadcrumbs"] = new.split("/")[:-1]
        if title == Path(old).stem:
            title = Path(new).stem
        conn.execute(
            "UPDATE docs SET path=?, title=?, meta=?, mtime_ms=coalesce(?, mtime_ms), size=coalesce(?, size), updated_ms=? WHERE id=?",
            (new, title, dumps(meta), mtime_ms, size, now_ms(), doc_id),
        )
        rows = conn.execute("SELECT id, prelude FROM chunks WHERE doc_id=?", (doc_id,)).fetchall()
        moved = [(moved_prelude(prelude, old, new), cid) for cid, prelude in rows]
        conn.executemany("UPDATE chunks SET prelude=? WHERE id=?", [(p, cid) for p, cid in moved if p is not None])
        store.set_meta("last_file", new)
        store.log_event("move", new, f"from {old}")
    return True
