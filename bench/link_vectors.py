"""Does the linker's entity-vector term help? Canonical-entity F1 on the golden corpus,
linked in two phases: half the files ingested (and embedded), then the other half linked
against the stored entities, once with the vector term and once without.

    python bench/link_vectors.py [--golden ../shared/golden] [--seed 7]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from kgr import config
from kgr.eval import extraction as evaluate
from kgr.ingest.pipeline import ingest
from kgr.store import Store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", default=str(Path(__file__).resolve().parents[2] / "shared" / "golden"))
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    golden = Path(args.golden)
    if not (golden / "docs").is_dir():
        raise SystemExit(f"{golden}/docs not found: pass --golden (the shared golden corpus)")
    files = sorted(p for p in (golden / "docs").rglob("*") if p.is_file())
    random.Random(args.seed).shuffle(files)
    half = len(files) // 2
    cfg = config.load(None)
    for use_vectors in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "docs"
            for phase, part in enumerate((files[:half], files[half:])):
                for f in part:
                    dst = root / f.relative_to(golden / "docs")
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(f, dst)
                with Store(Path(tmp) / "kb.sqlite") as st:
                    # the second phase links against the first phase's entity vectors, or not
                    ingest([str(root)], st, config=cfg, embed=phase == 0 or use_vectors)
            with Store(Path(tmp) / "kb.sqlite") as st:
                r = evaluate.score(st, golden / "annotations")
        c = r["canonical"]
        print(
            f"{'with' if use_vectors else 'without'} entity vectors: canonical P {c['precision']:.3f} "
            f"R {c['recall']:.3f} F1 {c['f1']:.3f} ({c['predicted_entities']} entities, {c['gold_entities']} gold); "
            f"mention F1 {r['mention']['f1']:.3f}, relation F1 {r['relation']['f1']:.3f}"
        )


if __name__ == "__main__":
    main()
