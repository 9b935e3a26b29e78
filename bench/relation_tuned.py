"""Would a fine-tuned reader find the relations the shipped classifier misses? Measured, side by side.

    python bench/relation_tuned.py --golden ../shared/golden --golden ../shared/golden2 \
        --golden ../shared/eval/redocred_dev [--left-out golden2] [--epochs 2] [--layers 3] \
        [--cache /tmp/cands.pkl]

Stop 46 measured that the shipped model's features (a logistic regression on parse and
layout strings, and a small network on the frozen embedding model's states over the two
names) name the right relation for few of the labelled candidates, and that no change of
weighting, features or thresholds moved golden2's held-out relation F1. This probes the
next step: the same view (the default embedding model reading each candidate's evidence,
token states averaged over each name, :mod:`kgr.stages.relview`), but with the model's
top ``--layers`` transformer layers trained together with the head on the labelled
candidates, so that what the states say about a pair is learned for relations.

For each corpus left out (``--left-out``, default every one), the reader is trained on the
candidates of the other corpora and predicts the left-out corpus's. Printed per corpus,
candidate-level relation F1 (:func:`kgr.learn.relations.pair_scores`, rules included as
extraction applies them) for:

- ``sparse``: the shipped logistic regression on the same training candidates;
- ``tuned``: the fine-tuned reader alone;
- ``mean``: the mean of the two;

each at thresholds chosen on the left-out corpus itself (an upper bound, the same for every
variant) and at the fixed threshold 0.5. Also how long training and reading took. The
candidates are collected once (``--cache`` keeps them; delete it after changing the code).
Skips with a message when a folder is missing.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import random
import sys
import time
from pathlib import Path

HIDDEN = 256
BATCH_WINDOWS = 16
LR_ENCODER = 3e-5
LR_HEAD = 1e-3
SEED = 0
KINDS = ("sentence", "near", "subject", "row", "item", "definition")


def gather(goldens, cfg, log):
    """(data, evidence): the labelled candidates of each folder and, per example, its evidence."""
    sys.path.insert(0, str(Path(__file__).parent))
    from relation_dense import evidence_spans

    from kgr.learn import relations as learn
    from kgr.stages.relmodel import collecting

    data, got = [], []
    for g in goldens:
        with collecting() as collected:
            data.append(learn.collect(g, cfg, progress=log, views=False))
        got.append(collected)
    evidence = evidence_spans(data, got)
    return data, evidence


def kind_of(e) -> str:
    for f in e.features:
        if f.startswith("k="):
            return f[2:]
    return ""


class Reader:
    """The default embedding model's transformer, its top layers trainable, and a head over the
    two names' pooled states, their product and the candidate's kind."""

    def __init__(self, layers: int):
        import torch

        from kgr.stages.relview import MentionReader

        base = MentionReader.load()  # the model extraction reads candidates with
        self.tokenizer, self.model = base.tokenizer, base.model
        n = len(self.model.encoder.layer)
        self.frozen = n - layers
        self.top = self.model.encoder.layer[self.frozen :]
        dim = int(self.model.config.hidden_size)
        self.dim = dim
        self.head = torch.nn.Sequential(
            torch.nn.Linear(3 * dim + len(KINDS), HIDDEN),
            torch.nn.ReLU(),
            torch.nn.Dropout(0.1),
        )

    def lower(self, windows: list[str]):
        """Per window: (offsets, the frozen layers' states), read once."""
        import torch

        from kgr.stages.relview import MAX_TOKENS

        out = {}
        order = sorted(set(windows), key=lambda w: (len(w), w))
        self.model.eval()
        with torch.inference_mode():
            for i in range(0, len(order), 32):
                chunk = order[i : i + 32]
                enc = self.tokenizer(
                    chunk,
                    return_offsets_mapping=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    padding=True,
                    return_tensors="pt",
                )
                offsets = enc.pop("offset_mapping")
                states = self.model(**enc, output_hidden_states=True).hidden_states[self.frozen]
                mask = enc["attention_mask"]
                for k, w in enumerate(chunk):
                    length = int(mask[k].sum())
                    out[w] = (offsets[k, :length].clone(), states[k, :length].clone())
        return out


def masks_of(offsets, spans):
    """Per span, the token positions inside it (real tokens only)."""
    import torch

    real = offsets[:, 1] > offsets[:, 0]
    out = []
    for s, e in spans:
        inside = real & (offsets[:, 1] > s) & (offsets[:, 0] < e)
        out.append(inside)
    return torch.stack(out)


def run_top(reader, states_list):
    """The trainable layers over a batch of windows' lower states: (B, T, H) and the mask."""
    import torch

    lengths = [len(s) for s in states_list]
    T = max(lengths)
    H = reader.dim
    h = torch.zeros(len(states_list), T, H)
    mask = torch.zeros(len(states_list), T, dtype=torch.long)
    for k, s in enumerate(states_list):
        h[k, : len(s)] = s
        mask[k, : len(s)] = 1
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min  # additive, (B, 1, 1, T)
    for layer in reader.top:
        out = layer(h, attention_mask=ext)
        h = out[0] if isinstance(out, tuple) else out
    return h


def pooled(h, window_masks):
    """Mean state over each name's tokens; zeros for a name outside the window."""
    m = window_masks.float()
    n = m.sum(dim=-1, keepdim=True).clamp(min=1.0)
    return (m @ h) / n


def fine_tune(examples, evidence, train_rows, test_rows, *, layers, epochs, log, lower=None):
    """Train a reader on ``train_rows`` (labelled), return label probabilities for ``test_rows``."""
    import numpy as np
    import torch

    from kgr.learn import relations as learn
    from kgr.stages.relmodel import LABELS

    torch.manual_seed(SEED)
    rnd = random.Random(SEED)
    reader = Reader(layers)
    reader.head.append(torch.nn.Linear(HIDDEN, len(LABELS)))
    train_rows = [i for i in train_rows if examples[i].label is not None]
    weights = learn.corpus_weights([examples[i] for i in train_rows])
    if lower is None:
        started = time.perf_counter()
        lower = reader.lower([evidence[i][0] for i in [*train_rows, *test_rows]])
        log(f"lower layers read {len(lower)} windows in {time.perf_counter() - started:.0f} s")

    def grouped(rows, with_labels):
        by_window = collections.defaultdict(list)
        for j, i in enumerate(rows):
            w, sa, sb = evidence[i]
            y = LABELS.index(examples[i].label) if with_labels else -1
            by_window[w].append((i, sa, sb, y, float(weights[j]) if with_labels else 1.0))
        out = []
        for w, items in by_window.items():
            offsets, states = lower[w]
            spans = [s for _, sa, sb, _, _ in items for s in (sa, sb)]
            out.append((w, states, masks_of(offsets, spans), items))
        out.sort(key=lambda t: len(t[1]))
        return [out[k : k + BATCH_WINDOWS] for k in range(0, len(out), BATCH_WINDOWS)]

    def kinds(items):
        x = torch.zeros(len(items), len(KINDS))
        for r, (i, *_rest) in enumerate(items):
            k = kind_of(examples[i])
            if k in KINDS:
                x[r, KINDS.index(k)] = 1.0
        return x

    def logits(batch):
        h = run_top(reader, [states for _, states, _, _ in batch])
        feats, items = [], []
        for k, (_, _, masks, its) in enumerate(batch):
            p = pooled(h[k, : masks.shape[1]], masks)  # (2 * pairs, H)
            a, b = p[0::2], p[1::2]
            feats.append(torch.cat([a, b, a * b], dim=-1))
            items.extend(its)
        x = torch.cat([torch.cat(feats), kinds(items)], dim=-1)
        return reader.head(x), items

    train_batches = grouped(train_rows, True)
    params = [
        {"params": [p for layer in reader.top for p in layer.parameters()], "lr": LR_ENCODER},
        {"params": reader.head.parameters(), "lr": LR_HEAD},
    ]
    optimizer = torch.optim.AdamW(params, weight_decay=0.01)
    steps = epochs * len(train_batches)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, 1 - s / max(1, steps)))
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")
    for epoch in range(epochs):
        reader.model.train()
        reader.head.train()
        rnd.shuffle(train_batches)
        total, seen = 0.0, 0
        started = time.perf_counter()
        for batch in train_batches:
            out, items = logits(batch)
            y = torch.tensor([it[3] for it in items])
            w = torch.tensor([it[4] for it in items])
            loss = (loss_fn(out, y) * w).sum() / w.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            total += float(loss) * len(items)
            seen += len(items)
        log(f"epoch {epoch + 1}/{epochs}: loss {total / max(1, seen):.4f}, {time.perf_counter() - started:.0f} s")
    reader.model.eval()
    reader.head.eval()
    probs = np.zeros((len(test_rows), len(LABELS)), dtype=np.float32)
    position = {i: j for j, i in enumerate(test_rows)}
    started = time.perf_counter()
    with torch.inference_mode():
        for batch in grouped(test_rows, False):
            out, items = logits(batch)
            p = torch.softmax(out, dim=-1).numpy()
            for row, it in zip(p, items):
                probs[position[it[0]]] = row
    log(f"read {len(test_rows)} candidates in {time.perf_counter() - started:.0f} s")
    return probs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--golden", action="append", required=True)
    parser.add_argument("--left-out", action="append", help="corpus names to leave out in turn (default: each)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--layers", type=int, default=3, help="top transformer layers trained (the rest frozen)")
    parser.add_argument("--cache", help="pickle of the collected candidates, reused when present")
    args = parser.parse_args(argv)
    missing = [g for g in args.golden if not (Path(g) / "annotations").is_dir()]
    if missing:
        print(f"skipped: annotated folder(s) not found: {', '.join(missing)}", file=sys.stderr)
        return 0

    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from relation_dense import logistic_head

    from kgr import config as config_mod
    from kgr.learn import relations as learn

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    if args.cache and Path(args.cache).exists():
        with open(args.cache, "rb") as fh:
            data, evidence = pickle.load(fh)
    else:
        data, evidence = gather(args.golden, config_mod.load(), log)
        if args.cache:
            with open(args.cache, "wb") as fh:
                pickle.dump((data, evidence), fh)
    examples = [e for d in data for e in d.examples]
    log(f"{len(examples)} candidates, {len({w for w, _, _ in evidence})} distinct evidence texts")
    names = [d.corpus.name for d in data]
    started = time.perf_counter()
    lower = Reader(args.layers).lower([w for w, _, _ in evidence])  # the frozen layers: the same for every run
    log(f"lower layers read {len(lower)} windows in {time.perf_counter() - started:.0f} s")
    for name in args.left_out or names:
        d = data[names.index(name)]
        test = [i for i, e in enumerate(examples) if e.corpus == name]
        train = [i for i, e in enumerate(examples) if e.corpus != name]
        sparse = logistic_head(examples, None, dims=0, scale=1.0)(train, test)
        started = time.perf_counter()
        tuned = fine_tune(examples, evidence, train, test, layers=args.layers, epochs=args.epochs, log=log, lower=lower)
        seconds = time.perf_counter() - started
        sub = [examples[i] for i in test]
        for variant, probs in (("sparse", sparse), ("tuned", tuned), ("mean", (sparse + tuned) / 2)):
            chosen, veto, _ = learn.best_threshold([d], sub, probs)
            best = learn.pair_scores([d], sub, probs, chosen, veto)[name]
            fixed = learn.pair_scores([d], sub, probs, 0.5, 0.0)[name]
            print(
                f"{name:<14}{variant:<8} chosen {best['f1']:.3f} ({best['precision']:.2f}/{best['recall']:.2f})"
                f"  at 0.5 {fixed['f1']:.3f} ({fixed['precision']:.2f}/{fixed['recall']:.2f})",
                flush=True,
            )
        related = [(e, k) for k, e in enumerate(sub) if e.label is not None and e.label != "none"]
        for variant, probs in (("sparse", sparse), ("tuned", tuned)):
            right = sum(1 for e, k in related if learn.LABELS[int(np.argmax(probs[k, 1:])) + 1] == e.label)
            print(f"{name:<14}{variant:<8} likeliest relation right for {right}/{len(related)} related candidates")
        print(f"{name:<14}tuned reader trained and read in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
