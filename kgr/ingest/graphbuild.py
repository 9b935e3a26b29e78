"""Building the graph of stored documents: mine the gazetteer, then extract, link, store.

`kgr ingest` runs this after loading documents and chunks, for every document whose
graph is missing or stale (``docs.graph_sig IS NULL``). Each document's records go
through the functions behind ``kgr extract`` and ``kgr link`` (:func:`graph_records`).
What linking needs from the whole corpus (the mined gazetteer, the aliases documents
declare, the entities the rest of the graph supports) is read from the database first
and handed to them as arguments: it covers the documents just loaded too, which is why
this runs after loading rather than inside the same stream.

A document whose extraction fails fails alone: it gets an error record, its
``graph_sig`` becomes ``GRAPH_FAILED`` and ``docs.error`` says why (``kgr status`` and
``kgr verify`` show it), and it is not tried again until its text changes (loading new
text clears ``graph_sig``) or someone asks for it (``extract_and_link``, ``kgr verify --fix``).
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Callable, Iterable, Iterator

import orjson

from kgr import records
from kgr.config import GazetteerSettings, settings_of
from kgr.store import Store, loads
from kgr.store import graph_rows as graphstore
from kgr.store.graph_rows import GRAPH_FAILED

_GAZETTEER = GazetteerSettings()  # mine()'s defaults are the settings'


def stored_docs(store: Store) -> Iterator[dict]:
    for path, title, text in store.query("SELECT path, title, text FROM docs WHERE status='ok' ORDER BY path"):
        yield {"kind": "doc", "path": path, "title": title, "text": text or ""}


def mine(store: Store, *, topk: int = _GAZETTEER.mine_topk, min_freq: int = _GAZETTEER.min_freq) -> list:
    """Mine gazetteer terms from every stored document and replace the gazetteer table."""
    from kgr.stages.extract import mine_terms

    terms = mine_terms(stored_docs(store), topk=topk, min_freq=min_freq)
    with store.write() as conn:
        conn.execute("DELETE FROM gazetteer")
        conn.executemany(
            "INSERT INTO gazetteer(term, type, freq, source) VALUES (?, ?, ?, ?)",
            [(t.term, t.type, t.freq, t.source) for t in terms],
        )
        store.set_meta(GAZETTEER_STAMP, os.urandom(8).hex())
    return terms


GAZETTEER_STAMP = "gazetteer.mined"  # changes with every mine(): the gazetteer table's version
_GAZETTEERS: dict[tuple[str, str], object] = {}


def load_gazetteer(store: Store):
    """The stored gazetteer, matcher built. Built once per mined version and process: each
    remembered memory needs it, and building it from its table took longer than extracting."""
    from kgr.stages.extract import Gazetteer, GazTerm

    stamp = store.get_meta(GAZETTEER_STAMP)
    key = (str(store.path), str(stamp))
    if stamp is not None and key in _GAZETTEERS:
        return _GAZETTEERS[key]
    gazetteer = Gazetteer(
        GazTerm(term, typ, freq, source)
        for term, typ, freq, source in store.query(
            "SELECT term, type, freq, source FROM gazetteer ORDER BY freq DESC, term"
        )
    )
    if stamp is not None:
        if len(_GAZETTEERS) >= 4:
            _GAZETTEERS.clear()
        _GAZETTEERS[key] = gazetteer
    return gazetteer


# The entities a document's new graph is linked against: those something other than the
# documents being (re)built supports. What only those documents made is left out, so that
# building their graph again starts from where it started the first time, and gives the
# same entities (issue 14: a re-extraction linked against its own previous output, and
# renamed, retyped or dropped entities each time).
SUPPORTED_ELSEWHERE = """
SELECT e.key, e.name, e.type, e.norm, e.aliases, e.description, e.popularity, e.origin,
       (SELECT count(*) FROM mentions m WHERE m.entity_id = e.id AND m.doc_id IN (SELECT value FROM json_each(:pending)))
FROM entities e
WHERE e.origin = 'manual'
   OR EXISTS (SELECT 1 FROM mentions m WHERE m.entity_id = e.id
              AND m.doc_id NOT IN (SELECT value FROM json_each(:pending)))
   OR EXISTS (SELECT 1 FROM relations r WHERE (r.src_id = e.id OR r.dst_id = e.id) AND (r.origin = 'manual' OR EXISTS (
              SELECT 1 FROM relation_evidence v WHERE v.relation_id = r.id
              AND v.doc_id NOT IN (SELECT value FROM json_each(:pending)))))
   OR EXISTS (SELECT 1 FROM observations o WHERE o.entity_id = e.id)
ORDER BY e.id
"""


def seed_entities(store: Store, pending_ids: list[int]) -> list[dict]:
    """The stored entities that something besides the ``pending_ids`` documents supports,
    their popularity without those documents' mentions (linking them adds them again)."""
    rows = store.query(SUPPORTED_ELSEWHERE, {"pending": orjson.dumps(pending_ids).decode()})
    return [
        {
            "key": k,
            "name": n,
            "type": t,
            "norm": nm,
            "aliases": loads(a, []),
            "description": d,
            "popularity": max(0.0, (p or 0.0) - own),
            "origin": o,
        }
        for k, n, t, nm, a, d, p, o, own in rows
    ]


def stored_votes(store: Store, pending_ids: list[int]) -> Callable[[str], tuple[dict, dict, tuple]]:
    """``votes(key) -> (surface votes, type votes, typing features)`` of a stored entity from its
    mentions in the other documents, so that a rebuilt document's own mentions do not alone
    rename or retype an entity many documents name (typing features: see ``Linker``)."""
    from kgr.stages import entitytypes

    pending = orjson.dumps(pending_ids).decode()

    def votes(key: str) -> tuple[dict, dict, tuple]:
        surfaces: dict[str, int] = {}
        types: dict[str, float] = {}
        counts: dict[str, float] = {}
        strong: dict[str, int] = {}
        n = 0
        for surface, typ, score, source, features in store.query(
            "SELECT m.surface, m.type, m.score, m.source, m.features FROM mentions m "
            "JOIN entities e ON e.id = m.entity_id WHERE e.key = :key "
            "AND m.doc_id NOT IN (SELECT value FROM json_each(:pending))",
            {"key": key, "pending": pending},
        ):
            typ = typ or "CONCEPT"
            feats, shown = _mention_votes(surface, typ, source, features)
            entitytypes.add_mention(counts, feats)
            n += 1
            if source == "coref":
                continue
            surfaces[surface] = surfaces.get(surface, 0) + 1
            types[typ] = types.get(typ, 0.0) + (score if score is not None else 0.5)
            if shown:
                strong[shown] = strong.get(shown, 0) + 1
        return surfaces, types, (counts, n, strong)

    return votes


@functools.lru_cache(maxsize=65536)
def _mention_votes(surface: str, typ: str, source: str | None, features: str | None) -> tuple[tuple, str | None]:
    """A stored mention's typing features and strong type, by its very row values: an entity many
    documents name has its mentions read again each time one more names it (each memory
    remembered), and working their features out again was most of that time."""
    from kgr.stages import entitytypes

    feats = loads(features, {})
    return (
        tuple(entitytypes.mention_features(surface, typ, source, feats, feats.get("ctx"))),
        entitytypes.strong_type(surface, typ, source, feats),
    )


def stored_entities(store: Store) -> list[dict]:
    return [
        {
            "key": k,
            "name": n,
            "type": t,
            "norm": nm,
            "aliases": loads(a, []),
            "description": d,
            "popularity": p,
            "origin": o,
        }
        for k, n, t, nm, a, d, p, o in store.query(
            "SELECT key, name, type, norm, aliases, description, popularity, origin FROM entities ORDER BY id"
        )
    ]


class EntityVectors:
    """The linker's cosine term from the entity vectors already stored: the similarity of a
    mention's surface to an entity's name and definition. The query embedder (the light
    path) loads on the first fuzzy candidate that has a vector, never for exact matches."""

    def __init__(self, store: Store, cfg):
        self.store, self.cfg = store, cfg
        self.ids = dict(
            store.query("SELECT e.key, e.id FROM entities e JOIN vec_src v ON v.kind = 'entity' AND v.id = e.id")
        )
        self._embedder = None
        self._surfaces: dict[str, object] = {}
        self._refs: dict[int, float | None] = {}

    def __bool__(self) -> bool:
        return bool(self.ids)

    def _embed(self, surface: str):
        if surface not in self._surfaces:
            from kgr.store import vectors

            if self._embedder is None:
                from kgr.embedders import get_embedder

                self._embedder = get_embedder(self.cfg, purpose="query")
                vectors.check_spec(self.store, vectors.VectorSpec(self._embedder.model, self._embedder.dim))
            self._surfaces[surface] = self._embedder.embed_documents([vectors.entity_text(surface, None, None, None)])[
                0
            ]
        return self._surfaces[surface]

    def _cos(self, text: str, eid: int) -> float | None:
        from kgr.store import vectors

        return vectors.similarities(self.store, vectors.ENTITY, self._embed(text), [eid]).get(eid)

    def __call__(self, ent, surface: str, string_sim: float) -> float:
        """How close the surface is to the entity's vector, relative to how close the entity's
        own names are (a bare name never reaches the cosine of name plus definition, so the raw
        cosine would understate every match): 1.0 when the surface is as good as its best name."""
        eid = self.ids.get(ent.key)
        if eid is None or not surface:
            return string_sim
        if eid not in self._refs:
            self._refs[eid] = max(
                (c for c in (self._cos(n, eid) for n in [ent.name, *ent.aliases[:4]]) if c is not None), default=None
            )
        sim, ref = self._cos(surface, eid), self._refs[eid]
        if sim is None or not ref or ref <= 0:
            return string_sim
        return min(1.0, max(0.0, sim / ref))


PARSE_BATCH = 64  # documents whose blocks go through spaCy in one stream
REFRESH_SHARE = 0.05  # re-read the whole corpus once this share of its documents changed
REFRESH_ALWAYS_CHARS = 1_000_000  # below this much text, re-reading the corpus costs under a second


def corpus_knowledge(
    store: Store, cfg, pending: list[tuple[str, str | None, str | None]], *, incremental: bool = False
) -> list[tuple[str, str]]:
    """What linking learns from the whole corpus: the mined gazetteer (stored in its table)
    and the aliases the documents declare, returned as (short, long) pairs.

    Both read every stored document, which costs about a minute on a 3,000-file corpus: too
    much for each saved file under ``kgr watch``. So they are recomputed in full when the
    corpus is small, when there is no gazetteer yet, or once the documents changed since the
    last full pass reach REFRESH_SHARE of the corpus; in between, the stored gazetteer is
    kept and the changed documents' own declarations join the stored ones. ``incremental``
    (one memory remembered: a few hundred milliseconds of re-reading every memory would be
    most of its time) drops the small-corpus exception: the full pass then runs only when
    there is none yet or REFRESH_SHARE of the corpus changed since the last."""
    from kgr.stages.link import learn_aliases

    if incremental:  # (the small-corpus exception is off: no need to read every text's length)
        docs, chars = store.scalar("SELECT count(*) FROM docs WHERE status='ok'"), 0
    else:
        docs, chars = store.query("SELECT count(*), coalesce(sum(length(text)), 0) FROM docs WHERE status='ok'")[0]
    changed = int(store.get_meta("graph.changed_since_refresh", 0) or 0) + len(pending)
    declared_before = store.get_meta("graph.declared") is not None
    have = declared_before and (incremental or store.scalar("SELECT count(*) FROM gazetteer") > 0)
    small = chars <= REFRESH_ALWAYS_CHARS and not incremental
    if not have or small or changed >= max(1.0, REFRESH_SHARE * docs):
        gazetteer = settings_of(cfg).extract.gazetteer
        mine(store, topk=gazetteer.mine_topk, min_freq=gazetteer.min_freq)
        declared = [pair for doc in stored_docs(store) for pair in learn_aliases(doc["text"], doc.get("title"))]
        changed = 0
    else:
        declared = [tuple(p) for p in loads(store.get_meta("graph.declared"), [])]
        declared += [pair for _, title, text in pending for pair in learn_aliases(text or "", title)]
    declared = list(dict.fromkeys((short, long) for short, long in declared))
    with store.write():
        store.set_meta("graph.declared", orjson.dumps(declared).decode())
        store.set_meta("graph.changed_since_refresh", changed)
    return declared


MAX_ERROR_CHARS = 300


def stored_records(store: Store, doc_id: int, path: str, title: str | None, text: str | None, hash_: str) -> list[dict]:
    """A stored document as the records ``kgr chunk`` gave for it, as far as extraction and
    linking read them: its doc record, then its chunk records in order."""
    doc = {"kind": records.DOC, "path": path, "title": title, "text": text or "", "hash": hash_}
    return [doc] + [
        {"kind": records.CHUNK, "doc": path, "ord": o, "start": s, "end": e, "text": t}
        for o, s, e, t in store.query(
            'SELECT ord, start, "end", text FROM chunks WHERE doc_id=? ORDER BY ord', (doc_id,)
        )
    ]


def graph_records(recs: Iterable[dict], extractor, linker, *, parsed=None) -> Iterator[dict]:
    """``kgr extract | kgr link``: the very stage functions, chained in one process."""
    from kgr.stages.extract import extract
    from kgr.stages.link import link

    return link(extract(recs, extractor=extractor, parsed=parsed), linker=linker)


def build_pending(
    store: Store,
    cfg,
    *,
    on_doc: Callable[[str], None] | None = None,
    use_vectors: bool = True,
    on_error: Callable[[dict], None] | None = None,
    incremental: bool = False,
    engine=None,
) -> int:
    """Extract and link every document without a current graph; return how many got one.
    With ``use_vectors``, the linker scores fuzzy candidates by the stored entity vectors.
    A document that cannot be extracted is recorded as failed (see the module docstring)
    and reported to ``on_error`` as an error record; the others go on.

    Each document's stored records go through :func:`extract_batch` then ``link``, the functions behind
    ``kgr extract`` and ``kgr link`` (as :func:`graph_records` chains them); what they learn from the corpus is passed in: the
    extractor carries the mined gazetteer, the linker the entities, votes and vectors of the
    rest of the graph and the aliases every document declares.

    ``engine`` (kgr.ingest.engine; this process by default) runs the extract stage over
    batches of PARSE_BATCH documents; linking and writing stay here, document by document in
    path order, whatever order the batches were extracted in."""
    pending = store.query(
        "SELECT id, path, title, text, hash FROM docs WHERE status='ok' AND graph_sig IS NULL ORDER BY path"
    )
    if not pending:
        return 0
    from kgr.stages.extract import extractor_from_config
    from kgr.stages.link import Linker, link

    declared = corpus_knowledge(
        store, cfg, [(path, title, text) for _, path, title, text, _ in pending], incremental=incremental
    )
    extractor = extractor_from_config(cfg, load_gazetteer(store))
    pending_ids = [doc_id for doc_id, *_ in pending]
    seed = seed_entities(store, pending_ids)
    ev = None
    if use_vectors:
        from kgr.store import vectors

        if vectors.stored_spec(store) is not None and vectors.has_tables(store):
            ev = EntityVectors(store, cfg)
            seeded = {e["key"] for e in seed}
            ev.ids = {k: i for k, i in ev.ids.items() if k in seeded}  # a key made again is a new entity
            ev = ev or None
    linker = Linker(seed, vectors=ev, votes=stored_votes(store, pending_ids))
    # Aliases first, from the whole corpus: "OIS" in one page links to the "Order Intake
    # Service (OIS)" that another page declares, whatever order the pages come in.
    for short, long in declared:
        linker.declare(short, long)
    built = 0

    def batches() -> Iterator[list[list[dict]]]:
        for at in range(0, len(pending), PARSE_BATCH):
            yield [stored_records(store, *row) for row in pending[at : at + PARSE_BATCH]]

    if engine is None or not engine.runs("extract") or len(pending) <= PARSE_BATCH:
        # one batch: no worker is worth starting (each loads spaCy and the relation model)
        extracted = (extract_batch(extractor, batch) for batch in batches())
    else:
        from kgr.ingest import engine as engines

        stamp = f"{store.path}:{store.get_meta(GAZETTEER_STAMP)}"
        terms = store.query(
            "SELECT term, type, freq, source FROM gazetteer ORDER BY freq DESC, term"
        )  # as load_gazetteer
        extracted = engine.map(engines.extract_shard, batches(), settings_of(cfg), terms, stamp)
    rows = iter(pending)
    for results in extracted:
        # results first: zip() takes from its first iterator before it finds the second one
        # exhausted, and a row taken so would be lost, shifting every later batch by one document
        for (recs, failure), (doc_id, path, *_) in zip(results, rows):
            # One document at a time through linking, so that a failure is that document's
            # alone: the error is recorded (GRAPH_FAILED) and the next document goes on.
            try:
                if failure is not None:
                    raise ExtractionFailed(failure)
                linked = []
                for rec in link(iter(recs), linker=linker):
                    if rec["kind"] == records.ERROR:
                        raise ExtractionFailed(rec["message"])
                    if rec["kind"] in DERIVED:
                        linked.append(rec)
            except Exception as exc:  # noqa: BLE001 - a document's failure is its own: recorded, reported, the run goes on
                rec = record_failure(store, doc_id, path, exc if isinstance(exc, ExtractionFailed) else _message(exc))
                if on_error:
                    on_error(rec)
                continue
            # Written as the load stage writes a document's derived records; not through
            # load() itself, because the document and its chunks are stored already (by the
            # first pass) and a document that names nothing still gets its (empty) graph.
            sig = graph_signature(linked)
            with store.write() as conn:
                graphstore.replace_derived(store, doc_id, linked, sig)
                conn.execute("UPDATE docs SET error=NULL WHERE id=? AND error LIKE 'extract:%'", (doc_id,))
            built += 1
            if on_doc:
                on_doc(path)
    return built


def extract_batch(extractor, docs: list[list[dict]]) -> list[tuple[list[dict], str | None]]:
    """``kgr extract`` over a batch of documents (each its doc record, then its chunk records),
    their blocks through spaCy in one stream (:func:`kgr.stages.extract.parse_batch`): for each document, (the
    extract stage's records, None), or ([], why its extraction failed)."""
    from kgr.stages.extract import extract, parse_batch

    parsed, broken = parse_batch(extractor, [recs[0] for recs in docs])
    failed = {path: _message(exc) for path, exc in broken.items()}
    ok = [recs for recs in docs if recs[0]["path"] not in failed]
    try:  # the batch in one stream: its relations decided together (one pass of the dense view's reader)
        every = [r for recs in ok for r in recs]
        stream = list(extract(every, extractor=extractor, parsed=parsed, batch=len(ok), isolate=True))
    except Exception:  # noqa: BLE001 - each document again on its own, so that only the failing one fails
        stream = None
    got: dict[str, list[dict]] = {}
    for rec in stream or ():
        if rec["kind"] == records.DOC:
            path = rec["path"]
        got.setdefault(path, []).append(rec)
    out: list[tuple[list[dict], str | None]] = []
    for recs in docs:
        path = recs[0]["path"]
        if path in failed:
            out.append(([], failed[path]))
            continue
        try:
            mine = got[path] if stream is not None else list(extract(recs, extractor=extractor, parsed=parsed))
            errors = [rec["message"] for rec in mine if rec["kind"] == records.ERROR]
            if errors:
                raise ExtractionFailed(errors[0])
            out.append((mine, None))
        except ExtractionFailed as exc:
            out.append(([], str(exc)))
        except Exception as exc:  # noqa: BLE001 - recorded and reported by the writer
            out.append(([], _message(exc)))
    return out


DERIVED = (records.ENTITY, records.MENTION, records.RELATION)  # what extract and link add to a document's records


class ExtractionFailed(Exception):
    """Extraction of one document failed; the message says why."""


def _message(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = f"cannot extract: {text}" if not text.startswith("cannot extract") else text
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def record_failure(store: Store, doc_id: int, path: str, reason) -> dict:
    """Mark a document's extraction as failed on its current text (its stored graph, if any,
    is kept) and say so where ``kgr status`` looks; return the error record."""
    from kgr.store import now_ms

    message = _message(reason)
    with store.write() as conn:
        conn.execute(
            "UPDATE docs SET graph_sig=?, error=?, updated_ms=? WHERE id=?",
            (GRAPH_FAILED, f"extract: {message}", now_ms(), doc_id),
        )
        store.set_meta("last_error", f"{path}: extract: {message}")
        store.log_event("error", path, f"extract: {message}")
    return records.error("extract", message, path=path)


def graph_signature(recs: Iterable[dict]) -> str:
    h = hashlib.sha256(b"graph")
    for rec in recs:
        h.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()
