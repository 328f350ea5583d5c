"""The interviewer's key is made on first use: writers racing that first use all sign with one key, and
no reader ever sees a half-written key file."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from game.session import gm_key


def test_racing_first_uses_agree_on_one_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for round_ in range(20):
        monkeypatch.setenv("SERVEDRILL_GM_KEY_FILE", str(tmp_path / f"k{round_}" / "gm.key"))
        seen: list[bytes | None] = []
        made: list[bytes | None] = []
        start = threading.Barrier(6)

        def use(create: bool, start: threading.Barrier = start, made: list[bytes | None] = made,
                seen: list[bytes | None] = seen) -> None:
            start.wait()
            (made if create else seen).append(gm_key.load_key(create=create))

        threads = [threading.Thread(target=use, args=(i % 2 == 0,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert None not in made, f"round {round_}: a first use that may create the key got none"
        keys = {k for k in [*seen, *made] if k is not None}
        assert len(keys) == 1, f"round {round_}: {len(keys)} different keys"
        # a reader gets None (no key yet) or the key, never anything else
        assert all(k is None or len(k) == 32 for k in seen)
        assert list((tmp_path / f"k{round_}").iterdir()) == [tmp_path / f"k{round_}" / "gm.key"]  # no temp left
        item = gm_key.sign({"id": "a", "kind": "message", "text": "hi"})
        assert gm_key.verify(item)
