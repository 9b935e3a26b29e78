"""Agent memory (seed 003, Engram): remember, recall, consolidate, export and import.

A memory is a document whose ``source`` is ``memory``, stored at the virtual path
``.memory/<id>.md``. Discovery never yields a dot-folder, so no file can land on a
memory's path, and the file side of kgr (ingest's prune, the watcher's reconciliation,
``kgr verify``) only ever touches ``source = 'file'``. A memory goes through the same
stages as a file: chunk, load, extract and link (:func:`kgr.ingest.graphbuild.build_pending`),
embed (:func:`kgr.ingest.pipeline.embed_store`). Each entity extracted from it gets an
observation whose ``doc_id`` is the memory, so entities named in a query lead back to
their memories.

The memory's own attributes live in ``docs.meta["memory"]``: ``id`` (a hash of the
text), ``importance`` (0..1), ``tags``, ``created_ms``, ``access_count``,
``last_access_ms``, a free ``label`` (where it came from) and, after consolidation,
``merged_from`` (the absorbed memories, whole).

Recall ranks memories by reciprocal rank fusion of three lists (BM25 over the memory
chunks, cosine similarity of their vectors, and the memories the graph reaches from the
entities named in the query: a traversal of ``memory.graph_depth`` hops, default 2, over
relations and shared memories, as seed 003's graph-enhanced recall; see
:func:`graph_reach`), then weights the fused score as seed 003 does::

    final = rrf * (base + w_recency * 0.5 ** (age_days / half_life_days)
                        + w_importance * importance + w_access * min(1, ln(1 + access_count) / 10))

The best ``memory.rerank_depth`` (5) are then re-ranked by late interaction, seed 003's
ColBERT stage: MaxSim of the query's token vectors against each memory's, the embedding
model's own last hidden state before pooling (``memory.rerank``, on: on 51 questions over 48
remembered facts it took R@1 from 0.61 to 0.73 and MRR from 0.74 to 0.80, R@5 unchanged;
``bench/bench_recall_quality.py``). Recall counts an access for every memory it returns.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import defaultdict
from typing import Any, Callable, Iterable, Iterator, Sequence

import orjson

from kgr import records
from kgr.config import MemorySettings, settings_of
from kgr.errors import BadRecord, UsageError
from kgr.retrieval.entities import fts_query
from kgr.retrieval.query import RRF_K, clamp
from kgr.stages.link import norm
from kgr.store import Store, dumps, loads, now_ms, vectors

log = logging.getLogger("kgr.memory")

PREFIX = ".memory/"
SOURCE = "memory"
MAX_TEXT_CHARS = 100_000
MAX_TAGS = 32
MAX_K = 100
MAX_GRAPH_DEPTH = 4
DAY_MS = 86_400_000


# -- settings -------------------------------------------------------------------------------


# The memory section of the settings; its defaults live in kgr.config.
Settings = MemorySettings


def memory_settings(cfg) -> MemorySettings:
    """The memory settings of ``cfg`` (see :func:`kgr.config.settings_of`), checked."""
    out = settings_of(cfg).memory
    if out.half_life_days <= 0:
        raise UsageError(f"memory.half_life_days must be positive, got {out.half_life_days:g}")
    if not 0 < out.consolidate_threshold <= 1:
        raise UsageError(f"memory.consolidate_threshold must be in (0, 1], got {out.consolidate_threshold:g}")
    if not 0 <= out.graph_depth <= MAX_GRAPH_DEPTH:
        raise UsageError(f"memory.graph_depth must be between 0 and {MAX_GRAPH_DEPTH}, got {out.graph_depth}")
    if not 0 <= out.rerank_depth <= MAX_K:
        raise UsageError(f"memory.rerank_depth must be between 0 and {MAX_K}, got {out.rerank_depth}")
    return out


def memory_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def memory_path(mid: str) -> str:
    return f"{PREFIX}{mid}.md"


def keywords(q: str) -> str:
    """The query without English stop words ("are", "the", "of"): among a few short memories
    a stop word would be a rare, heavily weighted term. A query of stop words only is kept."""
    import re

    from spacy.lang.en.stop_words import STOP_WORDS

    words = re.findall(r"\w+", q)
    content = [w for w in words if w.lower() not in STOP_WORDS]
    return " ".join(content or words)


def _check_importance(value: float | None, default: float) -> float:
    if value is None:
        return default
    value = float(value)
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise UsageError(f"importance must be between 0 and 1, got {value:g}")
    return value


def _check_tags(tags: Iterable[str] | None) -> list[str]:
    out: list[str] = []
    for t in tags or []:
        t = str(t).strip()
        if not t:
            continue
        if len(t) > 64:
            raise UsageError(f"a tag is at most 64 characters: {t[:20]!r}...")
        if t not in out:
            out.append(t)
    if len(out) > MAX_TAGS:
        raise UsageError(f"at most {MAX_TAGS} tags, got {len(out)}")
    return out


# -- remember ---------------------------------------------------------------------------------


def remember(
    store: Store,
    text: str,
    cfg,
    *,
    importance: float | None = None,
    tags: Sequence[str] | None = None,
    label: str | None = None,
    clock: Callable[[], int] = now_ms,
    graph: bool = True,
    embed: bool = True,
    _restore: dict | None = None,
) -> dict[str, Any]:
    """Store ``text`` as a memory: chunked, loaded, extracted, linked and embedded like a file.

    The same text twice is one memory: the second time raises its importance to the larger
    of the two and adds the new tags (``created`` is False)."""
    from kgr.stages import chunk as chunking
    from kgr.stages.load import load

    cfg = settings_of(cfg)
    settings = memory_settings(cfg)
    text = (text or "").strip()
    if not text:
        raise UsageError("the memory is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(
            f"a memory is at most {MAX_TEXT_CHARS} characters, got {len(text)}",
            hint="store a long text as a file and ingest it",
        )
    tag_list = _check_tags(tags)
    importance_v = _check_importance(importance, settings.default_importance)
    redactions: dict[str, int] = {}
    if cfg.normalize.redact:
        from kgr.stages.redact import redact

        text, redactions = redact(text)
    mid = memory_id(text)
    path = memory_path(mid)
    existing = _meta_of(store, path)
    if existing is not None and _restore is None:
        mem = existing["memory"]
        mem["importance"] = (
            max(float(mem.get("importance", 0.0)), importance_v) if importance is not None else mem.get("importance")
        )
        mem["tags"] = _check_tags([*mem.get("tags", []), *tag_list])
        with store.write() as conn:
            conn.execute("UPDATE docs SET meta=? WHERE path=?", (dumps(existing), path))
            conn.execute(
                "UPDATE observations SET importance=? WHERE doc_id=(SELECT id FROM docs WHERE path=?)",
                (mem["importance"], path),
            )
        return {"created": False, **describe(store, path)}
    if existing is not None:
        raise UsageError(f"memory {mid} is already stored")
    created = int(clock())
    mem = {
        "id": mid,
        "importance": importance_v,
        "tags": tag_list,
        "created_ms": created,
        "access_count": 0,
        "last_access_ms": None,
        "label": label,
        "merged_from": [],
    }
    if _restore is not None:
        mem.update({k: _restore[k] for k in mem if _restore.get(k) is not None})
        mem["id"] = mid
    meta = {"memory": mem, "redactions": sum(redactions.values()), "breadcrumbs": []}
    doc = {
        "kind": records.DOC,
        "path": path,
        "source": SOURCE,
        "format": "md",
        "mtime_ms": mem["created_ms"],
        "size": len(text.encode("utf-8")),
        "file_hash": None,
        "hash": records.text_hash(text),
        "title": _title(text),
        "lang": None,
        "text": text,
        "meta": meta,
    }
    summary = load(_bare(chunking.chunk([doc], **chunking.options_from_config(cfg))), store)
    if summary.errors:
        raise UsageError(f"the memory could not be stored ({summary.errors} error records)")
    doc_id = store.scalar("SELECT id FROM docs WHERE path=?", (path,))
    early = _embed_early(store, cfg, doc_id) if embed and graph else None
    if graph:
        from kgr.ingest.graphbuild import build_pending

        build_pending(store, cfg, use_vectors=embed, incremental=True)
    if embed:
        from kgr.ingest.pipeline import embed_store

        if early is not None:
            early()
        embed_store(store, cfg, light=True, docs=[doc_id])
    if _restore is None:
        _observe(store, path, mem)
    return {"created": True, **describe(store, path)}


_EMBED_POOL: Any = None


def _embed_early(store: Store, cfg, doc_id: int) -> Callable[[], None] | None:
    """Start embedding a new memory's chunks on a worker thread (the model runs outside the
    GIL) while its graph is built; the function returned waits for the vectors and puts them
    in the embedding cache, where :func:`kgr.ingest.pipeline.embed_store` finds them. None
    when there is nothing to embed or the model cannot be had (embed_store then says why)."""
    global _EMBED_POOL
    from concurrent.futures import ThreadPoolExecutor

    from kgr.embedders import EmbeddingError, get_embedder

    items = vectors.pending_chunks(store, [doc_id])
    if not items:
        return None
    try:
        embedder = get_embedder(cfg, purpose="query")
    except EmbeddingError:
        return None
    spec = vectors.VectorSpec(embedder.model, int(embedder.dim))
    stored = vectors.stored_spec(store)
    if stored is not None and (stored.model, stored.dim) != (spec.model, spec.dim):
        return None
    if _EMBED_POOL is None:
        _EMBED_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kgr-remember-embed")
    texts = [t for _, t in items]
    future = _EMBED_POOL.submit(embedder.embed_documents, texts)

    def finish() -> None:
        try:
            vecs = future.result()
        except Exception:  # noqa: BLE001 - embed_store embeds them again and reports a failure
            return
        with store.write():
            vectors.remember(store, spec, [(vectors.text_hash(t), v) for t, v in zip(texts, vecs)])

    return finish


def _bare(recs: Iterable[dict]) -> Iterator[dict]:
    """Memory chunks without a prelude: a file's path and headings help find its passages, a
    memory's virtual path (a hash) would only add noise to its keywords and its vector."""
    for rec in recs:
        if rec.get("kind") == records.CHUNK:
            rec = {**rec, "prelude": None}
        yield rec


def _title(text: str) -> str:
    first = text.strip().splitlines()[0].lstrip("# ").strip()
    return first if len(first) <= 80 else first[:79].rsplit(" ", 1)[0] + "…"


def _meta_of(store: Store, path: str) -> dict | None:
    row = store.conn.execute("SELECT meta FROM docs WHERE path=? AND source=?", (path, SOURCE)).fetchone()
    if row is None:
        return None
    meta = loads(row[0], {}) or {}
    return meta if isinstance(meta.get("memory"), dict) else None


def _observe(store: Store, path: str, mem: dict) -> int:
    """An observation on each entity the memory mentions, whose source document is the memory."""
    doc_id = store.scalar("SELECT id FROM docs WHERE path=?", (path,))
    text = store.scalar("SELECT text FROM docs WHERE id=?", (doc_id,))
    ents = [
        r[0]
        for r in store.query(
            "SELECT DISTINCT m.entity_id FROM mentions m JOIN entities e ON e.id = m.entity_id "
            "WHERE m.doc_id=? AND m.source != 'coref' AND e.status = 'active' ORDER BY m.entity_id",
            (doc_id,),
        )
    ]
    n = 0
    with store.write() as conn:
        for eid in ents:
            if conn.execute(
                "SELECT 1 FROM observations WHERE entity_id=? AND doc_id=? AND content=?", (eid, doc_id, text)
            ).fetchone():
                continue
            conn.execute(
                "INSERT INTO observations(entity_id, content, source, doc_id, importance, valid_from_ms, created_ms) "
                "VALUES (?, ?, 'memory', ?, ?, ?, ?)",
                (eid, text, doc_id, mem["importance"], mem["created_ms"], mem["created_ms"]),
            )
            n += 1
    return n


def describe(store: Store, path: str) -> dict[str, Any]:
    row = store.conn.execute("SELECT id, text, meta FROM docs WHERE path=?", (path,)).fetchone()
    if row is None:
        raise UsageError(f"no memory at {path}")
    doc_id, text, meta = row
    mem = (loads(meta, {}) or {}).get("memory") or {}
    ents = [
        {"id": e, "name": n, "type": t}
        for e, n, t in store.query(
            "SELECT DISTINCT e.id, e.name, e.type FROM observations o JOIN entities e ON e.id = o.entity_id "
            "WHERE o.doc_id=? ORDER BY e.name",
            (doc_id,),
        )
    ]
    return {
        "id": mem.get("id"),
        "path": path,
        "doc_id": doc_id,
        "text": text,
        "importance": mem.get("importance"),
        "tags": mem.get("tags", []),
        "label": mem.get("label"),
        "created_ms": mem.get("created_ms"),
        "access_count": mem.get("access_count", 0),
        "last_access_ms": mem.get("last_access_ms"),
        "merged_from": [m.get("id") for m in mem.get("merged_from", [])],
        "entities": ents,
    }


# -- recall ------------------------------------------------------------------------------------


def _memory_docs(store: Store, as_of: int | None, tags: Sequence[str] | None) -> dict[int, dict]:
    """doc id -> the memory's attributes, for the memories stored by ``as_of`` that carry
    every tag in ``tags``. (One parse of each meta in Python is faster than several
    json_extract calls per row in SQL.)"""
    want = set(tags or ())
    out = {}
    for doc_id, meta in store.query("SELECT id, meta FROM docs WHERE source = ? AND status = 'ok'", (SOURCE,)):
        mem = (loads(meta, {}) or {}).get("memory")
        if not isinstance(mem, dict):
            continue
        if as_of is not None and (mem.get("created_ms") or 0) > as_of:
            continue
        if want and not want <= set(mem.get("tags") or []):
            continue
        out[doc_id] = mem
    return out


def _doc_ranking(chunk_rank: Iterable[tuple[int, int]]) -> list[int]:
    """Doc ids in order of their best chunk (chunk_rank: (doc_id, chunk rank) in rank order)."""
    return list(dict.fromkeys(doc_id for doc_id, _ in chunk_rank))


def query_entities(store: Store, q: str) -> dict[int, str]:
    """Entities whose name or an alias is named in the query (whole words, 3+ characters)."""
    match = fts_query(q)
    if not match:
        return {}
    qnorm = f" {' '.join(norm(w) for w in q.split())} "
    qflat = norm(q)
    found: dict[int, str] = {}
    for eid, name, aliases in store.query(
        "SELECT e.id, e.name, e.aliases FROM entities_fts f JOIN entities e ON e.id = f.rowid "
        "WHERE entities_fts MATCH ? AND e.status = 'active' ORDER BY bm25(entities_fts) LIMIT 200",
        (match,),
    ):
        for name_ in (name, *loads(aliases, [])):
            nn = norm(name_)
            words = " ".join(norm(w) for w in str(name_).split())
            if len(nn) >= 3 and (f" {words} " in qnorm or (len(nn) >= 6 and nn in qflat)):
                found[eid] = name_
                break
    return found


def _valid(as_of: int | None, now: int, include_history: bool) -> tuple[str, tuple]:
    if include_history:
        return "", ()
    at = now if as_of is None else as_of
    return (
        " AND (o.valid_from_ms IS NULL OR o.valid_from_ms <= ?) AND (o.valid_until_ms IS NULL OR o.valid_until_ms > ?)",
        (at, at),
    )


def recall(
    store: Store,
    q: str,
    cfg,
    *,
    k: int = 5,
    embed_query: Callable[[str], Any] | None = None,
    include_graph: bool = True,
    as_of: int | None = None,
    include_history: bool = False,
    tags: Sequence[str] | None = None,
    clock: Callable[[], int] = now_ms,
    touch: bool = True,
    rerank: bool | None = None,
) -> dict[str, Any]:
    """The ``k`` memories that best answer ``q``, best first; counts an access for each
    when ``touch`` (the store must then be writable). ``rerank`` (default: the setting
    ``memory.rerank``) reorders the best candidates by token-level MaxSim (:func:`_rerank`)."""
    q = (q or "").strip()
    if not q:
        raise UsageError("the query is empty")
    k = clamp(k, 1, MAX_K, "k")
    cfg = settings_of(cfg)
    settings = memory_settings(cfg)
    now = int(clock())
    mems = _memory_docs(store, as_of, _check_tags(tags))
    if not mems:
        return {"query": q, "k": k, "results": [], "entities": [], "total_memories": 0}
    filtered = as_of is not None or bool(tags)
    chunk_doc = {
        cid: d
        for cid, d in store.query(
            "SELECT c.id, c.doc_id FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.source = ? AND d.status = 'ok'",
            (SOURCE,),
        )
        if d in mems
    }
    n = max(50, 5 * k)

    lists: dict[str, list[int]] = {}
    match = fts_query(keywords(q))
    if match:
        rows = store.query(
            "SELECT f.rowid FROM chunks_fts f JOIN chunks c ON c.id = f.rowid JOIN docs d ON d.id = c.doc_id "
            "WHERE chunks_fts MATCH ? AND d.source = ? AND d.status = 'ok' ORDER BY bm25(chunks_fts, 1.0, 0.5) "
            "LIMIT ?",
            (match, SOURCE, -1 if filtered else n),
        )
        lists["bm25"] = _doc_ranking((chunk_doc[r[0]], i) for i, r in enumerate(rows) if r[0] in chunk_doc)[:n]
    cosine: dict[int, float] = {}
    if embed_query is not None and vectors.stored_spec(store) is not None:
        qvec = embed_query(q)
        sims = vectors.similarities(store, vectors.CHUNK, qvec, list(chunk_doc))
        for cid, sim in sims.items():
            d = chunk_doc[cid]
            cosine[d] = max(cosine.get(d, -1.0), sim)
        # a memory far from the query is no semantic match, whatever its rank among few memories
        lists["vector"] = sorted(
            (d for d in cosine if cosine[d] >= settings.min_cosine), key=lambda d: (-cosine[d], d)
        )[:n]
    named: dict[int, str] = {}
    via: dict[int, list[str]] = {}
    hop_of: dict[int, int] = {}
    if include_graph:
        named = query_entities(store, q)
        if named:
            cond, params = _valid(as_of, now, include_history)
            reached = graph_reach(store, list(named), set(mems), cond, params, depth=settings.graph_depth)
            names = _entity_names(store, {e for _, es in reached.values() for e in es})
            for d, (hop, es) in reached.items():
                via[d] = sorted(names.get(e, str(e)) for e in es)
                hop_of[d] = hop
            lists["graph"] = sorted(
                reached, key=lambda d: (reached[d][0], -len(reached[d][1]), -cosine.get(d, -1.0), d)
            )[:n]

    fused: dict[int, float] = defaultdict(float)
    ranks: dict[int, dict[str, int]] = defaultdict(dict)
    for name, lst in lists.items():
        for rank, d in enumerate(lst, 1):
            fused[d] += 1.0 / (RRF_K + rank)
            ranks[d][name] = rank
    scored = []
    for d, rrf in fused.items():
        mem = mems[d]
        w = weigh(mem, now, settings)
        scored.append((rrf * w["factor"], rrf, w, d))
    scored.sort(key=lambda s: (-s[0], s[3]))
    maxsim: dict[int, float] = {}
    if (settings.rerank if rerank is None else rerank) and embed_query is not None and scored:
        scored, maxsim = _rerank(store, q, cfg, scored, settings.rerank_depth)
    top = scored[:k]
    if touch and top:
        touch_memories(store, [d for *_, d in top], now)
    results = []
    for rank, (score, rrf, w, d) in enumerate(top, 1):
        path = store.scalar("SELECT path FROM docs WHERE id=?", (d,))
        desc = describe(store, path)
        why = []
        if "bm25" in ranks[d]:
            why.append(f"keyword match #{ranks[d]['bm25']}")
        if "vector" in ranks[d]:
            why.append(f"semantic match #{ranks[d]['vector']}")
        if via.get(d):
            hop = hop_of.get(d, 0)
            why.append(
                (
                    "observation of "
                    if hop == 0
                    else f"{hop} hop{'s' if hop > 1 else ''} from the query's entities, through "
                )
                + ", ".join(via[d])
            )
        if d in maxsim:
            why.append(f"token match {maxsim[d]:.3f}")
        results.append(
            {
                "rank": rank,
                **desc,
                "score": round(score, 6),
                "scores": {
                    "rrf": round(rrf, 6),
                    **{f"{n}_rank": ranks[d].get(n) for n in ("bm25", "vector", "graph")},
                    "cosine": None if d not in cosine else round(cosine[d], 4),
                    "hops": hop_of.get(d),
                    "maxsim": None if d not in maxsim else round(maxsim[d], 4),
                    "recency": round(w["recency"], 4),
                    "importance": w["importance"],
                    "access": round(w["access"], 4),
                    "factor": round(w["factor"], 4),
                },
                "why": "; ".join(why),
            }
        )
    return {
        "query": q,
        "k": k,
        "results": results,
        "total_memories": len(mems),
        "entities": [{"id": e, "name": nm} for e, nm in named.items()],
    }


def graph_reach(
    store: Store, start: Sequence[int], mems: set[int], cond: str = "", params: tuple = (), *, depth: int = 2
) -> dict[int, tuple[int, set[int]]]:
    """The memories the graph reaches from the entities ``start``, as seed 003's graph-enhanced
    recall does (a traversal of depth 2 from the entities a query names, then the memories
    behind the observations of every entity reached): doc id -> (hops, the entities of that
    ring it observes). Ring 0 is ``start``; the next ring is every active entity one edge
    away: a relation, or a memory observing both (the memories are the graph's edges as
    much as its relations are). Only the memories in ``mems`` count; ``cond`` and ``params``
    restrict the observations (validity, on the alias ``o``)."""
    found: dict[int, tuple[int, set[int]]] = {}
    seen = set(start)
    ring = sorted(seen)
    for hop in range(max(0, depth) + 1):
        here: dict[int, set[int]] = defaultdict(set)
        for part in _parts(ring):
            for doc_id, eid in store.query(
                f"SELECT DISTINCT o.doc_id, o.entity_id FROM observations o "
                f"WHERE o.entity_id IN ({','.join('?' * len(part))}){cond}",
                (*part, *params),
            ):
                if doc_id in mems and doc_id not in found:
                    here[doc_id].add(eid)
        for d, es in here.items():
            found[d] = (hop, es)
        if hop == depth or not ring:
            break
        nxt: set[int] = set()
        for part in _parts(sorted(here)):
            marks = ",".join("?" * len(part))
            nxt.update(
                e
                for (e,) in store.query(
                    f"SELECT DISTINCT o.entity_id FROM observations o WHERE o.doc_id IN ({marks}){cond}",
                    (*part, *params),
                )
            )
        for part in _parts(ring):
            marks = ",".join("?" * len(part))
            nxt.update(
                e
                for (e,) in store.query(
                    f"SELECT dst_id FROM relations WHERE src_id IN ({marks}) "
                    f"UNION SELECT src_id FROM relations WHERE dst_id IN ({marks})",
                    (*part, *part),
                )
            )
        nxt -= seen
        if nxt:
            active = set()
            for part in _parts(sorted(nxt)):
                active.update(
                    e
                    for (e,) in store.query(
                        f"SELECT id FROM entities WHERE id IN ({','.join('?' * len(part))}) AND status = 'active'",
                        part,
                    )
                )
            nxt = active
        seen |= nxt
        ring = sorted(nxt)
    return found


def _parts(ids: Sequence[int], size: int = 500) -> Iterator[list[int]]:
    for i in range(0, len(ids), size):
        yield list(ids[i : i + size])


def _entity_names(store: Store, ids: set[int]) -> dict[int, str]:
    out: dict[int, str] = {}
    for part in _parts(sorted(ids)):
        out.update(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(part))})", part))
    return out


# token vectors of memory texts (float16), by model and text hash: a memory's text never
# changes. At most _TOKENS_MAX rows in all (about 40 MB), then it starts again.
_TOKENS: dict[tuple[str, str], Any] = {}
_TOKENS_MAX = 50_000
_token_rows = [0]


def token_vectors_of(cfg) -> Callable[[list[str]], list] | None:
    """texts -> their token vectors with the configured model (the light ONNX path of the
    default model), memoised by text; None when the embedder gives no token vectors."""
    import numpy as np

    from kgr.embedders import get_embedder

    embedder = get_embedder(cfg, purpose="query")
    fn = getattr(embedder, "token_vectors", None)
    if fn is None:
        return None
    model = str(getattr(embedder, "model", ""))

    def tokens(texts: list[str]) -> list:
        keys = [(model, records.text_hash(t)) for t in texts]
        missing = [t for t, key in zip(texts, keys) if key not in _TOKENS]
        fresh = dict(zip(missing, fn(missing))) if missing else {}
        if fresh and _token_rows[0] + sum(len(v) for v in fresh.values()) > _TOKENS_MAX:
            _TOKENS.clear()
            _token_rows[0] = 0
        for t, vecs in fresh.items():
            _TOKENS[(model, records.text_hash(t))] = vecs.astype(np.float16)
            _token_rows[0] += len(vecs)
        return [_TOKENS[key].astype(np.float32) if key in _TOKENS else fresh[t] for t, key in zip(texts, keys)]

    return tokens


def maxsim(query_tokens, doc_tokens) -> float:
    """Late interaction (ColBERT's MaxSim): each query token's best cosine among the
    document's tokens, averaged over the query tokens."""
    if len(query_tokens) == 0 or len(doc_tokens) == 0:
        return 0.0
    return float((query_tokens @ doc_tokens.T).max(axis=1).mean())


def _rerank(store: Store, q: str, cfg, scored: list, depth: int) -> tuple[list, dict[int, float]]:
    """The best ``depth`` candidates reordered by MaxSim of the query's token vectors against
    each memory's (times the memory's weight factor, as seed 003 weights its re-ranked
    scores); the rest follow in their fused order."""
    from kgr.embedders import EmbeddingError

    if depth <= 0:
        return scored, {}
    head, tail = scored[:depth], scored[depth:]
    ids = [d for *_, d in head]
    text = dict(store.query(f"SELECT id, text FROM docs WHERE id IN ({','.join('?' * len(ids))})", ids))
    try:
        tokens = token_vectors_of(cfg)
        if tokens is None:
            return scored, {}
        qtok, *dtoks = tokens([q, *(text[d] for d in ids)])
    except EmbeddingError as exc:  # the fused order stands: a re-rank is no reason to fail a recall
        log.warning("kgr recall: no re-rank (%s)", exc)
        return scored, {}
    sims = {d: maxsim(qtok, t) for d, t in zip(ids, dtoks)}
    head.sort(key=lambda s: (-sims[s[3]] * s[2]["factor"], s[3]))
    return head + tail, sims


def weigh(mem: dict, now: int, settings: Settings) -> dict[str, float]:
    """Seed 003's factor on the retrieval score: recency (half-life decay), importance, access."""
    age_days = max(0.0, (now - int(mem.get("created_ms") or now)) / DAY_MS)
    recency = 0.5 ** (age_days / settings.half_life_days)
    importance = float(mem.get("importance") or 0.0)
    access = min(1.0, math.log1p(int(mem.get("access_count") or 0)) / 10)
    w = settings.weights
    factor = w.base + w.recency * recency + w.importance * importance + w.access * access
    return {"recency": recency, "importance": importance, "access": access, "factor": factor}


def touch_memories(store: Store, doc_ids: Sequence[int], now: int) -> None:
    """Count one access of each memory (and of its observations)."""
    with store.write() as conn:
        for d in doc_ids:
            conn.execute(
                "UPDATE docs SET meta = json_set(meta, '$.memory.access_count', "
                "coalesce(json_extract(meta, '$.memory.access_count'), 0) + 1, '$.memory.last_access_ms', ?) "
                "WHERE id=? AND source=?",
                (now, d, SOURCE),
            )
            conn.execute(
                "UPDATE observations SET access_count = access_count + 1, last_access_ms = ? WHERE doc_id=?", (now, d)
            )


# -- history --------------------------------------------------------------------------------------


def history(
    store: Store,
    entity: str,
    *,
    as_of: int | None = None,
    include_history: bool = True,
    clock: Callable[[], int] = now_ms,
    limit: int = 200,
) -> dict[str, Any]:
    """An entity's observations with their validity: all of them (include_history), or those
    valid at ``as_of`` (default now)."""
    from kgr.retrieval.entities import resolve

    ent = resolve(store, entity)
    cond, params = _valid(as_of, int(clock()), include_history)
    rows = store.query(
        "SELECT o.id, o.content, o.source, o.valid_from_ms, o.valid_until_ms, o.importance, o.access_count, d.path, "
        "json_extract(d.meta, '$.memory.id') FROM observations o LEFT JOIN docs d ON d.id = o.doc_id "
        f"WHERE o.entity_id = ?{cond} ORDER BY coalesce(o.valid_from_ms, o.created_ms, 0), o.id LIMIT ?",
        (ent["id"], *params, limit),
    )
    return {
        "entity": {"id": ent["id"], "name": ent["name"], "type": ent["type"]},
        "as_of": as_of,
        "observations": [
            {
                "id": i,
                "content": c,
                "source": s,
                "valid_from_ms": vf,
                "valid_until_ms": vu,
                "valid": vu is None or vu > (as_of if as_of is not None else int(clock())),
                "importance": imp,
                "access_count": ac,
                "path": p,
                "memory": m,
            }
            for i, c, s, vf, vu, imp, ac, p, m in rows
        ],
    }


# -- consolidation ------------------------------------------------------------------------------------


def _memory_vectors(store: Store) -> dict[int, Any]:
    """Each memory's vector: the normalized mean of its chunk vectors."""
    import numpy as np

    spec = vectors.stored_spec(store)
    if spec is None or not vectors.has_tables(store):
        return {}
    chunk_doc = dict(
        store.query(
            "SELECT c.id, c.doc_id FROM chunks c JOIN docs d ON d.id = c.doc_id WHERE d.source = ? AND d.status = 'ok'",
            (SOURCE,),
        )
    )
    by_doc: dict[int, list] = defaultdict(list)
    ids = list(chunk_doc)
    for i in range(0, len(ids), 500):  # rowid lookups in batches: a join on the vec0 table is a scan per row
        part = ids[i : i + 500]
        for cid, blob in store.query(
            f"SELECT rowid, embedding FROM {vectors.TABLES[vectors.CHUNK]} WHERE rowid IN ({','.join('?' * len(part))})",
            part,
        ):
            v = vectors.decode(blob, spec)
            by_doc[chunk_doc[cid]].append(v / (np.linalg.norm(v) or 1.0))
    out = {}
    for d, vs in by_doc.items():
        m = np.mean(vs, axis=0)
        out[d] = m / (np.linalg.norm(m) or 1.0)
    return out


def similar_groups(store: Store, threshold: float) -> list[list[int]]:
    """Groups of near-duplicate memories (doc ids): each group is a representative (the most
    important, then most recent) and every other memory whose cosine to it is >= threshold."""
    import numpy as np

    vecs = _memory_vectors(store)
    mems = _memory_docs(store, None, None)
    order = sorted(
        (d for d in vecs if d in mems),
        key=lambda d: (-float(mems[d].get("importance") or 0), -int(mems[d].get("created_ms") or 0), d),
    )
    if not order:
        return []
    mat = np.stack([vecs[d] for d in order]).astype(np.float32)
    near: dict[int, list[int]] = defaultdict(list)
    for start in range(0, len(order), 1024):  # a block of rows against all: one matrix product each
        rows, cols = np.nonzero(mat[start : start + 1024] @ mat.T >= threshold)
        for i, j in zip((rows + start).tolist(), cols.tolist()):
            if i != j:
                near[i].append(j)
    free = [True] * len(order)
    groups = []
    for i, d in enumerate(order):
        if not free[i]:
            continue
        free[i] = False
        members = [j for j in near.get(i, ()) if free[j]]
        for j in members:
            free[j] = False
        if members:
            groups.append([d, *(order[j] for j in sorted(members))])
    return groups


def consolidate(store: Store, cfg, *, threshold: float | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Merge near-duplicate memories into their representative: it keeps its text and gains
    the largest importance, the summed access counts, the union of tags, the latest time and
    the absorbed memories whole in ``merged_from`` (nothing is lost: export keeps them). The
    absorbed memories' observations move to it; their documents are removed."""
    from kgr.stages.load import delete_docs

    cfg = settings_of(cfg)
    settings = memory_settings(cfg)
    threshold = settings.consolidate_threshold if threshold is None else float(threshold)
    if not 0 < threshold <= 1:
        raise UsageError(f"the threshold must be in (0, 1], got {threshold:g}")
    groups = similar_groups(store, threshold)
    merged = []
    for group in groups:
        rows = {d: store.conn.execute("SELECT path, text, meta FROM docs WHERE id=?", (d,)).fetchone() for d in group}
        keep, absorbed = group[0], group[1:]
        keep_meta = loads(rows[keep][2], {})
        mem = keep_meta["memory"]
        entry = {"into": mem["id"], "from": []}
        for d in absorbed:
            path, text, meta = rows[d]
            other = loads(meta, {})["memory"]
            entry["from"].append(other["id"])
            mem["importance"] = max(float(mem.get("importance") or 0), float(other.get("importance") or 0))
            mem["access_count"] = int(mem.get("access_count") or 0) + int(other.get("access_count") or 0)
            mem["last_access_ms"] = max(
                [t for t in (mem.get("last_access_ms"), other.get("last_access_ms")) if t is not None], default=None
            )
            mem["created_ms"] = max(int(mem.get("created_ms") or 0), int(other.get("created_ms") or 0))
            mem["tags"] = _check_tags([*mem.get("tags", []), *other.get("tags", [])])
            inner = other.get("merged_from") or []
            mem.setdefault("merged_from", []).append(
                {**{k: v for k, v in other.items() if k != "merged_from"}, "text": text}
            )
            mem["merged_from"].extend(inner)
        merged.append(entry)
        if dry_run:
            continue
        with store.write() as conn:
            conn.execute("UPDATE docs SET meta=? WHERE id=?", (dumps(keep_meta), keep))
            for d in absorbed:
                conn.execute("UPDATE observations SET doc_id=? WHERE doc_id=?", (keep, d))
            conn.execute(
                "UPDATE observations SET importance=max(importance, ?) WHERE doc_id=?", (mem["importance"], keep)
            )
        delete_docs(store, [rows[d][0] for d in absorbed])
    return {
        "threshold": threshold,
        "groups": len(merged),
        "absorbed": sum(len(m["from"]) for m in merged),
        "merged": merged,
        "dry_run": dry_run,
    }


# -- export and import ------------------------------------------------------------------------------------


def export(store: Store) -> Iterator[dict]:
    """One ``memory`` record per memory, oldest first, with its observations (and their validity)."""
    rows = store.query("SELECT id, text, meta FROM docs WHERE source=? AND status='ok'", (SOURCE,))
    items = []
    for doc_id, text, meta in rows:
        mem = (loads(meta, {}) or {}).get("memory")
        if isinstance(mem, dict):
            items.append((int(mem.get("created_ms") or 0), mem.get("id"), doc_id, text, mem))
    for _, _, doc_id, text, mem in sorted(items, key=lambda x: (x[0], x[1])):
        obs = [
            {
                "entity": {"key": key, "name": name, "type": typ},
                "content": content,
                "source": src,
                "importance": imp,
                "access_count": ac,
                "last_access_ms": la,
                "valid_from_ms": vf,
                "valid_until_ms": vu,
                "created_ms": cm,
            }
            for key, name, typ, content, src, imp, ac, la, vf, vu, cm in store.query(
                "SELECT e.key, e.name, e.type, o.content, o.source, o.importance, o.access_count, o.last_access_ms, "
                "o.valid_from_ms, o.valid_until_ms, o.created_ms FROM observations o JOIN entities e ON e.id = o.entity_id "
                "WHERE o.doc_id=? ORDER BY e.key, o.valid_from_ms, o.id",
                (doc_id,),
            )
        ]
        yield {
            "kind": "memory",
            "id": mem.get("id"),
            "text": text,
            "importance": mem.get("importance"),
            "tags": mem.get("tags", []),
            "label": mem.get("label"),
            "created_ms": mem.get("created_ms"),
            "access_count": mem.get("access_count", 0),
            "last_access_ms": mem.get("last_access_ms"),
            "merged_from": mem.get("merged_from", []),
            "observations": obs,
        }


def export_jsonl(store: Store) -> bytes:
    return b"".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS) + b"\n" for r in export(store))


def import_records(store: Store, recs: Iterable[dict], cfg, *, clock: Callable[[], int] = now_ms) -> dict[str, int]:
    """Store exported ``memory`` records: each memory with its attributes as exported, and its
    observations exactly (validity included). A memory already stored is skipped."""
    cfg = settings_of(cfg)
    counts = {"imported": 0, "skipped": 0}
    batch: list[tuple[int, dict]] = []
    for line, rec in enumerate(recs, 1):
        if not isinstance(rec, dict) or rec.get("kind") != "memory":
            raise BadRecord(line, 'not a memory record (kind must be "memory")')
        if not isinstance(rec.get("text"), str) or not rec["text"].strip():
            raise BadRecord(line, 'memory record has no "text"')
        if rec.get("id") and rec["id"] != memory_id(rec["text"].strip()):
            raise BadRecord(line, f"memory id {rec['id']} does not match its text")
        _check_importance(rec.get("importance"), 0.5)
        batch.append((line, rec))
    # every record is checked before anything is written: a bad file changes nothing
    pending = []
    for line, rec in batch:
        path = memory_path(memory_id(rec["text"].strip()))
        if _meta_of(store, path) is not None:
            counts["skipped"] += 1
            continue
        restore = {
            k: rec.get(k)
            for k in ("importance", "tags", "label", "created_ms", "access_count", "last_access_ms", "merged_from")
        }
        restore["tags"] = list(restore["tags"] or [])
        restore["merged_from"] = list(restore["merged_from"] or [])
        restore["access_count"] = int(restore["access_count"] or 0)
        if restore["created_ms"] is None:
            restore["created_ms"] = int(clock())
        remember(
            store,
            rec["text"],
            cfg,
            importance=rec.get("importance"),
            tags=restore["tags"],
            label=rec.get("label"),
            graph=False,
            embed=False,
            _restore=restore,
        )
        pending.append((path, rec))
        counts["imported"] += 1
    if pending:
        from kgr.ingest.graphbuild import build_pending
        from kgr.ingest.pipeline import embed_store

        build_pending(store, cfg)
        for path, rec in pending:
            _restore_observations(store, path, rec.get("observations") or [])
            # linked like a remembered memory: an observation on every entity it names here
            # (a record without observations, or one whose entities this graph names otherwise,
            # was found by recall's graph side only through the observations it carried)
            _observe(store, path, (_meta_of(store, path) or {}).get("memory") or {})
        embed_store(store, cfg, light=True)  # the light path: no torch for a few records
    return counts


def _restore_observations(store: Store, path: str, obs: list[dict]) -> None:
    doc_id = store.scalar("SELECT id FROM docs WHERE path=?", (path,))
    with store.write() as conn:
        for o in obs:
            ent = o.get("entity") or {}
            key, name, typ = ent.get("key"), ent.get("name"), ent.get("type")
            if not key or not name or not typ:
                raise BadRecord(None, f"{path}: an observation without its entity's key, name and type")
            row = conn.execute("SELECT id FROM entities WHERE key=?", (key,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO entities(key, name, type, norm, origin, created_ms, updated_ms) "
                    "VALUES (?, ?, ?, ?, 'manual', ?, ?)",
                    (key, name, typ, norm(name), now_ms(), now_ms()),
                )
                eid = conn.last_insert_rowid()
            else:
                eid = row[0]
            conn.execute(
                "INSERT INTO observations(entity_id, content, source, doc_id, importance, access_count, last_access_ms, "
                "valid_from_ms, valid_until_ms, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    eid,
                    o.get("content") or "",
                    o.get("source") or "memory",
                    doc_id,
                    o.get("importance", 0.5),
                    int(o.get("access_count") or 0),
                    o.get("last_access_ms"),
                    o.get("valid_from_ms"),
                    o.get("valid_until_ms"),
                    o.get("created_ms"),
                ),
            )


def list_memories(store: Store, *, limit: int = 50, offset: int = 0) -> dict[str, Any]:
    mems = _memory_docs(store, None, None)
    order = sorted(mems, key=lambda d: (-int(mems[d].get("created_ms") or 0), d))
    page = order[offset : offset + limit]
    paths = (
        dict(store.query(f"SELECT id, path FROM docs WHERE id IN ({','.join('?' * len(page))})", page)) if page else {}
    )
    return {
        "total": len(order),
        "memories": [describe(store, paths[d]) for d in page],
        "next_offset": offset + limit if offset + limit < len(order) else None,
    }


def parse_jsonl(data: bytes) -> list[dict]:
    """The records of a JSON Lines text; a bad line is a BadRecord naming it."""
    out = []
    for line, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError as exc:
            raise BadRecord(line, f"not JSON: {exc}") from None
    return out
