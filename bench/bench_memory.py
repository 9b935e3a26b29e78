"""The memory profile against the reference MCP memory server, side by side, in one run.

    python bench/bench_memory.py [--entities 10000] [--observations 100000] [--relations 10000] [--runs 7]

One synthetic memory graph (fixed seed): --entities entities of eight types, --observations
observations spread over them, --relations distinct relations between random entities. It is
written as the reference's memory.jsonl, and the same file is imported into a kgr database
with `kgr import --format mcp-memory`. Both servers then run at once as real stdio
subprocesses (`node .../server-memory/dist/index.js` with MEMORY_FILE_PATH, `kgr serve
--profile memory --db`), each driven by the MCP Python SDK client, and every call is timed at
the client (request, server work, JSON on the wire, the client's parsing): each call runs once
untimed on each server, then --runs times interleaved (each server first in turn), so all see
the same load of a busy machine; the table shows the medians in milliseconds and the speed-up.
Two floors under kgr's time: "floor", a third server (the same MCP SDK, stdio) that replays
kgr's recorded pages, byte for byte, with no work but a look-up (what moving those bytes
through MCP costs, client included), and "kgr in process", the same answer computed in this
process by kgr.memory.graph (no MCP, no JSON on a wire).

* search_nodes (rare): a word in about 0.02% of observations; both return every match.
* search_nodes (type): an entity type, one entity in eight: the reference returns all of
  them, kgr its first page (limit 100, with nextCursor).
* open_nodes: five entities by name.
* read_graph (first page): kgr's first page (100 entities); the reference has no pages and
  returns the whole graph.
* ... all: like for like, kgr fetches every page (limit 1000) of the same answer the
  reference gives in one call, and the two are checked equal.

Where both return everything (rare search, open_nodes), the results are checked equal,
normalised for order. The reference comes from `.ci/node` (see .ci/run).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
TYPES = ["person", "organization", "project", "service", "place", "event", "document", "concept"]
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basalt cobalt dune ember "
    "fjord granite harbor island jasper kelp lagoon meadow nectar orchard pebble quartz river summit "
    "thistle umber valley willow yarrow zephyr"
).split()
RARE = "quasarflux"


def build(entities: int, observations: int, relations: int, seed: int = 7) -> tuple[list[str], list[str]]:
    import json

    rng = random.Random(seed)
    names = [f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {i:05}" for i in range(entities)]
    per = [observations // entities + (1 if i < observations % entities else 0) for i in range(entities)]
    lines = []
    for i, name in enumerate(names):
        obs = []
        for j in range(per[i]):
            words = rng.choices(WORDS, k=rng.randint(6, 14))
            if rng.random() < 0.0002:
                words[rng.randrange(len(words))] = RARE
            obs.append(f"{' '.join(words).capitalize()} ({i}.{j}).")
        lines.append(
            json.dumps(
                {"type": "entity", "name": name, "entityType": TYPES[i % len(TYPES)], "observations": obs},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        )
    # the reference skips nothing on load: no duplicate relations in its file
    seen: set[tuple[int, int, str]] = set()
    while len(seen) < min(relations, entities * (entities - 1)):
        i, j = rng.randrange(entities), rng.randrange(entities)
        rel = (i, j, rng.choice(["knows", "uses", "part_of", "owned_by"]))
        if i != j and rel not in seen:
            seen.add(rel)
            lines.append(
                json.dumps(
                    {"type": "relation", "from": names[i], "to": names[j], "relationType": rel[2]},
                    separators=(",", ":"),
                )
            )
    return lines, names


def norm(result: dict) -> tuple:
    return (
        sorted((e["name"], e["entityType"], tuple(e["observations"])) for e in result.get("entities", [])),
        sorted((r["from"], r["to"], r["relationType"]) for r in result.get("relations", [])),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--observations", type=int, default=100_000)
    ap.add_argument("--relations", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    node = shutil.which("node")
    if node is None or not REFERENCE.is_file():
        sys.exit(
            f"needs node and the reference server at {REFERENCE}: "
            "npm install --prefix .ci/node @modelcontextprotocol/server-memory@2026.8.31"
        )
    from mcp import Client, StdioServerParameters

    from kgr.mcp.service import MAX_RESULT_BYTES
    from kgr.memory import graph as memory
    from kgr.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="kgr-bench-memory-"))
    try:
        t0 = time.perf_counter()
        lines, names = build(args.entities, args.observations, args.relations)
        ref_file = tmp / "memory.jsonl"
        ref_file.write_text("\n".join(lines), encoding="utf-8")
        db = tmp / "memory.sqlite"
        with Store(db) as store:
            counts = memory.import_jsonl(store, lines)
        print(
            f"graph: {counts['entities']} entities, {counts['observations']} observations, "
            f"{counts['relations']} relations; memory.jsonl {ref_file.stat().st_size / 1e6:.1f} MB; "
            f"built and imported in {time.perf_counter() - t0:.1f} s",
            file=sys.stderr,
        )

        rng = random.Random(11)
        opened = rng.sample(names, 5)
        calls = [
            ("search_nodes (rare word)", "search_nodes", {"query": RARE}, True),
            ("search_nodes (a type)", "search_nodes", {"query": TYPES[3]}, False),
            ("open_nodes (5 names)", "open_nodes", {"names": opened}, True),
            ("read_graph (first page)", "read_graph", {}, False),
            # like for like: kgr pages through the whole answer (limit 1000), the reference answers once
            ("search_nodes (a type), all", "search_nodes", {"query": TYPES[3], "limit": 1000}, True),
            ("read_graph (all)", "read_graph", {"limit": 1000}, True),
        ]
        servers = {
            "reference": StdioServerParameters(
                command=node, args=[str(REFERENCE)], env={"MEMORY_FILE_PATH": str(ref_file)}
            ),
            "kgr": StdioServerParameters(
                command=sys.executable,
                args=["-m", "kgr", "serve", "--profile", "memory", "--db", str(db)],
                env={"KGR_REDACT_KEY": "bench"},
            ),
            "floor": StdioServerParameters(
                command=sys.executable, args=[str(Path(__file__).resolve()), "--replay", str(tmp / "pages.json")]
            ),
        }

        def merge(sc: dict, more: dict, seen: set) -> None:
            """Add page ``more`` to ``sc``; search_nodes repeats a relation whose two ends fall on
            different pages (``seen``: the relations already in ``sc``, as tuples)."""
            sc["entities"] += more["entities"]
            for r in more["relations"]:
                t = (r["from"], r["to"], r["relationType"])
                if t not in seen:
                    seen.add(t)
                    sc["relations"].append(r)
            sc["nextCursor"] = more["nextCursor"]

        pages: dict[str, dict] = {}  # kgr's answers, page by page, for the floor server

        async def call(client, name, arguments, paged, record=False):
            """One answer; with ``paged`` (kgr), every page of it, merged."""
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise SystemExit(f"{name} {arguments}: {result.content}")
            sc = dict(result.structured_content)
            if record:
                pages[page_key(name, arguments)] = orjson.loads(orjson.dumps(sc))
            seen = {(r["from"], r["to"], r["relationType"]) for r in sc.get("relations", [])}
            while paged and sc.get("nextCursor"):
                more_args = {**arguments, "cursor": sc["nextCursor"]}
                more = (await client.call_tool(name, more_args)).structured_content
                if record:
                    pages[page_key(name, more_args)] = dict(more)
                merge(sc, more, seen)
            return sc

        def in_process(store, name, arguments, paged):
            """The same answer from kgr.memory.graph in this process (the tools' byte budget)."""
            fn = getattr(memory, name)
            if name == "open_nodes":
                return fn(store, arguments["names"])
            args_ = [arguments["query"]] if name == "search_nodes" else []
            kw = {"limit": arguments.get("limit"), "max_bytes": MAX_RESULT_BYTES - 1000}
            sc = fn(store, *args_, **kw)
            seen = {(r["from"], r["to"], r["relationType"]) for r in sc["relations"]}
            while paged and sc["nextCursor"]:
                merge(sc, fn(store, *args_, cursor=sc["nextCursor"], **kw), seen)
            return sc

        def arguments_of(who, arguments):
            return {k: v for k, v in arguments.items() if k != "limit"} if who == "reference" else arguments

        async def measure():
            out: dict[str, dict[str, tuple]] = {who: {} for who in WHO}
            async with Client(servers["reference"]) as ref, Client(servers["kgr"]) as ours:
                # one untimed answer from each (kgr's pages recorded for the floor server)
                answers = {"reference": {}, "kgr": {}}
                for label, name, arguments, whole in calls:
                    answers["reference"][label] = await call(ref, name, arguments_of("reference", arguments), False)
                    answers["kgr"][label] = await call(ours, name, arguments, whole, record=True)
                (tmp / "pages.json").write_bytes(orjson.dumps(pages))
                async with Client(servers["floor"]) as floor:
                    clients = {"reference": ref, "kgr": ours, "floor": floor}
                    for label, name, arguments, whole in calls:
                        answers["floor"] = {label: await call(floor, name, arguments, whole)}
                        times = {who: [] for who in WHO}
                        for run in range(args.runs):  # interleaved, each first in turn
                            for who in WHO[run % 3 :] + WHO[: run % 3]:
                                t = time.perf_counter()
                                await call(
                                    clients[who], name, arguments_of(who, arguments), who != "reference" and whole
                                )
                                times[who].append((time.perf_counter() - t) * 1000)
                        for who in WHO:
                            sc = answers[who][label]
                            out[who][label] = (statistics.median(times[who]), sc, len(sc.get("entities", [])))
            return out

        results = anyio.run(measure)
        lib = {}
        with Store(db, readonly=True) as store:
            for label, name, arguments, whole in calls:
                in_process(store, name, arguments, whole)
                times = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    sc = in_process(store, name, arguments, whole)
                    times.append((time.perf_counter() - t) * 1000)
                lib[label] = statistics.median(times)
                assert norm(sc) == norm(results["kgr"][label][1]), f"{label}: in process and kgr serve differ"
        for label, _, _, same in calls:
            assert norm(results["floor"][label][1]) == norm(results["kgr"][label][1]), f"{label}: the replay differs"
            if same:
                ref, ours = results["reference"][label][1], results["kgr"][label][1]
                assert norm(ref) == norm(ours), f"{label}: kgr and the reference differ"
        print()
        print(
            f"{'call':<28} {'reference ms':>13} {'kgr ms':>9} {'speed-up':>9}   {'entities (ref / kgr)':<22} "
            f"{'floor ms':>9} {'speed-up':>9} {'kgr in process ms':>18}"
        )
        for label, *_ in calls:
            r, k, f = results["reference"][label], results["kgr"][label], results["floor"][label]
            print(
                f"{label:<28} {r[0]:>13.1f} {k[0]:>9.2f} {r[0] / k[0]:>8.1f}x   {f'{r[2]} / {k[2]}':<22} "
                f"{f[0]:>9.2f} {r[0] / f[0]:>8.1f}x {lib[label]:>18.2f}"
            )
        print(
            "\nfloor: the same pages (bytes) replayed by a Python MCP server (the same SDK) that has them ready, "
            "so no kgr work: what moving them over stdio costs"
        )
        print(
            f"medians of {args.runs} interleaved runs after one warm-up, MCP stdio client to each server; "
            f"{counts['entities']} entities, {counts['observations']} observations, {counts['relations']} relations"
        )
        print(
            f"command: python bench/bench_memory.py --entities {args.entities} "
            f"--observations {args.observations} --relations {args.relations} --runs {args.runs}"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def page_key(name: str, arguments: dict) -> str:
    return orjson.dumps([name, arguments], option=orjson.OPT_SORT_KEYS).decode()


def replay(path: str) -> None:
    """The floor server: kgr's recorded pages, served as kgr serves them (structured content and
    its compact JSON as text) by the MCP SDK over stdio, with no work but a dictionary look-up."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult, TextContent

    recorded = orjson.loads(Path(path).read_bytes())
    server = MCPServer(name="replay")

    def answer(name: str, **arguments: Any) -> CallToolResult:
        sc = recorded[page_key(name, {k: v for k, v in arguments.items() if v is not None})]
        return CallToolResult(content=[TextContent(type="text", text=orjson.dumps(sc).decode())], structured_content=sc)

    @server.tool(name="read_graph", structured_output=True)
    def read_graph(limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        return answer("read_graph", limit=limit, cursor=cursor)

    @server.tool(name="search_nodes", structured_output=True)
    def search_nodes(query: str, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        return answer("search_nodes", query=query, limit=limit, cursor=cursor)

    @server.tool(name="open_nodes", structured_output=True)
    def open_nodes(names: list[str]) -> dict[str, Any]:
        return answer("open_nodes", names=names)

    server.run("stdio")


WHO = ["reference", "kgr", "floor"]

if __name__ == "__main__":
    if sys.argv[1:2] == ["--replay"]:
        replay(sys.argv[2])
    else:
        os.environ.setdefault("KGR_REDACT_KEY", "bench")
        main()
