"""Ingest throughput on the PowerShell documentation corpus (3,088 Markdown files).

Not part of the default test run. Usage:

    python bench/bench_ingest.py [CORPUS_DIR] [--runs N]

Prints files/s, MB/s and peak memory for a cold ingest, the wall time of a second
(unchanged) run, and, side by side in the same run, the physical floor this machine
sets: reading every file, and tokenizing every file's text with the embedder's own
tokenizer (the one irreducible piece of work the chunker does). The ratio of ingest
wall time to that floor is how far we are from the limit.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "powershell-docs"


def floor_read(files: list[Path]) -> tuple[float, int]:
    t = time.perf_counter()
    total = 0
    for f in files:
        total += len(f.read_bytes())
    return time.perf_counter() - t, total


def floor_tokenize(files: list[Path]) -> float:
    from kgr.stages.tokens import get_counter

    counter = get_counter()
    texts = [f.read_text("utf-8", "replace") for f in files]
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        counter.encode_batch(texts[i : i + 64])
    return time.perf_counter() - t


def run_ingest(corpus: Path, db: Path, graph: bool = False) -> tuple[float, int, str]:
    """Run `kgr ingest` in a child so peak RSS is its own; return wall, peak KiB, summary."""
    code = (
        "import resource, sys, time, json\n"
        "from kgr.cli import main\n"
        "t = time.perf_counter()\n"
        "try:\n"
        f"    main(['ingest', {str(corpus)!r}, '--db', {str(db)!r}, '--json', '--no-progress', {'--graph' if graph else '--no-graph'!r}])\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "wall = time.perf_counter() - t\n"
        "peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(json.dumps({'wall': wall, 'peak_kib': peak, 'exit': code}), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    import json

    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    return stats["wall"], stats["peak_kib"], proc.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(DEFAULT_CORPUS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--graph", action="store_true", help="also extract and link (default: files to chunks only)")
    args = ap.parse_args()
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"skipped: corpus not found at {corpus} (needs ../shared)")
        return
    files = sorted(
        p
        for p in corpus.rglob("*")
        if p.is_file() and p.suffix.lower() in (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".docx")
    )
    walls, peaks, seconds, floors_read, floors_tok = [], [], [], [], []
    mb = 0.0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.sqlite"
            rd, nbytes = floor_read(files)
            tok = floor_tokenize(files)
            wall, peak, summary = run_ingest(corpus, db, args.graph)
            started = time.perf_counter()
            _, _, summary2 = run_ingest(corpus, db, args.graph)
            again = time.perf_counter() - started
            floors_read.append(rd)
            floors_tok.append(tok)
            walls.append(wall)
            peaks.append(peak)
            seconds.append(again)
            mb = nbytes / 1e6
    w = statistics.median(walls)
    floor = statistics.median(floors_read) + statistics.median(floors_tok)
    print(f"corpus            {corpus} ({len(files)} files, {mb:.1f} MB)")
    print(
        f"cold ingest       median {w:.2f} s over {args.runs} runs -> {len(files) / w:.0f} files/s, {mb / w:.2f} MB/s"
    )
    print(f"peak memory       {max(peaks) / 1024:.0f} MiB (largest of the ingest process and its parser children)")
    print(f"unchanged re-run  median {statistics.median(seconds):.2f} s")
    print(f"floor: read       median {statistics.median(floors_read):.2f} s")
    print(f"floor: tokenize   median {statistics.median(floors_tok):.2f} s (embedder tokenizer over every file)")
    print(f"ratio             ingest / (read + tokenize) = {w / floor:.1f}x")
    print(f"last summary      {summary}")
    print(f"re-run summary    {summary2}")


if __name__ == "__main__":
    main()
