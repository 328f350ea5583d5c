"""Request traces an incident replays (workload app `arrival: {kind: replay, path: ...}`).

A trace is a JSONL or CSV file beside the incident (its path is relative to the incident file's folder and
may not leave it). One row per request: its arrival time (seconds) and its prompt and output token counts.
Column names, with the aliases real traces use:

    arrival_s      (arrived_at: Vidur's processed Splitwise traces; timestamp)
    prompt_tokens  (num_prefill_tokens, input_tokens)
    output_tokens  (num_decode_tokens, completion_tokens)

JSONL: one object per line (blank lines skipped). CSV: a header line, then rows; other columns are
ignored. Times are shifted so the first request arrives at 0; rows may come in any order (they are
sorted by time, stably). Every problem is reported as `file:line: what is wrong`, never a traceback.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_TRACE_BYTES = 64 << 20  # 64 MiB: about a million rows, far beyond an hour of one fleet's traffic
MAX_TRACE_ROWS = 1_000_000
MAX_TOKENS = 1 << 21  # a prompt or output longer than any model's context is a unit error, not a request
COLUMNS: dict[str, tuple[str, ...]] = {
    "arrival_s": ("arrival_s", "arrived_at", "timestamp"),
    "prompt_tokens": ("prompt_tokens", "num_prefill_tokens", "input_tokens"),
    "output_tokens": ("output_tokens", "num_decode_tokens", "completion_tokens"),
}


@dataclass(frozen=True)
class TraceProblem:
    """One problem with a trace: `path` and 1-based `line` (0: the file as a whole)."""

    path: str
    line: int
    message: str
    hint: str | None = None


@dataclass(frozen=True, eq=False)
class TraceRows:
    """A trace's rows, sorted by arrival: seconds from the first arrival (float64), tokens (int64 >= 1)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str
    digest: str = ""  # sha256 of the file's bytes: caches keyed on the incident must see the trace change


class _Bad(Exception):
    def __init__(self, line: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.line, self.message, self.hint = line, message, hint


def resolve_trace_path(base_dir: Path, relative: str) -> Path:
    """The trace's path under `base_dir`; ValueError if it is absolute, leaves the folder (also through a
    symbolic link) or is missing."""
    rel = Path(relative)
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError("a trace path is relative to the incident file's folder and stays inside it")
    base = base_dir.resolve()
    path = (base / rel).resolve()
    if not path.is_relative_to(base):
        raise ValueError("the trace path leads outside the incident file's folder (through a link)")
    if not path.is_file():
        raise ValueError(f"no trace file {relative!r} beside the incident")
    return path


def _column(names: list[str], want: str, line: int) -> str:
    for alias in COLUMNS[want]:
        if alias in names:
            return alias
    raise _Bad(line, f"no {want} column", f"name it {' or '.join(COLUMNS[want])}")


def _number(value: object, column: str, line: int, integer: bool) -> float:
    if isinstance(value, bool) or value is None or value == "":
        raise _Bad(line, f"{column} is missing or not a number: {value!r}")
    try:
        x = float(str(value))
    except (TypeError, ValueError):
        raise _Bad(line, f"{column} is not a number: {value!r}") from None
    if not math.isfinite(x):
        raise _Bad(line, f"{column} must be finite, got {value!r}")
    if integer:
        if x != int(x):
            raise _Bad(line, f"{column} must be a whole number of tokens, got {value!r}")
        if not 1 <= x <= MAX_TOKENS:
            raise _Bad(line, f"{column} must be within 1..{MAX_TOKENS}, got {value!r}")
    elif x < 0:
        raise _Bad(line, f"{column} must be >= 0 seconds, got {value!r}")
    return x


def _rows_jsonl(text: str) -> list[tuple[int, float, float, float]]:
    out: list[tuple[int, float, float, float]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _Bad(line_no, f"not valid JSON: {exc.msg}", "one JSON object per line") from None
        if not isinstance(obj, dict):
            raise _Bad(line_no, "a JSONL row must be an object", '{"arrival_s": 0.5, "prompt_tokens": 812, ...}')
        t, p, o = (_column(list(obj), want, line_no) for want in COLUMNS)
        out.append((line_no, _number(obj[t], t, line_no, False), _number(obj[p], p, line_no, True),
                    _number(obj[o], o, line_no, True)))
        if len(out) > MAX_TRACE_ROWS:
            raise _Bad(line_no, f"more than {MAX_TRACE_ROWS} rows")
    return out


def _rows_csv(text: str) -> list[tuple[int, float, float, float]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise _Bad(1, "the CSV file is empty", "a header line, then one row per request") from None
    except csv.Error as exc:
        raise _Bad(1, f"not valid CSV: {exc}") from None
    t, p, o = (header.index(_column(header, want, 1)) for want in COLUMNS)
    out: list[tuple[int, float, float, float]] = []
    try:
        for row in reader:
            line_no = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise _Bad(line_no, f"{len(row)} fields where the header has {len(header)}")
            out.append((line_no, _number(row[t].strip(), header[t], line_no, False),
                        _number(row[p].strip(), header[p], line_no, True),
                        _number(row[o].strip(), header[o], line_no, True)))
            if len(out) > MAX_TRACE_ROWS:
                raise _Bad(line_no, f"more than {MAX_TRACE_ROWS} rows")
    except csv.Error as exc:
        raise _Bad(reader.line_num, f"not valid CSV: {exc}") from None
    return out


def read_trace(path: Path) -> TraceRows | TraceProblem:
    """The trace at `path` (already resolved), or the first problem in it."""
    name = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            return TraceProblem(name, 0, f"the trace is {size >> 20} MiB; at most {MAX_TRACE_BYTES >> 20} MiB",
                                "replay a shorter stretch of it")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            return TraceProblem(name, 0, f"not UTF-8 text ({exc.reason})")
        rows = _rows_jsonl(text) if path.suffix.lower() == ".jsonl" else _rows_csv(text)
    except _Bad as bad:
        return TraceProblem(name, bad.line, bad.message, bad.hint)
    except OSError as exc:
        return TraceProblem(name, 0, f"cannot read the trace: {exc.strerror or exc}")
    if not rows:
        return TraceProblem(name, 0, "the trace has no requests")
    arrays = np.array([r[1:] for r in rows], dtype=float)
    order = np.argsort(arrays[:, 0], kind="stable")
    arrival = arrays[order, 0] - arrays[order[0], 0]
    prompt, output = arrays[order, 1].astype(np.int64), arrays[order, 2].astype(np.int64)
    for a in (arrival, prompt, output):
        a.setflags(write=False)
    return TraceRows(arrival, prompt, output, name, hashlib.sha256(raw).hexdigest())
