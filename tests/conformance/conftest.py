"""Fixtures of the seed conformance tests: the examples knowledge base (built once, real model) and
the helpers of seed_client.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))

from serve_fixtures import built_kb, kb_copy  # noqa: E402,F401 - the examples knowledge base, built once


@pytest.fixture()
def errlog(tmp_path) -> Path:
    """Where a test's server subprocess writes its stderr."""
    return tmp_path / "server-stderr.txt"
