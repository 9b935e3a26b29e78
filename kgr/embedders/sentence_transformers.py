"""Any local sentence-transformers model on the CPU: the document path of the default model,
and every model given by ``embed.model_path``. sentence-transformers is imported on first use."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from kgr.embedders.base import EmbeddingError, as_texts, check_dim, no_vectors, truncate
from kgr.embedders.models import max_seq_length, quiet_hf
from kgr.stages.tokens import read_json


class SentenceTransformerEmbedder:
    """Any local sentence-transformers model, on the CPU, loaded on first use.

    Queries use the model's ``"query"`` prompt and documents its ``"document"`` prompt
    when it defines them (EmbeddingGemma: ``task: search result | query: `` and
    ``title: none | text: ``); models without prompts embed both alike.
    """

    backend = "sentence-transformers"

    def __init__(
        self,
        model_dir: str | os.PathLike,
        *,
        name: str | None = None,
        dim: int | None = None,
        batch_size: int = 32,
        device: str = "cpu",
    ):
        self.model_dir = Path(model_dir)
        self.model = name or self.model_dir.resolve().name
        self.batch_size = max(1, int(batch_size or 32))
        self.device = device
        self.max_tokens = max_seq_length(self.model_dir)
        self._requested_dim = int(dim) if dim else None
        self._st: Any = None
        self._native_dim: int | None = None
        self._lock = threading.Lock()
        native = self._native_dim_from_files()
        if native is not None:
            self._native_dim = native
            self._dim = check_dim(self._requested_dim, native, f"model {self.model}")
        else:
            self._dim = self._requested_dim

    def _native_dim_from_files(self) -> int | None:
        """The output dimension read from the module configs, without loading the model."""
        modules = self.model_dir / "modules.json"
        if not modules.is_file():
            return None
        try:
            entries = json.loads(modules.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        native = None
        for entry in entries if isinstance(entries, list) else []:
            kind = str(entry.get("type", ""))
            config = read_json(self.model_dir / str(entry.get("path", "")) / "config.json")
            if kind.endswith(".Pooling"):
                value = config.get("word_embedding_dimension") or config.get("embedding_dimension")
            elif kind.endswith(".Dense"):
                value = config.get("out_features")
            elif kind.endswith((".Normalize", ".Transformer")) or kind.endswith("Dropout"):
                continue
            else:
                return None  # a module we cannot read the size of: ask the loaded model
            if isinstance(value, int) and value > 0:
                native = value
        return native

    def _load(self) -> Any:
        if self._st is not None:
            return self._st
        with self._lock:
            if self._st is None:
                quiet_hf()
                from sentence_transformers import SentenceTransformer

                try:
                    st = SentenceTransformer(str(self.model_dir), device=self.device, local_files_only=True)
                except Exception as exc:  # noqa: BLE001 - many libraries, many exception types
                    raise EmbeddingError(
                        f"cannot load embedding model {self.model_dir}: {type(exc).__name__}: {exc}",
                        hint="the directory must hold a complete sentence-transformers model (weights included)",
                    ) from exc
                getdim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
                native = int(getdim())
                self._native_dim = native
                self._dim = check_dim(self._requested_dim, native, f"model {self.model}")
                self._st = st
        return self._st

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        return int(self._dim)  # type: ignore[arg-type]

    @property
    def native_dim(self) -> int:
        if self._native_dim is None:
            self._load()
        return int(self._native_dim)  # type: ignore[arg-type]

    @property
    def prompts(self) -> dict[str, str]:
        return dict(getattr(self._load(), "prompts", None) or {})

    @property
    def sentence_transformer(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it)."""
        return self._load()

    def _encode(self, texts: list[str], task: str) -> np.ndarray:
        texts = as_texts(texts)
        if not texts:
            return no_vectors(self.dim)
        st = self._load()
        prompt_name = task if task in (getattr(st, "prompts", None) or {}) else None
        kwargs = dict(
            prompt_name=prompt_name,
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        # sentence-transformers >= 5 has encode_query/encode_document, which also route
        # asymmetric models (Router modules); older versions only take the prompt name.
        method = getattr(st, f"encode_{task}", None) or st.encode
        vectors = method(texts, **kwargs)
        return truncate(vectors, self.dim)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "document")

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, "query")

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.model!r}, dim={self._dim}, dir={str(self.model_dir)!r})"
