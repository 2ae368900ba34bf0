#!/usr/bin/env bash
# mpirun's remote shell onto emulated hosts (run_hosts_allreduce.py passes
# it as --mca plm_rsh_agent): "netns_rsh.sh hostI CMD..." runs CMD in all of
# host I's namespaces, as ssh would on a real host. COHORT_HOST_PIDS lists
# the hosts' init pids, host0's first (pids of this machine's PID namespace,
# so mpirun itself runs in host0's network namespace only).
set -euo pipefail
host="${1:-}"
shift || true
i="${host#host}"
read -r -a pids <<< "${COHORT_HOST_PIDS:-}"
if ! [[ "$i" =~ ^[0-9]+$ ]] || [ "$i" -ge "${#pids[@]}" ] || [ $# -eq 0 ]; then
  echo "netns_rsh: cannot run '$*' on '$host': expected hostI with I below ${#pids[@]} (COHORT_HOST_PIDS='${COHORT_HOST_PIDS:-}') and a command" >&2
  exit 2
fi
exec nsenter -t "${pids[$i]}" -n -u -i -m -p --wd="$PWD" -- /bin/sh -c "$*"
