#!/usr/bin/env bash
# Emulated hosts on this machine, by hand (docs/hosts.md): N hosts, each its
# own network, UTS, PID, IPC and mount namespaces with a private /dev/shm,
# joined by one bridge in a namespace of its own. The machine's interfaces
# are never touched. The tests use tests/integration/hosts.py, the same
# layout in Python, which also cleans up after a killed test.
#
#   scripts/hosts.sh up N            start host0..host(N-1), 10.77.0.1..N
#   scripts/hosts.sh exec I CMD...   run CMD on host I (this directory)
#   scripts/hosts.sh list            the hosts, their pids and addresses
#   scripts/hosts.sh link I up|down  host I's cable, at the bridge
#   scripts/hosts.sh mtu I BYTES     host I's MTU (both ends of its cable)
#   scripts/hosts.sh drop I PERCENT  drop that share of host I's packets (0: none)
#   scripts/hosts.sh down            stop everything, remove everything
#
# COHORT_HOSTS_NAME (default "cohort") names the cluster, so several can
# exist; COHORT_HOSTS_SUBNET (default 10.77.0.0/24) is its network. The
# namespaces are also named in /run/netns (NAME-br, NAME-h0, ...) for
# `ip netns exec`. Needs root, iproute2 and util-linux; nftables for drop.
set -euo pipefail

name="${COHORT_HOSTS_NAME:-cohort}"
subnet="${COHORT_HOSTS_SUBNET:-10.77.0.0/24}"
state="/run/cohort-hosts/$name"

die() { echo "hosts.sh: $*" >&2; exit 2; }
usage() { sed -n '8,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ "$name" =~ ^[A-Za-z0-9_-]{1,20}$ ]] ||
  die "COHORT_HOSTS_NAME='$name': 1 to 20 letters, digits, '-' or '_'"
[[ "$subnet" =~ ^(10\.[0-9]{1,3}|192\.168|172\.(1[6-9]|2[0-9]|3[01]))\.[0-9]{1,3}\.0/24$ ]] ||
  die "COHORT_HOSTS_SUBNET='$subnet': a private /24 network written A.B.C.0/24, such as 10.77.0.0/24"
base="${subnet%.0/24}"

need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (namespaces, veths, a bridge)"; }
index() {  # index ARG: a host number of the running cluster
  [[ "$1" =~ ^[0-9]+$ ]] || die "'$1' is not a host number"
  [ -f "$state/host$1.pid" ] || die "no host $1 in cluster '$name' (see: $0 list)"
  echo "$1"
}
host_pid() { cat "$state/host$1.pid"; }
in_net() { local pid="$1"; shift; nsenter -t "$pid" -n -- "$@"; }

up() {
  need_root "up"
  local n="${1:-}"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up N: N is a number of hosts from 1 to 200, got '${n}'"
  [ ! -e "$state" ] || die "cluster '$name' is already up ($state); run '$0 down' first"
  mkdir -p "$state"
  trap 'echo "hosts.sh: up failed; cleaning up" >&2; down >/dev/null 2>&1 || true' ERR
  # The switch's namespace, held by a sleep; setsid so it outlives this shell.
  setsid unshare --net -- sleep infinity </dev/null >/dev/null 2>&1 &
  echo $! > "$state/bridge.pid"
  local br; br=$(cat "$state/bridge.pid")
  wait_ns "$br"
  ip netns attach "$name-br" "$br"
  in_net "$br" ip link set lo up
  in_net "$br" ip link add br0 type bridge
  in_net "$br" ip link set br0 up
  for ((i = 0; i < n; i++)); do
    setsid unshare --net --uts --ipc --mount --pid --fork --mount-proc --kill-child=SIGKILL -- \
      sh -c "mount -t tmpfs -o size=512m,mode=1777 cohort-host$i /dev/shm && mount -t sysfs cohort-host$i /sys && hostname host$i && exec sleep infinity" \
      </dev/null >/dev/null 2>&1 &
    echo $! > "$state/unshare$i.pid"
    local init=""
    for _ in $(seq 100); do
      init=$(cat "/proc/$!/task/$!/children" 2>/dev/null | awk '{print $1}')
      [ -n "$init" ] && [ "$(readlink /proc/$init/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
      init=""; sleep 0.05
    done
    [ -n "$init" ] || { echo "hosts.sh: host$i's init did not start" >&2; false; }
    echo "$init" > "$state/host$i.pid"
    ip netns attach "$name-h$i" "$init"
    in_net "$init" ip link set lo up
    in_net "$br" ip link add "h${i}n0" type veth peer name eth0 netns "$init"
    in_net "$br" ip link set "h${i}n0" master br0 up
    in_net "$init" ip addr add "$base.$((i + 1))/24" dev eth0
    in_net "$init" ip link set eth0 up
  done
  trap - ERR
  echo "up: $n hosts in cluster '$name' on $subnet"
  list
}

wait_ns() {  # until pid $1 is in a namespace of its own
  for _ in $(seq 100); do
    [ -e "/proc/$1/ns/net" ] && [ "$(readlink /proc/$1/ns/net)" != "$(readlink /proc/self/ns/net)" ] && return 0
    sleep 0.05
  done
  echo "hosts.sh: pid $1 never entered its namespace" >&2
  return 1
}

down() {
  need_root "down"
  [ -d "$state" ] || { echo "down: no cluster '$name'"; return 0; }
  for f in "$state"/unshare*.pid "$state"/bridge.pid; do
    [ -f "$f" ] || continue
    kill -KILL "$(cat "$f")" 2>/dev/null || true  # unshare's --kill-child takes its host along
  done
  for f in "$state"/host*.pid; do
    [ -f "$f" ] || continue
    kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(br|h[0-9]+)$" |
    while read -r ns; do ip netns delete "$ns" 2>/dev/null || true; done
  rm -rf "$state"
  echo "down: cluster '$name' removed"
}

list() {
  [ -d "$state" ] || { echo "no cluster '$name'"; return 0; }
  printf '%-8s %-8s %-16s %s\n' HOST PID ADDRESS STATE
  for f in $(ls "$state"/host*.pid 2>/dev/null | sort -V); do
    local i pid alive
    i=$(basename "$f" .pid); i=${i#host}
    pid=$(cat "$f")
    alive=down; kill -0 "$pid" 2>/dev/null && alive=up
    printf '%-8s %-8s %-16s %s\n' "host$i" "$pid" "$base.$((i + 1))" "$alive"
  done
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  up) [ $# -eq 1 ] || die "usage: $0 up N"; up "$1" ;;
  down) [ $# -eq 0 ] || die "usage: $0 down"; down ;;
  list) list ;;
  exec)
    [ $# -ge 2 ] || die "usage: $0 exec I CMD [ARG...]"
    need_root "exec"
    i=$(index "$1"); shift
    exec nsenter -t "$(host_pid "$i")" -n -u -i -m -p --wd="$PWD" -- "$@" ;;
  link)
    [ $# -eq 2 ] && [[ "$2" =~ ^(up|down)$ ]] || die "usage: $0 link I up|down"
    need_root "link"
    i=$(index "$1")
    in_net "$(cat "$state/bridge.pid")" ip link set "h${i}n0" "$2" ;;
  mtu)
    [ $# -eq 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge 68 ] && [ "$2" -le 65535 ] ||
      die "usage: $0 mtu I BYTES (68..65535)"
    need_root "mtu"
    i=$(index "$1")
    in_net "$(host_pid "$i")" ip link set eth0 mtu "$2"
    in_net "$(cat "$state/bridge.pid")" ip link set "h${i}n0" mtu "$2" ;;
  drop)
    [ $# -eq 2 ] && [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -le 100 ] || die "usage: $0 drop I PERCENT (0..100)"
    need_root "drop"
    command -v nft >/dev/null || die "drop needs nftables (nft); scripts/deps.sh installs it"
    i=$(index "$1")
    pid=$(host_pid "$i")
    in_net "$pid" nft delete table inet cohort_drop 2>/dev/null || true
    verdict="numgen random mod 100 < $2 drop"
    [ "$2" -lt 100 ] || verdict="drop"
    if [ "$2" -gt 0 ]; then
      in_net "$pid" nft -f - <<EOF
table inet cohort_drop {
  chain in { type filter hook input priority 0; iifname "lo" accept; $verdict; }
  chain out { type filter hook output priority 0; oifname "lo" accept; $verdict; }
}
EOF
    fi ;;
  ""|-h|--help|help) usage ;;
  *) die "unknown command '$cmd' (up, down, exec, list, link, mtu, drop)" ;;
esac
