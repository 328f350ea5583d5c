"""What the telemetry tables need besides the run itself: the clock origin, the hardware, evaluations,
external change-log entries, each replica's starting setup (TelemetryContext and its parts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

from engine_model.config import EngineConfig
from engine_model.profiles import GPUProfile, ModelProfile

MIB = 1024**2


@dataclass(frozen=True)
class EvalSuite:
    """Offline evaluation of one model version: task -> true score (0..1) and sample size."""

    model_version: str
    scores: dict[str, float]
    n: int = 1000
    at_s: float = 0.0


@dataclass(frozen=True)
class ExternalEvent:
    """Something outside the engines that a change log records (an unrelated deploy, a traffic note)."""

    t: float
    kind: str
    component: str
    detail: str
    replica: str = ""
    old_value: str = ""
    new_value: str = ""


@dataclass(frozen=True)
class EngineSetup:
    """What a replica starts with: model, GPU and engine config (its memory plan sizes the FB gauges)."""

    model: ModelProfile
    gpu: GPUProfile
    config: EngineConfig


@dataclass
class TelemetryContext:
    """What the tables need besides the run itself.

    `engines`: each replica's starting setup (replicas not in it use `gpu` and `gpus_per_replica`, and their
    FB gauges show the engine's own memory figure). `throttle_causes`: replica -> why its clock was throttled
    when the engine ran it slower ("thermal", the default, or "power"); the engine does not model the cause.
    `client_columns`: the requests table gets attempt and first_request_id (the incident's clients may retry;
    without them the table is as it always was). `adapter_names`: the name of LoRA adapter id i + 1 (the
    workload's adapters); when there are any, the requests table gets its adapter column and engines that
    serve adapters export vllm:lora_requests_info."""

    t0: datetime
    gpu: GPUProfile
    gpus_per_replica: int = 1
    seed: int = 0
    evals: list[EvalSuite] = field(default_factory=list)
    external_events: list[ExternalEvent] = field(default_factory=list)
    probe_app: str = "probe"
    engines: dict[str, EngineSetup] = field(default_factory=dict)
    throttle_causes: dict[str, str] = field(default_factory=dict)
    client_columns: bool = False
    adapter_names: tuple[str, ...] = ()
    # a mitigation run's incident window (seconds): its series draw the window's noise as a build of the
    # window alone does (hardware_series.replica_rng); None: the run is the window
    window_s: float | None = None

    def gpu_of(self, replica: str) -> GPUProfile:
        setup = self.engines.get(replica)
        return setup.gpu if setup is not None else self.gpu

    def gpus_of(self, replica: str) -> int:
        setup = self.engines.get(replica)
        if setup is None:
            return self.gpus_per_replica
        return setup.config.tensor_parallel_size * setup.config.pipeline_parallel_size


def timestamps(t0: datetime, seconds: np.ndarray) -> pd.Series:
    """`seconds` after t0 as timestamps (microseconds, no zone)."""
    return pd.Series(pd.Timestamp(t0) + pd.to_timedelta(np.asarray(seconds, dtype=float), unit="s")).astype(
        "datetime64[us]"
    )
