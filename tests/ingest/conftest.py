import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    harness.terminal_summary(terminalreporter)


@pytest.fixture()
def live(tmp_path):
    """live(root, **opts) starts a writer and a watcher; all are closed at the end."""
    started = []

    def start(root, db=None, cfg=None, **opts):
        h = harness.Live(root, db or tmp_path / "kb.sqlite", cfg, **opts)
        started.append(h)
        return h

    yield start
    for h in reversed(started):
        h.close()


@pytest.fixture()
def counters(monkeypatch):
    return harness.Counters(monkeypatch)


def pytest_configure(config):
    # watchdog re-adding a watch for a folder moved back under the root warns; it is harmless.
    config.addinivalue_line("filterwarnings", "ignore:Callback with id:RuntimeWarning")
