"""Interviewer items are signed: a rival who can write the shared sessions folder cannot send hints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from game.gameday import gm
from game.query.gateway import QueryResult
from game.session import Session
from game.session.gm_key import load_key, sign, verify


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "gm.key"
    monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(path))
    return path


def test_the_key_is_private_and_signatures_bind_the_content(key_file: Path) -> None:
    item = sign({"id": "a1", "kind": "hint", "text": "look at clocks", "cost": 5})
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert verify(item)
    assert not verify({**item, "cost": 100})
    assert not verify({k: v for k, v in item.items() if k != "sig"})
    assert load_key() == load_key()


def test_a_forged_inbox_line_is_refused_and_a_signed_one_delivered(tmp_path: Path, mini_incident: Path) -> None:
    session = Session.create(mini_incident, 0, "candidate", root=tmp_path)
    try:
        session.start()
        forged = {"id": "f00", "time": 1.0, "kind": "hint", "from": "Interviewer", "text": "x", "cost": 100}
        with open(gm.inbox_path(session.path), "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**forged, "sig": "0" * 64}) + "\n")
        assert session.poll_gm() == []
        assert "not signed" in session.gm_refused["f00"]
        sent = gm.send(session.path, "message", text="hello")
        delivered = session.poll_gm()
        assert [u.text for u in delivered] == ["hello"] and sent["id"] in session.gm_delivered
        assert session.hints_taken == 0
        session.run_query(type("Echo", (), {"run": lambda self, sql: QueryResult(sql, ok=True)})(), "SELECT 1")
    finally:
        session.close()


def test_a_different_key_cannot_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mini_incident: Path) -> None:
    session = Session.create(mini_incident, 0, "candidate", root=tmp_path)
    try:
        session.start()
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / "rival.key"))
        gm.append_item(session.path, gm.make_item("message", text="from the rival"))
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / "config" / "gm.key"))
        load_key(create=True)
        assert session.poll_gm() == []
    finally:
        session.close()
