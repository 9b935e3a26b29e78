"""generate_documents: node resolution, has_<var> flags, the default template, and exact cache
invalidation (changed when a dependency changed, unchanged otherwise)."""

from __future__ import annotations

import pytest

from kgr.authoring import nodes as authoring
from kgr.authoring import templates as tm

BODY = (
    "# {{name}} ({{born}})\n{{summary}}\n"
    "{{#has_fans}}Fans: {{#fans}}{{fan}}; {{/fans}}{{/has_fans}}{{^has_fans}}No fans.{{/has_fans}}\n"
    "{{#has_places}}Places: {{#places}}{{place}}{{/places}}{{/has_places}}{{^has_places}}No places.{{/has_places}}"
)
VARS = {
    "fans": "SELECT e.id, e.name AS fan FROM relations r JOIN entities e ON e.id = r.src_id "
    "WHERE r.dst_id = :id AND r.rel = 'refers_to' ORDER BY e.name",
    "places": "SELECT e.id AS place_id, e.name AS place FROM relations r JOIN entities e ON e.id = r.dst_id "
    "WHERE r.src_id = :id AND r.rel = 'located_in'",
}


@pytest.fixture()
def person(store):
    with store.write():
        tm.save_template(store, name="person", structure=BODY, variables=VARS, node_types=["PERSON"])
    return store


def gen(store, ref, **kw):
    docs, writes = tm.generate(store, [ref], **kw)
    if writes:
        with store.write():
            tm.store_cache(store, writes)
    return docs[0]


def update(store, **node):
    out = authoring.manage_nodes(store, "update", [node])
    assert out["results"][0]["status"] == "success", out


def test_render_with_variables_flags_and_dependencies(person, ids):
    doc = gen(person, "Charlie Parker")
    assert doc["template_used"] == "person"  # chosen by node type
    assert doc["content"] == (
        "# Charlie Parker (1920)\nAmerican jazz saxophonist\nFans: Miles Davis; \nPlaces: Kansas City"
    )
    assert doc["from_cache"] is False
    # the node first, then every entity a variable returned (id, place_id)
    assert doc["dependencies"] == [ids["Charlie Parker"], *sorted([ids["Miles Davis"], ids["Kansas City"]])]
    assert gen(person, "Dizzy Gillespie")["content"].endswith("No fans.\nNo places.")
    kc = gen(person, "Kansas City")  # a PLACE: no template of its own, so the default
    assert kc["template_used"] == "default"
    assert "## Referenced by\n\n* Charlie Parker located_in Kansas City (strong)\n" in kc["content"]
    assert kc["dependencies"] == [ids["Kansas City"], ids["Charlie Parker"]]


def test_resolution_by_id_exact_name_then_fuzzy(person, ids):
    assert gen(person, str(ids["Miles Davis"]))["node_id"] == ids["Miles Davis"]
    assert gen(person, "miles davis")["node_id"] == ids["Miles Davis"]
    assert gen(person, "Mils Davies")["node_id"] == ids["Miles Davis"]
    assert gen(person, "Gillespie")["node_id"] == ids["Dizzy Gillespie"]
    docs, _ = tm.generate(person, ["zzqqxx vvkk"])
    assert docs[0]["status"] == "error" and "no node matches" in docs[0]["message"]


def test_cache_is_served_until_a_dependency_changes(person, ids):
    first = gen(person, "Charlie Parker")
    again = gen(person, "Charlie Parker")
    assert again["from_cache"] is True and again["content"] == first["content"]
    assert again["generated_at"] == first["generated_at"]

    # a node that is no dependency changes: still cached
    update(person, id=str(ids["Bystander"]), name="Bystander Renamed", summary="changed")
    # Dizzy is related to Parker (same_as), but no variable returns him: his own row is no dependency
    update(person, id=str(ids["Dizzy Gillespie"]), summary="changed too")
    assert gen(person, "Charlie Parker")["from_cache"] is True

    # a dependency (a row a variable returned) changes: regenerated, with the new content
    update(person, id=str(ids["Miles Davis"]), name="Miles Dewey Davis")
    doc = gen(person, "Charlie Parker")
    assert doc["from_cache"] is False and "Fans: Miles Dewey Davis; " in doc["content"]
    assert gen(person, "Charlie Parker")["from_cache"] is True

    # the node itself changes
    update(person, id=str(ids["Charlie Parker"]), summary="Bebop pioneer")
    doc = gen(person, "Charlie Parker")
    assert doc["from_cache"] is False and "Bebop pioneer" in doc["content"]

    # a relationship of the node is added: a new fan
    out = authoring.manage_relationships(
        person,
        "create",
        [{"source_id": "Bystander Renamed", "target_id": "Charlie Parker", "relationship_type": "refers_to"}],
    )
    assert out["results"][0]["status"] == "success"
    doc = gen(person, "Charlie Parker")
    assert doc["from_cache"] is False and "Bystander Renamed; " in doc["content"]
    assert ids["Bystander"] in doc["dependencies"]

    # now the Bystander is a dependency: its change invalidates
    assert gen(person, "Charlie Parker")["from_cache"] is True
    update(person, id=str(ids["Bystander"]), summary="changed again")
    assert gen(person, "Charlie Parker")["from_cache"] is False


def test_a_dependency_relation_change_invalidates_but_others_do_not(person, ids):
    gen(person, "Charlie Parker")
    # a relationship between two non-dependencies: cached
    authoring.manage_relationships(
        person, "create", [{"source_id": "Bystander", "target_id": "Dizzy Gillespie", "relationship_type": "cites"}]
    )
    assert gen(person, "Charlie Parker")["from_cache"] is True
    # Kansas City is a dependency (a place row): its change invalidates
    update(person, id=str(ids["Kansas City"]), summary="Paris of the Plains")
    assert gen(person, "Charlie Parker")["from_cache"] is False
    assert gen(person, "Charlie Parker")["from_cache"] is True
    # a relationship of a dependency changes: Kansas City cites the Bystander
    authoring.manage_relationships(
        person, "create", [{"source_id": "Kansas City", "target_id": "Bystander", "relationship_type": "cites"}]
    )
    assert gen(person, "Charlie Parker")["from_cache"] is False
    # Miles (a dependency) gains an observation
    assert gen(person, "Charlie Parker")["from_cache"] is True
    with person.write():
        person.execute(
            "INSERT INTO observations(entity_id, content) VALUES (?, 'played with Bird')", (ids["Miles Davis"],)
        )
    assert gen(person, "Charlie Parker")["from_cache"] is False


def test_template_change_force_and_override(person, ids):
    gen(person, "Charlie Parker")
    assert gen(person, "Charlie Parker", force=True)["from_cache"] is False
    with person.write():
        tm.save_template(person, name="person", structure="{{name}}!", update=True)
    doc = gen(person, "Charlie Parker")
    assert doc["from_cache"] is False and doc["content"] == "Charlie Parker!"
    other = gen(person, "Charlie Parker", template="default")
    assert other["template_used"] == "default" and other["content"].startswith("# Charlie Parker")
    # each (node, template) has its own cache row
    assert gen(person, "Charlie Parker")["from_cache"] is True
    assert gen(person, "Charlie Parker", template="default")["from_cache"] is True


def test_a_deleted_dependency_invalidates_and_deleting_a_template_drops_its_cache(person, ids):
    gen(person, "Charlie Parker")
    out = authoring.manage_nodes(person, "delete", [{"id": str(ids["Miles Davis"])}])
    assert out["results"][0]["status"] == "success"
    doc = gen(person, "Charlie Parker")
    assert doc["from_cache"] is False and "No fans." in doc["content"]
    with person.write():
        removed = tm.delete_template(person, "person")
    assert removed["cached_documents_removed"] == 1
    assert person.scalar("SELECT count(*) FROM document_cache WHERE template_id=?", (removed["id"],)) == 0
    assert gen(person, "Charlie Parker")["template_used"] == "default"


def test_node_template_id_wins_over_type(person, ids):
    with person.write():
        tm.save_template(person, name="short", structure="short {{name}}")
    update(person, id=str(ids["Charlie Parker"]), template_id="short")
    assert gen(person, "Charlie Parker")["content"] == "short Charlie Parker"
    assert gen(person, "Miles Davis")["template_used"] == "person"


def test_the_stored_default_template_is_the_library_default(store):
    t = tm.get_template(store, "default")
    assert (t["structure"], t["variables"]) == (tm.DEFAULT_BODY, tm.DEFAULT_VARIABLES)
