import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "watch"))

import harness  # noqa: E402  (tests/watch/harness.py: live writer, checks, figures)


def pytest_terminal_summary(terminalreporter):
    # When tests/watch is collected too, its conftest prints the figures.
    if not any("tests/watch" in str(p) for p in terminalreporter.config.args):
        harness.terminal_summary(terminalreporter)
