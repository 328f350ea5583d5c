"""Fan-out: run independent tasks, yield each result as it finishes, a task's failure carried back as data.

`fan_out(fn, tasks)` calls the module-level function `fn` on every picklable task somewhere else and yields
an `Outcome` per task (its index, the task, the value or the error, the seconds it took and the host it ran
on), in the order they finish. Two backends:

- **local** (the default, no Ray needed): `jobs` spawned worker processes (spawn, not fork: the caller may
  hold DuckDB connections and threads a fork would copy mid-use), each watching its parent
  (`telemetry_gen.lifeline`), so none outlives the run. `jobs` 1 runs the tasks one after the other in this
  process. A worker that dies (killed, out of memory) breaks the pool: the tasks it took down go to a fresh
  pool, up to `retries` times each.
- **Ray** (`ray=ADDRESS`; the optional extra `servedrill[ray]`): one Ray task per unit, at most `jobs` in
  flight (default: the cluster's CPUs). ADDRESS is `auto` (the cluster `ray start` or $RAY_ADDRESS names),
  `local` (a private one-machine Ray started for this run and stopped after it), `HOST:PORT` (a cluster's
  GCS) or `ray://HOST:10001` (Ray Client). This process's `SERVEDRILL_*` variables go to every task (its
  cache folder above all), and each task checks that its node runs the same telemetry code as this process
  (`telemetry_gen.cache.code_version`): a node with other code would prove other telemetry.

Bounds: `task_timeout_s` per task (counted from its dispatch; a task is dispatched only when a worker is free)
and `timeout_s` for the whole run (with `jobs` 1 locally, the tasks run in this process: only the run's bound
holds, checked between tasks). A task past its bound is stopped (its worker killed; locally the other
tasks of the pool are dispatched again in a fresh pool) and becomes an error outcome; past the run's bound
every unfinished task does. When the caller stops iterating, or an exception or SIGTERM ends the run, the
workers are killed and a Ray cluster this run started is shut down (`ray.shutdown`): no raylet is left.

A set-up problem (Ray not installed, no cluster at the address) raises `FanoutError`, whose message says what
to do; nothing else a task does raises here.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

RAY_HINT = ("install the Ray extra: pip install 'servedrill[ray]' (in a checkout: .venv/bin/pip install -e '.[ray]'), "
            "or leave out --ray to run in local processes")
CONNECT_HINT = ("start a cluster with `ray start --head` (or pass `--ray local` for a private one on this machine), "
                "or name its address: HOST:6379 or ray://HOST:10001")
RETRIES = 2
"""Times a task lost with its worker (killed, out of memory, a node gone) is run again."""
ENV_PREFIX = "SERVEDRILL_"


class FanoutError(Exception):
    """The fan-out could not start: the message says why and what to do."""


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """One task's end: `value` when it returned, else `error` (a message, with the traceback's last lines
    when the task raised). `seconds` is the task's own run time, `node` the host it ran on."""

    index: int
    task: T
    value: R | None = None
    error: str | None = None
    seconds: float = 0.0
    node: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


def describe_backend(ray: str | None, jobs: int) -> str:
    """'3 local processes' or 'Ray at auto'."""
    if ray is None:
        return f"{jobs} local process{'es' * (jobs != 1)}" if jobs > 1 else "this process"
    return f"Ray at {ray}"


def fan_out(fn: Callable[[T], R], tasks: Sequence[T], *, ray: str | None = None, jobs: int | None = None,
            task_timeout_s: float | None = None, timeout_s: float | None = None,
            retries: int = RETRIES) -> Iterator[Outcome[T, R]]:
    """Run fn(task) for every task on the chosen backend, yielding an Outcome per task as each finishes.
    `fn` and the tasks must pickle (a module-level function, or a functools.partial of one). Raises
    FanoutError only for a set-up problem (see the module's text), before any task runs."""
    if ray is not None:
        return _ray_run(fn, tasks, ray, jobs, task_timeout_s, timeout_s, retries)
    return _local_run(fn, tasks, max(1, jobs or 1), task_timeout_s, timeout_s, retries)


def _error_text(exc: BaseException) -> str:
    """The exception and the last lines of its traceback: enough to find the line, short enough for a table."""
    tail = traceback.format_exception(exc)[-4:]
    return "".join(tail).strip()[-2000:]


def _call(fn: Callable[[T], R], task: T) -> tuple[R | None, str | None, float, str]:
    """fn(task) with its failure as data: (value, error, seconds, host). Runs in the worker."""
    started = time.perf_counter()
    try:
        value, error = fn(task), None
    except Exception as exc:
        value, error = None, _error_text(exc)
    return value, error, round(time.perf_counter() - started, 3), socket.gethostname()


def _deadline(start: float, limit: float | None) -> float:
    return float("inf") if limit is None else start + limit


# ---------------------------------------------------------------- local processes


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: queued work cancelled, its worker processes killed (a running task is not waited for)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(5)


def _local_run(fn: Callable[[T], R], tasks: Sequence[T], jobs: int, task_timeout_s: float | None,
               timeout_s: float | None, retries: int) -> Iterator[Outcome[T, R]]:
    started = time.monotonic()
    run_deadline = _deadline(started, timeout_s)
    if jobs <= 1 or len(tasks) <= 1:
        # one after the other in this process (no per-task bound: nothing to kill but ourselves)
        for i, task in enumerate(tasks):
            if time.monotonic() > run_deadline:
                yield Outcome(i, task, error=f"not run: the run's limit of {timeout_s:g} s passed")
                continue
            value, error, seconds, host = _call(fn, task)
            yield Outcome(i, task, value, error, seconds, host)
        return
    from telemetry_gen.lifeline import watch_parent

    context = multiprocessing.get_context("spawn")
    pending = list(range(len(tasks)))
    attempts = [0] * len(tasks)
    pool: ProcessPoolExecutor | None = None
    running: dict[Future[tuple[R | None, str | None, float, str]], tuple[int, float]] = {}
    try:
        while pending or running:
            if pool is None:
                pool = ProcessPoolExecutor(max_workers=min(jobs, len(pending) + len(running)), mp_context=context,
                                           initializer=watch_parent)
            while pending and len(running) < jobs:
                i = pending.pop(0)
                running[pool.submit(_call, fn, tasks[i])] = (i, time.monotonic())
            now = time.monotonic()
            if now > run_deadline:
                for i in sorted([i for i, _ in running.values()] + pending):
                    yield Outcome(i, tasks[i], error=f"not finished: the run's limit of {timeout_s:g} s passed")
                return
            soonest = min([run_deadline] + [_deadline(t0, task_timeout_s) for _, t0 in running.values()])
            done, _ = wait(list(running), timeout=None if soonest == float("inf") else max(0.0, soonest - now),
                           return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                i, _ = running.pop(future)
                try:
                    value, error, seconds, host = future.result()
                except BrokenProcessPool as exc:
                    broken = True
                    attempts[i] += 1
                    if attempts[i] <= retries:
                        pending.insert(0, i)
                        continue
                    yield Outcome(i, tasks[i], error=f"its worker process died {attempts[i]} times: {exc!r}")
                    continue
                except Exception as exc:  # the task or its result did not pickle
                    yield Outcome(i, tasks[i], error=_error_text(exc))
                    continue
                yield Outcome(i, tasks[i], value, error, seconds, host)
            now = time.monotonic()
            late = [(f, i) for f, (i, t0) in running.items() if now > _deadline(t0, task_timeout_s)]
            if late or broken:
                # a late task cannot be stopped alone in a process pool: stop the pool, send the rest again
                _kill_pool(pool)
                pool = None
                for f, i in late:
                    del running[f]
                    yield Outcome(i, tasks[i], error=f"timed out: still running after {task_timeout_s:g} s",
                                  seconds=round(now - started, 3))
                pending[:0] = sorted(i for i, _ in running.values())
                running.clear()
    finally:
        if pool is not None and running:
            _kill_pool(pool)  # stopped early (the caller broke off, an exception, SIGTERM): nothing waits for them
        elif pool is not None:
            pool.shutdown(wait=True)  # every task is done: the idle workers exit as usual


# ---------------------------------------------------------------- Ray


def import_ray() -> Any:
    try:
        ray = importlib.import_module("ray")
    except ImportError as exc:
        raise FanoutError(f"--ray needs Ray, which is not installed in this Python ({exc}); {RAY_HINT}") from None
    return ray


def ray_available() -> bool:
    """Whether Ray imports here (the optional extra is installed)."""
    try:
        import_ray()
    except FanoutError:
        return False
    return True


def forwarded_env() -> dict[str, str]:
    """This process's SERVEDRILL_* variables, which every Ray task gets (the cache folder above all)."""
    return {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}


def _ray_call(fn: Callable[[T], R], task: T, cwd: str, code: str) -> tuple[R | None, str | None, float, str]:
    """A Ray task: in the driver's working folder when this node has it (relative incident paths then mean
    the same), refused when this node's telemetry code differs from the driver's. Its node is host/Ray node id."""
    from telemetry_gen.cache import code_version

    if os.path.isdir(cwd):
        os.chdir(cwd)
    mine = code_version()
    ray = importlib.import_module("ray")
    node = f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:12]}"
    if mine != code:
        return (None, f"node {socket.gethostname()} runs telemetry code {mine}, the driver {code}: install the "
                "same servedrill commit on every node", 0.0, node)
    value, error, seconds, _ = _call(fn, task)
    return value, error, seconds, node


@contextlib.contextmanager
def _sigterm_ends_run() -> Iterator[None]:
    """While the run lasts, SIGTERM raises SystemExit in the main thread, so the run's cleanup (cancelling the
    tasks, shutting down a cluster it started) happens; restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def connect(ray: Any, address: str, jobs: int | None) -> bool:
    """Connect this process to Ray at `address` (`local`: start a private cluster); True when this call
    connected (the run must then `ray.shutdown()`, which also stops a cluster it started), False when the
    caller was already connected (theirs to end). Raises FanoutError with a hint when there is nothing there."""
    if ray.is_initialized():
        return False
    env = {"env_vars": forwarded_env()}
    try:
        if address == "local":
            ray.init(num_cpus=jobs or None, include_dashboard=False, runtime_env=env, log_to_driver=False,
                     logging_level="WARNING", configure_logging=False)
            return True
        ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level="WARNING",
                 configure_logging=False)
        return True
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise FanoutError(f"cannot reach a Ray cluster at {address!r}: {first}; {CONNECT_HINT}") from None


def _ray_run(fn: Callable[[T], R], tasks: Sequence[T], address: str, jobs: int | None,
             task_timeout_s: float | None, timeout_s: float | None, retries: int) -> Iterator[Outcome[T, R]]:
    ray = import_ray()
    if not address.strip():
        raise FanoutError(f"--ray needs an address; {CONNECT_HINT}")
    return _ray_outcomes(ray, fn, tasks, address, jobs, task_timeout_s, timeout_s, retries)


def _ray_outcomes(ray: Any, fn: Callable[[T], R], tasks: Sequence[T], address: str, jobs: int | None,
                  task_timeout_s: float | None, timeout_s: float | None,
                  retries: int) -> Iterator[Outcome[T, R]]:
    from telemetry_gen.cache import code_version

    with _sigterm_ends_run():
        owned = connect(ray, address, jobs)
        running: dict[Any, tuple[int, float]] = {}
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            if cpus < 1:
                raise FanoutError(f"the Ray cluster at {address!r} has no CPUs to run tasks on; {CONNECT_HINT}")
            width = jobs or cpus
            remote = ray.remote(num_cpus=1, max_retries=retries)(_ray_call)
            fn_ref = ray.put(fn)
            cwd, code = os.getcwd(), code_version()
            started = time.monotonic()
            run_deadline = _deadline(started, timeout_s)
            pending = list(range(len(tasks)))
            while pending or running:
                while pending and len(running) < width:
                    i = pending.pop(0)
                    running[remote.remote(fn_ref, tasks[i], cwd, code)] = (i, time.monotonic())
                now = time.monotonic()
                if now > run_deadline:
                    for i in sorted([i for i, _ in running.values()] + pending):
                        yield Outcome(i, tasks[i], error=f"not finished: the run's limit of {timeout_s:g} s passed")
                    return
                soonest = min([run_deadline] + [_deadline(t0, task_timeout_s) for _, t0 in running.values()])
                wait_s = None if soonest == float("inf") else max(0.0, soonest - now)
                done, _ = ray.wait(list(running), num_returns=1, timeout=wait_s)
                for ref in done:
                    i, t0 = running.pop(ref)
                    try:
                        value, error, seconds, host = ray.get(ref)
                    except Exception as exc:  # the worker or its node died past the retries, or unpickling failed
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                        yield Outcome(i, tasks[i], error=f"the Ray task failed: {first}",
                                      seconds=round(time.monotonic() - t0, 3))
                        continue
                    yield Outcome(i, tasks[i], value, error, seconds, host)
                now = time.monotonic()
                for ref, (i, t0) in list(running.items()):
                    if now > _deadline(t0, task_timeout_s):
                        del running[ref]
                        with contextlib.suppress(Exception):
                            ray.cancel(ref, force=True)
                        yield Outcome(i, tasks[i], error=f"timed out: still running after {task_timeout_s:g} s",
                                      seconds=round(now - t0, 3))
        finally:
            for ref in running:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if owned:
                with contextlib.suppress(Exception):
                    ray.shutdown()
