"""Published benchmark points for the fidelity harness (telemetry_gen.fidelity.harness): the data format and its reader.

A points file is YAML with up to three lists (the format is described in the header of
`data/fidelity_points.yaml`, the built-in file): `points` (one benchmark run each), `tables` (a source's
grid of one metric: rows "input/output", one column per setup) and `serving_tables` (a source's serving
rows: a request rate and several metrics per row), plus `excluded` (points deliberately not replayed,
kept for review; not read). Tables become one point per cell or row.

Anyone can bring their own file (`servedrill fidelity --points FILE`), so the reader treats it as input
from a stranger: every problem is reported as `file:line: name: what is wrong (hint: ...)`, all of them
at once (PointsError), never as a traceback; every point, table and serving table must say what was
fitted to it (`fitted_to`: the model constants chosen by comparing the engine model with it, `[]` for a
held-out point), so that no figure can be counted as out of sample by omission; model and GPU names are
matched like `calc` matches them (any case, Hugging Face ids, nvidia-smi spellings) and stored by their
canonical name; sizes are bounded so that a typo cannot start a run of a billion requests.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine_model.config import EngineConfig
from engine_model.profiles import GPUS, resolve_gpu, resolve_model

POINTS_PATH = Path(__file__).resolve().parent.parent / "data" / "fidelity_points.yaml"
LENGTH_SOURCES = ("fixed", "sharegpt")
METRICS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "output_throughput_tok_s", "decode_step_ms", "prefill_step_ms")
# The serving front ends a point can run behind: vLLM's API server (the default for rate and concurrency
# loads), Triton's (TensorRT-LLM serving), or none (offline batch runs, the default for load kind batch).
SERVERS = ("vllm", "triton", "offline")
# what a point may publish (means, as `vllm bench serve` / `vllm bench latency` print them; see the data
# file's header): each is compared directly or derived into one of METRICS (fidelity.published_metrics)
PUBLISHED_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "output_throughput_tok_s", "latency_ms", "duration_s",
                  "prefill_ms")
SERVING_COLUMNS = ("ttft_ms", "itl_ms", "tpot_ms", "output_throughput_tok_s")
SECTIONS = ("points", "tables", "serving_tables", "excluded")

MAX_FILE_BYTES = 4 << 20
MAX_PROMPTS = 100_000  # requests in one point (the built-in file's largest: 30,000)
MAX_TOKENS = 1 << 20  # prompt or output tokens of one request
MAX_TP = 64
MAX_POINTS = 10_000  # points in one file, tables expanded (the built-in file: 439)
MAX_TOTAL_REQUESTS = 5_000_000  # requests over all points (the built-in file: about 1.8 million)
# Work bounds, from what a point's replay takes (`point_work`; measured on a 2-core machine: the built-in
# file's heaviest point estimates 18.5k steps, its largest 2.2e7 tokens (under 2 s); the whole file 1.6e6
# steps; a point of 1.9e6 estimated steps (15,000 prompts at 1 req/s) replays in 1 s, one of 2.1e8 tokens
# (100,000 prompts of 128 + 2000) in 6.4 s). A point over either bound, or a file over MAX_TOTAL_STEPS, is
# refused before anything runs.
MAX_POINT_STEPS = 2_000_000  # ~100x the built-in file's heaviest point
MAX_POINT_TOKENS = 100_000_000  # prompts x (input + output) tokens; ~4.5x the built-in file's largest (2.2e7)
MAX_TOTAL_STEPS = 20_000_000  # over all points; ~12x the built-in file
TYPICAL_DECODE_STEP_S = 0.015  # seconds: how long `point_work` takes a decode step to be, to size a rate point's batch
HINT = "see the header of telemetry_gen/data/fidelity_points.yaml for the format"
MAX_TEXT = 300  # characters of a name, source or engine text
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class FidelityPoint:
    """One documented benchmark setup (see the data file's header for the fields' meaning). `model` and
    `gpu` are engine_model.profiles canonical names."""

    name: str
    source: str
    model: str
    gpu: str
    engine: str
    tp: int
    input_tokens: int
    output_tokens: int
    load: str  # batch | rate | concurrency
    num_prompts: int
    published: dict[str, float]
    rate: float = math.inf  # requests/s for load "rate"
    concurrency: int = 0  # clients for load "concurrency"
    seed: int = 0
    prefill_bound: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    lengths: str = "fixed"  # fixed: every request input_tokens / output_tokens; sharegpt: fidelity.sharegpt_lengths
    table: str = ""  # the `tables:` or `serving_tables:` entry the point is a cell or row of; "" for a point
    server: str = ""  # what stands in front of the engine: one of SERVERS; "" = its load's default
    # the engine-model constants whose values were chosen (set, or kept over a tried alternative) by
    # comparing the model with this point, e.g. "step_cost.HOST_STEP_S"; empty = held out (docs/fidelity.md)
    fitted_to: tuple[str, ...] = ()

    @property
    def held_out(self) -> bool:
        """Whether no constant was chosen on this point: its error is an out-of-sample figure."""
        return not self.fitted_to

    @property
    def front_end(self) -> str:
        """The server the point runs behind (fidelity.SERVER_FRONTENDS): its own, else its load's default."""
        return self.server or default_server(self.load)

    @property
    def vllm_defaults(self) -> bool:
        """Whether the point starts from vLLM V1's defaults for its GPU (EngineConfig.for_gpu): a vLLM run's
        (its `engine` text starts with "vLLM"). Other engines' points (TensorRT-LLM's tables, replayed on
        this vLLM-like model) keep the GPU-independent dataclass defaults they were fitted with."""
        return self.engine.split()[:1] == ["vLLM"]

    def engine_config(self) -> EngineConfig:
        """The engine's knobs: the defaults (see `vllm_defaults`), the point's `config` on top; validated."""
        if self.vllm_defaults:
            gpu = GPUS[self.gpu]
            cfg = EngineConfig.for_gpu(gpu.name, gpu.hbm_gib, tensor_parallel_size=self.tp, **self.config)
        else:
            cfg = EngineConfig(tensor_parallel_size=self.tp).with_changes(**self.config)
        cfg.validate()
        return cfg


class PointsError(ValueError):
    """A points file the harness cannot use. `problems` holds one `file:line: ...` line per problem; the
    message is the first of them."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems[0] if problems else "invalid points file")
        self.problems = problems


class _Bad(Exception):
    """One problem inside an entry: `where` is the path below the entry (keys and indexes) it concerns."""

    def __init__(self, message: str, *where: str | int) -> None:
        super().__init__(message)
        self.message = message
        self.where = where


# ---- reading -----------------------------------------------------------------------------------------
def _read_text(path: Path) -> str:
    """The file's text, read only if it is a regular file of at most MAX_FILE_BYTES: opened without blocking
    (a FIFO with no writer would wait forever) and checked with fstat before a byte is read, so a FIFO, a
    device (/dev/zero) or a folder is refused at once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except IsADirectoryError:
        raise PointsError([f"{path}: is a folder, not a points file"]) from None
    except OSError as exc:
        raise PointsError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise PointsError([f"{path}: is a folder, not a points file"])
        if not stat.S_ISREG(info.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device or socket"
            raise PointsError([f"{path}: is {kind}, not a regular file (hint: save the points in a file)"])
        if info.st_size > MAX_FILE_BYTES:
            raise PointsError([f"{path}: {info.st_size} bytes is more than a points file may hold ({MAX_FILE_BYTES})"])
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1  # a file that grows while read is still capped
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        raw = b"".join(chunks)
    except OSError as exc:
        raise PointsError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        raise PointsError([f"{path}: more than {MAX_FILE_BYTES} bytes, more than a points file may hold"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PointsError([f"{path}: not UTF-8 text"]) from None


_DEFAULT_CONFIG = EngineConfig()


def point_work(point: FidelityPoint) -> tuple[int, int]:
    """(tokens, engine steps) replaying `point` takes, estimated before it runs: tokens are prompts x (input +
    output); steps are the batches the prompts go through (max_num_seqs at a time; for a rate load as many
    as arrive during one request's decode at TYPICAL_DECODE_STEP_S a step), each output_tokens decode steps
    plus its prefill chunks (max_num_batched_tokens a step)."""
    n, isl, osl = point.num_prompts, point.input_tokens, point.output_tokens
    try:
        config = point.engine_config()
    except (KeyError, ValueError, TypeError):
        config = _DEFAULT_CONFIG  # refused knobs: _check reports them; size the work on the defaults
    seqs = max(1, config.max_num_seqs)
    chunk = max(1, config.max_num_batched_tokens)
    if point.load == "concurrency" and point.concurrency > 0:
        batch = min(seqs, point.concurrency)
    elif point.load == "rate" and math.isfinite(point.rate):
        batch = int(min(seqs, max(1.0, point.rate * osl * TYPICAL_DECODE_STEP_S)))
    else:
        batch = seqs
    batch = max(1, min(batch, n))
    steps = math.ceil(n / batch) * (osl + math.ceil(batch * isl / max(1, chunk)))
    return n * (isl + osl), steps


def _check_work(points: list[FidelityPoint]) -> None:
    """Raise _Bad (at the entry's num_prompts) for the first point over a work bound."""
    for p in points:
        tokens, steps = point_work(p)
        if tokens > MAX_POINT_TOKENS:
            raise _Bad(f"{p.num_prompts} prompts of {p.input_tokens} + {p.output_tokens} tokens are {tokens:.2g} "
                       f"tokens to replay; a point may have at most {MAX_POINT_TOKENS:.2g}", "num_prompts")
        if steps > MAX_POINT_STEPS:
            raise _Bad(f"{p.num_prompts} prompts ({p.load} load) take about {steps:.2g} engine steps to replay; a "
                       f"point may take at most {MAX_POINT_STEPS:.2g} (fewer prompts, shorter outputs or a higher "
                       "rate)", "num_prompts")


def load_points(path: Path | str = POINTS_PATH) -> list[FidelityPoint]:
    """Every point of the file, tables expanded, validated. PointsError lists every problem found."""
    path = Path(path)
    text = _read_text(path)
    try:
        raw = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PointsError([f"{where}: not valid YAML: {problem} (hint: {HINT})"]) from None
    except RecursionError:
        raise PointsError([f"{path}: nested too deeply to be a points file (hint: {HINT})"]) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PointsError([f"{path}:1: a points file is a mapping with {', '.join(SECTIONS[:3])} (hint: {HINT})"])
    problems: list[str] = []
    unknown = [k for k in raw if k not in SECTIONS]
    for key in unknown:
        problems.append(f"{path}:{_line(root, (key,))}: unknown section {key!r}; known: {', '.join(SECTIONS)}")
    readers: dict[str, Callable[[dict[str, Any]], list[FidelityPoint]]] = {
        "points": lambda item: [_point(item)],
        "tables": _table_points,
        "serving_tables": _serving_table_points,
    }
    out: list[FidelityPoint] = []
    for section, read in readers.items():
        items = raw.get(section) or []
        if not isinstance(items, list):
            problems.append(f"{path}:{_line(root, (section,))}: {section} must be a list")
            continue
        for i, item in enumerate(items):
            name = f"{section}[{i}]"
            if isinstance(item, dict) and item.get("name") is not None:
                name = _CONTROL.sub("?", str(item["name"]))[:80]  # shown in a message: never raw
            try:
                if not isinstance(item, dict):
                    raise _Bad("an entry must be a mapping of fields")
                found = read(item)
                _check_work(found)
                out.extend(found)
            except _Bad as bad:
                line = _line(root, (section, i, *bad.where))
                problems.append(f"{path}:{line}: {name}: {bad.message} (hint: {HINT})")
            except (TypeError, ValueError, AttributeError, RecursionError) as exc:  # a shape no check foresaw
                line = _line(root, (section, i))
                detail = _CONTROL.sub("?", str(exc))[:200]
                problems.append(f"{path}:{line}: {name}: malformed entry ({detail}) (hint: {HINT})")
    seen: dict[str, int] = {}
    for p in out:
        seen[p.name] = seen.get(p.name, 0) + 1
    for name, count in seen.items():
        if count > 1:
            problems.append(f"{path}: point name {name!r} is used {count} times; names must be unique")
    if not out and not problems:
        problems.append(f"{path}: no points (hint: {HINT})")
    if len(out) > MAX_POINTS:
        problems.append(f"{path}: {len(out)} points; a file may hold at most {MAX_POINTS}")
    total = sum(p.num_prompts for p in out)
    if total > MAX_TOTAL_REQUESTS:
        problems.append(f"{path}: {total} requests over all points; at most {MAX_TOTAL_REQUESTS} "
                        f"(split the file, or run parts with --only)")
    steps = sum(point_work(p)[1] for p in out)
    if steps > MAX_TOTAL_STEPS:
        problems.append(f"{path}: about {steps:.2g} engine steps over all points; at most {MAX_TOTAL_STEPS:.2g} "
                        f"(split the file, or run parts with --only)")
    if problems:
        # a message may quote what the file holds (a knob's name, a figure): never a control character
        raise PointsError(sorted((_CONTROL.sub("?", p) for p in problems), key=_problem_line))
    return out


def _problem_line(problem: str) -> int:
    """The line a `file:line: ...` problem names (0 for a whole-file problem), for ordering."""
    head = problem.split(": ", 1)[0]
    _, _, line = head.rpartition(":")
    return int(line) if line.isdigit() else 0


def _line(root: yaml.Node | None, where: tuple[str | int, ...]) -> int:
    """1-based line of the deepest place `where` reaches from `root`: a field's key, a list's item (merge
    keys followed)."""
    node = root
    best = 1 if root is None else root.start_mark.line + 1
    for step in where:
        found = _child(node, step)
        if found is None:
            break
        line, node = found
        best = line
    return best


def _child(node: yaml.Node | None, step: str | int, seen: frozenset[int] = frozenset()) -> tuple[int, yaml.Node] | None:
    """(line, node) of `step` below `node`: an item's own line, or a field's key line and its value (through
    merge keys, each node visited once: a file may merge a mapping into itself)."""
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
        item = node.value[step]
        return item.start_mark.line + 1, item
    if isinstance(node, yaml.MappingNode) and id(node) not in seen:
        merged: list[yaml.Node] = []
        for key, value in node.value:
            if key.tag == "tag:yaml.org,2002:merge":
                merged.extend(value.value if isinstance(value, yaml.SequenceNode) else [value])
            elif key.value == str(step):
                return key.start_mark.line + 1, value
        for value in merged:
            found = _child(value, step, seen | {id(node)})
            if found is not None:
                return found
    return None


# ---- fields ------------------------------------------------------------------------------------------
def _req(item: dict[str, Any], key: str) -> Any:
    if item.get(key) is None:
        raise _Bad(f"missing field {key!r}")
    return item[key]


def _text(item: dict[str, Any], key: str, required: bool = True) -> str:
    """A name, source or engine text: shown to people as written, so one line, no control characters
    (a terminal escape in a file must not reach a terminal), at most MAX_TEXT characters."""
    value = _req(item, key) if required else item.get(key, "")
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise _Bad(f"{key} must be text, not {value!r}", key)
    text = str(value)
    if _CONTROL.search(text):
        raise _Bad(f"{key} holds a control character or line break", key)
    if len(text) > MAX_TEXT:
        raise _Bad(f"{key} is {len(text)} characters long; at most {MAX_TEXT}", key)
    return text


def _int(item: dict[str, Any], key: str, default: int | None = None, lo: int = 1, hi: int = MAX_TOKENS) -> int:
    value = item.get(key, default) if default is not None else _req(item, key)
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value != int(value)):
        raise _Bad(f"{key} must be a whole number, not {value!r}", key)
    if not lo <= int(value) <= hi:
        raise _Bad(f"{key} must be within {lo}..{hi}, not {value}", key)
    return int(value)


def _number(value: Any, what: str, *where: str | int) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _Bad(f"{what} must be a positive number, not {value!r}", *where)
    return float(value)


def _rate(value: Any, *where: str | int) -> float:
    """A request rate: requests/s, or "inf" (every request at once)."""
    if str(value).strip().lower() == "inf":
        return math.inf
    return _number(value, "the rate", *where)


def _names(model: Any, gpu: Any, *where: str | int) -> tuple[str, str]:
    """Canonical profile names for a source's model and GPU names (any case, Hugging Face ids)."""
    try:
        m = resolve_model(str(model)).name
    except KeyError as exc:
        raise _Bad(str(exc.args[0]), *where, "model") from None
    try:
        g = resolve_gpu(str(gpu)).name
    except KeyError as exc:
        raise _Bad(str(exc.args[0]), *where, "gpu") from None
    return m, g


def _published(values: Any, *where: str | int) -> dict[str, float]:
    if not isinstance(values, dict) or not values:
        raise _Bad(f"published must map some of {', '.join(PUBLISHED_KEYS)} to figures", *where)
    out = {}
    for key, value in values.items():
        if key not in PUBLISHED_KEYS:
            raise _Bad(f"unknown published figure {key!r}; known: {', '.join(PUBLISHED_KEYS)}", *where, str(key))
        out[str(key)] = _number(value, f"published {key}", *where, str(key))
    return out


FITTED_HINT = ("fitted_to lists the constants chosen on this point, such as [step_cost.HOST_STEP_S], "
               "or [] for a held-out point")


def _fitted(entry: dict[str, Any], required: bool, *where: str | int) -> tuple[str, ...]:
    """An entry's `fitted_to`: a list (maybe empty) of constant names, each one line of at most MAX_TEXT
    characters. Required on every point, table and serving table: a file that does not say leaves the
    reader unable to tell a fitted point from a held-out one, so it is refused rather than assumed."""
    if "fitted_to" not in entry or entry["fitted_to"] is None:
        if not required:
            return ()
        raise _Bad(f"missing field 'fitted_to' ({FITTED_HINT})", *where)
    value = entry["fitted_to"]
    if not isinstance(value, list):
        raise _Bad(f"fitted_to must be a list, not {str(value)[:40]!r} ({FITTED_HINT})", *where, "fitted_to")
    out: list[str] = []
    for item in value:
        text = str(item).strip() if isinstance(item, str) else ""
        if not text or _CONTROL.search(text) or len(text) > MAX_TEXT:
            raise _Bad(f"fitted_to entries are constant names (one line of at most {MAX_TEXT} characters), "
                       f"not {str(item)[:40]!r}", *where, "fitted_to")
        if text not in out:
            out.append(text)
    return tuple(out)


def _check(point: FidelityPoint, *where: str | int) -> FidelityPoint:
    """The checks every point gets, whichever list it came from."""
    try:
        config = point.engine_config()
    except (KeyError, ValueError, TypeError) as exc:
        raise _Bad(f"engine knobs refused: {exc.args[0] if exc.args else exc}", *where) from None
    if not published_metrics(point):
        raise _Bad("publishes nothing the harness compares (duration_s needs prefill_bound: true)", *where)
    if "prefill_ms" in point.published:
        # the figure is one step's time only when the whole batch is admitted in one step
        budget = config.max_num_batched_tokens
        one_step = point.input_tokens * point.num_prompts <= budget
        if point.load != "batch" or point.front_end != "offline" or not one_step:
            raise _Bad(f"prefill_ms is the time of one prefill step: it needs an offline batch (load kind "
                       f"batch, no server) whose prompts fit one step (input_tokens x num_prompts <= "
                       f"max_num_batched_tokens, here {budget})", *where)
        if point.prefill_bound and "duration_s" in point.published:
            raise _Bad("publish prefill_ms or a prefill-bound duration_s, not both", *where)
    return point


def _point(item: dict[str, Any]) -> FidelityPoint:
    name = _text(item, "name")
    if not str(item.get("source") or "").strip():
        raise _Bad("every point needs a source and published figures")
    load = item.get("load")
    if not isinstance(load, dict):
        raise _Bad("load must be a mapping such as {kind: batch}", "load")
    kind = str(load.get("kind", ""))
    if kind not in ("batch", "rate", "concurrency"):
        raise _Bad(f"load kind must be batch, rate or concurrency, not {kind!r}", "load")
    if not item.get("published"):
        raise _Bad("every point needs a source and published figures")
    model, gpu = _names(_req(item, "model"), _req(item, "gpu"))
    lengths = str(item.get("lengths", "fixed"))
    if lengths not in LENGTH_SOURCES:
        raise _Bad(f"lengths must be one of {LENGTH_SOURCES}, not {lengths!r}", "lengths")
    concurrency = _int(load, "concurrency", 0, 0, MAX_PROMPTS) if "concurrency" in load else 0
    if kind == "concurrency" and concurrency < 1:
        raise _Bad("a concurrency load needs concurrency >= 1", "load")
    config = _knobs(item.get("config"), "config")
    point = FidelityPoint(
        name=name,
        source=_text(item, "source"),
        model=model,
        gpu=gpu,
        engine=_text(item, "engine", required=False),
        tp=_int(item, "tp", 1, 1, MAX_TP),
        input_tokens=_int(item, "input_tokens"),
        output_tokens=_int(item, "output_tokens"),
        load=kind,
        num_prompts=_int(item, "num_prompts", None, 1, MAX_PROMPTS),
        published=_published(item["published"], "published"),
        rate=_rate(load.get("rate", "inf"), "load"),
        concurrency=concurrency,
        seed=_int(load, "seed", 0, 0, 2**31) if "seed" in load else 0,
        prefill_bound=bool(item.get("prefill_bound", False)),
        config=dict(config),
        lengths=lengths,
        server=_server(item, kind),
        fitted_to=_fitted(item, True),
    )
    return _check(point)


def default_server(load: str) -> str:
    """Offline batch runs have no server in front of the engine; served loads have vLLM's API server."""
    return "offline" if load == "batch" else "vllm"


def _server(entry: dict[str, Any], kind: str) -> str:
    """The entry's `server`, or the default for its load kind."""
    server = entry.get("server", default_server(kind))
    if server not in SERVERS:
        raise _Bad(f"server must be one of {', '.join(SERVERS)}, not {str(server)[:40]!r}", "server")
    return str(server)


def _lengths(key: Any, *where: str | int) -> tuple[int, int]:
    isl, _, osl = str(key).partition("/")
    if not (isl.isdigit() and osl.isdigit()) or not (1 <= int(isl) <= MAX_TOKENS and 1 <= int(osl) <= MAX_TOKENS):
        raise _Bad(f"lengths {key!r} are not input/output token counts such as 128/2048", *where)
    return int(isl), int(osl)


def _knobs(value: Any, *where: str | int) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad("config must be a mapping of engine knobs, such as {max_num_seqs: 256}", *where)
    return dict(value)


def _setup_point(table: dict[str, Any], setup: dict[str, Any], name: str, isl: int, osl: int,
                 base_knobs: dict[str, Any], where: tuple[str | int, ...], **fields: Any) -> FidelityPoint:
    """A table's point for one setup (model, gpu, tp and knobs): knobs are `base_knobs`, then the
    table's `config`, then the setup's own `config`, each overriding the one before. `where` is the
    setup's place in the table, for the line of a problem."""
    if not isinstance(setup, dict):
        raise _Bad("a setup must be a mapping with model, gpu and tp", *where)
    table_knobs = _knobs(table.get("config"), "config")
    table_fitted = _fitted(table, True)
    try:
        model, gpu = _names(_req(setup, "model"), _req(setup, "gpu"))
        tp = _int(setup, "tp", 1, 1, MAX_TP)
        setup_knobs = _knobs(setup.get("config"), "config")
        # a setup (column) may name constants fitted to it alone, on top of the table's
        setup_fitted = _fitted(setup, False)
    except _Bad as bad:
        raise _Bad(bad.message, *where, *bad.where) from None
    return _check(FidelityPoint(
        name=name,
        source=_text(table, "source"),
        model=model,
        gpu=gpu,
        engine=_text(table, "engine", required=False),
        tp=tp,
        input_tokens=isl,
        output_tokens=osl,
        config={**base_knobs, **table_knobs, **setup_knobs},
        table=str(table.get("name", "?")),
        fitted_to=tuple(dict.fromkeys(table_fitted + setup_fitted)),
        **fields,
    ), *where)


def _serving_table_points(table: dict[str, Any]) -> list[FidelityPoint]:
    """The points of one published serving table: one per row, at a request rate, with several metrics.

    `setups` name the model, GPU, TP degree (and knobs over the table's `config`) of each block of rows;
    `columns` name what each row holds: "qps" first (requests/s, or "inf": every request at once), then
    published metrics (ttft_ms, itl_ms, tpot_ms, output_throughput_tok_s); `rows` map a setup to
    "input/output" lengths to a list of rows. Every point is a rate point: `num_prompts` requests at
    seeded Poisson times at its rate (all at t=0 for "inf"), through the API-server stage."""
    tname = _text(table, "name")
    columns = [str(c) for c in table.get("columns") or []]
    metrics = columns[1:]
    if not table.get("source") or columns[:1] != ["qps"] or not metrics or not set(metrics) <= set(SERVING_COLUMNS):
        raise _Bad(f"a serving table needs a source and columns [qps, then some of {sorted(SERVING_COLUMNS)}]",
                   "columns")
    prompts = _int(table, "num_prompts", None, 1, MAX_PROMPTS)
    setups = table.get("setups") or {}
    rows = table.get("rows") or {}
    if not isinstance(setups, dict) or not isinstance(rows, dict):
        raise _Bad("setups and rows must be mappings keyed by setup name", "rows")
    out: list[FidelityPoint] = []
    for setup_name, by_length in rows.items():
        if _CONTROL.search(str(setup_name)) or len(str(setup_name)) > MAX_TEXT:
            raise _Bad(f"setup name {str(setup_name)[:80]!r} is not one line of at most {MAX_TEXT} characters",
                       "rows")
        setup = setups.get(setup_name)
        if setup is None:
            raise _Bad(f"rows name setup {setup_name!r}, which `setups` does not define", "rows", setup_name)
        if not isinstance(by_length, dict):
            raise _Bad("each setup's rows map input/output lengths to lists of rows", "rows", setup_name)
        for lengths, row_list in by_length.items():
            at = ("rows", setup_name, lengths)
            isl, osl = _lengths(lengths, *at)
            if not isinstance(row_list, list):
                raise _Bad(f"{setup_name} {lengths}: rows must be a list of [qps, ...] lists", *at)
            for row in row_list:
                if not isinstance(row, list) or len(row) != len(columns):
                    size = len(row) if isinstance(row, list) else 1
                    raise _Bad(f"{setup_name} {lengths} row {row} has {size} values for {len(columns)} columns", *at)
                rate = _rate(row[0], *at)
                qps = "inf" if math.isinf(rate) else str(row[0]).lower()
                out.append(_setup_point(
                    table, setup, f"{tname}-{setup_name}-{isl}-{osl}-qps{qps}", isl, osl, {},
                    ("setups", setup_name),
                    load="rate",
                    server=_server(table, "rate"),
                    num_prompts=prompts,
                    published={m: _number(v, m, *at) for m, v in zip(metrics, row[1:], strict=True)},
                    rate=rate,
                ))
    return out


def _table_points(table: dict[str, Any]) -> list[FidelityPoint]:
    """The points of one published table: one per (row, column) cell that has a figure.

    A table names its source, engine, load and the one metric its cells hold; `columns` are the setups
    (name, model, gpu, tp, config: the knobs shared by every row are the table's `config`), `rows` map
    "input/output" lengths to one figure per column (null where the source has none) and `num_prompts`
    maps the same keys to the request count the source used for that row. Without a max_model_len in the
    knobs, each row's engine is built for its own input + output length, as `trtllm-bench build` sizes
    an engine from its dataset."""
    tname = _text(table, "name")
    metric = str(table.get("metric", ""))
    if metric not in PUBLISHED_KEYS or not table.get("source"):
        raise _Bad(f"a table needs a source and a metric (the published figure its cells hold) out of "
                   f"{PUBLISHED_KEYS}", "metric")
    load = table.get("load") or {}
    if not isinstance(load, dict) or load.get("kind") != "batch":
        raise _Bad("tables hold offline batch runs (load kind batch)", "load")
    columns = table.get("columns") or []
    counts_raw = table.get("num_prompts") or {}
    rows = table.get("rows") or {}
    if not isinstance(columns, list) or not isinstance(counts_raw, dict) or not isinstance(rows, dict):
        raise _Bad("columns is a list of setups; rows and num_prompts map input/output lengths", "rows")
    counts = {str(k): _int(counts_raw, k, None, 1, MAX_PROMPTS) for k in counts_raw}
    out: list[FidelityPoint] = []
    for lengths, cells in rows.items():
        key = str(lengths)
        if key not in counts:
            raise _Bad(f"row {key!r} needs input/output lengths and a num_prompts entry", "rows", key)
        isl, osl = _lengths(key, "rows", key)
        if not isinstance(cells, list) or len(cells) != len(columns):
            size = len(cells) if isinstance(cells, list) else 1
            raise _Bad(f"row {key} has {size} figures for {len(columns)} columns", "rows", key)
        for i, (col, value) in enumerate(zip(columns, cells, strict=True)):
            if value is None:
                continue
            if not isinstance(col, dict) or not col.get("name"):
                raise _Bad("every column needs a name, model and gpu", "columns", i)
            try:
                col_name = _text(col, "name")
            except _Bad as bad:
                raise _Bad(bad.message, "columns", i) from None
            out.append(_setup_point(
                table, col, f"{tname}-{col_name}-{isl}-{osl}", isl, osl,
                {"max_model_len": isl + osl}, ("columns", i),
                load="batch",
                server=_server(table, "batch"),
                num_prompts=counts[key],
                published={metric: _number(value, metric, "rows", key)},
            ))
    return out


def published_metrics(point: FidelityPoint) -> dict[str, float]:
    """The harness's metrics (METRICS) from a point's published figures, derived as the data file's header
    says (fidelity.model_metrics derives the modelled ones the same way)."""
    pub = point.published
    out: dict[str, float] = {}
    if "ttft_ms" in pub:
        out["ttft_ms"] = pub["ttft_ms"]
    if "tpot_ms" in pub:
        out["tpot_ms"] = pub["tpot_ms"]
    elif "itl_ms" in pub:
        out["tpot_ms"] = pub["itl_ms"]
    if "output_throughput_tok_s" in pub:
        out["output_throughput_tok_s"] = pub["output_throughput_tok_s"]
    if "latency_ms" in pub:
        out["decode_step_ms"] = pub["latency_ms"] / point.output_tokens
    if point.prefill_bound and "duration_s" in pub:
        total_in = point.input_tokens * point.num_prompts
        out["prefill_step_ms"] = 1e3 * point.engine_config().max_num_batched_tokens * pub["duration_s"] / total_in
    if "prefill_ms" in pub:
        out["prefill_step_ms"] = pub["prefill_ms"]
    return out


def select(points: list[FidelityPoint], only: str = "") -> list[FidelityPoint]:
    """The points whose name contains `only` (any case); all of them for an empty `only`."""
    needle = only.strip().lower()
    return [p for p in points if needle in p.name.lower()] if needle else list(points)
