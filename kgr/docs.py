"""Generate man pages and shell completions from the CLI, and check they are current.

python -m kgr.docs --write    # regenerate man/ and completions/
python -m kgr.docs --check    # exit 1 listing stale files (the test suite does this)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import click

from kgr import __version__
from kgr.config import DEFAULTS, ENV_ALIASES, env_name, leaves
from kgr.errors import ExitStatus
from kgr.store.migrations import APPLICATION_ID

REPO = Path(__file__).resolve().parent.parent

RECORD_FIELDS = {
    "doc": "path (relative to the knowledge root), source (file, memory, url), format, mtime_ms, size, file_hash "
    "(sha256 of the file), hash (sha256 of the normalized text), title, lang, text (normalized Markdown), "
    "meta (breadcrumbs, tags, front_matter, redactions, dedup_removed, truncated, and partial when the document "
    "is kept but not whole: a list of reasons, truncated or invalid_encoding, each with a message)",
    "chunk": "doc (path), ord, text, prelude (path \\(bu section \\(bu last headings), section, headings, start and end "
    "(offsets into the doc text), tokens, hash, chunk_kind",
    "mention": "chunk (doc path#ord), surface, type, start and end (in the chunk), score, source (regex, code, gazetteer, "
    "name, ner, coref), features, refers_to (coref); after link: entity (key), link_score",
    "entity": "key (stable), name, type, norm, aliases, description, popularity",
    "relation": "src, dst (surfaces; entity keys after link), rel (defines, refers_to, part_of, uses, depends_on, precedes, "
    "owned_by, located_in, cites, same_as), confidence, pattern, evidence (chunk, doc, start, end, sentence)",
    "vector fields": "embedding (base64 of little-endian float32), model, dim, added to chunk and entity records by embed",
    "error": "stage, message, path or line, reason (a short class such as binary, timeout, encrypted, too_large, "
    "symlink_loop, bad_path)",
}

EXIT_TEXT = {
    ExitStatus.OK: "success; a document kept but not whole (meta.partial) is a warning on stderr and in kgr status, not an error",
    ExitStatus.ERROR: (
        "bad input or a runtime error, among them a --db file that is not a kgr database, "
        "a read-only database, and a database another program keeps locked for more than 5 s; "
        "a stage that emitted error records exits 1 at the end"
    ),
    ExitStatus.USAGE: "usage error (unknown option, missing argument)",
    ExitStatus.INTERRUPTED: "interrupted (Ctrl-C)",
}


def esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("-", "\\-").replace("'", "\\(aq")


def para(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        out.append((prefix + (name,), cmd))
        if isinstance(cmd, click.Group):
            out.extend(commands(cmd, prefix + (name,)))
    return out


def _help_parts(cmd: click.Command) -> tuple[str, str, str]:
    doc = (cmd.help or "").replace("\b\n", "")
    summary, _, rest = doc.strip().partition("\n")
    example = ""
    m = re.search(r"\n\s*Example:\s*\n(.*)$", rest, re.S)
    if m:
        example = "\n".join(line.strip() for line in m.group(1).strip().splitlines())
        rest = rest[: m.start()]
    return summary.strip(), re.sub(r"\n\s*\n", "\n\n", rest.strip()), example


def command_page(path: tuple[str, ...], cmd: click.Command, parent: click.Context) -> str:
    name = "kgr-" + "-".join(path)
    from kgr.cli import CONTEXT_SETTINGS

    ctx = click.Context(
        cmd, info_name=" ".join(("kgr",) + path), help_option_names=CONTEXT_SETTINGS["help_option_names"]
    )
    summary, body, example = _help_parts(cmd)
    out = [
        f'.TH "{name.upper()}" "1" "" "kgr {__version__}" "kgr manual"',
        ".SH NAME",
        f"{esc(name)} \\- {esc(summary)}",
        ".SH SYNOPSIS",
        f".B {esc(' '.join(('kgr',) + path))}",
        esc(" ".join(cmd.collect_usage_pieces(ctx))),
        ".SH DESCRIPTION",
        para(esc(summary)),
    ]
    for chunk in filter(None, body.split("\n\n")):
        out += [".PP", para(esc(" ".join(chunk.split())))]
    if isinstance(cmd, click.Group):
        out.append(".SH COMMANDS")
        for sub in sorted(cmd.commands):
            out += [".TP", f".B {esc(sub)}", esc(cmd.commands[sub].get_short_help_str(80))]
    opts = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option) or isinstance(p, click.Argument)]
    records = [p.get_help_record(ctx) for p in opts if isinstance(p, click.Option)]
    records = [r for r in records if r]
    if records:
        out.append(".SH OPTIONS")
        for term, desc in records:
            out += [".TP", f".B {esc(term)}", para(esc(desc))]
    if example:
        out += [".SH EXAMPLE", ".nf", para(esc(example)), ".fi"]
    out += [".SH SEE ALSO", "\\fBkgr\\fR(1)", ""]
    return "\n".join(out)


def main_page(group: click.Group) -> str:
    out = [
        f'.TH "KGR" "1" "" "kgr {__version__}" "kgr manual"',
        ".SH NAME",
        "kgr \\- a local\\-first Knowledge GraphRAG toolchain",
        ".SH SYNOPSIS",
        ".B kgr",
        "[\\-\\-traceback] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        "kgr turns one knowledge directory (Markdown, HTML, text, PDF, Word) into one SQLite file of chunks, "
        "a full\\-text index and a knowledge graph of canonical entities and typed relations with their evidence. "
        "Every stage is a filter that reads and writes JSON Lines, one record per line, and passes records of kinds "
        "it does not handle through unchanged and in order.",
        ".SH PIPELINE",
        ".nf",
        "kgr normalize DOCS/ | kgr chunk | kgr extract | kgr link | kgr load \\-\\-db kb.sqlite",
        ".fi",
        ".PP",
        "\\fBkgr ingest\\fR runs the same stages in one process and skips unchanged files.",
        ".SH COMMANDS",
    ]
    for path, cmd in commands(group):
        out += [".TP", f".B {esc(' '.join(path))}", esc(cmd.get_short_help_str(100))]
    out.append(".SH RECORD KINDS")
    for kind, fields in RECORD_FIELDS.items():
        out += [".TP", f".B {esc(kind)}", esc(fields).replace("\\\\(bu", "\\(bu")]
    out.append(".SH EXIT STATUS")
    for status in ExitStatus:
        out += [".TP", f".B {int(status)}", esc(EXIT_TEXT[status])]
    out += [".PP", "A closed pipe (kgr ... | head) exits quietly with status 0."]
    out.append(".SH ENVIRONMENT")
    out += [
        ".TP",
        ".B KGR_CONFIG",
        "the YAML configuration file",
        ".TP",
        ".B KGR_TRACEBACK",
        "1 to show full tracebacks",
        ".TP",
        ".B KGR_REDACT_KEY",
        "the key of the stable redaction tags",
        ".TP",
        ".B KNOWLEDGE_BASE_FILE_PATH",
        "kgr serve with the memory tools: a JSONL memory file imported at start into a database without memory entities",
        ".TP",
        ".B MEMORY_FILE_PATH",
        "the same, by the reference memory server's name (KNOWLEDGE_BASE_FILE_PATH wins when both are set)",
    ]
    for alias, dotted in sorted(ENV_ALIASES.items()):
        out += [".TP", f".B {esc(alias)}", esc(f"sets {dotted}")]
    for dotted, default in leaves(DEFAULTS):
        out += [".TP", f".B {esc(env_name(dotted))}", esc(f"sets {dotted} (default: {default!r})")]
    out += [
        ".SH FILES",
        ".TP",
        ".B kb.sqlite",
        "the knowledge base (with its \\-wal and \\-shm files while open): an SQLite file "
        f"whose application_id is 0x{APPLICATION_ID:08x} (kgr1); kgr writes into no other SQLite file",
        ".TP",
        ".B .kgrignore",
        "gitignore\\-style patterns at the knowledge root that normalize skips",
        ".TP",
        ".B ~/.local/share/kgr/redact.key",
        "the per\\-user key of the redaction tags, unless KGR_REDACT_KEY is set",
        ".SH EXAMPLES",
        ".nf",
        "kgr ingest docs/ \\-\\-db kb.sqlite",
        "kgr status \\-\\-db kb.sqlite \\-\\-json | jq .counts",
        "kgr normalize docs/ | kgr chunk | kgr load \\-\\-db kb.sqlite",
        "kgr explain \\(dqOrder Intake Service\\(dq \\-\\-db kb.sqlite",
        ".fi",
        ".SH SEE ALSO",
        ", ".join(f"\\fBkgr\\-{esc('-'.join(p))}\\fR(1)" for p, _ in commands(group)),
        "",
    ]
    return "\n".join(out)


def completion(shell: str) -> str:
    from click.shell_completion import get_completion_class

    from kgr.cli import cli

    cls = get_completion_class(shell)
    return cls(cli, {}, "kgr", "_KGR_COMPLETE").source()


def man_pages() -> dict[str, str]:
    """Every man page by file name (kgr.1, kgr-ingest.1, ...), generated from the CLI."""
    from kgr.cli import cli

    pages = {"kgr.1": main_page(cli)}
    for path, cmd in commands(cli):
        pages[f"kgr-{'-'.join(path)}.1"] = command_page(path, cmd, None)
    return pages


def man_page(path: tuple[str, ...]) -> str | None:
    """The page of ``kgr PATH...`` (the main page for no PATH), or None for no such command."""
    from kgr.cli import cli

    if not path:
        return main_page(cli)
    cmd: click.Command = cli
    for name in path:
        cmd = cmd.commands.get(name) if isinstance(cmd, click.Group) else None
        if cmd is None:
            return None
    return command_page(tuple(path), cmd, None)


def generated() -> dict[Path, str]:
    files = {REPO / "man" / name: text for name, text in man_pages().items()}
    files[REPO / "completions" / "kgr.bash"] = completion("bash")
    files[REPO / "completions" / "_kgr"] = completion("zsh")
    files[REPO / "completions" / "kgr.fish"] = completion("fish")
    return files


def stale() -> list[str]:
    out = []
    files = generated()
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:
            out.append(str(path.relative_to(REPO)))
    for directory in (REPO / "man",):
        for path in directory.glob("*.1"):
            if path not in files:
                out.append(f"{path.relative_to(REPO)} (no such command any more)")
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgr.docs")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.write:
        for path, text in generated().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        for path in (REPO / "man").glob("*.1"):
            if path not in generated():
                path.unlink()
        return 0
    bad = stale()
    for path in bad:
        print(f"stale: {path}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
