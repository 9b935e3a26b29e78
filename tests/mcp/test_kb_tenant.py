"""The kb tools with seed 004's names and tenant settings, through the SDK's in-memory client:
id and depth beside concept and hops, get_concept's body, clientId and knownExternalIds."""

from __future__ import annotations

import json

import pytest
from serve_fixtures import Mcp, error_text, make_service

from kgr.mcp import server as serve
from kgr.retrieval import concepts


@pytest.fixture(scope="module")
def tenant_kb(built_kb, kb_config):
    """A kb server of tenant "acme" that lists no external ids."""
    svc = make_service(built_kb[0], kb_config.override({"tenant.clientId": "acme"}))
    yield Mcp(serve.build_server(svc, "kb")), svc
    svc.close()


def test_the_seeds_names_and_kgrs_give_the_same_answer(tenant_kb):
    mcp, _ = tenant_kb
    by_name = mcp.call("get_concept", {"concept": "Fare Engine"}).structured_content
    assert mcp.call("get_concept", {"id": "Fare Engine"}).structured_content == by_name
    assert mcp.call("get_concept", {"id": by_name["id"]}).structured_content == by_name  # an integer id
    old = mcp.call("get_related", {"concept": "Fare Engine", "hops": 2}).structured_content
    new = mcp.call("get_related", {"id": by_name["id"], "depth": 2}).structured_content
    assert new == old and new["depth"] == 2 and len(new["nodes"]) > 1
    default = mcp.call("get_related", {"id": "Fare Engine"}).structured_content
    assert default["hops"] == 1


@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("get_concept", {}, "Argument id is required."),
        ("get_concept", {"id": "Fare Engine", "concept": "Rider Systems"}, "Arguments id and concept are the same"),
        ("get_concept", {"id": "x" * 513}, "Argument id must be at most 512 characters long"),
        ("get_concept", {"id": True}, "Argument id must be a string"),
        ("get_concept", {"id": "Fare Engine", "max_chars": 0}, "Argument max_chars must be at least 1 (got 0)."),
        ("get_concept", {"id": "Fare Engine", "max_chars": 200_001}, "Argument max_chars must be at most 200000"),
        ("get_related", {"depth": 1}, "Argument id is required."),
        ("get_related", {"id": "Fare Engine", "depth": 4}, "Argument depth must be at most 3 (got 4)."),
        ("get_related", {"id": "Fare Engine", "hops": 1, "depth": 2}, "Arguments depth and hops are the same"),
    ],
)
def test_bad_seed_arguments_are_tool_errors(tenant_kb, name, args, needle):
    mcp, _ = tenant_kb
    text = error_text(mcp.call(name, args))
    assert needle in text and "Traceback" not in text and "\n" not in text


def test_the_tool_bounds_are_the_librarys(tenant_kb):
    mcp, _ = tenant_kb
    schema = {t.name: t.input_schema for t in mcp.tools()}["get_concept"]["properties"]["max_chars"]
    assert schema["maximum"] == concepts.MAX_BODY_CHARS and schema["default"] == concepts.BODY_CHARS


def test_the_body_is_bounded_and_flagged(tenant_kb):
    mcp, svc = tenant_kb
    full = mcp.call("get_concept", {"id": "Fare Engine"}).structured_content
    assert full["body"] == (svc.root / full["path"]).read_text(encoding="utf-8") and full["truncated"] is False
    short = mcp.call("get_concept", {"id": "Fare Engine", "max_chars": 25}).structured_content
    assert short["body"] == full["body"][:25] and short["truncated"] is True


def test_client_id_is_reported(tenant_kb):
    mcp, _ = tenant_kb
    assert mcp.call("status").structured_content["clientId"] == "acme"
    assert mcp.call("kb_health").structured_content["clientId"] == "acme"


def test_without_a_client_id_it_is_null(mcp_all):
    assert mcp_all.call("status").structured_content["clientId"] is None


def test_a_server_without_a_root_says_the_body_is_not_read(built_kb, kb_config):
    svc = make_service(built_kb[0], kb_config)
    svc.root = None  # as a server whose database records no root
    try:
        c = Mcp(serve.build_server(svc, "kb")).call("get_concept", {"id": "Fare Engine"}).structured_content
    finally:
        svc.close()
    assert c["body"] is None and "no knowledge root" in c["body_note"] and c["path"] == "services/fare-engine.md"


def test_known_external_ids_suppress_flags_and_read_nothing(tenant_kb, built_kb, kb_config, tmp_path):
    mcp, _ = tenant_kb
    before = mcp.call("kb_health").structured_content["dangling_references"]
    assert before["count"] > 0 and before["suppressed"] == 0
    name = before["sample"][0]["missing"][0]
    outside = tmp_path / f"{name}.md"
    outside.write_text("# outside\n\nNOT-FOR-THIS-TENANT\n")
    cfg = kb_config.override({"tenant.knownExternalIds": [name, str(outside)]})
    svc = make_service(built_kb[0], cfg)
    try:
        m = Mcp(serve.build_server(svc, "kb"))
        after = m.call("kb_health").structured_content["dangling_references"]
        c = m.call("get_concept", {"id": name}).structured_content
    finally:
        svc.close()
    flagged = sum(1 for r in before["sample"] if name in r["missing"])
    assert flagged and after["suppressed"] >= flagged and after["count"] == before["count"] - after["suppressed"]
    assert not [r for r in after["sample"] if name in r["missing"]]
    assert c["external"] is True and c["body"] is None and "NOT-FOR-THIS-TENANT" not in json.dumps(c)
