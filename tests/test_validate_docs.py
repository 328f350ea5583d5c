"""docs/authoring.md's walk-through: its complete incident file, exactly as the guide prints it, passes
`servedrill validate`, proves its claims on a simulated seed, and has the likelihood ratios the guide's
worked example of the separation rule quotes."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from incidents.loader import check_incident_file, load_incident
from telemetry_gen.proving.proof import MIN_LIKELIHOOD_RATIO, likelihood_separation, prove

pytestmark = pytest.mark.slow  # proves the docs examples

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "authoring.md"
MARKER = "<!-- walk-through: the complete file -->"


def walkthrough_yaml() -> str:
    """The fenced block right after the marker, verbatim."""
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count(MARKER) == 1, "the guide must mark exactly one walk-through file"
    found = re.match(r"\s*```yaml\n(.*?)\n```", text[text.index(MARKER) + len(MARKER):], re.DOTALL)
    assert found, "the marker must be followed by a ```yaml block"
    return found.group(1) + "\n"


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = walkthrough_yaml()
    incident_id = re.search(r"^id: (\S+)$", text, re.MULTILINE)
    assert incident_id
    path = tmp_path_factory.mktemp("guide") / f"{incident_id.group(1)}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_walkthrough_validates_as_written(walkthrough: Path) -> None:
    assert check_incident_file(walkthrough) == []


def test_the_walkthrough_shows_every_claim_kind(walkthrough: Path) -> None:
    incident = load_incident(walkthrough)
    assert {s.aggregate for s in incident.symptoms} >= {"first", "distinct"}
    assert any(s.context for s in incident.symptoms) and any(not s.context for s in incident.symptoms)


def test_the_worked_example_quotes_the_files_likelihood_ratios(walkthrough: Path) -> None:
    incident = load_incident(walkthrough)
    signals = {s.id: s for s in incident.signals}
    deploy, pair = likelihood_separation(signals["deploy-seen"], incident)
    assert math.exp(deploy) == pytest.approx(MIN_LIKELIHOOD_RATIO) and pair == ("throttle", "bad-deploy")
    prompts, pair = likelihood_separation(signals["prompts-as-long-as-before"], incident)
    assert math.exp(prompts) == pytest.approx(18) and pair == ("throttle", "longer-prompts")
    shared, _ = likelihood_separation(signals["first-tokens-slower"], incident)
    assert shared == 0  # the shared signal passes by its data alone


@pytest.fixture(scope="module")
def _cache(library_cache: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(library_cache))
        yield library_cache


def test_the_walkthrough_proves_its_claims_on_seed_0(walkthrough: Path, _cache: Path) -> None:
    report = prove(load_incident(walkthrough), 0, worlds=False)
    assert report.ok, "\n".join(report.lines())
    by_id = {c.symptom_id: c for c in report.claims}
    assert by_id["nothing-failed"].context and by_id["nothing-failed"].without_faults.holds
    shared = next(d for d in report.discrimination if d.signal_id == "first-tokens-slower")
    assert shared.data_change is not None  # as the worked example says
