"""Choosing a backend from the configuration: :func:`get_embedder` and :func:`prepare_query_path`.

Loaded models are shared within a process (:func:`get_embedder` returns the same object
for the same configuration).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Mapping

from kgr.config import DEFAULT_ALIASES, DEFAULT_MODEL, Settings, settings_of
from kgr.embedders.base import Embedder, EmbeddingError, ModelNotFound
from kgr.embedders.http import HttpEmbedder
from kgr.embedders.models import default_model_dir, local_model_dir
from kgr.embedders.onnx import OnnxEmbedder, cache_dir, export_onnx, find_onnx_export
from kgr.embedders.sentence_transformers import SentenceTransformerEmbedder
from kgr.embedders.stub import StubEmbedder

log = logging.getLogger("kgr.embedders")  # one logger for every backend


def _is_default_model(model: Any) -> bool:
    return not model or str(model).lower() in DEFAULT_ALIASES


_instances: dict[tuple, Any] = {}
_instances_lock = threading.Lock()


def _shared(key: tuple, make) -> Any:
    """One loaded model per configuration and process: models are big and slow to load."""
    with _instances_lock:
        found = _instances.get(key)
    if found is not None:
        return found
    made = make()
    with _instances_lock:
        return _instances.setdefault(key, made)


def get_embedder(cfg: Settings | Mapping[str, Any] | None, *, purpose: str = "document") -> Embedder:
    """The embedder the configuration asks for; see the module docstring for the order.

    ``purpose="query"`` selects the light ONNX path for the default model (exporting it
    to the cache first when there is no export yet); ``"document"`` the
    sentence-transformers model. Both return the same vectors (cosine >= 0.999), and
    every backend has both ``embed_documents`` and ``embed_queries``. Loaded models are
    shared within a process.
    """
    if purpose not in ("document", "query"):
        raise ValueError(f"purpose must be 'document' or 'query', not {purpose!r}")
    settings = settings_of(cfg)
    embed = settings.embed
    dim = embed.dim or None
    batch_size = embed.batch_size or 32

    if embed.stub:
        return StubEmbedder(dim or 384)

    if embed.endpoint:
        return HttpEmbedder(
            embed.endpoint,
            model=embed.model,
            dim=dim,
            batch_size=batch_size,
            max_tokens=settings.chunk.max_tokens or 512,
        )

    if embed.model_path:
        model_dir = local_model_dir(embed.model_path)
    elif not _is_default_model(embed.model):
        if not Path(embed.model).expanduser().exists():
            raise ModelNotFound(
                f"unknown embedding model {embed.model!r}: not {DEFAULT_MODEL} and not a local model directory",
                hint=f'set embed.model to "{DEFAULT_MODEL}", or embed.model_path to a local sentence-transformers model',
            )
        model_dir = local_model_dir(embed.model)
    else:
        model_dir = None

    if model_dir is not None:
        resolved = model_dir.resolve()
        name = model_dir.name or resolved.name  # as the user named it, even through a symlink
        return _shared(
            ("st", str(resolved), name, dim, batch_size),
            lambda: SentenceTransformerEmbedder(resolved, name=name, dim=dim, batch_size=batch_size),
        )

    default_dir = default_model_dir()
    if purpose == "query" and embed.onnx:
        light = _light_query_embedder(default_dir, dim=dim, batch_size=batch_size)
        if light is not None:
            return light
    return _shared(
        ("st", str(default_dir), dim, batch_size),
        lambda: SentenceTransformerEmbedder(default_dir, name=DEFAULT_MODEL, dim=dim, batch_size=batch_size),
    )


def _light_query_embedder(model_dir: Path, *, dim: int | None, batch_size: int) -> OnnxEmbedder | None:
    root = cache_dir()
    key = ("onnx", str(root), str(model_dir), dim, batch_size)
    with _instances_lock:
        found = _instances.get(key)
    if found is not None:
        return found
    try:
        path = find_onnx_export(model_dir, name=DEFAULT_MODEL, root=root)
        if path is None:
            log.info("no ONNX export of %s yet: exporting it to %s", DEFAULT_MODEL, root / "onnx")
            path = export_onnx(model_dir, name=DEFAULT_MODEL, root=root)
        return _shared(key, lambda: OnnxEmbedder(path, dim=dim, batch_size=batch_size))
    except (EmbeddingError, OSError) as exc:
        log.warning("kgr: the light ONNX query path is unavailable (%s); using sentence-transformers", exc)
        return None


def prepare_query_path(cfg: Settings | Mapping[str, Any] | None) -> Path | None:
    """Make sure ``kgr query`` will start fast: export the default model to ONNX.

    For the embed stage to call at the end of an ingest (torch is loaded then anyway).
    Returns the export's directory, or None when the configured backend is not the
    default model (the stub, an endpoint, a local model) or ``embed.onnx`` is off, or
    when the export failed: that is a warning on stderr, not an error, since queries
    still work through sentence-transformers, only slower to start.
    """
    embed = settings_of(cfg).embed
    if embed.stub or embed.endpoint or embed.model_path or not _is_default_model(embed.model) or not embed.onnx:
        return None
    try:
        return export_onnx(default_model_dir(), name=DEFAULT_MODEL)
    except (EmbeddingError, OSError) as exc:
        log.warning("kgr: could not prepare the fast query path (%s); queries will load sentence-transformers", exc)
        return None
