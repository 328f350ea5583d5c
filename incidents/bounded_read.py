"""Reading a file that comes from outside the process, with bounds: regular files only, a size cap per
kind of file, a length cap per line for JSON-lines files.

Every reader of a file someone else may have put there (session journals, interviewer inboxes, drafts,
transcripts, game-day state files, the interviewer's key, incident files) goes through here, so that
a FIFO, a device (`/dev/zero`), a directory or a symlink to one is refused at once, and a huge file or
a huge line costs a bounded amount of memory and time. Open is non-blocking (a FIFO with no writer
would block a plain `open` forever), the file is checked with `fstat` on the descriptor actually
opened (no race with a rename), and reads stop one byte past the cap (a file that grows while it is
read is refused as too large, never read whole).

A refusal is `ReadRefused`, an `OSError` (callers that skip unreadable files already catch that):
`str()` is one line, ``<path>: <what is wrong>``, and `strerror` is the problem alone, so a caller's
"cannot read X: {exc.strerror}" reads naturally."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 1 << 20
"""Bytes read at a time when following a JSON-lines file: the memory a long line costs beyond its cap."""

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


class ReadRefused(OSError):
    """A file the bounded reader will not read: `path` and `problem`, one line."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(problem)
        self.path = str(path)
        self.problem = problem
        self.strerror = problem
        self.filename = self.path

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def size_text(n: int) -> str:
    """A byte count for a message: "32 MB", "64 KB", "512 bytes" (binary units, named as people say them)."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _a(what: str) -> str:
    """`what` with its indefinite article ("an interviewer inbox", "a draft")."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"{kind}, not a regular file; refused unread"


def open_regular(path: Path | str, *, max_bytes: int, what: str, follow_symlinks: bool = True,
                 writable: bool = False) -> BinaryIO:
    """`path` opened in binary for reading (with `writable`, for reading and writing: "rb+"), when it is
    a regular file of at most `max_bytes` bytes.

    `what` names the kind of file for the message ("session journal"). Without `follow_symlinks`, a
    symbolic link is refused (for files this program alone creates, where a link makes no sense).
    Raises ReadRefused for what is refused, and the plain OSError (FileNotFoundError, ...) otherwise."""
    # a look before opening: a device is not even opened (opening some has effects, e.g. a tape rewinds)
    before = os.stat(path, follow_symlinks=follow_symlinks)
    if (problem := _not_regular(before.st_mode)) is not None:
        raise ReadRefused(path, f"{problem} ({_a(what)} is a regular file)")
    flags = ((os.O_RDWR if writable else os.O_RDONLY) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOCTTY", 0))
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise ReadRefused(path, f"a symbolic link; refused unread ({_a(what)} is a regular file)") from None
        raise
    try:
        st = os.fstat(fd)  # the file actually opened: it may have been swapped since the look above
        if (problem := _not_regular(st.st_mode)) is not None:
            raise ReadRefused(path, f"{problem} ({_a(what)} is a regular file)")
        if st.st_size > max_bytes:
            raise ReadRefused(path, f"{size_text(st.st_size)}, larger than {_a(what)} may be "
                                    f"({size_text(max_bytes)}); refused unread")
        return os.fdopen(fd, "rb+" if writable else "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(fh: BinaryIO, max_bytes: int) -> bytes:
    """The rest of an open file, at most `max_bytes` + 1 bytes (one more tells a file over the cap).
    Reads what `fstat` says is there first: `read(n)` allocates n bytes up front, so asking for the cap
    would cost the cap on every small file."""
    try:
        left = os.fstat(fh.fileno()).st_size - fh.tell()
    except OSError:
        left = max_bytes
    want = max(0, min(left, max_bytes)) + 1
    raw = fh.read(want)
    if len(raw) == want and want <= max_bytes:  # grown since: the rest, still within the cap
        raw += fh.read(max_bytes + 1 - len(raw))
    return raw


def read_bytes(path: Path | str, *, max_bytes: int, what: str, follow_symlinks: bool = True) -> bytes:
    """The whole of a regular file of at most `max_bytes` bytes (see `open_regular`); a file that grew
    past the cap while it was read is refused too."""
    with open_regular(path, max_bytes=max_bytes, what=what, follow_symlinks=follow_symlinks) as fh:
        raw = read_capped(fh, max_bytes)
    if len(raw) > max_bytes:
        raise ReadRefused(path, f"larger than {_a(what)} may be ({size_text(max_bytes)}); refused")
    return raw


def read_text(path: Path | str, *, max_bytes: int, what: str, follow_symlinks: bool = True) -> str:
    """`read_bytes` decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_bytes(path, max_bytes=max_bytes, what=what, follow_symlinks=follow_symlinks).decode("utf-8")


@dataclass
class Lines:
    """What `read_lines` found: the complete lines from the offset asked for, each (offset of the line
    in the file, its bytes without the newline, or None for a line longer than the cap, which was
    skipped unread); `end`, the offset after the last complete line (where the next read starts);
    `problems`, one line each (too-long lines, a file over its cap)."""

    lines: list[tuple[int, bytes | None]] = field(default_factory=list)
    end: int = 0
    problems: list[str] = field(default_factory=list)
    capped: bool = False
    """The file is larger than its cap: nothing past the cap was read (or ever will be)."""


def read_lines(path: Path | str, offset: int = 0, *, max_bytes: int, max_line: int, what: str,
               follow_symlinks: bool = True) -> Lines:
    """The complete lines of a JSON-lines file from byte `offset` on (a last line without its newline
    is left for the next call), reading at most up to byte `max_bytes` of the file and keeping no line
    longer than `max_line` bytes (it is skipped: its entry has None, and a problem names it). Memory:
    about `max_line` + CHUNK_BYTES beyond the lines kept. An append-only file larger than `max_bytes`
    is read up to the cap and `capped` says so (unlike `open_regular`, which refuses it whole).

    Raises ReadRefused when `path` is not a regular file, OSError when it cannot be opened."""
    out = Lines(end=offset)
    with open_regular(path, max_bytes=1 << 62, what=what, follow_symlinks=follow_symlinks) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            out.capped = True
            out.problems.append(f"{path}: {size_text(size)}, larger than {_a(what)} may be "
                                f"({size_text(max_bytes)}); nothing after the first {size_text(max_bytes)} is read")
        limit = min(size, max_bytes)
        fh.seek(offset)
        pos = offset  # the file offset of buf[0]
        buf = b""
        skipping = False  # inside a line already known to be too long: its bytes are dropped as read
        while pos + len(buf) < limit:
            chunk = fh.read(min(CHUNK_BYTES, limit - pos - len(buf)))
            if not chunk:
                break
            buf += chunk
            start = 0
            while (nl := buf.find(b"\n", start)) >= 0:
                if skipping:
                    skipping = False
                else:
                    out.lines.append((pos + start, buf[start:nl] if nl - start <= max_line else None))
                    if nl - start > max_line:
                        out.problems.append(f"{path}: a line at byte {pos + start} is longer than {_a(what)} "
                                            f"line may be ({size_text(max_line)}); skipped")
                start = nl + 1
                out.end = pos + start
            buf, pos = buf[start:], pos + start
            if not skipping and len(buf) > max_line:
                out.lines.append((pos, None))
                out.problems.append(f"{path}: a line at byte {pos} is longer than {_a(what)} line may be "
                                    f"({size_text(max_line)}); skipped")
                skipping = True
            if skipping:  # drop what was read of the long line; its end is found by the next chunks
                pos += len(buf)
                buf = b""
        if skipping:
            # the over-long line has no end yet: the next read starts after what was dropped, so the
            # line is not reported again (its tail, when it comes, is taken for a damaged line)
            out.end = pos
    return out

