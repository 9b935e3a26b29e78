"""End to end over streamable HTTP: a real `kgr serve --http` subprocess and the SDK client."""

from __future__ import annotations

import anyio
from serve_fixtures import spawn_http, stop

TOKEN = "t0k3n-for-the-http-test-0123456789"


def client_session(url, fn, token=None):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await fn(client)

    return anyio.run(main)


def test_http_with_a_token_serves_the_sdk_client(built_kb):
    db, _ = built_kb
    proc, url, _ = spawn_http(db, "--token-env", "KGR_TEST_TOKEN", "--profile", "all", env={"KGR_TEST_TOKEN": TOKEN})
    try:
        assert url.startswith("http://127.0.0.1:")

        async def session(client):
            tools = {t.name for t in (await client.list_tools()).tools}
            q = await client.call_tool("hybrid_query", {"query": "Who leads Fleet Operations?", "k": 3})
            c = await client.call_tool("get_concept", {"concept": "Fleet Operations"})
            return tools, q, c

        tools, q, c = client_session(url, session, token=TOKEN)
        from kgr.mcp import server as serve

        assert tools == set(serve.profile_tools("all"))  # every registered tool, over HTTP too
        assert q.structured_content["results"][0]["path"] == "teams/fleet-operations.md"
        assert c.structured_content["name"] == "Fleet Operations"
    finally:
        log = stop(proc)
    assert TOKEN not in log


def test_http_without_a_token_on_loopback(built_kb):
    db, _ = built_kb
    proc, url, _ = spawn_http(db, "--profile", "kb")
    try:
        tools = client_session(url, lambda c: c.list_tools())
        assert sorted(t.name for t in tools.tools)[0] == "get_concept"
    finally:
        stop(proc)
