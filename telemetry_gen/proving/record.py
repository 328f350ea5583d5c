"""Proof records: what `servedrill validate --deep --record` proved about one incident file, kept beside it
(`incidents/proofs/<id>.json`), so that CI can hold the library to the whole seed policy without paying for
it on every run.

Proving PROOF_SEEDS seeds of every library incident takes the better part of an hour on two cores; CI has
minutes. So the full proof runs where there is time (`make prove`) and writes a record per incident: the
YAML's hash, and per seed the verdict and the content digests of the telemetry with and without the
faults. CI then proves a few seeds itself and checks the record against them:

* the record covers every seed of the policy, 0 .. PROOF_SEEDS-1, and every one of them passed, the
  first WORLD_PROOF_SEEDS with every hypothesis world proven too;
* it was made from this YAML (and the traces it replays): an edited incident needs a new proof;
* its hypothesis worlds were proven under the world rules in force (WORLD_RULES): a rule added to the
  world checks (the starter snippets, say) changes no byte of telemetry, so digests alone would let every
  older record stand unchecked; the claims on the other seeds are held by their digests as before;
* it is not stale: a record is stale when both the code that shapes the telemetry
  (telemetry_gen.cache.code_version) and the telemetry itself differ from what was proven, for some seed
  CI proved. Either alone is not enough: a refactor changes the code but not one byte of telemetry, and
  another CPU can round a last bit differently (NumPy picks its kernels by CPU) so the same code builds
  other bytes. A change to the engine that changes what a player sees changes both.

A record holds no clock time, so proving unchanged code twice writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from incidents.variants import PROOF_SEEDS, WORLD_PROOF_SEEDS, proof_seeds

RECORD_FORMAT = 1
WORLD_RULES = 5
"""The version of the world checks (telemetry_gen.proving.proof, checks 4-8) a record's worlds were proven
under; bump it when a check is added or tightened, or when what a reading rules out changes
(telemetry_gen.proving.evidence: a signal must still rule its rival out), and run `make prove`: the claims
stand on their digests and only the first WORLD_PROOF_SEEDS seeds are proven again, with their worlds.

1. (records without the key) strawmen, unsolvable rivals, the truth's other draws, the page's own
   measurements;
2. the starter snippets must not settle an incident of difficulty 2 or more;
3. a number inside text is read only in a group of at most ABSENCE_ROWS lines (evidence);
4. another direction rules a rival out only when every draw of the truth, not only the one seen, lies more
   than FLAT from every member of the rival's family (evidence._magnitude);
5. a query whose figure a constant of its own makes (a threshold, an offset, a remainder after aggregating;
   telemetry_gen.proving.thresholds) rules nothing out. Widened on 2026-12-07 without a bump: a sample
   of the rows reads as nothing too, and so do SUMMARIZE, DESCRIBE and EXPLAIN; no presence is read
   from a column the query computed (made_columns) but a number's NaN, nor from a threshold's labels
   (label_columns), and a time stamp cast to text is a time. No library reference query samples,
   summarizes or explains (0 of 295); every library incident's worlds were proven again on seeds 0-4
   (`validate --deep --seeds 5 --record`: every verdict as before) under the stricter form that read no
   presence from any computed column; the rule in force reads a subset of what the records before it
   read and a superset of what that run read, so a rival ruled out then is ruled out now and a page or
   snippet that ruled nothing out before still does not. A new or edited incident is proven under it."""
RECORD_FOLDER = "proofs"
PROVE_HINT = ("run `make prove` (servedrill validate --deep --claims-only --record, then the worlds of the first "
              f"{WORLD_PROOF_SEEDS} seeds: --seeds {WORLD_PROOF_SEEDS} --record) and commit the records")


def record_path(incident_path: Path | str) -> Path:
    """Where the proof record of an incident file lives: `proofs/<stem>.json` in the file's folder."""
    path = Path(incident_path)
    return path.parent / RECORD_FOLDER / f"{path.stem}.json"


def source_sha256(incident_path: Path | str) -> str:
    """Hash of what a proof depends on besides the code: the YAML's bytes and those of the traces it
    replays (named relative to the YAML by `replay:` arrivals)."""
    from incidents.loader import load_incident
    from telemetry_gen.cache import trace_digests

    path = Path(incident_path)
    h = hashlib.sha256(path.read_bytes())
    try:
        h.update(trace_digests(load_incident(path)).encode())
    except Exception:
        h.update(b"unloadable")  # the static check reports why; the hash only needs to differ
    return h.hexdigest()


def _weakest(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The claim closest to failing in a run: the smaller of its two margins (holding with the faults,
    failing without; a context claim holds in both), relative to the threshold when it is not 0."""
    best: tuple[float, str] | None = None
    for claim in run.get("claims", []):
        sides = [claim.get("with_faults") or {}]
        sides.append(claim.get("without_faults") or {})
        margins = []
        for i, side in enumerate(sides):
            margin, required = side.get("margin"), side.get("required")
            if margin is None:
                continue
            holds_needed = i == 0 or claim.get("context")
            value = float(margin) if holds_needed else -float(margin)
            if isinstance(required, int | float) and required:
                value /= abs(float(required))
            margins.append(value)
        if margins and (best is None or min(margins) < best[0]):
            best = (min(margins), str(claim.get("symptom")))
    return None if best is None else {"symptom": best[1], "margin": round(best[0], 4)}


def seed_entry(run: Mapping[str, Any]) -> dict[str, Any]:
    """What a record keeps of one run dict (telemetry_gen.proving.pool.located)."""
    digests = run.get("digests") or {}
    return {
        "ok": bool(run.get("ok")),
        "worlds": bool(run.get("worlds_checked")) and run.get("error") is None,
        "faults": digests.get("faults"),
        "ablation": digests.get("ablation"),
        "weakest": _weakest(run),
        "problems": list(run.get("problems", []))[:20],
    } | ({"mitigation": [bool(m.get("ok")) for m in run["mitigation"]]} if run.get("mitigation") else {})


def read_record(incident_path: Path | str) -> dict[str, Any] | None:
    """The record of an incident file, or None when there is none or it does not parse."""
    try:
        data = json.loads(record_path(incident_path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == RECORD_FORMAT else None


def _same_code(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two seed maps come from the same simulation: every seed both hold has equal digests."""
    shared = set(old) & set(new)
    return all(old[s].get("faults") == new[s].get("faults") and old[s].get("ablation") == new[s].get("ablation")
               for s in shared)


def make_record(incident_path: Path | str, incident_id: str, runs: Iterable[Mapping[str, Any]],
                previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A record of `runs` (run dicts of one incident file). Seeds of `previous` not proven now are kept when
    it was made from the same YAML and every seed proven in both gave the same telemetry (so a claims-only
    pass over the whole policy and a pass with the worlds over a few seeds add up); otherwise it is
    replaced. A seed proven again keeps `worlds` True if it had it and its telemetry is unchanged."""
    sha = source_sha256(incident_path)
    seeds = {str(run["seed"]): seed_entry(run) for run in runs}
    old = dict(previous.get("seeds", {})) if previous else {}
    if previous and previous.get("source_sha256") == sha and _same_code(old, seeds):
        same_rules = previous.get("rules", 1) == WORLD_RULES
        for key, entry in old.items():
            if key not in seeds:
                seeds[key] = entry if same_rules else {**entry, "worlds": False}
            elif same_rules and entry.get("worlds") and entry.get("ok") and seeds[key]["ok"]:
                seeds[key]["worlds"] = True
    ordered = dict(sorted(seeds.items(), key=lambda kv: int(kv[0])))
    from telemetry_gen.cache import code_version

    return {
        "format": RECORD_FORMAT,
        "incident": incident_id,
        "code": code_version(),
        "rules": WORLD_RULES,
        "source_sha256": sha,
        "policy_seeds": PROOF_SEEDS,
        "ok": all(e["ok"] for e in ordered.values()),
        "seeds": ordered,
    }


def write_record(incident_path: Path | str, incident_id: str, runs: Iterable[Mapping[str, Any]]) -> Path:
    """Write (merging as make_record says) the record of `runs`; returns its path. Atomic: a reader sees
    the old record or the new one."""
    record = make_record(incident_path, incident_id, runs, read_record(incident_path))
    return _store(record_path(incident_path), record)


def _store(target: Path, record: Mapping[str, Any]) -> Path:
    """Write `record` to `target` atomically (a reader sees the old record or the new one); returns it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(target)
    return target


def check_record(incident_path: Path | str, runs: Iterable[Mapping[str, Any]] = (),
                 seeds: Iterable[int] | None = None, world_seeds: Iterable[int] | None = None) -> list[str]:
    """Why the record of `incident_path` does not prove it on the seed policy (empty: it does).

    `seeds` (default 0 .. PROOF_SEEDS-1) must all be recorded as passed, and `world_seeds` (default
    0 .. WORLD_PROOF_SEEDS-1) as passed with their hypothesis worlds; `runs` are fresh run dicts of
    this file (e.g. CI's own proofs), whose telemetry digests must equal the recorded ones."""
    where = record_path(incident_path)
    record = read_record(incident_path)
    if record is None:
        return [f"{where}: no proof record (hint: {PROVE_HINT})"]
    problems = []
    if record.get("source_sha256") != source_sha256(incident_path):
        problems.append(f"{where}: recorded for another version of {Path(incident_path).name} (hint: {PROVE_HINT})")
    recorded = record.get("seeds", {})
    wanted = list(proof_seeds() if seeds is None else seeds)
    missing = [s for s in wanted if str(s) not in recorded]
    if missing:
        problems.append(f"{where}: {len(missing)} of the policy's {len(wanted)} seeds not proven "
                        f"(first: {missing[0]}) (hint: {PROVE_HINT})")
    failed = [s for s in wanted if str(s) in recorded and not recorded[str(s)].get("ok")]
    for s in failed[:5]:
        first = (recorded[str(s)].get("problems") or ["(no detail)"])[0]
        problems.append(f"{where}: seed {s} failed its proof: {first}")
    if len(failed) > 5:
        problems.append(f"{where}: ... and {len(failed) - 5} more failing seeds")
    want_worlds = list(range(WORLD_PROOF_SEEDS) if world_seeds is None else world_seeds)
    no_worlds = [s for s in want_worlds if not recorded.get(str(s), {}).get("worlds")]
    rules = record.get("rules", 1)
    if want_worlds and rules != WORLD_RULES and not missing and not failed:
        problems.append(f"{where}: hypothesis worlds proven under world rules {rules}, not the current "
                        f"{WORLD_RULES} (telemetry_gen.proving.record.WORLD_RULES says what changed) "
                        f"(hint: {PROVE_HINT})")
    elif no_worlds and not missing and not failed:
        problems.append(f"{where}: hypothesis worlds not proven on seed{'s' if len(no_worlds) > 1 else ''} "
                        f"{', '.join(map(str, no_worlds))} (hint: {PROVE_HINT})")
    from telemetry_gen.cache import code_version

    same_code = record.get("code") == code_version()
    for run in runs:
        entry = recorded.get(str(run["seed"]))
        digests = run.get("digests") or {}
        if same_code or entry is None or not digests.get("faults"):
            continue
        if (entry.get("faults"), entry.get("ablation")) != (digests.get("faults"), digests.get("ablation")):
            problems.append(f"{where}: stale: the engine or telemetry builder changed since the proof and seed "
                            f"{run['seed']} now simulates to other telemetry (hint: {PROVE_HINT})")
            break
    return problems


def still_proven(incident_path: Path | str, probe_seeds: Iterable[int] = (0,), *, claims_only: bool = False) -> bool:
    """Whether the record of `incident_path` still proves it without proving it again: it covers the whole
    seed policy (check_record), and it was made by this code, or by code that simulates `probe_seeds` to the
    same telemetry (their databases with and without the faults are rebuilt and their digests compared: a
    refactor or a speed-up of the engine keeps every record). A record found current under other code is
    rewritten with this code's version, so the next check needs no simulation. Never raises: a record it
    cannot judge is not current. With `claims_only`, the record's worlds are not asked for: a claims-only
    pass does not prove them, so it need not redo claims whose worlds alone are out of date."""
    from incidents.loader import load_incident
    from telemetry_gen.cache import code_version, ensure_database

    try:
        record = read_record(incident_path)
        if record is None or check_record(incident_path, world_seeds=() if claims_only else None):
            return False
        if record.get("code") == code_version():
            return True
        recorded = record.get("seeds", {})
        for seed in probe_seeds:
            entry = recorded.get(str(seed)) or {}
            incident = load_incident(incident_path, seed)
            fault = ensure_database(incident, seed).digest
            ablation = ensure_database(incident, seed, ablate=True).digest
            if (fault, ablation) != (entry.get("faults"), entry.get("ablation")):
                return False
        _store(record_path(incident_path), {**record, "code": code_version()})
        return True
    except Exception:
        return False
