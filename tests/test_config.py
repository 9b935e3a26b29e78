import pytest

from kgr import config
from kgr.errors import ConfigError


def test_defaults_without_file_or_env():
    cfg = config.load(None, env={})
    assert cfg["chunk"]["max_tokens"] == 256
    assert cfg.get_path("sqlite.path") == "kgr.sqlite"
    assert cfg.source is None


def test_precedence_flag_over_env_over_file_over_default(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("chunk:\n  max_tokens: 200\n  overlap: 0.1\nwatch:\n  debounce_ms: 500\n")
    env = {"KGR_CHUNK_MAX_TOKENS": "180", "KGR_WATCH_DEBOUNCE_MS": "400"}
    cfg = config.load(f, env=env, overrides={"chunk.max_tokens": 120, "chunk.overlap": None})
    assert cfg["chunk"]["max_tokens"] == 120  # flag
    assert cfg["watch"]["debounce_ms"] == 400  # env over file
    assert cfg["chunk"]["overlap"] == 0.1  # file over default; a None flag is "not given"
    assert cfg["normalize"]["max_pages"] == config.DEFAULTS["normalize"]["max_pages"]


def test_env_types_are_coerced_and_checked():
    cfg = config.load(
        None, env={"KGR_RETRIEVAL_RELS": "uses, cites", "KGR_SQLITE_WAL": "false", "KGR_CHUNK_OVERLAP": "0.2"}
    )
    assert cfg["retrieval"]["rels"] == ["uses", "cites"]
    assert cfg["sqlite"]["wal"] is False
    assert cfg["chunk"]["overlap"] == 0.2
    with pytest.raises(ConfigError, match="KGR_CHUNK_MAX_TOKENS: expected an integer"):
        config.load(None, env={"KGR_CHUNK_MAX_TOKENS": "many"})


def test_seed_environment_names_are_honoured():
    cfg = config.load(None, env={"EMBEDDING_GEMMA_MODEL_PATH": "/m", "EMBEDDING_GEMMA_STUB": "1", "KGR_DB": "x.sqlite"})
    assert cfg["embed"]["model_path"] == "/m"
    assert cfg["embed"]["stub"] is True
    assert cfg["sqlite"]["path"] == "x.sqlite"


def test_config_file_from_env_variable(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("project: demo\n")
    assert config.load(None, env={"KGR_CONFIG": str(f)})["project"] == "demo"


@pytest.mark.parametrize(
    "text, message",
    [
        ("chunk: [1, 2\n", "invalid YAML at line"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("chunkk:\n  max_tokens: 3\n", "unknown key 'chunkk'"),
        ("chunk:\n  maxtokens: 3\n", "unknown key 'maxtokens'"),
        ("chunk: 3\n", "'chunk' must be a mapping"),
    ],
)
def test_bad_config_files_are_clear_errors(tmp_path, text, message):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=message):
        config.load(f, env={})


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        config.load(tmp_path / "nope.yaml", env={})


def test_seed_000_section_13_example_loads(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(
        'project: "knowledge-graphrag"\nwatch:\n  dir: "/knowledge"\n  debounce_ms: 300\n'
        'extract:\n  ner: "spacy:en_core_web_sm"\n  gazetteer:\n    mine_topk: 2000\n    min_freq: 3\n'
        '  regex:\n    version: "v?\\\\d+\\\\.\\\\d+(\\\\.\\\\d+)?(-[a-z0-9]+)?"\n'
        'embed:\n  model: "embedding-gemma-512"\n  dim: 512\n  quantize: 8\n'
        'sqlite:\n  path: "/data/graphrag.sqlite"\n  wal: true\n'
        'retrieval:\n  k: 40\n  hops: 2\n  rels: ["defines","depends_on","uses","cites"]\n'
        "  weights:\n    semantic: 0.7\n    graph: 0.3\n"
    )
    cfg = config.load(f, env={})
    assert cfg["embed"]["dim"] == 512
    assert cfg["retrieval"]["rels"] == ["defines", "depends_on", "uses", "cites"]


def test_relative_database_path_in_a_config_file_is_relative_to_the_file(tmp_path):
    sub = tmp_path / "conf"
    sub.mkdir()
    f = sub / "c.yaml"
    f.write_text("sqlite:\n  path: kb.sqlite\n")
    assert config.db_path(config.load(f, env={})) == str(sub / "kb.sqlite")
    assert config.db_path(config.load(f, env={"KGR_DB": "other.sqlite"})) == "other.sqlite"
    assert config.db_path(config.load(None, env={})) == "kgr.sqlite"
