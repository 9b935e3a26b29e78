"""Real processes: closed pipes, Ctrl-C, and stdout carrying data only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

KGR = [sys.executable, "-m", "kgr"]


def test_closed_pipe_exits_quietly(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(400):
        (root / f"f{i:03}.md").write_text(f"# Page {i}\n\n" + "word " * 200)
    proc = subprocess.run(
        f"{sys.executable} -m kgr normalize {root} | head -c 100 > /dev/null; echo ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip() == "0"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_interrupt_exits_130():
    # A shell that starts jobs in the background hands them SIGINT ignored; a user's kgr has the default.
    proc = subprocess.Popen(
        [*KGR, "chunk"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(3)  # let it start and block on stdin
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert b"Traceback" not in err


def test_traceback_flag_shows_the_traceback(tmp_path):
    missing = str(tmp_path / "x.sqlite")  # a read of a database that does not exist: an error
    plain = subprocess.run([*KGR, "query", "anything", "--db", missing], capture_output=True, text=True)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    full = subprocess.run([*KGR, "--traceback", "query", "anything", "--db", missing], capture_output=True, text=True)
    assert full.returncode == 1 and "Traceback" in full.stderr and "StoreError" in full.stderr


def test_status_does_not_import_heavy_libraries(tmp_path):
    db = tmp_path / "kb.sqlite"
    code = (
        "import sys\n"
        "from kgr.cli import main\n"
        "try:\n"
        f"    main(['status', '--db', {str(db)!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'spacy', 'sentence_transformers', 'pdfplumber', 'docx', 'transformers') if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    from kgr.store import Store

    Store(db).close()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stderr.strip().splitlines()[-1] == "[]"
