"""The memory profile against the reference MCP memory server, side by side, in one run.

    python bench/bench_memory.py [--entities 10000] [--observations 100000] [--runs 7]

One synthetic memory graph (fixed seed): --entities entities of eight types, --observations
observations spread over them, two relations per entity. It is written as the reference's
memory.jsonl, and the same file is imported into a kgr database with `kgr import --format
mcp-memory`. Both servers then run as real stdio subprocesses (`node .../server-memory/
dist/index.js` with MEMORY_FILE_PATH, `kgr serve --profile memory --db`), each driven by
the MCP Python SDK client, and every call is timed at the client (request, server work,
JSON on the wire, the client's parsing): each call runs once untimed, then --runs times;
the table shows the medians in milliseconds and the speed-up.

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

import anyio

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


def build(entities: int, observations: int, seed: int = 7) -> list[str]:
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
    for i, name in enumerate(names):
        for _ in range(2):
            j = rng.randrange(entities)
            if j != i:
                lines.append(
                    json.dumps(
                        {
                            "type": "relation",
                            "from": name,
                            "to": names[j],
                            "relationType": rng.choice(["knows", "uses", "part_of", "owned_by"]),
                        },
                        separators=(",", ":"),
                    )
                )
    # the reference skips nothing on load: no duplicate relations in its file
    seen, out = set(), []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out, names


def norm(result: dict) -> tuple:
    return (
        sorted((e["name"], e["entityType"], tuple(e["observations"])) for e in result.get("entities", [])),
        sorted((r["from"], r["to"], r["relationType"]) for r in result.get("relations", [])),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entities", type=int, default=10_000)
    ap.add_argument("--observations", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    node = shutil.which("node")
    if node is None or not REFERENCE.is_file():
        sys.exit(
            f"needs node and the reference server at {REFERENCE}: "
            "npm install --prefix .ci/node @modelcontextprotocol/server-memory@2026.8.31"
        )
    from mcp import Client, StdioServerParameters

    from kgr.memory import graph as memory
    from kgr.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="kgr-bench-memory-"))
    try:
        t0 = time.perf_counter()
        lines, names = build(args.entities, args.observations)
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
        }

        async def call(client, name, arguments, paged):
            """One answer; with ``paged`` (kgr), every page of it, merged."""
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise SystemExit(f"{name} {arguments}: {result.content}")
            sc = dict(result.structured_content)
            while paged and sc.get("nextCursor"):
                more = (await client.call_tool(name, {**arguments, "cursor": sc["nextCursor"]})).structured_content
                sc["entities"] += more["entities"]
                # search_nodes repeats a relation whose two ends fall on different pages
                sc["relations"] += [r for r in more["relations"] if r not in sc["relations"]]
                sc["nextCursor"] = more["nextCursor"]
            return sc

        async def measure(who, params):
            out = {}
            async with Client(params) as client:
                for label, name, arguments, whole in calls:
                    if who == "reference":
                        arguments = {k: v for k, v in arguments.items() if k != "limit"}
                    paged = who == "kgr" and whole
                    sc = await call(client, name, arguments, paged)
                    times = []
                    for _ in range(args.runs if who == "kgr" or "all" not in label else 0):
                        t = time.perf_counter()
                        await call(client, name, arguments, paged)
                        times.append((time.perf_counter() - t) * 1000)
                    out[label] = (statistics.median(times) if times else None, sc, len(sc.get("entities", [])))
            return out

        results = {who: anyio.run(measure, who, params) for who, params in servers.items()}
        # the reference answers "all" with the very call timed above: reuse those times
        for label, same_as in (
            ("search_nodes (a type), all", "search_nodes (a type)"),
            ("read_graph (all)", "read_graph (first page)"),
        ):
            results["reference"][label] = (results["reference"][same_as][0], *results["reference"][label][1:])
        for label, _, _, same in calls:
            if same:
                ref, ours = results["reference"][label][1], results["kgr"][label][1]
                assert norm(ref) == norm(ours), f"{label}: kgr and the reference differ"
        print()
        print(f"{'call':<28} {'reference ms':>13} {'kgr ms':>9} {'speed-up':>9}   entities returned (ref / kgr)")
        for label, *_ in calls:
            r, k = results["reference"][label], results["kgr"][label]
            print(f"{label:<28} {r[0]:>13.1f} {k[0]:>9.2f} {r[0] / k[0]:>8.0f}x   {r[2]} / {k[2]}")
        print(
            f"\nmedians of {args.runs} runs after one warm-up, MCP stdio client to each server; "
            f"{args.entities} entities, {args.observations} observations"
        )
        print(
            f"command: python bench/bench_memory.py --entities {args.entities} "
            f"--observations {args.observations} --runs {args.runs}"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("KGR_REDACT_KEY", "bench")
    main()
