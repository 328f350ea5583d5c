"""The telemetry schema: every table the player can query, its columns, their DuckDB types, units and
descriptions. The one place they are written down.

Everything else derives from it: telemetry_gen.tables checks each built frame against it (names, order,
types) and builds the tables in its order; telemetry_gen.store writes its descriptions as the database's
table and column comments (which the `catalog` view shows the player); game.cli.bench builds the same list;
docs/telemetry.md is `markdown()` (tests/test_telemetry_schema.py checks all of it, and that a database
really built matches). It lives in incidents/, the lower layer, because incident files name tables and
columns in their claims and signals: incidents.spec checks them against TABLE_COLUMNS and COLUMN_TYPES.

Adding a column: one Column here (in the place it should sit in the table), plus the code in
telemetry_gen.tables that computes its values. Regenerate the docs page: `python -m incidents.telemetry_schema`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "telemetry.md"

DUCKDB_TYPES = ("BIGINT", "DOUBLE", "TIMESTAMP", "VARCHAR")
"""The DuckDB types the tables use: int64 (nullable Int64 too), float64, datetime64[us] and string frames."""


@dataclass(frozen=True)
class Column:
    """One column. `type` is its DuckDB type; `unit` a short unit for the docs table ('' when it has none);
    `description` the column comment as the player reads it in `catalog` (it names the unit too)."""

    name: str
    type: str
    unit: str
    description: str


@dataclass(frozen=True)
class Table:
    """One table (or, for `catalog`, the view over the others): its comment and its columns in order."""

    name: str
    description: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")


def _c(name: str, type_: str, unit: str, description: str) -> Column:
    return Column(name, type_, unit, description)


_METRIC_NAME = (
    "metric name as exported (vllm:*, DCGM_FI_* or node_*); units per name: *_seconds* in seconds, "
    "*_perc a 0..1 fraction, DCGM_FI_DEV_SM_CLOCK MHz, *_UTIL percent, *_POWER_USAGE W, "
    "*_TEMP C, FB_* MiB, DCGM_FI_PROF_* 0..1 ratios. DCGM_FI_DEV_CLOCKS_EVENT_REASONS is a bit mask "
    "of why clocks are below boost: 1 idle, 4 power cap, 8 hardware slowdown, 32 software thermal "
    "slowdown, 64 hardware thermal slowdown. DCGM_FI_DEV_XID_ERRORS is the last Xid code (0 none). "
    "ECC_SBE/DBE_VOL_TOTAL, *_REMAPPED_ROWS, NVLINK_CRC_*/REPLAY and PCIE_REPLAY are error counts. "
    "node_cpu_seconds_total{mode} CPU-seconds summed over the node's CPUs (per mode: user, system, "
    "iowait, idle), node_load1 runnable tasks, node_pressure_cpu_waiting_seconds_total seconds. "
    "Request latency histograms (_sum, _count of the requests finished ok): vllm:time_to_first_token_seconds "
    "and vllm:e2e_request_latency_seconds from arrival at the replica's API server; "
    "vllm:request_queue_time_seconds from the hand-off to the engine core to the first step that scheduled "
    "the request (vLLM's queue interval: ~0 on an idle engine); vllm:request_api_server_time_seconds, this "
    "fleet's own series (vLLM exports no such interval), the API server's part before it: intake, "
    "tokenisation, waiting behind other requests' intake, the hand-off. "
    'vllm:lora_requests_info{max_lora="N",running_lora_adapters="a,b",waiting_lora_adapters="c"} (only on '
    "engines that serve LoRA adapters): an info gauge whose labels are the GPU adapter slots and the adapters "
    "of the running and of the waiting requests at the scrape (comma-separated, '' for none), its value the "
    "scrape's Unix time"
)

TABLES: tuple[Table, ...] = (
    Table("requests", "Request log: one row per request, written when it finished or failed (ordered by arrival).", (
        _c("request_id", "BIGINT", "", "request id, unique"),
        _c("ts", "TIMESTAMP", "UTC", "arrival time at the API gateway (UTC)"),
        _c("app", "VARCHAR", "", "calling application"),
        _c("tenant", "VARCHAR", "", "customer or team the request belongs to"),
        _c("replica", "VARCHAR", "", "engine replica that served it ('' if none could)"),
        _c("model", "VARCHAR", "", "model that served it"),
        _c("model_version", "VARCHAR", "", "deployed model version that served it"),
        _c("route", "VARCHAR", "", "primary, or fallback when the router spilled it to the fallback pool"),
        _c("gateway_s", "DOUBLE", "s", "seconds from arrival at the API gateway (ts) to arrival at the router"),
        _c("api_server_s", "DOUBLE", "s",
           "seconds in the replica's API server, from arrival at the router to the hand-off to the engine core: "
           "HTTP and chat template, tokenisation, waiting behind other requests' intake (NULL if it never got "
           "there)"),
        _c("queue_s", "DOUBLE", "s",
           "seconds waiting in the engine, from the hand-off to the engine core to the first step that scheduled "
           "it (vllm:request_queue_time_seconds; ~0 on an idle engine)"),
        _c("prefill_s", "DOUBLE", "s", "seconds from first scheduled to the first token (prompt processing)"),
        _c("decode_s", "DOUBLE", "s", "seconds from the first token to the last"),
        _c("ttft_s", "DOUBLE", "s",
           "time to first token as the client sees it, seconds = gateway_s + api_server_s + queue_s + prefill_s"),
        _c("tpot_s", "DOUBLE", "s",
           "mean seconds per output token after the first = decode_s / (output_tokens - 1)"),
        _c("e2e_s", "DOUBLE", "s",
           "end-to-end latency, seconds = ttft_s + decode_s (error or timeout: gateway arrival to the end)"),
        _c("prompt_tokens", "BIGINT", "tokens", "prompt length, tokens"),
        _c("cached_tokens", "BIGINT", "tokens", "prompt tokens served from the prefix cache, tokens"),
        _c("output_tokens", "BIGINT", "tokens", "generated tokens"),
        _c("num_preemptions", "BIGINT", "count",
           "times the engine preempted the request (KV blocks ran out; recomputed)"),
        _c("status", "VARCHAR", "", "ok, error (the engine failed it or none could take it), or timeout (the "
           "client gave up waiting and the engine aborted the request)"),
        _c("finish_reason", "VARCHAR", "", "stop, length, abort (timeout), or error"),
        _c("temperature", "DOUBLE", "", "sampling temperature (0 = greedy)"),
        _c("seed", "BIGINT", "", "sampling seed the client sent (NULL if none)"),
        _c("output_hash", "VARCHAR", "", "hash of the generated text (equal hashes = identical outputs)"),
        _c("attempt", "BIGINT", "count",
           "which attempt of its client's request this row is: 1 the first send, 2 the first retry, ... (a retry "
           "is a new request with its own id, sent after a backoff when an attempt timed out or failed; present "
           "when the clients retry)"),
        _c("first_request_id", "BIGINT", "",
           "request_id of the first attempt of the same client request (= request_id when attempt = 1): "
           "count(*) / count(DISTINCT first_request_id) is the retry amplification"),
        _c("adapter", "VARCHAR", "",
           "LoRA adapter the request named as its model ('' for the base model; present when the workload "
           "serves adapters)"),
    )),
    Table("metrics", "Prometheus samples in long format: vLLM engine series (vllm:*) and dcgm-exporter GPU series "
          "(DCGM_*), one scrape per interval per replica, and the replica's host node "
          "(node_*, node-exporter names). "
          "Counters (*_total, *_sum, *_count, ECC/CRC/replay counts) are cumulative.", (
        _c("ts", "TIMESTAMP", "UTC", "scrape time (UTC)"),
        _c("replica", "VARCHAR", "", "engine replica (one GPU group) the series belongs to"),
        _c("name", "VARCHAR", "", _METRIC_NAME),
        _c("value", "DOUBLE", "per name", "sample value"),
    )),
    Table("events", "Change log: deploys, config changes with old and new values, restarts, crashes, router changes.", (
        _c("ts", "TIMESTAMP", "UTC", "event time (UTC)"),
        _c("replica", "VARCHAR", "", "replica concerned ('' for fleet-wide or router events)"),
        _c("kind", "VARCHAR", "", "deploy, config_change, restart, crash, alert, ..."),
        _c("component", "VARCHAR", "", "system that recorded it (k8s, vllm, router, ci, ...)"),
        _c("detail", "VARCHAR", "", "what happened; for config_change, the setting that changed"),
        _c("old_value", "VARCHAR", "", "value before a change"),
        _c("new_value", "VARCHAR", "", "value after a change"),
    )),
    Table("logs", "Engine and serving-process log lines (vLLM, PyTorch, launcher), and the kernel's GPU Xid lines.", (
        _c("ts", "TIMESTAMP", "UTC", "log time (UTC)"),
        _c("replica", "VARCHAR", "", "replica whose process printed it"),
        _c("level", "VARCHAR", "", "INFO, WARNING or ERROR"),
        _c("component", "VARCHAR", "", "source file that logged it (kernel for the GPU driver's NVRM Xid lines)"),
        _c("message", "VARCHAR", "", "log message"),
    )),
    Table("evals", "Offline evaluation runs per model version and task.", (
        _c("ts", "TIMESTAMP", "UTC", "when the evaluation ran (UTC)"),
        _c("model_version", "VARCHAR", "", "model version evaluated"),
        _c("task", "VARCHAR", "", "evaluation task"),
        _c("score", "DOUBLE", "0..1", "accuracy, 0..1"),
        _c("n", "BIGINT", "count", "number of evaluation samples"),
        _c("ci_low", "DOUBLE", "0..1", "95% confidence interval, lower bound"),
        _c("ci_high", "DOUBLE", "0..1", "95% confidence interval, upper bound"),
    )),
    Table("probes", "Determinism probes: fixed prompts replayed with temperature 0 through the fleet.", (
        _c("ts", "TIMESTAMP", "UTC", "probe time (UTC)"),
        _c("replica", "VARCHAR", "", "replica that served the probe"),
        _c("probe_id", "BIGINT", "", "request id of the probe"),
        _c("prompt_id", "VARCHAR", "", "which fixed probe prompt was replayed"),
        _c("batch_size", "BIGINT", "sequences", "sequences in the engine step that produced the first token"),
        _c("output_hash", "VARCHAR", "", "hash of the generated text"),
        _c("logprob_drift", "DOUBLE", "nats",
           "absolute difference of the first token's logprob from this prompt's first probe, nats"),
    )),
)
"""The tables telemetry_gen builds, in the order it builds and writes them."""

CATALOG = Table("catalog", "Every table and column with what it holds and its unit.", (
    _c("table", "VARCHAR", "", "table name"),
    _c("column", "VARCHAR", "", "column name"),
    _c("type", "VARCHAR", "", "DuckDB type"),
    _c("description", "VARCHAR", "", "what the column holds and its unit"),
    _c("table_description", "VARCHAR", "", "what the table holds"),
))
"""The view telemetry_gen.store makes over DuckDB's own column list (its column names and the view comment)."""

TABLE_NAMES: tuple[str, ...] = tuple(t.name for t in TABLES)

OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {"requests": ("attempt", "first_request_id", "adapter")}
"""Columns a table has only in some incidents, always last and in schema order when present: the clients'
attempt columns exist when the incident's clients can retry (telemetry_gen.clients.declares_clients), the
adapter column when its workload serves LoRA adapters (incidents.spec.Incident.declares_adapters); elsewhere
the table ends before them."""

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {t.name: t.column_names for t in (*TABLES, CATALOG)}
"""Table (and the catalog view) -> column names in order: what incident files may name."""


def _column_types() -> dict[str, str]:
    """Column name -> DuckDB type; a name means one type in every table (checked here, at import)."""
    out: dict[str, str] = {}
    for t in (*TABLES, CATALOG):
        for c in t.columns:
            if c.type not in DUCKDB_TYPES:
                raise ValueError(f"{t.name}.{c.name}: type {c.type!r} is not one of {DUCKDB_TYPES}")
            if out.setdefault(c.name, c.type) != c.type:
                raise ValueError(f"{t.name}.{c.name} is {c.type}, but {out[c.name]} elsewhere: one name, one type")
    return out


COLUMN_TYPES: dict[str, str] = _column_types()


def table(name: str) -> Table:
    """The table (or `catalog`) called `name`; KeyError when there is none."""
    for t in (*TABLES, CATALOG):
        if t.name == name:
            return t
    raise KeyError(f"no telemetry table {name!r}; tables: {', '.join(TABLE_COLUMNS)}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """docs/telemetry.md: every table with its columns, types, units and descriptions."""
    lines = [
        "# Telemetry tables",
        "",
        "<!-- Generated from incidents/telemetry_schema.py by `python -m incidents.telemetry_schema`;"
        " edit that module, not this page. -->",
        "",
        "What a game's DuckDB database holds: the tables a serving team's observability stack would have, and",
        "the `catalog` view listing them. The same descriptions are the database's table and column comments,",
        "so `SELECT * FROM catalog` shows the player this page.",
        "",
    ]
    for t in (*TABLES, CATALOG):
        kind = "view" if t is CATALOG else "table"
        lines += [f"## `{t.name}` ({kind})", "", t.description, "",
                  "| column | type | unit | description |", "| --- | --- | --- | --- |"]
        lines += [f"| `{c.name}` | {c.type} | {_cell(c.unit)} | {_cell(c.description)} |" for c in t.columns]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    DOCS_PATH.write_text(markdown(), encoding="utf-8")
    print(f"wrote {DOCS_PATH}", file=sys.stderr)
