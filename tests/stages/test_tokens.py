"""kgr.tokens: counting in the embedder's tokenizer, without loading the model."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from kgr.errors import KgrError
from kgr.stages import tokens
from kgr.stages.tokens import TokenCounter, get_counter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter()


def test_default_model_limits(counter):
    assert counter.max_length == 256  # sentence_bert_config.json's max_seq_length
    assert counter.special_tokens == 2  # [CLS] and [SEP]
    assert counter.text_limit == 254
    assert counter.additive


def test_get_counter_is_cached_and_knows_the_hub_name(counter):
    assert get_counter() is counter
    assert get_counter("all-MiniLM-L6-v2") is counter
    assert get_counter("sentence-transformers/all-MiniLM-L6-v2").max_length == 256


def test_no_truncation_and_no_padding(counter):
    # tokenizer.json ships with truncation and padding at 128: a long text must count whole
    text = "word " * 1000
    assert counter.count(text) == 1000
    assert counter.count("hello") == 1
    assert counter.count("") == 0


def test_count_excludes_special_tokens_and_matches_encode(counter):
    text = "Get-Process returns the processes running on the local computer."
    enc = counter.encode(text)
    assert counter.count(text) == len(enc.ids)
    assert len(counter.encode(text, add_special_tokens=True).ids) == counter.count(text) + 2
    assert counter.count_batch([text, "", "a b c"]) == [counter.count(text), 0, 3]


def test_offsets_are_character_offsets(counter):
    text = "héllo 😀 wörld 中文 e\u0301 x"
    for a, b in counter.offsets(text):
        assert 0 <= a < b <= len(text)
    pieces = [text[a:b] for a, b in counter.offsets(text)]
    assert "中" in pieces and "文" in pieces and "😀" in pieces and "wörld" in pieces


def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(KgrError, match="not a local model directory"):
        tokens.resolve_model_dir(str(tmp_path / "nope"))
    with pytest.raises(KgrError, match="no tokenizer.json"):
        TokenCounter.from_model_dir(tmp_path)


def test_local_model_directory(tmp_path):
    src = tokens.resolve_model_dir("all-MiniLM-L6-v2")
    shutil.copy(src / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    counter = get_counter(str(tmp_path))
    assert counter.max_length == 128
    assert counter.count("hello world") == 2


def test_max_length_falls_back_to_tokenizer_config(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 1e30}))
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    assert tokens.model_max_length(tmp_path) == 2048


def test_import_is_light():
    # `kgr chunk` must start fast: no transformers, sentence-transformers or torch
    code = (
        "import sys, kgr.stages.chunk, kgr.stages.tokens; kgr.stages.tokens.get_counter().count('x');"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
