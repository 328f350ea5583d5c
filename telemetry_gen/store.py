"""Write telemetry tables to a DuckDB file with a comment on every table and column.

The database is the game board: it holds what a serving team's observability stack would
hold and nothing about the incident's answer.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import duckdb
import pandas as pd

TABLE_COMMENTS: dict[str, str] = {
    "requests": "Request log: one row per request, written when it finished or failed (ordered by arrival).",
    "metrics": "Prometheus samples in long format: vLLM engine series (vllm:*) and dcgm-exporter GPU series "
               "(DCGM_*), one scrape per interval per replica, and the replica's host node "
               "(node_*, node-exporter names). "
               "Counters (*_total, *_sum, *_count, ECC/CRC/replay counts) are cumulative.",
    "events": "Change log: deploys, config changes with old and new values, restarts, crashes, router changes.",
    "logs": "Engine and serving-process log lines (vLLM, PyTorch, launcher), and the kernel's GPU Xid lines.",
    "evals": "Offline evaluation runs per model version and task.",
    "probes": "Determinism probes: fixed prompts replayed with temperature 0 through the fleet.",
}

COLUMN_COMMENTS: dict[str, dict[str, str]] = {
    "requests": {
        "request_id": "request id, unique",
        "ts": "arrival time at the API gateway (UTC)",
        "app": "calling application",
        "tenant": "customer or team the request belongs to",
        "replica": "engine replica that served it ('' if none could)",
        "model": "model that served it",
        "model_version": "deployed model version that served it",
        "route": "primary, or fallback when the router spilled it to the fallback pool",
        "gateway_s": "seconds from arrival at the API gateway (ts) to arrival at the router",
        "queue_s": "seconds from arrival at the router to the first engine step that scheduled it",
        "prefill_s": "seconds from first scheduled to the first token (prompt processing)",
        "decode_s": "seconds from the first token to the last",
        "ttft_s": "time to first token as the client sees it, seconds = gateway_s + queue_s + prefill_s",
        "tpot_s": "mean seconds per output token after the first = decode_s / (output_tokens - 1)",
        "e2e_s": "end-to-end latency, seconds = ttft_s + decode_s (error or timeout: gateway arrival to the end)",
        "prompt_tokens": "prompt length, tokens",
        "cached_tokens": "prompt tokens served from the prefix cache, tokens",
        "output_tokens": "generated tokens",
        "num_preemptions": "times the engine preempted the request (KV blocks ran out; recomputed)",
        "status": "ok, error (the engine failed it or none could take it), or timeout (the client gave up "
                  "waiting and the engine aborted the request)",
        "finish_reason": "stop, length, abort (timeout), or error",
        "temperature": "sampling temperature (0 = greedy)",
        "seed": "sampling seed the client sent (NULL if none)",
        "output_hash": "hash of the generated text (equal hashes = identical outputs)",
        "attempt": "which attempt of its client's request this row is: 1 the first send, 2 the first retry, ... "
                   "(a retry is a new request with its own id, sent after a backoff when an attempt timed out or "
                   "failed; present when the clients retry)",
        "first_request_id": "request_id of the first attempt of the same client request (= request_id when "
                            "attempt = 1): count(*) / count(DISTINCT first_request_id) is the retry amplification",
    },
    "metrics": {
        "ts": "scrape time (UTC)",
        "replica": "engine replica (one GPU group) the series belongs to",
        "name": "metric name as exported (vllm:*, DCGM_FI_* or node_*); units per name: *_seconds* in seconds, "
                "*_perc a 0..1 fraction, DCGM_FI_DEV_SM_CLOCK MHz, *_UTIL percent, *_POWER_USAGE W, "
                "*_TEMP C, FB_* MiB, DCGM_FI_PROF_* 0..1 ratios. DCGM_FI_DEV_CLOCKS_EVENT_REASONS is a bit mask "
                "of why clocks are below boost: 1 idle, 4 power cap, 8 hardware slowdown, 32 software thermal "
                "slowdown, 64 hardware thermal slowdown. DCGM_FI_DEV_XID_ERRORS is the last Xid code (0 none). "
                "ECC_SBE/DBE_VOL_TOTAL, *_REMAPPED_ROWS, NVLINK_CRC_*/REPLAY and PCIE_REPLAY are error counts. "
                "node_cpu_seconds_total{mode} CPU-seconds summed over the node's CPUs (per mode: user, system, "
                "iowait, idle), node_load1 runnable tasks, node_pressure_cpu_waiting_seconds_total seconds",
        "value": "sample value",
    },
    "events": {
        "ts": "event time (UTC)",
        "replica": "replica concerned ('' for fleet-wide or router events)",
        "kind": "deploy, config_change, restart, crash, alert, ...",
        "component": "system that recorded it (k8s, vllm, router, ci, ...)",
        "detail": "what happened; for config_change, the setting that changed",
        "old_value": "value before a change",
        "new_value": "value after a change",
    },
    "logs": {
        "ts": "log time (UTC)",
        "replica": "replica whose process printed it",
        "level": "INFO, WARNING or ERROR",
        "component": "source file that logged it (kernel for the GPU driver's NVRM Xid lines)",
        "message": "log message",
    },
    "evals": {
        "ts": "when the evaluation ran (UTC)",
        "model_version": "model version evaluated",
        "task": "evaluation task",
        "score": "accuracy, 0..1",
        "n": "number of evaluation samples",
        "ci_low": "95% confidence interval, lower bound",
        "ci_high": "95% confidence interval, upper bound",
    },
    "probes": {
        "ts": "probe time (UTC)",
        "replica": "replica that served the probe",
        "probe_id": "request id of the probe",
        "prompt_id": "which fixed probe prompt was replayed",
        "batch_size": "sequences in the engine step that produced the first token",
        "output_hash": "hash of the generated text",
        "logprob_drift": "absolute difference of the first token's logprob from this prompt's first probe, nats",
    },
}


def table_digest(tables: dict[str, pd.DataFrame]) -> str:
    """sha256 over every table's name, schema and rows, in table-name order (rows in stored order)."""
    h = hashlib.sha256()
    for name in sorted(tables):
        df = tables[name]
        h.update(name.encode())
        h.update(repr([(c, str(t)) for c, t in df.dtypes.items()]).encode())
        h.update(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes())
    return h.hexdigest()


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def write_database(path: Path, tables: dict[str, pd.DataFrame]) -> None:
    """Create `path` (replacing it) holding `tables`, comments on everything, and a `catalog` view."""
    path = Path(path)
    # a temp name of its own, so builders racing for the same path never share a half-written file
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    con = duckdb.connect(str(tmp))
    try:
        for name, df in tables.items():
            con.register("_frame", df)
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _frame')
            con.unregister("_frame")
            con.execute(f'COMMENT ON TABLE "{name}" IS {_sql_str(TABLE_COMMENTS.get(name, name))}')
            for col in df.columns:
                text = COLUMN_COMMENTS.get(name, {}).get(col)
                if text:
                    con.execute(f'COMMENT ON COLUMN "{name}"."{col}" IS {_sql_str(text)}')
        con.execute(
            """
            CREATE VIEW catalog AS
            SELECT c.table_name AS "table", c.column_name AS "column", c.data_type AS type,
                   c.comment AS description, t.comment AS table_description
            FROM duckdb_columns() c JOIN duckdb_tables() t USING (table_name)
            WHERE c.schema_name = 'main'
            ORDER BY c.table_name, c.column_index
            """
        )
        con.execute("COMMENT ON VIEW catalog IS 'Every table and column with what it holds and its unit.'")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    Path(str(tmp) + ".wal").unlink(missing_ok=True)
    tmp.replace(path)
