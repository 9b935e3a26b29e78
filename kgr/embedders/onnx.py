"""ONNX: the light query path for the default model.

:func:`export_onnx` exports the model once into kgr's cache (torch and onnx, a few
seconds), checked against the torch model before it can be found; :class:`OnnxEmbedder`
runs the export on onnxruntime + tokenizers, without torch, so a query starts in well
under a second. The cache is ``$KGR_CACHE_DIR/onnx/`` (default
``${XDG_CACHE_HOME:-~/.cache}/kgr/onnx/``), one directory per model and weights fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from kgr.config import DEFAULT_MODEL
from kgr.embedders.base import EmbeddingError, as_texts, check_dim, l2_normalize, no_vectors, truncate
from kgr.embedders.models import default_model_dir, max_seq_length, quiet_hf
from kgr.stages.tokens import read_json

log = logging.getLogger("kgr.embedders")  # one logger for every backend

# Bump when the layout or contents of an ONNX export change: older exports are ignored.
ONNX_FORMAT = 1
# An export is kept only if it agrees with the torch model at least this well.
ONNX_MIN_COSINE = 0.9999


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

    quiet_hf()
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
    tokenizer = _load_tokenizer(model_dir / "tokenizer.json", max_seq_length(model_dir))
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
        "max_seq_length": max_seq_length(model_dir),
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
        self.dim = check_dim(dim, self.native_dim, f"model {self.model}")
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
        # its threads do not spin once a query is embedded: the vector search and graph walk that follow
        # in the same process want those cores
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
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
        texts = as_texts(texts)
        if not texts:
            return no_vectors(self.dim)
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

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's token vectors: the model's last hidden state before pooling, one
        L2-normalised row per word piece, without the special and padding tokens (for
        late-interaction scoring, MaxSim)."""
        texts = as_texts(texts)
        out: list[np.ndarray] = [no_vectors(self.native_dim)] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] for i in rows])
            batch = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            (hidden,) = self._session.run(None, {k: batch[k] for k in self._inputs})
            for j, (i, enc) in enumerate(zip(rows, encodings)):
                keep = np.array(enc.attention_mask, dtype=bool) & ~np.array(enc.special_tokens_mask, dtype=bool)
                out[i] = l2_normalize(np.ascontiguousarray(hidden[j][keep], dtype=np.float32))
        return out

    def __repr__(self) -> str:
        return f"OnnxEmbedder({self.model!r}, dim={self.dim}, dir={str(self.export_dir)!r})"
