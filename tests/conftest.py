"""Shared fixtures: one build cache for every test that simulates the library, so an incident's worlds
are built once per run (the proof and the players tests use the same ones); the incident YAML fixtures
of tests/data/incidents by name (`incident_data`, `mini_incident`, `good_incident_text`) rather than a
path constant repeated in each module.

Markers: `slow` (registered in pyproject.toml) marks the tests that simulate whole incidents, prove the
library, drive the app or a browser; `make test-fast` (pytest -m "not slow") is the inner loop."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.register_assert_rewrite("gameday_support")  # a helper module, not a test_*.py file: rewrite its asserts too

INCIDENT_DATA = Path(__file__).parent / "data" / "incidents"
"""The incident files the tests use (small fleets, short windows; tui-mini is the smallest)."""


@pytest.fixture(scope="session")
def incident_data() -> Path:
    return INCIDENT_DATA


@pytest.fixture(scope="session")
def mini_incident() -> Path:
    """tests/data/incidents/tui-mini.yaml: the smallest incident that builds telemetry and worlds."""
    return INCIDENT_DATA / "tui-mini.yaml"


@pytest.fixture(scope="session")
def good_incident_text() -> str:
    """The text of tests/data/incidents/good.yaml, a valid incident using most of the format."""
    return (INCIDENT_DATA / "good.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def library_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A build cache shared by the whole run ($SERVEDRILL_CACHE while the test uses it), by every xdist
    worker of it too: the cache lets one process build a database while the others wait for it, so the
    worlds the library proof builds serve the players tests whichever worker runs them. Set
    SERVEDRILL_TEST_CACHE to keep it between runs (a developer's loop; CI starts empty)."""
    keep = os.environ.get("SERVEDRILL_TEST_CACHE")
    if keep:
        folder = Path(keep)
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker's base temp is <run's base>/popen-gwN: the parent is the run's, the same for all workers
        folder = tmp_path_factory.getbasetemp().parent / "library-cache"
    else:
        folder = tmp_path_factory.mktemp("library-cache")
    folder.mkdir(parents=True, exist_ok=True)
    yield folder


FIRST = ("test_library_proof.py",)
"""Test files run first: the library proof is the longest file and builds the worlds other files reuse, so
under xdist (`make test` runs `pytest -n auto --dist loadfile`) starting it first keeps it off the tail."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: every other file keeps its order


@pytest.fixture()
def in_library_cache(library_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEDRILL_CACHE", str(library_cache))
    return library_cache


@pytest.fixture(autouse=True, scope="session")
def _gm_key_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The interviewer's signing key goes to a temporary file, not the developer's ~/.config; child
    processes the tests start inherit it."""
    old = os.environ.get("SERVEDRILL_GM_KEY_FILE")
    os.environ["SERVEDRILL_GM_KEY_FILE"] = str(tmp_path_factory.mktemp("gm-key") / "gm.key")
    yield
    if old is None:
        os.environ.pop("SERVEDRILL_GM_KEY_FILE", None)
    else:
        os.environ["SERVEDRILL_GM_KEY_FILE"] = old
