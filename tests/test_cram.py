"""Run the cram transcripts in tests/cram/ (real pipes, exit codes, --help)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CRAM = Path(__file__).parent / "cram"


def test_cram_transcripts():
    tests = sorted(CRAM.glob("*.t"))
    if not tests:
        pytest.skip("no cram transcripts")
    exe = shutil.which("cram")
    cmd = [exe] if exe else [sys.executable, "-m", "cram"]
    proc = subprocess.run(
        [*cmd, "--shell=/bin/bash", "--indent=2", *map(str, tests)],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
