"""The typed settings: every default in one place, parsed and checked once, read-only."""

from __future__ import annotations

import dataclasses

import pytest

from kgr import config
from kgr.errors import ConfigError


def test_the_defaults_are_the_dataclass_defaults():
    s = config.Settings()
    assert config.DEFAULTS == s.as_dict()
    assert config.load(None, env={}) == s
    assert s.chunk.max_tokens == config.DEFAULTS["chunk"]["max_tokens"] == 256
    assert s.retrieval.rels == tuple(config.DEFAULTS["retrieval"]["rels"])
    assert dict(config.leaves(config.DEFAULTS))["retrieval.weights.hop"] == s.retrieval.weights.hop


def test_library_defaults_come_from_the_settings():
    import inspect

    from kgr.ingest import watch
    from kgr.mcp import server
    from kgr.memory import recall
    from kgr.retrieval import query
    from kgr.stages import chunk, normalize

    s = config.Settings()
    params = inspect.signature(chunk.chunk).parameters
    assert params["max_tokens"].default == s.chunk.max_tokens and params["overlap"].default == s.chunk.overlap
    assert chunk.DEFAULT_BUDGETS == s.chunk.budgets.as_dict()
    params = inspect.signature(query.hybrid_query).parameters
    assert (params["k"].default, params["hops"].default) == (s.retrieval.k, s.retrieval.hops)
    assert query.Weights() == s.retrieval.weights
    assert recall.Settings() == s.memory
    assert normalize.NormalizeOptions().max_pages == s.normalize.max_pages
    assert watch.DEBOUNCE_MS == s.watch.debounce_ms
    assert server.TIME_BUDGET_S == s.serve.time_budget_s


def test_settings_are_typed_and_read_only(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("chunk:\n  max_tokens: '200'\nretrieval:\n  rels: uses, cites\n  weights:\n    graph: 0.3\n")
    s = config.load(f, env={})
    assert s.chunk.max_tokens == 200 and s.source == str(f)
    assert s.retrieval.rels == ("uses", "cites")
    assert s.retrieval.weights.hop == pytest.approx(0.2) and s.retrieval.weights.rel == pytest.approx(0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.chunk.max_tokens = 3
    with pytest.raises(TypeError):
        s["chunk"]["max_tokens"] = 3
    assert s["retrieval"]["rels"] == ["uses", "cites"]  # the former dict's view
    assert s.get_path("chunk.budgets.faq") == 160


@pytest.mark.parametrize(
    "text, message",
    [
        ("chunk:\n  max_tokens: many\n", "chunk.max_tokens: expected an integer, got 'many'"),
        ("chunk:\n  overlap: [1]\n", r"chunk.overlap: expected a number, got \[1\]"),
        ("embed:\n  stub: maybe\n", "embed.stub: expected a boolean, got 'maybe'"),
        ("retrieval:\n  rels: {a: 1}\n", "retrieval.rels: expected a list of names"),
        ("memory:\n  weights:\n    base: high\n", "memory.weights.base: expected a number, got 'high'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_key(tmp_path, text, message):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        config.load(f, env={})
    assert "\n" not in str(info.value)


def test_an_empty_value_keeps_the_default(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("chunk:\n  max_tokens:\nembed:\n  dim:\n")
    s = config.load(f, env={})
    assert s.chunk.max_tokens == 256
    assert s.embed.dim is None  # optional: null means the model's own dimension


def test_settings_of_takes_settings_none_or_a_partial_mapping():
    s = config.load(None, env={})
    assert config.settings_of(s) is s
    assert config.settings_of(None) == config.Settings()
    part = config.settings_of({"embed": {"stub": True}})
    assert part.embed.stub is True and part.chunk == config.Settings().chunk
    with pytest.raises(ConfigError, match="unknown key 'stubb'"):
        config.settings_of({"embed": {"stubb": True}})


def test_override_is_a_checked_copy():
    s = config.Settings()
    t = s.override({"memory.half_life_days": 7, "embed.stub": "1"})
    assert (t.memory.half_life_days, t.embed.stub) == (7.0, True)
    assert s.memory.half_life_days == 30.0
    with pytest.raises(ConfigError, match="no configuration key 'memory.half_life'"):
        s.override({"memory.half_life": 7})
    assert config.MemorySettings.from_config(t) is t.memory


def test_a_command_parses_the_configuration_once(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kgr.cli import cli

    f = tmp_path / "c.yaml"
    f.write_text("sqlite:\n  path: missing.sqlite\nretrieval:\n  k: 3\n")
    calls = []
    real = config.load
    monkeypatch.setattr(config, "load", lambda *a, **kw: calls.append(a) or real(*a, **kw))
    monkeypatch.delenv("KGR_DB", raising=False)
    res = CliRunner().invoke(cli, ["query", "anything", "--mode", "bm25", "--config", str(f)])
    assert res.exit_code == 1 and "missing.sqlite" in res.stderr, res.stderr  # the file's sqlite.path
    assert len(calls) == 1
