"""Support for the watcher and single-writer reliability tests (RELIABILITY.md W*, S*).

A live writer and watcher over a temporary folder, independent checks of the database
against the files (paths and sha256 of the bytes, computed here, not by kgr), counters
of parses and embedder inputs, and ``figures()``: what each test measured, printed on
stderr and appended to tests/reliability/figures/<test>.jsonl for the closing note.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

from kgr import config as config_mod
from kgr.store import Store

REPO = Path(__file__).resolve().parents[2]
FIGURES_DIR = REPO / "tests" / "reliability" / "figures"
RECORDED: list[tuple[str, dict]] = []

SLOW = os.environ.get("KGR_SLOW") == "1"


def tier(ci, soak):
    """The CI figure, or the soak one (KGR_SLOW=1)."""
    return soak if SLOW else ci


def figures(test_id: str, **values) -> None:
    """Record what a reliability test measured (shown in the terminal summary)."""
    values = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in values.items()}
    values["tier"] = "soak" if SLOW else "ci"
    RECORDED.append((test_id, values))
    line = json.dumps({"test": test_id, **values}, sort_keys=True)
    print(f"FIGURES {line}", file=sys.stderr)
    try:
        FIGURES_DIR.mkdir(parents=True, exist_ok=True)
        with open(FIGURES_DIR / f"{test_id}.jsonl", "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {"test": test_id, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **values},
                    sort_keys=True,
                )
                + "\n"
            )
    except OSError:
        pass


def terminal_summary(terminalreporter) -> None:
    if not RECORDED:
        return
    terminalreporter.section("reliability figures")
    for test_id, values in RECORDED:
        terminalreporter.write_line(f"{test_id}: " + ", ".join(f"{k}={v}" for k, v in values.items()))


def kb_config(**overrides):
    """Defaults with the deterministic stub embedder (vectors, no model) and one parser process."""
    return config_mod.load(None, overrides={"embed.stub": True, "normalize.workers": 1, **overrides})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stored(db: Path) -> dict[str, tuple[str, str]]:
    """{path: (file_hash, status)} of the file documents in the database."""
    with Store(db, readonly=True) as store:
        return {p: (h, s) for p, h, s in store.query("SELECT path, file_hash, status FROM docs WHERE source='file'")}


def expect_exact(db: Path, root: Path, paths) -> None:
    """I1 for the files a test made: exactly these paths are stored, each with the hash of its bytes."""
    have = stored(db)
    want = {p: sha(root / p) for p in paths}
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    stale = sorted(p for p in set(want) & set(have) if have[p][0] != want[p])
    failed = sorted(p for p, (_, s) in have.items() if s != "ok")
    assert not (missing or extra or stale or failed), (
        f"database != folder: missing {missing[:5]} ({len(missing)}), extra {extra[:5]} ({len(extra)}), "
        f"stale {stale[:5]} ({len(stale)}), failed {failed[:5]}"
    )


def invariants(db: Path, root: Path, *, graph: bool = False, embed: bool = False) -> dict:
    """kgr's own I1-I3 check (kgr.verify), asserted clean; returns the report. ``graph`` and
    ``embed``: also expect every document's graph and vectors (these writers run --no-graph,
    some --no-embed)."""
    from kgr.ingest import verify

    with Store(db, readonly=True) as store:
        report = verify.check(store, root, graph=graph, embed=embed)
    assert report["ok"], {k: report[k] for k in ("missing", "extra", "stale", "index", "storage")}
    assert report["index"]["vec_missing"] == 0 or report["index"]["vectors"] is None, report["index"]
    return report


def files_under(root: Path) -> list[str]:
    """Every real document file the test wrote (what discovery must find): .md/.txt not hidden."""
    out = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for n in names:
            if n.endswith((".md", ".txt")) and not n.startswith("."):
                out.append(os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/"))
    return sorted(out)


class Counters:
    """Counts parses (per path) and texts given to the embedder, in this process."""

    def __init__(self, monkeypatch):
        from kgr import embedders
        from kgr.stages import normalize

        self.parses: dict[str, int] = {}
        self.embedded_texts = 0
        real_finish = normalize.finish_doc
        real_embed = embedders.StubEmbedder.embed_documents

        def finish_doc(ref, *args, **kwargs):
            self.parses[ref.rel_path] = self.parses.get(ref.rel_path, 0) + 1
            return real_finish(ref, *args, **kwargs)

        def embed_documents(this, texts):
            self.embedded_texts += len(texts)
            return real_embed(this, texts)

        monkeypatch.setattr(normalize, "finish_doc", finish_doc)
        monkeypatch.setattr(embedders.StubEmbedder, "embed_documents", embed_documents)

    @property
    def parsed(self) -> int:
        return sum(self.parses.values())


class Live:
    """A started Writer and Watcher over ``root`` (real watchdog observer)."""

    def __init__(
        self,
        root: Path,
        db: Path,
        cfg=None,
        *,
        debounce_ms: int = 150,
        embed: bool = True,
        graph: bool = False,
        **watch_opts,
    ):
        from kgr.ingest.watch import Watcher
        from kgr.ingest.writer import Writer

        self.root, self.db = root, db
        self.writer = Writer(db, root=root, config=cfg or kb_config(), embed=embed, graph=graph).start()
        try:
            self.watcher = Watcher(root, self.writer, debounce_ms=debounce_ms, **watch_opts).start()
        except BaseException:
            self.writer.close()
            raise

    def idle(self, timeout: float = 60) -> float:
        started = time.monotonic()
        assert self.watcher.wait_idle(timeout), f"not idle after {timeout}s: {self.watcher.status()}"
        return time.monotonic() - started

    def close(self) -> None:
        self.watcher.stop()
        self.writer.close()


def write_corpus(root: Path, n: int, *, words: int = 40, prefix: str = "f", per_dir: int = 100) -> list[str]:
    """n small Markdown files, each with a unique token, spread over folders of per_dir."""
    import random

    rng = random.Random(n)
    vocab = [
        "ledger",
        "settlement",
        "queue",
        "retention",
        "policy",
        "deploy",
        "service",
        "owner",
        "audit",
        "latency",
        "budget",
        "incident",
        "runbook",
        "schema",
        "replica",
        "backup",
    ]
    paths = []
    for i in range(n):
        rel = f"d{i // per_dir:03d}/{prefix}{i:05d}.md"
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(vocab) for _ in range(words))
        p.write_text(f"# {prefix} {i}\n\nUnique token tok{prefix}{i}x. {body}.\n", encoding="utf-8")
        paths.append(rel)
    return paths
