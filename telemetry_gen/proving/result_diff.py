"""Pure comparisons behind deep validation: whether two query results differ materially, and how far a
signal's likelihoods separate a true hypothesis from a distractor. No databases here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from incidents.spec import Incident, Signal

MATERIAL_CHANGE = 0.10
"""Relative change of a numeric cell (|a - b| / max(|a|, |b|)) that counts as material."""


def likelihood_separation(signal: Signal, incident: Incident) -> tuple[float, tuple[str, str] | None]:
    """(max |ln(L_true / L_distractor)| over true x distractor hypotheses, the pair reaching it).

    Unlisted hypotheses get the spec's default likelihood. 0 against a positive likelihood is
    infinitely separating; two zeros do not separate. (0.0, None) when there is no pair.
    """
    trues = [h.id for h in incident.hypotheses if h.true]
    others = [h.id for h in incident.hypotheses if not h.true]
    best, pair = 0.0, None
    for t in trues:
        for d in others:
            lt, ld = signal.likelihood(t), signal.likelihood(d)
            if lt == ld:
                sep = 0.0
            elif lt == 0 or ld == 0:
                sep = math.inf
            else:
                sep = abs(math.log(lt / ld))
            if pair is None or sep > best:
                best, pair = sep, (t, d)
    return best, pair


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


def _numeric_columns(n_cols: int, *tables: Sequence[tuple[Any, ...]]) -> list[bool]:
    numeric = [True] * n_cols
    seen = [False] * n_cols
    for rows in tables:
        for row in rows:
            for i, v in enumerate(row):
                if v is None:
                    continue
                seen[i] = True
                if not _is_number(v):
                    numeric[i] = False
    # an all-NULL column compares as a key: NULL against NULL is no change
    return [n and s for n, s in zip(numeric, seen, strict=True)]


def _cell_text(v: Any) -> str:
    return "NULL" if v is None else str(v)


def _shown(v: Any) -> str:
    return "NULL" if v is None else f"{float(v):.4g}"


def _sort_value(v: Any) -> float:
    if v is None:
        return -math.inf
    x = float(v)
    return -math.inf if math.isnan(x) else x


def _material(a: Any, b: Any, rel: float) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) != math.isnan(y)
    if x == y:
        return False
    return abs(x - y) / max(abs(x), abs(y)) > rel


def result_difference(
    columns: Sequence[str],
    with_faults: Sequence[tuple[Any, ...]],
    other_columns: Sequence[str],
    without_faults: Sequence[tuple[Any, ...]],
    rel: float = MATERIAL_CHANGE,
) -> str | None:
    """The first material difference between two query results, or None when they agree.

    Material: different columns, a different number of rows, a row whose non-numeric cells
    (strings, timestamps, ...) appear in only one result, or a numeric cell that changed by
    more than `rel` relative to the larger magnitude. Row order is ignored (rows are matched
    by their non-numeric cells, then by their numbers), so an unordered GROUP BY that comes
    back in another order is not a change.
    """
    if list(columns) != list(other_columns):
        return f"columns ({', '.join(columns)}) vs ({', '.join(other_columns)})"
    if len(with_faults) != len(without_faults):
        return f"{len(with_faults)} rows with the faults, {len(without_faults)} without"
    numeric = _numeric_columns(len(columns), with_faults, without_faults)
    key_idx = [i for i, n in enumerate(numeric) if not n]
    num_idx = [i for i, n in enumerate(numeric) if n]

    def split(row: tuple[Any, ...]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        return tuple(_cell_text(row[i]) for i in key_idx), tuple(row[i] for i in num_idx)

    def order(item: tuple[tuple[str, ...], tuple[Any, ...]]) -> tuple[Any, ...]:
        return item[0], tuple(_sort_value(v) for v in item[1])

    a = sorted((split(r) for r in with_faults), key=order)
    b = sorted((split(r) for r in without_faults), key=order)

    def where(key: tuple[str, ...]) -> str:
        text = ", ".join(f"{columns[i]}={k}" for i, k in zip(key_idx, key, strict=True))
        return text or "an all-numeric row"

    keys_a, keys_b = [k for k, _ in a], [k for k, _ in b]
    if keys_a != keys_b:
        set_a, set_b = set(keys_a), set(keys_b)
        only_a = [k for k in keys_a if k not in set_b]
        if only_a:
            return f"row with {where(only_a[0])} only with the faults"
        only_b = [k for k in keys_b if k not in set_a]
        if only_b:
            return f"row with {where(only_b[0])} only without the faults"
        return "the same rows occur a different number of times"
    for (key, xs), (_, ys) in zip(a, b, strict=True):
        for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if _material(x, y, rel):
                name = columns[num_idx[j]]
                change = ""
                if x is not None and y is not None and float(y) != 0:
                    change = f" ({(float(x) - float(y)) / abs(float(y)):+.0%})"
                at = f" in row {where(key)}" if key_idx else ""
                return f"{name} {_shown(x)} with the faults vs {_shown(y)} without{change}{at}"
    return None
