"""`kgr ingest` on files holding the secrets issue 14.8 found leaking: no secret byte reaches the
database or its WAL, and no redaction tag becomes an entity or a mention (spaCy's model included)."""

from __future__ import annotations

import json
import os
import random
import re
import string
import subprocess
import sys

from kgr.store import Store


def rand(alphabet: str, n: int, seed: int) -> str:
    r = random.Random(seed)
    return "".join(r.choice(alphabet) for _ in range(n))


def test_ingest_stores_no_secret_and_no_tag_as_an_entity(tmp_path):
    b64 = string.ascii_letters + string.digits + "+/"
    key_body = [rand(b64, 64, s) for s in range(1, 6)] + [rand(b64, 24, 6) + "=="]
    passphrase = " ".join(rand(string.ascii_lowercase, 7, s) for s in range(10, 14))
    front_secret = rand(string.ascii_letters + string.digits, 14, 20) + "#"
    secrets = [
        "Example#2024x",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        front_secret,
        passphrase,
        *passphrase.split(),
        *key_body,
        *(line[:20] for line in key_body),
    ]

    root = tmp_path / "kb"
    root.mkdir()
    (root / "access.md").write_text(
        "# Access for the Harbor Relay\n\nMaria Lopez keeps the relay credentials.\n\n"
        "```\npassword: Example#2024x\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n```\n\n"
        "The key AKIAIOSFODNN7EXAMPLE was issued by Tomas Berg in Lisbon.\n"
    )
    (root / "deploy-key.txt").write_text(
        "Deploy key for the Quarry Scheduler, pasted by Ines Okafor:\n\n-----BEGIN RSA PRIVATE KEY-----\n"
        + "\n".join(key_body)
        + "\n\nAsk Ines Okafor before rotating it.\n"
    )
    (root / "vault.md").write_text(
        f"---\ntitle: Vault notes\ndb_password: {front_secret}\nowner: Dana Whitfield\n---\n"
        f'# Vault notes\n\nUnlock the vault with passphrase = "{passphrase}" and tell Dana Whitfield.\n'
    )

    db = tmp_path / "kb.sqlite"
    holder = Store(db)  # a second connection keeps the WAL file in place, so it can be searched too
    try:
        env = {**os.environ, "KGR_REDACT_KEY": "test-key"}
        proc = subprocess.run(
            [sys.executable, "-m", "kgr", "ingest", str(root), "--db", str(db), "--no-embed", "--json"],
            capture_output=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        blobs = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("kb.sqlite")}
    finally:
        holder.close()
    assert "kb.sqlite" in blobs and "kb.sqlite-wal" in blobs
    for secret in secrets:
        for name, data in blobs.items():
            assert secret.encode() not in data, f"{secret!r} is in {name}"
        assert secret.encode() not in proc.stdout + proc.stderr

    with Store(db, readonly=True) as s:
        assert s.scalar("SELECT count(*) FROM docs") == 3
        assert s.scalar("SELECT sum(json_extract(meta, '$.redactions')) FROM docs") >= 6
        front = json.loads(s.scalar("SELECT meta FROM docs WHERE path = 'vault.md'"))["front_matter"]
        assert isinstance(front["db_password"], str) and front["db_password"].startswith("[REDACTED:")
        surfaces = [r[0] for r in s.query("SELECT surface FROM mentions")]
        names = [r[0] for r in s.query("SELECT name || ' ' || aliases FROM entities")]
        terms = [r[0] for r in s.query("SELECT term FROM gazetteer")]
        labelled = s.scalar("SELECT count(*) FROM mentions WHERE json_extract(features, '$.ner_label') IS NOT NULL")
    leaked = [t for t in surfaces + names + terms if re.search(r"REDACTED|PRIVATE KEY|-----", t)]
    assert not leaked, leaked
    assert labelled, "spaCy's model did not read the prose (no mention carries its label)"
    assert {"Maria Lopez", "Ines Okafor", "Dana Whitfield"} <= set(surfaces)
