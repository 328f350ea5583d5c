"""Variables that refer to other variables: `other_than` draws a value none of the named variables drew."""

from __future__ import annotations

from typing import Any

from incidents.variants import resolve


def raw(variables: dict[str, Any], replicas: int = 4) -> dict[str, Any]:
    return {"id": "other-than", "fleet": {"replicas": replicas}, "variables": variables,
            "faults": [{"scope": {"replicas": ["{{hot}}", "{{cold}}"]}}] if "cold" in variables else []}


def test_a_different_replica_from_another_variable_on_every_seed() -> None:
    seen = set()
    for seed in range(40):
        res = resolve(raw({"cold": {"replica": True, "other_than": "hot"}, "hot": {"replica": True}}), seed)
        assert res.problems == []
        hot, cold = res.values["hot"], res.values["cold"]
        assert hot != cold and res.data["faults"][0]["scope"]["replicas"] == [hot, cold]
        seen.add((hot, cold))
    assert len(seen) >= 8  # it still varies


def test_a_variable_drawn_alone_keeps_its_draw_when_another_avoids_it() -> None:
    alone = resolve(raw({"hot": {"replica": True}}), 5).values["hot"]
    both = resolve(raw({"hot": {"replica": True}, "cold": {"replica": True, "other_than": ["hot"]}}), 5).values
    assert both["hot"] == alone


def test_choices_and_stepped_ranges_can_avoid_values_too() -> None:
    for seed in range(20):
        v = resolve(raw({"a": {"choice": [1, 2, 3]}, "b": {"choice": [1, 2, 3], "other_than": "a"},
                         "c": {"range": [1, 3], "other_than": ["a", "b"]}}), seed).values
        assert len({v["a"], v["b"], v["c"]}) == 3


def test_bad_references_are_reported_where_declared() -> None:
    (p,) = resolve(raw({"hot": {"replica": True, "other_than": "hto"}}), 0).problems
    assert p.loc == ("variables", "hot", "other_than") and "unknown variable 'hto'" in p.message
    problems = resolve(raw({"a": {"replica": True, "other_than": "b"}, "b": {"replica": True, "other_than": "a"}}),
                       0).problems
    assert any("in a circle" in p.message for p in problems)
    (p,) = resolve(raw({"a": {"replica": True}, "b": {"replica": True, "other_than": "a"}}, replicas=1), 0).problems
    assert "no value is left" in p.message
    (p,) = resolve(raw({"a": {"range": [0.1, 0.5]}, "b": {"range": [0.1, 0.5], "other_than": "a"}}), 0).problems
    assert "continuous float range" in p.message
