"""Every hint and error message that names a command names one that exists: `kgr X Y --opt` is a real
command with that option, and a tool an error points to (`manage_relationship_types`, ...) is a real tool."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from kgr.cli import cli

KGR = Path(__file__).resolve().parents[2] / "kgr"
# "kgr", a command (and sub-command) and what follows up to the end of the clause
COMMAND = re.compile(r"\bkgr ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)((?: +(?:--?[a-z][a-z-]*|[A-Z.]+|\S+))*)")
TOOL = re.compile(r"\b((?:manage|explore|find|generate|search|get|list|create|delete|add|read|open)_[a-z_]+)\b")
ERROR_CALL = re.compile(r"(Error|NotFound|Mismatch|Busy|Exception|BadParameter)$")


def _text(node: ast.AST) -> str | None:
    """A string literal, or an f-string with its placeholders as X."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        if left is not None or right is not None:
            return (left or "X") + (right or "X")
    return None


def messages() -> list[tuple[str, str]]:
    """(where, text) of every hint= and every error message literal in kgr."""
    out = []
    for path in sorted(KGR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None) or ""
            parts = [k.value for k in node.keywords if k.arg == "hint"]
            if ERROR_CALL.search(name) and node.args:
                parts.append(node.args[0])
            for part in parts:
                t = _text(part)
                if t and ("kgr " in t or "_" in t):
                    out.append((f"{path.relative_to(KGR.parent)}:{node.lineno}", t))
    return out


def resolve(words: list[str]) -> tuple[click.Command | None, list[str]]:
    """The command ``kgr words...`` names and the words it used."""
    cmd: click.Command = cli
    used: list[str] = []
    for w in words:
        if isinstance(cmd, click.Group) and w in cmd.commands:
            cmd = cmd.commands[w]
            used.append(w)
        else:
            break
    return (cmd if used else None), used


def test_the_scan_finds_hints_that_name_commands():
    found = [t for _, t in messages() if COMMAND.search(t)]
    assert len(found) >= 10, found  # the scan reads the code, not nothing


@pytest.mark.parametrize("where, msg", messages(), ids=lambda x: x if isinstance(x, str) and ".py:" in x else "")
def test_commands_and_options_named_in_messages_exist(where, msg):
    for m in COMMAND.finditer(msg):
        words = m.group(1).split()
        cmd, used = resolve(words)
        assert cmd is not None, f"{where}: {msg!r} names `kgr {m.group(1)}`, which is no command"
        if isinstance(cmd, click.Group):  # a group named alone is fine (`kgr template`), not with a bad word
            rest = words[len(used) :]
            assert not rest or not rest[0].islower() or rest[0] in cmd.commands, (
                f"{where}: `kgr {m.group(1)}` names no sub-command of kgr {' '.join(used)}"
            )
            continue
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
            assert opt in opts, f"{where}: `kgr {' '.join(used)}` has no option {opt} ({msg!r})"


def test_tools_named_in_messages_exist():
    import kgr.mcp.server  # noqa: F401 - imports every toolset, which registers the tools
    from kgr.mcp.registry import TOOLS

    for where, msg in messages():
        for name in TOOL.findall(msg):
            if name in ("search_strategy",):  # an argument, not a tool
                continue
            assert name in TOOLS, f"{where}: {msg!r} names the tool {name}, which does not exist"


def test_an_invented_command_would_be_caught():
    cmd, used = resolve(["relation-type", "add"])
    assert cmd is None and used == []
    cmd, used = resolve(["embed"])
    assert "--reembed" in {o for p in cmd.params for o in p.opts} and used == ["embed"]
