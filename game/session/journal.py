"""The journal file: one JSON line per event after a header line, appended, flushed and fsync'ed before the
call returns (whatever the UI acknowledged is on disk), locked against a second process.

Reading splits the file into its complete lines and the bytes after the last newline: a torn last line
was never acknowledged (the process died mid-write), so `repair_torn` either completes it (it parses as
a whole event) or cuts it off before anything is appended after it."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from game.session import seat, signing
from game.session.records import Event, Header, SessionError
from incidents.bounded_read import ReadRefused, open_regular, read_capped, size_text

MAX_JOURNAL_BYTES = 32 * 1024 * 1024
"""Largest session journal read, bytes. An honest one is a few MB: a query event keeps at most 64 KB of
rows (rules.KEPT_BYTES) and an incident allows 25-40 queries; 32 MB is also the transcript cap, and a
journal becomes a transcript of about its size. A larger file is refused unread."""
MAX_JOURNAL_LINE_BYTES = 16 * 1024 * 1024
"""Longest journal line, bytes, written or read: far above any event the game writes (a query's SQL,
columns and kept rows; the result that crosses to the game is at most game.query.limits.MAX_RESULT_BYTES),
and `append` refuses a longer one, so the game never writes a line it would not read back."""

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: sessions are not locked against a second process
    fcntl = None  # type: ignore[assignment]


def line_of(record: Event | Header) -> str:
    """One journal line (without its newline): compact JSON, the record's own key order, no NaN."""
    return json.dumps(record.to_dict(), separators=(",", ":"), allow_nan=False)


def create(folder: Path, session_id: str) -> tuple[Path, BinaryIO]:
    """A new, empty journal `folder`/`session_id`.jsonl, opened for appending and locked."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{session_id}.jsonl"
        fh = open(target, "x+b")  # noqa: SIM115 - kept open for the session's life; read too (a team's game)
    except OSError as exc:
        raise SessionError(f"cannot create a session file in {folder}: {exc.strerror or exc}") from None
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file this call made: nobody else has it
    return target, fh


def begin(folder: Path, header: Header) -> tuple[Path, BinaryIO]:
    """A new journal for `header`, its header line written: `create`, then in a served round the seat's
    checks and claim (game.session.seat), signed from its first line when the server gave its app a key
    (game.session.signing). Durable, directory entry included, before returning."""
    key = _key()
    target, fh = create(folder, header.session_id)
    try:
        seat.check_new(header)
    except BaseException:
        fh.close()
        target.unlink(missing_ok=True)
        raise
    if key is not None:
        signing.attach(fh, signing.Chain(key))
    append(fh, line_of(header), target)
    fsync_dir(folder)
    if header.members and seat.shares_journals():
        unlock(fh)  # a team's game: the other members' processes append to it too, each for one action
    return target, fh


def _key() -> bytes | None:
    try:
        return signing.key_from_env()
    except signing.KeyError_ as exc:
        raise SessionError(str(exc)) from None


def _open_existing(path: Path) -> BinaryIO:
    """An existing journal opened for reading and appending; SessionError when it cannot be."""
    try:
        # regular files only (a FIFO or /dev/zero would hang or fill memory), at most the journal cap
        return open_regular(path, max_bytes=MAX_JOURNAL_BYTES, what="session journal", writable=True)
    except ReadRefused as exc:
        raise SessionError(str(exc)) from None
    except OSError as exc:
        raise SessionError(f"cannot open session {path}: {exc.strerror or exc}") from None


def open_locked(path: Path) -> BinaryIO:
    """An existing journal opened for reading and appending, locked; SessionError when another servedrill
    process holds it or it cannot be opened."""
    fh = _open_existing(path)
    if fcntl is not None:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise SessionError(f"session {path.name} is open in another servedrill process") from None
    return fh


# ---------------------------------------------------------------- a team's shared journal
#
# In a team round every member's app process plays the team's one game, so they share its journal. None holds
# it locked between actions: each takes the lock for one action (`locked`), reads what the others appended
# since (`follow`), checks its own action against that and appends it. A reader that only follows takes the
# lock shared, so it never reads a line half written.


def open_shared(path: Path) -> BinaryIO:
    """An existing journal opened for reading and appending, locked (blocking: the other members hold it only
    for one action) until `unlock`: a team's shared game, read and repaired under the lock, then shared."""
    fh = _open_existing(path)
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    return fh


def unlock(fh: BinaryIO) -> None:
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(fh: BinaryIO | None, *, exclusive: bool) -> Iterator[None]:
    """Hold a shared journal's lock for one action (`exclusive`: to append) or one read."""
    if fh is None:
        raise SessionError("the session is closed; resume it to continue")
    if fcntl is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    try:
        yield
    finally:
        unlock(fh)


def follow(fh: BinaryIO, path: Path, offset: int) -> tuple[list[bytes], int, int]:
    """What was appended to an open journal after byte `offset`: (its complete lines, the offset after the last
    one, the length of a torn tail after them). Call it holding the lock; a torn tail is then a write that died
    half way (an exclusive holder cuts it off, as `repair_torn` does on resume)."""
    size = fh.seek(0, os.SEEK_END)
    if size > MAX_JOURNAL_BYTES:
        raise SessionError(f"{path}: larger than a session journal may be ({size_text(MAX_JOURNAL_BYTES)}); "
                           "refused")
    if size <= offset:
        return [], offset, 0
    fh.seek(offset)
    raw = fh.read(size - offset)
    end = raw.rfind(b"\n") + 1
    lines = raw[:end].split(b"\n")[:-1] if end else []
    return lines, offset + end, len(raw) - end


def cut(fh: BinaryIO, offset: int) -> None:
    """Cut a shared journal back to `offset` (a torn tail nobody acknowledged), durably."""
    fh.truncate(offset)
    fh.flush()
    os.fsync(fh.fileno())


def append(fh: BinaryIO | None, line: str, path: Path | None) -> None:
    """Append one line and make it durable before returning. On a failed write the file is cut back to
    where it was, so the next append does not glue onto half a line."""
    if fh is None:
        raise SessionError("the session is closed; resume it to continue")
    chain = signing.chain_of(fh)
    mac = None
    if chain is not None:  # a served round's journal: every line carries the server's MAC
        line, mac = chain.sign(line)
    data = (line + "\n").encode("utf-8")
    if len(data) > MAX_JOURNAL_LINE_BYTES:
        raise SessionError(f"could not save to {path}: the record is {size_text(len(data))}, over the "
                           f"{size_text(MAX_JOURNAL_LINE_BYTES)} a journal line may hold")
    start = fh.seek(0, os.SEEK_END)
    try:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):  # best effort: the write error is the one to report
            fh.truncate(start)
        raise SessionError(f"could not save to {path}: {exc.strerror or exc}") from None
    if chain is not None:
        chain.head = mac


def fsync_dir(folder: Path) -> None:
    """Make a new file's directory entry durable (a file's own fsync does not). Best effort: a folder
    that cannot be opened or synced (some filesystems refuse) leaves the entry as durable as it gets."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class JournalText:
    """A journal as read: its header, its event lines numbered as in the file (blank ones left out), and
    the bytes after the last newline (`torn`, empty when the file ends with a newline)."""

    header: Header
    lines: list[tuple[int, bytes]]
    torn: bytes
    torn_number: int
    """The line number the torn tail has in the file."""
    size: int


def read(fh: BinaryIO, path: Path) -> JournalText:
    """Split an opened journal into header, event lines and a torn tail; SessionError for a missing or
    damaged header (without it nothing can be resumed). At most MAX_JOURNAL_BYTES are read (a file that
    grew past it since it was opened is refused)."""
    raw = read_capped(fh, MAX_JOURNAL_BYTES)
    if len(raw) > MAX_JOURNAL_BYTES:
        raise SessionError(f"{path}: larger than a session journal may be ({size_text(MAX_JOURNAL_BYTES)}); "
                           "refused")
    lines = raw.split(b"\n")
    torn = lines.pop() if lines else b""  # bytes after the last newline: a write cut short
    if not lines:
        raise SessionError(f"{path}:1: the session file has no complete header line")
    try:
        header = Header.from_dict(json.loads(lines[0]))
    except (ValueError, TypeError) as exc:
        raise SessionError(f"{path}:1: bad session header: {exc}") from None
    seat.check_resume(header)
    numbered = [(n, line) for n, line in enumerate(lines[1:], start=2) if line.strip()]
    text = JournalText(header, numbered, torn, len(lines) + 1, len(raw))
    _follow_chain(fh, path, json.loads(lines[0]), text)
    return text


def _follow_chain(fh: BinaryIO, path: Path, header: dict[str, object], text: JournalText) -> None:
    """A signed journal is continued only by the key's holder, and only when its chain verifies up to its
    last complete line (a torn last line that verifies may be completed: `repair_torn`)."""
    if not signing.is_signed(header):
        return
    key = _key()
    if key is None:
        raise SessionError(f"{path}: this session was signed by a game-day server; it can only be continued "
                           "there (open your personal link again)")
    try:
        records = [json.loads(line) for _, line in text.lines]
        head = signing.verify_chain(key, header, records, [n for n, _ in text.lines])
    except ValueError as exc:
        raise SessionError(f"{path}: a line does not parse ({exc}); the signed journal was changed") from None
    except signing.ChainBroken as exc:
        raise SessionError(f"{path}:{exc.line}: {exc.reason}; it cannot be continued") from None
    chain = signing.Chain(key, head)
    if text.torn.strip():
        try:
            last = json.loads(text.torn)
        except ValueError:
            last = None  # half a line: repair_torn cuts it off
        if last is not None:
            try:
                chain.pending = signing.verify_chain(key, header, [*records, last],
                                                     [*(n for n, _ in text.lines), text.torn_number])
            except signing.ChainBroken as exc:
                raise SessionError(f"{path}:{exc.line}: {exc.reason}; it cannot be continued") from None
    signing.attach(fh, chain)


def repair_torn(fh: BinaryIO, text: JournalText, *, complete: bool) -> None:
    """Finish a journal whose last line was cut short: `complete` (it parsed as a whole event) adds the
    missing newline, else the tail is cut off. Durable before returning; then positioned at the end."""
    chain = signing.chain_of(fh)
    if text.torn.strip():
        if complete:
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
        else:
            fh.truncate(text.size - len(text.torn))
        fh.flush()
        os.fsync(fh.fileno())
        if chain is not None and complete and chain.pending is not None:
            chain.head = chain.pending
    fh.seek(0, os.SEEK_END)


def in_use(path: Path) -> bool:
    """Whether a live Session holds the file's lock (it is being played right now, maybe in this very
    process). Probes with a shared, non-blocking lock that is released at once; never blocks."""
    if fcntl is None:
        return False
    try:
        # non-blocking and regular files only: probing a FIFO put in a session's place must not hang
        with open_regular(path, max_bytes=1 << 62, what="session journal") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def parse_line(line: bytes) -> Event:
    """One event line; ValueError (JSON or shape) names the problem."""
    return Event.from_dict(json.loads(line))

