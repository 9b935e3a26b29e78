"""Hostile-folder benchmark (issue 14): a knowledge folder with every hostile case in it
next to N ordinary files, run through `kgr ingest` and `kgr watch`.

    python bench/bench_hostile.py [--ordinary 200] [--keep DIR] [--skip-watch]
                                        [--without CASE,...] [--timeout 3600]
                                        [--huge-mb 50] [--huge-paragraph 400]

Builds, from a seeded random generator (nothing is copied from a corpus):

- N ordinary Markdown pages about generated people, teams and services that own, lead
  and depend on each other (headings, paragraphs, dependency lists);
- the hostile cases: a text over 1,000,000 characters, a symlink loop (two links), a
  50 MB file, invalid UTF-8, five planted secrets (a password line, the AWS documentation
  key, a private-key block with no END line, a quoted passphrase with spaces, a password in
  a YAML front-matter block scalar), a corrupt PDF, a junk PDF, an encrypted PDF, a
  zip-bomb DOCX, a binary file named .md, an empty file, a NUL inside text, deeply nested
  HTML, a very long line, and a file name with a newline, spaces and non-ASCII letters.

Then (1) `kgr ingest FOLDER --db A.sqlite` and (2) `kgr watch FOLDER --db B.sqlite` in the
background, waited for with `kgr status --db B.sqlite --wait-idle`, stopped with SIGINT.
For each database it checks:

- every ordinary file: a document row with status ok, >= 1 chunk, a vector for every
  chunk (chunk_vec), >= 1 mention linked to an entity (the graph was built), and no
  error line naming it;
- every hostile file, by what it should become (column "expected"):
  ok       ingested like an ordinary file (same checks), and no error line naming it;
  fail     exactly one error line naming it on stderr, no chunks, and (when the file
           could be stat'ed) a document row with status failed (so it is not re-parsed);
  partial  exactly one line naming it on stderr, a document with chunks and vectors,
           marked partial: docs.status = 'partial', or a true meta.partial or meta.truncated;
  empty    exactly one warning line naming it, a document row not failed, no chunks;
  a|b      either outcome, all of its checks;
- no planted secret (its distinctive substring, in its own case and lower-cased; for the
  private key, three lines of its body) in the bytes of the .sqlite, -wal and -shm files:
  for watch while it still runs, then after each process exits, then after an explicit
  `PRAGMA wal_checkpoint(TRUNCATE)`. A plain sentence of the same file must be found by the
  same scan, else the secret's row fails as "not tested" (absence proves nothing then);
- the run itself: ingest exits 1 (files failed) with its summary line and no traceback;
  watch comes up, reaches idle, and exits 130 on SIGINT without a traceback; `kgr verify`
  finds the indexes (I2) and storage (I3) sound.

Choices where the issue leaves room: the five secret files are ordinary pages with a secret
in them, so they must be ingested (redacted) with no error line; an empty file is a hostile
file that is not an error (an editor's new file, a placeholder): one warning line naming it,
a document row that is not failed (so it is not parsed again) and no chunks; a NUL inside text may be refused as binary
or kept as partial; deeply nested HTML may be ingested or refused, but once and without a
hang; each link of the symlink loop is a file name of its own and gets its own error line.
The 50 MB file is made of short paragraphs as a real export is (each paragraph is compared
with those kept before it by the near-duplicate filter); --huge-paragraph 65536 gives few,
huge paragraphs instead. --without CASE,... leaves cases out, to see the others when one
case stops the whole run.

"Error line naming it": a stderr line is attributed to the file whose path (or its escaped
form) appears earliest in it; lines naming no file are listed as unattributed. The table
prints case, expected, observed and PASS/FAIL; exit 0 only if every row passes.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the kgr next to this script, as the children get through PYTHONPATH
SEED = 14

# -- ordinary files ------------------------------------------------------------------------

FIRST = [
    "Maria",
    "Jonas",
    "Aiko",
    "Samuel",
    "Priya",
    "Lukas",
    "Elena",
    "Tomasz",
    "Fatima",
    "Oliver",
    "Ines",
    "Kwame",
    "Sofia",
    "Daniel",
    "Hannah",
    "Mateo",
    "Yuki",
    "Amara",
    "Felix",
    "Nora",
    "Rafael",
    "Leila",
    "Henrik",
    "Chiara",
]
LAST = [
    "Keller",
    "Okafor",
    "Tanaka",
    "Lindqvist",
    "Moreau",
    "Novak",
    "Haddad",
    "Fischer",
    "Costa",
    "Brennan",
    "Sato",
    "Mensah",
    "Varga",
    "Rossi",
    "Dubois",
    "Kowalski",
    "Alvarez",
    "Nakamura",
    "Berg",
    "Schmidt",
    "Adeyemi",
    "Horvat",
]
TEAM_WORDS = [
    "Platform",
    "Payments",
    "Identity",
    "Search",
    "Data",
    "Billing",
    "Logistics",
    "Messaging",
    "Risk",
    "Storage",
    "Observability",
    "Checkout",
    "Fraud",
    "Catalog",
]
SERVICE_HEADS = [
    "Ledger",
    "Orbit",
    "Beacon",
    "Harbor",
    "Atlas",
    "Quartz",
    "Falcon",
    "Nimbus",
    "Cobalt",
    "Juniper",
    "Sequoia",
    "Meridian",
    "Tundra",
    "Pioneer",
    "Lantern",
    "Granite",
    "Zephyr",
    "Copper",
]
SERVICE_TAILS = ["Store", "Gateway", "Service", "API", "Scheduler", "Index", "Cache", "Broker", "Router", "Vault"]
REGIONS = ["Frankfurt", "Dublin", "Singapore", "Oregon", "Sydney", "Toronto", "Tokyo", "Madrid"]
VERBS_USE = ["calls", "reads from", "writes to", "sends events to", "uses"]
TOPICS = [
    "latency budgets",
    "capacity planning",
    "schema migrations",
    "incident reviews",
    "release trains",
    "retention rules",
    "rate limits",
    "failover drills",
    "cost reports",
    "access reviews",
]


@dataclass
class World:
    people: list[str]
    teams: list[str]
    services: list[str]
    owner: dict[str, str]  # service -> team
    lead: dict[str, str]  # team -> person
    member: dict[str, str]  # person -> team
    deps: dict[str, list[str]]  # service -> services it depends on
    region: dict[str, str]


def make_world(rng: random.Random) -> World:
    people = sorted({f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(80)})[:48]
    teams = [f"{w} Team" for w in rng.sample(TEAM_WORDS, 12)]
    services = sorted({f"{rng.choice(SERVICE_HEADS)} {rng.choice(SERVICE_TAILS)}" for _ in range(120)})[:60]
    owner = {s: rng.choice(teams) for s in services}
    lead = {t: p for t, p in zip(teams, rng.sample(people, len(teams)))}
    member = {p: rng.choice(teams) for p in people}
    member.update({p: t for t, p in lead.items()})
    deps = {s: rng.sample([x for x in services if x != s], rng.randint(1, 4)) for s in services}
    region = {s: rng.choice(REGIONS) for s in services}
    return World(people, teams, services, owner, lead, member, deps, region)


def _service_page(w: World, s: str, rng: random.Random, n: int) -> str:
    team = w.owner[s]
    oncall = rng.choice([p for p in w.people if w.member[p] == team] or [w.lead[team]])
    lines = [f"# {s}", ""]
    if rng.random() < 0.4:
        lines[:0] = ["---", f"title: {s} (page {n})", f"tags: [{team.split()[0].lower()}, service]", "---", ""]
    lines += [
        "## Overview",
        "",
        f"{s} is owned by {team}. It runs in {w.region[s]} and handles "
        f"{rng.choice(TOPICS)} for the {rng.choice(TEAM_WORDS).lower()} domain. "
        f"{w.lead[team]} leads {team} and signs off every change to {s}.",
        "",
    ]
    lines += ["## Dependencies", ""] + [f"- {d}" for d in w.deps[s]] + [""]
    lines += [
        "## Operations",
        "",
        f"{oncall} is on call for {s} this quarter. {s} {rng.choice(VERBS_USE)} {rng.choice(w.deps[s])}, so an "
        f"outage there shows up here within minutes. The runbook was last reviewed by {rng.choice(w.people)} "
        f"after the {rng.choice(TOPICS)} session in week {rng.randint(1, 52)}.",
        "",
    ]
    if rng.random() < 0.5:
        other = rng.choice(w.services)
        lines += [
            "## History",
            "",
            f"{s} replaced an older system in {rng.randint(2015, 2025)}. {rng.choice(w.people)} moved its "
            f"data, and {other} took over the reporting it used to do.",
            "",
        ]
    return "\n".join(lines)


def _team_page(w: World, t: str, rng: random.Random, n: int) -> str:
    owned = [s for s in w.services if w.owner[s] == t] or [rng.choice(w.services)]
    members = [p for p in w.people if w.member[p] == t]
    lines = [
        f"# {t}",
        "",
        "## Mission",
        "",
        f"{t} is led by {w.lead[t]}. The team owns {', '.join(owned[:5])} and meets every "
        f"{rng.choice(['Monday', 'Tuesday', 'Thursday'])} to go through {rng.choice(TOPICS)}.",
        "",
        "## People",
        "",
    ]
    lines += [f"- {p}: works on {rng.choice(owned)}" for p in (members[:6] or [w.lead[t]])] + [""]
    lines += [
        "## Notes",
        "",
        f"In the last planning round {w.lead[t]} asked {rng.choice(w.people)} to review how "
        f"{rng.choice(owned)} depends on {rng.choice(w.services)} (review {n}).",
        "",
    ]
    return "\n".join(lines)


def _person_page(w: World, p: str, rng: random.Random, n: int) -> str:
    team = w.member[p]
    s = rng.choice(w.services)
    return "\n".join(
        [
            f"# {p}",
            "",
            f"{p} is a member of {team} and reports to {w.lead[team]}.",
            "",
            "## Work",
            "",
            f"{p} maintains {s}, which is owned by {w.owner[s]} and runs in {w.region[s]}. "
            f"Earlier {p.split()[0]} worked on {rng.choice(w.services)} with {rng.choice(w.people)}.",
            "",
            "## Meeting notes",
            "",
            f"Note {n}: {p} presented the {rng.choice(TOPICS)} for {s}; {rng.choice(w.people)} will follow up "
            f"with {rng.choice(w.teams)} before the next release.",
            "",
        ]
    )


def ordinary_pages(n: int, rng: random.Random) -> list[tuple[str, str]]:
    w = make_world(rng)
    out = []
    for i in range(n):
        kind = i % 5
        if kind in (0, 1, 2):
            subject = w.services[i % len(w.services)]
            text, folder = _service_page(w, subject, rng, i), "services"
        elif kind == 3:
            subject = w.teams[i % len(w.teams)]
            text, folder = _team_page(w, subject, rng, i), "teams"
        else:
            subject = w.people[i % len(w.people)]
            text, folder = _person_page(w, subject, rng, i), "people"
        slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
        out.append((f"{folder}/p{i:03d}-{slug}.md", text))
    return out


# -- hostile cases -------------------------------------------------------------------------


@dataclass
class Case:
    name: str  # the label in the table and for --without
    rel: str  # path relative to the folder
    expect: str  # ok, fail, partial, or "a|b"
    what: str
    secrets: list[str] = field(default_factory=list)  # substrings that must not reach the database
    canary: str | None = None  # plain text of the same file that must reach it (else the scan proves nothing)
    min_chunks: int = 1
    has_stat: bool = True  # a failure can be recorded as a docs row (the file can be stat'ed)


def _filler(rng: random.Random, n_chars: int) -> str:
    words = [
        *SERVICE_HEADS,
        *TEAM_WORDS,
        "runs",
        "owns",
        "depends",
        "on",
        "the",
        "team",
        "service",
        "release",
        "week",
        "review",
        "data",
        "after",
        "before",
        "with",
        "and",
        "for",
    ]
    out, size = [], 0
    while size < n_chars:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 16))).capitalize() + "."
        out.append(sentence)
        size += len(sentence) + 1
    return " ".join(out)


def _pdf(objects: list[bytes], trailer_extra: bytes = b"") -> bytes:
    """A PDF with a correct cross-reference table from numbered object bodies."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer_extra, xref)
    return bytes(out)


def encrypted_pdf(rng: random.Random) -> bytes:
    """A one-page PDF behind the standard security handler (RC4, revision 2) whose /U entry
    matches no password, so the empty user password is refused: an encrypted PDF we cannot open."""
    o = bytes(rng.getrandbits(8) for _ in range(32)).hex().encode()
    u = bytes(rng.getrandbits(8) for _ in range(32)).hex().encode()
    file_id = bytes(rng.getrandbits(8) for _ in range(16)).hex().encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length 12 >>\nstream\n\x8a\x11\x93\xfe\x02\x7f\x55\xc1\x0e\x9d\x42\x3b\nendstream",
        b"<< /Filter /Standard /V 1 /R 2 /O <" + o + b"> /U <" + u + b"> /P -44 >>",
    ]
    return _pdf(objects, b"/Encrypt 5 0 R /ID [<" + file_id + b"> <" + file_id + b">] ")


def corrupt_pdf() -> bytes:
    """A real PDF's start, then the file breaks off inside a content stream: no xref, no trailer."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    ]
    whole = _pdf(objects)
    cut = whole[: whole.index(b"xref")]
    return cut + b"4 0 obj\n<< /Length 9999 /Filter /FlateDecode >>\nstream\n" + zlib.compress(b"BT /F1 12 Tf")[:7]


def bomb_docx(path: Path, inflated_mb: int) -> None:
    """A small .docx whose word/document.xml inflates to ``inflated_mb`` MB (spaces compress ~1000:1)."""
    ct = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument" Target="word/document.xml"/></Relationships>'
    )
    head = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        "<w:p><w:r><w:t>Harbor Gateway is owned by Payments Team.</w:t></w:r></w:p><w:p><w:r><w:t>"
    )
    tail = "</w:t></w:r></w:p></w:body></w:document>"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", ct)
        zf.writestr("_rels/.rels", rels)
        with zf.open("word/document.xml", "w", force_zip64=True) as member:
            member.write(head.encode())
            block = b" " * (1 << 20)
            for _ in range(inflated_mb):
                member.write(block)
            member.write(tail.encode())


def build_folder(
    root: Path, n_ordinary: int, without: set[str], huge_mb: int, para_chars: int = 400
) -> tuple[list[tuple[str, str]], list[Case]]:
    rng = random.Random(SEED)
    ordinary = ordinary_pages(n_ordinary, rng)
    for rel, text in ordinary:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")

    h = root / "hostile"
    h.mkdir(parents=True, exist_ok=True)
    key_body = [base64.b64encode(bytes(rng.getrandbits(8) for _ in range(48))).decode() for _ in range(20)]
    cases = [
        Case(
            "big-text",
            "hostile/ledger-1m.md",
            "ok",
            "'The Ledger Store is owned by Treasury Team. ' x 25000 (1.1M chars): ingested in pieces",
            min_chunks=2,
        ),
        Case("symlink-loop-x", "hostile/loop-x.md", "fail", "x.md -> y.md, a link in a loop", has_stat=False),
        Case("symlink-loop-y", "hostile/loop-y.md", "fail", "y.md -> x.md, a link in a loop", has_stat=False),
        Case(
            "50mb-file",
            "hostile/huge-50mb.txt",
            "partial",
            f"{huge_mb} MB of distinct ~{para_chars}-character paragraphs: kept partially",
        ),
        Case("invalid-utf8", "hostile/bad-utf8.md", "partial", "text with invalid UTF-8 bytes in it"),
        Case(
            "secret-password",
            "hostile/secret-password.md",
            "ok",
            "a line 'password: Example#2024x'",
            secrets=["Example#2024x"],
            canary="Rotate it after every release of Beacon Router",
        ),
        Case(
            "secret-aws-key",
            "hostile/secret-aws.md",
            "ok",
            "the AWS documentation key AKIAIOSFODNN7EXAMPLE",
            secrets=["AKIAIOSFODNN7EXAMPLE"],
            canary="The backup job runs nightly",
        ),
        Case(
            "secret-key-no-end",
            "hostile/secret-private-key.md",
            "ok",
            "a BEGIN RSA PRIVATE KEY block with no END line",
            secrets=[key_body[0], key_body[9], key_body[19]],
            canary="Henrik Berg rotated the key in March",
        ),
        Case(
            "secret-passphrase",
            "hostile/secret-passphrase.md",
            "ok",
            'passphrase: "amber falcon sings at midnight" (quoted, with spaces)',
            secrets=["amber falcon sings at midnight"],
            canary="Keep the recovery sheet in the safe",
        ),
        Case(
            "secret-front-matter",
            "hostile/secret-front-matter.md",
            "ok",
            "front matter 'database_password: >-' with the value on the next line",
            secrets=["Tr0ub4dor&3-billing-prod"],
            canary="Leila Haddad is on call for Zephyr Gateway",
        ),
        Case("corrupt-pdf", "hostile/corrupt.pdf", "fail", "a PDF cut off inside a content stream"),
        Case("junk-pdf", "hostile/junk.pdf", "fail", "random bytes named .pdf"),
        Case("encrypted-pdf", "hostile/encrypted.pdf", "fail", "a PDF under the standard security handler"),
        Case("zip-bomb-docx", "hostile/bomb.docx", "fail", "a ~100 KB .docx whose document.xml inflates to 200 MB"),
        Case("binary-as-md", "hostile/image.md", "fail", "PNG bytes named .md"),
        Case("empty-file", "hostile/empty.md", "empty", "a file of 0 bytes"),
        Case("nul-in-text", "hostile/nul-inside.md", "fail|partial", "20 KB of text with a NUL byte at 12 KB"),
        Case("deep-html", "hostile/deep.html", "ok|fail", "50,000 nested <div> elements around one sentence"),
        Case("long-line", "hostile/long-line.md", "ok", "one 400,000-character line (one 60,000-character word)"),
        Case(
            "weird-filename",
            "hostile/weird\nname ünïcødé 文件 with spaces.md",
            "ok",
            "an ordinary page under a name with a newline, spaces and non-ASCII letters",
        ),
    ]
    cases = [c for c in cases if c.name not in without]
    names = {c.name for c in cases}

    def put(rel: str, data: bytes | str) -> None:
        p = root / rel
        p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    if "big-text" in names:
        put(
            "hostile/ledger-1m.md", "# Ledger Store\n\n" + "The Ledger Store is owned by Treasury Team. " * 25000 + "\n"
        )
    if "symlink-loop-x" in names or "symlink-loop-y" in names:
        os.symlink("loop-y.md", h / "loop-x.md")
        os.symlink("loop-x.md", h / "loop-y.md")
    if "50mb-file" in names:
        # Distinct paragraphs of about ``para_chars`` characters, as in a real export or log (each
        # paragraph is compared with the ones kept before it by the near-duplicate filter).
        with open(h / "huge-50mb.txt", "w", encoding="utf-8") as fh:
            target = huge_mb * 1024 * 1024
            written = 0
            fh.write("Cobalt Archive export\n\n")
            while written < target:
                para = _filler(rng, rng.randint(para_chars // 2, para_chars * 3 // 2))
                fh.write(para + "\n\n")
                written += len(para) + 2
    if "invalid-utf8" in names:
        put(
            "hostile/bad-utf8.md",
            b"# Quartz Index notes\n\nQuartz Index is owned by Search Team. It runs in Dublin.\n\n"
            b"The import from the old system left bytes like \xff\xfe and \xc3\x28 and \xe2\x82 in this line.\n\n"
            b"Maria Keller reviews the Quartz Index schema every quarter.\n",
        )
    if "secret-password" in names:
        put(
            "hostile/secret-password.md",
            "# Beacon Router access\n\nBeacon Router is owned by Identity Team.\n\n"
            "The admin console login for the staging box:\n\npassword: Example#2024x\n\n"
            "Rotate it after every release of Beacon Router.\n",
        )
    if "secret-aws-key" in names:
        put(
            "hostile/secret-aws.md",
            "# Nimbus Cache deployment\n\nNimbus Cache is owned by Platform Team and uses "
            "an AWS account for its backups.\n\n```ini\n[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
            "region = eu-central-1\n```\n\nThe backup job runs nightly.\n",
        )
    if "secret-key-no-end" in names:
        put(
            "hostile/secret-private-key.md",
            "# Granite Broker signing\n\nGranite Broker is owned by Messaging Team. "
            "The signing key was pasted here by mistake:\n\n-----BEGIN RSA PRIVATE KEY-----\n"
            + "\n".join(key_body)
            + "\n\nAfter the paste, the page goes on: Henrik Berg rotated the key in March.\n",
        )
    if "secret-passphrase" in names:
        put(
            "hostile/secret-passphrase.md",
            "# Harbor Vault recovery\n\nHarbor Vault is owned by Storage Team.\n\n"
            'passphrase: "amber falcon sings at midnight"\n\nKeep the recovery sheet in the safe.\n',
        )
    if "secret-front-matter" in names:
        put(
            "hostile/secret-front-matter.md",
            "---\ntitle: Zephyr Gateway runbook\ndatabase_password: >-\n"
            "  Tr0ub4dor&3-billing-prod\ntags: [billing]\n---\n\n# Zephyr Gateway runbook\n\n"
            "Zephyr Gateway is owned by Billing Team. Leila Haddad is on call for Zephyr Gateway.\n",
        )
    if "corrupt-pdf" in names:
        put("hostile/corrupt.pdf", corrupt_pdf())
    if "junk-pdf" in names:
        put("hostile/junk.pdf", bytes(rng.getrandbits(8) for _ in range(40000)))
    if "encrypted-pdf" in names:
        put("hostile/encrypted.pdf", encrypted_pdf(rng))
    if "zip-bomb-docx" in names:
        bomb_docx(h / "bomb.docx", 200)
    if "binary-as-md" in names:
        put("hostile/image.md", b"\x89PNG\r\n\x1a\n" + bytes(rng.getrandbits(8) for _ in range(30000)))
    if "empty-file" in names:
        put("hostile/empty.md", b"")
    if "nul-in-text" in names:
        text = "# Pioneer Scheduler\n\nPioneer Scheduler is owned by Logistics Team.\n\n" + _filler(rng, 20000)
        put("hostile/nul-inside.md", text[:12000] + "\x00" + text[12000:] + "\n")
    if "deep-html" in names:
        depth = 50000
        put(
            "hostile/deep.html",
            "<!doctype html><html><head><title>Deep page</title></head><body>"
            + "<div>" * depth
            + "<p>Atlas Gateway is owned by Checkout Team.</p>"
            + "</div>" * depth
            + "</body></html>",
        )
    if "long-line" in names:
        line = _filler(rng, 170000) + " " + "Lantern" * 8572 + " " + _filler(rng, 170000)
        put("hostile/long-line.md", "# Lantern Cache dump\n\n" + line + "\n")
    if "weird-filename" in names:
        put(
            "hostile/weird\nname ünïcødé 文件 with spaces.md",
            "# Meridian Index\n\nMeridian Index is owned by Data Team. "
            "Nora Sato leads Data Team and reviews every change to Meridian Index.\n",
        )
    return ordinary, cases


# -- running kgr ---------------------------------------------------------------------------


def kgr_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "kgr", *args]


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.setdefault("KGR_REDACT_KEY", "kgr-bench-hostile")  # a fixed tag key: no per-user key file needed
    return env


@dataclass
class Run:
    label: str
    db: Path
    exit_code: int | None
    stderr: list[str]
    seconds: float
    problems: list[str] = field(default_factory=list)  # about the run itself (no summary, timeout, traceback)
    scans: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # phase -> needle -> files holding it


def run_ingest(folder: Path, db: Path, timeout: float, needles: list[str]) -> Run:
    cmd = kgr_cmd("ingest", str(folder), "--db", str(db), "--no-progress")
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, env=child_env(), timeout=timeout)
        code, err = proc.returncode, proc.stderr
        problems = []
    except subprocess.TimeoutExpired as exc:
        code, err = None, exc.stderr or b""
        problems = [f"did not finish within {timeout:g}s"]
    db.with_suffix(".ingest.log").write_bytes(err)
    run = Run(
        "ingest", db, code, err.decode("utf-8", "backslashreplace").splitlines(), time.perf_counter() - t, problems
    )
    if code is not None and code != 1:
        run.problems.append(f"exit status {code}, expected 1 (hostile files failed)")
    if not any(re.search(r"\d+ files seen, .* ingested", ln) for ln in run.stderr):
        run.problems.append("no summary line on stderr")
    scan_phases(run, needles, "after exit")
    return run


def run_watch(folder: Path, db: Path, timeout: float, needles: list[str]) -> Run:
    cmd = kgr_cmd("watch", str(folder), "--db", str(db))
    print("$ " + " ".join(cmd) + " &", file=sys.stderr, flush=True)
    log_path = db.with_suffix(".watch.log")
    log = open(log_path, "wb")
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=child_env())
    run = Run("watch", db, None, [], 0.0)
    try:
        from kgr.store.lock import writer_pid

        # --wait-idle returns at once while no writer holds the lock: first wait for the watcher to take it.
        while writer_pid(db) is None and proc.poll() is None and time.perf_counter() - t < timeout:
            time.sleep(0.1)
        if proc.poll() is not None:
            run.problems.append(f"watch exited early with status {proc.returncode}")
        else:
            left = max(1.0, timeout - (time.perf_counter() - t))
            wait = kgr_cmd("status", "--db", str(db), "--wait-idle", "--timeout", f"{left:.0f}", "--json")
            print("$ " + " ".join(wait), file=sys.stderr, flush=True)
            st = subprocess.run(wait, capture_output=True, env=child_env())
            run.seconds = time.perf_counter() - t
            if st.returncode != 0:
                run.problems.append(
                    f"kgr status --wait-idle exited {st.returncode}: "
                    + st.stderr.decode("utf-8", "replace").strip()[:300]
                )
            elif proc.poll() is not None:
                run.problems.append(f"watch died before idle (status {proc.returncode})")
            scan_phases(run, needles, "watch running", checkpoint=False)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                run.problems.append("did not stop within 120 s of SIGINT; killed")
                proc.kill()
                proc.wait()
        log.close()
    run.exit_code = proc.returncode
    if not run.seconds:
        run.seconds = time.perf_counter() - t
    if proc.returncode != 130:
        run.problems.append(f"exit status {proc.returncode} after SIGINT, expected 130")
    run.stderr = log_path.read_bytes().decode("utf-8", "backslashreplace").splitlines()
    scan_phases(run, needles, "after exit")
    return run


def scan_files(db: Path, needles: list[str]) -> dict[str, list[str]]:
    """needle -> names of the database files (.sqlite, -wal, -shm) whose bytes hold it (as is or lower-cased)."""
    found: dict[str, list[str]] = {n: [] for n in needles}
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(db) + suffix)
        if not p.exists():
            continue
        data = p.read_bytes()
        lower = data.lower()
        for n in needles:
            b = n.encode("utf-8")
            if b in data or b.lower() in lower:
                found[n].append(p.name)
    return found


def scan_phases(run: Run, needles: list[str], phase: str, checkpoint: bool = True) -> None:
    run.scans[phase] = scan_files(run.db, needles)
    if not checkpoint or not run.db.exists():
        return
    import apsw

    conn = apsw.Connection(str(run.db))
    try:
        conn.setbusytimeout(10000)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        run.scans[phase + ", checkpointed"] = scan_files(run.db, needles)
    finally:
        conn.close()


# -- checking a database -------------------------------------------------------------------


@dataclass
class DocFacts:
    status: str | None = None
    error: str | None = None
    meta: dict = field(default_factory=dict)
    chunks: int = 0
    no_vector: int = 0
    mentions: int = 0
    linked: int = 0


def db_facts(db: Path) -> dict[str, DocFacts]:
    from kgr.store import Store, vectors

    out: dict[str, DocFacts] = {}
    if not db.exists():
        return out
    with Store(db, readonly=True) as store:
        ids = {}
        for did, path, status, error, meta in store.query("SELECT id, path, status, error, meta FROM docs"):
            try:
                meta = json.loads(meta or "{}")
            except ValueError:
                meta = {}
            out[path] = DocFacts(status, error, meta if isinstance(meta, dict) else {})
            ids[did] = path
        for did, n in store.query("SELECT doc_id, count(*) FROM chunks GROUP BY doc_id"):
            out[ids[did]].chunks = n
        if vectors.has_tables(store):
            missing = store.query(
                "SELECT doc_id, count(*) FROM chunks WHERE id NOT IN (SELECT rowid FROM chunk_vec) GROUP BY doc_id"
            )
        else:
            missing = store.query("SELECT doc_id, count(*) FROM chunks GROUP BY doc_id")
        for did, n in missing:
            out[ids[did]].no_vector = n
        for did, n, linked in store.query("SELECT doc_id, count(*), count(entity_id) FROM mentions GROUP BY doc_id"):
            out[ids[did]].mentions, out[ids[did]].linked = n, linked
    return out


def attribute_lines(lines: list[str], paths: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Each stderr line to the file it names first (escaped forms too); the rest (and crash
    tracebacks, which the run's own row reports) unattributed."""
    forms = []
    for p in paths:
        esc = p.encode("unicode_escape", "backslashreplace").decode("ascii")
        forms += [(p, p)] + ([(esc, p)] if esc != p else [])
    by_path: dict[str, list[str]] = {p: [] for p in paths}
    other = []
    crashes = set(crash_lines(lines))
    for ln in lines:
        if ln[:1].isspace() or ln.startswith("Traceback") or ln in crashes:
            other.append(ln)  # part of a crash: reported on the run's row, not as a file's error
            continue
        best = None
        for form, p in forms:
            i = ln.find(form)
            if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(form) > best[1])):
                best = (i, len(form), p)
        if best:
            by_path[best[2]].append(ln)
        else:
            other.append(ln)
    return by_path, other


def is_partial(f: DocFacts) -> bool:
    return f.status == "partial" or bool(f.meta.get("partial")) or f.meta.get("truncated") is True


def judge_ok(f: DocFacts | None, lines: list[str], min_chunks: int = 1) -> list[str]:
    """What is wrong for a file that should be ingested in full (empty when nothing)."""
    if f is None:
        return ["no document row"]
    bad = []
    if f.status != "ok":
        bad.append(f"status {f.status}" + (f" ({_short(f.error)})" if f.error else ""))
    if f.chunks < min_chunks:
        bad.append(f"{f.chunks} chunks (want >= {min_chunks})")
    if f.no_vector:
        bad.append(f"{f.no_vector}/{f.chunks} chunks without a vector")
    if f.linked < 1:
        bad.append(f"no linked mention ({f.mentions} mentions)")
    if lines:
        bad.append(f"{len(lines)} error line(s): {_short(lines[0])}")
    return bad


def judge_fail(f: DocFacts | None, lines: list[str], has_stat: bool) -> list[str]:
    bad = []
    if len(lines) != 1:
        bad.append(f"{len(lines)} error lines (want 1)" + (f": {_short(lines[0])}" if lines else ""))
    if f is not None and f.chunks:
        bad.append(f"{f.chunks} chunks stored (status {f.status})")
    if has_stat and (f is None or f.status != "failed"):
        bad.append("no failed document row" if f is None else f"status {f.status}, not failed")
    return bad


def judge_partial(f: DocFacts | None, lines: list[str]) -> list[str]:
    bad = []
    if len(lines) != 1:
        bad.append(f"{len(lines)} report lines (want 1)" + (f": {_short(lines[0])}" if lines else ""))
    if f is None:
        return bad + ["no document row"]
    if f.chunks < 1:
        bad.append(f"no chunks (status {f.status}" + (f", {_short(f.error)})" if f.error else ")"))
    if f.no_vector:
        bad.append(f"{f.no_vector}/{f.chunks} chunks without a vector")
    if not is_partial(f):
        bad.append(f"not marked partial (status {f.status})")
    return bad


def judge_empty(f: DocFacts | None, lines: list[str]) -> list[str]:
    bad = []
    if len(lines) != 1:
        bad.append(f"{len(lines)} report lines (want 1)" + (f": {_short(lines[0])}" if lines else ""))
    if f is None:
        return bad + ["no document row"]
    if f.status == "failed":
        bad.append("status failed (an empty file is not an error)")
    if f.chunks:
        bad.append(f"{f.chunks} chunks")
    return bad


def observed(f: DocFacts | None, lines: list[str]) -> str:
    if f is None:
        doc = "no doc row"
    else:
        doc = f"{f.status}, {f.chunks} ch"
        if f.chunks:
            doc += f", {f.chunks - f.no_vector} vec, {f.linked} linked"
        if is_partial(f):
            doc += ", partial"
    return f"{doc}; {len(lines)} line(s)"


def _short(text: str, n: int = 90) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 3] + "..."


def crash_lines(lines: list[str]) -> list[str]:
    """The exception line of each traceback, the CLI's "Error:" lines, and writer jobs that raised."""
    out, in_tb = [], False
    for ln in lines:
        if ln.startswith("Traceback"):
            in_tb = True
        elif in_tb and ln and not ln[0].isspace() and not ln.startswith(("During handling", "The above exception")):
            out.append(ln)
            in_tb = False
        elif not in_tb and (ln.startswith("Error: ") or re.search(r"\b(?:watch|writer): .*\bfailed: ", ln)):
            out.append(ln)
    return out


def check_run(
    run: Run, folder: Path, ordinary: list[tuple[str, str]], cases: list[Case], timeout: float
) -> list[tuple[str, str, str, bool]]:
    rows: list[tuple[str, str, str, bool]] = []
    tag = run.label
    crashes = crash_lines(run.stderr)
    problems = run.problems + ([f"{len(crashes)} crash(es): {_short(crashes[0], 160)}"] if crashes else [])
    expect_run = "exit 1, summary, no crash" if tag == "ingest" else "idle, exit 130 on SIGINT, no crash"
    rows.append((f"{tag}: the run", expect_run, "; ".join(problems) or f"exit {run.exit_code}", not problems))

    facts = db_facts(run.db)
    all_paths = [rel for rel, _ in ordinary] + [c.rel for c in cases]
    by_path, other = attribute_lines(run.stderr, all_paths)

    # ordinary files: one row for all of them, with the first few failures named
    bad_ordinary = []
    for rel, _ in ordinary:
        bad = judge_ok(facts.get(rel), by_path[rel])
        if bad:
            bad_ordinary.append(f"{rel}: {', '.join(bad)}")
    n = len(ordinary)
    obs = f"{n - len(bad_ordinary)}/{n} complete" + (f"; e.g. {_short(bad_ordinary[0], 140)}" if bad_ordinary else "")
    rows.append((f"{tag}: {n} ordinary files", "doc ok, chunks, vectors, graph", obs, not bad_ordinary))

    for c in cases:
        f, lines = facts.get(c.rel), by_path[c.rel]
        outcomes = []
        for want in c.expect.split("|"):
            if want == "ok":
                outcomes.append(judge_ok(f, lines, c.min_chunks))
            elif want == "fail":
                outcomes.append(judge_fail(f, lines, c.has_stat))
            elif want == "empty":
                outcomes.append(judge_empty(f, lines))
            else:
                outcomes.append(judge_partial(f, lines))
        ok = any(not bad for bad in outcomes)
        why = "" if ok else " -- " + " / ".join(", ".join(bad) for bad in outcomes)
        rows.append((f"{tag}: {c.name}", c.expect, observed(f, lines) + why, ok))

    # stderr lines that name no file: shown, and counted against nothing but listed for the reader
    noise = [ln for ln in other if re.search(r"\b(?:normalize|chunk|load|extract|link|embed|graph): ", ln)]
    rows.append(
        (
            f"{tag}: unattributed error lines",
            "0",
            f"{len(noise)}" + (f": {_short(noise[0])}" if noise else ""),
            not noise,
        )
    )

    # secrets, phase by phase; a secret is only looked for where the rest of its file was found
    for c in cases:
        canary_seen = c.canary is not None and any(found[c.canary] for found in run.scans.values())
        for needle in c.secrets:
            hits = [
                f"{phase}: {', '.join(files)}"
                for phase, found in run.scans.items()
                for files in [found[needle]]
                if files
            ]
            shown = needle if len(needle) <= 24 else needle[:12] + "..." + needle[-6:]
            if hits:
                obs, ok = "; ".join(hits), False
            elif not canary_seen:
                obs, ok = f"not tested: the file's other text ({c.canary!r}) is not in the database either", False
            else:
                obs, ok = f"absent ({len(run.scans)} scans; the file's other text found)", True
            rows.append((f"{tag}: secret {c.name} '{shown}'", "absent from db, -wal, -shm", obs, ok))

    rows.append((f"{tag}: kgr verify (indexes, storage)", "I2 and I3 ok", *verify(folder, run.db)))
    return rows


def verify(folder: Path, db: Path) -> tuple[str, bool]:
    if not db.exists():
        return "no database", False
    proc = subprocess.run(
        kgr_cmd("verify", str(folder), "--db", str(db), "--json"), capture_output=True, env=child_env()
    )
    try:
        rep = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = proc.stderr.decode("utf-8", "replace").splitlines()
        shown = (crash_lines(err) or err or ["no output"])[-1]
        return f"exit {proc.returncode}: {_short(shown, 160)}", False
    idx, sto = rep["index"], rep.get("storage", {})
    info = (
        f"index {'ok' if idx['ok'] else 'BAD'}, storage {'ok' if sto.get('ok') else 'BAD'} "
        f"({len(rep['missing'])} files without a row, {len(rep['extra'])} extra, {len(rep['stale'])} stale)"
    )
    return info, bool(idx["ok"] and sto.get("ok"))


# -- main ----------------------------------------------------------------------------------


def print_table(rows: list[tuple[str, str, str, bool]]) -> None:
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'case':<{w0}}  {'expected':<{w1}}  result  observed")
    print("-" * (w0 + w1 + 60))
    for case, exp, obs, ok in rows:
        print(f"{case:<{w0}}  {exp:<{w1}}  {'PASS' if ok else 'FAIL':<6}  {obs}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ordinary", type=int, default=200, help="ordinary Markdown files next to the hostile ones")
    ap.add_argument("--keep", metavar="DIR", help="build and keep everything in DIR (must not exist or be empty)")
    ap.add_argument("--skip-watch", action="store_true", help="only run kgr ingest")
    ap.add_argument(
        "--without",
        default="",
        metavar="CASE,...",
        help="leave these hostile cases out (e.g. to see the others when one stops the run)",
    )
    ap.add_argument("--huge-mb", type=int, default=50, help="size of the big file [50]")
    ap.add_argument(
        "--huge-paragraph",
        type=int,
        default=400,
        metavar="CHARS",
        help="mean paragraph length in the big file [400]; 65536 makes few, huge paragraphs",
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds each of ingest and watch may take [3600]")
    args = ap.parse_args()

    if args.keep:
        work = Path(args.keep).resolve()
        if work.exists() and any(work.iterdir()):
            ap.error(f"--keep {work}: not empty")
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="kgr-hostile-"))
    folder = work / "kb"
    folder.mkdir()
    without = {w.strip() for w in args.without.split(",") if w.strip()}
    t = time.perf_counter()
    ordinary, cases = build_folder(folder, args.ordinary, without, args.huge_mb, args.huge_paragraph)
    size = sum(p.lstat().st_size for p in folder.rglob("*"))
    print(
        f"built {folder}: {len(ordinary)} ordinary files, {len(cases)} hostile cases, {size / 1e6:.1f} MB "
        f"in {time.perf_counter() - t:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    needles = [s for c in cases for s in c.secrets] + [c.canary for c in cases if c.canary]

    rows = []
    timings = []
    ingest = run_ingest(folder, work / "A.sqlite", args.timeout, needles)
    timings.append(f"ingest wall time        {ingest.seconds:.1f}s (exit {ingest.exit_code})")
    rows += check_run(ingest, folder, ordinary, cases, args.timeout)
    runs = [ingest]
    if not args.skip_watch:
        watch = run_watch(folder, work / "B.sqlite", args.timeout, needles)
        timings.append(f"watch time-to-idle      {watch.seconds:.1f}s (exit {watch.exit_code} after SIGINT)")
        rows += check_run(watch, folder, ordinary, cases, args.timeout)
        runs.append(watch)

    print_table(rows)
    print()
    for line in timings:
        print(line)
    for run in runs:
        by_path, other = attribute_lines(run.stderr, [r for r, _ in ordinary] + [c.rel for c in cases])
        if other:
            print(f"\n{run.label}: stderr lines naming no file ({len(other)}):")
            for ln in other[:15]:
                print("  " + _short(ln, 200))
            if len(other) > 15:
                print(f"  ... {len(other) - 15} more")
    failed = sum(1 for r in rows if not r[3])
    print(f"\n{len(rows) - failed}/{len(rows)} checks passed; work dir {work}" + ("" if args.keep else " (removed)"))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
