"""RELIABILITY.md P7 soak: Hypothesis-generated and mutated inputs for every parser and every
stage's record reader (see tests/reliability/fuzzing.py), at least 100,000 cases in total.

    nice -n 19 python bench/fuzz_soak.py --cases 100000 --workers 2 --out /tmp/kgr-fuzz

Prints, per target: cases, outcomes (ok / classified / library / crash / hang), the slowest
case, and the mean time per case; then the totals and the wall time. Crashing and hanging
inputs are saved under --out as regression fixtures, with the slowest input of each target. Exit status 1 if any crashed or hung.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import multiprocessing
import os
import signal
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "reliability"))
sys.path.insert(0, str(HERE.parent))

import fuzzing  # noqa: E402

# Share of the cases per target (per 100,000): cheap targets get more, every one gets thousands.
WEIGHTS = {
    "markdown": 10,
    "text": 10,
    "front_matter": 10,
    "html": 5,
    "pdf": 4,
    "docx": 5,
    "docx_xml": 3,
    "reader_records": 20,
    "chunk_records": 8,
    "extract_records": 6,
    "link_records": 8,
    "embed_records": 8,
    "load_records": 3,
}


def run_part(name: str, cases: int, seed: int, limit_s: float, shared: str | None, derived: int) -> fuzzing.Stats:
    """``cases`` cases of one target: Hypothesis examples, each followed by ``derived``
    havoc mutations of itself (seeded from the example, so a run is reproducible)."""
    import random

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    target = fuzzing.targets(shared)[name]
    pool = target.pool()
    stats = fuzzing.Stats()

    @hseed(seed)
    @settings(
        max_examples=max(1, cases // (1 + derived)),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(target.strategy(), st.integers(0, 1 << 32))
    def body(data: bytes, salt: int) -> None:
        rng = random.Random(salt)
        for case in [data] + [fuzzing.havoc(data, rng, pool, target.nest) for _ in range(derived)]:
            stats.add(fuzzing.run_case(target, case, limit_s, 30 * limit_s), case)  # counts, never raises

    fuzzing.warm_up(name, shared)  # imports, spaCy, the language model: loaded outside the timings
    body()
    return stats


def merge(a: fuzzing.Stats, b: fuzzing.Stats) -> fuzzing.Stats:
    a.cases += b.cases
    a.seconds += b.seconds
    for k, v in b.outcomes.items():
        a.outcomes[k] = a.outcomes.get(k, 0) + v
    for k, v in b.library.items():
        a.library[k] = a.library.get(k, 0) + v
    a.crashes += b.crashes
    a.hangs += b.hangs
    if b.slowest > a.slowest:
        a.slowest, a.slowest_size, a.slowest_data, a.slowest_cpu = (
            b.slowest,
            b.slowest_size,
            b.slowest_data,
            b.slowest_cpu,
        )
    a.max_cpu = max(a.max_cpu, b.max_cpu)
    return a


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000, help="total cases across targets")
    ap.add_argument("--targets", default=",".join(WEIGHTS), help="comma-separated target names")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--part", type=int, default=1000, help="cases per task (one Hypothesis run)")
    ap.add_argument(
        "--limit",
        type=float,
        default=20.0,
        help="seconds of CPU time (or 30x that of wall time) before a case counts as a hang",
    )
    ap.add_argument("--derived", type=int, default=4, help="havoc mutations run after each Hypothesis example")
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument(
        "--shared",
        default=os.environ.get("KGR_SHARED", str(HERE.parents[1] / "shared")),
        help="../shared, for PowerShell corpus seeds (skipped when absent)",
    )
    ap.add_argument("--out", default="fuzz-crashers", help="directory for crashing and hanging inputs")
    args = ap.parse_args()
    shared = args.shared if Path(args.shared, "corpora").is_dir() else None
    names = [n for n in args.targets.split(",") if n]
    total_w = sum(WEIGHTS[n] for n in names)
    tasks = []
    for n in names:
        want = max(1, round(args.cases * WEIGHTS[n] / total_w))
        for i, start in enumerate(range(0, want, args.part)):
            tasks.append((n, min(args.part, want - start), args.seed + 1000 * i + zlib.crc32(n.encode()) % 997))
    # round-robin over the targets, so that a run stopped early has covered each in proportion
    position = {t: sum(1 for u in tasks[:i] if u[0] == t[0]) for i, t in enumerate(tasks)}
    tasks.sort(key=lambda t: position[t] / max(1, WEIGHTS[t[0]]))
    print(
        f"fuzz soak: {sum(t[1] for t in tasks)} cases, {len(names)} targets, {len(tasks)} tasks, "
        f"{args.workers} workers, hang limit {args.limit:g}s CPU / {30 * args.limit:g}s wall, "
        f"{args.derived} havoc cases per Hypothesis example, PowerShell seeds: {'yes' if shared else 'no'}",
        flush=True,
    )
    results = {n: fuzzing.Stats() for n in names}
    broken: list[str] = []
    started = time.monotonic()
    out = Path(args.out)

    def stop(signum, frame):
        print("\nstopped early (SIGTERM): the parts that finished", flush=True)
        report(names, results, broken, time.monotonic() - started, out)
        for child in multiprocessing.active_children():
            child.kill()
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    ctx = multiprocessing.get_context("spawn")
    pending = list(tasks)
    while pending:
        with cf.ProcessPoolExecutor(args.workers, mp_context=ctx) as pool:
            futures = {
                pool.submit(run_part, n, c, s, args.limit, shared, args.derived): (n, c, s) for n, c, s in pending
            }
            pending = []
            dead = None
            for fut in cf.as_completed(futures):
                n, c, s = futures[fut]
                try:
                    merge(results[n], fut.result())
                except cf.process.BrokenProcessPool:
                    dead = futures[fut]  # a worker died (a segfault in a parser?); the others are re-run
                    break
                done = sum(r.cases for r in results.values())
                part = fut.result()
                print(
                    f"  {time.monotonic() - started:7.0f}s  {n:16} +{part.cases:5}  total {done}  "
                    f"{part.outcomes}  slowest {part.slowest:.2f}s",
                    flush=True,
                )
                save(out, n, part)
        if dead is not None:
            broken.append(f"{dead[0]} seed {dead[2]}")
            pending = [t for f, t in futures.items() if t != dead and (f.cancelled() or f.exception() is not None)]
    report(names, results, broken, time.monotonic() - started, out)
    tot = fuzzing.Stats()
    for r in results.values():
        merge(tot, r)
    return 1 if (tot.outcomes.get("crash") or tot.outcomes.get("hang") or broken) else 0


def save(out: Path, name: str, stats: fuzzing.Stats) -> None:
    for kind, items in (("crash", stats.crashes), ("hang", stats.hangs)):
        for detail, data in items:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}-{kind}-{hashlib.sha256(data).hexdigest()[:12]}.bin").write_bytes(data)
            print(f"    {kind}: {detail}", flush=True)


def report(names: list[str], results: dict, broken: list[str], wall: float, out: Path | None = None) -> None:
    print(
        f"\n{'target':16} {'cases':>7} {'ok':>7} {'classif':>7} {'library':>7} {'crash':>5} {'hang':>4} "
        f"{'slowest s':>9} {'its cpu':>7} {'max cpu':>7} {'mean ms':>7}"
    )
    tot = fuzzing.Stats()
    for n in names:
        r = results[n]
        o = r.outcomes
        print(
            f"{n:16} {r.cases:7} {o.get('ok', 0):7} {o.get('classified', 0):7} {o.get('library', 0):7} "
            f"{o.get('crash', 0):5} {o.get('hang', 0):4} {r.slowest:9.2f} {r.slowest_cpu:7.2f} {r.max_cpu:7.2f} "
            f"{1000 * r.seconds / max(1, r.cases):7.1f}  (slowest input {r.slowest_size} bytes)"
        )
        merge(tot, r)
        if r.slowest_data and out is not None:  # the slowest input, to profile
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{n}-slowest.bin").write_bytes(r.slowest_data)
        for detail in sorted({d for d, _ in r.crashes + r.hangs}):
            print(f"    crash/hang: {detail}")
        if r.library:
            print(
                "    third-party exceptions (the child's safety net records them as malformed): "
                + ", ".join(f"{k} x{v}" for k, v in sorted(r.library.items(), key=lambda kv: -kv[1]))
            )
    o = tot.outcomes
    print(
        f"{'TOTAL':16} {tot.cases:7} {o.get('ok', 0):7} {o.get('classified', 0):7} {o.get('library', 0):7} "
        f"{o.get('crash', 0):5} {o.get('hang', 0):4} {tot.slowest:9.2f} {tot.slowest_cpu:7.2f} {tot.max_cpu:7.2f} "
        f"{1000 * tot.seconds / max(1, tot.cases):7.1f}"
    )
    print(f"wall {wall:.0f}s; worker deaths: {len(broken)} {broken if broken else ''}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
