"""Memory-profile writes through a real stdio MCP client, this tree against another revision.

    python bench/bench_memory_writes.py [--base REV] [--calls 200] [--rounds 5]

Each round starts `kgr serve --profile memory` on a fresh database once from this checkout
and once from REV (exported with `git archive` into a temporary folder), alternating which
goes first, and times --calls `create_entities` calls (one entity and one observation each)
at the client, after one untimed call. The table shows the median milliseconds per call of
each tree over the rounds and their ratio. A server without a writer thread takes the
database's writer lock for each write: this measures what that costs against REV.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]


def export_rev(rev: str, dest: Path) -> Path:
    archive = dest / "rev.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), rev], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="data")
    return dest / "tree"


async def time_calls(tree: Path, calls: int) -> float:
    from mcp import Client, StdioServerParameters

    db = Path(tempfile.mkdtemp(prefix="kgr-memw-")) / "memory.sqlite"
    env = {**os.environ, "KGR_REDACT_KEY": "bench", "PYTHONPATH": str(tree)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kgr", "serve", "--profile", "memory", "--db", str(db)], env=env, cwd=tree
    )
    async with Client(params) as client:

        async def create(i: int) -> None:
            entity = {"name": f"e{i}", "entityType": "note", "observations": [f"observation {i}"]}
            result = await client.call_tool("create_entities", {"entities": [entity]})
            assert not result.is_error, result

        await create(-1)
        start = time.perf_counter()
        for i in range(calls):
            await create(i)
        return (time.perf_counter() - start) / calls * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD~1", help="The revision to compare with (default HEAD~1).")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kgr-memw-base-") as tmp:
        trees = {"this tree": REPO, args.base: export_rev(args.base, Path(tmp))}
        times: dict[str, list[float]] = {name: [] for name in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                times[name].append(anyio.run(time_calls, trees[name], args.calls))
        here, base = (statistics.median(times[n]) for n in trees)
        print(f"{'tree':<24} {'median ms/call':>15}  runs")
        for name in trees:
            print(f"{name:<24} {statistics.median(times[name]):>15.2f}  {[round(t, 2) for t in times[name]]}")
        print(f"ratio (this tree / {args.base}): {here / base:.2f}")


if __name__ == "__main__":
    main()
