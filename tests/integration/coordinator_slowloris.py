#!/usr/bin/env python3
"""The coordinator under a 5,000-connection slowloris still answers.

Starts cohort-coordinator with an open-file limit of 1024, soft and hard (the
common soft limit, where 1,015 idle connections used to silence it; with the
hard limit at 1024 too, raising the soft one gains nothing). An attacker, a
process of its own (this script with --attack), holds 5,000 connections from
127.0.0.2..127.0.0.21 (250 each), each sending a request header a byte at a
time, about one byte a second per connection, and opening a new one whenever
the coordinator closes one. Meanwhile a client on 127.0.0.1 asks for
/metrics twice a second. Cases:

  slowloris    default limits (896 connections, 224 per address): every
               request is answered within a few seconds; /metrics counts the
               per-client refusals and the idle connections shed; stderr
               names the refused addresses, in a bounded number of lines
  descriptors  --max-connections 4000, above what 1024 descriptors allow:
               accept fails with EMFILE, the longest idle connections are
               closed to make room, and every request is still answered
  bad_flags    bad values of the new flags exit 2 naming the flag

    coordinator_slowloris.py --coordinator PATH CASE [CASE...]

Every socket and process is closed or killed at the end of a case; a
watchdog kills them and fails the case when it overruns. Standard library
only; connections go to 127.0.0.1 only.
"""

import argparse
import errno
import http.client
import json
import os
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CASE_DEADLINE_S = 150.0
ATTACK_S = 20.0
SOCKETS = 5000
SOURCES = [f"127.0.0.{i}" for i in range(2, 22)]
COORDINATOR_FDS = 1024
ANSWER_WITHIN_S = 5.0     # the client's bound on one answer, retries included
REOPEN_PER_PASS = 250     # the attacker's new connections per 0.1 s pass


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


# ------------------------------------------------------------------ attacker

def attack(port, seconds, count):
    """Runs in its own process: holds `count` slow connections for `seconds`,
    then prints one JSON line of figures."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        print(json.dumps({"error": f"the open-file hard limit {hard} is below the {want} this attack needs"}))
        return 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    header = b"GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    trickle = b"X-Slow: y\r\n"
    socks = [None] * count
    sent = [0] * count
    poller = select.poll()
    by_fd = {}
    figures = {"opened": 0, "closed_by_server": 0, "connect_errors": 0, "most_open": 0}
    per_source = max(1, count // len(SOURCES))

    def open_one(i):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((SOURCES[min(i // per_source, len(SOURCES) - 1)], 0))
            rc = s.connect_ex(("127.0.0.1", port))
        except OSError:
            s.close()
            figures["connect_errors"] += 1
            return
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            figures["connect_errors"] += 1
            return
        socks[i], sent[i] = s, 0
        by_fd[s.fileno()] = i
        poller.register(s.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
        figures["opened"] += 1

    def drop(i):
        s = socks[i]
        poller.unregister(s.fileno())
        del by_fd[s.fileno()]
        s.close()
        socks[i] = None

    for i in range(count):
        open_one(i)
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    turn = 0
    while time.monotonic() < deadline:
        # Closed by the coordinator (a 503, or just the end): drop it.
        for fd, _ in poller.poll(0):
            i = by_fd.get(fd)
            if i is None:
                continue
            try:
                data = socks[i].recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                drop(i)
                figures["closed_by_server"] += 1
        # A tenth of them send their next byte: about a byte a second each.
        for i in range(turn % 10, count, 10):
            s = socks[i]
            if s is None:
                continue
            n = sent[i]
            byte = header[n:n + 1] if n < len(header) else trickle[(n - len(header)) % len(trickle):][:1]
            try:
                if s.send(byte):
                    sent[i] += 1
            except BlockingIOError:
                pass
            except OSError:
                drop(i)
                figures["closed_by_server"] += 1
        turn += 1
        reopened = 0
        for i in range(count):
            if reopened >= REOPEN_PER_PASS:
                break
            if socks[i] is None:
                open_one(i)
                reopened += 1
        figures["most_open"] = max(figures["most_open"], len(by_fd))
        time.sleep(0.1)
    for i in range(count):
        if socks[i] is not None:
            drop(i)
    print(json.dumps(figures), flush=True)
    return 0


# --------------------------------------------------------------------- cases

class Run:
    """What a case started: closed and killed by finish(), whatever happens."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.procs = []
        self.files = []

    def start(self, argv, stdout=subprocess.PIPE, stderr_name=None, preexec_fn=None):
        err = subprocess.DEVNULL
        if stderr_name is not None:
            err = open(os.path.join(self.workdir, stderr_name), "wb")
            self.files.append(err)
        p = subprocess.Popen(argv, stdout=stdout, stderr=err, preexec_fn=preexec_fn)
        self.procs.append(p)
        return p

    def text(self, name):
        with open(os.path.join(self.workdir, name), "rb") as f:
            return f.read().decode(errors="replace")

    def finish(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stdout:
                p.stdout.close()
        for f in self.files:
            f.close()


def few_descriptors():
    resource.setrlimit(resource.RLIMIT_NOFILE, (COORDINATOR_FDS, COORDINATOR_FDS))


def start_coordinator(run, exe, extra):
    p = run.start([exe, "--port", "0"] + extra, stderr_name="coordinator.stderr", preexec_fn=few_descriptors)
    url = p.stdout.readline().decode().strip()
    check(url.startswith("http://"), f"the coordinator did not start: {run.text('coordinator.stderr')}")
    return int(url.rsplit(":", 1)[1])


def get(port, path, timeout):
    """(status, body) from 127.0.0.1 on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


def answered(port, path):
    """Seconds until `path` is answered 200, retrying a refused or reset
    connection or a 503 as any client would; None past ANSWER_WITHIN_S."""
    start = time.monotonic()
    while time.monotonic() - start < ANSWER_WITHIN_S:
        left = ANSWER_WITHIN_S - (time.monotonic() - start)
        try:
            status, _ = get(port, path, timeout=max(0.1, left))
            if status == 200:
                return time.monotonic() - start
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    return None


def metric(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def under_attack(exe, extra, workdir):
    """Runs the attack against a coordinator started with `extra` flags while
    a client asks for /metrics; returns (latencies, failures, metrics text,
    attacker figures, stderr)."""
    run = Run(workdir)
    try:
        port = start_coordinator(run, exe, extra)
        attacker = run.start([sys.executable, os.path.abspath(__file__), "--attack", str(port),
                              str(ATTACK_S), str(SOCKETS)])
        line = attacker.stdout.readline().decode().strip()
        check(line == "ready", f"the attacker did not start: {line!r}")
        latencies, failures = [], 0
        end = time.monotonic() + ATTACK_S - 2.0
        while time.monotonic() < end:
            took = answered(port, "/metrics")
            if took is None:
                failures += 1
            else:
                latencies.append(took)
            time.sleep(0.5)
        status, metrics = get(port, "/metrics", timeout=10)
        check(status == 200, f"/metrics after the attack: {status}")
        figures = json.loads(attacker.stdout.readline().decode() or "{}")
        check(attacker.wait(timeout=30) == 0, f"the attacker failed: {figures}")
        check("error" not in figures, f"the attacker: {figures.get('error')}")
        return latencies, failures, metrics, figures, run.text("coordinator.stderr")
    finally:
        run.finish()


def report(latencies, failures, figures):
    ordered = sorted(latencies)
    print(f"answers {len(latencies)}, unanswered within {ANSWER_WITHIN_S} s: {failures}; "
          f"latency median {statistics.median(ordered) * 1000:.0f} ms, "
          f"max {ordered[-1] * 1000:.0f} ms; attacker {figures}" if ordered else "no answers")


def case_slowloris(exe, workdir):
    latencies, failures, metrics, figures, stderr = under_attack(exe, [], workdir)
    report(latencies, failures, figures)
    check(figures.get("opened", 0) >= SOCKETS, f"the attack opened too few connections: {figures}")
    check(failures == 0 and len(latencies) >= 10,
          f"{failures} requests unanswered within {ANSWER_WITHIN_S} s, {len(latencies)} answered")
    check(metric(metrics, "cohort_coordinator_connections_max") == COORDINATOR_FDS - 128, metrics)
    check(metric(metrics, "cohort_coordinator_connections_per_client_max") == (COORDINATOR_FDS - 128) // 4, metrics)
    per_client = metric(metrics, 'cohort_coordinator_connections_refused_total{reason="per_client"}')
    check(per_client and per_client > 0, f"no per-client refusal counted:\n{metrics}")
    shed = (metric(metrics, 'cohort_coordinator_connections_shed_total{reason="crowded_idle"}') or 0) + \
        (metric(metrics, 'cohort_coordinator_connections_shed_total{reason="displaced"}') or 0)
    check(shed > 0, f"no idle connection shed:\n{metrics}")
    check("refused a connection from 127.0.0." in stderr, f"no refusal logged:\n{stderr[-2000:]}")
    lines = stderr.count("\n")
    check(lines <= 4 * (ATTACK_S / 5 + 2) + 2, f"{lines} lines on stderr: not rate-limited?\n{stderr[-3000:]}")


def case_descriptors(exe, workdir):
    latencies, failures, metrics, figures, stderr = under_attack(exe, ["--max-connections", "4000"], workdir)
    report(latencies, failures, figures)
    check(failures == 0 and len(latencies) >= 10,
          f"{failures} requests unanswered within {ANSWER_WITHIN_S} s, {len(latencies)} answered")
    check("out of file descriptors" in stderr, f"EMFILE was not logged:\n{stderr[-2000:]}")
    displaced = metric(metrics, 'cohort_coordinator_connections_shed_total{reason="displaced"}')
    check(displaced and displaced > 0, f"no idle connection closed to make room:\n{metrics}")


def case_bad_flags(exe, workdir):
    for flag, value, says in [
        ("--max-connections", "0", "--max-connections: expected a whole number of connections, at least 1, got '0'"),
        ("--max-connections", "many", "--max-connections: expected a whole number"),
        ("--max-connections-per-client", "-3", "--max-connections-per-client: expected a whole number"),
        ("--max-members", "lots", "--max-members: expected a whole number (0: no cap), got 'lots'"),
        ("--idle-timeout", "0", "--idle-timeout: expected seconds, from 0.001 to a year, got '0'"),
        ("--crowded-idle-timeout", "soon", "--crowded-idle-timeout: expected seconds"),
        # The replica flags (docs/coordinator.md, "High availability").
        ("--leader-ttl", "0", "--leader-ttl: expected whole seconds, 1 to 3600"),
        ("--leader-ttl", "3601", "--leader-ttl: expected whole seconds, 1 to 3600"),
        ("--advertise-url", "ftp://h:1", "--advertise-url: expected http://HOST:PORT, got 'ftp://h:1'"),
    ]:
        p = subprocess.run([exe, flag, value], capture_output=True, timeout=20)
        err = p.stderr.decode()
        check(p.returncode == 2 and says in err, f"{flag} {value}: exit {p.returncode}, stderr {err!r}")
    for flags, says in [
        (["--etcd-prefix", "/p"], "--etcd-prefix, --advertise-url and --replica-id go with --etcd"),
        (["--replica-id", "a"], "--etcd-prefix, --advertise-url and --replica-id go with --etcd"),
        (["--etcd", "127.0.0.1:1", "--data-dir", workdir], "--etcd and --data-dir: give one"),
    ]:
        p = subprocess.run([exe, *flags], capture_output=True, timeout=20)
        err = p.stderr.decode()
        check(p.returncode == 2 and says in err, f"{flags}: exit {p.returncode}, stderr {err!r}")
    p = subprocess.run([exe, "--idle-timeout", "5", "--crowded-idle-timeout", "10"], capture_output=True, timeout=20)
    check(p.returncode == 2 and "--crowded-idle-timeout (10 s) must not exceed --idle-timeout (5 s)" in p.stderr.decode(),
          f"crowded above idle: exit {p.returncode}, {p.stderr.decode()!r}")


CASES = {"slowloris": case_slowloris, "descriptors": case_descriptors, "bad_flags": case_bad_flags}


def run_case(exe, name):
    workdir = tempfile.mkdtemp(prefix=f"cohort-slowloris-{name}-")
    timer = threading.Timer(CASE_DEADLINE_S, lambda: os.kill(os.getpid(), signal.SIGALRM))
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(CaseFailed(f"over {CASE_DEADLINE_S} s")))
    timer.start()
    started = time.monotonic()
    try:
        CASES[name](exe, workdir)
        print(f"PASS {name} ({time.monotonic() - started:.1f} s)")
        return True
    except CaseFailed as e:
        print(f"FAIL {name}: {e}")
        return False
    finally:
        timer.cancel()
        for f in os.listdir(workdir):
            os.unlink(os.path.join(workdir, f))
        os.rmdir(workdir)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--attack":
        return attack(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="the cohort-coordinator executable")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    failed = [c for c in args.cases if not run_case(args.coordinator, c)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
