"""Every library incident proves itself on the simulation: its claims hold with the fault and not
without, every distractor's world shows what the page states, and every distractor can be ruled out
by some reference query (`servedrill validate --deep`, seed 0; `validate --deep` itself runs the
variant seeds 0-2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from incidents.loader import iter_library, load_variant
from telemetry_gen.proof import prove

pytestmark = pytest.mark.usefixtures("in_library_cache")


@pytest.mark.parametrize("path", iter_library(), ids=lambda p: p.stem)
def test_incident_proves_itself(path: Path) -> None:
    incident, variant = load_variant(path, 0)
    report = prove(incident, 0, variant=variant)
    assert report.ok, "\n".join(report.lines())
    assert len(report.worlds) == sum(1 for h in incident.hypotheses if not h.true)
