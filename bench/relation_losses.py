"""Where the learned relation classifier loses gold relations, on out-of-fold predictions.

    python bench/relation_losses.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--cache FILE.pkl]

Collects and labels each folder's candidates (kgr.learn.relations.collect; ``--cache``
keeps them in a pickle, reused when present: delete it after changing the code), cross-
validates k-fold by document, and sorts every gold relation (scope applied) into one of:

- ``a:end_not_found``: an end entity is the gold entity of no candidate's end (mention missed);
- ``b:pair_never_candidate``: both ends found, but no candidate puts the two together;
- ``c:covered_unlabelled`` / ``c:covered_labelled_none``: a candidate pairs them, but none is
  labelled with the relation (outside the evidence, or aligned to something else);
- ``d:model_none`` / ``d:wrong_rel`` / ``d:wrong_dir``: a labelled candidate exists, the decision
  gives nothing for the pair, another relation, or the other direction;
- ``tp``.

False positives are counted by kind: an end that is no annotated entity, a pair the gold
relates otherwise, a pair the gold does not relate. Candidate-level (the quick score), not
the pipeline's figure.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import sys
from pathlib import Path


def breakdown(data, examples, probs, threshold, veto) -> dict[str, dict]:
    from kgr.learn import relations as learn

    pred = learn.decide(examples, probs, threshold, veto)
    out = {}
    for d in data:
        c = d.corpus
        scope = c.scope.entity_types

        def judged(t, c=c, scope=scope):
            return scope is None or (c.entity_types.get(t[0]) in scope and c.entity_types.get(t[2]) in scope)

        by_doc = collections.defaultdict(list)
        for e in d.examples:
            by_doc[e.doc].append(e)
        loss: collections.Counter = collections.Counter()
        fp: collections.Counter = collections.Counter()
        for doc in d.docs:
            es = by_doc[doc]
            found = {e.a[1] for e in es} | {e.b[1] for e in es}
            pairs = collections.defaultdict(list)
            for e in es:
                if e.a[1] and e.b[1]:
                    pairs[frozenset((e.a[1], e.b[1]))].append(e)
            gold = {(r["src"], r["rel"], r["dst"]) for r in c.relations.get(doc, [])}
            gold = {t for t in gold if judged(t)}
            rels = c.scope.relation_types
            got = {t for t in pred.get((c.name, doc), set()) if judged(t) and (rels is None or t[1] in rels)}
            for src, rel, dst in gold:
                if (src, rel, dst) in got:
                    loss["tp"] += 1
                    continue
                if src not in found or dst not in found:
                    loss["a:end_not_found"] += 1
                    continue
                cands = pairs.get(frozenset((src, dst)))
                if not cands:
                    loss["b:pair_never_candidate"] += 1
                    continue
                labels = {e.label for e in cands}
                want = {f"{rel}>" if e.a[1] == src else f"{rel}<" for e in cands}
                if not labels & want:
                    loss["c:covered_unlabelled" if None in labels else "c:covered_labelled_none"] += 1
                    continue
                other = [t for t in got if {t[0], t[2]} == {src, dst}]
                if not other:
                    loss["d:model_none"] += 1
                else:
                    loss["d:wrong_rel" if other[0][1] != rel else "d:wrong_dir"] += 1
            related = {frozenset((t[0], t[2])) for t in gold}
            for t in got - gold:
                if t[0].startswith("?") or t[2].startswith("?"):
                    fp["end_not_gold_entity"] += 1
                elif frozenset((t[0], t[2])) in related:
                    fp["related_pair_wrong_rel_or_dir"] += 1
                else:
                    fp["unrelated_pair"] += 1
        out[c.name] = {"gold": dict(loss), "false_positives": dict(fp)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", action="append", required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--cache", default=None, help="pickle of the collected candidates (reused when present)")
    args = parser.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0

    from kgr import config as config_mod
    from kgr.learn import relations as learn

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    if args.cache and Path(args.cache).exists():
        with open(args.cache, "rb") as fh:
            data = pickle.load(fh)
    else:
        cfg = config_mod.load()
        data = learn.collect_all(args.golden, cfg, progress=log)
        if args.cache:
            with open(args.cache, "wb") as fh:
                pickle.dump(data, fh)
    cv = learn.crossvalidate(data, k=args.folds, log=log)
    examples = [e for d in data for e in d.examples]
    scores = learn.pair_scores(data, examples, cv.kfold_probs, cv.threshold, cv.veto)
    for name, row in breakdown(data, examples, cv.kfold_probs, cv.threshold, cv.veto).items():
        s = scores[name]
        n = sum(row["gold"].values())
        print(f"== {name}: {n} gold relations, k-fold P {s['precision']:.3f} R {s['recall']:.3f} F1 {s['f1']:.3f}")
        for k in sorted(row["gold"]):
            print(f"  {k:<28}{row['gold'][k]:>6} {row['gold'][k] / max(1, n):6.1%}")
        print(f"  false positives {sum(row['false_positives'].values())}: {row['false_positives']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
