"""`kgr embed --pending` brings a database's vectors up to date, sentence vectors included, and says what it did."""

import re
import subprocess
import sys

from kgr.store import Store, vectors


def kgr(*args, cwd):
    return subprocess.run([sys.executable, "-m", "kgr", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_embed_pending_fills_chunk_and_sentence_vectors_once(examples, tmp_path):
    db = tmp_path / "kb.sqlite"
    proc = kgr("ingest", str(examples / "kb" / "handbook"), "--db", str(db), "--no-embed", "--no-graph", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = kgr("embed", "--pending", "--db", str(db), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with Store(db, readonly=True) as store:
        chunks = store.scalar("SELECT count(*) FROM chunks")
        assert vectors.counts(store)["chunk_vectors"] == chunks == vectors.sentence_chunks(store) > 0
    said = re.search(r"embedded (\d+) chunks and entities, and the sentences of (\d+) chunks", proc.stderr)
    assert said and int(said[1]) >= chunks and int(said[2]) == chunks, proc.stderr
    again = kgr("embed", "--pending", "--db", str(db), cwd=tmp_path)
    assert again.returncode == 0 and "embedded 0 chunks and entities\n" in again.stderr, again.stderr
    status = kgr("status", "--db", str(db), cwd=tmp_path)
    assert f"sentence vectors of {chunks} chunks" in status.stdout, status.stdout
