"""An OpenAI-style embeddings endpoint (``embed.endpoint``). httpx is imported on first use."""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np

from kgr.config import DEFAULT_MODEL
from kgr.embedders.base import EmbeddingError, EndpointError, as_texts, no_vectors, truncate


def embeddings_url(endpoint: str) -> str:
    """``http://host:8080``, ``.../v1`` and ``.../v1/embeddings`` all mean the same URL."""
    url = endpoint.strip().rstrip("/")
    if not re.match(r"^https?://", url, re.I):
        raise EmbeddingError(
            f"embedding endpoint is not an http(s) URL: {endpoint!r}",
            hint="set embed.endpoint (or EMBEDDING_GEMMA_ENDPOINT) to e.g. http://localhost:8080",
        )
    if url.endswith("/v1/embeddings"):
        return url
    if url.endswith("/v1"):
        return url + "/embeddings"
    return url + "/v1/embeddings"


class HttpEmbedder:
    """An OpenAI-style embeddings endpoint: ``POST {endpoint}/v1/embeddings``.

    Sends ``{"model": model, "input": [...]}`` in batches of ``batch_size`` and reads
    ``data[i].embedding`` (ordered by ``data[i].index`` when given). Any failure is an
    :class:`EndpointError` naming the URL and what happened. ``dim`` None asks the
    endpoint once for its dimension.
    """

    backend = "http"

    def __init__(
        self,
        endpoint: str,
        *,
        model: str = DEFAULT_MODEL,
        dim: int | None = None,
        batch_size: int = 32,
        max_tokens: int = 512,
        connect_timeout: float = 5.0,
        read_timeout: float = 120.0,
    ):
        self.endpoint = endpoint
        self.url = embeddings_url(endpoint)
        self.model = model
        self.batch_size = max(1, int(batch_size or 32))
        self.max_tokens = int(max_tokens)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._requested_dim = int(dim) if dim else None
        self._native_dim: int | None = None
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._requested_dim:
            return self._requested_dim
        if self._native_dim is None:
            self._post(["dimension probe"])
        return int(self._native_dim)  # type: ignore[arg-type]

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
                self._client = httpx.Client(timeout=timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _fail(self, what: str, hint: str) -> EndpointError:
        return EndpointError(f"embedding endpoint {self.url}: {what}", hint=hint)

    def _post(self, texts: list[str]) -> np.ndarray:
        import httpx

        client = self._http()
        check = "check embed.endpoint (or EMBEDDING_GEMMA_ENDPOINT) and that the server is running"
        try:
            response = client.post(self.url, json={"model": self.model, "input": texts})
        except httpx.ConnectTimeout:
            raise self._fail(f"connection timed out after {self.connect_timeout:g} s", check) from None
        except httpx.ConnectError as exc:
            reason = "connection refused" if "refused" in str(exc).lower() else f"cannot connect ({exc})"
            raise self._fail(reason, check) from None
        except httpx.TimeoutException:
            raise self._fail(
                f"no answer within {self.read_timeout:g} s",
                "the server may be overloaded; try a smaller embed.batch_size",
            ) from None
        except httpx.HTTPError as exc:
            raise self._fail(f"request failed: {type(exc).__name__}: {exc}", check) from None
        if response.status_code != 200:
            body = " ".join(response.text.split())[:200]
            raise self._fail(
                f"HTTP {response.status_code}" + (f": {body}" if body else ""),
                f"the server refused the request for model {self.model!r}; check embed.model and the server's log",
            )
        shape_hint = 'the server must speak the OpenAI embeddings API: {"data": [{"embedding": [...]}, ...]}'
        try:
            payload = response.json()
        except ValueError:
            snippet = " ".join(response.text.split())[:80]
            raise self._fail(f"answer is not valid JSON ({snippet!r})", shape_hint) from None
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise self._fail('answer has no "data" list', shape_hint)
        if len(data) != len(texts):
            raise self._fail(f"sent {len(texts)} texts, got {len(data)} embeddings back", shape_hint)
        if all(isinstance(d, dict) and isinstance(d.get("index"), int) for d in data):
            data = sorted(data, key=lambda d: d["index"])
        try:
            vectors = np.array([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError):
            raise self._fail('answer has malformed "embedding" values', shape_hint) from None
        if vectors.ndim != 2 or vectors.shape[1] == 0 or not np.all(np.isfinite(vectors)):
            raise self._fail("embeddings are ragged, empty or not finite", shape_hint)
        native = vectors.shape[1]
        if self._native_dim is None:
            self._native_dim = native
        elif native != self._native_dim:
            raise self._fail(f"dimension changed from {self._native_dim} to {native}", shape_hint)
        if self._requested_dim and native < self._requested_dim:
            raise EndpointError(
                f"embedding endpoint {self.url}: returned {native}-dimensional vectors but embed.dim is {self._requested_dim}",
                hint=f"set embed.dim to {native} or less (KGR_EMBED_DIM)",
            )
        return vectors

    def _embed(self, texts: list[str]) -> np.ndarray:
        texts = as_texts(texts)
        if not texts:
            return no_vectors(self._requested_dim or self.dim)
        parts = [self._post(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return truncate(np.concatenate(parts), self._requested_dim)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)

    embed_queries = embed_documents

    def __repr__(self) -> str:
        return f"HttpEmbedder({self.url!r}, model={self.model!r}, dim={self._requested_dim})"
