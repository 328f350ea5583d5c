"""Debug helper for incident authors: build an incident with and without its faults, print every claim
and signal, and the result of extra SQL. Usage: python tests/data/prove_debug.py INCIDENT.yaml SEED [SQL ...]"""
import sys
import time
from pathlib import Path

import duckdb

from incidents.claims import evaluate_incident
from incidents.loader import load_incident
from telemetry_gen.runner import build_telemetry

seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
inc = load_incident(Path(sys.argv[1]), seed=seed)  # the variant of that seed, as the game would deal it
for ablate in (False, True):
    t = time.time()
    tel = build_telemetry(inc, seed, ablate=ablate)
    con = duckdb.connect()
    for n, df in tel.tables.items():
        con.register(n, df)
    print(f"--- ablate={ablate} ({time.time()-t:.1f}s) rows={tel.row_counts()}")
    for label, res in evaluate_incident(con, inc):
        print(("OK  " if res.holds else "NO  ") + label + ": " + res.message)
    if len(sys.argv) > 3 and not ablate:
        for q in sys.argv[3:]:
            print(con.sql(q))
