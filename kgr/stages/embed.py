"""The embed stage: vectors for chunk and entity records.

``embed(records)`` is a filter: chunk and entity records gain ``embedding`` (base64 of
little-endian float32), ``model`` and ``dim``; chunk records also gain ``sentence_vectors``,
base64 of one int8 row per sentence (the unit vector x 127, as the database keeps them; see
:func:`kgr.store.vectors.sentence_texts`: each embedded after the title of the doc record
before it). Every other record passes on unchanged and in order. With a store, vectors
already in its cache (same text, model and dimension) are reused instead of embedded again
(sentence vectors are not cached).

``kgr ingest`` does not stream vectors through records: it embeds what the database lacks
(:func:`kgr.store.vectors.embed_pending`) after loading, so an unchanged file costs nothing.
"""

from __future__ import annotations

import base64
import itertools
from typing import Iterable, Iterator

import numpy as np

from kgr import records
from kgr.store import Store, vectors

VECTOR_FIELDS = ("embedding", "model", "dim", "sentence_vectors")


def encode(vec) -> str:
    return base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def decode(text: str, dim: int | None = None) -> np.ndarray:
    vec = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4")
    if dim is not None and vec.shape[0] != dim:
        raise ValueError(f"embedding has {vec.shape[0]} dimensions, the record says {dim}")
    return vec


def text_of(rec: dict) -> str | None:
    kind = rec.get("kind")
    if kind == records.CHUNK:
        return vectors.chunk_text(rec.get("prelude"), rec.get("text") or "")
    if kind == records.ENTITY:
        return vectors.entity_text(
            rec.get("name") or rec.get("key") or "", rec.get("type"), rec.get("aliases"), rec.get("description")
        )
    return None


def embed(
    recs: Iterable[dict], embedder, *, batch_size: int = 64, store: Store | None = None, sentences: bool = True
) -> Iterator[dict]:
    """The stage. Records are buffered ``batch_size`` at a time, never the whole input. Without
    ``sentences`` (``embed.sentences: false``) chunk records gain no ``sentence_vectors``."""
    spec = vectors.VectorSpec(embedder.model, int(embedder.dim))
    titles: dict[str, str | None] = {}
    it = iter(recs)
    while True:
        part = list(itertools.islice(it, max(1, batch_size)))
        if not part:
            return
        lines: list[tuple[int, list[str]]] = []  # (record's place in part, its sentence texts)
        for i, r in enumerate(part):
            if r.get("kind") == records.DOC:
                titles[str(r.get("path"))] = r.get("title")
            elif sentences and r.get("kind") == records.CHUNK and isinstance(r.get("text"), str):
                lines.append((i, vectors.sentence_texts(titles.get(str(r.get("doc"))), r["text"])))
        todo = [(i, text_of(r)) for i, r in enumerate(part)]
        todo = [(i, t) for i, t in todo if t is not None and t.strip()]
        if todo:
            hashes = [vectors.text_hash(t) for _, t in todo]
            have = vectors.cached(store, spec, hashes) if store is not None else {}
            missing = [(h, t) for h, (_, t) in zip(hashes, todo) if h not in have]
            if missing:
                fresh = embedder.embed_documents([t for _, t in missing])
                have.update({h: v for (h, _), v in zip(missing, fresh)})
            for (i, _), h in zip(todo, hashes):
                part[i] = {**part[i], "embedding": encode(have[h]), "model": spec.model, "dim": spec.dim}
        texts = [t for _, ts in lines for t in ts]
        mat = embedder.embed_documents(texts) if texts else None
        at = 0
        for i, ts in lines:
            blob = vectors.quantize_unit(mat[at : at + len(ts)]) if ts else b""
            part[i] = {**part[i], "sentence_vectors": base64.b64encode(blob).decode("ascii")}
            at += len(ts)
        yield from part
