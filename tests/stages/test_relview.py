"""The relation model's dense view: the same evidence reads the same, whatever the process."""

import os
import subprocess
import sys

import numpy as np

# Evidence texts of equal length but different word pieces, more than one batch of them: batches
# whose members change with the process's string hashing pad differently, which moves the states in
# their last bits; the training that reads them then does not reproduce its weights.
SCRIPT = """
import random, sys
import numpy as np
from kgr.stages.relview import default_reader
rng = random.Random(7)
words = ["service", "the", "ledger", "zq", "x7", "kgr", "uses", "on", "a", "Tidewater", "#", "%"]
texts = set()
while len(texts) < 120:
    t = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
    texts.add(("Alpha " + t + " Beta")[:60])
reader = default_reader()
assert reader is not None, "the default embedding model did not load"
np.save(sys.argv[1], reader.vectors([(t, (0, 5), (len(t) - 4, len(t))) for t in sorted(texts)]))
"""


def test_the_dense_view_does_not_depend_on_string_hashing(tmp_path):
    views = []
    for seed in ("1", "2"):
        out = tmp_path / f"view{seed}.npy"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, check=True, timeout=300)
        views.append(np.load(out))
    assert views[0].shape == (120, 768)
    assert np.abs(views[0]).sum() > 0  # the names were read, not left at zeros
    assert np.array_equal(views[0], views[1])
