"""`servedrill new`: a guided start from a symptom family. Every family's skeleton validates as written,
states its claims with the kinds the family needs, and is written where and how a script asks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from game.authoring.families import FAMILIES, find_family
from game.cli import incident_commands as cli_incidents
from game.cli.commands import main
from incidents.coverage import TOPICS, covers
from incidents.loader import check_incident_file, load_incident


def run(*args: str, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(main, list(args), input=stdin)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_the_families_are_the_coverage_families() -> None:
    assert {f.key for f in FAMILIES} == {t.key for t in TOPICS if t.family}
    for name, key in (("latency", "ttft-after-deploy"), ("TPOT", "one-slow-replica"), ("oom", "oom-at-peak"),
                      ("quality", "quantized-regression"), ("determinism", "nondeterministic-outputs")):
        found = find_family(name)
        assert found is not None and found.key == key
    assert find_family("disk") is None


@pytest.mark.parametrize("family", [f.key for f in FAMILIES])
def test_each_skeleton_validates_as_generated(family: str, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "drill.yaml"
    result = run("new", "drill", "--family", family, "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data == {"ok": True, "path": str(out), "family": family, "next": data["next"]}
    assert any("--deep" in step for step in data["next"])
    assert check_incident_file(out) == []
    incident = load_incident(out)
    assert incident.id == "drill"
    # the family is the first tag, so the library's coverage counts the new incident under it
    [topic] = [t for t in TOPICS if t.key == family]
    assert incident.tags[0] == family and covers(incident.tags, topic)
    # every skeleton shows evidence and context claims, and a timing or distinct-count claim
    assert any(not s.context for s in incident.symptoms) and any(s.context for s in incident.symptoms)
    assert {s.aggregate for s in incident.symptoms} & {"first", "last", "distinct"}


def test_an_alias_picks_its_family_and_the_schema_comment_points_home(tmp_path: Path) -> None:
    result = run("new", "slow-streams", "--family", "tpot", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "one-slow-replica" in result.output
    text = (tmp_path / "slow-streams.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=") and "incidents/schema.json" in text.splitlines()[0]
    assert "kind: hbm_degradation" in text


def test_unknown_family_is_refused_with_a_hint_and_writes_nothing(tmp_path: Path) -> None:
    result = run("new", "drill", "--family", "latncy", "--dir", str(tmp_path))
    assert result.exit_code == 1
    assert "unknown symptom family 'latncy'" in result.output and "did you mean 'latency'" in result.output
    assert list(tmp_path.iterdir()) == []
    both = run("new", "drill", "--dir", str(tmp_path), "--out", str(tmp_path / "x.yaml"))
    assert both.exit_code == 1 and "not both" in both.output and list(tmp_path.iterdir()) == []


def test_out_refuses_to_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "mine.yaml"
    target.write_text("keep: me\n")
    result = run("new", "drill", "--family", "oom", "--out", str(target), "--json")
    assert result.exit_code == 1 and json.loads(result.output)["ok"] is False
    assert target.read_text() == "keep: me\n"


def test_on_a_terminal_it_asks_for_the_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_incidents, "_interactive", lambda: True)
    oom = 1 + [f.key for f in FAMILIES].index("oom-at-peak")
    result = run("new", "drill", "--dir", str(tmp_path), stdin=f"9\n{oom}\n")
    assert result.exit_code == 0, result.output
    assert "Pick the symptom family" in result.output and "not a family: '9'" in result.output
    assert load_incident(tmp_path / "drill.yaml").tags[0] == "oom-at-peak"


def test_without_a_terminal_or_family_it_writes_the_default(tmp_path: Path) -> None:
    result = run("new", "drill", "--dir", str(tmp_path))
    assert result.exit_code == 0 and "Pick" not in result.output
    assert load_incident(tmp_path / "drill.yaml").tags[0] == cli_incidents.DEFAULT_FAMILY
