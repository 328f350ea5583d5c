#!/usr/bin/env bash
# Two `servedrill serve` processes on this machine, standing in for two hosts that share storage, behind
# nginx (tools/multihost/nginx.conf) at http://127.0.0.1:8080. docs/gameday.md, "More players: several
# hosts", says what is shared, what each host keeps to itself, and what does and does not work.
#
#   tools/multihost/two_hosts.sh SHARED_DIR [SERVE OPTIONS...]
#
# SHARED_DIR stands for the shared mount: SHARED_DIR/data is both hosts' SERVEDRILL_DATA (the journals)
# unless SERVEDRILL_DATA is set, and SHARED_DIR/gm.key their interviewer key (send and broadcast reach
# games on either host) unless SERVEDRILL_GM_KEY_FILE is set. SERVE OPTIONS go to both hosts, e.g.
#   --gameday /home/facilitator/day/gameday.yaml     (the plan's data: and results: inside SHARED_DIR)
#   --incidents tests/data/incidents/tui-mini.yaml --player demo
# Each host gets a cache of its own (hosts have local disks; prepare each one), unless SERVEDRILL_CACHE
# is set. Needs nginx on PATH (apt-get install nginx-light). ctrl+c stops all three.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
shared=${1:?usage: two_hosts.sh SHARED_DIR [SERVE OPTIONS...]}
shift
shared=$(mkdir -p "$shared" && cd "$shared" && pwd)
work=$(mktemp -d -t servedrill-hosts-XXXXXX)
mkdir -p "$work/nginx/tmp"
export SERVEDRILL_DATA=${SERVEDRILL_DATA:-$shared/data}
export SERVEDRILL_GM_KEY_FILE=${SERVEDRILL_GM_KEY_FILE:-$shared/gm.key}
command -v nginx >/dev/null || { echo "two_hosts.sh: nginx is not on PATH (apt-get install nginx-light)" >&2; exit 1; }

pids=()
stop() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 0' INT TERM

for host in a:8101 b:8102; do
    name=${host%%:*} port=${host##*:}
    mkdir -p "$work/host-$name"
    (cd "$repo" && SERVEDRILL_CACHE=${SERVEDRILL_CACHE:-$work/host-$name/cache} \
        exec "$python" -m tui.cli serve --port "$port" "$@") > "$work/host-$name/serve.log" 2>&1 &
    pids+=($!)
done
nginx -p "$work/nginx/" -c "$here/nginx.conf" &
pids+=($!)
echo "two_hosts: host a on 127.0.0.1:8101, host b on 127.0.0.1:8102, behind http://127.0.0.1:8080"
echo "two_hosts: journals in $SERVEDRILL_DATA; logs in $work (host-a/serve.log, host-b/serve.log, nginx/)"
wait -n "${pids[@]}" || true
echo "two_hosts: a process ended; stopping the others (logs in $work)" >&2
