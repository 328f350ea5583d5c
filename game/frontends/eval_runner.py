"""`servedrill eval`: agents play episodes over MCP, each on its own server session, and are scored as players are.

An episode is (agent, incident, seed). Its agent is a process started from the agent's command with, in its
environment, $SERVEDRILL_MCP_SERVER: the argv (a JSON list) of a `servedrill mcp` server fixed to the
episode's incident and seed and journalling into the episode's folder. The agent spawns that server as any
MCP client spawns a stdio server (the SDK's `stdio_client`), plays one session through its tools and exits.
`builtin:STRATEGY` runs the scripted players of `game.frontends.mcp_agents` that way.

When the agent has exited (or was stopped at the wall-clock limit), the episode's journal is read back and
scored here, the way `servedrill score` scores a transcript: each query's SQL re-run on every hypothesis's
world. Nothing the agent says about its score is read. An episode that was not submitted scores 0.

Where each episode runs is an `Executor`'s business: `LocalExecutor` runs them in local worker processes,
`RayExecutor` as one Ray task per episode (`game.api.fanout`). A Ray task plays its episode in a folder of its
node's own and ships the folder back (`run_shipped`), so `out` need not be on storage the nodes share; the
telemetry and the worlds come from each node's build cache ($SERVEDRILL_CACHE, forwarded to the tasks), built
once per incident and seed there and shared when that folder is shared.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from game.frontends.mcp_agents import INCIDENT_ENV, SEED_ENV, SERVER_ENV, STRATEGIES
from game.frontends.mcp_server import server_command

BUILTIN = "builtin:"
EVAL_ENV = (SERVER_ENV, INCIDENT_ENV, SEED_ENV)
DEFAULT_TIMEOUT_S = 600.0
KILL_GRACE_S = 5.0
"""After the wall-clock limit, seconds between SIGTERM and SIGKILL to the agent's process group."""
LOCK_WAIT_S = 10.0
"""How long to wait for the server to release the session file after the agent ended."""
PARTS = ("conclusion", "evidence", "pins", "idle", "budget", "hints")
"""The score's parts (`game.rules.scoring` component keys), as columns of the results."""


@dataclass(frozen=True)
class Episode:
    """One agent on one incident at one seed. `name` is the episode's folder and transcript name."""

    agent: str
    incident: str
    seed: int

    @property
    def name(self) -> str:
        return f"{slug(self.agent)}--{slug(Path(self.incident).stem)}--s{self.seed}"


@dataclass
class EpisodeResult:
    """What an episode gave. `status`: submitted, unsubmitted (the agent ended without submitting) or
    no-session (the agent never started one). `total` and the parts are the recomputed score (0 and None
    when not submitted); `wall_s` the agent's wall time; `timed_out` whether it was stopped at the limit."""

    agent: str
    incident: str
    seed: int
    status: str
    total: float = 0.0
    parts: dict[str, float | None] = field(default_factory=dict)
    queries: int = 0
    wall_s: float = 0.0
    timed_out: bool = False
    exit_code: int | None = None
    session_id: str | None = None
    transcript: str | None = None
    error: str | None = None

    def row(self) -> dict[str, Any]:
        """The result as one flat table row."""
        out = {k: v for k, v in asdict(self).items() if k != "parts"}
        out.update({p: self.parts.get(p) for p in PARTS})
        return out


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "agent"


def agent_argv(agent: str, python: str = sys.executable) -> list[str]:
    """The argv of an agent: builtin:STRATEGY as the scripted MCP player, anything else through /bin/sh."""
    if agent.startswith(BUILTIN):
        strategy = agent[len(BUILTIN):]
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown builtin agent {agent!r}; builtins: "
                             + ", ".join(BUILTIN + s for s in STRATEGIES))
        return [python, "-m", "game.frontends.mcp_agents", strategy]
    if not agent.strip():
        raise ValueError("an agent command is empty")
    return ["/bin/sh", "-c", agent]


def run_episode(episode: Episode, out: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
                python: str = sys.executable) -> EpisodeResult:
    """Run one episode's agent under the wall-clock limit, then score its session from the journal."""
    folder = out / "episodes" / episode.name
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in os.environ.items() if k.startswith("SERVEDRILL_") and k not in EVAL_ENV}
    settings["SERVEDRILL_DATA"] = str(data)
    server = server_command(python, player=f"eval:{episode.agent}", incident=episode.incident,
                            seed=episode.seed, data=data, env=settings)
    env = {**os.environ, SERVER_ENV: json.dumps(server), INCIDENT_ENV: episode.incident,
           SEED_ENV: str(episode.seed), "SERVEDRILL_DATA": str(data)}
    started = time.monotonic()
    timed_out = False
    with open(folder / "agent.stdout", "wb") as stdout, open(folder / "agent.stderr", "wb") as stderr:
        proc = subprocess.Popen(agent_argv(episode.agent, python), stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=stderr, env=env, cwd=folder, start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = _stop(proc)
    wall = time.monotonic() - started
    result = score_episode(episode, data, out / "transcripts" / f"{episode.name}.json")
    result.wall_s, result.timed_out, result.exit_code = round(wall, 2), timed_out, code
    if result.status == "no-session" and result.error is None:
        result.error = _tail(folder / "agent.stderr") or "the agent started no session"
    return result


def _stop(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM to the agent's process group, SIGKILL after a grace period; its exit code."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return None


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[:500]


def score_episode(episode: Episode, data: Path, transcript: Path) -> EpisodeResult:
    """Read the episode's session back from its journal (under `data`), export its transcript and score it
    (only when submitted: scoring an unsubmitted session would name the answer)."""
    from game import api

    base = EpisodeResult(episode.agent, episode.incident, episode.seed, "no-session")
    journals = sorted(api.sessions_folder(data).glob("*.jsonl"))
    if not journals:
        return base
    if len(journals) > 1:
        base.error = f"{len(journals)} sessions; scored the first ({journals[0].stem})"
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            session = api.resume_session(journals[0])
            break
        except api.SessionError as exc:  # the server may still be closing it
            if time.monotonic() > deadline:
                base.error = str(exc)
                return base
            time.sleep(0.2)
    try:
        expected = api.load_variant(api.find_incident(episode.incident), episode.seed).incident.id
        if session.header.incident_id != expected or session.header.seed != episode.seed:
            base.error = (f"the session played {session.header.incident_id} seed {session.header.seed}, not "
                          f"{expected} seed {episode.seed}")
            return base
        base.session_id, base.queries = session.session_id, len(session.queries)
        digest = api.started_on(session)
        if not api.handed_in(session):
            base.status = "unsubmitted"
            base.transcript = str(session.export_transcript(transcript, digest))
            return base
        report = api.score_hand_in(session)
        base.status, base.total = "submitted", round(report.total, 2)
        base.parts = {c.key: round(c.points, 2) for c in report.components}
        base.transcript = str(session.export_transcript(transcript, digest, {"total": report.total}))
        return base
    finally:
        session.close()


# ---------------------------------------------------------------- executors


class Executor(Protocol):
    """Where episodes run. `run` yields each episode's result as it finishes (any order)."""

    def run(self, episodes: Sequence[Episode], out: Path, timeout_s: float) -> Iterable[EpisodeResult]: ...


SCORING_ALLOWANCE_S = 1800.0
"""Beyond an episode's own wall-clock limit, how long its task may take to score it (building the incident's
worlds when no cache holds them yet) before the task is stopped and the episode fails."""


def _failed(episode: Episode, error: str) -> EpisodeResult:
    return EpisodeResult(episode.agent, episode.incident, episode.seed, "no-session", error=error[-500:])


@dataclass(frozen=True)
class _Job:
    """One episode as a fan-out task (picklable: the function is module-level and these are plain values)."""

    episode: Episode
    out: str
    timeout_s: float


def _run_job(job: _Job) -> EpisodeResult:
    return run_episode(job.episode, Path(job.out), job.timeout_s)


def run_shipped(job: _Job) -> tuple[EpisodeResult, bytes]:
    """Play one episode in a fresh folder of this node's and hand back its result and the folder as a gzipped tar
    (the episode's logs, data and transcript), for a driver that may not see this node's disk."""
    scratch = Path(tempfile.mkdtemp(prefix="servedrill-eval-"))
    try:
        result = run_episode(job.episode, scratch, job.timeout_s)
        with tempfile.TemporaryFile() as buffer:
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                for part in ("episodes", "transcripts"):
                    if (scratch / part).exists():
                        tar.add(scratch / part, arcname=part)
            buffer.seek(0)
            packed = buffer.read()
        if result.transcript:
            result.transcript = str(Path(job.out) / "transcripts" / Path(result.transcript).name)
        return result, packed
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unpack(packed: bytes, out: Path) -> None:
    """Unpack what `run_shipped` sent into `out` (only regular files and folders, never outside it)."""
    import io

    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(out, filter="data")
            return
        root = out.resolve()
        for member in tar.getmembers():
            target = (out / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise ValueError(f"refused to unpack {member.name!r}: not a file or folder inside {out}")
        tar.extractall(out)  # every member checked above


@dataclass
class LocalExecutor:
    """Episodes in up to `parallel` local worker processes (one agent and its server each at a time)."""

    parallel: int = 1

    def run(self, episodes: Sequence[Episode], out: Path, timeout_s: float) -> Iterable[EpisodeResult]:
        from game.api.fanout import fan_out

        jobs = [_Job(e, str(out), timeout_s) for e in episodes]
        for outcome in fan_out(_run_job, jobs, jobs=self.parallel, task_timeout_s=timeout_s + SCORING_ALLOWANCE_S):
            yield outcome.value if outcome.value is not None else \
                _failed(outcome.task.episode, outcome.error or "no result")


@dataclass
class RayExecutor:
    """One Ray task per episode on the cluster at `address` (`game.api.fanout`), at most `parallel` at once
    (0: one per CPU of the cluster); each episode's folder is shipped back into `out`. Raises FanoutError
    (from the first result on) when Ray is not installed or no cluster answers at `address`."""

    address: str
    parallel: int = 0

    def run(self, episodes: Sequence[Episode], out: Path, timeout_s: float) -> Iterable[EpisodeResult]:
        from game.api.fanout import fan_out

        jobs = [_Job(e, str(out), timeout_s) for e in episodes]
        for outcome in fan_out(run_shipped, jobs, ray=self.address, jobs=self.parallel,
                               task_timeout_s=timeout_s + SCORING_ALLOWANCE_S):
            if outcome.value is None:
                yield _failed(outcome.task.episode, outcome.error or "no result")
                continue
            result, packed = outcome.value
            unpack(packed, out)
            yield result


def run_eval(agents: Sequence[str], incidents: Sequence[str], seeds: Sequence[int], out: Path, *,
             timeout_s: float = DEFAULT_TIMEOUT_S, executor: Executor | None = None,
             progress: Callable[[EpisodeResult, int, int], None] | None = None) -> list[EpisodeResult]:
    """Every agent on every incident at every seed; results in episode order. Writes the tables to `out`."""
    for agent in agents:
        agent_argv(agent)  # a bad builtin name fails before anything runs
    episodes = [Episode(a, i, s) for a in agents for i in incidents for s in seeds]
    out.mkdir(parents=True, exist_ok=True)
    done: dict[Episode, EpisodeResult] = {}
    for result in (executor or LocalExecutor()).run(episodes, out, timeout_s):
        done[Episode(result.agent, result.incident, result.seed)] = result
        if progress is not None:
            progress(result, len(done), len(episodes))
    results = [done[e] for e in episodes]
    write_tables(results, out)
    return results


# ---------------------------------------------------------------- tables

T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)
"""Student's t at 0.975 for 1..30 degrees of freedom (1.96 beyond)."""


def mean_ci(values: Sequence[float]) -> tuple[float, float | None]:
    """The mean and the half-width of its 95% confidence interval (Student's t); None for one value."""
    n = len(values)
    if n == 0:
        return math.nan, None
    mean = sum(values) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = T_975[n - 2] if n - 1 <= len(T_975) else 1.96
    return mean, t * sd / math.sqrt(n)


def summarize(results: Sequence[EpisodeResult]) -> list[dict[str, Any]]:
    """Per agent and incident, then per agent overall: episodes, submitted, mean total with its 95% CI over
    seeds, mean parts, queries and wall time. Overall, each seed's mean over the incidents is one sample."""
    rows: list[dict[str, Any]] = []
    agents = list(dict.fromkeys(r.agent for r in results))
    for agent in agents:
        mine = [r for r in results if r.agent == agent]
        for incident in dict.fromkeys(r.incident for r in mine):
            rows.append(_summary(agent, incident, [r for r in mine if r.incident == incident],
                                 [r.total for r in mine if r.incident == incident]))
        per_seed = [[r.total for r in mine if r.seed == s] for s in dict.fromkeys(r.seed for r in mine)]
        rows.append(_summary(agent, "(all)", mine, [sum(v) / len(v) for v in per_seed]))
    return rows


def _summary(agent: str, incident: str, results: Sequence[EpisodeResult], samples: Sequence[float]) -> dict[str, Any]:
    mean, ci = mean_ci(samples)
    row: dict[str, Any] = {"agent": agent, "incident": incident, "episodes": len(results),
                           "submitted": sum(r.status == "submitted" for r in results),
                           "total": round(mean, 2), "ci95": None if ci is None else round(ci, 2)}
    for part in PARTS:
        values = [float(r.parts[part] or 0.0) for r in results if r.parts.get(part) is not None]
        row[part] = round(sum(values) / len(values), 2) if values else None
    row["queries"] = round(sum(r.queries for r in results) / len(results), 1) if results else None
    row["wall_s"] = round(sum(r.wall_s for r in results) / len(results), 1) if results else None
    return row


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The summary as a Markdown table: total as mean ± CI."""
    head = ["agent", "incident", "episodes", "submitted", "total (95% CI)", *PARTS, "queries", "wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        total = f"{r['total']:.1f}" + ("" if r["ci95"] is None else f" ± {r['ci95']:.1f}")
        cells = [str(r["agent"]), str(r["incident"]), str(r["episodes"]), str(r["submitted"]), total,
                 *("-" if r[p] is None else f"{r[p]:.1f}" for p in PARTS),
                 "-" if r["queries"] is None else f"{r['queries']:.1f}",
                 "-" if r["wall_s"] is None else f"{r['wall_s']:.1f}"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def write_tables(results: Sequence[EpisodeResult], out: Path) -> dict[str, str]:
    """results.md (the summary and every episode), episodes.parquet (with pyarrow) or episodes.csv, and
    summary.json. Returns the paths written by kind."""
    import pandas as pd

    summary = summarize(results)
    episodes = pd.DataFrame([r.row() for r in results])
    written: dict[str, str] = {}
    if importlib.util.find_spec("pyarrow") is not None:
        path = out / "episodes.parquet"
        episodes.to_parquet(path, index=False)
    else:
        path = out / "episodes.csv"
        episodes.to_csv(path, index=False)
    written["episodes"] = str(path)
    md = out / "results.md"
    lines = ["# servedrill eval", "", "Score 0..100, recomputed from each session's journal; the 95% CI is over "
             "seeds (overall: each seed's mean over the incidents). An episode not submitted scores 0.", "",
             markdown_table(summary), "", "## Episodes", "",
             "| agent | incident | seed | status | total | queries | wall s | transcript |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        status = r.status + (" (timed out)" if r.timed_out else "")
        lines.append(f"| {r.agent} | {r.incident} | {r.seed} | {status} | {r.total:.1f} | {r.queries} | "
                     f"{r.wall_s:.1f} | {Path(r.transcript).name if r.transcript else '-'} |")
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    written["markdown"] = str(md)
    (out / "summary.json").write_text(json.dumps({"summary": summary, "episodes": [r.row() for r in results]},
                                                 indent=1, default=str), encoding="utf-8")
    written["summary"] = str(out / "summary.json")
    return written
