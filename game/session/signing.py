"""Signed journals: a chain of HMACs over a session journal, under a key only the game-day server holds.

In a game day the served app processes (`servedrill serve --gameday`) run on the server, so the journals
they write are the server's. Each line they write carries a `mac`: the header's is
`hmac-sha256:<key id>:<hex>` over the header's content, every event's is `<hex>` over the previous line's
MAC and the event's content. Changing any field (a confidence, an event time, the player), deleting,
inserting or reordering a line breaks the chain at that line; only the key's holder can write a chain
that verifies. A chain cut after its last line still verifies up to there: what it loses is the end of
the game (its hand-in), never a change in the middle.

The content a MAC covers is the line as the journal writes it (`journal.line_of`: compact JSON in the
record's key order, no NaN) without its `mac` key; `verify_chain` rebuilds it from the parsed JSON, so
a transcript that kept the journal's header and events verbatim verifies as its journal does.

The key is 32 random bytes as hex in a file of mode 0600 (`load_key` refuses one others may read),
named by `$SERVEDRILL_JOURNAL_KEY_FILE` for the app processes the server starts. `servedrill gameday
roster PLAN` makes it beside the plan (`key_file_for`); it never goes in a session folder.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from incidents.bounded_read import read_text

KEY_ENV = "SERVEDRILL_JOURNAL_KEY_FILE"
MAC = "mac"
ALG = "hmac-sha256"
MAX_KEY_FILE_BYTES = 4096
_DOMAIN = b"servedrill-journal-v1\n"


class KeyError_(Exception):
    """A key file that cannot be used; the message is one line naming the file."""


# ---------------------------------------------------------------- the key


def key_file_for(plan: Path) -> Path:
    """Where `servedrill gameday roster` keeps a game day's journal key: beside the plan file."""
    plan = Path(plan)
    return plan.with_name(f"{plan.stem}.journal.key")


def key_id(key: bytes) -> str:
    """A short public name of a key (the first 16 hex digits of its SHA-256): a journal signed with
    another key is told apart from a changed one."""
    return hashlib.sha256(key).hexdigest()[:16]


def load_key(path: Path) -> bytes:
    """The key in `path`; KeyError_ when it is missing, not a key, or readable by others than its owner."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
        text = read_text(path, max_bytes=MAX_KEY_FILE_BYTES, what="journal key file").strip()
    except FileNotFoundError:
        raise KeyError_(f"{path}: no journal key (hint: servedrill gameday roster PLAN makes it)") from None
    except OSError as exc:
        raise KeyError_(f"{path}: cannot read the journal key ({exc.strerror or exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyError_(f"{path}: the journal key may be read by other users (mode {stat.S_IMODE(mode):o}) "
                        f"(hint: chmod 600 {path}, or make a new one: the old one is no secret)")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise KeyError_(f"{path}: not a journal key (hint: 64 hex digits; servedrill gameday roster makes one)")
    return key


def make_key(path: Path) -> bytes:
    """The key at `path`, made (32 random bytes, mode 0600, never overwritten) when there is none."""
    path = Path(path)
    if path.exists():
        return load_key(path)
    key = secrets.token_bytes(32)
    write_private(path, key.hex() + "\n")
    return key


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` as a file of mode 0600 from the start (a temporary file, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def key_from_env() -> bytes | None:
    """The key of `$SERVEDRILL_JOURNAL_KEY_FILE` (set by the server for its app processes), else None.
    A named key that cannot be used raises KeyError_: a server that asked for signed journals gets them
    or none."""
    name = os.environ.get(KEY_ENV)
    return load_key(Path(name)) if name else None


# ---------------------------------------------------------------- the chain


def canonical(record: Mapping[str, Any]) -> str:
    """The content a MAC covers: the record as the journal writes it, without its `mac`."""
    return json.dumps({k: v for k, v in record.items() if k != MAC}, separators=(",", ":"), allow_nan=False)


def _mac(key: bytes, previous: str, content: str) -> str:
    return hmac.new(key, _DOMAIN + previous.encode() + b"\n" + content.encode(), hashlib.sha256).hexdigest()


def header_mac(key: bytes, content: str) -> str:
    return f"{ALG}:{key_id(key)}:{_mac(key, '', content)}"


def with_mac(line: str, mac: str) -> str:
    """A journal line (compact JSON object) with `"mac": mac` as its last key."""
    return line[:-1] + f',"{MAC}":"{mac}"}}'


@dataclass
class Chain:
    """The signing state of one open journal: its key and the MAC of its last line."""

    key: bytes
    head: str | None = None
    pending: str | None = None
    """The MAC a torn last line would leave as the head, when it verified (journal.repair_torn)."""

    def sign(self, line: str) -> tuple[str, str]:
        """(`line` with its MAC, the MAC). The caller sets `head` to the MAC once the line is written."""
        mac = header_mac(self.key, line) if self.head is None else _mac(self.key, self.head, line)
        return with_mac(line, mac), mac


_CHAINS: weakref.WeakKeyDictionary[Any, Chain] = weakref.WeakKeyDictionary()


def chain_of(fh: Any) -> Chain | None:
    return _CHAINS.get(fh)


def attach(fh: Any, chain: Chain) -> None:
    """Sign every line appended to `fh` from now on (journal.append asks `chain_of`)."""
    _CHAINS[fh] = chain


def is_signed(header: Mapping[str, Any]) -> bool:
    return isinstance(header.get(MAC), str)


class ChainBroken(Exception):
    """A signed journal that does not verify. `line` is its 1-based line in the journal (the header is 1)."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}")


def verify_chain(key: bytes, header: Mapping[str, Any], events: Sequence[Any],
                 numbers: Sequence[int] | None = None) -> str:
    """Check a signed journal (its header and event records as parsed, in order); the last MAC, or
    ChainBroken naming the first line that does not verify and why. `numbers`: each event's line in the
    file (default 2, 3, ...), for the message."""
    mac = header.get(MAC)
    if not isinstance(mac, str):
        raise ChainBroken(1, "the journal is not signed")
    parts = mac.split(":")
    if len(parts) != 3 or parts[0] != ALG:
        raise ChainBroken(1, "the header's signature is not one this servedrill writes")
    if not hmac.compare_digest(parts[1], key_id(key)):
        raise ChainBroken(1, f"signed with another key (key {parts[1]}, this game day's is {key_id(key)})")
    try:
        content = canonical(header)
    except ValueError as exc:
        raise ChainBroken(1, f"the header cannot be read ({exc})") from None
    if not hmac.compare_digest(mac, header_mac(key, content)):
        raise ChainBroken(1, "the header was changed after the server wrote it")
    head = mac
    expected_seq = None
    for i, event in enumerate(events):
        head = verify_next(key, head, event, numbers[i] if numbers is not None else i + 2, expected_seq)
        seq = event.get("seq")
        expected_seq = seq + 1 if isinstance(seq, int) else None
    return head


def verify_next(key: bytes, head: str, event: Any, number: int, expected_seq: int | None = None) -> str:
    """The MAC of `event` when it follows the line whose MAC is `head` (a whole chain, or one read a line at a
    time: a team's shared journal that another member's process appended to); ChainBroken (line `number`)
    otherwise. `expected_seq`, the seq the line should carry, tells a deleted or moved line from a changed one."""
    if not isinstance(event, Mapping) or not isinstance(event.get(MAC), str):
        raise ChainBroken(number, "a line without the server's signature (added or changed by hand)")
    try:
        content = canonical(event)
    except ValueError as exc:
        raise ChainBroken(number, f"the line cannot be read ({exc})") from None
    if not hmac.compare_digest(str(event[MAC]), _mac(key, head, content)):
        seq = event.get("seq")
        if isinstance(seq, int) and expected_seq is not None and seq != expected_seq:
            raise ChainBroken(number, f"event {expected_seq} is missing (deleted) or the lines were reordered")
        raise ChainBroken(number, f"event {seq} was changed after the server wrote it (its content, its time or "
                          "a line before it)")
    return str(event[MAC])


def strip(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its MAC (what readers that do not verify see)."""
    return {k: v for k, v in record.items() if k != MAC}
