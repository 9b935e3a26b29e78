"""The remember/recall tools of the memory profile, through the SDK's in-memory client
(stub embedder: plumbing only)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))

from serve_fixtures import Mcp, error_text  # noqa: E402

RECALL_TOOLS = {"remember", "recall", "consolidate_memories", "memory_history", "export_memories", "import_memories"}


@pytest.fixture(params=["root", "no-root"])
def mcp(request, tmp_path, stub_cfg):
    """A memory server with a knowledge root (writes through its writer thread) and one on a
    database alone (each write takes the database's writer lock)."""
    from kgr.mcp import server as serve
    from kgr.store import Store

    root = tmp_path / "kb"
    root.mkdir()
    db = tmp_path / "mem.sqlite"
    Store(db).close()
    svc = serve.Service(db, stub_cfg, root=root if request.param == "root" else None)
    yield Mcp(serve.build_server(svc, "memory"))
    svc.close()


def ok(result):
    assert not result.is_error, error_text(result)
    return result.structured_content


def test_the_memory_profile_lists_the_recall_tools(mcp):
    tools = {t.name: t for t in mcp.tools()}
    assert RECALL_TOOLS <= set(tools)
    assert tools["recall"].annotations.read_only_hint is False  # it counts accesses
    assert tools["memory_history"].annotations.read_only_hint is True
    assert tools["consolidate_memories"].annotations.destructive_hint is True


def test_remember_then_recall_counts_accesses(mcp):
    m = ok(
        mcp.call(
            "remember",
            {
                "content": "Dana Kim runs the Friday release review.",
                "importance": 0.9,
                "tags": ["team"],
                "source": "conversation",
            },
        )
    )
    assert m["created"] is True and m["importance"] == 0.9 and m["label"] == "conversation"
    assert "Dana Kim" in m["entities"]  # seed 003's RememberResult: the entities' names
    assert "Dana Kim" in {e["name"] for e in m["entity_refs"]}
    ok(mcp.call("remember", {"content": "The canteen closes at 3pm on Fridays."}))
    again = ok(mcp.call("remember", {"content": "Dana Kim runs the Friday release review."}))
    assert again["created"] is False and again["id"] == m["id"]

    first = ok(mcp.call("recall", {"query": "who runs the release review", "limit": 1}))
    assert [r["id"] for r in first["results"]] == [m["id"]]
    assert first["results"][0]["access_count"] == 1
    second = ok(mcp.call("recall", {"query": "who runs the release review", "limit": 1}))
    assert second["results"][0]["access_count"] == 2
    exported = ok(mcp.call("export_memories"))
    assert exported["total"] == 2 and exported["next_offset"] is None
    assert {r["id"]: r["access_count"] for r in exported["memories"]}[m["id"]] == 2
    page = ok(mcp.call("export_memories", {"limit": 1}))
    assert len(page["memories"]) == 1 and page["next_offset"] == 1

    hist = ok(mcp.call("memory_history", {"entity": "Dana Kim"}))
    assert hist["observations"] and hist["observations"][0]["memory"] == m["id"]
    assert hist["observations"][0]["valid_until_ms"] is None

    both = ok(mcp.call("recall", {"query": "Friday or Fridays"}))
    assert len(both["results"]) == 2
    tagged = ok(mcp.call("recall", {"query": "Friday or Fridays", "tags": ["team"]}))
    assert [r["id"] for r in tagged["results"]] == [m["id"]]


def test_import_and_consolidate_through_tools(mcp, tmp_path, stub_cfg):
    from kgr.memory import recall
    from kgr.store import Store

    with Store(tmp_path / "other.sqlite") as other:
        recall.remember(other, "Eve Park owns the billing dashboard.", stub_cfg)
        recs = list(recall.export(other))
    out = ok(mcp.call("import_memories", {"memories": recs}))
    assert (out["imported"], out["skipped"]) == (1, 0)
    assert ok(mcp.call("export_memories"))["memories"] == recs
    dry = ok(mcp.call("consolidate_memories", {"dry_run": True}))
    assert dry["groups"] == 0 and dry["threshold"] == 0.9


@pytest.mark.parametrize(
    "name,args,msg",
    [
        ("remember", {"content": "   "}, "empty"),
        ("remember", {"content": "x", "importance": 2}, "Argument importance must be at most 1"),
        ("recall", {"query": "x", "limit": 0}, "Argument limit must be at least 1 (got 0)."),
        ("import_memories", {"memories": [{"kind": "memory"}]}, "line 1"),
        ("memory_history", {"entity": "Nobody Known"}, "no entity"),
    ],
)
def test_clear_errors(mcp, name, args, msg):
    assert msg in error_text(mcp.call(name, args))


def test_a_server_without_root_refuses_writes_while_another_process_writes(tmp_path, stub_cfg):
    from kgr.mcp import server as serve
    from kgr.store import Store
    from kgr.store.lock import WriterLock

    db = tmp_path / "mem.sqlite"
    Store(db).close()
    svc = serve.Service(db, stub_cfg)
    try:
        mcp = Mcp(serve.build_server(svc, "memory"))
        with WriterLock(db):
            assert "being written by another kgr process" in error_text(mcp.call("remember", {"content": "x y z"}))
        assert ok(mcp.call("remember", {"content": "x y z"}))["created"] is True
    finally:
        svc.close()
