"""Nodes written by the authoring tools get their vectors at once (the server's query embedder), the
same vectors `kgr embed --pending` would make; when embedding fails the write stands and they stay pending."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kgr.authoring import nodes as authoring
from kgr.embedders import StubEmbedder
from kgr.store import vectors

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))

from serve_fixtures import Mcp, make_service  # noqa: E402


class Counting(StubEmbedder):
    def __init__(self):
        super().__init__(384)
        self.texts: list[str] = []

    def embed_documents(self, texts):
        self.texts += list(texts)
        return super().embed_documents(texts)


def test_written_nodes_get_current_vectors_once(store, ids):
    emb = Counting()
    assert vectors.stored_spec(store) is None  # built by hand: no vectors yet
    done = authoring.embed_nodes(store, ids.values(), emb)
    assert sorted(done["embedded"]) == sorted(ids.values())
    assert vectors.stored_spec(store) == vectors.VectorSpec(emb.model, 384, 8)
    assert vectors.pending_entities(store) == []  # what `kgr embed --pending` would do is done
    assert len(emb.texts) == len(ids)
    authoring.embed_nodes(store, ids.values(), emb)
    assert len(emb.texts) == len(ids)  # unchanged nodes cost nothing
    out = authoring.manage_nodes(store, "update", [{"id": str(ids["Bystander"]), "summary": "Now a jazz critic"}])
    assert vectors.pending_entities(store) == [(ids["Bystander"], "Bystander: Now a jazz critic")]
    authoring.embed_nodes(store, authoring.written_nodes(out), emb)
    assert emb.texts[-1] == "Bystander: Now a jazz critic" and vectors.pending_entities(store) == []
    # the stored vector is the node's: its nearest neighbour is itself
    q = emb.embed_queries(["Bystander: Now a jazz critic"])[0]
    assert vectors.knn(store, vectors.ENTITY, q, 1)[0][0] == ids["Bystander"]


def test_written_nodes_lists_only_successful_creates_and_updates():
    out = {
        "results": [
            {"node_id": 1, "operation": "create", "status": "success"},
            {"node_id": None, "operation": "create", "status": "error"},
            {"node_id": 3, "operation": "delete", "status": "success"},
            {"node_id": 4, "operation": "update", "status": "success"},
        ]
    }
    assert authoring.written_nodes(out) == [1, 4]


def test_another_models_vectors_leave_the_write_standing_and_the_node_pending(graph):
    from kgr import config
    from kgr.mcp import server as serve
    from kgr.store import Store

    db, _ = graph
    with Store(db) as s:
        vectors.ensure_tables(s, vectors.VectorSpec("some-other-model", 384, 8))
    svc = make_service(db, config.load(None).override({"embed.stub": True}))
    try:
        out = Mcp(serve.build_server(svc, "authoring")).call(
            "manage_nodes", {"operation": "create", "nodes": [{"name": "Art Blakey", "summary": "Jazz drummer"}]}
        )
    finally:
        svc.close()
    body = out.structured_content
    assert not out.is_error and body["results"][0]["status"] == "success"
    eid = body["results"][0]["node_id"]
    assert body["embedding"]["status"] == "pending" and body["embedding"]["pending"] == [eid]
    assert "some-other-model" in body["embedding"]["message"] and "kgr embed --pending" in body["embedding"]["message"]
    with Store(db, readonly=True) as s:
        assert s.scalar("SELECT name FROM entities WHERE id=?", (eid,)) == "Art Blakey"
        assert eid in [i for i, _ in vectors.pending_entities(s)]


def test_the_server_embeds_nodes_with_its_own_query_embedder(graph):
    """One model in the server: the instance that embeds queries embeds the nodes it writes."""
    from kgr import config
    from kgr.config import DEFAULT_MODEL
    from kgr.embedders import default_model_dir, find_onnx_export, get_embedder
    from kgr.mcp import server as serve
    from kgr.store import Store

    if find_onnx_export(default_model_dir(), name=DEFAULT_MODEL) is None:
        pytest.skip("no ONNX export of the default model in the cache (an ingest makes it)")
    db, ids = graph
    cfg = config.load(None)
    svc = make_service(db, cfg)
    try:
        assert svc.embedder() is get_embedder(cfg, purpose="query") is svc.embedder()
        assert type(svc.embedder()).__name__ == "OnnxEmbedder"  # the light path, no torch
        out = Mcp(serve.build_server(svc, "authoring")).call(
            "manage_nodes",
            {"operation": "create", "nodes": [{"name": "Sonny Rollins", "summary": "Tenor saxophonist"}]},
        )
        eid = out.structured_content["results"][0]["node_id"]
        assert out.structured_content["embedding"]["embedded"] == [eid]
        q = svc.embed_query()("a saxophone player")
        with Store(db, readonly=True) as s:
            stored = vectors.similarities(s, vectors.ENTITY, np.asarray(q), [eid])[eid]
        expect = float(np.dot(q, svc.embedder().embed_documents(["Sonny Rollins: Tenor saxophonist"])[0]))
        assert stored == pytest.approx(expect, abs=0.02)  # int8 storage
    finally:
        svc.close()
