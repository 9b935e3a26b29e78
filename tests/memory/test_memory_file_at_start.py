"""The memory file named by KNOWLEDGE_BASE_FILE_PATH (seed 001) or MEMORY_FILE_PATH (the reference
server) is imported when a memory server starts on a database without memory entities."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from memory_fixtures import kgr_params, norm_graph, reference_params, run_sessions

from kgr.errors import KgrError


def _lines(*records: str) -> str:
    return "\n".join(records)


ALICE = '{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}'
BOB = '{"type":"entity","name":"Bob","entityType":"person","observations":[]}'
KNOWS = '{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}'
DANGLING = '{"type":"relation","from":"Alice","to":"Nowhere","relationType":"visits"}'


# -- the library, in process ------------------------------------------------------------------------


def test_which_variable_wins():
    from kgr.memory import memfile

    assert memfile.from_environment({}) is None
    assert memfile.from_environment({"MEMORY_FILE_PATH": " "}) is None
    one = memfile.from_environment({"MEMORY_FILE_PATH": "m.jsonl"})
    assert (one.variable, one.path, one.ignored) == ("MEMORY_FILE_PATH", Path("m.jsonl"), [])
    both = memfile.from_environment({"MEMORY_FILE_PATH": "m.jsonl", "KNOWLEDGE_BASE_FILE_PATH": "k.jsonl"})
    assert (both.variable, both.path) == ("KNOWLEDGE_BASE_FILE_PATH", Path("k.jsonl"))
    assert both.ignored == [("MEMORY_FILE_PATH", "m.jsonl")]


def test_import_at_start_imports_once_and_leaves_out_dangling_relations(memory_service, tmp_path):
    from kgr.mcp.tools import memory as tools
    from kgr.memory import graph as memory

    path = tmp_path / "kb.jsonl"
    path.write_text(_lines(ALICE, BOB, KNOWS, DANGLING))
    said: list[str] = []
    env = {"KNOWLEDGE_BASE_FILE_PATH": str(path), "MEMORY_FILE_PATH": str(tmp_path / "other.jsonl")}
    out = tools.import_memory_file(memory_service, env, said.append)
    assert out.imported["entities"] == 2 and out.imported["relations"] == 1
    assert [r["to"] for r in out.left_out] == ["Nowhere"]
    assert any("KNOWLEDGE_BASE_FILE_PATH wins" in s and "MEMORY_FILE_PATH" in s for s in said), said
    assert any("imported 2 entities, 1 observations and 1 relations" in s for s in said), said
    assert any("Alice -visits-> Nowhere" in s for s in said), said
    graph = memory_service.read(memory.read_graph)
    assert norm_graph(graph) == {
        "entities": [("Alice", "person", ("likes tea",)), ("Bob", "person", ())],
        "relations": [("Alice", "Bob", "knows")],
    }

    # a second start: the database holds memory entities, so the (changed) file is not read
    path.write_text(_lines(ALICE, BOB, '{"type":"entity","name":"Carol","entityType":"person","observations":[]}'))
    said.clear()
    again = tools.import_memory_file(memory_service, env, said.append)
    assert again.imported is None and again.existing == 2
    assert any("not imported" in s and "2 memory entities" in s for s in said), said
    assert len(memory_service.read(memory.read_graph)["entities"]) == 2


def test_a_bad_file_changes_nothing_and_says_where(memory_service, tmp_path):
    from kgr.mcp.tools import memory as tools
    from kgr.memory import graph as memory

    bad = tmp_path / "bad.jsonl"
    bad.write_text(_lines(ALICE, "{not json"))
    with pytest.raises(KgrError) as err:
        tools.import_memory_file(memory_service, {"MEMORY_FILE_PATH": str(bad)}, lambda s: None)
    assert "MEMORY_FILE_PATH=" in err.value.message and "line 2" in err.value.message
    with pytest.raises(KgrError, match="cannot be read"):
        tools.import_memory_file(memory_service, {"MEMORY_FILE_PATH": str(tmp_path)}, lambda s: None)
    assert memory_service.read(memory.read_graph)["entities"] == []
    said: list[str] = []
    out = tools.import_memory_file(memory_service, {"MEMORY_FILE_PATH": str(tmp_path / "none.jsonl")}, said.append)
    assert out.missing and "does not exist yet" in said[0]


# -- kgr serve --------------------------------------------------------------------------------------


def test_the_reference_servers_own_file_and_variable(tmp_path):
    """The reference writes its file; kgr serve, given the same MEMORY_FILE_PATH, serves the same graph."""
    from mcp import StdioServerParameters

    ref_file = tmp_path / "memory.jsonl"

    async def fill(c):
        await c.call_tool(
            "create_entities",
            {
                "entities": [
                    {"name": "Alice", "entityType": "person", "observations": ["likes tea", "lives in Oslo"]},
                    {"name": "Acme", "entityType": "org", "observations": []},
                ]
            },
        )
        await c.call_tool(
            "create_relations", {"relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}
        )
        return (await c.call_tool("read_graph", {})).structured_content

    async def read(c):
        return (await c.call_tool("read_graph", {})).structured_content

    db = tmp_path / "memory.sqlite"
    ours = kgr_params(db)
    ours = StdioServerParameters(
        command=ours.command, args=ours.args, env={**ours.env, "MEMORY_FILE_PATH": str(ref_file)}
    )
    reference_graph, our_graph = run_sessions((reference_params(ref_file), fill), (ours, read))
    assert norm_graph(our_graph) == norm_graph(reference_graph)
    assert len(our_graph["entities"]) == 2 and len(our_graph["relations"]) == 1


def test_a_corrupt_file_stops_the_server_before_it_writes(tmp_path):
    bad = tmp_path / "knowledge_base.jsonl"
    bad.write_text(_lines(ALICE, '{"type":"relation","from":"Alice"}'))
    db = tmp_path / "memory.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "serve", "--profile", "memory", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "KNOWLEDGE_BASE_FILE_PATH": str(bad), "KGR_REDACT_KEY": "test-key"},
    )
    assert proc.returncode != 0
    assert "KNOWLEDGE_BASE_FILE_PATH=" in proc.stderr and "line 2" in proc.stderr, proc.stderr
    assert "on stdio" not in proc.stderr  # it never served
    from kgr.memory import memfile
    from kgr.store.lock import reading

    store = reading(db)
    try:
        assert memfile.count_entities(store) == 0  # the good first line was not imported either
    finally:
        store.close()
