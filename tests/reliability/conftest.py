import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ingest"))

import harness  # noqa: E402  (tests/ingest/harness.py: live writer, checks, figures)


def pytest_terminal_summary(terminalreporter):
    # When tests/ingest is collected too, its conftest prints the figures.
    if not any("tests/ingest" in str(p) for p in terminalreporter.config.args):
        harness.terminal_summary(terminalreporter)
