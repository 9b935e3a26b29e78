"""Run the cram transcripts in tests/cram/ (real pipes, exit codes, --help), each as its own
test, so one failing transcript does not hide the others."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CRAM = Path(__file__).parent / "cram"
TRANSCRIPTS = sorted(CRAM.glob("*.t"))


@pytest.mark.parametrize("transcript", TRANSCRIPTS or [None], ids=lambda p: p.name if p else "none")
def test_cram_transcript(transcript):
    if transcript is None:
        pytest.skip("no cram transcripts")
    exe = shutil.which("cram")
    cmd = [exe] if exe else [sys.executable, "-m", "cram"]
    proc = subprocess.run(
        [*cmd, "--shell=/bin/bash", "--indent=2", str(transcript)],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
