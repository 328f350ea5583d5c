"""`--ray ADDRESS`: the option every command that fans out independent simulations takes (validate --deep,
bench fidelity, autoplay sweeps, eval), and its check: without Ray installed it fails at once with one line
and the install hint, before anything is simulated (telemetry_gen.fanout says what the addresses mean)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

RAY_HELP = ("Run the independent simulations as Ray tasks on the cluster at ADDRESS: auto (the running "
            "cluster, or $RAY_ADDRESS), local (a private Ray on this machine for this run), HOST:6379 or "
            "ray://HOST:10001. Needs the extra: pip install 'servedrill[ray]'. Default: local processes.")


def ray_option(fn: F) -> F:
    """The `--ray ADDRESS` option, passed to the command as `ray` (None: local processes)."""
    return click.option("--ray", "ray", default=None, metavar="ADDRESS", help=RAY_HELP)(fn)


def require_ray(address: str | None) -> None:
    """Fail the command with the install hint when --ray was given and Ray does not import here."""
    if address is None:
        return
    from game.api.fanout import CONNECT_HINT, FanoutError, import_ray
    from game.cli.core import CommandError  # here: game.cli.core imports this module for the option

    if not address.strip():
        raise CommandError(f"--ray needs an address; {CONNECT_HINT}")
    try:
        import_ray()
    except FanoutError as exc:
        raise CommandError(str(exc)) from None
