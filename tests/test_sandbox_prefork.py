"""A query worker forked ahead (game.query.sandbox.prefork): a served tab's warm process forks it before it
hears its tab, and the tab's first gateway uses it instead of starting an interpreter. It must be the
same worker as a started one (read-only, no files, limits enforced from outside), hold nothing of its
parent's, and end with its parent.

Each case runs in a fresh interpreter: prefork refuses a process with more than one thread, and a pytest
worker has several."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from incidents.loader import load_incident
from telemetry_gen.cache import ensure_database

DATA = Path(__file__).parent / "data" / "incidents"
ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, os, sys, threading
from pathlib import Path
from game.query import sandbox
db, mode = sys.argv[1], sys.argv[2]
if mode == "nofork":
    def refuse():
        raise BlockingIOError(11, "Resource temporarily unavailable")
    os.fork = refuse
    out = {"forked": sandbox.prefork()}
    with sandbox.Gateway(Path(db), timeout_s=2.0) as gw:
        out["count"] = gw.run("SELECT count(*) FROM requests").rows
        out["cmdline"] = open(f"/proc/{gw._proc.pid}/cmdline").read().replace("\\0", " ")
    print(json.dumps(out), flush=True)
    os._exit(0)
out = {"forked": sandbox.prefork()}
if mode == "threaded":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    out["forked_threaded"] = sandbox.prefork()
    print(json.dumps(out), flush=True)
    os._exit(0)
owner, seed, conn = sandbox._seed
out["seed"] = seed.pid
if mode == "exit":
    print(json.dumps(out), flush=True)
    os._exit(0)
if mode == "killed":
    os.kill(seed.pid, 9)
    seed.wait(5)
if mode == "close":
    with sandbox.Gateway(Path(db), timeout_s=2.0) as gw:
        out["count"] = gw.run("SELECT count(*) FROM requests").rows
    out["worker"] = seed.pid
    out["reaped"] = seed.returncode
    print(json.dumps(out), flush=True)
    os._exit(0)
with sandbox.Gateway(Path(db), timeout_s=2.0) as gw:
    pid = gw._proc.pid
    out.update(worker=pid, sid=os.getsid(pid), cmdline=open(f"/proc/{pid}/cmdline").read().replace("\\0", " "),
               fds=sorted(os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")))
    out["count"] = gw.run("SELECT count(*) FROM requests").rows
    out["write"] = gw.run("CREATE TABLE x AS SELECT 1").error_kind
    out["file"] = gw.run("SELECT * FROM read_csv('/etc/passwd')").error_kind
    out["runaway"] = gw.run("SELECT count(*) FROM (SELECT unnest(range(1000000000)))").error_kind
    out["next"] = gw.run("SELECT 42").rows
    out["next_worker"] = gw._proc.pid
print(json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SERVEDRILL_CACHE", str(tmp_path_factory.mktemp("cache")))
        return Path(ensure_database(load_incident(DATA / "tui-mini.yaml"), 0).path)


def probe(db: Path, mode: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(db), mode], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_first_gateway_uses_the_forked_worker_with_every_limit_of_a_started_one(db: Path) -> None:
    got = probe(db, "use")
    assert got["forked"] and got["worker"] == got["seed"]
    assert "game.query.sandbox" not in got["cmdline"]  # no interpreter was started for it
    assert got["sid"] == got["worker"]  # a session of its own, as a started worker's
    # nothing of its parent's: stdio on /dev/null, its socket, the database it was handed
    assert [f for f in got["fds"] if f not in ("/dev/null", str(db)) and not f.startswith("socket:")] == []
    assert got["count"][0][0] > 0
    assert got["write"] == "refused" and got["file"] == "refused"
    # a runaway query is stopped from outside, and the next query gets a started worker
    assert got["runaway"] in ("memory", "timeout")
    assert got["next"] == [[42]] and got["next_worker"] != got["worker"]


def test_a_closed_gateway_ends_its_forked_worker_and_collects_it(db: Path) -> None:
    got = probe(db, "close")
    assert got["count"][0][0] > 0 and got["reaped"] is not None  # waited for: no zombie left
    assert not alive(got["worker"])


def test_a_dead_forked_worker_is_replaced_by_a_started_one(db: Path) -> None:
    got = probe(db, "killed")
    assert got["worker"] != got["seed"] and "game.query.sandbox" in got["cmdline"]
    assert got["count"][0][0] > 0


def test_a_fork_that_fails_leaves_the_usual_start(db: Path) -> None:
    got = probe(db, "nofork")
    assert got["forked"] is False and "game.query.sandbox" in got["cmdline"] and got["count"][0][0] > 0


def test_a_process_with_threads_forks_no_worker(db: Path) -> None:
    got = probe(db, "threaded")
    assert got["forked"] is True and got["forked_threaded"] is False


def test_an_unused_forked_worker_ends_with_its_parent(db: Path) -> None:
    got = probe(db, "exit")
    deadline = time.monotonic() + 60  # a hang guard: its socket closes with the parent, the lifeline backs it
    while alive(got["seed"]):
        assert time.monotonic() < deadline, f"the forked worker {got['seed']} outlived its parent"
        time.sleep(0.05)
