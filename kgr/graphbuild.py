"""Building the graph for stored documents: mine the gazetteer, extract, link, load.

`kgr ingest` runs this after loading documents and chunks, for every document whose
graph is missing or stale (``docs.graph_sig IS NULL``). Mining reads the whole
corpus, which is why it runs on the database rather than on one stream.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Iterable, Iterator

import orjson

from . import graphstore
from .store import Store, loads


def stored_docs(store: Store) -> Iterator[dict]:
    for path, title, text in store.query("SELECT path, title, text FROM docs WHERE status='ok' ORDER BY path"):
        yield {"kind": "doc", "path": path, "title": title, "text": text or ""}


def mine(store: Store, *, topk: int = 2000, min_freq: int = 3) -> list:
    """Mine gazetteer terms from every stored document and replace the gazetteer table."""
    from .extract import mine_terms

    terms = mine_terms(stored_docs(store), topk=topk, min_freq=min_freq)
    with store.write() as conn:
        conn.execute("DELETE FROM gazetteer")
        conn.executemany(
            "INSERT INTO gazetteer(term, type, freq, source) VALUES (?, ?, ?, ?)",
            [(t.term, t.type, t.freq, t.source) for t in terms],
        )
    return terms


def load_gazetteer(store: Store):
    from .extract import Gazetteer, GazTerm

    return Gazetteer(GazTerm(term, typ, freq, source) for term, typ, freq, source in
                     store.query("SELECT term, type, freq, source FROM gazetteer ORDER BY freq DESC, term"))


def stored_entities(store: Store) -> list[dict]:
    return [
        {"key": k, "name": n, "type": t, "norm": nm, "aliases": loads(a, []), "description": d, "popularity": p, "origin": o}
        for k, n, t, nm, a, d, p, o in store.query(
            "SELECT key, name, type, norm, aliases, description, popularity, origin FROM entities ORDER BY id"
        )
    ]


def build_pending(store: Store, cfg, *, on_doc: Callable[[str], None] | None = None) -> int:
    """Extract and link every document without a current graph; return how many."""
    pending = store.query("SELECT id, path, title, text, hash FROM docs WHERE status='ok' AND graph_sig IS NULL ORDER BY path")
    if not pending:
        return 0
    from .extract import extract_doc, extractor_from_config
    from .link import Linker

    mine(store, topk=cfg["extract"]["gazetteer"]["mine_topk"], min_freq=cfg["extract"]["gazetteer"]["min_freq"])
    extractor = extractor_from_config(cfg, load_gazetteer(store))
    linker = Linker(stored_entities(store))
    # Aliases first, from the whole corpus: "OIS" in one page links to the "Order Intake
    # Service (OIS)" that another page declares, whatever order the pages come in.
    for doc in stored_docs(store):
        linker.learn(doc["text"], doc.get("title"))
    for doc_id, path, title, text, hash_ in pending:
        doc = {"kind": "doc", "path": path, "title": title, "text": text or "", "hash": hash_}
        chunks = [
            {"kind": "chunk", "doc": path, "ord": o, "start": s, "end": e, "text": t}
            for o, s, e, t in store.query('SELECT ord, start, "end", text FROM chunks WHERE doc_id=? ORDER BY ord', (doc_id,))
        ]
        derived = extract_doc(extractor, doc, chunks)
        mentions = [r for r in derived if r["kind"] == "mention"]
        relations = [r for r in derived if r["kind"] == "relation"]
        linked = linker.link_doc(doc, mentions, relations)
        sig = graph_signature(linked)
        with store.write():
            graphstore.replace_derived(store, doc_id, linked, sig)
        if on_doc:
            on_doc(path)
    return len(pending)


def graph_signature(recs: Iterable[dict]) -> str:
    h = hashlib.sha256(b"graph")
    for rec in recs:
        h.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()
