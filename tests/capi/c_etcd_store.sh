#!/usr/bin/env bash
# Starts a one-member etcd on free loopback ports in a temporary folder, runs
# the C program given as $1 against etcd://.../cohort/ctest/0, and cleans up.
set -euo pipefail
program=$1
dir=$(mktemp -d /tmp/cohort-etcd-c-XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
free_ports() {
  /usr/bin/python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])'
}
for attempt in 1 2 3; do
  read -r client peer < <(free_ports)
  etcd --name=m0 --data-dir="$dir/m0" \
    --listen-client-urls="http://127.0.0.1:$client" --advertise-client-urls="http://127.0.0.1:$client" \
    --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="m0=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
  pid=$!
  for _ in $(seq 150); do
    if ETCDCTL_API=3 etcdctl --dial-timeout=1s --endpoints="http://127.0.0.1:$client" endpoint health >/dev/null 2>&1; then
      "$program" "etcd://127.0.0.1:$client/cohort/ctest/0"
      exit $?
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=
  rm -rf "$dir/m0"
done
echo "etcd did not start; its log:" >&2
cat "$dir/etcd.log" >&2
exit 1
