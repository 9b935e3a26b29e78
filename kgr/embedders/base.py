"""What every embedder shares: the interface, its errors, and the vector helpers.

Every backend returns float32 arrays of shape ``(n, dim)`` with L2-normalised rows; a
``dim`` below the model's own cuts the vectors to their first ``dim`` components and
normalises them again (Matryoshka truncation).
"""

from __future__ import annotations

import itertools
from typing import Iterable, Protocol, Sequence, runtime_checkable

import numpy as np

from kgr.errors import KgrError


class EmbeddingError(KgrError):
    """An embedder could not be set up or could not embed."""


class ModelNotFound(EmbeddingError):
    """The configured model (path) does not exist or is not a model."""


class EndpointError(EmbeddingError):
    """The HTTP embedding endpoint could not be reached or answered wrongly."""


@runtime_checkable
class Embedder(Protocol):
    model: str  # identity recorded in the database
    dim: int  # output dimension after any Matryoshka truncation
    max_tokens: int  # the longest input the model reads whole, special tokens included

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...


# -- vectors --------------------------------------------------------------------------


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32 (a zero row stays zero)."""
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def truncate(vectors: np.ndarray, dim: int | None) -> np.ndarray:
    """Matryoshka truncation: the first ``dim`` components, normalised again."""
    x = np.asarray(vectors, dtype=np.float32)
    if dim and x.shape[1] > dim:
        x = x[:, :dim]
    return l2_normalize(x)


def no_vectors(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


def check_dim(requested: int | None, native: int, what: str) -> int:
    if not requested:
        return native
    if requested > native:
        raise EmbeddingError(
            f"embed.dim is {requested} but {what} makes {native}-dimensional vectors",
            hint=f"set embed.dim to {native} or less (KGR_EMBED_DIM)",
        )
    return int(requested)


def as_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("expected a list of strings, got one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, not str")
    return out


def embed_in_batches(embedder: Embedder, texts: Iterable[str], *, batch_size: int = 32, purpose: str = "document"):
    """Yield ``(texts, vectors)`` per batch of at most ``batch_size`` texts, streaming."""
    method = embedder.embed_queries if purpose == "query" else embedder.embed_documents
    iterator = iter(texts)
    while True:
        batch = list(itertools.islice(iterator, max(1, batch_size)))
        if not batch:
            return
        yield batch, method(batch)
