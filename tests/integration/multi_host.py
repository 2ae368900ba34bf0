#!/usr/bin/env python3
"""Ranks on emulated hosts (hosts.py, docs/hosts.md): only the network joins
them. Cases:

  tool            the emulation itself: each host's hostname, PID namespace
                  and private /dev/shm; traffic between hosts and none to any
                  other address; link down and up; packet drops; MTU; and
                  nothing left behind when the process that made the hosts
                  is SIGTERMed or SIGKILLed
  script          scripts/hosts.sh: up, list, exec, link, mtu, drop, down,
                  with nothing left after down, and its bad arguments
  collectives_2x2 every collective, all-reduce with every algorithm, on 2
  collectives_4x1 hosts x 2 ranks and 4 hosts x 1 rank (hosts_worker.py):
                  results bit-identical on every rank and equal to numpy's;
                  host labels from each host's own hostname; shm or direct
                  copies between ranks of a host, TCP between hosts and
                  never anything else; the hierarchical all-reduce sends
                  each host's share through its link and no more (its rings
                  cross hosts, its ranks of one host meet in shared
                  memory or, from 1 MiB, by direct copies), where the
                  flat ring sends more
  mtu             an all-reduce of 4 MiB between 2 hosts, one with MTU 1280
                  (works: TCP's MSS follows), then with only the switch port
                  at 1280 (a black hole for full frames: a named timeout
                  within the operation's timeout, not a hang)
  store_route     two networks, the default route on the first, which is
                  down: members bootstrapped on a coordinator:// store served
                  on the second network listen on the second network (the
                  route to the coordinator), and their all-reduce works

As root only: without root or namespaces each case is skipped (77) saying
why, except under CI=true, where it fails.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import hosts
from comm_shm_job import CaseFailed, Job, all_ok, barriers_hold, check, identical, transports_are

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "hosts_worker.py")
STORE_PORT = 29500  # each host has its own ports: nothing else can hold it


def fail(message):
    raise CaseFailed(message)


# ------------------------------------------------------------------ tool

def tool():
    py = sys.executable
    with hosts.Cluster(3) as c:
        for i in range(3):
            out = c.check_output(i, ["sh", "-c", "hostname; echo $$; ls /dev/shm | wc -l; "
                                     "cat /proc/1/cmdline | tr '\\0\\n' '  '"])
            name, pid, shm_files, init = out.splitlines()[:4]
            if name != "host%d" % i:
                fail("host %d calls itself %r" % (i, name))
            if int(pid) > 50 or "os.wait()" not in init:
                fail("host %d: a process there is pid %s and pid 1 is %r: no PID namespace of its own"
                     % (i, pid, init[:80]))
            if shm_files.strip() != "0":
                fail("host %d: /dev/shm is not private and empty: %s files" % (i, shm_files))
        # /dev/shm of one host is not another's.
        c.check_output(0, ["sh", "-c", "echo x > /dev/shm/cohort-hosts-probe"])
        if c.check_output(1, ["sh", "-c", "ls /dev/shm"]).strip():
            fail("a file made in host 0's /dev/shm shows in host 1's")

        probe = textwrap.dedent("""
            import socket, sys
            host, port, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
            s = socket.socket()
            s.settimeout(timeout)
            try:
                s.connect((host, port))
                print("connected")
            except OSError as e:
                print(type(e).__name__, e)
        """)
        serve = "import socket, time; s = socket.create_server(('', 5000)); print('ready', flush=True); " \
                "[s.accept()[0].close() for _ in range(100)]"
        server = c.run(2, [py, "-c", serve], stdout=subprocess.PIPE, text=True)
        if server.stdout.readline().strip() != "ready":
            fail("the test server on host 2 did not start")

        def reach(i, address, timeout=1.0):
            return c.check_output(i, [py, "-c", probe, address, "5000", str(timeout)]).strip()

        if reach(0, c.address(2)) != "connected":
            fail("host 0 cannot reach host 2 at %s" % c.address(2))
        # Only the bridge: no other address is routed from a host.
        got = reach(0, "192.0.2.1")
        if "unreachable" not in got.lower():
            fail("host 0 reaches an address off the emulated network (192.0.2.1): %s" % got)
        c.link_down(2)
        got = reach(0, c.address(2))
        if got == "connected":
            fail("host 2 still answers with its link down")
        c.link_up(2)
        deadline = time.monotonic() + 5
        while reach(0, c.address(2)) != "connected":
            if time.monotonic() > deadline:
                fail("host 2 is unreachable 5 s after its link came back")
        print("  link down: %s; up again" % got)

        if shutil.which("nft"):
            c.drop(2, 100)
            got = reach(0, c.address(2), 0.5)
            if got == "connected":
                fail("host 2 answers while dropping 100 % of its packets")
            c.drop(2, 0)
            if reach(0, c.address(2)) != "connected":
                fail("host 2 does not answer once drop(2, 0) removed the rule")
            print("  drop 100 %%: %s; 0 %%: connected" % got)
        else:
            print("  drop: skipped, no nft here")
        c.set_mtu(2, 1280)
        mtu = c.check_output(2, ["cat", "/sys/class/net/eth0/mtu"]).strip()
        if mtu != "1280":
            fail("host 2's eth0 has MTU %s after set_mtu(2, 1280)" % mtu)
        for bad, call in (("no host 7", lambda: c.run(7, ["true"])),
                          ("an MTU from 68", lambda: c.set_mtu(0, 20)),
                          ("a percentage from 0 to 100", lambda: c.drop(0, 101)),
                          ("no network 1", lambda: c.link_down(0, net=1))):
            try:
                call()
                fail("no error for a bad argument (expected %r)" % bad)
            except hosts.HostsError as e:
                if bad not in str(e):
                    fail("error %r does not say %r" % (str(e), bad))
        server.kill()
        server.wait()
    print("  3 hosts: own hostname, pid 1, /dev/shm; reachable only on the bridge")

    for sig in (signal.SIGTERM, signal.SIGKILL):
        leftover = left_behind(sig)
        if leftover:
            fail("after %s of the process that made the hosts, still there: %s"
                 % (signal.Signals(sig).name, leftover))
        print("  %s of the owner: every host process gone" % signal.Signals(sig).name)


def left_behind(sig):
    """Starts a process that makes 2 hosts with a process on each, sends it
    `sig` and returns what of them is still alive 5 s later."""
    script = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, %r)
        import hosts
        c = hosts.Cluster(2).start()
        procs = [c.run(i, ["sleep", "300"]) for i in range(2)]
        pids = [h.init.pid for h in c.hosts] + [h.pid for h in c.hosts] + [c.bridge.pid]
        pids += [p.inner_pid() for p in procs]
        print(" ".join(map(str, pids)), flush=True)
        time.sleep(300)
    """ % HERE)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline()
        pids = [int(p) for p in line.split()]
        if len(pids) != 7:
            fail("the owner process did not make its hosts: %r" % line)
        owner.send_signal(sig)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 5
        while True:
            alive = [p for p in pids if alive_pid(p)]
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.05)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def alive_pid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------- script

SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "scripts", "hosts.sh"))


def script():
    name = "ct%d" % os.getpid()  # concurrent runs do not meet
    env = dict(os.environ, COHORT_HOSTS_NAME=name)

    def sh(*args, ok=True):
        r = subprocess.run(["bash", SCRIPT] + list(args), env=env, capture_output=True, text=True, timeout=60)
        if ok and r.returncode != 0:
            fail("hosts.sh %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
        return r

    try:
        sh("up", "2")
        listing = sh("list").stdout
        pids = [int(line.split()[1]) for line in listing.splitlines()[1:]]
        if len(pids) != 2 or "10.77.0.2" not in listing:
            fail("hosts.sh list after up 2: %r" % listing)
        if sh("exec", "1", "hostname").stdout.strip() != "host1":
            fail("hosts.sh exec 1 hostname did not say host1")
        hello = "import socket; socket.create_connection(('10.77.0.1', 22), 2)"
        got = sh("exec", "1", sys.executable, "-c", hello, ok=False).stderr
        if "ConnectionRefusedError" not in got:
            fail("host 1 could not reach host 0 (expected 'connection refused' from its closed port): %s" % got)
        sh("link", "1", "down")
        got = sh("exec", "1", sys.executable, "-c", hello, ok=False).stderr
        if "ConnectionRefusedError" in got:
            fail("host 1 reaches host 0 with its link down")
        sh("link", "1", "up")
        sh("mtu", "1", "1400")
        if sh("exec", "1", "cat", "/sys/class/net/eth0/mtu").stdout.strip() != "1400":
            fail("hosts.sh mtu 1 1400 did not set host 1's MTU")
        if shutil.which("nft"):
            sh("drop", "1", "10")
            sh("drop", "1", "0")
        for args, says in ((["up", "2"], "already up"), (["exec", "5", "true"], "no host 5"),
                           (["mtu", "1", "20"], "usage"), (["drop", "1", "101"], "usage"),
                           (["link", "1", "sideways"], "usage"), (["frobnicate"], "unknown command")):
            r = sh(*args, ok=False)
            if r.returncode != 2 or says not in r.stderr:
                fail("hosts.sh %s: exit %d, %r; expected 2 and %r" % (" ".join(args), r.returncode,
                                                                      r.stderr.strip(), says))
        sh("down")
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        alive = [p for p in pids if alive_pid(p)]
        if name in netns or alive or os.path.exists("/run/cohort-hosts/" + name):
            fail("after hosts.sh down: namespaces %r, hosts' pids alive %s" % (netns, alive))
        print("  up 2, list, exec, link, mtu, drop and down: nothing left")
    finally:
        sh("down", ok=False)


# ----------------------------------------------------------- collectives

def collectives(n_hosts, per_host):
    size = n_hosts * per_host
    host_of = [r // per_host for r in range(size)]
    labels = ["host%d" % h for h in host_of]
    print("collectives: %d hosts x %d ranks" % (n_hosts, per_host))
    with hosts.Cluster(n_hosts) as c:
        job = Job(size, "collectives", worker=WORKER, name="%dx%d" % (n_hosts, per_host),
                  store="tcp://%s:%d" % (c.address(0), STORE_PORT),
                  spawn=lambda rank, argv, **popen: c.run(host_of[rank], argv, **popen),
                  flags=["--timeout", "60", "--connect-timeout", "30"], deadline_s=150)
        try:
            job.wait_exit()
            all_ok(job)
            checked = identical(job)
            barriers_hold(job)
            transports_are(job, lambda r, p: ("shm", "direct") if host_of[r] == host_of[p] else ("tcp",),
                           hosts=labels)
            failures = []
            for r in range(size):
                res = job.results[r]
                d = res["describe"]
                local = [p for p in range(size) if host_of[p] == host_of[r]]
                if per_host > 1 and (d["shm"] is None or d["shm"]["ranks"] != local):
                    failures.append("rank %d: shm %s, expected ranks %s" % (r, d["shm"], local))
                if not (d["listen"] or {}).get("address") == c.address(host_of[r]):
                    failures.append("rank %d listens at %s, not on its host's address %s"
                                    % (r, d["listen"], c.address(host_of[r])))
                if not res.get("shm_across_hosts") or "InvalidArgument" not in res["shm_across_hosts"]:
                    failures.append("rank %d: algorithm shm across hosts gave %r, expected InvalidArgument"
                                    % (r, res.get("shm_across_hosts")))
            # Traffic: what each host sent on its link during one all-reduce,
            # from the first reading of its counter before to the last after.
            nbytes = job.results[0]["traffic_bytes"]
            share = 2 * (n_hosts - 1) / n_hosts * nbytes  # what a ring of the hosts carries per host

            def sent(h, algorithm):
                readings = [job.results[r]["traffic"][algorithm] for r in range(size) if host_of[r] == h]
                return max(after for _, after in readings) - min(before for before, _ in readings)

            for h in range(n_hosts):
                hier, ring = sent(h, "hierarchical"), sent(h, "ring")
                print("  host %d sent %.2f MiB in a hierarchical all-reduce of %.0f MiB, %.2f MiB in a ring one"
                      % (h, hier / 2**20, nbytes / 2**20, ring / 2**20))
                if not share <= hier <= 1.15 * share:
                    failures.append("host %d sent %d bytes in a hierarchical all-reduce of %d, expected %d "
                                    "(its share of the rings across hosts) to 1.15x that" % (h, hier, nbytes, share))
                if per_host > 1 and not ring > 1.3 * hier:
                    failures.append("host %d: the flat ring sent %d bytes, not clearly more than the "
                                    "hierarchical %d: are a host's ranks meeting over the network?"
                                    % (h, ring, hier))
            check(not failures, "\n".join(failures), job)
            print("  %d ranks ok, %d results bit-identical, %d checks each; rank 0's transports %s; "
                  "seconds: %s" % (size, checked, job.results[0]["checks"], " ".join(job.results[0]["transports"]),
                                   json.dumps(job.results[0]["stages_s"])))
        finally:
            job.close()


# ------------------------------------------------------------------- mtu

def mtu():
    timeout_s = 5
    with hosts.Cluster(2) as c:
        for label, where, expect_ok in (("MTU 1280 on host 1", "both", True),
                                        ("MTU 1280 on host 1's switch port only", "switch", False)):
            c.set_mtu(1, 1500)
            c.set_mtu(0, 1500)
            c.set_mtu(1, 1280, where=where)
            job = Job(2, "loop", name=label, store="tcp://%s:%d" % (c.address(0), STORE_PORT),
                      spawn=lambda rank, argv, **popen: c.run(rank, argv, **popen),
                      flags=["--count", str(1 << 20), "--iterations", "5", "--timeout", str(timeout_s),
                             "--connect-timeout", "20"], deadline_s=60)
            try:
                started = time.monotonic()
                job.wait_exit()
                took = time.monotonic() - started
                if expect_ok:
                    all_ok(job)
                    print("  %s: 5 all-reduces of 4 MiB ok, %.1f s" % (label, took))
                    continue
                failures = []
                for r in range(2):
                    res = job.results.get(r)
                    if res is None or res["ok"]:
                        failures.append("rank %d: expected a failure, got %s" % (r, res))
                    elif "timed out" not in res["error"] or res["failed_after_ms"] > (timeout_s + 3) * 1000:
                        failures.append("rank %d: expected a timeout within %d s: %s after %s ms"
                                        % (r, timeout_s, res["error"], res["failed_after_ms"]))
                check(not failures, "\n".join(failures), job)
                print("  %s: rank 0 failed after %.1f s: %s"
                      % (label, job.results[0]["failed_after_ms"] / 1000, job.results[0]["error"][:160]))
            finally:
                job.close()


# ----------------------------------------------------------- store route

def store_route():
    print("store_route: 2 hosts on 2 networks, default route on network 0 (down), coordinator on network 1")
    with hosts.Cluster(2, networks=2, default_route=0) as c:
        for i in range(2):
            c.link_down(i, net=0)
        url = "http://%s:%d" % (c.address(0, net=1), 29400)
        procs = []
        for i in range(2):
            argv = [sys.executable, WORKER, "--coordinator", url, "--member", "m%d" % i, "--size", "2"]
            procs.append(c.run(i, argv + (["--serve"] if i == 0 else []),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results, failures = [], []
        for i, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                fail("member %d still running after 90 s" % i)
            lines = [l for l in out.splitlines() if l.startswith("{")]
            res = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result; stderr: " + err[-2000:]}
            results.append(res)
            if not res["ok"] or p.returncode != 0:
                failures.append("member %d (exit %s): %s" % (i, p.returncode, res.get("error")))
        if failures:
            fail("\n".join(failures))
        for i, res in enumerate(results):
            listen = res["describe"]["listen"]
            print("  member %d, rank %d: listens at %s:%s, chosen by %s"
                  % (i, res["rank"], listen["address"], listen["port"], listen["chosen_by"]))
            if listen["address"] != c.address(i, net=1):
                failures.append("member %d listens at %s, not at %s on the network that reaches the "
                                "coordinator (%s)" % (i, listen["address"], c.address(i, net=1), listen))
            if res["sum"] != 3:
                failures.append("member %d: all-reduce gave %s, expected 3" % (i, res["sum"]))
        if failures:
            fail("\n".join(failures))


CASES = {
    "tool": tool,
    "script": script,
    "collectives_2x2": lambda: collectives(2, 2),
    "collectives_4x1": lambda: collectives(4, 1),
    "mtu": mtu,
    "store_route": store_route,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    parser.add_argument("cases", nargs="+", help="case names, or 'all': " + ", ".join(CASES))
    args = parser.parse_args()
    names = list(CASES) if args.cases == ["all"] else args.cases
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(CASES)))
    if args.repeat < 1:
        parser.error("--repeat must be at least 1, got %d" % args.repeat)
    hosts.require()
    failed = 0
    for name in names:
        for _ in range(args.repeat):
            start = time.monotonic()
            try:
                CASES[name]()
                print("PASS %s (%.1f s)" % (name, time.monotonic() - start), flush=True)
            except (CaseFailed, hosts.HostsError) as e:
                failed += 1
                print("FAIL %s (%.1f s): %s" % (name, time.monotonic() - start, e), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
