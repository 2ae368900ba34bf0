#!/usr/bin/env bash
# tcp_ceiling: two endpoints on loopback print a rate and a bound; bad
# arguments are refused with a message and exit 2. Bounded by timeouts.
set -u
bin="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The ports are drawn at random, below the kernel's ephemeral range
# (32768-60999 by default), where the connections of tests running beside
# this one take theirs; a pair already taken all the same (bind fails and
# the peer retries connecting for 30 s) is drawn again, three times at most.
for attempt in 1 2 3; do
  port=$((20000 + RANDOM % 12000))
  eps="127.0.0.1:$port,127.0.0.1:$((port + 1))"
  timeout 60 "$bin" --endpoints "$eps" --rank 1 --bytes 1M --reps 2 >/dev/null 2>&1 &
  peer=$!
  if timeout 60 "$bin" --endpoints "$eps" --rank 0 --bytes 1M --reps 2 --ranks 4 >"$out"; then
    wait "$peer" || fail "rank 1 exited $?"
    break
  fi
  rc=$?
  kill "$peer" 2>/dev/null; wait "$peer" 2>/dev/null
  [ "$attempt" -lt 3 ] || fail "rank 0 exited $rc on three pairs of ports"
done
grep -q '^ceiling endpoints=2 ranks=4 bytes=1048576 ' "$out" || fail "no ceiling line: $(cat "$out")"
# 2 endpoints, 4 ranks: the bound is rate x (3/4) / (1/2) = 1.5 x rate.
awk '/^ceiling/ { split($7, r, "="); split($8, b, "="); d = b[2] - 1.5 * r[2]; if (d < -0.01 || d > 0.01) exit 1 }' "$out" ||
  fail "bound is not 1.5 x rate: $(grep '^ceiling' "$out")"
msg=$("$bin" --endpoints 127.0.0.1:1 --rank 0 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$msg" == *"--endpoints needs two or more HOST:PORT"* ]] || fail "one endpoint: rc $rc, '$msg'"
msg=$("$bin" --endpoints "$eps" --rank 5 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$msg" == *"--rank must be 0..1"* ]] || fail "rank 5: rc $rc, '$msg'"
msg=$("$bin" --endpoints "$eps" --rank 0 --bytes abc 2>&1); rc=$?
[ $rc -eq 2 ] && [[ "$msg" == *"bad size 'abc'"* ]] || fail "bad size abc: rc $rc, '$msg'"
echo "ok"
