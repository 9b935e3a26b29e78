"""normalize on the examples: every format, titles, structure kept, boilerplate gone, order kept."""

from kgr.stages.normalize import NormalizeOptions, dedup_paragraphs, discover, normalize


def docs_of(examples):
    root = examples / "kb"
    return {r["path"]: r for r in normalize([str(root)], root=str(root), options=NormalizeOptions(redact_key=b"k"))}


def test_every_format_becomes_a_doc_with_title_and_structure(examples):
    docs = docs_of(examples)
    assert {d["format"] for d in docs.values()} == {"md", "txt", "html", "pdf", "docx"}
    assert all(d["kind"] == "doc" for d in docs.values())
    welcome = docs["handbook/welcome.md"]
    assert welcome["title"] == "Welcome to Marrow Bay Transit engineering"  # front matter
    assert welcome["meta"]["tags"] == ["onboarding", "handbook"] and not welcome["text"].startswith("---")
    html = docs["handbook/contacts.html"]
    assert html["title"] == "Contacts" and html["meta"]["breadcrumbs"][:2] == ["Home", "Handbook"]
    assert "| Rider Systems | Ines Okafor | Harbor Depot |" in html["text"]
    for junk in ("tracking-canary", "MBT Intranet", "Old phone list", "Related pages", "internal"):
        assert junk not in html["text"]
    pdf = docs["architecture/overview.pdf"]
    assert pdf["title"] == "MBT Systems Overview" and "## 1. Rider systems" in pdf["text"]
    assert "uncontrolled when printed" not in pdf["text"] and "Page 1" not in pdf["text"]
    docx = docs["meetings/2025-03-ops-review.docx"]
    assert docx["title"] == "Operations review: March 2025"
    assert "| Ship VLS v4.2.0 | Fleet Operations | 2025-04-15 |" in docx["text"]
    assert "Printed copies are uncontrolled" not in docx["text"]
    assert all(d["lang"] == "en" for d in docs.values())


def test_hash_is_of_the_text_and_output_is_deterministic(examples):
    from kgr.records import text_hash

    first, second = docs_of(examples), docs_of(examples)
    assert first == second
    assert all(d["hash"] == text_hash(d["text"]) for d in first.values())


def test_discover_ignores_dotfiles_editor_files_and_kgrignore(tmp_path):
    root = tmp_path / "kb"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "x.md").write_text("no")
    for name in (
        "a.md",
        ".hidden.md",
        "b.md~",
        ".#c.md",
        "#d.md#",
        "e.md.swp",
        "4913",
        "f.tmp",
        "notes.bin",
        "skip.md",
    ):
        (root / name).write_text("x")
    (root / ".kgrignore").write_text("skip.md\n")
    found = [f.rel_path for f in discover([str(root)], root=str(root))]
    assert found == ["a.md"]


def test_error_records_pass_through_in_order(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text("# A\n")
    out = list(
        normalize(
            [str(root / "missing.md"), str(root / "a.md")], root=str(root), options=NormalizeOptions(redact_key=b"k")
        )
    )
    assert [r["kind"] for r in out] == ["error", "doc"] and out[0]["reason"] == "not_found"


def test_near_duplicate_paragraphs_are_removed_but_code_and_tables_kept():
    para = "Production access is granted for eight hours after approval by the owning team lead and security."
    text = f"# T\n\n{para}\n\n```\n{para}\n```\n\n{para}\n\n| a | b |\n\n{para.replace('eight', 'eight')}\n"
    out, removed = dedup_paragraphs(text, threshold=0.9, min_chars=40)
    assert removed == 2 and out.count(para) == 2  # the first copy and the one inside the code fence


def test_a_redacted_front_matter_value_stays_a_string(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    (root / "a.md").write_text(
        "---\ntitle: Vault\ndb_password: Kq7#vR2pLx9w\napi_key: [REDACTED:generic-secret:0123abcd]\n"
        "passphrase: 'amber kite over salt'\n\"client_secret\": Zr4!kP9qWm2x\nowner: Dana\ntags: [ops, vault]\n---\n"
        "# Vault\n\nBody.\n"
    )
    (doc,) = normalize([str(root)], root=str(root), options=NormalizeOptions(redact_key=b"k"))
    front = doc["meta"]["front_matter"]
    for field in ("db_password", "api_key", "passphrase", "client_secret"):
        assert isinstance(front[field], str) and front[field].startswith("[REDACTED:"), front
    assert "Kq7#vR2pLx9w" not in str(doc) and "amber" not in str(doc) and "Zr4!kP9qWm2x" not in str(doc)
    assert front["owner"] == "Dana" and doc["meta"]["tags"] == ["ops", "vault"] and doc["title"] == "Vault"


def test_dedup_of_many_paragraphs_is_not_quadratic_and_matches_the_pairwise_rule():
    # a large export of short paragraphs took hours when each was compared with every kept one
    import random

    import numpy as np
    from datasketch import MinHash

    from kgr.stages import normalize as nz

    rng = random.Random(7)
    vocab = [f"word{i}" for i in range(2000)]
    paras = [" ".join(rng.choice(vocab) for _ in range(30)) for _ in range(3000)]
    for k in range(0, 3000, 5):  # exact and near repeats of earlier paragraphs
        src = paras[k // 3].split()
        if k % 2:
            src[rng.randrange(len(src))] = "changed"
        paras[k] = " ".join(src)
    text = "\n\n".join(paras)
    out, removed = nz.dedup_paragraphs(text, threshold=0.9, min_chars=40)
    # the brute-force rule, written out: drop when >= 90% of MinHash values equal a kept one's
    import re
    import zlib

    sets = [
        [" ".join(w[j : j + 3]).encode() for j in range(max(1, len(w) - 2))]
        for w in (re.findall(r"\w+", p.lower()) for p in paras)
    ]
    hvs = [
        m.hashvalues
        for m in MinHash.bulk(
            sets, num_perm=nz.NUM_PERM, permutations=nz._permutations(), scheme="affine32", hashfunc=zlib.crc32
        )
    ]
    kept, expected = [], []
    for p, hv in zip(paras, hvs):
        if kept and float((np.vstack(kept) == hv).mean(axis=1).max()) >= 0.9:
            continue
        kept.append(hv)
        expected.append(p)
    assert removed == len(paras) - len(expected) > 300
    assert out == "\n\n".join(expected)
