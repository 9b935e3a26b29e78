"""Cross-validated entity typing accuracy (issue 13, part 3): the type model of
kgr/stages/entitytypes.py, trained by kgr/eval/typetrain.py, scored on mentions of documents
(k-fold by document inside each corpus) and corpora (leave one corpus out) it was not trained on.

    python bench/cv_types.py --golden ../shared/golden --golden ../shared/golden2 [--k 5] [--C 0.5]

Accuracy is over correctly found mentions (document, surface, n as `kgr eval extraction`
matches them): the type of the predicted entity against the gold entity's type. In the
k-fold runs an entity's type is predicted from the features of its mentions in the held-out
documents only, so nothing of the held-out documents' entities was seen in training.
"baseline" is the type the pipeline gives with the model switched off (votes over mentions).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

from kgr.eval import typetrain


def pct(right: int, total: int) -> str:
    return f"{right / total:.3f} ({right}/{total})" if total else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", action="append", required=True)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--C", type=float, default=typetrain.C_DEFAULT)
    ap.add_argument("--cache", help="pickle the collected corpora here and reuse them")
    ap.add_argument("--by-type", action="store_true")
    args = ap.parse_args()
    if args.cache and Path(args.cache).exists():
        corpora = pickle.loads(Path(args.cache).read_bytes())
    else:
        corpora = [typetrain.collect(g) for g in args.golden]
        if args.cache:
            Path(args.cache).write_bytes(pickle.dumps(corpora))
    for corpus in corpora:
        ms = corpus.mentions
        base = typetrain.accuracy({m.key: m.entity_type for m in ms if m.key is not None}, ms)
        others = [m for c in corpora if c is not corpus for m in c.mentions]
        docs = corpus.docs
        folds = [set(docs[i :: args.k]) for i in range(args.k)]
        within = [0, 0]
        pooled = [0, 0]
        by_type: dict = {}
        for test in folds:
            train = [m for m in ms if m.doc not in test]
            held = [m for m in ms if m.doc in test]
            for acc, extra in ((within, []), (pooled, others)):
                model = typetrain.fit(train + extra, C=args.C)
                r, t, bt = typetrain.accuracy(typetrain.predict(model, held), held)
                acc[0] += r
                acc[1] += t
                if extra:
                    for typ, (a, b) in bt.items():
                        by_type.setdefault(typ, [0, 0])
                        by_type[typ][0] += a
                        by_type[typ][1] += b
        line = [f"{corpus.name}: baseline {pct(*base[:2])}", f"{args.k}-fold own {pct(*within)}"]
        line.append(f"{args.k}-fold +others {pct(*pooled)}")
        if others:
            model = typetrain.fit(others, C=args.C)
            r, t, _ = typetrain.accuracy(typetrain.predict(model, ms), ms)
            line.append(f"held-out corpus {pct(r, t)}")
        print(" | ".join(line))
        if args.by_type:
            for typ, (a, b) in sorted(by_type.items()):
                print(f"    {typ:<10} {pct(a, b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
