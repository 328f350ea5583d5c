"""A closed terminal ends the game, the session saved: `servedrill play` runs in a pseudo-terminal (the
python pty module), starts the fixture incident and types a query it does not run; then the terminal goes
away. The process must exit within a few seconds, cleanly (exit status 0), and the session must resume with
its draft (the unrun query) and with the game's hold on it closed (the game clock stopped when it went).

Three ways a terminal goes: its master side closes while the game is not the session leader (tmux killed
under `make play`: make gets the SIGHUP, the game only sees its terminal hang up; before the fix it spun
at full CPU), the master closes while the game is the session leader (the kernel sends it SIGHUP), and a
SIGHUP sent while the terminal is still there (`kill -HUP`)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from test_tui_support import FIXTURE

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

ROOT = Path(__file__).resolve().parent.parent
DRAFT_SQL = "SELECT 42 AS answer"
GONE_WITHIN_S = 30.0
"""Far above the game's own exit (its grace timer ends the process 0.8 s after it saves): only a game
that keeps running without its terminal takes this long."""
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


class Terminal:
    """`servedrill play FIXTURE` on a fresh pseudo-terminal; what it draws is collected in a thread."""

    def __init__(self, data: Path, controlling: bool) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "SERVEDRILL_DATA": str(data)}
        env.pop("TEXTUAL_DRIVER", None)

        def make_controlling() -> None:  # after setsid: this terminal becomes the child's own
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "play", str(FIXTURE), "--player", "pty"],
                                     cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, preexec_fn=make_controlling if controlling else None)
        os.close(slave)
        self.output = b""
        self.closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self.closed:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output = (self.output + chunk)[-200_000:]

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while needle.encode() not in ANSI.sub(b"", self.output):
            assert self.proc.poll() is None, f"the game exited ({self.proc.returncode}) before showing {needle!r}"
            assert time.monotonic() < deadline, f"no {needle!r} on the terminal within {timeout:.0f} s"
            time.sleep(0.02)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        self.closed = True
        os.close(self.master)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.closed:
            self.close()


def _session(data: Path) -> Path:
    found = list((data / "sessions").glob("*.jsonl"))
    return found[0] if len(found) == 1 else Path("")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close-not-leader", "close-leader", "sighup"])
def test_the_game_exits_saved_when_its_terminal_goes(tui_env: Path, how: str) -> None:
    from game.session import Session

    term = Terminal(tui_env, controlling=how == "close-leader")
    try:
        term.wait_for("pick an incident")
        term.type("\r")  # the briefing
        term.wait_for("Telemetry ready")
        term.type("\r")  # start: the workspace, its editor focused
        term.wait_for("Write SQL here")
        deadline = time.monotonic() + 30
        while not _session(tui_env).is_file():
            assert time.monotonic() < deadline, "no session file"
            time.sleep(0.05)
        term.type(DRAFT_SQL)
        term.wait_for(DRAFT_SQL)
        if how == "sighup":
            term.proc.send_signal(signal.SIGHUP)
        else:
            term.close()
        # a game that spins instead never exits; how soon it exits is measured by hand (about 0.4 s when
        # the game is not the session leader, as under `make play`), not asserted on a busy machine
        try:
            code = term.proc.wait(timeout=GONE_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {GONE_WITHIN_S:.0f} s after the terminal went ({how})")
    finally:
        term.kill()
    assert code == 0, f"exit status {code} ({how})"
    path = _session(tui_env)
    with Session.resume(path) as session:  # not locked any more, and it reads back
        assert session.state == "investigating"
        assert session.header.player == "pty"
        assert session.draft.get("editor") == DRAFT_SQL  # the query typed but not run
        opened, last_seen, closed = session.held[-2]  # the game's hold, closed as it exited
        assert closed and last_seen >= opened
