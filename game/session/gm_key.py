"""The interviewer's signing key: inbox items (messages, hints, injects) carry an HMAC of their content
under a key kept outside the shared data folder, and a session takes only items whose signature checks.

Anyone who can write a shared `sessions/` folder can append to a candidate's inbox; without the key they
cannot make an item the candidate's game accepts. The key is `$SERVEDRILL_GM_KEY_FILE`, else
`$XDG_CONFIG_HOME/servedrill/gm.key` (default `~/.config/servedrill/gm.key`): 32 random bytes, hex,
created on first use with mode 0600. The interviewer's `send` and the candidate's game must run with the
same key file (one machine and user, or the file copied to the game-day host): `servedrill serve` run by
the facilitator verifies with the facilitator's key, which players in browser tabs never see.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from incidents.bounded_read import read_text

SIG = "sig"
MAX_KEY_FILE_BYTES = 4096
"""Largest key file read, bytes: a key is 64 hex digits and a newline; more is not a key file."""


def key_path() -> Path:
    env = os.environ.get("SERVEDRILL_GM_KEY_FILE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "servedrill" / "gm.key"


def load_key(*, create: bool = False) -> bytes | None:
    """The key's bytes; with `create`, made on first use. None when there is none (or it is unreadable)."""
    path = key_path()
    try:
        # regular files only, bounded: a key file swapped for a FIFO or /dev/zero is no key, not a hang
        text = read_text(path, max_bytes=MAX_KEY_FILE_BYTES, what="interviewer key file").strip()
        return bytes.fromhex(text) if len(text) >= 32 else None
    except FileNotFoundError:
        if not create:
            return None
    except (OSError, ValueError):
        return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(32)
    # written whole under a temporary name, then linked into place: a reader racing the first use never
    # sees an empty or half-written key file (it would take it for no key), and of two creators racing,
    # the first link wins and the other reads that key
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(key.hex() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process or thread made it first: use theirs
            return load_key()
    finally:
        tmp.unlink(missing_ok=True)
    return key


def _payload(item: Mapping[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in item.items() if k != SIG}, sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def sign(item: Mapping[str, Any]) -> dict[str, Any]:
    """`item` with its signature under this machine's key (made if needed)."""
    key = load_key(create=True)
    assert key is not None
    return {**item, SIG: hmac.new(key, _payload(item), hashlib.sha256).hexdigest()}


def verify(item: Mapping[str, Any]) -> bool:
    """Whether `item` carries a valid signature under this machine's key (False without a key)."""
    key = load_key()
    sig = item.get(SIG)
    if key is None or not isinstance(sig, str):
        return False
    try:
        expected = hmac.new(key, _payload(item), hashlib.sha256).hexdigest()
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, sig)


# ---------------------------------------------------------------- who may send to a session

TRUST_SUFFIX = ".gm-key"
"""The sidecar `<session_id>.gm-key` next to a journal: the id of the interviewer key its game verifies with."""


def key_id(key: bytes) -> str:
    """A key's public name: a hash that tells keys apart and reveals nothing of the key."""
    return hashlib.sha256(b"servedrill interviewer key id\0" + key).hexdigest()[:32]


def trust_path(session_path: Path | str) -> Path:
    return Path(session_path).with_suffix(TRUST_SUFFIX)


def record_trust(session_path: Path | str) -> None:
    """Called by the game that holds a session: write which interviewer key it verifies with (the key made if
    this account has none), so that `servedrill send` from anyone else can be refused up front. Best effort:
    a folder that cannot be written leaves the sender to the owner rule (`game.gameday.gm.check_sender`)."""
    try:
        key = load_key(create=True)
        if key is None:
            return
        target = trust_path(session_path)
        text = key_id(key) + "\n"
        try:
            if read_text(target, max_bytes=MAX_KEY_FILE_BYTES, what="interviewer key id").strip() == text.strip():
                return
        except OSError:
            pass
        tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError:
        return


def trusted_id(session_path: Path | str) -> str | None:
    """The id of the key the session's game verifies with (None: not recorded, or unreadable)."""
    try:
        text = read_text(trust_path(session_path), max_bytes=MAX_KEY_FILE_BYTES, what="interviewer key id").strip()
    except OSError:
        return None
    return text if len(text) == 32 and all(c in "0123456789abcdef" for c in text) else None
