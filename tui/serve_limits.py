"""The bounds `servedrill serve` puts on every browser tab and its app process, and the small pieces
that apply them (no aiohttp import here: the app side, `served_app_setup`, runs in every served app).

What a websocket client controls, and what bounds it (values in `Limits`, documented in docs/cli.md):
- the terminal size (URL query `width`/`height`, and `resize` messages): clamped to `max_columns` x
  `max_rows`. Textual allocates per cell (compositor, screen buffers, the output it writes), so the size
  decides the app's memory and CPU per frame; 30000x30000 reached about 3 GB. 500x200 is wider than
  a 4K screen shows at the smallest readable font (3840 px / 8 px per cell = 480 columns);
- the size of one websocket message (`max_message_bytes`; a larger frame closes the socket with 1009
  before its payload is read);
- the rate of messages and of input events (keys, mouse events; token buckets: a burst, then a
  sustained rate; going over closes the socket), and of resizes (at most one applied per
  `resize_interval_s`, the last one wins);
- how long a tab may sit without input (`idle_s`) and how long it may run at all (`session_s`).
The app process itself is watched: its resident memory (`app_rss_mb`) and the CPU time it has used
(`app_cpu_s`). The app gets its own process group, killed (SIGKILL) `quit_grace_s` after its socket
closes if it has not quit by then; the app watches the server in turn (telemetry_gen.lifeline), so it
ends within a second of the server's death, however the server died.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass

SERVED_APP_ENV = "SERVEDRILL_SERVED_APP"
"""Set to "1" in the environment of every app `serve` starts: the app then watches the server."""

# Close codes a tab's websocket ends with (4000-4999 are the application's own, RFC 6455 7.4.2).
CLOSE_TOO_BIG = 1009
"""A message over `max_message_bytes` (aiohttp's own close, before the payload is read)."""
CLOSE_TOO_FAST = 1008
"""More messages or typed bytes than the token buckets allow (policy violation)."""
CLOSE_IDLE = 4000
CLOSE_SESSION_TIME = 4001
CLOSE_APP_MEMORY = 4002
CLOSE_APP_CPU = 4003
CLOSE_APP_CPU_RATE = 4004
CLOSE_APP_ENDED = 1000
"""The app quit (the player left the game) or died."""


@dataclass(frozen=True)
class Limits:
    """Every bound one tab and its app process are held to. Times in seconds, sizes as named."""

    max_columns: int = 500
    """Terminal width in cells (see the module docstring for why 500x200)."""
    max_rows: int = 200
    """Terminal height in cells."""
    max_message_bytes: int = 64 * 1024
    """One websocket message from the browser. A keystroke is a few bytes, a resize under 100; 64 KiB
    holds the largest paste `input_burst` allows (8,192 characters, JSON-escaped)."""
    message_burst: int = 1000
    """Messages the browser may send at once before the sustained rate applies."""
    messages_per_s: float = 200.0
    """Sustained messages per second. xterm.js sends one message per key and per mouse event; key
    auto-repeat is about 30/s and mouse motion about 60/s; the load test types at 250 keys/s for the
    length of one query, which the burst absorbs."""
    input_burst: int = 8192
    """Input events (a typed character, or one escape sequence: an arrow key, a mouse event) the browser
    may send at once: a paste of up to 8,192 characters (xterm.js sends a paste as one message)."""
    inputs_per_s: float = 200.0
    """Sustained input events per second: a fast typist is 15 a second, mouse motion about 60. Textual
    turns each input event into an event object queued in the app (about 4 KB each); a served app
    handles roughly 800 a second while idle on the picker, so at this rate it keeps up, where 4,000
    a second grew it by 15 MB a second without bound."""
    resize_interval_s: float = 0.1
    """At most one resize reaches the app per interval (the last one wins); dragging a window's edge
    sends dozens per second, and each is a full re-layout."""
    app_rss_mb: int = 1000
    """Resident memory of one app process (MB, 10^6 bytes); the app is killed above it. A served app
    idles at about 150 MB and reaches about 220 MB playing at 500x200 (docs/cli.md has the figures): the
    cap leaves 4x room. A watched RSS cap, not RLIMIT_AS: DuckDB and numpy reserve address space they
    never touch, and the SQL worker (which keeps its own, lower cap) would inherit the limit."""
    app_cpu_s: float = 1800.0
    """CPU time (user + system) of one app process over its life. Idle, an app uses well under 1% of a
    core; playing a whole incident takes tens of seconds; 30 minutes of CPU is a runaway app (the SQL
    worker, a process of its own, has its own per-query time limit)."""
    app_cpu_share: float = 0.5
    """Share of one core the app process may use on average over `app_cpu_window_s` (its process group is
    killed above it). A player's app averages a few percent of a core over a minute (a query's work is the
    SQL worker's, a process of its own); a tab that keeps its app busy within the input limits (30-85% of
    a core, measured) would otherwise hold a core for half an hour before `app_cpu_s` stops it."""
    app_cpu_window_s: float = 60.0
    """The window `app_cpu_share` is averaged over, seconds: long enough for a burst of rendering (a
    500x200 redraw, a big result table) to pass."""
    app_nice: int = 5
    """The app process's scheduling niceness: the server's own loop (every other tab's messages) runs
    ahead of any one app."""
    idle_s: float = 1800.0
    """A tab with no typed key, mouse event or resize for this long is closed (its app quits); its
    session is journalled, and `servedrill resume` picks it up."""
    session_s: float = 4 * 3600.0
    """The longest a tab may stay open at all: an incident takes under an hour."""
    quit_grace_s: float = 1.0
    """After the socket closes, how long the app has to quit by itself before its process group is
    killed (SIGKILL)."""
    watch_interval_s: float = 0.25
    """How often the server reads each app's memory and CPU from /proc: an app growing by 200 MB/s
    overshoots its cap by at most 50 MB before it is killed."""

    def clamp(self, width: int, height: int) -> tuple[int, int]:
        """A terminal size (cells) within 1..max_columns x 1..max_rows."""
        return max(1, min(width, self.max_columns)), max(1, min(height, self.max_rows))

    def replace(self, **changes: float) -> Limits:
        """These limits with some changed (by field name); ValueError for an unknown name or a value
        that is not positive."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        out: dict[str, float] = {}
        for name, value in changes.items():
            if name not in fields:
                raise ValueError(f"unknown limit {name!r} (known: {', '.join(sorted(fields))})")
            if not value > 0 or value == float("inf"):
                raise ValueError(f"limit {name} must be a positive finite number, not {value}")
            out[name] = int(value) if fields[name].type == "int" else float(value)
        return dataclasses.replace(self, **out)  # type: ignore[arg-type]


DEFAULT_LIMITS = Limits()

_SEQUENCE = re.compile(r"\x1b(?:\[[0-9;:<=>?]{0,32}[ -/]{0,2}[@-~]|O.|.)", re.DOTALL)
"""One short escape sequence (CSI, SS3 or ESC + a character), which the app reads as one input event;
longer runs are counted character by character."""


def input_events(text: str) -> int:
    """How many input events `text` (a stdin message) makes: its characters, with each short escape
    sequence counted once."""
    rest, sequences = _SEQUENCE.subn("", text)
    return len(rest) + sequences


def parse_limit(text: str) -> tuple[str, float]:
    """`NAME=VALUE` (a `serve --limit` option) as (name, value); ValueError with a one-line reason."""
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"--limit {text!r}: expected NAME=VALUE, e.g. idle_s=600")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"--limit {text!r}: {value!r} is not a number") from None
    return name.strip(), number


def size_from_query(value: str | None, default: int) -> int:
    """A terminal dimension from a URL query value: `default` when absent or not a whole number (long
    digit strings are not parsed: they only become the maximum after clamping anyway)."""
    if value is None:
        return default
    text = value.strip()
    digits = text.lstrip("+-")
    if not digits.isdigit() or not digits.isascii():
        return default
    if len(digits) > 9:
        return -1 if text.startswith("-") else 10**9
    return int(text)


def size_from_message(value: object) -> int | None:
    """A terminal dimension from a resize message's JSON value, or None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):  # NaN, infinities
        return None
    return int(max(-1.0, min(float(value), 1e9)))


class TokenBucket:
    """`burst` tokens, refilled at `rate` per second; `take(n)` is False (taking nothing) when fewer than
    `n` are left. Time from `clock` (seconds)."""

    def __init__(self, burst: float, rate: float, clock: object = time.monotonic) -> None:
        self.burst = float(burst)
        self.rate = float(rate)
        self._clock = clock
        self.tokens = float(burst)
        self._at = self._now()

    def _now(self) -> float:
        return float(self._clock())  # type: ignore[operator]

    def take(self, n: float = 1.0) -> bool:
        now = self._now()
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        if n > self.tokens:
            return False
        self.tokens -= n
        return True


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def rss_bytes(pid: int) -> int | None:
    """Resident memory of process `pid` in bytes (from /proc/PID/statm), None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process `pid` (its own, not its children's) in seconds, None when it
    is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


def served_app_setup() -> None:
    """In an app started by `serve` (its environment has SERVED_APP_ENV=1): exit as soon as the server
    is gone, whatever killed it. Elsewhere: nothing."""
    if os.environ.get(SERVED_APP_ENV) == "1":
        from game.api import end_with_parent

        end_with_parent()
