"""The build's memo of converted request columns (telemetry_gen.tables.column): one conversion per list and
dtype inside a build, nothing kept after it, and two builds at once in two threads (the game prepares a
mitigation's run while another is built) neither share a memo nor leave one behind."""

from __future__ import annotations

import threading

import numpy as np

from telemetry_gen import tables


def test_inside_a_build_a_list_is_converted_once_and_nothing_is_kept_after() -> None:
    values = [1.0, 2.0, None]
    with tables._columns_once():
        first = tables.column(values, dtype=float)
        assert tables.column(values, dtype=float) is first
        assert np.isnan(first[2])  # a None reads as NaN, as np.asarray has it
    assert tables._MEMO.arrays is None and tables._MEMO.codes is None
    assert tables.column(values, dtype=float) is not first  # outside a build: converted anew


def test_two_builds_in_two_threads_interleaved_leave_no_memo_behind() -> None:
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def build_a() -> None:
        with tables._columns_once():
            a_in.set()
            b_in.wait(30)
        a_out.set()

    def build_b() -> None:
        a_in.wait(30)
        with tables._columns_once():
            b_in.set()
            a_out.wait(30)  # A's build ended while B's runs: B keeps its own memo
            seen["b_memo_after_a"] = tables._MEMO.arrays
        seen["b_after"] = tables._MEMO.arrays

    threads = [threading.Thread(target=build_a), threading.Thread(target=build_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert isinstance(seen["b_memo_after_a"], dict)
    assert seen["b_after"] is None and tables._MEMO.arrays is None
