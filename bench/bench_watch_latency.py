"""Save-to-answer latency of `kgr watch`: from a saved edit to its text being found.

    python bench/bench_watch_latency.py [--edits 20] [--no-graph] [--debounce-ms 300]

Copies examples/kb to a temporary folder, starts a real `kgr watch COPY --db TMP`
(embedding with the real default model, the graph on: the defaults), waits until it is
idle, then N times appends a sentence with a unique token to one page and measures,
from the moment the file is closed:

- fts: the token is found by the full-text index (`chunks_fts MATCH`);
- vector: the chunk holding it also has its vector (both halves of hybrid retrieval);
- hybrid: `kgr.retrieval.query.hybrid_query(..., mode="hybrid", k=5)` returns that page, checked
  once `vector` holds (the query's own time is printed too).

Prints each edit, then the median and p95 of each figure. Target: hybrid <= 2 s.

With --serve, the same through MCP: a real `kgr serve --db TMP --watch COPY` driven by
the SDK's stdio client; the figure is from the save until the `hybrid_query` tool
(mode hybrid, k 5) returns the edited page by a keyword match on the new token, with a
cosine (the new chunk's vector stored).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--debounce-ms", type=int, default=300)
    ap.add_argument("--no-graph", action="store_true", help="watch with --no-graph")
    ap.add_argument("--kb", default=str(REPO / "examples" / "kb"))
    ap.add_argument("--serve", action="store_true", help="measure through kgr serve --watch and its hybrid_query tool")
    args = ap.parse_args()
    if args.serve:
        return serve_main(args)

    from kgr import config as config_mod
    from kgr.ingest.writer import wait_for_idle
    from kgr.retrieval import query as query_mod
    from kgr.retrieval.query import query_embedder
    from kgr.store import Store

    work = Path(tempfile.mkdtemp(prefix="kgr-watch-bench-"))
    root = work / "kb"
    shutil.copytree(args.kb, root)
    db = work / "kb.sqlite"
    cmd = [sys.executable, "-m", "kgr", "watch", str(root), "--db", str(db), "--debounce-ms", str(args.debounce_ms)]
    if args.no_graph:
        cmd.append("--no-graph")
    print("$ " + " ".join(cmd), file=sys.stderr)
    log = open(work / "watch.log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        t0 = time.monotonic()
        while not db.exists():
            time.sleep(0.05)
        ok, _ = wait_for_idle(db, 600)
        assert ok, "the first ingest did not finish"
        print(f"initial ingest and embedding: {time.monotonic() - t0:.1f}s", file=sys.stderr)

        cfg = config_mod.load(None)
        pages = sorted(p for p in root.rglob("*.md"))
        rng = random.Random(7)
        rows = []
        with Store(db, readonly=True) as store:
            embed_query = query_embedder(store, cfg)
            embed_query("warm up the query model")
            for i in range(args.edits):
                page = rng.choice(pages)
                rel = page.relative_to(root).as_posix()
                token = f"zqlatency{i:03d}probe"
                with open(page, "a", encoding="utf-8") as fh:
                    fh.write(f"\n\nLatency probe {token}: an edit saved by the benchmark.\n")
                saved = time.monotonic()
                fts = vector = None
                while time.monotonic() - saved < 30:
                    hit = store.query(
                        "SELECT c.id FROM chunks_fts f JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH ?",
                        (token,),
                    )
                    if hit and fts is None:
                        fts = time.monotonic() - saved
                    if hit and store.scalar("SELECT count(*) FROM vec_src WHERE kind='chunk' AND id=?", (hit[0][0],)):
                        vector = time.monotonic() - saved
                        break
                    time.sleep(0.01)
                assert vector is not None, f"edit {i} of {rel} not indexed within 30 s"
                q0 = time.monotonic()
                result = query_mod.hybrid_query(
                    store,
                    f"latency probe {token}",
                    k=5,
                    mode="hybrid",
                    embed_query=embed_query,
                    weights=query_mod.Weights.from_config(cfg),
                )
                query_s = time.monotonic() - q0
                top = [r["path"] for r in result["results"]]
                hybrid = time.monotonic() - saved
                assert rel in top, f"edit {i}: hybrid_query gave {top}, not {rel}"
                rows.append((fts, vector, hybrid, query_s))
                print(
                    f"edit {i:2d} {rel:40s} fts {fts:.3f}s  vector {vector:.3f}s  hybrid {hybrid:.3f}s "
                    f"(query {1000 * query_s:.0f} ms)"
                )
                time.sleep(rng.uniform(0.5, 1.5))
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
    for name, col in (("fts", 0), ("vector", 1), ("hybrid", 2), ("query", 3)):
        vals = [r[col] for r in rows]
        print(f"{name:7s} median {statistics.median(vals):.3f}s  p95 {pct(vals, 95):.3f}s  max {max(vals):.3f}s")
    print(
        f"(debounce {args.debounce_ms} ms, graph {'off' if args.no_graph else 'on'}, {len(rows)} edits; "
        f"work dir {work})"
    )
    if os.environ.get("KGR_KEEP_BENCH") != "1":
        shutil.rmtree(work, ignore_errors=True)


def serve_main(args) -> None:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    work = Path(tempfile.mkdtemp(prefix="kgr-serve-bench-"))
    root = work / "kb"
    shutil.copytree(args.kb, root)
    db = work / "kb.sqlite"
    env = {**os.environ, "KGR_WATCH_DEBOUNCE_MS": str(args.debounce_ms)}
    cmd = ["-m", "kgr", "serve", "--db", str(db), "--watch", str(root)]
    print("$ python " + " ".join(cmd), file=sys.stderr)
    params = StdioServerParameters(command=sys.executable, args=cmd, env=env)
    pages = sorted(p for p in root.rglob("*.md"))
    rng = random.Random(7)
    rows = []

    async def answered(client, token, rel):
        # The token alone: a keyword match then means the new text itself is indexed (earlier
        # probes in the same page share the other words).
        res = await client.call_tool("hybrid_query", {"query": token, "k": 5, "mode": "hybrid"})
        if res.is_error:
            raise RuntimeError(res.content[0].text)
        # The edited page, matched by the new token (so the chunk holding it is indexed) and
        # with a cosine (so that chunk's vector is stored): answerable by both halves of hybrid.
        return any(
            r["path"] == rel and r["scores"]["bm25_rank"] and r["scores"]["cosine"] is not None
            for r in res.structured_content["results"]
        )

    async def session():
        with open(work / "serve.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                t0 = time.monotonic()
                while True:  # the first ingest (with the model) is done when a status says idle
                    st = (await client.call_tool("status", {})).structured_content
                    w = st.get("writer") or {}
                    if st.get("counts", {}).get("docs") and not w.get("busy", True):
                        break
                    await anyio.sleep(0.5)
                print(f"initial ingest and embedding: {time.monotonic() - t0:.1f}s", file=sys.stderr)
                await client.call_tool("hybrid_query", {"query": "warm up", "k": 1, "mode": "hybrid"})
                for i in range(args.edits):
                    page = rng.choice(pages)
                    rel = page.relative_to(root).as_posix()
                    token = f"zqserve{i:03d}probe"
                    with open(page, "a", encoding="utf-8") as fh:
                        fh.write(f"\n\nLatency probe {token}: an edit saved by the benchmark.\n")
                    saved = time.monotonic()
                    calls = 0
                    while not await answered(client, token, rel):
                        calls += 1
                        assert time.monotonic() - saved < 30, f"edit {i} of {rel} not answered within 30 s"
                        await anyio.sleep(0.1)  # poll gently: each call embeds the query on the same 2 cores
                    took = time.monotonic() - saved
                    rows.append(took)
                    print(f"edit {i:2d} {rel:40s} hybrid_query answered after {took:.3f}s ({calls + 1} calls)")
                    await anyio.sleep(rng.uniform(0.5, 1.5))

    anyio.run(session)
    print(f"serve   median {statistics.median(rows):.3f}s  p95 {pct(rows, 95):.3f}s  max {max(rows):.3f}s")
    print(f"(kgr serve --watch, debounce {args.debounce_ms} ms, graph on, {len(rows)} edits; work dir {work})")
    if os.environ.get("KGR_KEEP_BENCH") != "1":
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
