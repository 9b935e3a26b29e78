"""The README's MCP client section stays true: its JSON configurations start a working server,
and its profile table lists the tools each profile registers."""

from __future__ import annotations

import json
import re
import shutil
import sys

import anyio

from kgr.mcp import server as serve


def section(repo) -> str:
    return (repo / "README.md").read_text().split("## Use from an MCP client", 1)[1].split("\n## ", 1)[0]


def configs(repo) -> list[dict]:
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section(repo), re.S)]


def test_client_configs_start_the_server(repo, built_kb):
    from mcp import Client, StdioServerParameters

    claude, vscode = configs(repo)
    assert vscode["servers"]["kgr"]["type"] == "stdio"
    for entry in (claude["mcpServers"]["kgr"], vscode["servers"]["kgr"]):
        assert entry["command"] == "kgr" and entry["args"][:2] == ["serve", "--db"]
        args = [str(built_kb[0]) if a == "/abs/path/kb.sqlite" else a for a in entry["args"]]
        command = shutil.which("kgr")
        params = (
            StdioServerParameters(command=command, args=args)
            if command
            else StdioServerParameters(command=sys.executable, args=["-m", "kgr", *args])
        )

        async def main():
            async with Client(params) as client:
                return await client.list_tools()

        names = {t.name for t in anyio.run(main).tools}
        profile = args[args.index("--profile") + 1] if "--profile" in args else "graphrag"
        assert names == set(serve.profile_tools(profile))


def test_profile_table_matches_the_registry(repo):
    rows = dict(re.findall(r"^\| `(\w+)`[^|]*\| (.*) \|$", section(repo), re.M))
    for profile in ("graphrag", "kb", "memory", "authoring"):
        listed = set(re.findall(r"`(\w+)`", rows[profile]))
        assert listed == set(serve.profile_tools(profile)), profile
