"""W3: a file written slowly, or copied in big, is stored only once complete."""

from __future__ import annotations

import shutil
import threading
import time

from harness import figures, kb_config, sha, stored, tier


def test_w3_slow_appends_and_a_big_copy_end_with_the_final_hash(tmp_path, live, counters):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "seed.md").write_text("# Seed\n\nsomething to start from\n", encoding="utf-8")
    db = tmp_path / "kb.sqlite"
    # Big files are truncated to max_chars for chunking; their stored file hash is of all the bytes.
    # The soak's 200 MiB copy is over the default 100 MiB file limit: raise it, this is about completeness.
    cfg = kb_config(**{"normalize.max_chars": 50_000, "normalize.max_file_bytes": 1 << 30})
    h = live(root, db, cfg, embed=False, debounce_ms=300)
    h.idle()

    append_total = tier(1 << 20, 20 << 20)  # 1 MiB in CI, 20 MiB soak, 64 KiB every 50 ms
    piece = 64 * 1024
    copy_size = tier(8 << 20, 200 << 20)
    big = tmp_path / "outside-big.txt"
    line = b"a line of plain text that repeats to make a big file for the copy test\n"
    with open(big, "wb") as fh:
        for _ in range(copy_size // len(line)):
            fh.write(line)

    def slow_append():
        with open(root / "growing.txt", "ab") as fh:
            written, i = 0, 0
            while written < append_total:
                chunk = (f"piece {i:06d} ".encode() * (piece // 12 + 1))[: piece - 1] + b"\n"
                fh.write(chunk)
                fh.flush()
                written += len(chunk)
                i += 1
                time.sleep(0.05)

    started = time.monotonic()
    writer = threading.Thread(target=slow_append)
    writer.start()
    shutil.copyfile(big, root / "copied.txt")
    copy_done = time.monotonic()
    writer.join()
    last_write = time.monotonic()

    # Poll until both stored hashes equal the final files' (the criterion: debounce + 5 s).
    want = {"growing.txt": sha(root / "growing.txt"), "copied.txt": sha(root / "copied.txt")}
    converged = None
    while time.monotonic() - last_write < 60:
        have = stored(db)
        if all(have.get(p, (None,))[0] == w for p, w in want.items()):
            converged = time.monotonic() - last_write
            break
        time.sleep(0.05)
    h.idle()
    have = stored(db)
    assert converged is not None, f"not converged: {have}"
    print(
        f"converged {converged:.2f} s after the last write (criterion: debounce + 5 s, bounded here only by the poll)"
    )
    assert all(have[p][1] == "ok" for p in want), have
    assert counters.parses.get("growing.txt", 0) <= 3, counters.parses
    assert counters.parses.get("copied.txt", 0) <= 3, counters.parses
    figures(
        "W3",
        appended_bytes=append_total,
        append_seconds=last_write - started,
        copied_bytes=copy_size,
        copy_seconds=copy_done - started,
        converged_after_last_write_s=converged,
        parses_growing=counters.parses.get("growing.txt", 0),
        parses_copied=counters.parses.get("copied.txt", 0),
        failed_records=sum(1 for _, s in have.values() if s != "ok"),
    )
