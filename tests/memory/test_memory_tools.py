"""The memory profile through the SDK's in-memory client: schemas, annotations, pages, errors."""

from __future__ import annotations

from memory_fixtures import in_memory

NINE = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]


def test_the_nine_tools_with_the_reference_arguments(memory_server):
    tools = {t.name: t for t in in_memory(memory_server, lambda c: c.list_tools()).tools}
    assert set(NINE) <= set(tools)
    props = {name: set(tools[name].input_schema["properties"]) for name in NINE}
    assert props["create_entities"] == {"entities"}
    assert props["create_relations"] == {"relations"}
    assert props["add_observations"] == {"observations"}
    assert props["delete_entities"] == {"entityNames"}
    assert props["delete_observations"] == {"deletions", "hard"}
    assert props["delete_relations"] == {"relations"}
    assert props["read_graph"] == {"limit", "cursor", "names_only"}
    assert props["search_nodes"] == {"query", "limit", "cursor", "names_only"}
    assert props["open_nodes"] == {"names"}
    rel = tools["create_relations"].input_schema["$defs"]["Relation"]
    assert set(rel["required"]) == {"from", "to", "relationType"}
    for name in NINE:
        hint = tools[name].annotations
        assert hint.read_only_hint == (name in ("read_graph", "search_nodes", "open_nodes")), name
        if name.startswith("delete"):
            assert hint.destructive_hint is True, name


def test_a_session(memory_server):
    async def go(c):
        out = {}
        out["created"] = await c.call_tool(
            "create_entities",
            {"entities": [{"name": f"n{i}", "entityType": "note", "observations": [f"text {i}"]} for i in range(30)]},
        )
        out["rel"] = await c.call_tool(
            "create_relations", {"relations": [{"from": "n0", "to": "n1", "relationType": "next"}]}
        )
        out["bad_rel"] = await c.call_tool(
            "create_relations", {"relations": [{"from": "n0", "to": "ghost", "relationType": "x"}]}
        )
        out["bad_obs"] = await c.call_tool(
            "add_observations", {"observations": [{"entityName": "ghost", "contents": ["x"]}]}
        )
        out["bad_arg"] = await c.call_tool("create_entities", {"entities": [{"name": "x"}]})
        out["page1"] = await c.call_tool("read_graph", {"limit": 20})
        out["page2"] = await c.call_tool(
            "read_graph", {"limit": 20, "cursor": out["page1"].structured_content["nextCursor"]}
        )
        out["names"] = await c.call_tool("search_nodes", {"query": "TEXT 2", "names_only": True})
        out["soft"] = await c.call_tool(
            "delete_observations", {"deletions": [{"entityName": "n2", "observations": ["text 2"]}]}
        )
        out["after"] = await c.call_tool("search_nodes", {"query": "text 2"})
        out["open"] = await c.call_tool("open_nodes", {"names": ["n1"]})
        return out

    out = in_memory(memory_server, go)
    assert len(out["created"].structured_content["entities"]) == 30
    assert out["bad_rel"].is_error and "Entity with name ghost not found" in out["bad_rel"].content[0].text
    assert out["bad_obs"].is_error and "Entity with name ghost not found" in out["bad_obs"].content[0].text
    assert out["bad_arg"].is_error
    p1, p2 = out["page1"].structured_content, out["page2"].structured_content
    assert [e["name"] for e in p1["entities"]] == [f"n{i}" for i in range(20)] and p1["nextCursor"]
    assert [e["name"] for e in p2["entities"]] == [f"n{i}" for i in range(20, 30)] and p2["nextCursor"] is None
    assert p1["relations"] == [{"from": "n0", "to": "n1", "relationType": "next"}] and p2["relations"] == []
    assert out["names"].structured_content["names"] == [
        "n2",
        "n20",
        "n21",
        "n22",
        "n23",
        "n24",
        "n25",
        "n26",
        "n27",
        "n28",
        "n29",
    ]
    assert out["soft"].structured_content["deleted"] == 1
    assert "n2" not in [e["name"] for e in out["after"].structured_content["entities"]]
    assert out["open"].structured_content["relations"] == [{"from": "n0", "to": "n1", "relationType": "next"}]


def test_a_page_too_large_for_the_byte_budget_is_shortened_not_cut(memory_service, memory_server):
    memory_service.max_result_bytes = 20_000
    big = "x" * 1000

    async def go(c):
        await c.call_tool(
            "create_entities",
            {"entities": [{"name": f"n{i:02}", "entityType": "note", "observations": [big]} for i in range(60)]},
        )
        names, cursor = [], None
        while True:
            args = {"limit": 50} | ({"cursor": cursor} if cursor else {})
            page = (await c.call_tool("read_graph", args)).structured_content
            assert page["truncated"] is False and len(page["entities"]) < 50
            assert all(e["observations"] == [big] for e in page["entities"])
            names += [e["name"] for e in page["entities"]]
            cursor = page["nextCursor"]
            if cursor is None:
                return names

    assert in_memory(memory_server, go) == [f"n{i:02}" for i in range(60)]


def test_read_answers_carry_their_compact_json_as_text_and_no_host_path(memory_service, memory_server):
    """The read tools' text is the JSON of their structured content (compact, as kgr writes it),
    and host paths in what they return are scrubbed, as in every tool."""
    import json

    host = str(memory_service.db)

    async def go(c):
        await c.call_tool(
            "create_entities",
            {"entities": [{"name": "A", "entityType": "t", "observations": [f"kept at {host}", 'plain ü "q"']}]},
        )
        return [
            await c.call_tool("read_graph", {}),
            await c.call_tool("search_nodes", {"query": "plain"}),
            await c.call_tool("open_nodes", {"names": ["A"]}),
        ]

    for result in in_memory(memory_server, go):
        sc = result.structured_content
        assert json.loads(result.content[0].text) == sc
        assert result.content[0].text == json.dumps(sc, ensure_ascii=False, separators=(",", ":"))
        (entity,) = sc["entities"]
        assert entity["observations"][1] == 'plain ü "q"'
        assert host not in result.content[0].text and str(memory_service.db.parent) not in entity["observations"][0]


def test_writes_go_through_the_servers_writer_when_it_has_one(tmp_path):
    """A server started with a knowledge root owns the database's writer: memory writes are its jobs."""
    from kgr import config
    from kgr.mcp import server as serve
    from kgr.store import Store

    root = tmp_path / "notes"
    root.mkdir()
    db = tmp_path / "kb.sqlite"
    Store(db).close()
    svc = serve.Service(db, config.load(None), root=root)
    try:
        writer = svc.get_writer()
        before = writer.jobs_done
        server = serve.build_server(svc, "memory")

        async def go(c):
            made = await c.call_tool(
                "create_entities", {"entities": [{"name": "W", "entityType": "t", "observations": ["o"]}]}
            )
            added = await c.call_tool("add_observations", {"observations": [{"entityName": "W", "contents": ["p"]}]})
            graph = await c.call_tool("open_nodes", {"names": ["W"]})
            return made, added, graph

        made, added, graph = in_memory(server, go)
        assert not made.is_error and not added.is_error
        assert writer.jobs_done == before + 2
        assert graph.structured_content["entities"] == [{"name": "W", "entityType": "t", "observations": ["o", "p"]}]
    finally:
        svc.close()
