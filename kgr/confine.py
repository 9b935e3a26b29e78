"""Path confinement: every path a tool receives stays inside the knowledge root.

A path from a client (or a prompt-injected model) is checked twice:

1. syntactically, before any I/O (:func:`relpath`): a string, no NUL, bounded length,
   relative, no ``..`` component;
2. on disk (:func:`resolve_under`, :func:`open_under`): the real path, symlinks
   resolved, must be the root or under it (``Path.is_relative_to`` on resolved paths,
   never a string prefix: ``/kb-evil`` is not under ``/kb``), and the file actually
   opened is checked again on its descriptor: each component is opened with
   ``O_NOFOLLOW`` relative to its parent's descriptor, and ``/proc/self/fd`` (where
   present) must name a path under the root. A symlink swapped in between the check and
   the open fails the open instead of escaping.

Every refusal is the same :class:`~kgr.errors.OutsideRoot` with the same message, whether
the path escapes, does not exist or loops: the error tells an attacker nothing about the
host, and names no path.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import re
import stat
from pathlib import Path
from typing import Iterable, Iterator

from kgr.errors import OutsideRoot

MAX_PATH_CHARS = 1024
NOT_FOUND = "not found: no such file or directory under the knowledge root"


def refuse() -> OutsideRoot:
    return OutsideRoot(NOT_FOUND)


def problem(user: object, *, max_chars: int = MAX_PATH_CHARS) -> str | None:
    """Why ``user`` is not a relative path that stays under a root, or None when it is.

    The one syntactic check (before any I/O) of a path from outside: tools refuse such a
    path with the same message whatever the problem (:func:`relpath`); ``kgr load`` names
    the problem, as the path is the user's own input.
    """
    if not isinstance(user, str):
        return f"is not a string but {type(user).__name__}"
    if len(user) > max_chars:
        return f"is longer than {max_chars} characters"
    if "\x00" in user:
        return "contains a NUL character"
    text = user.strip()
    if text.startswith(("/", "\\")) or (len(text) > 1 and text[1] == ":" and text[0].isalpha()):
        return "is absolute"  # POSIX, UNC or drive letter
    if any(p == ".." for p in text.split("/")):
        return "has a '..' component"
    return None


def relpath(user: object, *, max_chars: int = MAX_PATH_CHARS) -> str:
    """``user`` as a normalised relative path ('a/b.md'), or OutsideRoot.

    '.' components and repeated slashes are dropped; '' and '.' mean the root itself.
    """
    if problem(user, max_chars=max_chars) is not None:
        raise refuse()
    return "/".join(p for p in user.strip().split("/") if p not in ("", "."))


def under_root(root: str | os.PathLike, user: object, *, max_chars: int = MAX_PATH_CHARS) -> str:
    """``user`` as a relative path or glob, or OutsideRoot: a relative one as :func:`relpath`
    gives it; an absolute one ('/kb/docs/**/*.md') when it names the root or a place under
    it, compared component by component with the root as given and as resolved (a sibling
    prefix such as '/kb-evil' is not under '/kb'). No I/O on ``user`` itself: the relative
    path is then checked on disk like any other (symlinks that leave the root are refused
    there), and a '..' component is refused here whatever the path.
    """
    if not isinstance(user, str) or len(user) > max_chars or "\x00" in user:
        raise refuse()
    text = user.strip()
    if not text.startswith("/"):
        return relpath(text, max_chars=max_chars)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise refuse()
    for base in (Path(os.path.abspath(root)), real_root(root)):
        top = list(base.parts[1:])
        if parts[: len(top)] == top:
            return "/".join(parts[len(top) :])
    raise refuse()


def real_root(root: str | os.PathLike) -> Path:
    return Path(root).resolve(strict=True)


def inside(path: Path, root: Path) -> bool:
    """True when the resolved ``path`` is ``root`` or below it (component-wise)."""
    return path == root or path.is_relative_to(root)


def resolve_under(root: str | os.PathLike, user: object, *, dirs: bool = True) -> Path:
    """The real path of ``user`` (relative to ``root``), which must exist inside it."""
    rel = relpath(user)
    base = real_root(root)
    try:
        real = (base / rel).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, dangling link, loop, name too long
        raise refuse() from None
    if not inside(real, base):
        raise refuse()
    if not dirs and real.is_dir():
        raise refuse()
    return real


def glob_under(root: str | os.PathLike, pattern: object, *, limit: int = 10000, resolved: bool = True) -> list[Path]:
    """Files and folders matching a relative glob ('**/*.md'), each confined to ``root``.

    Each match is checked on its resolved path; ``resolved=False`` returns it as named under
    the root instead (a link inside the root keeps its own name).
    """
    rel = relpath(pattern)
    base = real_root(root)

    def confined(name: str) -> Path:
        real = resolve_under(base, name)
        return real if resolved else base / relpath(name)

    if not glob.has_magic(rel):
        return [confined(rel)]
    try:
        return [confined(rel)]  # a real name with [ or * in it is that file, not a pattern
    except OutsideRoot:
        pass
    out: list[Path] = []
    for match in sorted(glob.iglob(glob.escape(str(base)) + "/" + rel, recursive=True)):
        try:
            out.append(confined(os.path.relpath(match, base)))
        except OutsideRoot:
            continue  # a link out of the root matched the pattern: skipped, never followed
        if len(out) >= limit:
            break
    return out


def _fd_path(fd: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


@contextlib.contextmanager
def open_under(root: str | os.PathLike, user: object) -> Iterator[int]:
    """A read-only descriptor of the regular file ``user`` under ``root``.

    Symlinks inside the root that stay inside it are followed (through their resolved
    path); every component of that path is then opened without following links, so a
    link swapped in after the check cannot redirect the open.
    """
    real = resolve_under(root, user, dirs=False)
    base = real_root(root)
    parts = real.relative_to(base).parts
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    fds: list[int] = []
    try:
        try:
            fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            fds.append(fd)
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                flags = os.O_RDONLY | nofollow | (0 if last else getattr(os, "O_DIRECTORY", 0))
                fd = os.open(part, flags, dir_fd=fds[-1])
                fds.append(fd)
        except OSError:
            raise refuse() from None
        fd = fds[-1]
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse()
        try:
            expected = os.stat(real, follow_symlinks=False)
        except OSError:
            raise refuse() from None
        if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
            raise refuse()
        opened = _fd_path(fd)
        if opened is not None and not inside(opened, base):
            raise refuse()
        yield fd
    finally:
        for f in fds:
            with contextlib.suppress(OSError):
                os.close(f)


def read_under(root: str | os.PathLike, user: object, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
    """The bytes of the regular file ``user`` under ``root`` (at most ``max_bytes``)."""
    with open_under(root, user) as fd:
        chunks = []
        left = max_bytes
        while left > 0:
            block = os.read(fd, min(left, 1 << 20))
            if not block:
                break
            chunks.append(block)
            left -= len(block)
        return b"".join(chunks)


def scrub(text: str, *secrets: str | os.PathLike | None) -> str:
    """``text`` with every given host path or secret replaced, for messages sent to a client."""
    out = text
    for s in sorted((str(x) for x in secrets if x), key=len, reverse=True):
        out = out.replace(s + os.sep, "").replace(s, "<root>" if os.sep in s else "***")
    return out


# -- the path allowlist (seed 000 section 16) ------------------------------------------------

NOT_ALLOWED = "not allowed: outside the path allowlist of this knowledge base (security.allowlist)"


def _segment_regex(segment: str) -> str:
    """One path segment of a glob: ``*`` and ``?`` never cross a ``/``."""
    out = []
    for ch in segment:
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _allow_regex(pattern: str) -> re.Pattern[str]:
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    regex = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _segment_regex(part) + ("" if last else "/")
    return re.compile(regex)


def _allow_pattern(pattern: str, root: Path | None) -> str | None:
    """A pattern relative to the root; an absolute one (``/knowledge/**/*.md``) is taken
    relative to ``root`` and matches nothing when it is outside it."""
    pattern = pattern.strip()
    if pattern.startswith("/"):
        if root is None:
            return None
        try:
            return Path(pattern).relative_to(root).as_posix()
        except ValueError:
            try:
                return Path(pattern).relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                return None
    return pattern


def allowed(rel: str, patterns: Iterable[str], *, root: Path | None = None) -> bool:
    """True when the root-relative POSIX path ``rel`` may be read under the allowlist
    ``patterns`` (root-relative globs: ``*`` and ``?`` within a name, ``**`` across folders; a
    pattern naming a folder allows everything under it). No patterns: everything is allowed."""
    patterns = [p for p in (_allow_pattern(p, root) for p in patterns) if p is not None] if patterns else None
    if patterns is None:
        return True
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        if pattern in ("", ".", "**"):
            return True
        regex = _allow_regex(pattern)
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            return True
    return False


def may_hold_allowed(rel_dir: str, patterns: Iterable[str], *, root: Path | None = None) -> bool:
    """True when the folder ``rel_dir`` (root-relative; "" is the root) is allowed or could hold
    an allowed file: what a folder asked for must pass before it is walked."""
    patterns = list(patterns) if patterns else []
    if not patterns:
        return True
    dirs = [p for p in rel_dir.split("/") if p not in ("", ".")]

    def can(di: int, segs: list[str], si: int) -> bool:
        if di == len(dirs) or si == len(segs):  # the folder is above a match, or under one
            return True
        if segs[si] == "**":
            return can(di, segs, si + 1) or can(di + 1, segs, si)
        return re.fullmatch(_segment_regex(segs[si]), dirs[di]) is not None and can(di + 1, segs, si + 1)

    for pattern in (p for p in (_allow_pattern(p, root) for p in patterns) if p is not None):
        if can(0, [p for p in pattern.split("/") if p not in ("", ".")], 0):
            return True
    return False


def check_allowed(rel: str, patterns: Iterable[str], *, root: Path | None = None, folder: bool = False) -> None:
    """OutsideRoot (:data:`NOT_ALLOWED`) unless ``rel`` is allowed (a folder: may hold allowed files)."""
    ok = may_hold_allowed(rel, patterns, root=root) if folder else allowed(rel, patterns, root=root)
    if not ok:
        raise OutsideRoot(NOT_ALLOWED)


def allowed_targets(
    root: str | os.PathLike, asked: Iterable[str], targets: list[str], patterns: Iterable[str]
) -> list[str]:
    """The ``targets`` (paths under ``root``, expanded from the paths a client ``asked`` for) that
    the allowlist lets be read: a folder when it may hold allowed files (what is under it is
    filtered when it is walked), a file when it is allowed. A file or folder asked for by name
    and not allowed is refused (:data:`NOT_ALLOWED`); what a glob matched outside the allowlist is
    dropped; nothing left is refused too."""
    patterns = tuple(patterns or ())
    if not patterns:
        return targets
    base = real_root(root)
    named: set[str] = set()
    for p in asked:
        if not isinstance(p, str) or glob.has_magic(p):
            continue
        if not p.strip().startswith("/"):
            named.add(relpath(p))
            continue
        for top in (Path(os.path.abspath(root)), base):
            with contextlib.suppress(ValueError):
                rel = Path(p.strip()).relative_to(top).as_posix()
                named.add("" if rel == "." else rel)
    kept = []
    for t in targets:
        rel = Path(t).relative_to(base).as_posix() if Path(t) != base else ""
        rel = "" if rel == "." else rel
        ok = may_hold_allowed(rel, patterns, root=base) if Path(t).is_dir() else allowed(rel, patterns, root=base)
        if ok:
            kept.append(t)
        elif rel in named:
            raise OutsideRoot(NOT_ALLOWED)
    if not kept:
        raise OutsideRoot(NOT_ALLOWED)
    return kept
