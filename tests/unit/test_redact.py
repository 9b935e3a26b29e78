"""Redaction: rules catch real formats, leave look-alikes alone, and tags are stable and idempotent."""

import random
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from kgr.redact import redact


def rand(alphabet, n, seed):
    r = random.Random(seed)
    return "".join(r.choice(alphabet) for _ in range(n))


def test_recall_on_generated_secrets():
    up, alnum = string.ascii_uppercase + "234567", string.ascii_letters + string.digits
    for seed in range(20):
        secrets = {
            "aws-access-key-id": "AKIA" + rand(up, 16, seed),
            "github-token": "ghp_" + rand(alnum, 36, seed),
            "gitlab-token": "glpat-" + rand(alnum, 20, seed),
            "slack-token": "xoxb-" + rand(string.digits, 12, seed) + "-" + rand(alnum, 24, seed),
            "stripe-key": "sk_live_" + rand(alnum, 24, seed),
            "google-api-key": "AIza" + rand(alnum, 35, seed),
            "anthropic-api-key": "sk-ant-api03-" + rand(alnum, 93, seed),
            "openai-api-key": "sk-proj-" + rand(alnum, 48, seed),
            "jwt": "eyJ" + rand(alnum, 20, seed) + ".eyJ" + rand(alnum, 30, seed) + "." + rand(alnum, 30, seed),
        }
        for rule, secret in secrets.items():
            out, counts = redact(f"config: {secret} end", key=b"k")
            assert secret not in out and counts, (rule, secret)
    text = "db: https://svc:" + rand(alnum, 16, 1) + "@db.internal/x\npassword = " + rand(alnum, 14, 2) + "!\n"
    out, counts = redact(text, key=b"k")
    assert counts == {"url-credentials": 1, "generic-secret": 1}
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + rand(alnum, 64, 3) + "\n" + rand(alnum, 64, 4) + "\n-----END OPENSSH PRIVATE KEY-----"
    assert redact(pem, key=b"k")[1] == {"private-key": 1}


def test_false_positives_stay_untouched():
    lines = [
        "id 123e4567-e89b-12d3-a456-426614174000", "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "integrity sha512-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "AKIAIOSFODNN7EXAMPLE",
        "password = ${DB_PASSWORD}", "token: {{ secrets.TOKEN }}", 'api_version = "2024-01-01"', "key_id: primary",
        "token_count = 4096", "The password must be rotated every 90 days.", "| key | value |", "password: required",
        "image data:image/png;base64,iVBORw0KGgo=",
    ]
    for line in lines:
        assert redact(line, key=b"k")[0] == line, line


def test_tags_are_stable_per_key_and_differ_across_keys():
    secret = "password = " + rand(string.ascii_letters + string.digits, 16, 9) + "#"
    a1, a2, b = redact(secret, key=b"a")[0], redact(secret, key=b"a")[0], redact(secret, key=b"b")[0]
    assert a1 == a2 and a1 != b and "[REDACTED:generic-secret:" in a1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable, max_size=200))
def test_redaction_is_idempotent(text):
    once = redact(text, key=b"k")[0]
    assert redact(once, key=b"k")[0] == once
