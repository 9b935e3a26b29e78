"""W1: editor save styles converge to one document per real path, with no flicker."""

from __future__ import annotations

import os
import random
import re
import subprocess
import threading
import time

from harness import expect_exact, figures, invariants, stored, tier

from kgr.store import Store

STYLES = ("inplace", "tmprename", "vimbackup", "vimprobe", "sedi", "emacs")


def content(style: str, version: int) -> str:
    return (
        f"# Notes kept with {style}\n\nThe marker tokw1{style}z stays in every version.\n\n"
        f"Revision v{version:04d} of this page, saved by the {style} pattern.\n"
    )


def save(root, style: str, version: int, rng: random.Random) -> None:
    name = f"{style}.md"
    path = root / name
    text = content(style, version)
    if style == "inplace":  # truncate and write the same inode
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    elif style == "tmprename":  # VS Code / atomicwrites: a temp file renamed over the target
        temp = root / (f"{name}.{version}.tmp" if version % 2 else f".{name}.swx{version}")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    elif style == "vimbackup":  # vim backupcopy=no: rename to file~, write anew, delete the backup
        os.rename(path, root / f"{name}~")
        path.write_text(text, encoding="utf-8")
        os.unlink(root / f"{name}~")
    elif style == "vimprobe":  # vim: the .swp file, the 4913 write probe, then write in place
        swp = root / f".{name}.swp"
        swp.write_bytes(b"b0VIM 9.0" + bytes(rng.randrange(256) for _ in range(64)))
        probe = root / "4913"
        probe.write_bytes(b"")
        os.unlink(probe)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.unlink(swp)
    elif style == "sedi":  # GNU sed -i: writes ./sedXXXXXX and renames it over the file
        subprocess.run(["sed", "-i", f"s/Revision v[0-9]*/Revision v{version:04d}/", str(path)], check=True)
    elif style == "emacs":  # lock symlink .#file (dangling), #file# autosave, file~ backup, write
        lock = root / f".#{name}"
        os.symlink(f"tester@host.{os.getpid()}:1700000000", lock)
        (root / f"#{name}#").write_text(text + "autosave\n", encoding="utf-8")
        os.rename(path, root / f"{name}~")
        path.write_text(text, encoding="utf-8")
        os.unlink(root / f"#{name}#")
        os.unlink(lock)
    else:
        raise ValueError(style)


def test_w1_six_save_styles_converge_without_flicker(tmp_path, live):
    root = tmp_path / "kb"
    root.mkdir()
    rng = random.Random(1)
    for style in STYLES:
        (root / f"{style}.md").write_text(content(style, 0), encoding="utf-8")
    # A few bystanders that must stay as they are.
    for i in range(5):
        (root / f"other{i}.md").write_text(f"# Other {i}\n\nUnrelated page {i}.\n", encoding="utf-8")
    db = tmp_path / "kb.sqlite"
    h = live(root, db, debounce_ms=150)
    h.idle()
    real = sorted(p.name for p in root.iterdir())
    expect_exact(db, root, real)

    # A reader polls every 50 ms for each page's marker; it must always find it.
    stop = threading.Event()
    polls, misses = [0], []

    def reader():
        with Store(db, readonly=True) as store:
            while not stop.is_set():
                for style in STYLES:
                    n = store.scalar("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f"tokw1{style}z",))
                    if n < 1:
                        misses.append((style, time.monotonic()))
                polls[0] += 1
                stop.wait(0.05)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    saves = tier(25, 100)
    started = time.monotonic()
    try:
        for version in range(1, saves + 1):
            for style in STYLES:
                save(root, style, version, rng)
            # Mostly faster than the debounce (coalesced), sometimes slower (each save ingested).
            time.sleep(rng.choice([0.02, 0.05, 0.1, 0.3, 0.4]))
        idle_after = h.idle()
    finally:
        stop.set()
        t.join(5)
    elapsed = time.monotonic() - started

    docs = stored(db)
    assert sorted(docs) == real, f"documents {sorted(docs)} != real files {real}"
    expect_exact(db, root, real)
    for style in STYLES:  # the last version of each page is what is stored
        with Store(db, readonly=True) as store:
            text = store.scalar("SELECT text FROM docs WHERE path=?", (f"{style}.md",))
        assert f"Revision v{saves:04d}" in text, (style, text)
    temp_like = [
        p
        for p in docs
        if p not in real
        or p.endswith(("~", ".swp", ".tmp", "#"))
        or p == "4913"
        or p.startswith((".", "#"))
        or re.fullmatch(r"sed\w{6}", p)
    ]
    assert temp_like == []
    invariants(db, root)
    assert polls[0] > 20, "the reader barely ran"
    assert misses == [], f"a marker went missing {len(misses)} times: {misses[:5]}"
    figures(
        "W1",
        saves_per_style=saves,
        styles=len(STYLES),
        docs=len(docs),
        temp_docs=len(temp_like),
        reader_polls=polls[0],
        marker_missing=len(misses),
        seconds=elapsed,
        idle_after_last_save_s=idle_after,
        batches=h.watcher.stats.batches,
        parsed=h.watcher.stats.parsed,
    )
