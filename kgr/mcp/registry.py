"""How an MCP tool is declared: the :func:`tool` decorator, the profiles, the error boundary
and the argument bounds and types the tool modules share.

A tool is a method of a class marked :func:`toolset` (one per module of :mod:`kgr.mcp.tools`,
constructed with the :class:`kgr.mcp.service.Service`). ``@tool`` registers it once, naming the
profiles it belongs to; its signature is the input schema (pydantic ``Field`` bounds), its
docstring the description the model reads. A profile is a name in :data:`PROFILES`; ``all`` is
every registered tool. :mod:`kgr.mcp.server` imports the tool modules, which registers them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, Any, Callable

from pydantic import Field

from kgr import confine
from kgr.errors import KgrError, UsageError

# -- argument bounds -------------------------------------------------------------------------

MAX_K = 100
MAX_HOPS = 3
MAX_NODES = 10000
MAX_QUERY_CHARS = 4000
MAX_PATHS = 200
MAX_NAME_CHARS = 512

# -- argument types shared by several tools ------------------------------------------------------

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question or search text.")]
Ref = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAME_CHARS,
        description="An entity id, key, name or alias, as returned by entity_lookup or search_concepts.",
    ),
]
Rels = Annotated[
    list[Annotated[str, Field(max_length=64)]] | None,
    Field(
        max_length=20,
        description="Relation types to follow (defines, uses, depends_on, part_of, owned_by, "
        "precedes, located_in, refers_to, cites, same_as, mentions); default: all.",
    ),
]
TypeName = Annotated[
    str | None, Field(max_length=64, description="Only entities of this type (SERVICE, PERSON, ORG, ...).")
]
RelPath = Annotated[str, Field(min_length=1, max_length=confine.MAX_PATH_CHARS)]

# -- the registry ------------------------------------------------------------------------------

PROFILES: dict[str, list[str]] = {"graphrag": [], "kb": [], "memory": [], "authoring": []}
# profile -> the tools it will get, named in the error for a profile that has none yet. Every
# profile has its tools today, so it is empty: it is kept for a profile declared before its tools.
PLANNED: dict[str, str] = {}
DEFAULT_PROFILE = "graphrag"


@dataclass
class ToolDef:
    name: str
    method: str
    profiles: tuple[str, ...]
    title: str
    read_only: bool
    destructive: bool = False
    idempotent: bool = True


TOOLS: dict[str, ToolDef] = {}
TOOLSETS: list[type] = []


def tool(
    name: str,
    *,
    profiles: tuple[str, ...],
    title: str,
    read_only: bool = True,
    destructive: bool = False,
    idempotent: bool = True,
) -> Callable:
    """Register a method of a :func:`toolset` class as the MCP tool ``name`` in ``profiles``."""

    def decorate(fn: Callable) -> Callable:
        if name in TOOLS:
            raise ValueError(f"tool {name} registered twice")
        for p in profiles:
            PROFILES.setdefault(p, [])
            PROFILES[p].append(name)
        TOOLS[name] = ToolDef(name, fn.__name__, profiles, title, read_only, destructive, idempotent)
        return fn

    return decorate


def toolset(cls: type) -> type:
    """Mark a class of @tool methods (constructed with the Service) as a source of tools."""
    if cls not in TOOLSETS:
        TOOLSETS.append(cls)
    return cls


def profile_tools(profile: str) -> list[str]:
    """The tool names of a profile (``all``: every registered tool), or a UsageError."""
    if profile == "all":
        return list(TOOLS)
    if profile not in PROFILES:
        raise UsageError(f"unknown profile {profile!r}", hint=f"choose one of {', '.join([*PROFILES, 'all'])}")
    names = PROFILES[profile]
    if not names:
        planned = PLANNED.get(profile)
        raise UsageError(
            f"the {profile} profile has no tools yet" + (f" (planned: {planned})" if planned else ""),
            hint="use --profile graphrag, kb or all",
        )
    return list(names)


def owner(method: str) -> type:
    """The toolset class that defines the tool method ``method``."""
    return next(c for c in TOOLSETS if method in c.__dict__)


def boundary(fn: Callable) -> Callable:
    """The error boundary of a tool: a library error (KgrError) becomes one clear tool error,
    scrubbed of host paths; a dict result is scrubbed and trimmed to the byte budget."""

    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(self, *args, **kwargs)
        except KgrError as exc:
            raise self.svc.fail(exc) from None
        return self.svc.fit(self.svc.scrub_all(out)) if isinstance(out, dict) else out

    return run
