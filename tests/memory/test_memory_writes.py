"""Two processes writing one database lose nothing; ingest never removes the memory graph;
kgr import and export on the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
from memory_fixtures import REPO, kgr_params

N = 60


def test_two_servers_writing_one_database_lose_nothing(memory_db):
    """Two `kgr serve --profile memory` processes (two MCP clients) write at the same time."""
    from mcp import Client

    connected = 0
    both_connected = anyio.Event()

    async def writer(tag):
        nonlocal connected
        async with Client(kgr_params(memory_db)) as c:
            # start writing only once both servers are up: one server starting seconds before
            # the other on a loaded machine would otherwise finish alone (no concurrency tested)
            connected += 1
            if connected == 2:
                both_connected.set()
            with anyio.fail_after(300):
                await both_connected.wait()
            for i in range(N):
                r = await c.call_tool(
                    "create_entities",
                    {
                        "entities": [
                            {"name": f"{tag}-{i}", "entityType": "note", "observations": [f"{tag} made {i}"]},
                            {"name": "Shared", "entityType": "hub", "observations": []},
                        ]
                    },
                )
                assert not r.is_error, r
                r = await c.call_tool(
                    "add_observations", {"observations": [{"entityName": "Shared", "contents": [f"{tag} says {i}"]}]}
                )
                assert not r.is_error, r

    async def main():
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, "a")
            tg.start_soon(writer, "b")

    anyio.run(main)
    from kgr.memory import graph as memory
    from kgr.store import Store

    with Store(memory_db, readonly=True) as store:
        graph = memory.read_graph(store, limit=1000)
    names = [e["name"] for e in graph["entities"]]
    assert sorted(names) == sorted(["Shared", *(f"{t}-{i}" for t in "ab" for i in range(N))])
    shared = next(e for e in graph["entities"] if e["name"] == "Shared")
    assert sorted(shared["observations"]) == sorted(f"{t} says {i}" for t in "ab" for i in range(N))
    # the two interleaved (else this would not test concurrency)
    a_first = [n for n in names if n != "Shared"]
    assert a_first[:N] != [f"a-{i}" for i in range(N)] and a_first[:N] != [f"b-{i}" for i in range(N)]


def _kgr(*args, **kw):
    env = {**os.environ, "KGR_REDACT_KEY": "test-key", "EMBEDDING_GEMMA_STUB": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kgr", *args],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
        **kw,
    )


def test_ingest_never_removes_the_memory_graph(tmp_path):
    from kgr.memory import graph as memory
    from kgr.store import Store

    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# Kestrel\n\nThe Kestrel pump station feeds the harbour. Maria Lopez runs it.\n")
    db = tmp_path / "kb.sqlite"
    proc = _kgr("ingest", str(root), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    with Store(db) as store:
        memory.create_entities(
            store,
            [
                {"name": "Kestrel", "entityType": "SERVICE", "observations": ["pumps water"]},
                {"name": "Maria Lopez", "entityType": "PERSON", "observations": ["on call in May"]},
                {"name": "Harbour", "entityType": "place", "observations": []},
            ],
        )
        memory.create_relations(
            store,
            [
                {"from": "Maria Lopez", "to": "Kestrel", "relationType": "runs"},
                {"from": "Kestrel", "to": "Harbour", "relationType": "feeds"},
            ],
        )
        before = memory.read_graph(store)
    # the document changes, then goes: each ingest collects what the file supported, not the memory graph
    (root / "a.md").write_text("# Kestrel\n\nMaria Lopez moved the Kestrel pump station to the Harbour.\n")
    for step in ("changed", "deleted"):
        proc = _kgr("ingest", str(root), "--db", str(db))
        assert proc.returncode == 0, (step, proc.stderr)
        with Store(db, readonly=True) as store:
            assert memory.read_graph(store) == before, step
            assert store.scalar("SELECT count(*) FROM entities WHERE origin='manual'") == 3
            assert store.scalar("SELECT count(*) FROM relations WHERE origin='manual'") == 2
            # the next ingest embedded them (the stub model): retrieval's entity vectors include them
            assert (
                store.scalar(
                    "SELECT count(*) FROM vec_src v JOIN entities e ON e.id = v.id "
                    "WHERE v.kind='entity' AND e.origin='manual'"
                )
                == 3
            )
        if step == "changed":
            (root / "a.md").unlink()
    with Store(db, readonly=True) as store:
        assert store.scalar("SELECT count(*) FROM docs WHERE source='file'") == 0


def test_import_and_export_commands(tmp_path):
    src = tmp_path / "memory.jsonl"
    src.write_text(
        '{"type":"entity","name":"A","entityType":"t","observations":["ü \\"q\\"","\\u0007"]}\n'
        '{"type":"entity","name":"B","entityType":"t","observations":[]}\n'
        '{"type":"relation","from":"A","to":"B","relationType":"r"}',
        encoding="utf-8",
    )
    db = tmp_path / "m.sqlite"
    proc = _kgr("import", "--format", "mcp-memory", str(src), "--db", str(db))
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert "imported 2 entities, 2 observations and 1 relations" in proc.stderr
    out = _kgr("export", "--format", "mcp-memory", "--db", str(db))
    assert out.returncode == 0 and out.stdout.encode() == src.read_bytes()
    again = _kgr("import", "--format", "mcp-memory", str(src), "--db", str(db))
    assert again.returncode == 0 and "2 entities and 1 relations already present" in again.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"type":"entity","name":"C","entityType":"t","observations":[]}\n'
        '{"type":"relation","from":"C","to":"Ghost","relationType":"r"}\n'
    )
    proc = _kgr("import", "--format", "mcp-memory", str(bad), "--db", str(db))
    assert (
        proc.returncode == 1 and "line 2" in proc.stderr and "Ghost" in proc.stderr and "Traceback" not in proc.stderr
    )
    out2 = _kgr("export", "--format", "mcp-memory", "--db", str(db))
    assert out2.stdout == out.stdout  # nothing of the bad file was kept
    refused = _kgr("export", "--format", "mcp-memory", "--db", str(db), "--type", "t")
    assert refused.returncode != 0 and "do not apply" in refused.stderr


def test_import_needs_a_format(tmp_path):
    src = tmp_path / "x.jsonl"
    src.write_text("")
    proc = _kgr("import", str(src), "--db", str(tmp_path / "m.sqlite"))
    assert proc.returncode == 2 and "Missing option '--format'" in proc.stderr
