"""Shared fixtures. Tests that need ../shared skip with a clear reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KGR_SHARED", REPO.parent / "shared"))


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KGR_SLOW") == "1":
        return
    skip_slow = pytest.mark.skip(reason="slow test: set KGR_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def examples() -> Path:
    return REPO / "examples"


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"needs the shared evaluation data at {SHARED} (absent on this machine)")
    return SHARED


@pytest.fixture()
def db(tmp_path) -> Path:
    return tmp_path / "kb.sqlite"


@pytest.fixture(autouse=True)
def _stable_env(monkeypatch):
    # Deterministic redaction tags, no config leaking in from the developer's shell.
    monkeypatch.setenv("KGR_REDACT_KEY", "test-key")
    for name in list(os.environ):
        if name.startswith("KGR_") and name not in ("KGR_REDACT_KEY", "KGR_SLOW", "KGR_SHARED", "KGR_SEED"):
            monkeypatch.delenv(name, raising=False)
