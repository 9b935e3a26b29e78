"""Fixtures for remember and recall: configurations (stub embedder for plumbing, the real
default model for meaning), a clock the tests move, and a memory database built once with
the real model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DAY_MS = 86_400_000
T0 = 1_750_000_000_000  # a fixed "now" for deterministic decay


class Clock:
    def __init__(self, t: int = T0):
        self.t = t

    def __call__(self) -> int:
        return self.t

    def advance(self, days: float) -> None:
        self.t += int(days * DAY_MS)


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def stub_cfg():
    from kgr import config

    return config.load(None, overrides={"embed.stub": True})


@pytest.fixture(scope="session")
def real_cfg():
    from kgr import config

    cfg = config.load(None)
    assert not cfg["embed"]["stub"]
    return cfg


@pytest.fixture()
def store(tmp_path):
    from kgr.store import Store

    s = Store(tmp_path / "mem.sqlite")
    yield s
    s.close()


# Memories with the real model: near-duplicates, a related but different fact, unrelated facts.
REAL_MEMORIES = {
    "berlin": "Alice Johnson moved to Berlin to work at Siemens.",
    "berlin_dup": "Alice Johnson has moved to Berlin to work for Siemens.",
    "munich": "Alice Johnson moved to Munich to work at BMW.",
    "dessert": "My favourite dessert is lemon tart.",
    "backups": "The staging database backups run every night at 2am.",
    "deploys": "Deploys to production are frozen during the last week of December.",
}

_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def real_db(tmp_path_factory, real_cfg) -> Path:
    """A database holding REAL_MEMORIES, remembered one day apart (built once)."""
    if "db" not in _BUILT:
        from kgr.memory import recall
        from kgr.store import Store

        path = tmp_path_factory.mktemp("recall-real") / "mem.sqlite"
        with Store(path) as s:
            for i, text in enumerate(REAL_MEMORIES.values()):
                recall.remember(s, text, real_cfg, clock=lambda i=i: T0 + i * DAY_MS)
        _BUILT["db"] = path
    return _BUILT["db"]


@pytest.fixture()
def real_store(real_db, tmp_path):
    from kgr.store import Store

    dest = tmp_path / "mem.sqlite"
    shutil.copy(real_db, dest)
    s = Store(dest)
    yield s
    s.close()
