"""The reference MCP memory server (npm @modelcontextprotocol/server-memory, run by node) and
`kgr serve --profile memory` answer the same sequence of tool calls through the MCP SDK
client over stdio; their results are compared, normalised for order. Then the reference's
own memory.jsonl imports into kgr and serves the same graph, and exports back byte for byte."""

from __future__ import annotations

import subprocess
import sys

from memory_fixtures import kgr_params, norm_graph, reference_params, run_sessions

# (tool, arguments, how to compare): "graph" results normalised for order, "list" results as
# sorted JSON, "error" both fail, "ok" both succeed.
SEQUENCE = [
    (
        "create_entities",
        {
            "entities": [
                {"name": "Alice", "entityType": "person", "observations": ["Likes tea", "Works at Acme"]},
                {"name": "Acme", "entityType": "organization", "observations": ["Makes rockets"]},
                {"name": "Bob", "entityType": "person", "observations": []},
                {
                    "name": "Zoë Ñúñez",
                    "entityType": "Person",
                    "observations": ["Studied at the ÉCOLE normale", "Ⅻ clocks"],
                },
            ]
        },
        "list",
    ),
    (
        "create_entities",
        {
            "entities": [
                {"name": "Alice", "entityType": "robot", "observations": ["ignored: Alice exists"]},
                {"name": "Carol", "entityType": "person", "observations": ["Knows Kubernetes"]},
            ]
        },
        "list",
    ),
    (
        "create_relations",
        {
            "relations": [
                {"from": "Alice", "to": "Acme", "relationType": "works_at"},
                {"from": "Bob", "to": "Acme", "relationType": "works_at"},
                {"from": "Alice", "to": "Bob", "relationType": "knows"},
                {"from": "Carol", "to": "Zoë Ñúñez", "relationType": "mentors"},
            ]
        },
        "list",
    ),
    (
        "create_relations",
        {
            "relations": [
                {"from": "Alice", "to": "Acme", "relationType": "works_at"},
                {"from": "Acme", "to": "Carol", "relationType": "employs"},
            ]
        },
        "list",
    ),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Alice", "contents": ["Speaks French", "Likes tea"]},
                {"entityName": "Bob", "contents": ["Plays chess"]},
            ]
        },
        "list",
    ),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Bob", "contents": ["never stored: the next entity is missing"]},
                {"entityName": "Nobody", "contents": ["x"]},
            ]
        },
        "error",
    ),
    ("search_nodes", {"query": "acme"}, "graph"),
    ("search_nodes", {"query": "PERSON"}, "graph"),
    ("search_nodes", {"query": "école"}, "graph"),
    ("search_nodes", {"query": "ⅻ"}, "graph"),
    ("search_nodes", {"query": "nothing matches this"}, "graph"),
    ("open_nodes", {"names": ["Alice", "Nobody", "Carol"]}, "graph"),
    (
        "delete_observations",
        {
            "deletions": [
                {"entityName": "Alice", "observations": ["Likes tea", "not there"]},
                {"entityName": "Nobody", "observations": ["x"]},
            ]
        },
        "ok",
    ),
    (
        "delete_relations",
        {
            "relations": [
                {"from": "Alice", "to": "Bob", "relationType": "knows"},
                {"from": "Alice", "to": "Bob", "relationType": "never_created"},
            ]
        },
        "ok",
    ),
    ("read_graph", {}, "graph"),
    ("delete_entities", {"entityNames": ["Bob", "Nobody"]}, "ok"),
    ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["Likes tea"]}]}, "list"),
    (
        "create_entities",
        {"entities": [{"name": "Bob", "entityType": "person", "observations": ["back again"]}]},
        "list",
    ),
    ("search_nodes", {"query": "a"}, "graph"),
    ("read_graph", {}, "graph"),
]


def _sorted_json(value):
    import json

    if isinstance(value, list):
        return sorted(json.dumps(v, sort_keys=True, ensure_ascii=False) for v in value)
    return value


def _compare(kind, ref, ours, step):
    assert ref.is_error == ours.is_error == (kind == "error"), (step, ref, ours)
    if kind == "error":
        return
    r, o = ref.structured_content, ours.structured_content
    if kind == "graph":
        assert norm_graph(o) == norm_graph(r), step
        assert o.get("nextCursor") is None, step  # one page holds these small graphs
    elif kind == "list":
        (key,) = r.keys()
        assert _sorted_json(o[key]) == _sorted_json(r[key]), step
    else:
        assert r["success"] is True and o["success"] is True and o["message"] == r["message"], step


def _play(client):
    async def go():
        names = {t.name for t in (await client.list_tools()).tools}
        results = [await client.call_tool(name, args) for name, args, _ in SEQUENCE]
        return names, results

    return go()


def test_the_same_calls_give_the_same_results(tmp_path):
    ref_file = tmp_path / "memory.jsonl"
    db = tmp_path / "memory.sqlite"  # does not exist yet: kgr serve --profile memory creates it
    (ref_names, ref_results), (our_names, our_results) = run_sessions(
        (reference_params(ref_file), _play), (kgr_params(db), _play)
    )
    nine = {
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
        "read_graph",
        "search_nodes",
        "open_nodes",
    }
    assert nine <= ref_names and nine <= our_names
    for step, ((name, _, kind), ref, ours) in enumerate(zip(SEQUENCE, ref_results, our_results)):
        _compare(kind, ref, ours, f"step {step}: {name}")
    final = norm_graph(our_results[-1].structured_content)
    assert ("Alice", "Bob", "knows") not in final["relations"] and len(final["entities"]) == 5  # the calls did act

    # kgr's database, after the same calls, exports the very file the reference wrote
    out = tmp_path / "kgr.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "export", "--format", "mcp-memory", "--db", str(db), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == ref_file.read_bytes()


def test_a_reference_memory_file_imports_and_serves_identically(tmp_path):
    ref_file = tmp_path / "memory.jsonl"
    (ref_results,) = run_sessions((reference_params(ref_file), _play))
    reference_graph = ref_results[1][-1].structured_content
    db = tmp_path / "imported.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "import", "--format", "mcp-memory", str(ref_file), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert "imported 5 entities" in proc.stderr

    async def read(client):
        return (await client.call_tool("read_graph", {})).structured_content, (
            await client.call_tool("search_nodes", {"query": "TEA"})
        ).structured_content

    async def read_ref(client):
        return await read(client)

    (ours, ours_search), (ref, ref_search) = run_sessions(
        (kgr_params(db), read), (reference_params(ref_file), read_ref)
    )
    assert norm_graph(ours) == norm_graph(ref) == norm_graph(reference_graph)
    assert norm_graph(ours_search) == norm_graph(ref_search) and ours_search["entities"]
    # and back out, byte for byte (the reference's own order)
    back = subprocess.run(
        [sys.executable, "-m", "kgr", "export", "--format", "mcp-memory", "--db", str(db)],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert back.returncode == 0 and back.stdout == ref_file.read_bytes()
