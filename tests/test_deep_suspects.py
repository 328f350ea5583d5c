"""`validate --deep` failures name the YAML entry most likely at fault, not only the check that broke: the
fault entry when a claim fails on the truth, a noise entry or the threshold when the fault-free run is
what is wrong, a distractor's world or member entry when that member misses the page. Tested on broken
copies of the library's one-slow-replica (a short, four-replica incident)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from game.cli.commands import main
from incidents.loader import load_incident_text
from incidents.spec import Incident
from telemetry_gen.proving.report import Failure
from telemetry_gen.proving.suspects import suspects

LIBRARY = Path(__file__).parent.parent / "incidents"
SOURCE = (LIBRARY / "one-slow-replica.yaml").read_text(encoding="utf-8")
FAULT = '    params: {clock_factor: "{{clock}}"}\n'
GATEWAY = "        params: {delay_s: 0.4}\n"


@pytest.fixture(autouse=True)
def _cache(in_library_cache: Path) -> Path:
    return in_library_cache


def _copy(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = SOURCE
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "one-slow-replica.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _line(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    [found] = [i for i, line in enumerate(lines, start=1) if needle in line]
    return found


def _run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    return result


def _incident(tmp_path: Path) -> Incident:
    return load_incident_text(SOURCE, str(tmp_path / "x.yaml"), seed=0)


# ---------------------------------------------------------------- the rule, without simulating


def test_a_claim_that_fails_with_the_faults_blames_the_fault_entry(tmp_path: Path) -> None:
    inc = _incident(tmp_path)
    [s] = suspects(Failure("claim", ("symptoms", "fleet-p99-ttft-up"), "short", side="with"), inc)
    assert s.subject == ("faults", 0) and s.why.startswith("faults[0] (gpu_throttle at ")


def test_a_claim_the_fault_free_run_shows_blames_noise_in_its_window_else_the_threshold(tmp_path: Path) -> None:
    inc = _incident(tmp_path)
    window = inc.symptoms[1].a.window
    assert inc.symptoms[1].id == "fleet-p99-ttft-up" and window is not None and window[1] > 1200
    found = suspects(Failure("claim", ("symptoms", "fleet-p99-ttft-up"), "also", side="without"), inc)
    assert [s.subject for s in found] == [("noise", 1)]  # the traffic burst at 1200 s; the deploy is earlier
    quiet = inc.model_copy(update={"noise": inc.noise[:1]})
    [s] = suspects(Failure("claim", ("symptoms", "fleet-p99-ttft-up"), "also", side="without"), quiet)
    assert s.subject == ("symptoms", "fleet-p99-ttft-up", "value")


def test_a_strawman_member_blames_its_own_entry_and_the_world_its_world(tmp_path: Path) -> None:
    inc = _incident(tmp_path)
    subject = ("hypotheses", "gateway-regression", "world")
    found = suspects(Failure("world", subject, "strawman", worlds=("gateway-regression~1", "gateway-regression~3")),
                     inc)
    assert [s.subject for s in found] == [subject, ("hypotheses", "gateway-regression", "members", 1)]
    [unsolved] = suspects(Failure("world", ("hypotheses", "gateway-regression"), "cannot be ruled out"), inc)
    assert unsolved.subject == subject
    [draw] = suspects(Failure("world", ("faults",), "luck", worlds=("truth~2",)), inc)
    assert draw.subject == ("faults", 0)
    assert suspects(Failure("error", (), "boom"), inc) == []


# ---------------------------------------------------------------- through validate --deep


def test_a_fault_too_weak_for_the_page_points_at_the_fault_entry(tmp_path: Path) -> None:
    path = _copy(tmp_path, (FAULT, "    params: {clock_factor: 0.98}\n"))
    result = _run("validate", "--deep", "--claims-only", "--seed", "0", str(path))
    assert result.exit_code == 1
    fault_line = _line(path, "- kind: gpu_throttle")
    lines = result.output.splitlines()
    fails = [i for i, ln in enumerate(lines) if "symptom fleet-p99-ttft-up does not hold with the faults" in ln]
    assert len(fails) == 1
    blamed = lines[fails[0] + 1]
    assert blamed.startswith(f"         likely at fault: {path}:{fault_line}:5: faults[0] (gpu_throttle at ")
    assert blamed.endswith("s) is what should make it true: too weak, too late or on the wrong replicas?")
    data = json.loads(_run("validate", "--deep", "--claims-only", "--json", "--seed", "0", str(path)).output)
    [entry] = data["files"]
    failures = entry["deep"]["runs"][0]["failures"]
    assert {f["subject"][1] for f in failures} == {"one-replica-prefill-slow", "fleet-p99-ttft-up"}
    for f in failures:
        [suspect] = f["suspects"]
        assert suspect["subject"] == ["faults", 0] and suspect["line"] == fault_line
    [check] = [c for c in entry["deep"]["by_check"] if c["subject"] == ["symptoms", "fleet-p99-ttft-up"]]
    assert [s["line"] for s in check["suspects"]] == [fault_line]


@pytest.mark.slow
def test_a_strawman_member_points_at_its_members_entry(tmp_path: Path) -> None:
    """A gateway delay of 10 ms cannot raise fleet p99 TTFT by a third: that member is the entry to fix."""
    member = ("        params: {delay_s: 0.4}\n    members:\n      - - kind: gateway_latency\n"
              "          at_s: \"{{throttle_at}}\"\n          params: {delay_s: 0.01}\n")
    path = _copy(tmp_path, (GATEWAY, member))
    result = _run("validate", "--deep", "--seed", "0", str(path))
    assert result.exit_code == 1
    world_line = _line(path, "      - kind: gateway_latency")  # the world's only entry, under `world:`
    member_line = _line(path, "      - - kind: gateway_latency")
    lines = result.output.splitlines()
    [fail] = [i for i, ln in enumerate(lines) if "hypothesis gateway-regression is a strawman" in ln]
    assert lines[fail].startswith(f"  FAIL {path}:{world_line - 1}:5: ")  # the check: at the world
    assert "on gateway-regression~2" in lines[fail]
    assert lines[fail + 1].startswith(f"         likely at fault: {path}:{member_line}:9: members[0] "
                                      "(gateway-regression~2) does not reproduce the page")


def test_a_page_that_fails_on_another_draw_is_mended_the_way_its_claim_points() -> None:
    """A floor missed on another traffic draw wants a stronger fault; a ceiling broken there (nothing
    failed, yet a rollout left no replica serving) wants a gentler one: the hint and the blamed entry say
    which, and the summary line names the check, not an empty hypothesis."""
    from game.cli.validate_commands import check_text
    from telemetry_gen.proving.report import draw_fix

    incident = load_incident_text(SOURCE, "one-slow-replica.yaml", 0)
    floor = "p90 of requests.ttft_s: 0.3 (window 0-900 s); required >= 0.5"
    ceiling = "count of requests.request_id: 4 (window 0-1800 s); required <= 0"
    assert draw_fix(floor) == "make the fault stronger or the claim's threshold looser"
    assert "gentler" in draw_fix(ceiling) and "stronger" not in draw_fix(ceiling)
    for message, fix in ((floor, "make it stronger"), (ceiling, "make it gentler")):
        [blamed] = suspects(Failure("world", ("faults",), f"... ({message}): the page holds by luck"), incident)
        assert blamed.subject == ("faults", 0) and blamed.why.endswith(
            fix + ("" if fix == "make it stronger" else " where it pushes the measure over the claim's ceiling"))
    assert check_text("world", ["faults"]) == "the truth on other traffic draws"
    assert check_text("world", ["difficulty"]) == "starter snippets"
    assert check_text("world", ["hypotheses", "kv-shrink", "world"]) == "hypothesis kv-shrink world"
