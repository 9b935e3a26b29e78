"""`kgr serve --watch DIR`: the server keeps the folder ingested through this watcher and
its one writer; a saved edit becomes answerable through the hybrid_query tool."""

from __future__ import annotations

import os
import sys
import time

import anyio
from harness import figures, write_corpus

from kgr.store.lock import writer_pid


def test_serve_watch_answers_a_saved_edit(tmp_path):
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = tmp_path / "kb"
    write_corpus(root, 20)
    db = tmp_path / "kb.sqlite"
    env = {**os.environ, "KGR_EMBED_STUB": "1", "KGR_REDACT_KEY": "test-key", "KGR_WATCH_DEBOUNCE_MS": "200"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kgr", "serve", "--db", str(db), "--watch", str(root)], env=env
    )

    async def find(client, token, path, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Keyword mode: the stub embedder's vectors mean nothing, and a match must contain the token.
            res = await client.call_tool("hybrid_query", {"query": token, "k": 5, "mode": "bm25"})
            assert not res.is_error, res.content[0].text
            if any(r["path"] == path for r in res.structured_content["results"]):
                return True
            await anyio.sleep(0.05)
        return False

    async def session():
        with open(tmp_path / "serve.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert await find(client, "tokf7x", "d000/f00007.md", timeout=120)  # the first ingest
                pid = writer_pid(db)
                latencies = []
                for i in range(5):
                    page = root / f"d000/f{i:05d}.md"
                    with open(page, "a", encoding="utf-8") as fh:
                        fh.write(f"\nA saved edit with the word zqserve{i}edit.\n")
                    saved = time.monotonic()
                    assert await find(client, f"zqserve{i}edit", f"d000/f{i:05d}.md")
                    latencies.append(time.monotonic() - saved)
                os.unlink(root / "d000/f00019.md")
                await anyio.sleep(1.5)
                res = await client.call_tool("hybrid_query", {"query": "tokf19x", "k": 5, "mode": "bm25"})
                gone = all(r["path"] != "d000/f00019.md" for r in res.structured_content["results"])
                return pid, latencies, gone

    pid, latencies, gone = anyio.run(session)
    assert pid is not None and pid != os.getpid()  # the server process held the writer lock
    assert gone, "a deleted page is still answered"
    assert writer_pid(db) is None  # released when the server stopped
    assert len(latencies) == 5, latencies  # each edit found within find()'s 30 s; the figure is printed, not bounded
    figures(
        "serve-watch-stub",
        edits=len(latencies),
        save_to_answer_max_s=max(latencies),
        save_to_answer_median_s=sorted(latencies)[len(latencies) // 2],
        each_s=[round(x, 3) for x in latencies],
        embedder="stub",
        note="the first edit waits for the initial ingest's graph extraction",
    )
