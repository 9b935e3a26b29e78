"""visualize_graph: the graph page of `kgr viz`, started by a memory server on 127.0.0.1 in its own
process, reused by a second call, and gone with the server."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest
from memory_fixtures import in_memory, kgr_params, run_sessions


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read()


def test_a_real_server_serves_its_own_database_and_the_page_ends_with_it(tmp_path):
    db = tmp_path / "memory.sqlite"
    seen: dict = {}

    async def go(c):
        await c.call_tool(
            "create_entities",
            {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]},
        )
        first = (await c.call_tool("visualize_graph", {})).structured_content
        second = (await c.call_tool("visualize_graph", {})).structured_content
        seen["first"], seen["second"] = first, second
        status, page = _get(first["url"])
        seen["page"] = (status, page)
        seen["graph"] = json.loads(_get(first["graph_api"])[1])
        # a write after the page started: the next poll shows it
        await c.call_tool(
            "create_entities", {"entities": [{"name": "Engine", "entityType": "machine", "observations": []}]}
        )
        await c.call_tool(
            "create_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programs"}]}
        )
        seen["after"] = json.loads(_get(first["graph_api"])[1])
        ada = next(n for n in seen["after"]["nodes"] if n["name"] == "Ada")
        seen["details"] = json.loads(_get(f"{first['url']}api/entity/{ada['id']}")[1])

    run_sessions((kgr_params(db), go))
    first, second = seen["first"], seen["second"]
    assert first["url"].startswith("http://127.0.0.1:") and first["url"].endswith("/")
    assert first["started"] is True and second["started"] is False
    assert second["url"] == first["url"] and first["graph_api"] == first["url"] + "api/graph"
    assert first["opened"] is False and first["entities"] == 1
    status, page = seen["page"]
    assert status == 200 and b"<title>kgr viz</title>" in page and b'id="pause"' in page
    assert [(n["name"], n["type"]) for n in seen["graph"]["nodes"]] == [("Ada", "person")]
    assert seen["graph"]["types"]["person"].startswith("#")
    after = seen["after"]
    assert sorted(n["name"] for n in after["nodes"]) == ["Ada", "Engine"]
    assert [e["rel"] for e in after["edges"]] == ["programs"]
    assert [o["content"] for o in seen["details"]["observations"]] == ["wrote the first program"]

    # the server has exited: so has its page
    port = int(first["url"].rsplit(":", 1)[1].strip("/"))
    deadline = time.monotonic() + 10
    while True:
        try:
            _get(first["url"])
        except (urllib.error.URLError, ConnectionError):
            break
        assert time.monotonic() < deadline, "the page outlived its server"
        time.sleep(0.2)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_the_page_listens_on_loopback_only_and_stops_with_the_service(memory_service, memory_server):
    async def go(c):
        return (await c.call_tool("visualize_graph", {})).structured_content

    out = in_memory(memory_server, go)
    port = int(out["url"].rsplit(":", 1)[1].strip("/"))
    tools = next(iter(memory_service.closers)).__self__
    assert tools._page.server_address[0] == "127.0.0.1"
    assert _get(out["url"])[0] == 200
    memory_service.close()  # what kgr serve does when the client goes
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert tools._page is None


def test_a_port_in_use_is_a_clear_error_and_a_free_port_works(memory_server):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]

        async def go(c):
            refused = await c.call_tool("visualize_graph", {"port": taken})
            fine = await c.call_tool("visualize_graph", {})
            return refused, fine.structured_content

        refused, fine = in_memory(memory_server, go)
    assert refused.is_error
    message = refused.content[0].text
    assert f"port {taken}" in message and "in use" in message and "without a port" in message
    assert fine["started"] is True and not fine["url"].endswith(f":{taken}/")


@pytest.mark.parametrize("display", [None, ":0"])
def test_open_browser_never_hands_the_protocol_stream_to_a_browser(monkeypatch, display):
    import subprocess

    from kgr import viz

    calls = []

    class Fake:
        def __init__(self, args, **kwargs):
            calls.append((args, kwargs))

    monkeypatch.setattr(subprocess, "Popen", Fake)
    monkeypatch.setattr(viz.sys, "platform", "linux")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if display is None:
        monkeypatch.delenv("DISPLAY", raising=False)
    else:
        monkeypatch.setenv("DISPLAY", display)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    opened = viz.open_in_browser("http://127.0.0.1:1234/")
    if display is None:
        assert opened is False and calls == []
    else:
        assert opened is True
        ((args, kwargs),) = calls
        assert args == ["/usr/bin/xdg-open", "http://127.0.0.1:1234/"]
        assert kwargs["stdout"] == subprocess.DEVNULL and kwargs["stdin"] == subprocess.DEVNULL
