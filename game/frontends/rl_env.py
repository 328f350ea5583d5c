"""The game as a reinforcement-learning environment: Gymnasium's `reset` / `step` over text, one session per
episode, played through the same calls as the MCP server (`game.frontends.agent_play.AgentPlay`), so an
episode is journalled and scored exactly like a human's game.

A plain class with Gymnasium's signatures, not a `gymnasium.Env` subclass: observations and actions are free
text (JSON), which Gymnasium's spaces do not describe usefully, and the game should not depend on an RL
library to be played. `reset(seed=..., options=...) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)` behave as Gymnasium documents them;
`state()` gives the episode's bookkeeping as OpenEnv's `state` does. Wrap it in `gymnasium.Env` (with
`gymnasium.spaces.Text`) where a trainer needs the subclass.

- **Observation**: a JSON text: what the MCP tool of the action returned (`{"error": ...}` for a refusal).
  `reset` observes the briefing: the report, the hypotheses (labels and titles), the budget and limits.
- **Action**: a JSON text (or a dict) naming an action and its arguments, as the MCP tools take them:
  `{"action": "query", "sql": "SELECT ..."}`, `{"action": "rank", "ranking": {"A": 70, "B": 30}}`,
  `{"action": "pin", "query": 3, "hypothesis": "A", "stance": "supports"}`, `unpin` likewise,
  `{"action": "note", "hypothesis": "A", "text": "..."}`, `{"action": "hint"}`,
  `{"action": "submit"}` (optionally with a `ranking`), and the free reads `schema`, `status`,
  `briefing`, `updates`.
- **Reward**: 0 on every step until the submit; on the submit, the score (0..100) and in `info["reward_parts"]`
  its parts (conclusion, evidence, pins and the penalties).
- **terminated** at the submit. **truncated** when a query is asked for with the budget spent (it does not
  run) or after `max_steps` actions; the session is then left unsubmitted (resumable, unscored).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from game.frontends.agent_play import AgentError, AgentPlay

ACTIONS = ("query", "rank", "pin", "unpin", "note", "hint", "submit", "schema", "status", "briefing", "updates")
DEFAULT_INCIDENT = "one-slow-replica"
SEED_RANGE = 10_000
"""`reset()` without a seed draws the next episode's seed below this (from the last seed given)."""


class IncidentEnv:
    """Episodes of one incident (a library id, or a file chosen by whoever builds the environment). Each
    `reset` opens a new session at the episode's seed (variant and telemetry) for `player` under `root`
    (default: the user's data folder). `max_steps` defaults to four times the query budget plus 20."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, incident: str = DEFAULT_INCIDENT, *, player: str = "rl-agent", root: Path | None = None,
                 max_steps: int | None = None) -> None:
        self.incident = incident
        self.player = player
        self.root = root
        self.max_steps = max_steps
        self.play: AgentPlay | None = None
        self.seed: int | None = None
        self.steps = 0
        self.done = False
        self.episodes = 0
        self._rng = random.Random(0)
        self._limit = 0

    # ---------------------------------------------------------------- Gymnasium's interface

    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode at `seed` (default: drawn from the last seed given). Closes the previous one."""
        self.close()
        if seed is not None:
            self._rng = random.Random(seed)
            episode_seed = int(seed)
        else:
            episode_seed = self._rng.randrange(SEED_RANGE)
        self.play = AgentPlay(player=self.player, root=self.root, incident=self.incident, seed=episode_seed)
        started = self.play.start()
        self.seed, self.steps, self.done = episode_seed, 0, False
        self.episodes += 1
        budget = started.get("query_budget") or 0
        self._limit = self.max_steps if self.max_steps is not None else 4 * int(budget) + 20
        return _text(started), {"session_id": started["session_id"], "seed": episode_seed,
                                "query_budget": started.get("query_budget"), "max_steps": self._limit,
                                "actions": list(ACTIONS)}

    def step(self, action: str | Mapping[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Carry out one action; (observation, reward, terminated, truncated, info)."""
        play = self.play
        if play is None or self.done:
            raise RuntimeError("call reset() first: the episode is over or was never started")
        self.steps += 1
        info: dict[str, Any] = {"step": self.steps}
        try:
            name, args = parse_action(action)
            if name == "query" and self._budget_spent(play):
                self.done = True
                info["reason"] = "query budget spent"
                return _text({"error": "the query budget is spent: the episode is truncated"}), 0.0, False, True, info
            out = self._do(play, name, args)
        except AgentError as exc:
            out, name = {"error": str(exc)}, "error"
            info["error"] = str(exc)
        if name == "submit":
            debrief = play.debrief()
            self.done = True
            info.update(reward_parts={c["key"]: c["points"] for c in debrief["components"]},
                        debrief=debrief["debrief"], transcript=debrief["transcript"])
            out.pop("next", None)  # the debrief is in info: nothing to call
            return _text({**out, "total": debrief["total"]}), float(debrief["total"]), True, False, info
        if self.steps >= self._limit:
            self.done = True
            info["reason"] = f"step limit {self._limit} reached"
            return _text(out), 0.0, False, True, info
        return _text(out), 0.0, False, False, info

    def state(self) -> dict[str, Any]:
        """The episode's bookkeeping (OpenEnv's `state`): id, seed, steps, whether it is over, the game's status."""
        status = self.play.status(deliver=False) if self.play is not None and self.play.game is not None else {}
        return {"episode_id": status.get("session_id"), "seed": self.seed, "step_count": self.steps,
                "done": self.done, "episodes": self.episodes, "status": status}

    def close(self) -> None:
        if self.play is not None:
            self.play.close()
            self.play = None

    def __enter__(self) -> IncidentEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- actions

    @staticmethod
    def _budget_spent(play: AgentPlay) -> bool:
        return play.queries_left() == 0

    @staticmethod
    def _do(play: AgentPlay, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        try:
            match name:
                case "query":
                    return play.query(str(args["sql"]))
                case "rank":
                    return play.rank(args["ranking"])
                case "pin" | "unpin":
                    act = play.pin if name == "pin" else play.unpin
                    return act(_int(args["query"]), str(args["hypothesis"]), str(args["stance"]))
                case "note":
                    return play.note(str(args["hypothesis"]), str(args["text"]))
                case "hint":
                    return play.hint()
                case "submit":
                    return play.submit(args.get("ranking"))
                case "schema":
                    return play.schema()
                case "status":
                    return play.status()
                case "briefing":
                    return play.briefing()
                case _:
                    return play.updates()
        except KeyError as exc:
            raise AgentError(f"action {name!r} needs {exc.args[0]!r}") from None


def parse_action(action: str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(action name, its arguments) from a JSON text or a mapping; AgentError when it is not one."""
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except json.JSONDecodeError as exc:
            raise AgentError(f"an action is a JSON object such as {{\"action\": \"query\", \"sql\": \"...\"}}: "
                             f"{exc.msg}") from None
    if not isinstance(action, Mapping):
        raise AgentError("an action is a JSON object with an \"action\" key")
    name = action.get("action")
    if name not in ACTIONS:
        raise AgentError(f"unknown action {str(name)[:40]!r}; actions: {', '.join(ACTIONS)}")
    return str(name), {k: v for k, v in action.items() if k != "action"}


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise AgentError(f"a query number is a whole number, got {value!r}")
    if isinstance(value, str) and value[:1] in ("Q", "q"):
        value = value[1:]
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AgentError(f"a query number is a whole number, got {value!r}") from None


def _text(value: Mapping[str, Any]) -> str:
    return json.dumps(value, default=str)
