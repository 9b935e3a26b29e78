"""The stub embedder: deterministic hash-based vectors for plumbing tests (``embed.stub``)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from kgr.embedders.base import as_texts, check_dim, no_vectors, truncate

STUB_MODEL = "kgr-stub-hash"

_WORD = re.compile(r"\w+", re.UNICODE)


class StubEmbedder:
    """Deterministic hash-based vectors, for plumbing tests only: they carry no meaning.

    Each lowercased word, and the whole text, adds a pseudo-random Gaussian vector
    seeded by its hash, so equal texts give equal vectors, texts sharing words are a
    little alike, and every prefix of a vector is non-zero (``native_dim`` lets tests
    exercise Matryoshka truncation).
    """

    backend = "stub"

    def __init__(self, dim: int = 384, *, native_dim: int | None = None, max_tokens: int = 256):
        self.native_dim = int(native_dim or dim)
        self.dim = check_dim(dim, self.native_dim, "the stub embedder")
        self.model = STUB_MODEL
        self.max_tokens = int(max_tokens)

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.native_dim, dtype=np.float64)
        for token in [text, *(_WORD.findall(text.lower()))]:
            seed = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            v += np.random.default_rng(seed).standard_normal(self.native_dim)
        return v.astype(np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        texts = as_texts(texts)
        if not texts:
            return no_vectors(self.dim)
        return truncate(np.stack([self._vector(t) for t in texts]), self.dim)

    embed_queries = embed_documents

    def __repr__(self) -> str:
        return f"StubEmbedder(dim={self.dim}, native_dim={self.native_dim})"
