"""Fixtures for `kgr viz` and `kgr export`: a knowledge base built from examples/kb by the
real pipeline (spaCy extraction and linking; the deterministic stub embedder, since
nothing here depends on vectors), a viz server on it, and headless Chromium.

Chromium is Debian's package (/usr/bin/chromium, or $KGR_CHROMIUM) driven by Playwright
for Python; no browser is downloaded. Without it the browser tests skip, except under
CI=true, where they fail: CI installs it (.ci/run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STUB_ENV = {"EMBEDDING_GEMMA_STUB": "1", "KGR_REDACT_KEY": "test-key"}


def build_kb(dest: Path) -> tuple[Path, Path]:
    """examples/kb copied to dest/kb and ingested into dest/kb.sqlite: (db, root)."""
    shutil.copytree(REPO / "examples" / "kb", dest / "kb")
    db = dest / "kb.sqlite"
    proc = subprocess.run(
        [sys.executable, "-m", "kgr", "ingest", str(dest / "kb"), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **STUB_ENV},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return db, dest / "kb"


@pytest.fixture(scope="session")
def built_kb(tmp_path_factory) -> tuple[Path, Path]:
    """Built once per session; tests that change the graph use ``kb`` (a private copy)."""
    return build_kb(tmp_path_factory.mktemp("viz-kb"))


@pytest.fixture()
def kb(built_kb, tmp_path) -> tuple[Path, Path]:
    src = built_kb[0].parent
    dest = tmp_path / "copy"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.writer.lock"))
    return dest / "kb.sqlite", dest / "kb"


class RunningServer:
    def __init__(self, db: Path):
        from kgr import viz

        self.server = viz.make_server(db, port=0)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        self.url = self.server.url
        self.port = self.server.port

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture()
def serve_viz():
    """serve_viz(db) -> a running viz server on a free port, stopped at the end of the test."""
    servers: list[RunningServer] = []

    def start(db: Path) -> RunningServer:
        servers.append(RunningServer(db))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def chromium_path() -> str | None:
    for candidate in (
        os.environ.get("KGR_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium (Playwright for Python over Debian's chromium package), per module:
    Playwright's sync API keeps an event loop of its own that later tests need not share."""
    path = chromium_path()
    ci = os.environ.get("CI", "").lower() == "true"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if ci:
            pytest.fail("playwright is not installed (pip install -e '.[test]')")
        pytest.skip("playwright is not installed (pip install -e '.[test]')")
    if path is None:
        if ci:
            pytest.fail("chromium is not installed; .ci/run installs it with apt-get install -y chromium")
        pytest.skip("needs chromium (apt-get install -y chromium) for the browser tests")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield browser
        browser.close()


def wait_until(page, js: str, *, timeout: float = 15.0, arg=None, what: str | None = None):
    """Poll ``js`` (a function expression) in the page until it returns something truthy.

    Playwright's own wait_for_function evaluates strings, which the page's
    Content-Security-Policy (script-src 'self') forbids; page.evaluate is not affected.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = page.evaluate(js, arg)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or js}")
        time.sleep(0.1)
