"""Seed 000 section 16: "maintain an allowlist of paths". ``security.allowlist`` narrows what may be
read under the knowledge root (the root still confines every path): the matcher, the pipeline
(kgr ingest, sync_paths under the writer and the watcher, kgr verify) and what a client asks for."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgr import config as config_mod
from kgr import confine
from kgr.errors import OutsideRoot
from kgr.ingest import pipeline, verify
from kgr.store import Store

PATTERNS = ["docs/**", "policies/*.md", "README.md"]


@pytest.mark.parametrize(
    ("rel", "ok"),
    [
        ("docs/a.md", True),
        ("docs/deep/er/b.md", True),
        ("policies/retention.md", True),
        ("policies/old/retention.md", False),  # * stays within one folder
        ("policies/retention.txt", False),
        ("README.md", True),
        ("sub/README.md", False),  # a pattern with no ** is anchored at the root
        ("docsx/a.md", False),  # never a string prefix
        ("secret/key.md", False),
    ],
)
def test_allowlist_matching(rel, ok):
    assert confine.allowed(rel, PATTERNS) is ok


def test_no_allowlist_allows_everything_and_absolute_patterns_are_taken_under_the_root():
    assert confine.allowed("any/where.md", ()) is True
    root = Path("/knowledge")
    assert confine.allowed("docs/a.md", ["/knowledge/**/*.md"], root=root) is True
    assert confine.allowed("docs/a.txt", ["/knowledge/**/*.md"], root=root) is False
    assert confine.allowed("docs/a.md", ["/elsewhere/**"], root=root) is False  # outside the root: nothing


@pytest.mark.parametrize(
    ("folder", "ok"),
    [("", True), ("docs", True), ("docs/x", True), ("policies", True), ("secret", False), ("policies/old", False)],
)
def test_a_folder_passes_when_it_may_hold_allowed_files(folder, ok):
    assert confine.may_hold_allowed(folder, PATTERNS) is ok


def kb(tmp_path) -> Path:
    root = tmp_path / "kb"
    for rel in ("docs/a.md", "docs/deep/b.md", "policies/p.md", "secret/key.md", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {Path(rel).stem}\n\nWords about {Path(rel).stem} here.\n")
    return root


def test_allowed_targets_refuses_a_named_file_and_drops_glob_matches(tmp_path):
    root = kb(tmp_path)
    base = root.resolve()
    with pytest.raises(OutsideRoot, match="allowlist"):
        confine.allowed_targets(root, ["secret/key.md"], [str(base / "secret/key.md")], PATTERNS)
    with pytest.raises(OutsideRoot, match="allowlist"):
        confine.allowed_targets(root, ["secret"], [str(base / "secret")], PATTERNS)
    with pytest.raises(OutsideRoot, match="allowlist"):  # named by its absolute path
        confine.allowed_targets(root, [str(base / "secret/key.md")], [str(base / "secret/key.md")], PATTERNS)
    matches = [str(base / p) for p in ("README.md", "docs/a.md", "secret/key.md")]
    assert confine.allowed_targets(root, ["**/*.md"], matches, PATTERNS) == matches[:2]
    assert confine.allowed_targets(root, ["."], [str(base)], PATTERNS) == [str(base)]
    assert confine.allowed_targets(root, ["secret/key.md"], [str(base / "secret/key.md")], ()) == [
        str(base / "secret/key.md")
    ]


def cfg(**over):
    return config_mod.load(None, overrides={"embed.stub": True, "normalize.workers": 1, **over})


def stored(store: Store) -> list[str]:
    return [p for (p,) in store.query("SELECT path FROM docs WHERE source='file' ORDER BY path")]


def test_sync_paths_reads_only_allowed_files_and_purges_what_leaves_the_allowlist(tmp_path):
    root = kb(tmp_path)
    with Store(tmp_path / "kb.sqlite") as store:
        pipeline.sync_paths(store, root, None, config=cfg(), graph=False, embed=False)
        assert len(stored(store)) == 5
        narrow = cfg(**{"security.allowlist": PATTERNS})
        s = pipeline.sync_paths(store, root, None, config=narrow, graph=False, embed=False)
        assert stored(store) == ["README.md", "docs/a.md", "docs/deep/b.md", "policies/p.md"]
        assert s.pruned == 1
        s = pipeline.sync_paths(store, root, ["secret/key.md"], config=narrow, graph=False, embed=False)
        assert (s.ingested, s.seen) == (0, 0) and "secret/key.md" not in stored(store)
        # kgr verify agrees: the file outside the allowlist is not "missing"
        assert verify.check(store, root, graph=False, embed=False, allowlist=tuple(PATTERNS))["missing"] == []
        assert verify.check(store, root, graph=False, embed=False)["missing"] == ["secret/key.md"]


def test_kgr_ingest_lists_a_named_file_outside_the_allowlist_as_an_error(tmp_path):
    root = kb(tmp_path)
    errors = []
    with Store(tmp_path / "kb.sqlite") as store:
        s = pipeline.ingest(
            [str(root / "secret/key.md"), str(root / "docs")],
            store,
            root=str(root),
            config=cfg(**{"security.allowlist": ["docs/**"]}),
            graph=False,
            embed=False,
            on_error=errors.append,
        )
        assert stored(store) == ["docs/a.md", "docs/deep/b.md"]
    assert s.failed == 1 and [e["reason"] for e in errors] == ["not_allowed"]
    assert errors[0]["path"] == "secret/key.md" and "allowlist" in errors[0]["message"]


def test_the_allowlist_and_project_come_from_the_environment():
    settings = config_mod.load(None, env={"KGR_SECURITY_ALLOWLIST": "docs/**, README.md", "KGR_PROJECT": "acme"})
    assert settings.security.allowlist == ("docs/**", "README.md") and settings.project == "acme"
