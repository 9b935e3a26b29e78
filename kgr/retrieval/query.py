"""Hybrid retrieval: BM25 + vectors fused, then graph expansion.

One function, :func:`hybrid_query`, answers ``kgr query`` and the MCP tool ``hybrid_query``.

Modes:

- ``bm25``: the FTS5 index over chunk text and prelude (user text is escaped, never FTS syntax);
- ``vector``: KNN over the chunk vectors; each candidate chunk (of this list and, in hybrid and
  graph modes, of the keyword list) is then scored by its nearest sentence
  (:func:`kgr.store.vectors.sentence_similarities`), where its sentences have vectors;
- ``hybrid``: both, fused (:func:`fuse`): by default each list's scores as z-scores over that
  list, the keyword list weighted ``keyword_share``; a list whose head stands out counts more
  for that query, so a flat (weak) vector list cannot push a clear keyword hit down, which
  reciprocal rank fusion (``fusion: rrf``) does; half of a chunk's fused score is its page's,
  each list scoring a page by its best chunk there;
- ``graph`` (the default): hybrid; when the best passage is the page of an entity the
  question names, a second search (``weights.feedback``, the bridge to the next hop): the
  question with the entity that page names right after the question's relation word in
  place of the page's subject ("directed by X" for "the director of"), or, when it names
  none so, the question with all the names the page gives; then seed entities (named in
  the query, nearest by entity vector, mentioned in the top chunks) expanded breadth-first over the allowed
  relation types and over what chunks mention, up to ``hops``. Chunks reached through the
  graph compete with the fused ones on one score (seed 000 section 14)::

      final = w_semantic * direct + gate * (w_hop * hop_score + w_rel * edge_weight) + w_residual * rest

  where ``direct`` is the fused score of the chunk's own evidence, ``rest`` its keyword match for
  the question's words that the best passage's page does not write (what is left to find once
  that page is found, :func:`_residual`), and ``hop_score`` the
  strength of the best walk that reached it: the seed's strength, times the confidence of
  every edge on the way (edges under ``min_confidence`` are not followed), split over a hub's
  edges. The best of paths counts, never their number, and a seed taken from a top chunk gives
  nothing to its own document. ``gate`` (``weights.evidence``) can make what the graph adds
  depend on the chunk's direct evidence. The best fused result keeps first place
  (``weights.pin``): the graph adds what the question's direct evidence leads to, it does not
  overrule that evidence. Then placement (:func:`_place`, ``weights.place``): the pages whose
  subject the question names, and the pages a placed page leads to by a linked mention of their
  subject (``place_rounds`` rounds: the second page's subject's links lead to the third), are
  placed next to the page that leads to them rather than scored against keyword matches, when
  the link is strong enough; so is, for a question, a page about an aspect of an entity a placed
  page names (:func:`_aspect_pages`: "History of X", "2018 X gubernatorial election"), when its
  text answers the question's words the leading page lacks and it is nearer the question than X's
  own page; each result's ``placed_by`` says which link placed it. A page the
  question names in full goes first when the best result is about nothing the question names
  (``weights.place_first``); a name the question writes in lower case ("what time") is a common
  noun, a weak link. Last, for a question, the page the question's vector finds nearest is kept
  among the first ``VECTOR_SLOT`` pages (:func:`_vector_slot`): a paraphrased other half shares
  few words with its page. On a database with no entities graph mode is hybrid, at hybrid's cost.

Every result carries provenance (path, section, snippet, offsets, and the chunk's sentence
nearest the question with its offsets in the document, where the chunk has sentence vectors),
its entities, the edges that reached it and a one-line reason.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from kgr.config import RetrievalSettings, RetrievalWeights
from kgr.errors import UsageError
from kgr.retrieval.entities import definitions, fts_query
from kgr.stages.link import QUALIFIER, stop_words, tokens
from kgr.store import Store, dumps, loads, vectors

MODES = ("bm25", "vector", "hybrid", "graph")
RRF_K = 60
HOP_DECAY = 0.7  # strength kept per hop over an edge
FANOUT = 1.0  # a walk leaving an entity splits its strength over the entity's edges (degree ** FANOUT)
MENTION_FACTOR = 0.5  # a chunk that only mentions a reached entity, against the entity's own page
ABOUT_SHARE = 0.5  # the share of a page's title an entity's name must cover for the page to be about it
REL_WEIGHTS = {
    "defines": 1.0,
    "uses": 0.9,
    "depends_on": 0.8,
    "part_of": 0.8,
    "owned_by": 0.7,
    "precedes": 0.6,
    "located_in": 0.6,
    "refers_to": 0.5,
    "cites": 0.5,
    "same_as": 1.0,
    "mentions": 0.6,
}
MAX_K, MAX_HOPS, MAX_NODES = 200, 4, 2000
SNIPPET_CHARS = 240
ALIAS_LINK = 0.5  # placement: the question names an entity by one of its aliases, against its name
RAW_LINK = 0.7  # placement: a page's title found word for word in the question, against an entity the question names
SAME_NAME = 0.9  # placement: a page about another entity of the same name (another type), against the entity itself
COMMON_NOUN = 0.5  # placement: the question writes an entity's name in lower case ("what time"), against a name
APPOSITION = re.compile(r",\s[^,]*$")  # "George Grey, 2nd Earl of Kent": the title's head names the subject
APPOSITION_SHARE = 0.9
TITLE_WINDOW = 30  # placement: the best results whose titles are read for a raw title link
FIRST_DIRECT = 10  # placement: a page goes first only when the question's own words or vector find it this high
CHAIN_FIRST = 0.85  # placement: a page led to from a page placed first, by a link this strong, goes with it
STEM = 5  # placement: letters of a word compared to tell the relation a question asks through
CONTEXT_CHARS = 40  # placement: the text before a mention read for that relation ("... directed by ")
ANSWERED = 1  # placement: a page whose lead is placed already counts as that lead's pick when it is the one asked for
FEEDBACK_DEPTH = 3  # feedback: the best fused passages read for the page of an entity the question names
INTERROGATIVES = frozenset("who whom whose what which where when why how".split())
RESIDUAL_PAGE_CHUNKS = 200  # residual: the chunks of the best page read for the words it writes (a long page's first)
FOCUS = 1  # feedback: 1 searches with the name the best page writes after the question's relation word, 0 never
ASPECT_LINK = 1.0  # placement: a page whose title writes X among other words ("History of X"), against X's own page
ASPECT_HITS = 20  # placement: the best keyword matches read for such pages, per leading page
ASPECT_WORDS = 2  # placement: such a page writes at least this many of the question's words its leading page lacks
ASPECT_NEAR = 0.25  # placement: and is at least this near the question (cosine)
ASPECT_NEARER = 1  # placement: and nearer it than the entity's own page
# placement: the residual search's best page, when the question's own words or vector find it this high, is not
# ranked below pages the graph brought in on weaker direct evidence (:func:`_residual_over_hops`)
RESIDUAL_DIRECT = 10
# graph mode, for a question: the page the question's vector finds nearest is among the first this many (0: off)
VECTOR_SLOT = 5
# the vector list scores a candidate chunk by its nearest sentence (kgr.store.vectors.sentence_similarities), 0: by
# the chunk's own vector
SENTENCES = 1
# fusion: the share of a chunk's fused score that is its page's (each list scoring a page by its best chunk there)
DOC_SHARE = 0.5


# hybrid_query's weights are the retrieval.weights settings; their defaults live in kgr.config.
Weights = RetrievalWeights
_DEFAULTS = RetrievalSettings()


@dataclass
class Candidate:
    chunk_id: int
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    cosine: float | None = None
    rrf: float = 0.0
    direct: float = 0.0  # the fused direct evidence (keyword, vector, feedback lists) in [0, 1]
    hop: float = 0.0
    rel: float = 0.0
    via: list[dict] = field(default_factory=list)  # edges that reached it
    entities: set[int] = field(default_factory=set)
    score: float = 0.0
    rest: float = 0.0  # graph mode: its match for the question's words the best page lacks, over the best match
    placed: dict | None = None  # the link that placed it (see _place)
    second: tuple[int, str] | None = None  # its best rank in graph mode's second search, and what that search added
    rest_rank: tuple[int, str] | None = None  # its rank in the search for the words the best page lacks, and them
    kept: bool = False  # moved up to stay among the first pages as the question's nearest by vector (_vector_slot)


def clamp(value: int, low: int, high: int, name: str) -> int:
    if value is None:
        return low
    if not low <= value <= high:
        raise UsageError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _content_words(q: str) -> str:
    """The question without English function words ("how do I ... to a ..."): they carry
    almost no BM25 weight but make the full-text match read most of the corpus."""
    words = re.findall(r"\w+", q, flags=re.UNICODE)
    kept = [w for w in words if w.lower() not in stop_words()]
    return " ".join(kept) if kept else q


def bm25(store: Store, q: str, n: int) -> list[int]:
    return [cid for cid, _score in bm25_scored(store, q, n)]


def bm25_scored(store: Store, q: str, n: int, *, only: set[int] | None = None) -> list[tuple[int, float]]:
    """The best ``n`` chunks by BM25 with their scores (higher is better); ``only``: among these chunk ids."""
    match = fts_query(_content_words(q))
    if not match:
        return []
    if only is not None:
        rows = store.query(
            "SELECT rowid, bm25(chunks_fts, 1.0, 0.5) AS s FROM chunks_fts WHERE chunks_fts MATCH ? "
            "AND rowid IN (SELECT value FROM json_each(?)) ORDER BY s LIMIT ?",
            (match, dumps(sorted(only)), n),
        )
    else:
        rows = store.query(
            "SELECT rowid, bm25(chunks_fts, 1.0, 0.5) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
            (match, n),
        )
    return [(r[0], -float(r[1])) for r in rows]


def _doc_of(store: Store, chunk_ids: list[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for i in range(0, len(chunk_ids), 500):
        part = chunk_ids[i : i + 500]
        out.update(store.query(f"SELECT id, doc_id FROM chunks WHERE id IN ({','.join('?' * len(part))})", part))
    return out


def tagged_chunks(store: Store, tags: Sequence[str]) -> set[int]:
    """The chunks of the documents that carry every one of ``tags`` (compared without case),
    whether given to ingest_docs or in the document's front matter."""
    want = sorted({t.strip().lower() for t in tags if t and t.strip()})
    if not want:
        return set()
    rows = store.query(
        "SELECT c.id FROM chunks c WHERE c.doc_id IN ("
        f"SELECT doc_id FROM doc_tags WHERE tag IN ({','.join('?' * len(want))}) "
        "GROUP BY doc_id HAVING count(DISTINCT lower(tag)) = ?)",
        (*want, len(want)),
    )
    return {r[0] for r in rows}


@dataclass
class RankedList:
    """One retrieval list for fusion: chunk id -> score (higher is better), and its weight."""

    weight: float
    scores: dict[int, float]
    min_spread: float = 0.0  # the least standard deviation its scores are taken to have
    depth: int = 0  # the results asked for: a shorter list is every chunk that matches (the rest score 0)


def fuse(
    cands: dict[int, Candidate], lists: list[RankedList], weights: Weights, doc_of: dict[int, int] | None = None
) -> None:
    """Set every candidate's ``direct`` score in [0, 1] from the lists it is on.

    ``rrf``: the reciprocal-rank sum, over the best one. ``zscore``: each list's scores become
    z-scores over that list, weighted and summed; a chunk missing from a list gets the list's
    lowest score, or 0 when the list is shorter than its ``depth``: it then holds every match,
    and what matches no word of the question scores 0, a 0 that counts once in the list's mean
    and spread (a keyword list with one hit, an error code only one page writes, then puts that
    hit above the vector list's look-alikes instead of counting for nothing). How far a list's
    head stands out from its tail is then what it weighs for this query: a keyword list with
    one clear hit keeps that hit on top against a vector list whose cosines are all alike (and
    the vector list's spread is floored at ``cosine_spread``, so a flat list is not stretched
    into a confident one). With ``doc_of`` (chunk id -> its document), each list also scores
    every page by its best chunk there, and a chunk's sum is ``DOC_SHARE`` its page's sum and the
    rest its own: a page the keyword list finds in one passage and the vector list in another
    counts both, against a passage that each list ranks a little lower. The sum is scaled so
    that a chunk at the bottom of every list scores 0 and the best scores 1."""
    if not cands:
        return
    if weights.fusion == "rrf" or not lists:
        top = max(c.rrf for c in cands.values()) or 1.0
        for c in cands.values():
            c.direct = c.rrf / top
        return
    fused = _zsum(lists, list(cands))
    if fused is None:
        for c in cands.values():
            c.direct = 0.0
        return
    raw, floor = fused
    if doc_of and DOC_SHARE > 0:
        # a page's evidence, besides the chunk's own: each list scores a page by its best chunk
        # there, so that a page one list finds in one passage and the other in another counts both
        by_doc = []
        for lst in lists:
            best: dict[int, float] = {}
            for cid, v in lst.scores.items():
                d = doc_of.get(cid)
                if d is not None and (d not in best or v > best[d]):
                    best[d] = v
            complete = len(lst.scores) < lst.depth  # it held every match: so does its page list
            by_doc.append(RankedList(lst.weight, best, lst.min_spread, len(best) + 1 if complete else 0))
        pages = _zsum(by_doc, sorted(set(doc_of.values())))
        if pages is not None:
            page_raw, page_floor = pages
            for cid in raw:
                d = doc_of.get(cid)
                raw[cid] = (1 - DOC_SHARE) * raw[cid] + DOC_SHARE * (page_raw[d] if d in page_raw else page_floor)
            floor = (1 - DOC_SHARE) * floor + DOC_SHARE * page_floor
    top = max(raw.values())
    if top - floor <= 1e-9:  # one result, or all alike: each is as good as the best
        for cid, c in cands.items():
            c.direct = 1.0 if any(cid in lst.scores for lst in lists if lst.scores and lst.weight > 0) else 0.0
        return
    for cid, c in cands.items():
        c.direct = min(1.0, max(0.0, (raw[cid] - floor) / (top - floor)))


def _zsum(lists: list[RankedList], keys: list[int]) -> tuple[dict[int, float], float] | None:
    """The weighted sum of each key's z-scores over ``lists`` (see :func:`fuse`), and the sum a key
    at the bottom of every list gets; None when no list has scores."""
    parts = []
    for lst in lists:
        if not lst.scores or lst.weight <= 0:
            continue
        vals = list(lst.scores.values())
        low = min(vals)
        if len(vals) < lst.depth:  # every match: the chunks it lacks score 0, and count once
            vals.append(0.0)
            low = 0.0
        mu = sum(vals) / len(vals)
        sd = max(math.sqrt(sum((v - mu) ** 2 for v in vals) / len(vals)), lst.min_spread) or 1.0
        parts.append((lst, mu, sd, low))
    if not parts:
        return None
    floor = sum(lst.weight * (low - mu) / sd for lst, mu, sd, low in parts)
    raw = {key: sum(lst.weight * (lst.scores.get(key, low) - mu) / sd for lst, mu, sd, low in parts) for key in keys}
    return raw, floor


def hybrid_query(
    store: Store,
    q: str,
    *,
    k: int = _DEFAULTS.k,
    hops: int = _DEFAULTS.hops,
    rels: Sequence[str] | None = None,
    mode: str = "graph",
    embed_query: Callable[[str], Any] | None = None,
    weights: Weights | None = None,
    candidates: int | None = None,
    max_nodes: int = 500,
    vectors_in_memory: bool = False,
    tags: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Rank chunks for ``q``. ``embed_query`` maps text to a vector (needed by vector, hybrid, graph).
    ``vectors_in_memory`` suits long-lived callers: see :func:`kgr.store.vectors.knn`.
    ``tags``: only chunks of documents that carry every one of these tags (see :func:`tagged_chunks`);
    the graph is still walked through any document, but only their chunks are returned."""
    q = (q or "").strip()
    if not q:
        raise UsageError("the query is empty")
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    k = clamp(k, 1, MAX_K, "k")
    hops = clamp(hops, 0, MAX_HOPS, "hops")
    max_nodes = clamp(max_nodes, 1, MAX_NODES, "max_nodes")
    weights = weights or Weights()
    n = candidates or max(50, 5 * k)
    rels = list(rels) if rels else None
    if rels:
        known = {r[0] for r in store.query("SELECT name FROM relation_types")} | {"mentions"}
        bad = [r for r in rels if r not in known]
        if bad:
            raise UsageError(f"unknown relation type {', '.join(bad)}", hint=f"known: {', '.join(sorted(known))}")

    allowed = tagged_chunks(store, tags) if tags else None

    cands: dict[int, Candidate] = {}

    def cand(cid: int) -> Candidate:
        if cid not in cands:
            cands[cid] = Candidate(cid)
        return cands[cid]

    keyword: dict[int, float] = {}
    semantic: dict[int, float] = {}
    nearest: dict[int, tuple[int, float]] = {}  # chunk id -> its sentence nearest the question, and its cosine
    if mode in ("bm25", "hybrid", "graph") and allowed != set():
        for rank, (cid, score) in enumerate(bm25_scored(store, q, n, only=allowed), 1):
            c = cand(cid)
            c.bm25_rank = rank
            c.bm25_score = score
            c.rrf += 1.0 / (RRF_K + rank)
            keyword[cid] = score
    qvec = None
    if mode in ("vector", "hybrid", "graph") and allowed != set():
        if vectors.stored_spec(store) is None:
            if mode == "vector":
                raise UsageError(f"{store.path} has no vectors yet", hint=f"run: kgr embed --pending --db {store.path}")
        else:
            if embed_query is None:
                raise UsageError("this mode needs a query embedder")
            qvec = embed_query(q)
            if allowed is None:
                near = vectors.knn(store, vectors.CHUNK, qvec, n, in_memory=vectors_in_memory)
            else:  # the tagged chunks alone: every one of them is compared
                sims = vectors.similarities(store, vectors.CHUNK, qvec, sorted(allowed), in_memory=vectors_in_memory)
                near = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
            for rank, (cid, sim) in enumerate(near, 1):
                c = cand(cid)
                c.vector_rank = rank
                c.cosine = sim
                c.rrf += 1.0 / (RRF_K + rank)
                semantic[cid] = sim
        if semantic and SENTENCES:
            # a candidate's nearest sentence, where its sentences have vectors: a question asks for
            # one fact, which a chunk's single vector averages with the rest of the chunk
            nearest = vectors.best_sentences(store, qvec, list(cands))
            semantic.update((cid, sim) for cid, (_, sim) in nearest.items())
    share = weights.keyword_share if keyword and semantic else (1.0 if keyword else 0.0)
    lists = [RankedList(share, keyword, depth=n), RankedList(1.0 - share, semantic, weights.cosine_spread)]
    doc_of = _doc_of(store, list(cands)) if DOC_SHARE > 0 else None
    fuse(cands, lists, weights, doc_of)

    # a database with no entities has no graph: graph mode is then hybrid, at hybrid's cost
    graph = mode == "graph" and bool(cands) and _has_entities(store)
    named = _named_entities(store, q) if graph else {}
    if graph and weights.feedback:
        more = _feedback(
            store,
            q,
            named,
            cands,
            cand,
            embed_query if qvec is not None else None,
            n,
            weights.feedback,
            vectors_in_memory,
        )
        if more:
            lists += [
                RankedList(weights.feedback * share, more[0], depth=n),
                *[RankedList(weights.feedback * (1.0 - share), m, weights.cosine_spread) for m in more[1:]],
            ]
            if doc_of is not None:
                doc_of.update(_doc_of(store, [cid for cid in cands if cid not in doc_of]))
            fuse(cands, lists, weights, doc_of)

    if graph and weights.residual > 0 and _is_question(q):
        _residual(store, q, cands, cand, n, allowed)

    seeds: dict[int, str] = {}
    reached: dict[int, dict] = {}
    edges: list[dict] = []
    truncated = False
    if graph:
        home: dict[int, int] = {}
        echo: set[int] = set()
        seeds = _seed_entities(store, named, qvec, cands, weights, home, echo, in_memory=vectors_in_memory, q=q)
        reached, edges, truncated = _expand(store, seeds, hops, rels, max_nodes, weights.min_confidence)
        _reach_chunks(store, reached, cands, rels, home, echo)

    if qvec is not None:
        missing = [cid for cid, c in cands.items() if c.cosine is None]
        for cid, sim in vectors.similarities(store, vectors.CHUNK, qvec, missing, in_memory=vectors_in_memory).items():
            cands[cid].cosine = sim

    if allowed is not None:  # the graph may have reached chunks of other documents
        cands = {cid: c for cid, c in cands.items() if cid in allowed}
    scoring = mode if mode != "graph" or graph else "hybrid"
    _score(cands, scoring, weights, qvec is not None)
    ranked = _rank(cands, scoring, weights, len(cands))
    if graph and not any(c.hop for c in ranked[:k]):
        # the graph brought nothing into the results: they are the hybrid ranking
        _score(cands, "hybrid", weights, qvec is not None)
        ranked = _rank(cands, "hybrid", weights, len(cands))
    if graph and RESIDUAL_DIRECT and len(ranked) > 2:
        ranked = _residual_over_hops(ranked, named)
    if graph and weights.place > 0 and ranked:
        ranked = _place(store, ranked, cands, named, q, qvec, weights, allowed, vectors_in_memory)
    if graph and VECTOR_SLOT and ranked and _is_question(q):
        ranked = _vector_slot(store, ranked)
    ranked = ranked[:k]
    if qvec is not None:  # the results the vector list did not read (the graph's, the keyword list's alone)
        nearest.update(vectors.best_sentences(store, qvec, [c.chunk_id for c in ranked if c.chunk_id not in nearest]))
    results = _describe(store, ranked, reached, nearest)
    ent_rows = _entity_rows(store, [*seeds, *[e for e in reached if e not in seeds]][:100], reached)
    return {
        "query": q,
        "mode": mode,
        "k": k,
        "hops": hops,
        **({"tags": list(tags)} if tags else {}),
        "results": results,
        "entities": ent_rows,
        "edges": edges[:200],
        "truncated": truncated or len(edges) > 200,
    }


# -- graph -------------------------------------------------------------------------------


def _feedback(
    store: Store,
    q: str,
    named: dict[int, str],
    cands: dict[int, Candidate],
    cand,
    embed_query,
    n: int,
    weight: float,
    in_memory: bool,
) -> list[dict[int, float]]:
    """Pseudo-relevance feedback through the graph: the entities the best fused passage names
    join the question for a second BM25 and vector search, whose ranks add to the fusion with
    ``weight``. "The waterfall in the country where the Bubye River is found": the Bubye River
    page names Zimbabwe, and "waterfall ... Zimbabwe" finds Victoria Falls, a page neither the
    question's words nor its vector reach. When the page names an entity right after the
    question's relation word, the search asks the next hop instead (:func:`_focused`). Only when
    that passage is the page of an entity the question names: a question naming nothing (a claim
    to check, a how-to) has no bridge to follow, and a passage merely like it would pull in its
    own look-alikes. The best fused passage leads when it is such a page; else the next of the
    first ``FEEDBACK_DEPTH`` that is the page of an entity the question names by its own name,
    written as a name (an alias or a common noun is too weak a reason to pass the best over).
    Returns the two new lists (keyword, then vector when there is an embedder) with their
    scores, or []; each chunk on them keeps its best rank and what the search added
    (``Candidate.second``, shown in the result's reason)."""
    if not named:
        return []
    about: list[int] = []
    by_name: list[int] | None = None
    for i, best in enumerate(sorted(cands.values(), key=lambda c: (-c.direct, c.chunk_id))[:FEEDBACK_DEPTH]):
        if i and by_name is None:
            by_name = _by_name(store, q, named)
        if i and not by_name:
            break
        about = _is_about(store, best.chunk_id, by_name if i else list(named))
        if about:
            break
    if not about:
        return []
    rows = store.query(
        'SELECT e.id, e.name, m.start, m."end" FROM mentions m JOIN entities e ON e.id = m.entity_id '
        "WHERE m.chunk_id = ? AND m.source != 'coref' AND e.status = 'active' AND e.type NOT IN ('DATE', 'VERSION') "
        "ORDER BY m.start, e.id",
        (best.chunk_id,),
    )
    names = list(dict.fromkeys(name for _eid, name, _s, _e in rows))
    if not names:
        return []
    focused = _focused(store, q, named, about, best.chunk_id, rows) if FOCUS else None
    if focused:
        second, label = focused
    else:
        second, label = f"{q} {' '.join(names)}", f"with the names chunk {best.chunk_id} gives"
    lists = [dict(bm25_scored(store, second, n))]
    if embed_query is not None:
        qvec = embed_query(second)
        lists.append(dict(vectors.knn(store, vectors.CHUNK, qvec, n, in_memory=in_memory)))
    for ranking in lists:
        for rank, cid in enumerate(ranking, 1):
            c = cand(cid)
            c.rrf += weight / (RRF_K + rank)
            if c.second is None or rank < c.second[0]:
                c.second = (rank, label)
    return lists


def _is_question(q: str) -> bool:
    """Whether the text asks (a question mark, or an interrogative first word) rather than states:
    a claim to check ("Aspirin lowers the risk of ...") is one page's to support, with no other
    half to look for."""
    first = re.match(r"\W*(\w+)", q)
    return q.rstrip().endswith("?") or bool(first and first.group(1).lower() in INTERROGATIVES)


def _residual(store: Store, q: str, cands: dict[int, Candidate], cand, n: int, allowed: set[int] | None) -> None:
    """What is left to find once the best fused result is found: the question's content words that
    its page does not write (compared by their first ``STEM`` letters), searched by keyword. "The
    minimum retention period for the records produced by the nightly payout job": the retention
    policy comes first, and what it lacks, "produced nightly payout job", finds the job's page, where
    the whole question's words found the policy's look-alikes. Each chunk found gets ``rest``, its
    score over the best one's, which graph mode adds to its score (``weights.residual``); the best
    result's own chunks, and a question whose words the best page all writes, get nothing. Asked
    only for a question (:func:`_is_question`): a claim to check has no other half to look for."""
    if not cands:
        return
    best = min(cands.values(), key=lambda c: (-c.direct, c.chunk_id))
    page = store.scalar("SELECT doc_id FROM chunks WHERE id = ?", (best.chunk_id,))
    words = _lacking(store, page, q)
    if not words:
        return
    found = bm25_scored(store, " ".join(words), n, only=allowed)
    if not found:
        return
    pages = dict(
        store.query(
            f"SELECT id, doc_id FROM chunks WHERE id IN ({','.join('?' * len(found))})", [cid for cid, _ in found]
        )
    )
    top = found[0][1] or 1.0
    label = " ".join(words)
    for rank, (cid, score) in enumerate(found, 1):
        if pages.get(cid) == page:
            continue
        c = cand(cid)
        c.rest = score / top
        c.rest_rank = (rank, label)


def _residual_over_hops(ranked: list[Candidate], named: dict[int, str]) -> list[Candidate]:
    """A page the graph brought in does not stand above the page that the words the best result lacks
    find first (:func:`_residual`) on fan-out: when that page's chunk is a direct match too (the
    question's own words or vector rank it ``RESIDUAL_DIRECT`` or better), it moves up past every
    page right above it that the graph reached (``hop``) and the question matches less directly,
    unless that page is about an entity the question names (``named``): that is the question's own
    evidence, not fan-out.
    "What are the steps to load a new topic into the warehouse?": the best result is a decision
    record about the message bus, which names the bus; the bus's own page, reached through that
    mention and matching little of the question, stood above the warehouse's page, a direct match
    and the first for "steps load warehouse". The best result keeps its place, and a page placed by a link
    (:func:`_place`) is placed after this."""
    i = next((k for k, c in enumerate(ranked) if c.rest_rank is not None and c.rest_rank[0] == 1), None)
    if i is None:
        return ranked
    first = ranked[i]
    if min(first.bm25_rank or MAX_K + 1, first.vector_rank or MAX_K + 1) > RESIDUAL_DIRECT:
        return ranked
    j = i
    while j > 1 and _fanned_out(ranked[j - 1], named) and ranked[j - 1].direct < first.direct:
        j -= 1
    if j == i:
        return ranked
    return ranked[:j] + [first] + ranked[j:i] + ranked[i + 1 :]


def _vector_slot(store: Store, ranked: list[Candidate]) -> list[Candidate]:
    """The page the question's vector finds nearest stands among the first ``VECTOR_SLOT`` pages.
    The keyword list's larger share and the pages placed by links (:func:`_place`) come first, and
    a question that paraphrases its other half shares few words with the page that answers it:
    "What kind of plane dropped the bomb on X's birthplace?" found the bomber's page as semantic
    match #1 and keyword match #15, and ranked it 8th, below look-alikes of "bomb" and "plane".
    When no chunk of that page is already among the first pages, its chunk takes the place of the
    last of them, which moves down one."""
    i = next((k for k, c in enumerate(ranked) if c.vector_rank == 1), None)
    if i is None or i < VECTOR_SLOT:  # among the first chunks, so among the first pages
        return ranked
    docs = _doc_of(store, [c.chunk_id for c in ranked[: i + 1]])
    own = docs.get(ranked[i].chunk_id)
    if own is None:  # its chunk is gone: a writer replaced the page since the search
        return ranked
    pages: set[int] = set()
    for j, c in enumerate(ranked[:i]):
        page = docs.get(c.chunk_id)
        if page is None:
            continue
        if page == own:
            return ranked  # its page is there already, by another of its chunks
        if page not in pages:
            pages.add(page)
            if len(pages) == VECTOR_SLOT:
                ranked[i].kept = True
                return ranked[:j] + [ranked[i]] + ranked[j:i] + ranked[i + 1 :]
    return ranked


def _fanned_out(c: Candidate, named: dict[int, str]) -> bool:
    """Did the graph bring this chunk in through something other than an entity the question names?"""
    return c.hop > 0 and not any(v["entity"] in named and v["distance"] == 0 for v in c.via)


def _lacking(store: Store, doc_id: int, q: str) -> list[str]:
    """The question's content words that the page does not write (compared by their first ``STEM``
    letters): what is left to find once that page is found."""
    have = {
        w.lower()[:STEM]
        for (text,) in store.query(
            "SELECT text FROM chunks WHERE doc_id = ? ORDER BY ord LIMIT ?", (doc_id, RESIDUAL_PAGE_CHUNKS)
        )
        for w in re.findall(r"\w+", text or "")
    }
    # _content_words gives the question back whole when it is all function words: they are left out here too
    return [
        w
        for w in re.findall(r"\w+", _content_words(q))
        if len(w) > 2 and w.lower()[:STEM] not in have and w.lower() not in stop_words()
    ]


def _by_name(store: Store, q: str, named: dict[int, str]) -> list[int]:
    """The entities the question names by their own name (not an alias), written as a name."""
    if not named:
        return []
    names = dict(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(named))})", list(named)))
    return [e for e, n in named.items() if names.get(e) == n and _written_as_name(q, n)]


def _focused(
    store: Store, q: str, named: dict[int, str], about: list[int], chunk_id: int, rows
) -> tuple[str, str] | None:
    """The question's next hop: when the page writes one of the entities it names right after the
    question's relation word ("published by the American Psychological Association" for "the
    association which published ..."), the question with that entity in place of the name of the
    entity the page is about ("the first president of the association which published American
    Psychological Association"), and what it put in whose place; or None."""
    spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for eid, _name, start, end in rows:
        if eid not in named:
            spans[(chunk_id, eid)].append((start, end))
    asks = _asked_for(store, [chunk_id], spans, q) if spans else {}
    if not asks:
        return None
    top = max(asks.values())
    bridge = next(name for eid, name, _s, _e in rows if asks.get((chunk_id, eid)) == top)
    out, replaced = q, []
    # a name the question writes in lower case ("gets its coffee") is a common noun: no entity to replace
    for name in sorted({named[e] for e in about if _written_as_name(q, named[e])}, key=len, reverse=True):
        new = re.sub(re.escape(name), bridge, out, count=1, flags=re.IGNORECASE)
        if new != out:
            out = new
            replaced.append(name)
    if not replaced:
        return None
    return out, f"with {bridge} for {' and '.join(replaced)}, as chunk {chunk_id} names it"


def _has_entities(store: Store) -> bool:
    """Whether the database has an active entity (a graph to walk)."""
    return store.scalar("SELECT EXISTS (SELECT 1 FROM entities WHERE status = 'active')") == 1


def _is_about(store: Store, chunk_id: int, entity_ids: list[int]) -> list[int]:
    """Those of the entities the chunk's page is about (empty: none): the name covers most of the
    title, a trailing qualifier aside ("Hardcase (1972 film)" is the page of Hardcase)."""
    about = []
    for eid, title_len, title in store.query(
        f"SELECT m.entity_id, max(length(m.surface)), d.title FROM mentions m JOIN docs d ON d.id = m.doc_id "
        f"WHERE m.chunk_id = ? AND m.entity_id IN ({','.join('?' * len(entity_ids))}) "
        f"AND json_extract(m.features, '$.in_title') AND m.source != 'coref' GROUP BY m.entity_id ORDER BY m.entity_id",
        (chunk_id, *entity_ids),
    ):
        core = QUALIFIER.sub("", (title or "").strip()) or (title or "").strip()
        if title_len >= ABOUT_SHARE * len(core or " "):
            about.append(eid)
    return about


def _named_entities(store: Store, q: str) -> dict[int, str]:
    """Entities whose name or alias the query contains, word for word: id -> the name matched."""
    named: dict[int, str] = {}
    match = fts_query(_content_words(q))
    if not match:
        return named
    qwords = _forms(q)
    for eid, name, aliases in store.query(
        "SELECT e.id, e.name, e.aliases FROM entities_fts f JOIN entities e ON e.id = f.rowid "
        "WHERE entities_fts MATCH ? AND e.status = 'active' ORDER BY bm25(entities_fts) LIMIT 200",
        (match,),
    ):
        for name_ in (name, *loads(aliases, [])):
            if any(len(w) >= 3 and f" {w} " in qw for w in _forms(name_, padded=False) for qw in qwords):
                named[eid] = name_
                break
    return named


def _forms(text: str, *, padded: bool = True) -> tuple[str, ...]:
    """The text's words as one string, CamelCase split and not ("McQuade" is written "Mcquade" in a
    title-cased question: "mc quade" and "mcquade"), padded with spaces for a word-for-word search."""
    forms = dict.fromkeys(" ".join(tokens(t)) for t in (text, text.lower()))
    return tuple(f" {f} " for f in forms) if padded else tuple(forms)


def _written_as_name(q: str, name: str) -> bool:
    """Whether the question writes ``name`` as a name: some occurrence has a capital letter, or the
    question has none to tell by (all lower case). "What time does ..." does not name "Time", nor
    "the body of water" "Water"; "the Renaissance" names it."""
    if not any(ch.isupper() for ch in q[1:]) or not any(ch.isupper() for ch in name):
        return True
    want = tokens(name.lower())
    if not want:
        return True
    words = [(m.group(0), tuple(tokens(m.group(0).lower()))) for m in re.finditer(r"\w+", q)]
    flat: list[tuple[str, int]] = [(t, i) for i, (_w, ts) in enumerate(words) for t in ts]
    for start in range(len(flat) - len(want) + 1):
        if [t for t, _ in flat[start : start + len(want)]] == want:
            span = {i for _t, i in flat[start : start + len(want)]}
            if any(ch.isupper() for i in span for ch in words[i][0]):
                return True
    return False


def _seed_entities(
    store: Store,
    named: dict[int, str],
    qvec,
    cands: dict[int, Candidate],
    weights: Weights,
    home: dict[int, int] | None = None,
    echo: set[int] | None = None,
    *,
    in_memory: bool = False,
    q: str = "",
) -> dict[int, tuple[str, int, float]]:
    """Entities to start from, with their distance from the query and a strength in [0, 1]:
    named in it (0, full strength, ``COMMON_NOUN`` of it for a name the question ``q`` writes in lower
    case: "What time does ..." does not name Time), unless it is part of a longer name it names
    (:func:`_outermost`: in "Akinoshu Kenji's birthplace" the question names the wrestler, not every
    Kenji); nearest by vector (1, its similarity); mentioned in the top chunks (1, the chunk's fused
    score relative to the best). ``home`` receives, for a seed
    taken from a top chunk, that chunk's document: the seed's own page there is no new evidence.
    ``echo`` receives the seeds found only by vector: the query's vector found their pages already."""
    seeds: dict[int, tuple[str, int, float]] = {
        e: (f"named in the query ({name})", 0, 1.0 if _written_as_name(q, name) else COMMON_NOUN)
        for e, name in _outermost(named).items()
    }
    if qvec is not None:
        for eid, sim in vectors.knn(store, vectors.ENTITY, qvec, 5, in_memory=in_memory):
            if sim >= weights.entity_sim and eid not in seeds:
                seeds[eid] = (f"close to the query ({sim:.2f})", 1, sim)
                if echo is not None:
                    echo.add(eid)
    top = sorted(cands.values(), key=lambda c: (-c.direct, c.chunk_id))[: weights.seed_chunks]
    if top:
        best = top[0].direct or 1.0
        strength = {c.chunk_id: c.direct / best for c in top}
        ids = [c.chunk_id for c in top]
        for eid, cid, doc_id in store.query(
            f"SELECT DISTINCT m.entity_id, m.chunk_id, m.doc_id FROM mentions m JOIN entities e ON e.id = m.entity_id "
            f"WHERE m.chunk_id IN ({','.join('?' * len(ids))}) AND e.status = 'active' AND m.source != 'coref' "
            f"AND e.type NOT IN ('DATE', 'VERSION')",
            ids,
        ):
            st = strength[cid]
            if eid not in seeds or seeds[eid][1] == 1 and seeds[eid][2] < st:
                seeds[eid] = (f"mentioned in a top result (chunk {cid})", 1, st)
                if echo is not None:
                    echo.discard(eid)
                if home is not None:
                    home[eid] = doc_id
    if seeds and weights.specificity:
        # a name found in every other document is a poor bridge (HippoRAG's node specificity): a seed
        # keeps (1 - the share of the other documents that mention it) ** specificity of its strength:
        # all of it when one document does, 1/n of it when all n do
        ids = list(seeds)
        df = dict(
            store.query(
                f"SELECT entity_id, count(DISTINCT doc_id) FROM mentions WHERE entity_id IN ({','.join('?' * len(ids))}) "
                "GROUP BY entity_id",
                ids,
            )
        )
        n_docs = max(1, store.scalar("SELECT count(*) FROM docs") or 1)
        for eid, (why, d, st) in list(seeds.items()):
            seeds[eid] = (why, d, st * max(0.0, 1.0 - (df.get(eid, 1) - 1) / n_docs) ** weights.specificity)
    return seeds


def _expand(store: Store, seeds: dict[int, str], hops: int, rels, max_nodes: int, min_confidence: float = 0.0):
    """Breadth-first over relations (both directions) from the seeds: entity -> (distance, parent, edge).

    An edge passes on its confidence: a walk's strength is multiplied by it at every step, and an
    edge below ``min_confidence`` is not followed at all (nor is anything only it reaches)."""
    from kgr.store.bfs import bfs

    reached: dict[int, dict] = {
        e: {"distance": d, "parent": None, "rel": None, "why": why, "strength": st} for e, (why, d, st) in seeds.items()
    }
    edges: list[dict] = []
    truncated = False
    rel_filter = [r for r in (rels or REL_WEIGHTS) if r != "mentions"]
    degrees: dict[int, int] = {}
    confidences: dict[tuple[int, int], float] = {}
    best: dict[tuple[int, int], tuple] = {}
    if hops == 0 or not seeds:
        return reached, edges, truncated
    for root in sorted(seeds, key=lambda e: seeds[e][1])[:50]:
        _, base, root_strength = seeds[root]
        if base >= hops:
            continue
        # The loop below stops once max_nodes are reached; rows it revisits are at most those already
        # reached, so max_nodes + 2 rows (with the root's) give the same result as every row.
        rows = bfs(
            store.conn,
            root,
            max_depth=hops - base,
            edges="relations",
            src="src_id",
            dst="dst_id",
            rels=rel_filter,
            direction="both",
            max_nodes=max_nodes + 2,
            check=store.check_deadline,
        )
        local = {root: root_strength}
        _edge_stats(store, {parent for _eid, parent, dist in rows if dist}, rel_filter, confidences, degrees, best)
        for eid, parent, dist in rows:
            if dist == 0 or parent not in local:
                continue
            conf = _confidence(store, parent, eid, rel_filter, confidences)
            if conf < min_confidence:
                continue
            dist += base
            # a walk leaving a hub spreads its strength over the hub's many edges
            st = local[parent] * HOP_DECAY * conf / _degree(store, parent, rel_filter, degrees) ** FANOUT
            local[eid] = max(local.get(eid, 0.0), st)
            prev = reached.get(eid)
            if prev is not None:
                if prev["parent"] is None and prev["distance"] >= dist:
                    # an edge explains a reach better than a mere mention at the same distance
                    prev.update(parent=parent, distance=dist, why=None, strength=max(st, prev["strength"]))
                elif st > prev["strength"]:
                    prev.update(parent=parent, distance=dist, strength=st)
                continue
            if len(reached) >= max_nodes:
                truncated = True
                break
            reached[eid] = {
                "distance": dist,
                "parent": parent,
                "rel": None,
                "why": None,
                "strength": st,
                "confidence": 0.0,
            }
    # the exact edges traversed: parent -> child, in either stored direction
    for eid, info in reached.items():
        p = info["parent"]
        if p is None:
            continue
        row = best.get((min(p, eid), max(p, eid)))  # every parent's edges were read by _edge_stats
        if row:
            rid, s, d, rel, conf = row
            info["rel"] = rel
            info["confidence"] = float(conf)
            edges.append({"id": rid, "src": s, "dst": d, "rel": rel, "confidence": conf})
    return reached, edges, truncated


def _edge_stats(
    store: Store,
    ids: set[int],
    rel_filter: list[str],
    confidences: dict[tuple[int, int], float],
    degrees: dict[int, int],
    best: dict[tuple[int, int], tuple],
) -> None:
    """Fill the caches of :func:`_confidence` and :func:`_degree` for these entities in two queries
    rather than one per edge: every allowed edge of an entity is read once, so the highest confidence
    between it and any neighbour is known, and so is its number of edges; ``best`` receives, for each
    pair, that edge's row (id, src, dst, rel, confidence), the lowest id among equals."""
    todo = sorted(e for e in ids if e not in degrees)
    marks = ",".join("?" * len(rel_filter))
    for i in range(0, len(todo), 400):
        part = todo[i : i + 400]
        count = dict.fromkeys(part, 0)
        for end in ("src_id", "dst_id"):
            for rid, src, dst, rel, conf in store.query(
                f"SELECT id, src_id, dst_id, rel, confidence FROM relations WHERE {end} IN ({','.join('?' * len(part))}) "
                f"AND rel IN ({marks})",
                (*part, *rel_filter),
            ):
                count[src if end == "src_id" else dst] += 1
                key = (min(src, dst), max(src, dst))
                confidences[key] = max(confidences.get(key, 0.0), float(conf or 0.0))
                if key not in best or (conf, -rid) > (best[key][4], -best[key][0]):
                    best[key] = (rid, src, dst, rel, conf)
        for e in part:
            degrees[e] = max(1, count[e])


def _confidence(store: Store, a: int, b: int, rel_filter: list[str], cache: dict[tuple[int, int], float]) -> float:
    """The highest confidence of an allowed edge between two entities, in either direction."""
    key = (min(a, b), max(a, b))
    if key not in cache:
        value = store.scalar(
            "SELECT max(confidence) FROM relations WHERE ((src_id=? AND dst_id=?) OR (src_id=? AND dst_id=?)) "
            f"AND rel IN ({','.join('?' * len(rel_filter))})",
            (a, b, b, a, *rel_filter),
        )
        cache[key] = 0.0 if value is None else float(value)
    return cache[key]


def _degree(store: Store, eid: int, rel_filter: list[str], cache: dict[int, int]) -> int:
    if eid not in cache:
        marks = ",".join("?" * len(rel_filter))
        cache[eid] = max(
            1,
            store.scalar(
                f"SELECT (SELECT count(*) FROM relations WHERE src_id = ? AND rel IN ({marks})) + "
                f"(SELECT count(*) FROM relations WHERE dst_id = ? AND rel IN ({marks}))",
                (eid, *rel_filter, eid, *rel_filter),
            ),
        )
    return cache[eid]


def _reach_chunks(
    store: Store,
    reached: dict[int, dict],
    cands: dict[int, Candidate],
    rels,
    home: dict[int, int] | None = None,
    echo: set[int] | None = None,
) -> None:
    """Chunks that mention a reached entity get its hop score; an entity's own page counts most.
    A seed taken from a top chunk gives nothing to the document that chunk is in (``home``):
    that page is already there on its direct evidence, and counting it again is fan-out. A
    seed found only by its name's vector (``echo``) gives nothing to the chunks the keyword and
    vector searches found: its name's likeness to the query is the likeness they have already.

    Two reads keep a hub cheap (a name a thousand pages mention): the pages about a reached
    entity, wherever they are, and the reached entities that the candidates mention."""
    if not reached:
        return

    def credit(eid: int, cid: int, about: bool) -> None:
        info = reached[eid]
        dist = info["distance"]
        hop = info["strength"] * (1.0 if about else MENTION_FACTOR)
        c = cands.get(cid)
        if c is not None and echo and eid in echo and info["parent"] is None and c.direct > 0:
            return
        if c is None:
            if not about or len(cands) > 5000:
                return  # a passing mention of a far entity does not make a candidate
            c = cands[cid] = Candidate(cid)
        c.entities.add(eid)
        if hop > c.hop:
            c.hop = hop
            # an edge weighs by its confidence (and its type's weight); a seed by how it was found
            c.rel = (
                REL_WEIGHTS.get(info["rel"] or "", 1.0) * info["confidence"]
                if info["rel"]
                else (1.0 if dist == 0 else 0.5)
            )
            c.via = [{"entity": eid, "distance": dist, "rel": info["rel"], "about": about}]

    ids = list(reached)
    about_pairs: set[tuple[int, int]] = set()
    for i in range(0, len(ids), 400):
        part = ids[i : i + 400]
        for eid, cid, title_len, title, doc_id, _surface in store.query(_title_mentions_sql(len(part)), part):
            if home and reached[eid]["parent"] is None and home.get(eid) == doc_id:
                continue
            # a page is about an entity when the entity is (most of) its title: "Ledger Service",
            # "Lothair II"; a term inside a long title ("... of p53 in ...") is only mentioned
            if (title_len or 0) >= ABOUT_SHARE * len((title or "").strip() or " "):
                about_pairs.add((eid, cid))
                credit(eid, cid, True)
    if rels is not None and "mentions" not in rels:
        return
    cids = list(cands)
    for i in range(0, len(cids), 400):
        part = cids[i : i + 400]
        for eid, cid, doc_id in store.query(
            f"SELECT DISTINCT m.entity_id, m.chunk_id, m.doc_id FROM mentions m "
            f"WHERE m.chunk_id IN ({','.join('?' * len(part))}) AND m.source != 'coref'",
            part,
        ):
            if home and eid in home and reached.get(eid, {}).get("parent") is None and home[eid] == doc_id:
                continue
            if eid in reached and (eid, cid) not in about_pairs:
                credit(eid, cid, False)


def _subjects(store: Store, chunk_ids: Sequence[int]) -> dict[int, tuple[int, float]]:
    """The subject of each chunk's page: chunk -> (entity, share), the entity whose linked in-title
    mention covers the most of the title (a trailing qualifier aside), when it covers at least
    ``ABOUT_SHARE`` of it; ``share`` is how much it covers."""
    out: dict[int, tuple[int, float]] = {}
    ids = list(chunk_ids)
    for i in range(0, len(ids), 400):
        part = ids[i : i + 400]
        for cid, eid, _len, surface, title in store.query(
            f"SELECT m.chunk_id, m.entity_id, max(length(m.surface)), m.surface, d.title FROM mentions m "
            f"JOIN docs d ON d.id = m.doc_id JOIN entities e ON e.id = m.entity_id "
            f"WHERE m.chunk_id IN ({','.join('?' * len(part))}) AND json_extract(m.features, '$.in_title') "
            f"AND m.source != 'coref' AND e.status = 'active' GROUP BY m.chunk_id, m.entity_id",
            part,
        ):
            share = _title_share(surface, title)
            if share >= ABOUT_SHARE and share > out.get(cid, (0, 0.0))[1]:
                out[cid] = (eid, share)
    return out


def _title_share(surface: str | None, title: str | None) -> float:
    """How much of the title the mention covers, a trailing qualifier aside: "Hardcase" of
    "Hardcase (1972 film)" covers all of it, "1972" (inside the qualifier) nothing."""
    title = (title or "").strip()
    core = QUALIFIER.sub("", title) or title
    if not surface or surface.lower() not in core.lower():
        return 0.0
    share = min(1.0, len(surface) / max(1, len(core)))
    head = APPOSITION.sub("", core)
    if APPOSITION_SHARE and head != core and head.lower().startswith(surface.lower()):
        share = max(share, APPOSITION_SHARE * min(1.0, len(surface) / max(1, len(head))))
    return share


def _outermost(named: dict[int, str]) -> dict[int, str]:
    """The names the question contains that are not part of a longer one it contains: in "School
    On Fire" the question names the film, not fire."""
    words = {eid: f" {' '.join(tokens(name.lower()))} " for eid, name in named.items()}
    return {
        eid: name
        for eid, name in named.items()
        if not any(len(w) > len(words[eid]) and words[eid] in w for w in words.values())
    }


_WHAT_IS = re.compile(r"\s*(?:what|who)\s+(?:is|are|was|were)\s+(?:the\s+|an?\s+)?(.+?)\s*\?*\s*$", re.I)


def _asked_what(q: str, named: dict[int, str]) -> list[int]:
    """The entity a question asks to have defined, and nothing more: "What is Cairn?", "Who is
    Kwame Asante?", "What is the PGA?" (not "What is the rate limit on the order API?")."""
    m = _WHAT_IS.fullmatch(q)
    if not m:
        return []
    asked = " ".join(tokens(m.group(1).lower()))
    return [eid for eid, name in named.items() if " ".join(tokens(name.lower())) == asked]


def _subject_pages(store: Store, entity_ids: Sequence[int]) -> dict[int, list[tuple[int, int, float, bool]]]:
    """The pages about each entity: entity -> [(chunk, doc, share, same)] (see :func:`_subjects`).
    An entity of the same name under another type counts too (``same`` False): the linker keeps
    "Curtis Bernhardt" the PERSON and "Curtis Bernhardt" the title term apart, the page is one."""
    out: dict[int, list[tuple[int, int, float, bool]]] = defaultdict(list)
    ids = sorted(set(entity_ids))
    if not ids:
        return out
    norm_of: dict[int, str] = {}
    for i in range(0, len(ids), 400):
        part = ids[i : i + 400]
        norm_of.update(store.query(f"SELECT id, norm FROM entities WHERE id IN ({','.join('?' * len(part))})", part))
    by_norm: dict[str, set[int]] = defaultdict(set)
    norms = sorted(set(norm_of.values()))
    for i in range(0, len(norms), 400):
        part = norms[i : i + 400]
        for eid, norm in store.query(
            f"SELECT id, norm FROM entities WHERE norm IN ({','.join('?' * len(part))}) AND status = 'active'", part
        ):
            by_norm[norm].add(eid)
    every = sorted({e for group in by_norm.values() for e in group} | set(ids))
    pages: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    for i in range(0, len(every), 400):
        part = every[i : i + 400]
        for eid, cid, _len, title, doc_id, surface in store.query(_title_mentions_sql(len(part)), part):
            share = _title_share(surface, title)
            if share >= ABOUT_SHARE:
                pages[eid].append((cid, doc_id, share))
    for eid in ids:
        seen: set[int] = set()
        for other in sorted(by_norm.get(norm_of.get(eid, ""), set()) | {eid}, key=lambda e: (e != eid, e)):
            for cid, doc_id, share in pages.get(other, []):
                if cid not in seen:
                    seen.add(cid)
                    out[eid].append((cid, doc_id, share, other == eid))
    return out


def _titled(
    store: Store, chunk_ids: Sequence[int], q: str, names: Sequence[str] = ()
) -> tuple[dict[int, tuple[int, str]], list[str]]:
    """Of these chunks, the first chunks of pages whose title the question contains word for word
    (a trailing qualifier aside), but not as part of a longer title or of one of ``names``:
    chunk -> (its document, the title). A raw string, the weakest of links: only pages already
    found for the question are read. Also returns the words of every title of these pages that
    the question contains (a name inside one of them is part of that title, not named alone)."""
    ids = list(chunk_ids)
    if not ids:
        return {}, []
    qwords = f" {' '.join(tokens(q.lower()))} "
    rows = store.query(
        f"SELECT c.id, d.title, c.doc_id FROM chunks c JOIN docs d ON d.id = c.doc_id "
        f"WHERE c.id IN ({','.join('?' * len(ids))}) AND c.ord = 0",
        ids,
    )
    # "Virginia" is not what "Johnnycake, West Virginia" names: a title inside a longer name or title found is left out
    found = [" ".join(tokens((QUALIFIER.sub("", t or "") or t or "").lower())) for _cid, t, _doc in rows]
    titles = [w for w in found if len(w) >= 3 and f" {w} " in qwords]
    longer = [w for w in (*titles, *(" ".join(tokens(n.lower())) for n in names)) if f" {w} " in qwords]
    longer = [w for w in longer if len(w) > 3]
    out: dict[int, tuple[int, str]] = {}
    for cid, title, doc_id in rows:
        title = (title or "").strip()
        core = QUALIFIER.sub("", title) or title
        words = " ".join(tokens(core.lower()))
        if (
            len(words) >= 3
            and f" {words} " in qwords
            and not any(len(w) > len(words) and f" {words} " in f" {w} " for w in longer)
        ):
            out[cid] = (doc_id, core)
    return out, titles


def _inside_titles(named: dict[int, str], titles: Sequence[str]) -> dict[int, str]:
    """The names that are not part of a longer title the question contains: in "Flute Sonata in C
    major, BWV 1033" the question names the sonata of that page, not the flute sonata."""
    return {
        eid: name
        for eid, name in named.items()
        if not any(len(t) > len(w) and f" {w} " in f" {t} " for w in [" ".join(tokens(name.lower()))] for t in titles)
    }


def _place(
    store: Store,
    ranked: list[Candidate],
    cands: dict[int, Candidate],
    named: dict[int, str],
    q: str,
    qvec,
    weights: Weights,
    allowed: set[int] | None,
    in_memory: bool,
) -> list[Candidate]:
    """Place the pages the question leads to by its entities next to what leads to them, instead of
    scoring them against keyword matches.

    Round 0, after the best result: the pages whose subject is an entity the question names
    ("question names X; X is the subject of this page"); for a question that asks only what X is
    ("What is X?", :func:`_asked_what`), the passage that defines X (a glossary line, see
    :func:`kgr.retrieval.entities.definitions`; "this passage defines X"), at full strength however many
    pages mention X, as the question asks for X and bridges nothing; and, weaker, the pages found for the
    question whose title it contains word for word (a raw string). Then, for ``place_rounds``
    rounds, every page placed in the round before (and the best result, when it is about what
    the question names) leads on: to the pages whose subject is an entity it names by a linked
    mention ("page P names X; X is the subject of this page"); the ``place_per_page`` of them
    nearest to the question (after those it names right after the question's relation word: "directed by
    X" for "the director of", ``place_context``) are placed right after the page that leads to them, behind placed
    pages of stronger links (a page the question names comes before one a page names). A link's strength is the
    product of what it rests on, each at most 1: how the entity is named (a name the question
    contains, 1; a linked mention, its linking score; a raw title, ``RAW_LINK``), how much of the
    page's title the entity covers (``SAME_NAME`` when the page's subject is another entity of the
    same name), and the strength of the page that led to it; a name or title the question writes
    in lower case counts ``COMMON_NOUN`` of it. A link weaker than ``place`` places nothing: its
    page keeps the rank its score gives it. When the best result is about nothing the question
    names, the pages placed by a link of at least ``place_first`` (the question names the page's
    subject in full) go before it, with the pages they lead to by links of at least
    ``CHAIN_FIRST``. For a question (:func:`_is_question`), each leading page also places one page about an
    aspect of an entity it names (:func:`_aspect_pages`), of strength as a subject page's times ``ASPECT_LINK``,
    when that page is at least ``ASPECT_NEAR`` near the question and nearer than the entity's own pages: the
    rest of the question asks about the entity's history, economy or elections, not about the entity.
    Returns the new order."""
    top = ranked[0]
    head: list[Candidate] = [top]
    taken = {top.chunk_id}
    docs: dict[int, int] = {top.chunk_id: store.scalar("SELECT doc_id FROM chunks WHERE id = ?", (top.chunk_id,))}
    placed_docs = {docs[top.chunk_id]}  # a page is placed once, by one of its chunks
    sims: dict[int, float] = {cid: c.cosine for cid, c in cands.items() if c.cosine is not None}

    def nearness(cids: list[int]) -> dict[int, float]:
        missing = [cid for cid in cids if cid not in sims]
        if missing and qvec is not None:
            sims.update(vectors.similarities(store, vectors.CHUNK, qvec, missing, in_memory=in_memory))
        return {cid: sims.get(cid, cands[cid].score if cid in cands else 0.0) for cid in cids}

    def place(cid: int, doc_id: int, link: dict, after: int | None = None) -> Candidate:
        c = cands.get(cid)
        if c is None:
            c = cands[cid] = Candidate(cid)
            c.cosine = sims.get(cid)
        c.placed = link
        taken.add(cid)
        docs[cid] = doc_id
        placed_docs.add(doc_id)
        if after is None:
            head.append(c)
        else:  # right after the page that leads to it (and what it led to before), behind stronger placed pages
            at = next(i for i, h in enumerate(head) if h.chunk_id == after) + 1
            while (
                at < len(head)
                and head[at].placed
                and (head[at].placed["from"] == after or head[at].placed["strength"] >= link["strength"])
            ):
                at += 1
            head.insert(at, c)
        return c

    n_docs = max(1, store.scalar("SELECT max(id) FROM docs") or 1)
    spread: dict[int, float] = {}

    def specific(entity_ids: Sequence[int]) -> None:
        """A name most documents mention is a poor link (HippoRAG's node specificity): 1 - the share
        of the documents that mention it."""
        ids = sorted({e for e in entity_ids if e not in spread})
        for i in range(0, len(ids), 400):
            part = ids[i : i + 400]
            spread.update({e: 1.0 for e in part})
            for eid, df in store.query(
                f"SELECT entity_id, count(DISTINCT doc_id) FROM mentions WHERE entity_id IN ({','.join('?' * len(part))}) "
                "GROUP BY entity_id",
                part,
            ):
                spread[eid] = max(0.0, 1.0 - df / n_docs)

    named = _outermost(named)
    window = [c.chunk_id for c in ranked[: max(TITLE_WINDOW, weights.seed_chunks)]]
    titled, titles = _titled(store, window, q, list(named.values()))
    named = _inside_titles(named, titles)
    strength: dict[int, float] = {}
    leaders: list[Candidate] = []
    asking = _is_question(q)  # a claim to check has no rest of the question for an aspect page to answer
    # round 0: the question names X, X is the subject of this page; or the question contains the page's title
    found: dict[int, tuple[float, int, int | None]] = {}  # chunk -> (strength, doc, entity or None: its title)
    full = (
        {
            eid: tokens(name.lower()) == tokens(named[eid].lower())
            for eid, name in store.query(
                f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(named))})", list(named)
            )
        }
        if named
        else {}
    )
    specific(list(named))
    as_name = {eid: _written_as_name(q, name) for eid, name in named.items()}
    for eid, rows in _subject_pages(store, list(named)).items():
        for cid, doc_id, share, same in rows:
            # an alias ("Ledger" of "Ledger Service") is a weaker name than the entity's own
            st = share * (1.0 if same else SAME_NAME) * (1.0 if full.get(eid) else ALIAS_LINK) * spread[eid]
            if not as_name[eid]:  # "what time", "the body of water": a common noun, not a name
                st *= COMMON_NOUN
            if st > found.get(cid, (0.0,))[0]:
                found[cid] = (st, doc_id, eid)
    # "What is X?": the sentence that defines X answers it, wherever it is (a glossary line)
    defining: set[int] = set()
    for eid in _asked_what(q, named):
        name, aliases = store.query("SELECT name, aliases FROM entities WHERE id = ?", (eid,))[0]
        said = list(definitions(store, eid, [name, *loads(aliases, [])]))
        if not said:
            continue
        cid = max(said, key=lambda d: d[2])[0]  # a term set off as a glossary writes it, else the first
        # the question asks for X and nothing else: how many pages mention X (its worth as a bridge) is moot
        st = 1.0 if as_name[eid] else COMMON_NOUN
        if st > found.get(cid, (0.0,))[0]:
            found[cid] = (st, store.scalar("SELECT doc_id FROM chunks WHERE id = ?", (cid,)), eid)
            defining.add(cid)
    for cid, (doc_id, title) in titled.items():
        st = RAW_LINK * (1.0 if _written_as_name(q, title) else COMMON_NOUN) * _title_spread(store, title, n_docs)
        if st > found.get(cid, (0.0,))[0]:
            found[cid] = (st, doc_id, None)
    if allowed is not None:
        found = {cid: f for cid, f in found.items() if cid in allowed}
    near = nearness(list(found))
    # one page for each name the question writes (the nearest to the question): a name with many pages, or
    # two things of one name ("Scott Howell (footballer)", "(political consultant)"), does not fill the head
    best_of: dict[str, int] = {}
    for cid, (_st, _doc, eid) in found.items():
        if eid is None:
            continue
        said = named[eid].lower()
        if said not in best_of or (-near[cid], cid) < (-near[best_of[said]], best_of[said]):
            best_of[said] = cid
    found = {
        cid: f
        for cid, f in found.items()
        if f[2] is None or best_of[named[f[2]].lower()] == cid or cid == top.chunk_id or cid in defining
    }
    # the best result is about what the question names (its page is, when it is a later chunk of it): it leads
    # on from its own place
    top_own = max((f[0] for cid, f in found.items() if cid == top.chunk_id or f[1] == docs[top.chunk_id]), default=0.0)
    if top_own >= weights.place:
        leaders.append(top)
        strength[top.chunk_id] = top_own
    for cid in sorted(found, key=lambda x: (-near[x], x)):
        st, doc_id, eid = found[cid]
        if cid in taken or doc_id in placed_docs or st < weights.place:
            continue
        link = {"round": 0, "entity": eid, "from": None, "strength": round(st, 3)}
        if cid in defining:
            link["defines"] = True
        leaders.append(place(cid, doc_id, link))
        strength[cid] = st
    for rnd in range(1, weights.place_rounds + 1):
        if not leaders:
            break
        ids = [c.chunk_id for c in leaders]
        missing = [cid for cid in ids if cid not in docs]
        if missing:
            docs.update(
                store.query(f"SELECT id, doc_id FROM chunks WHERE id IN ({','.join('?' * len(missing))})", missing)
            )
        own = _subjects(store, ids)
        lead_titles = dict(
            store.query(
                f"SELECT c.id, d.title FROM chunks c JOIN docs d ON d.id = c.doc_id "
                f"WHERE c.id IN ({','.join('?' * len(ids))})",
                ids,
            )
        )
        named_by: dict[int, list[tuple[int, float]]] = defaultdict(list)
        spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        name_of: dict[int, str] = {}
        for cid, eid, link, start, end, name in store.query(
            f'SELECT m.chunk_id, m.entity_id, coalesce(m.link_score, 1.0), m.start, m."end", e.name FROM mentions m '
            f"JOIN entities e ON e.id = m.entity_id WHERE m.chunk_id IN ({','.join('?' * len(ids))}) "
            f"AND m.source != 'coref' AND e.status = 'active' AND e.type NOT IN ('DATE', 'VERSION') "
            f"ORDER BY m.chunk_id, m.entity_id",
            ids,
        ):
            if own.get(cid, (None,))[0] == eid or _part_of_title(name, lead_titles.get(cid)):
                continue  # the page's own subject, or a part of its name ("Van Helsing" on "Abraham Van Helsing")
            if (cid, eid) not in spans:
                named_by[cid].append((eid, float(link)))
            else:
                i = next(i for i, (e, _) in enumerate(named_by[cid]) if e == eid)
                named_by[cid][i] = (eid, max(named_by[cid][i][1], float(link)))
            spans[(cid, eid)].append((start, end))
            name_of[eid] = name
        asks = _asked_for(store, ids, spans, q) if weights.place_context else {}
        pages = _subject_pages(store, [e for lst in named_by.values() for e, _ in lst])
        specific(list(pages))
        options: dict[int, dict[int, tuple[float, int, int]]] = defaultdict(dict)
        for lead in ids:
            for eid, link in named_by.get(lead, []):
                for cid, doc_id, share, same in pages.get(eid, []):
                    st = strength[lead] * link * share * (1.0 if same else SAME_NAME) * spread[eid]
                    if (
                        st >= weights.place
                        and (ANSWERED or (cid not in taken and doc_id not in placed_docs))
                        and (allowed is None or cid in allowed)
                        and st > options[lead].get(cid, (0.0,))[0]
                    ):
                        options[lead][cid] = (st, doc_id, eid)
        near = nearness(sorted({cid for opts in options.values() for cid in opts}))
        nxt: list[Candidate] = []
        for lead in ids:
            picked = 0
            opts = options.get(lead, {})
            for cid in sorted(opts, key=lambda x: (-asks.get((lead, opts[x][2]), 0), -near[x], x)):
                if picked >= weights.place_per_page:
                    break
                st, doc_id, eid = options[lead][cid]
                if cid in taken or doc_id in placed_docs:
                    if asks.get((lead, eid)) and ANSWERED:
                        picked += 1  # the page the question's relation word leads to is placed already
                    continue
                link = {"round": rnd, "entity": eid, "from": lead, "strength": round(st, 3)}
                nxt.append(place(cid, doc_id, link, lead))
                strength[cid] = st
                picked += 1
            if ASPECT_LINK and asking:
                links = dict(named_by.get(lead, []))
                aspects = [
                    a
                    for a in _aspect_pages(store, docs[lead], {e: name_of[e] for e in links}, q, allowed)
                    if a[0] not in taken and a[1] not in placed_docs and a[1] not in {p[1] for p in pages.get(a[2], [])}
                ]
                own = {a[2]: [p[0] for p in pages.get(a[2], [])] for a in aspects}
                close = nearness(sorted({a[0] for a in aspects} | {c for cs in own.values() for c in cs}))
                for cid, doc_id, eid in sorted(aspects, key=lambda a: (-close[a[0]], a[0])):
                    if close[cid] < ASPECT_NEAR:
                        break
                    if ASPECT_NEARER and any(close[c] >= close[cid] for c in own[eid]):
                        continue  # the entity's own page is nearer the question: it, not an aspect, is asked for
                    specific([eid])
                    st = strength[lead] * links[eid] * spread[eid] * ASPECT_LINK
                    if st < weights.place:
                        continue
                    link = {"round": rnd, "entity": eid, "from": lead, "strength": round(st, 3), "aspect": True}
                    nxt.append(place(cid, doc_id, link, lead))
                    strength[cid] = st
                    break
        leaders = nxt
    if len(head) == 1:
        return ranked
    if weights.place_first and top_own < weights.place:
        # the best result is not about anything the question names, and a page is whose subject the
        # question names by its full name: that page competes for first place, and takes it
        first = [
            c
            for c in head[1:]
            if c.placed["round"] == 0
            and c.placed["strength"] >= weights.place_first
            and min(c.bm25_rank or MAX_K + 1, c.vector_rank or MAX_K + 1) <= FIRST_DIRECT
        ]
        if first and CHAIN_FIRST < 1:
            # and so do the pages they lead to by a strong link, each after the page that leads to it
            ids = {c.chunk_id for c in first}
            for c in head:
                if c.placed and c.placed["from"] in ids and c.placed["strength"] >= CHAIN_FIRST:
                    ids.add(c.chunk_id)
            first = [c for c in head if c.chunk_id in ids]
        if first:
            head = first + [c for c in head if c not in first]
    return head + [c for c in ranked if c.chunk_id not in taken]


def _aspect_pages(
    store: Store, lead_doc: int, names: dict[int, str], q: str, allowed: set[int] | None
) -> list[tuple[int, int, int]]:
    """The pages about an aspect of an entity the leading page names, best match first: their title writes
    the entity's name among other words ("History of Mississippi", "2018 Kansas gubernatorial election"),
    and their text matches the question's words that the leading page does not write. [(chunk, doc, entity)]."""
    names = {e: n for e, n in names.items() if len(n) >= 3 and tokens(n)}
    words = _lacking(store, lead_doc, q) if names else []
    if not words:
        return []
    phrases = " OR ".join('"' + " ".join(tokens(n)) + '"' for n in names.values())
    match = f"prelude : ({phrases}) AND ({fts_query(' '.join(words))})"
    rows = store.query(
        "SELECT c.id, c.doc_id, d.title, c.text FROM chunks_fts f JOIN chunks c ON c.id = f.rowid JOIN docs d ON d.id = c.doc_id "
        "WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts, 1.0, 0.5) LIMIT ?",
        (match, ASPECT_HITS),
    )
    out = []
    seen: set[int] = set()
    words_of = {e: f" {' '.join(tokens(n.lower()))} " for e, n in names.items()}
    stems = {w.lower()[:STEM] for w in words}
    for cid, doc_id, title, text in rows:
        if doc_id == lead_doc or doc_id in seen or (allowed is not None and cid not in allowed):
            continue
        seen.add(doc_id)
        core = QUALIFIER.sub("", title or "") or (title or "")
        tw = f" {' '.join(tokens(core.lower()))} "
        inside = [e for e, w in words_of.items() if w in tw]
        if not inside:
            continue
        eid = max(inside, key=lambda e: len(words_of[e]))
        if words_of[eid] == tw:
            continue  # the entity's own page, not an aspect of it
        if len(stems & {w.lower()[:STEM] for w in re.findall(r"\w+", text or "")}) >= ASPECT_WORDS:
            out.append((cid, doc_id, eid))
    return out


def _title_spread(store: Store, title: str, n_docs: int) -> float:
    """A title most documents write is a poor link, as a name most of them mention is (the project's name
    on its README): 1 - the share of the documents whose text has the title's words as a phrase."""
    words = re.findall(r"\w+", title, flags=re.UNICODE)
    if not words:
        return 0.0
    phrase = '"' + " ".join(words).replace('"', '""') + '"'
    df = store.scalar(
        "SELECT count(DISTINCT c.doc_id) FROM chunks_fts f JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ?",
        (phrase,),
    )
    return max(0.0, 1.0 - (df or 0) / max(1, n_docs))


def _part_of_title(name: str | None, title: str | None) -> bool:
    """Whether the name is a shorter part of the page's title: "Van Helsing" on "Abraham Van Helsing"."""
    words = " ".join(tokens((name or "").lower()))
    core = " ".join(tokens((QUALIFIER.sub("", title or "") or title or "").lower()))
    return bool(words) and len(words) < len(core) and f" {words} " in f" {core} "


def _stems(text: str) -> set[str]:
    """The words' first STEM letters ("directed", "director" -> "direc"), of words of four letters or more."""
    return {w[:STEM] for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


def _asked_for(
    store: Store, ids: Sequence[int], spans: dict[tuple[int, int], list[tuple[int, int]]], q: str
) -> dict[tuple[int, int], int]:
    """For each (page, entity) it names: how many of the question's lower-case content words (the relation it
    asks through: "director", "born", "composer") the page writes just before the mention ("directed by
    John Guillermin", "composed by ..."). Names are left out: they say which page, not which link."""
    asked = _stems(" ".join(w for w in re.findall(r"\w+", q) if w.islower() and w not in stop_words()))
    if not asked:
        return {}
    texts = {
        cid: (text, start)
        for cid, text, start in store.query(
            f"SELECT id, text, start FROM chunks WHERE id IN ({','.join('?' * len(ids))})", list(ids)
        )
    }
    out: dict[tuple[int, int], int] = {}
    for (cid, eid), where in spans.items():
        text, base = texts.get(cid, ("", 0))
        base = base or 0  # a chunk loaded without its offset in the document: mentions count from its start
        best = 0
        for start, _end in where:
            if start is None:  # a mention loaded without its place: no words before it to read
                continue
            before = text[max(0, start - base - CONTEXT_CHARS) : max(0, start - base)]
            best = max(best, len(_stems(before) & asked))
        if best:
            out[(cid, eid)] = best
    return out


def _title_mentions_sql(n: int) -> str:
    """The in-title mentions of n entities, per chunk (the partial index idx_mentions_in_title serves it)."""
    return (
        f"SELECT m.entity_id, m.chunk_id, max(length(m.surface)), d.title, m.doc_id, m.surface FROM mentions m "
        f"JOIN docs d ON d.id = m.doc_id "
        f"WHERE m.entity_id IN ({','.join('?' * n)}) AND json_extract(m.features, '$.in_title') "
        f"AND m.source != 'coref' GROUP BY m.entity_id, m.chunk_id"
    )


def _rank(cands: dict[int, Candidate], mode: str, weights: Weights, k: int) -> list[Candidate]:
    ranked = sorted(cands.values(), key=lambda c: (-c.score, c.chunk_id))
    if mode == "graph" and weights.pin:
        # the strongest direct evidence keeps its place; the graph competes for the places after it
        pinned = sorted(cands.values(), key=lambda c: (-c.direct, c.chunk_id))[: weights.pin]
        ids = {c.chunk_id for c in pinned}
        ranked = pinned + [c for c in ranked if c.chunk_id not in ids]
    return ranked[:k]


def _score(cands: dict[int, Candidate], mode: str, weights: Weights, have_cosine: bool) -> None:
    if not cands:
        return
    cos = [c.cosine for c in cands.values() if c.cosine is not None]
    lo, hi = (min(cos), max(cos)) if cos else (0.0, 1.0)
    span = (hi - lo) or 1.0
    for c in cands.values():
        fused = c.direct
        if mode != "graph":
            c.score = fused
            continue
        cosn = ((c.cosine - lo) / span) if c.cosine is not None else 0.0
        share = weights.cosine_share if have_cosine else 0.0
        semantic = share * cosn + (1 - share) * fused
        # what the graph adds is scaled by the chunk's own direct evidence (``evidence`` of it): a page
        # the question does not match at all is held back against those it matches
        gate = 1.0 - weights.evidence + weights.evidence * c.direct
        c.score = (
            weights.semantic * semantic
            + gate * (weights.hop * c.hop + weights.rel * (c.rel if c.hop else 0.0))
            + weights.residual * c.rest
        )


# -- output --------------------------------------------------------------------------------


def _describe(
    store: Store, ranked: list[Candidate], reached: dict[int, dict], nearest: dict[int, tuple[int, float]]
) -> list[dict]:
    if not ranked:
        return []
    ids = [c.chunk_id for c in ranked]
    rows = {
        r[0]: r
        for r in store.query(
            f'SELECT c.id, c.doc_id, d.path, d.title, c.section, c.text, c.start, c."end", c.ord FROM chunks c '
            f"JOIN docs d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(ids))})",
            ids,
        )
    }
    ents: dict[int, list[dict]] = defaultdict(list)
    for cid, eid, name, typ in store.query(
        f"SELECT DISTINCT m.chunk_id, e.id, e.name, e.type FROM mentions m JOIN entities e ON e.id = m.entity_id "
        f"WHERE m.chunk_id IN ({','.join('?' * len(ids))}) AND m.source != 'coref' ORDER BY m.chunk_id, m.start",
        ids,
    ):
        if len(ents[cid]) < 12:
            ents[cid].append({"id": eid, "name": name, "type": typ})
    want = {*reached, *(c.placed["entity"] for c in ranked if c.placed and c.placed["entity"] is not None)}
    names = (
        dict(store.query(f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(want))})", sorted(want)))
        if want
        else {}
    )
    leads = sorted({c.placed["from"] for c in ranked if c.placed and c.placed["from"] is not None})
    lead_rows = {
        r[0]: r[1:]
        for r in (
            store.query(
                f"SELECT c.id, d.path, d.title FROM chunks c JOIN docs d ON d.id = c.doc_id "
                f"WHERE c.id IN ({','.join('?' * len(leads))})",
                leads,
            )
            if leads
            else []
        )
    }
    out = []
    for rank, c in enumerate(ranked, 1):
        row = rows.get(c.chunk_id)
        if row is None:
            continue
        _, doc_id, path, title, section, text, start, end, ord_ = row
        out.append(
            {
                "rank": rank,
                "id": c.chunk_id,  # seed 000 §11.4's name for it
                "chunk_id": c.chunk_id,
                "doc_id": doc_id,
                "path": path,
                "title": title,
                "section": section,
                "ord": ord_,
                "start": start,
                "end": end,
                "snippet": snippet(text),
                "sentence": _sentence(nearest.get(c.chunk_id), text, start),
                "score": round(c.score, 4),
                "scores": {
                    "bm25_rank": c.bm25_rank,
                    "vector_rank": c.vector_rank,
                    "cosine": None if c.cosine is None else round(c.cosine, 4),
                    "hop": round(c.hop, 3),
                    "rel": round(c.rel, 3),
                    "rest": round(c.rest, 3),
                },
                "entities": ents.get(c.chunk_id, []),
                "via": [{**v, "name": names.get(v["entity"])} for v in c.via],
                "placed_by": _placed_by(c.placed, names, lead_rows),
                "why": _why(c, names, reached, lead_rows),
            }
        )
    return out


def _sentence(hit: tuple[int, float] | None, text: str, start: int | None) -> dict | None:
    """The chunk's sentence nearest the question (see :func:`kgr.store.vectors.best_sentences`):
    its text, where it stands in the document, and its cosine to the question."""
    if hit is None:
        return None
    k, cosine = hit
    pieces = vectors.sentence_texts(None, text)
    if k >= len(pieces):  # the chunk's text changed since its sentences were embedded
        return None
    at = text.find(pieces[k])
    where = {"start": start + at, "end": start + at + len(pieces[k])} if at >= 0 and start is not None else {}
    return {"text": pieces[k], **where, "cosine": round(cosine, 4)}


def snippet(text: str) -> str:
    """A chunk's text on one line, cut at a word to at most SNIPPET_CHARS characters."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _placed_by(placed: dict | None, names: dict[int, str], leads: dict[int, tuple]) -> dict | None:
    """The link that placed a result (see :func:`_place`), for a person to read: who names the
    entity (the question, or the page that leads to this one) and that the entity is this page's subject."""
    if placed is None:
        return None
    if placed["entity"] is None:  # a raw string: the page's title
        return {
            "link": "question contains this page's title",
            "entity": None,
            "named_by": None,
            "round": placed["round"],
            "strength": placed["strength"],
        }
    name = names.get(placed["entity"], f"entity {placed['entity']}")
    lead = placed["from"]
    if lead is None:
        names_it = f"question names {name}"
        by = None
    else:
        path, title = leads.get(lead, (None, None))
        names_it = f"page {title or path or lead} names {name}"
        by = {"chunk_id": lead, "path": path, "title": title}
    if placed.get("aspect"):  # its title writes the name among other words ("History of X")
        where = f"this page's title writes {name}"
    elif placed.get("defines"):  # "What is X?": a glossary line "**X**: ..."
        where = f"this passage defines {name}"
    else:
        where = f"{name} is the subject of this page"
    return {
        "link": f"{names_it}; {where}",
        "entity": {"id": placed["entity"], "name": name},
        "named_by": by,  # None: the question itself
        "round": placed["round"],
        "strength": placed["strength"],
    }


def _why(c: Candidate, names: dict[int, str], reached: dict[int, dict], leads: dict[int, tuple] | None = None) -> str:
    parts = []
    if c.placed is not None:
        parts.append("placed: " + _placed_by(c.placed, names, leads or {})["link"])
    if c.bm25_rank:
        parts.append(f"keyword match #{c.bm25_rank}")
    if c.vector_rank:
        parts.append(f"semantic match #{c.vector_rank}" + (f", kept among the first {VECTOR_SLOT}" if c.kept else ""))
    if c.second is not None and c.second[0] < min(c.bm25_rank or MAX_K + 1, c.vector_rank or MAX_K + 1):
        parts.append(f"second search #{c.second[0]} ({c.second[1]})")
    if c.rest_rank is not None:
        parts.append(f"match #{c.rest_rank[0]} for what the best page lacks ({c.rest_rank[1]})")
    for v in c.via:
        name = names.get(v["entity"], f"entity {v['entity']}")
        how = "about" if v["about"] else "mentions"
        if reached[v["entity"]]["why"]:
            parts.append(f"{how} {name} ({reached[v['entity']]['why']})")
        else:
            parts.append(
                f"{how} {name}, {v['distance']} hop{'s' if v['distance'] > 1 else ''} away via {v['rel'] or 'the graph'}"
            )
    return "; ".join(parts) or "reached through the graph"


def _entity_rows(store: Store, ids: list[int], reached: dict[int, dict]) -> list[dict]:
    if not ids:
        return []
    rows = store.query(f"SELECT id, name, type FROM entities WHERE id IN ({','.join('?' * len(ids))})", ids)
    by = {r[0]: r for r in rows}
    out = []
    for eid in ids:
        if eid in by:
            info = reached.get(eid, {})
            out.append(
                {
                    "id": eid,
                    "name": by[eid][1],
                    "type": by[eid][2],
                    "distance": info.get("distance"),
                    "why": info.get("why"),
                }
            )
    return out


def format_results(result: dict[str, Any]) -> str:
    """The readable ranked list for a terminal."""
    lines = []
    for r in result["results"]:
        where = r["path"] + (f" › {r['section']}" if r.get("section") else "")
        lines.append(f"{r['rank']:>2}. {where}  [{r['score']:.3f}]")
        lines.append(f"    {r['snippet']}")
        said = snippet((r.get("sentence") or {}).get("text") or "")
        if said and said[:40] not in r["snippet"]:  # the sentence nearest the question, when the snippet lacks it
            lines.append(f"    nearest: {said}")
        lines.append(f"    why: {r['why']}")
    if not lines:
        lines.append("no results")
    return "\n".join(lines)


def query_with_settings(
    store: Store,
    q: str,
    retrieval: RetrievalSettings,
    *,
    k: int | None = None,
    hops: int | None = None,
    rels: Sequence[str] | None = None,
    mode: str = "graph",
    embed_query: Callable[[str], Any] | None = None,
    vectors_in_memory: bool = False,
    tags: Sequence[str] | None = None,
) -> dict[str, Any]:
    """:func:`hybrid_query` with what the caller leaves out (None) taken from the retrieval
    settings: ``kgr query`` and the MCP tool hybrid_query both answer through it, so the
    same question with the same configuration gets the same answer from both."""
    return hybrid_query(
        store,
        q,
        k=retrieval.k if k is None else k,
        hops=retrieval.hops if hops is None else hops,
        rels=list(retrieval.rels) if rels is None else rels,
        mode=mode,
        embed_query=embed_query,
        weights=retrieval.weights,
        vectors_in_memory=vectors_in_memory,
        tags=tags,
    )


def query_embedder(store, cfg):
    """A function text -> vector with the database's model, or None when it has no vectors."""
    spec = vectors.stored_spec(store)
    if spec is None:
        return None
    cache = {}

    def embed_query(text: str):
        if "e" not in cache:
            from kgr.embedders import get_embedder

            cache["e"] = get_embedder(cfg, purpose="query")
            vectors.check_spec(store, vectors.VectorSpec(cache["e"].model, int(cache["e"].dim)))
        return cache["e"].embed_queries([text])[0]

    return embed_query


def rrf_only(lists: Sequence[Sequence[int]]) -> list[int]:
    """Reciprocal rank fusion of id lists (for tests and evaluation)."""
    score: dict[int, float] = defaultdict(float)
    for lst in lists:
        for rank, i in enumerate(lst, 1):
            score[i] += 1.0 / (RRF_K + rank)
    return [i for i, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))]


__all__ = ["hybrid_query", "query_with_settings", "query_embedder", "format_results", "Weights", "MODES", "rrf_only"]
