"""Secret redaction, run on extracted text before anything leaves the normalize stage.

Rules follow gitleaks: vendor formats with their prefixes (AWS, GitHub, GitLab, Slack,
Stripe, OpenAI, Anthropic, Google), JWTs, PEM private keys (with or without their END
line), credentials in URLs, and a generic rule for password/secret/token assignments
whose value has enough entropy and is not a placeholder, or is a quoted passphrase.
A placeholder is told by its shape (a reference, a mask, plain words), never by what it
spells: a key-shaped value is a secret even if it reads "EXAMPLE". Patterns run on RE2
(linear time: a 50 MB line cannot make them backtrack). A secret is replaced by
``[REDACTED:<rule>:<8 hex of HMAC(key, secret)>]``: stable for one key, so the same
secret gets the same tag everywhere, and unlinkable across keys; tags match no rule, so
redaction is idempotent.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from collections import Counter
from pathlib import Path

import re2

TAG = "[REDACTED:{rule}:{digest}]"
# A tag, with or without its brackets (a Markdown or YAML reader may drop them): what no later stage may read as a name.
TAG_CORE = r"REDACTED:[a-z0-9-]+:[0-9a-f]{8}"
TAG_PATTERN = rf"\[?{TAG_CORE}\]?"
PEM_HEADER = r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
# Words that name a secret in an assignment ("db_password = ...", "passphrase: ...").
SECRET_NAME = (
    r"\b[\w.-]{0,40}(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|"
    r"credential|creds|private[_-]?key|client[_-]?secret)[\w.-]{0,20}[\"']?\s*(?:=|:=|:|=>|\s+is\s+)\s*"
)

# (rule id, pattern, group holding the secret (0 = whole match), keywords prefilter (lower case), min entropy)
RULES: list[tuple[str, str, int, tuple[str, ...], float]] = [
    (
        "private-key",
        PEM_HEADER + r"[\s\S]{16,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----",
        0,
        ("private key",),
        0.0,
    ),
    # A block with no END line (truncated, pasted in part): the header, RFC 1421 headers, and every
    # following line that is base64 (also the JSON-escaped "\\n..." form and the one-line paste).
    (
        "private-key",
        r"(?m)"
        + PEM_HEADER
        + r"(?:[ \t]*[A-Za-z0-9+/=\\]{16,})*(?:[ \t]+[A-Za-z0-9+/]*={1,2})?(?:\r?\n[ \t>]*(?:Proc-Type|DEK-Info|Comment):[^\r\n]*)*"
        r"(?:\r?\n[ \t>]*\r?$)?(?:\r?\n[ \t>#;/*\"']*[A-Za-z0-9+/=\\]+[ \t\"',;]*\r?$)*",
        0,
        ("private key",),
        0.0,
    ),
    (
        "aws-access-key-id",
        r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b",
        1,
        ("a3t", "akia", "asia", "abia", "acca"),
        3.0,
    ),
    (
        "aws-secret-access-key",
        r"(?i)aws.{0,20}?(?:secret|sk|key).{0,20}?[=:]\s*[\"']?([A-Za-z0-9/+=]{40})\b",
        1,
        ("aws",),
        3.5,
    ),
    (
        "github-token",
        r"\b((?:ghp|gho|ghu|ghs|ghr)_[0-9A-Za-z]{36,255})\b",
        1,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        3.0,
    ),
    ("github-fine-grained-pat", r"\b(github_pat_[0-9A-Za-z_]{60,255})\b", 1, ("github_pat_",), 3.0),
    (
        "gitlab-token",
        r"\b(gl(?:pat|dt|ptt|rt|cbt|oas)-[0-9A-Za-z_-]{20,60})\b",
        1,
        ("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-"),
        3.0,
    ),
    ("slack-token", r"\b(xox[baprs]-[0-9A-Za-z-]{10,250})\b", 1, ("xox",), 3.0),
    (
        "slack-webhook",
        r"(https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/_-]{40,120})",
        1,
        ("hooks.slack.com",),
        3.0,
    ),
    ("stripe-key", r"\b((?:sk|rk)_(?:live|test|prod)_[0-9A-Za-z]{10,99})\b", 1, ("sk_", "rk_"), 3.0),
    ("anthropic-api-key", r"\b(sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,120})", 1, ("sk-ant-",), 3.0),
    (
        "openai-api-key",
        r"\b(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,200}T3BlbkFJ[A-Za-z0-9_-]{20,200})\b",
        1,
        ("t3blbkfj",),
        3.0,
    ),
    (
        "openai-api-key",
        r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,200})\b",
        1,
        ("sk-proj-", "sk-svcacct-", "sk-admin-"),
        3.5,
    ),
    ("google-api-key", r"\b(AIza[0-9A-Za-z_-]{35})\b", 1, ("aiza",), 3.0),
    ("jwt", r"\b(ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})", 1, ("eyj",), 3.0),
    (
        "url-credentials",
        r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@\"'<>]{1,64}:([^\s:/@\"'<>]{3,128})@[A-Za-z0-9.-]+",
        1,
        ("://",),
        0.0,
    ),
    # A YAML block scalar ("db_password: >-" with the value indented on the next line): its first line.
    (
        "generic-secret",
        r"(?i)" + SECRET_NAME + r"[|>][-+0-9]{0,2}[ \t]*\r?\n[ \t]+([^\s][^\r\n]{6,148}[^\s])",
        1,
        ("pass", "pwd", "secret", "token", "key", "credential", "creds"),
        3.0,
    ),
    # A quoted value, spaces and all ("correct horse battery staple"): the group holds the quotes, which stay.
    (
        "generic-secret",
        r"(?i)" + SECRET_NAME + r"(\"[^\"\r\n]{8,150}\"|'[^'\r\n]{8,150}'|`[^`\r\n]{8,150}`)",
        1,
        ("pass", "pwd", "secret", "token", "key", "credential", "creds"),
        3.0,
    ),
    (
        "generic-secret",
        r"(?i)" + SECRET_NAME + r"[\"'`]?([^\s\"'`,;]{8,150})",
        1,
        ("pass", "pwd", "secret", "token", "key", "credential", "creds"),
        3.0,
    ),
]

# Values that stand for a secret without being one, told by their shape, never by what they spell: references
# (${VAR}, {{ secrets.X }}, %VAR%, <your-password>, env.X, vault:path, YOUR_API_KEY), masks (****, xxxx)
# and single words (changeme, None). A value with digits or symbols mixed into letters is
# key-shaped, whatever word it contains ("Example#2024x", "AKIAIOSFODNN7EXAMPLE").
PLACEHOLDER = re2.compile(
    r"^(?:\$\{?[\w.-]+\}?|\{\{.*\}\}|%[\w]+%|<[^>]*>|\[[^\]]*\]|\*+|[xX]+|\.+|#+|-+|"
    r"(?i:env|process\.env|os\.environ|vault|secrets?)[.:\[(].*)$"
)
# One word, or a constant's name (YOUR_API_KEY: a reference); words joined by dashes are a passphrase.
WORDS = re2.compile(r"^(?:[a-z]+|[A-Z]+|[A-Z][a-z]+|[A-Z]+(?:_[A-Z]+)+)$")
TAG_RE = re2.compile(rf"\[{TAG_CORE}\]")
QUOTES = "\"'`"
GENERIC_ENTROPY = 3.0

_COMPILED = [
    (rule, re2.compile(pattern), group, keywords, entropy) for rule, pattern, group, keywords, entropy in RULES
]


def shannon_entropy(text: str) -> float:
    if not text:
        return 0.0
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def default_key() -> bytes:
    """$KGR_REDACT_KEY, else a per-user random key kept in $XDG_DATA_HOME/kgr/redact.key."""
    env = os.environ.get("KGR_REDACT_KEY")
    if env:
        return env.encode()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "kgr"
    path = base / "redact.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        base.mkdir(parents=True, exist_ok=True)
        key = os.urandom(32).hex().encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        return key
    except OSError:
        return b"kgr-default-redaction-key"


def tag(rule: str, secret: str, key: bytes) -> str:
    digest = hmac.new(key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:8]
    return TAG.format(rule=rule, digest=digest)


def _is_secret(rule: str, value: str, min_entropy: float) -> bool:
    if "REDACTED:" in value:
        return False  # a tag, or a value quoting one
    if rule == "private-key" and "-----END" not in value:
        # a header named in prose is not a key: what follows it must have a base64 run
        body = value[value.index("-----", 5) + 5 :]
        return re2.search(r"[A-Za-z0-9+/=]{16,}", body) is not None
    if rule == "generic-secret":
        if value[:1] in QUOTES and value[-1:] == value[:1]:
            value = value[1:-1]
            if any(c.isspace() for c in value.strip()):
                # a passphrase: secret whole unless the quotes hold a reference or a mask
                return not (PLACEHOLDER.match(value.strip()) or len(set(value.replace(" ", ""))) <= 2)
            min_entropy = GENERIC_ENTROPY
        if PLACEHOLDER.match(value) or WORDS.match(value) or len(set(value)) <= 2:
            return False
    return shannon_entropy(value) >= min_entropy if min_entropy else True


def redact(text: str, *, key: bytes | None = None) -> tuple[str, dict[str, int]]:
    """Return the text with secrets replaced by tags, and how many of each rule were found."""
    if not text:
        return text, {}
    key = key if key is not None else default_key()
    lower = text.lower()
    counts: dict[str, int] = {}
    for rule, rx, group, keywords, min_entropy in _COMPILED:
        if keywords and not any(k in lower for k in keywords):
            continue
        spans = []
        tags = [m.span() for m in TAG_RE.finditer(text)] if "[REDACTED:" in text else []
        for m in rx.finditer(text):
            s, e = m.span(group)
            if s < 0:
                continue
            if any(ts < m.end() and m.start() < te for ts, te in tags):
                continue  # never redact (part of) a tag again
            value = text[s:e]
            if _is_secret(rule, value, min_entropy):
                if value[:1] in QUOTES and value[-1:] == value[:1]:
                    s, e, value = s + 1, e - 1, value[1:-1]  # the quotes stay, so the value stays a string
                spans.append((s, e, value))
        if not spans:
            continue
        out, last = [], 0
        for s, e, value in spans:
            out.append(text[last:s])
            out.append(tag(rule, value, key))
            last = e
        out.append(text[last:])
        text = "".join(out)
        lower = text.lower()
        counts[rule] = counts.get(rule, 0) + len(spans)
    return text, counts
