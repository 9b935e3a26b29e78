"""End to end: `kgr serve --profile authoring` as a subprocess, spoken to over stdio by the SDK client."""

from __future__ import annotations

import sys

import anyio


def test_authoring_over_stdio(graph):
    from mcp import Client, StdioServerParameters

    db, ids = graph
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgr", "serve", "--profile", "authoring", "--db", str(db)],
        env={"KGR_REDACT_KEY": "test-key"},
    )

    async def session(client):
        names = {t.name for t in (await client.list_tools()).tools}
        made = await client.call_tool(
            "manage_templates",
            {
                "operation": "create",
                "templates": [
                    {
                        "name": "brief",
                        "structure": "{{name}}: {{#near}}{{n}} {{/near}}",
                        "variables": {
                            "near": "SELECT e.id, e.name AS n FROM relations r JOIN entities e ON e.id = r.src_id "
                            "WHERE r.dst_id = :id ORDER BY e.name"
                        },
                    }
                ],
            },
        )
        first = await client.call_tool(
            "generate_documents", {"node_identifiers": ["Charlie Parker"], "template_override": "brief"}
        )
        second = await client.call_tool(
            "generate_documents", {"node_identifiers": ["Charlie Parker"], "template_override": "brief"}
        )
        paths = await client.call_tool(
            "find_relationship_paths",
            {"node_pairs": [{"source_node_id": str(ids["Miles Davis"]), "target_node_id": str(ids["Kansas City"])}]},
        )
        return names, made, first, second, paths

    async def main():
        async with Client(params) as client:
            return await session(client)

    names, made, first, second, paths = anyio.run(main)
    assert "generate_documents" in names and "hybrid_query" not in names
    assert made.structured_content["results"][0]["status"] == "success"
    a, b = first.structured_content["documents"][0], second.structured_content["documents"][0]
    assert a["content"] == "Charlie Parker: Dizzy Gillespie Miles Davis " == b["content"]
    assert (a["from_cache"], b["from_cache"]) == (False, True)
    p = paths.structured_content["path_results"][0]["paths"][0]
    assert p["strength"] == 0.4 and p["length"] == 2
