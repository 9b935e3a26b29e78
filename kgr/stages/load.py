"""The load stage: store records in the database, one transaction per document.

Records arrive grouped by document: a ``doc`` record followed by the records derived
from it (its ``chunk`` records, and later mentions and relations). Each group is
written in one ``BEGIN IMMEDIATE`` transaction. Loading is idempotent: the group's
signature (a hash over every record in it) is stored with the document, and a group
whose signature is unchanged writes nothing.

An ``error`` record that names an existing file (from normalize or chunk, with the
file's ``size``) is stored as a document with status ``failed`` so that the file is not parsed again until it
changes. A file that used to load and now fails keeps its stored content: nothing
already stored is lost to a transient failure.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import orjson

from kgr import records
from kgr.errors import BadPath, BadRecord
from kgr.store import Store, dumps, now_ms
from kgr.store import graph_rows as graph

FILE_STAGES = ("normalize", "chunk")


@dataclass
class LoadSummary:
    written: int = 0  # documents inserted or replaced
    unchanged: int = 0
    failed: int = 0  # failed files recorded
    chunks: int = 0  # chunks written
    pruned: int = 0
    errors: int = 0  # error records seen (all stages)
    orphans: int = 0  # derived records without their document

    def line(self) -> str:
        return (
            f"loaded {self.written} documents ({self.chunks} chunks), {self.unchanged} unchanged, "
            f"{self.failed} failed, {self.pruned} pruned, {self.errors} errors"
        )

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class DocGroup:
    doc: dict
    chunks: list[dict] = field(default_factory=list)
    derived: list[dict] = field(default_factory=list)  # mentions, relations: stored by later stages
    vectors: dict[tuple[str, str], tuple] = field(default_factory=dict)  # (kind, ord or key) -> (embedding, model, dim)
    sentences: dict[str, str] = field(default_factory=dict)  # chunk ord -> its sentence_vectors (from kgr embed)

    def signature(self) -> str:
        """Over the document and its chunks: unchanged means no content to write."""
        h = hashlib.sha256(self.doc["hash"].encode())
        for rec in self.chunks:
            h.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
        return h.hexdigest()

    def graph_signature(self) -> str | None:
        """Over the mentions, entities and relations; None when the stream carried none."""
        if not self.derived:
            return None
        h = hashlib.sha256()
        for rec in self.derived:
            h.update(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS))
        return h.hexdigest()


def _take_vector(group: DocGroup, rec: dict, kind: str, key) -> dict:
    """Keep a record's vector (from kgr embed) aside: it is stored in the vector tables, not with the record."""
    if "sentence_vectors" in rec:
        group.sentences[str(key)] = rec["sentence_vectors"]
        rec = {k: v for k, v in rec.items() if k != "sentence_vectors"}
    if "embedding" not in rec:
        return rec
    group.vectors[(kind, str(key))] = (rec["embedding"], rec.get("model"), rec.get("dim"))
    return {k: v for k, v in rec.items() if k not in ("embedding", "model", "dim")}


def group_records(recs: Iterable[dict], summary: LoadSummary) -> Iterator[DocGroup | dict]:
    """Group a record stream into documents; yield error records as they come."""
    current: DocGroup | None = None
    for rec in recs:
        kind = rec.get("kind")
        if kind == records.DOC:
            if current is not None:
                yield current
            current = None
            why = records.doc_path_problem(rec.get("path"))
            if why is not None:  # its chunks and derived records become orphans, never another doc's
                yield records.error("load", records.bad_path_message(rec.get("path"), why), reason=BadPath.code)
                continue
            current = DocGroup(rec)
        elif kind == records.ERROR:
            if rec.get("reason") == BadPath.code and current is not None:
                yield current  # a doc refused upstream: what follows it is not the previous doc's
                current = None
            yield rec
        elif kind == records.CHUNK:
            if current is not None and rec.get("doc") == current.doc["path"]:
                current.chunks.append(_take_vector(current, rec, "chunk", rec.get("ord")))
            else:
                summary.orphans += 1
                yield records.error(
                    "load", f"chunk of {rec.get('doc')!r} does not follow its doc record", path=rec.get("doc")
                )
        else:
            if current is not None:
                if kind == records.ENTITY:
                    rec = _take_vector(current, rec, "entity", rec.get("key"))
                current.derived.append(rec)
            else:
                summary.orphans += 1
                yield records.error("load", f"{kind} record does not follow a doc record")
    if current is not None:
        yield current


def load(recs: Iterable[dict], store: Store, *, prune_root: str | None = None) -> LoadSummary:
    """Write a record stream to ``store``; return what was done."""
    summary = LoadSummary()
    for item in group_records(recs, summary):
        if isinstance(item, DocGroup):
            write_group(store, item, summary)
        else:
            summary.errors += 1
            if item.get("stage") in FILE_STAGES and item.get("path") is not None and "size" in item:
                record_failure(store, item, summary)
    if prune_root is not None:
        summary.pruned = prune_missing(store, prune_root)
    return summary


_DOC_COLUMNS = ("source", "format", "mtime_ms", "size", "file_hash", "hash", "sig", "title", "lang", "text", "meta")


def _doc_values(doc: dict, sig: str) -> tuple:
    return (
        doc.get("source", "file"),
        doc.get("format"),
        doc.get("mtime_ms"),
        doc.get("size"),
        doc.get("file_hash"),
        doc["hash"],
        sig,
        doc.get("title"),
        doc.get("lang"),
        doc["text"],
        dumps(doc.get("meta") or {}),
    )


def write_group(store: Store, group: DocGroup, summary: LoadSummary) -> None:
    _write_group(store, group, summary)
    if group.vectors:
        write_vectors(store, group)


def write_vectors(store: Store, group: DocGroup) -> None:
    """Store the vectors a record stream carried for this document's chunks and entities."""
    from kgr.stages import embed
    from kgr.store import vectors

    specs = {(model, dim) for _, model, dim in group.vectors.values()}
    if len(specs) != 1 or None in next(iter(specs)):
        raise BadRecord(
            None,
            f"{group.doc['path']}: embedded records need one model and dim each",
            hint="embed the whole stream with one kgr embed",
        )
    model, dim = next(iter(specs))
    spec = vectors.VectorSpec(model, int(dim))
    vectors.ensure_tables(store, spec)
    doc_id = store.scalar("SELECT id FROM docs WHERE path=?", (group.doc["path"],))
    chunk_ids = {
        str(o): (cid, prelude, text)
        for cid, o, prelude, text in store.query("SELECT id, ord, prelude, text FROM chunks WHERE doc_id=?", (doc_id,))
    }
    rows = {"chunk": [], "entity": []}
    for (kind, key), (emb, _, _) in group.vectors.items():
        try:
            vec = embed.decode(emb, int(dim))
        except ValueError as exc:
            raise BadRecord(None, f"{group.doc['path']}: bad embedding: {exc}") from None
        if kind == "chunk" and key in chunk_ids:
            cid, prelude, text = chunk_ids[key]
            rows["chunk"].append((cid, vectors.text_hash(vectors.chunk_text(prelude, text)), vec))
        elif kind == "entity":
            row = store.query("SELECT id, name, type, aliases, description FROM entities WHERE key=?", (key,))
            if row:
                eid, name, typ, aliases, desc = row[0]
                rows["entity"].append((eid, vectors.text_hash(vectors.entity_text(name, typ, aliases, desc)), vec))
    sentence_rows = []
    if group.sentences:
        title = store.scalar("SELECT title FROM docs WHERE id=?", (doc_id,))
        for key, text64 in group.sentences.items():
            try:
                blob = base64.b64decode(text64, validate=True)
            except (ValueError, TypeError) as exc:
                raise BadRecord(None, f"{group.doc['path']}: bad sentence_vectors: {exc}") from None
            if len(blob) % int(dim):
                raise BadRecord(
                    None, f"{group.doc['path']}: sentence_vectors of {len(blob)} bytes are no rows of {dim} dimensions"
                )
            if key in chunk_ids:
                texts = vectors.sentence_texts(title, chunk_ids[key][2])
                sentence_rows.append((chunk_ids[key][0], texts, blob))
        vectors.ensure_sentence_table(store)
    with store.write():
        for kind, items in rows.items():
            vectors.put(store, spec, kind, items)
        vectors.put_sentences(store, sentence_rows)


def _write_group(store: Store, group: DocGroup, summary: LoadSummary) -> None:
    doc = group.doc
    path = doc["path"]
    sig = group.signature()
    graph_sig = group.graph_signature()
    row = store.conn.execute(
        "SELECT id, sig, status, mtime_ms, size, file_hash, graph_sig FROM docs WHERE path=?", (path,)
    ).fetchone()
    if row is not None and row[1] == sig and row[2] == "ok":
        stat_changed = (row[3], row[4], row[5]) != (doc.get("mtime_ms"), doc.get("size"), doc.get("file_hash"))
        graph_changed = graph_sig is not None and graph_sig != row[6]
        if not graph_changed:
            summary.unchanged += 1
        if stat_changed or graph_changed:
            with store.write():
                store.execute(
                    "UPDATE docs SET mtime_ms=?, size=?, file_hash=? WHERE id=?",
                    (doc.get("mtime_ms"), doc.get("size"), doc.get("file_hash"), row[0]),
                )
                if graph_changed:
                    graph.replace_derived(store, row[0], group.derived, graph_sig)
                    summary.written += 1
        return
    with store.write() as conn:
        values = _doc_values(doc, sig)
        if row is None:
            conn.execute(
                f"INSERT INTO docs(path, {', '.join(_DOC_COLUMNS)}, status, error, updated_ms) "
                f"VALUES (?, {', '.join('?' * len(_DOC_COLUMNS))}, 'ok', NULL, ?)",
                (path, *values, now_ms()),
            )
            doc_id = conn.last_insert_rowid()
        else:
            doc_id = row[0]
            touched = graph.doc_graph(store, doc_id)
            conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
            conn.execute(
                f"UPDATE docs SET {', '.join(c + '=?' for c in _DOC_COLUMNS)}, status='ok', error=NULL, graph_sig=NULL, updated_ms=? WHERE id=?",
                (*values, now_ms(), doc_id),
            )
        conn.executemany(
            'INSERT INTO chunks(doc_id, ord, text, prelude, section, headings, start, "end", tokens, hash, meta) '
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_chunk_values(doc_id, c) for c in group.chunks],
        )
        if row is not None:
            graph.collect_garbage(store, *touched)
        set_meta_tags(conn, doc_id, (doc.get("meta") or {}).get("tags"))
        if graph_sig is not None:
            graph.replace_derived(store, doc_id, group.derived, graph_sig)
        store.set_meta("last_file", path)
        store.set_meta("last_ingest_ms", now_ms())
    summary.written += 1
    summary.chunks += len(group.chunks)


def set_meta_tags(conn, doc_id: int, tags: object) -> None:
    """The document's own tags (front matter ``tags``) as its doc_tags of origin 'meta'; the
    tags given to ingest_docs (origin 'ingest') are kept."""
    conn.execute("DELETE FROM doc_tags WHERE doc_id=? AND origin='meta'", (doc_id,))
    if isinstance(tags, list):
        clean = {str(t).strip() for t in tags if str(t).strip()}
        conn.executemany(
            "INSERT OR IGNORE INTO doc_tags(doc_id, tag, origin) VALUES (?, ?, 'meta')", [(doc_id, t) for t in clean]
        )


_CHUNK_FIELDS = {"kind", "doc", "ord", "text", "prelude", "section", "headings", "start", "end", "tokens", "hash"}


def _chunk_values(doc_id: int, c: dict) -> tuple:
    extra = {k: v for k, v in c.items() if k not in _CHUNK_FIELDS}
    return (
        doc_id,
        c["ord"],
        c["text"],
        c.get("prelude"),
        c.get("section"),
        dumps(c.get("headings") or []),
        c.get("start"),
        c.get("end"),
        c.get("tokens"),
        c.get("hash"),
        dumps(extra),
    )


def record_failure(store: Store, err: dict, summary: LoadSummary) -> None:
    """Remember a file that could not be parsed, so it is not retried until it changes."""
    path = err["path"]
    reason = err.get("reason") or "error"
    message = err.get("message", "")
    row = store.conn.execute("SELECT id, status FROM docs WHERE path=?", (path,)).fetchone()
    with store.write() as conn:
        if row is None:
            conn.execute(
                "INSERT INTO docs(path, source, format, mtime_ms, size, file_hash, meta, status, error, updated_ms) "
                "VALUES (?, 'file', ?, ?, ?, ?, ?, 'failed', ?, ?)",
                (
                    path,
                    err.get("format"),
                    err.get("mtime_ms"),
                    err.get("size"),
                    err.get("file_hash"),
                    dumps({"reason": reason}),
                    f"{reason}: {message}",
                    now_ms(),
                ),
            )
        elif row[1] != "ok":
            conn.execute(
                "UPDATE docs SET mtime_ms=?, size=?, file_hash=?, meta=?, status='failed', error=?, updated_ms=? WHERE id=?",
                (
                    err.get("mtime_ms"),
                    err.get("size"),
                    err.get("file_hash"),
                    dumps({"reason": reason}),
                    f"{reason}: {message}",
                    now_ms(),
                    row[0],
                ),
            )
        else:
            # Keep what is stored; the file is retried next run because its stat is not updated.
            conn.execute("UPDATE docs SET error=? WHERE id=?", (f"{reason}: {message}", row[0]))
        store.set_meta("last_error", f"{path}: {reason}: {message}")
        store.log_event("error", path, f"{reason}: {message}")
    summary.failed += 1


def delete_docs(store: Store, paths: Iterable[str]) -> int:
    """Purge documents (and by cascade their chunks, mentions and evidence), then the
    edges and entities that nothing supports any more."""
    n = 0
    for path in paths:
        with store.write() as conn:
            row = conn.execute("SELECT id FROM docs WHERE path=?", (path,)).fetchone()
            if row is None:
                continue
            touched = graph.doc_graph(store, row[0])
            conn.execute("DELETE FROM docs WHERE id=?", (row[0],))
            n += 1
            store.log_event("delete", path, None)
            graph.collect_garbage(store, *touched)
    return n


def prune_missing(store: Store, root: str | os.PathLike) -> int:
    """Purge file documents whose files no longer exist under ``root``."""
    root = os.fspath(root)
    gone = [
        path
        for (path,) in store.query("SELECT path FROM docs WHERE source='file'")
        if not os.path.lexists(os.path.join(root, path))
    ]
    return delete_docs(store, gone)
