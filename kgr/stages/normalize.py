"""The normalize stage: files to ``doc`` records.

    discover(paths)  ->  FileRef ...  ->  normalize_files()  ->  doc | error records

Markdown and text are decoded in this process (they cannot hang a parser); HTML, PDF
and DOCX are parsed in child processes (kgr.stages.isolation). Then, in this process and in
this order: secrets are redacted (nothing unredacted leaves the stage), YAML front
matter goes to ``meta``, the title and language are found, near-duplicate paragraphs
are removed, over-long text is truncated and flagged, and the text is hashed.

File names that are not valid UTF-8 cannot be written as JSON strings; such files get
an error record with reason ``bad_filename`` (the name escaped in the message) rather
than a path that would not round-trip.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import math
import os
import re
import stat
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from kgr import records
from kgr.config import NormalizeSettings, settings_of
from kgr.errors import ParseFailure
from kgr.stages.parsers import CHILD_FORMATS, FORMATS, Limits, parse_text
from kgr.stages.redact import TAG_CORE

IGNORED_NAMES = re.compile(
    r"(?:~$|^\.#|^#.*#$|\.sw[a-p]$|^4913$|\.tmp$|\.bak$|___jb_(?:tmp|old)___$|\.crdownload$|\.part$)"
)


@dataclass(frozen=True)
class FileRef:
    abs_path: str
    rel_path: str
    size: int
    mtime_ms: int


@dataclass(frozen=True)
class NormalizeOptions(NormalizeSettings):
    """The normalize section of the settings (its limits and defaults), and what only code sets."""

    redact_key: bytes | None = None
    parsers: dict[str, str] = field(default_factory=dict)  # format -> "module:function" (tests, plugins)

    @classmethod
    def from_config(cls, cfg) -> "NormalizeOptions":
        section = settings_of(cfg).normalize
        return cls(**{f.name: getattr(section, f.name) for f in fields(section)})

    def limits(self) -> Limits:
        return Limits(
            max_pages=self.max_pages,
            max_chars=self.max_chars,
            max_zip_bytes=self.max_zip_bytes,
            max_zip_ratio=self.max_zip_ratio,
        )


# -- discovery -----------------------------------------------------------------------------


def ignored_name(name: str) -> bool:
    """A dotfile or an editor's temporary name: never a document, never descended into."""
    return name.startswith(".") or bool(IGNORED_NAMES.search(name))


def read_kgrignore(root: Path) -> list[str]:
    """The patterns of the root's .kgrignore (none when it has none)."""
    try:
        lines = (root / ".kgrignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def matches_ignore(rel: str, patterns: list[str]) -> bool:
    """Whether a root-relative path matches one of the .kgrignore patterns."""
    name = rel.rsplit("/", 1)[-1]
    for pat in patterns:
        p = pat.rstrip("/")
        if (
            fnmatch.fnmatch(rel, p)
            or fnmatch.fnmatch(name, p)
            or rel.startswith(p + "/")
            or fnmatch.fnmatch(rel, p + "/*")
        ):
            return True
    return False


def ignored_path(rel: str, ignore: list[str]) -> bool:
    """The discovery rules (dotfiles, editor temp names, .kgrignore) applied to each part of a path."""
    parts = rel.split("/")
    if any(ignored_name(part) for part in parts):
        return True
    return bool(ignore) and any(matches_ignore("/".join(parts[:i]), ignore) for i in range(1, len(parts) + 1))


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _ref(path: Path, root: Path, st: os.stat_result) -> FileRef | dict:
    rel = path.relative_to(root).as_posix()
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(rel).decode("utf-8", "backslashreplace")
        return records.error("normalize", f"{shown}: file name is not valid UTF-8", reason="bad_filename")
    why = records.doc_path_problem(rel)
    if why is not None:  # e.g. "c:notes.md" at the root reads as a drive letter: load and the tools would refuse it
        return records.error(
            "normalize", f"{rel}: the path {why}, so it cannot be stored", path=rel, reason="bad_filename"
        )
    return FileRef(str(path), rel, st.st_size, int(st.st_mtime * 1000))


def discover(paths: Iterable[str], *, root: str | None = None) -> Iterator[FileRef | dict]:
    """Files under the given paths (files, directories, globs), sorted, confined to the root."""
    paths = list(paths)
    if root is None:
        root = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else os.getcwd()
    root_path = Path(root).resolve()
    ignore = read_kgrignore(root_path)
    seen: set[str] = set()
    for arg in paths:
        matches = sorted(glob.glob(arg, recursive=True)) if glob.has_magic(arg) else [arg]
        if not matches:
            yield records.error("normalize", f"{arg}: no such file or directory", path=arg, reason="not_found")
            continue
        for match in matches:
            p = Path(match)
            if not p.exists() and not p.is_symlink():
                yield records.error("normalize", f"{match}: no such file or directory", path=match, reason="not_found")
                continue
            real = Path(os.path.realpath(p))  # never raises, even on a loop
            if not _inside(real, root_path):
                yield records.error(
                    "normalize", f"{match}: outside the knowledge root {root_path}", path=match, reason="outside_root"
                )
                continue
            try:
                st = os.stat(p)
            except OSError as exc:
                yield _unreadable(match, p, exc)
                continue
            if stat.S_ISDIR(st.st_mode):
                for item in _walk(real, root_path, ignore):
                    key = item.rel_path if isinstance(item, FileRef) else item["message"]
                    if key not in seen:
                        seen.add(key)
                        yield item
            else:
                fmt = FORMATS.get(real.suffix.lower())
                if fmt is None:
                    yield records.error(
                        "normalize",
                        f"{match}: unsupported file type {real.suffix or '(none)'}",
                        path=match,
                        reason="unsupported",
                    )
                    continue
                item = _ref(real, root_path, st)
                key = item.rel_path if isinstance(item, FileRef) else item["message"]
                if key not in seen:
                    seen.add(key)
                    yield item


def _unreadable(shown: str, path: Path, exc: OSError) -> dict:
    """The error record of a directory entry that cannot be followed or read."""
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8 cannot be a JSON string
        shown = os.fsencode(shown).decode("utf-8", "backslashreplace")
    if exc.errno == errno.ELOOP:
        return records.error(
            "normalize", f"{shown}: symlink loop (the link never reaches a file)", path=shown, reason="symlink_loop"
        )
    if exc.errno == errno.ENOENT and path.is_symlink():
        return records.error(
            "normalize", f"{shown}: broken symlink (its target does not exist)", path=shown, reason="broken_symlink"
        )
    return records.error("normalize", f"{shown}: cannot read: {exc.strerror or exc}", path=shown, reason="unreadable")


def _walk(directory: Path, root: Path, ignore: list[str]) -> Iterator[FileRef | dict]:
    """Files under ``directory``, sorted by path. An entry that cannot be followed (a
    symlink loop, a broken link, no permission) becomes an error record in its place when
    discovery would have read it (a supported suffix; a loop whatever its name, as it may
    stand for a folder), and so does a folder that cannot be listed; the walk goes on."""
    stack = [directory]
    out: list[tuple[str, Path | dict, os.stat_result | None]] = []
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError as exc:
            shown = d.relative_to(root).as_posix() + "/"
            err = _unreadable(shown, d, exc)
            err["message"] = (
                err["message"].replace("cannot read:", "cannot list the folder:")
                + " (name it in .kgrignore to skip it)"
            )
            out.append((shown, err, None))
            continue
        for entry in entries:
            name = entry.name
            if ignored_name(name):
                continue
            p = Path(entry.path)
            rel = p.relative_to(root).as_posix()
            if ignore and matches_ignore(rel, ignore):
                continue
            try:
                if entry.is_symlink():
                    if not _inside(Path(os.path.realpath(p)), root):
                        continue  # never follow a link out of the root
                    st = os.stat(p)
                else:
                    st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                if exc.errno == errno.ELOOP or p.suffix.lower() in FORMATS:
                    out.append((rel, _unreadable(rel, p, exc), None))
                continue
            if stat.S_ISDIR(st.st_mode):
                if not entry.is_symlink():
                    stack.append(p)
                continue
            if stat.S_ISREG(st.st_mode) and p.suffix.lower() in FORMATS:
                out.append((rel, p, st))
    for rel, p, st in sorted(out, key=lambda x: x[0]):
        yield p if isinstance(p, dict) else _ref(p, root, st)


# -- normalization -------------------------------------------------------------------------

FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?---[ \t]*(?:\n|\Z)", re.S)
# A redaction tag that opens a YAML value ("password: [REDACTED:...]") would read as a one-item list, or
# break the block if text follows it; quoted, the value stays the string it was.
FRONT_TAG = re.compile(
    r"(?m)^([ \t]*(?:-[ \t]+)*"  # indentation, list dashes
    r"(?:[^\s#'\"\[\]{},-][^\n]*?:[ \t]+|\"[^\"\n]*\"[ \t]*:[ \t]+|'[^'\n]*'[ \t]*:[ \t]+|-[ \t]+)(?:-[ \t]+)*)"  # key: or -
    rf"(\[{TAG_CORE}\][^\n]*?)([ \t]+#[^\n]*)?[ \t]*$"
)  # the value to the end of the line, a comment
TAG_ITEM = re.compile(TAG_CORE)
H1 = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.M)


def normalize(
    paths: Iterable[str], *, root: str | None = None, options: NormalizeOptions | None = None
) -> Iterator[dict]:
    paths = list(paths)
    if root is None:
        root = paths[0] if len(paths) == 1 and os.path.isdir(paths[0]) else os.getcwd()
    return normalize_files(discover(paths, root=root), options=options or NormalizeOptions(), root=root)


def normalize_files(
    files: Iterable[FileRef | dict], *, options: NormalizeOptions, root: str | None = None
) -> Iterator[dict]:
    """Doc or error records, one per file, in input order (error dicts pass through)."""
    from kgr.stages.isolation import ParserPool, ordered
    from kgr.stages.redact import default_key

    pool = ParserPool(
        workers=options.workers,
        timeout_s=options.parse_timeout_s,
        memory_mb=options.parse_memory_mb,
        cpu_s=options.parse_cpu_s,
    )
    key = options.redact_key if options.redact_key is not None else (default_key() if options.redact else b"")
    limits = options.limits()

    def start(item):
        if isinstance(item, dict):
            return None
        fmt = FORMATS[Path(item.abs_path).suffix.lower()]
        if item.size > options.max_file_bytes:
            return ("failed", "too_large", f"{item.size} bytes, more than the limit of {options.max_file_bytes}")
        if fmt in CHILD_FORMATS.values():
            if Path(item.abs_path).is_dir():
                return ("failed", "malformed", "a directory, not a file")
            return ("child", pool.submit(item.abs_path, fmt, limits, options.parsers.get(fmt)))
        return ("local", None)

    def finish(item, started):
        if isinstance(item, dict):
            return item
        return _finish(item, started, options, pool, key)

    window = max(2, pool.workers * 2)
    try:
        yield from ordered(files, start, finish, window)
    finally:
        pool.close()


def _finish(ref: FileRef, started, options: NormalizeOptions, pool, key: bytes) -> dict:
    fmt = FORMATS[Path(ref.abs_path).suffix.lower()]
    info = {"path": ref.rel_path, "format": fmt, "size": ref.size, "mtime_ms": ref.mtime_ms}
    kind = started[0]
    if kind == "failed":
        return records.error("normalize", started[2], reason=started[1], **info)
    file_hash = None
    try:
        if kind == "local":
            with open(ref.abs_path, "rb") as fh:
                data = fh.read(options.max_file_bytes + 1)
            file_hash = records.bytes_hash(data)
            if options.parsers.get(fmt):
                result = pool.result(pool.submit(ref.abs_path, fmt, options.limits(), options.parsers[fmt]))
                if not result["ok"]:
                    raise ParseFailure(result["reason"], result["message"])
                text, meta = result["text"], result["meta"]
            else:
                text, meta = parse_text(data, fmt)
        else:
            result = pool.result(started[1])
            file_hash = _hash_file(ref.abs_path)
            if not result["ok"]:
                raise ParseFailure(result["reason"], result["message"])
            text, meta = result["text"], result["meta"]
        return finish_doc(ref, fmt, text, meta, options, key, file_hash)
    except ParseFailure as exc:
        return records.error("normalize", exc.message, reason=exc.reason, file_hash=file_hash, **info)
    except OSError as exc:
        return records.error("normalize", f"cannot read: {exc.strerror}", reason="unreadable", **info)


def _hash_file(path: str) -> str | None:
    import hashlib

    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def finish_doc(
    ref: FileRef,
    fmt: str,
    text: str,
    meta: dict[str, Any],
    options: NormalizeOptions,
    key: bytes,
    file_hash: str | None,
) -> dict:
    """Redact, read front matter, title, language, de-duplicate, truncate, hash."""
    meta = dict(meta)
    redactions: dict[str, int] = {}
    if options.redact:
        from kgr.stages.redact import redact

        started = time.perf_counter()
        text, redactions = redact(text, key=key)
        if time.perf_counter() - started > options.parse_timeout_s:
            raise ParseFailure("redaction_timeout", "secret scanning took too long; the document is not stored")
    meta["redactions"] = sum(redactions.values())
    if redactions:
        meta["redacted_rules"] = redactions
    front: dict[str, Any] = {}
    if fmt == "md":
        m = FRONT_MATTER.match(text)
        if m:
            try:
                loaded = yaml.safe_load(_quote_tags(m.group(1) or "")) or {}
                if isinstance(loaded, dict):
                    front = {str(k): _untag_lists(v) for k, v in loaded.items()}
                    front_json = _jsonable(front)
            except (yaml.YAMLError, ValueError, RecursionError):
                # PyYAML raises ValueError on an impossible date or escape, and anchors can
                # build a list that contains itself (RecursionError when made JSON)
                front = {}
            text = text[m.end() :]
    if front:
        meta["front_matter"] = front_json
        tags = front.get("tags") or front.get("keywords")
        if isinstance(tags, str):
            tags = [t.strip() for t in tags.split(",") if t.strip()]
        if isinstance(tags, list):
            meta["tags"] = [str(t) for t in tags]
    text, removed = dedup_paragraphs(text, threshold=options.dedup_threshold, min_chars=options.min_dedup_chars)
    meta["dedup_removed"] = removed
    partial = []
    invalid = meta.pop("invalid_sequences", None)
    if invalid:
        n, encoding = invalid["count"], invalid["encoding"]
        partial.append(
            {
                "reason": "invalid_encoding",
                "encoding": encoding,
                "count": n,
                "message": f"{n} invalid {encoding} byte sequence{'s' if n != 1 else ''} replaced with U+FFFD",
            }
        )
    nuls = meta.pop("nul_removed", None)
    if nuls:
        partial.append(
            {
                "reason": "nul_removed",
                "count": nuls,
                "message": f"{nuls} NUL character{'s' if nuls != 1 else ''} removed",
            }
        )
    if not text.strip():
        # nothing to index: stored (so it is not parsed again until it changes), said on stderr
        # and in `kgr status`, but not an error (an editor's new file or a placeholder is empty)
        partial.append({"reason": "empty", "message": "the file has no text to index"})
    stopped_early = bool(meta.pop("stopped_early", False))
    truncated = len(text) > options.max_chars
    if truncated:
        total = len(text)
        text = text[: options.max_chars]
        partial.append(
            {
                "reason": "truncated",
                "kept_chars": options.max_chars,
                "total_chars": total,
                "total_known": not stopped_early,
                "message": f"kept the first {options.max_chars} of {'more than ' if stopped_early else ''}{total} characters",
            }
        )
    meta["truncated"] = truncated
    if partial:
        meta["partial"] = partial  # kept, but not whole: warned about on stderr and listed by `kgr status`
    if "breadcrumbs" not in meta:
        meta["breadcrumbs"] = ref.rel_path.split("/")[:-1]
    title = _title(front, text, meta, ref.rel_path)
    meta.pop("html_title", None)
    return {
        "kind": records.DOC,
        "path": ref.rel_path,
        "source": "file",
        "format": fmt,
        "mtime_ms": ref.mtime_ms,
        "size": ref.size,
        "file_hash": file_hash,
        "hash": records.text_hash(text),
        "title": title,
        "lang": language(text),
        "text": text,
        "meta": meta,
    }


def _quote_tags(front_matter: str) -> str:
    def quote(m: re.Match) -> str:
        return m.group(1) + "'" + m.group(2).replace("'", "''") + "'" + (m.group(3) or "")

    return FRONT_TAG.sub(quote, front_matter) if "[REDACTED:" in front_matter else front_matter


def _untag_lists(value: Any) -> Any:
    """A tag inside a flow collection ("keys: [a, [REDACTED:...]]") came back as a one-item list: the string again."""
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], str) and TAG_ITEM.fullmatch(value[0]):
            return f"[{value[0]}]"
        return [_untag_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _untag_lists(v) for k, v in value.items()}
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 64):
        return str(value)  # YAML integers are unbounded; JSON Lines (orjson) stops at 64 bits
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _title(front: dict, text: str, meta: dict, rel_path: str) -> str:
    if isinstance(front.get("title"), str) and front["title"].strip():
        return front["title"].strip()
    m = H1.search(text)
    if m:
        return re.sub(r"[*_`]", "", m.group(1)).strip()
    if meta.get("html_title"):
        return re.split(r"\s+[|–—-]\s+", meta["html_title"])[0].strip()
    for line in text.splitlines():
        if line.strip():
            first = line.strip()
            if len(first) <= 100 and not first.endswith((".", ",", ";")):
                return first.strip("# ")
            break
    return Path(rel_path).stem


def language(text: str) -> str:
    sample = re.sub(r"```.*?```", " ", text[:6000], flags=re.S)
    if len(sample.strip()) < 40:
        return "en"
    import py3langid

    lang, _ = py3langid.classify(sample[:1500])
    return lang


NUM_PERM = 64
_PERMS = None


def _permutations():
    """The MinHash permutations, made once (datasketch would draw them for every paragraph)."""
    global _PERMS
    if _PERMS is None:
        from datasketch import MinHash

        _PERMS = MinHash(num_perm=NUM_PERM, seed=1).permutations
    return _PERMS


def dedup_paragraphs(
    text: str,
    *,
    threshold: float = NormalizeSettings.dedup_threshold,
    min_chars: int = NormalizeSettings.min_dedup_chars,
) -> tuple[str, int]:
    """Remove paragraphs that nearly repeat an earlier one (MinHash over word 3-shingles).

    Code fences, tables, headings and short paragraphs are never touched. The scope is one
    document, so re-ingesting a file gives the same text whatever else changed.
    """
    if threshold >= 1.0 or text.count("\n\n") < 2:
        return text, 0
    parts = re.split(r"(\n{2,})", text)
    candidates = []
    in_fence = False
    for i in range(0, len(parts), 2):
        para = parts[i]
        fences = len(re.findall(r"^\s*(```|~~~)", para, re.M))
        protected = in_fence or fences or para.lstrip().startswith(("|", "#")) or len(para) < min_chars
        if fences % 2:
            in_fence = not in_fence
        if not protected:
            candidates.append(i)
    if len(candidates) < 2:
        return text, 0
    import zlib

    import numpy as np
    from datasketch import MinHash, MinHashLSH

    sets = []
    for i in candidates:
        words = re.findall(r"\w+", parts[i].lower())
        sets.append([" ".join(words[j : j + 3]).encode("utf-8") for j in range(max(1, len(words) - 2))])
    minhashes = MinHash.bulk(
        sets, num_perm=NUM_PERM, permutations=_permutations(), scheme="affine32", hashfunc=zlib.crc32
    )
    # A paragraph is dropped when its estimated Jaccard (share of equal MinHash values) with a
    # paragraph kept so far reaches the threshold. Comparing with every kept one is quadratic
    # (hours for a large export of short paragraphs), so only the kept paragraphs that share a
    # whole LSH band are compared: with more bands than the mismatches the threshold allows,
    # a pair at or above it always shares one (pigeonhole), so the result is the exact one.
    mismatches = int(math.floor(NUM_PERM * (1.0 - threshold) + 1e-9))
    bands = next((b for b in (1, 2, 4, 8, 16, 32, 64) if NUM_PERM % b == 0 and b > mismatches), None)
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(bands, NUM_PERM // bands)) if bands else None
    drop = set()
    kept: dict[int, np.ndarray] = {}
    for i, mh in zip(candidates, minhashes):
        hv = mh.hashvalues
        near = lsh.query(mh) if lsh is not None else list(kept)
        if near and float((np.vstack([kept[k] for k in near]) == hv).mean(axis=1).max()) >= threshold:
            drop.add(i)
        else:
            kept[i] = hv
            if lsh is not None:
                lsh.insert(i, mh, check_duplication=False)
    if not drop:
        return text, 0
    out = []
    for i in range(0, len(parts), 2):
        if i in drop:
            continue
        if out:
            out.append(parts[i - 1] if i >= 1 else "\n\n")
        out.append(parts[i])
    return "".join(out), len(drop)
