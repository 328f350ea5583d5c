"""Bounded reads of files from outside the process (incidents.bounded_read and its callers): a FIFO, a
device (/dev/zero), a directory or a symlink to one in the place of a session journal, an interviewer
inbox, a draft, a transcript, a game-day state file or a key file is refused at once with a line naming
the file (or skipped by a caller that skips), and a huge file or a huge line costs bounded memory.

Each test asserts its bound: in-process memory by tracemalloc's peak, a command's by its own
ru_maxrss (os.wait4), time by a deadline (a call that would block on a FIFO runs on a thread and the
test fails instead of hanging), a command's work by its own CPU seconds (os.wait4 too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from game.gameday import gm
from game.gameday.collect import journals, read_state
from game.session import (
    Session,
    SessionError,
    TranscriptError,
    draft_path,
    inbox_path,
    list_sessions,
    load_transcript,
    read_inbox,
)
from game.session.draft import read_held
from game.session.gm_key import sign
from game.session.inbox import MAX_INBOX_BYTES, MAX_INBOX_LINE_BYTES, InboxReader
from game.session.journal import MAX_JOURNAL_BYTES
from incidents.bounded_read import CHUNK_BYTES, ReadRefused, read_bytes, read_lines

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "tests" / "data" / "incidents" / "good.yaml"
MB = 1024 * 1024
DEADLINE_S = 10.0
"""Seconds a refusal may take on a busy machine (it takes milliseconds): a FIFO read would block forever
and /dev/zero would take minutes and gigabytes, so a pass under this is the bound."""
SMALL_PEAK = 4 * MB
"""Memory a refused or skipped read may allocate (one chunk and one line cap, with copies)."""


def _within(fn: Callable[[], Any], seconds: float = DEADLINE_S) -> tuple[Any, float, int]:
    """(what `fn` returned, seconds it took, tracemalloc peak bytes); fails the test when `fn` has not
    returned within `seconds` (it runs on a daemon thread, so a read that blocks cannot hang the run)."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert not worker.is_alive(), f"still reading after {seconds} s (blocked or unbounded)"
    if "error" in box:
        raise box["error"]
    return box.get("value"), took, peak


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("SERVEDRILL_DATA", str(tmp_path / "data"))
    incident = tmp_path / "slow-decode.yaml"
    incident.write_text(GOOD.read_text(encoding="utf-8"), encoding="utf-8")
    s = Session.create(incident, 0, "ada")
    s.start()
    return s


def _hostile(path: Path, kind: str) -> None:
    """Put a hostile file at `path`: a symlink to /dev/zero, a FIFO, a directory."""
    path.unlink(missing_ok=True)
    if kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


KINDS = ["devzero", "fifo", "directory"]


# ---------------------------------------------------------------- the helper


@pytest.mark.parametrize("kind", KINDS)
def test_the_helper_refuses_anything_but_a_regular_file_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "x.jsonl"
    _hostile(path, kind)
    with pytest.raises(ReadRefused) as caught:
        _within(lambda: read_bytes(path, max_bytes=MB, what="session journal"))
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "not a regular file" in message and "\n" not in message
    with pytest.raises(ReadRefused):
        _within(lambda: read_lines(path, 0, max_bytes=MB, max_line=1024, what="interviewer inbox"))


def test_a_symlink_is_refused_where_links_make_no_sense(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.write_bytes(b"{}\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_bytes(link, max_bytes=MB, what="transcript") == b"{}\n"  # followed where links are fine
    with pytest.raises(ReadRefused, match="symbolic link"):
        read_bytes(link, max_bytes=MB, what="draft", follow_symlinks=False)


def test_a_file_over_its_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as fh:
        fh.truncate(200 * MB)  # sparse: 200 MB on paper

    def refused() -> str:
        with pytest.raises(ReadRefused) as caught:
            read_bytes(path, max_bytes=MB, what="transcript")
        return str(caught.value)

    message, _, peak = _within(refused)
    assert message == f"{path}: 200 MB, larger than a transcript may be (1 MB); refused unread"
    assert peak < SMALL_PEAK


def test_read_lines_skips_a_long_line_in_bounded_memory_and_keeps_the_lines_around_it(tmp_path: Path) -> None:
    path = tmp_path / "inbox.gm"
    with path.open("wb") as fh:
        fh.write(b'{"a": 1}\n')
        fh.write(b"x" * (20 * MB) + b"\n")
        fh.write(b'{"b": 2}\n')
        fh.write(b'{"c": 3')  # still being written: left for the next read
    found, _, peak = _within(lambda: read_lines(path, 0, max_bytes=64 * MB, max_line=64 * 1024, what="inbox"))
    assert [line for _, line in found.lines] == [b'{"a": 1}', None, b'{"b": 2}']
    assert found.end == path.stat().st_size - len(b'{"c": 3')
    assert len(found.problems) == 1 and "longer than" in found.problems[0]
    assert peak < 2 * CHUNK_BYTES + 4 * 64 * 1024 + MB  # never the 20 MB line


# ---------------------------------------------------------------- the interviewer's inbox


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_inbox_gives_the_candidate_nothing_at_once(session: Session, kind: str) -> None:
    _hostile(inbox_path(session.path), kind)
    updates, _, peak = _within(session.poll_gm)
    assert updates == [] and peak < SMALL_PEAK
    items, _, _ = _within(lambda: read_inbox(inbox_path(session.path)))
    assert items == ([], 0)


def test_a_100_mb_inbox_line_is_skipped_in_bounded_memory(session: Session) -> None:
    inbox = inbox_path(session.path)
    item = json.dumps(sign({"id": "late", "time": time.time(), "kind": "message", "from": "Grace",
                            "text": "still delivered"}))
    with inbox.open("wb") as fh:
        fh.seek(10 * MB)  # sparse: a 10 MB line of NULs, within the inbox cap: the item after it counts
        fh.write(b"\n" + item.encode() + b"\n")
    updates, _, peak = _within(session.poll_gm)
    assert [u.text for u in updates] == ["still delivered"]
    assert peak < 10 * MB / 2  # the long line is never held whole
    # a 100 MB line: past the inbox cap, read up to it (16 MB) in chunks and dropped
    with inbox.open("r+b") as fh:
        fh.seek(100 * MB, os.SEEK_END)
        fh.write(b"\n")
    updates, _, peak = _within(session.poll_gm)
    assert updates == [] and peak < SMALL_PEAK
    reader = InboxReader(inbox)
    assert _within(reader.new_items)[0][-1]["id"] == "late"
    assert any("larger than an interviewer inbox may be" in p for p in reader.problems)
    assert MAX_INBOX_LINE_BYTES < MAX_INBOX_BYTES < 100 * MB


@pytest.mark.parametrize("kind", ["devzero", "fifo"])
def test_watch_reports_a_hostile_inbox_and_goes_on(session: Session, kind: str) -> None:
    _hostile(inbox_path(session.path), kind)
    watch, _, peak = _within(lambda: gm.Watch(session.path))
    snap, _, _ = _within(watch.snapshot)
    assert snap["ok"] and snap["pending"] == [] and peak < 16 * MB
    assert any(str(inbox_path(session.path)) in w and "not a regular file" in w for w in snap["warnings"])


def test_send_refuses_an_inbox_that_is_a_link_or_a_fifo_and_overlong_text(session: Session) -> None:
    inbox = inbox_path(session.path)
    _hostile(inbox, "fifo")
    with pytest.raises(gm.GMError, match="cannot write the inbox"):  # not blocked waiting for a reader
        _within(lambda: gm.send(session.path, "message", text="hello", check=False))
    _hostile(inbox, "devzero")
    with pytest.raises(gm.GMError, match="cannot write the inbox"):
        gm.send(session.path, "message", text="hello", check=False)
    inbox.unlink()
    with pytest.raises(gm.GMError, match="at most 4000"):
        gm.send(session.path, "message", text="x" * 4001, check=False)


# ---------------------------------------------------------------- journals, drafts, transcripts


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_journal_is_refused_by_resume_and_watch_and_skipped_by_listings(session: Session,
                                                                                     kind: str) -> None:
    path = session.path
    session.close()
    _hostile(path, kind)
    with pytest.raises(SessionError, match="not a regular file") as caught:
        _within(lambda: Session.resume(path))
    assert str(caught.value).startswith(str(path))
    with pytest.raises(gm.GMError, match="not a regular file"):
        _within(lambda: gm.Watch(path))
    listed, _, peak = _within(list_sessions)
    assert listed == [] and peak < SMALL_PEAK
    found, _, _ = _within(lambda: journals([path.parent]))
    assert found == []


def test_a_journal_over_its_cap_is_refused(session: Session) -> None:
    path = session.path
    session.close()
    with path.open("r+b") as fh:
        fh.truncate(MAX_JOURNAL_BYTES + 1)  # sparse
    with pytest.raises(SessionError, match="larger than a session journal may be"):
        _within(lambda: Session.resume(path))
    assert journals([path.parent]) == []


@pytest.mark.parametrize("kind", ["devzero", "fifo"])
def test_a_hostile_draft_is_ignored_with_a_warning(session: Session, kind: str) -> None:
    path = session.path
    session.close()
    _hostile(draft_path(path), kind)
    assert _within(lambda: read_held(path))[0] == []
    with pytest.warns(Warning, match="ignored an unreadable draft"):
        resumed, _, peak = _within(lambda: Session.resume(path))
    assert peak < 16 * MB
    resumed.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_transcript_and_state_file_are_refused(tmp_path: Path, kind: str) -> None:
    transcript = tmp_path / "t.json"
    _hostile(transcript, kind)
    with pytest.raises(TranscriptError, match="not a regular file") as caught:
        _within(lambda: load_transcript(transcript))
    assert str(caught.value).startswith(f"{transcript}: ")
    _hostile(tmp_path / "gameday.json", kind)
    assert _within(lambda: read_state(tmp_path))[0] == {}


def test_a_hostile_key_file_is_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from game.session.gm_key import load_key

    key = tmp_path / "gm.key"
    for kind in ("devzero", "fifo"):
        _hostile(key, kind)
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(key))
        assert _within(load_key)[0] is None


# ---------------------------------------------------------------- the commands the reviewer drove


def _command(args: list[str], env: dict[str, str], timeout: float = 300.0) -> tuple[int, str, float, float]:
    """(exit code, stdout, CPU seconds, peak resident MB) of `servedrill ARGS`, measured on that process.
    CPU, not the wall clock: reading /dev/zero burns CPU however busy the machine is, while a busy machine
    stretches the wall clock of an honest run; a read blocked on a FIFO uses no CPU and is caught by
    `timeout` (wall seconds), which only a hang reaches."""
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"servedrill {' '.join(args)} ran past {timeout} s")
        time.sleep(0.05)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, out, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["devzero", "fifo"])
def test_watch_and_report_with_a_hostile_inbox_stay_at_their_normal_cost(session: Session, kind: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    path = str(session.path)
    gm.send(session.path, "message", text="a normal inbox", check=False)
    session.close()
    base = {cmd: _command([cmd, path, "--json"], env) for cmd in ("watch", "report")}
    _hostile(inbox_path(session.path), kind)
    for cmd, (code0, _, took0, rss0) in base.items():
        code, out, took, rss = _command([cmd, path, "--json"], env)
        assert code == code0 == 0, out
        assert rss < 1.5 * rss0, f"{cmd}: {rss:.0f} MB against {rss0:.0f} MB with a normal inbox"
        assert took < 2 * took0 + 2.0, f"{cmd}: {took:.1f} CPU s against {took0:.1f} s with a normal inbox"


@pytest.mark.parametrize("kind", ["devzero", "fifo", "directory"])
def test_commands_given_a_hostile_journal_path_say_so_in_one_line(tmp_path: Path, kind: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SERVEDRILL_DATA": str(tmp_path / "data")}
    path = tmp_path / "s.jsonl"
    _hostile(path, kind)
    for args in (["watch", str(path), "--json"], ["resume", str(path), "--plain"]):
        code, out, took, _ = _command(args, env)
        assert code == 1 and took < DEADLINE_S
        if "--json" in args:
            error = json.loads(out)["error"]
            assert error.startswith(f"{path}: ") and "not a regular file" in error and "internal" not in error
