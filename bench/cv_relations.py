"""Cross-validated relation F1 of the learned relation classifier, through the whole pipeline.

    python bench/cv_relations.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--folds 5] [--reader] [--out FILE] [--json]

1. Each annotated folder is ingested once to collect and label its candidates
   (kgr.learn.relations.collect).
2. k-fold by document over all folders at once: the documents of every corpus are dealt
   into k folds; fold f's model is trained on every other document of every corpus.
3. Leave one corpus out: a model trained on the other corpora only. The thresholds are
   chosen on the out-of-fold predictions of 2 and 3 (kgr.learn.relations.best_threshold).
4. Each corpus is then run through ``kgr eval extraction`` twice more, extraction reading
   each document with a model that never saw it: the fold model of that document (k-fold),
   or the model without its corpus (left out). A third run uses a model trained on all the
   corpora (in-sample, what ships) for the gap.

``--reader`` fits every model with a fine-tuned pair reader too (``kgr train relations --reader``); ``--out`` saves the in-sample model as ``kgr train relations``
would write it from the same folders (the same cross-validation makes its thresholds), so one
run gives both the figures and the weights.

Prints relation precision/recall/F1 per corpus for each setting, with mention, canonical
and typing figures of the k-fold run. Skips with a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", action="append", required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--C", type=float, default=None)
    parser.add_argument("--reader", action="store_true", help="fine-tune a pair reader in every fit")
    parser.add_argument("--out", help="also write the in-sample model here (as kgr train relations does)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-pipeline", action="store_true", help="only the quick candidate-level scores")
    args = parser.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0

    from kgr import config as config_mod
    from kgr.eval.extraction import eval_extraction
    from kgr.learn import relations as learn
    from kgr.stages.relmodel import using_model

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    cfg = config_mod.load()
    data = learn.collect_all(args.golden, cfg, progress=log)
    kwargs = {} if args.C is None else {"C": args.C}
    cv = learn.crossvalidate(data, k=args.folds, reader=args.reader, log=log, **kwargs)
    examples = [e for d in data for e in d.examples]
    report: dict = {"threshold": cv.threshold, "folds": args.folds, "candidate_level": {}, "pipeline": {}}
    for setting, probs in (("kfold", cv.kfold_probs), ("left_out", cv.loco_probs)):
        report["candidate_level"][setting] = learn.pair_scores(data, examples, probs, cv.threshold, cv.veto)
    full = None
    if args.out:
        command = "kgr train relations " + " ".join(
            [*(f"--golden {g}" for g in args.golden), f"--out {args.out}", *(["--reader"] if args.reader else [])]
        )
        full, _ = learn.ship(data, cv, args.out, reader=args.reader, log=log, command=command, **kwargs)
    if not args.no_pipeline:
        if full is None:
            full = learn.fit(
                examples,
                threshold=cv.threshold,
                veto=cv.veto,
                scopes=learn.scopes_of(data),
                reader=args.reader,
                **kwargs,
            )
        for d in data:
            name = d.corpus.name
            row = {}
            for setting, chooser in (
                ("kfold", cv.kfold_model_for(name)),
                ("left_out", cv.loco_model_for(name)),
                ("in_sample", lambda path: full),
            ):
                with using_model(chooser), d.typing():
                    result = eval_extraction(d.corpus.root, config=cfg)
                row[setting] = result
                log(f"{name} {setting}: relation F1 {result['relation']['f1']:.3f}")
            report["pipeline"][name] = row
    report["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        print(format_report(report))
    return 0


def format_report(report: dict) -> str:
    lines = [f"threshold {report['threshold']} ({report['folds']}-fold by document), {report['seconds']} s"]
    lines.append("")
    lines.append("candidate level (quick, not the reported figure): relation F1")
    for setting, scores in report["candidate_level"].items():
        lines.append(f"  {setting:<10}" + "  ".join(f"{k} {v['f1']:.3f}" for k, v in scores.items()))
    if report["pipeline"]:
        lines.append("")
        head = (
            f"{'corpus':<16}{'setting':<11}{'rel P':>7}{'rel R':>7}{'rel F1':>8}{'mention':>9}{'canon':>7}{'typing':>8}"
        )
        lines.append(head)
        for name, row in report["pipeline"].items():
            for setting, r in row.items():
                typing = r.get("typing", {}).get("accuracy")
                lines.append(
                    f"{name:<16}{setting:<11}{r['relation']['precision']:>7.3f}{r['relation']['recall']:>7.3f}"
                    f"{r['relation']['f1']:>8.3f}{r['mention']['f1']:>9.3f}{r['canonical']['f1']:>7.3f}"
                    + (f"{typing:>8.3f}" if typing is not None else f"{'-':>8}")
                )
            gap = row["kfold"]["relation"]["f1"] - row["left_out"]["relation"]["f1"]
            lines.append(f"{'':<16}gap k-fold - left out: {gap:+.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
