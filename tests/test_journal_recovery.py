"""A damaged journal line loses only itself; a journal cannot name files outside its folder."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from game.query.gateway import QueryResult
from game.session import Session, SessionError, SessionWarning, TranscriptError, load_transcript
from incidents.loader import load_incident

MINI = Path(__file__).parent / "data" / "incidents" / "tui-mini.yaml"


class Echo:
    def run(self, sql: str) -> QueryResult:
        return QueryResult(sql, ok=True, columns=["x"], rows=[(1,)], row_count=1)


def _journal(tmp_path: Path, queries: int) -> Path:
    session = Session.create(MINI, 0, "p", root=tmp_path)
    session.start()
    for i in range(queries):
        session.run_query(Echo(), f"SELECT {i + 1} AS q")
    path = session.path
    session.close()
    return path


def test_a_damaged_line_loses_only_itself(tmp_path: Path) -> None:
    path = _journal(tmp_path, 25)
    lines = path.read_text().splitlines()
    damaged = next(i for i, line in enumerate(lines) if '"index":3,' in line)
    lines[damaged] = lines[damaged][:40]  # cut short in the middle
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionWarning)
        session = Session.resume(path)
    try:
        kept = [e.data["index"] for e in session.queries]
        assert kept == [1, 2, *range(4, 26)]
        assert any("Q3 went with the damaged line" in w for w in session.warnings)
        event, _ = session.run_query(Echo(), "SELECT 26")
        assert event.data["index"] == 26
        assert session.pin(24, "A", "supports").data["query"] == 24
        with pytest.raises(SessionError, match="no query Q3"):
            session.pin(3, "A", "supports")
    finally:
        session.close()


@pytest.mark.parametrize("bad", ["../../../tmp/evil", "/etc/passwd", "..", ".hidden", "a/b", ""])
def test_session_ids_that_are_paths_are_refused(tmp_path: Path, bad: str) -> None:
    path = _journal(tmp_path, 1)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["session_id"] = bad
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(SessionError, match="session"):
        Session.resume(path)
    session = Session.in_memory(load_incident(MINI), 0, "p")
    doc = session.transcript()
    doc["session_id"] = bad
    target = tmp_path / "t.json"
    target.write_text(json.dumps(doc))
    with pytest.raises(TranscriptError, match="session id"):
        load_transcript(target, incident_path=MINI)


def test_a_huge_result_cannot_bloat_the_journal(tmp_path: Path) -> None:
    class Huge:
        def run(self, sql: str) -> QueryResult:
            row = tuple("x" * 19_000 for _ in range(50))
            return QueryResult(sql, ok=True, columns=[f"c{i}" for i in range(50)], rows=[row] * 20, row_count=20)

    session = Session.create(MINI, 0, "p", root=tmp_path)
    session.start()
    session.run_query(Huge(), "SELECT huge")
    path = session.path
    session.close()
    longest = max(len(line) for line in path.read_text().splitlines())
    assert longest < 100_000
    resumed = Session.resume(path)
    try:
        assert resumed.queries[0].data["row_count"] == 20
    finally:
        resumed.close()
