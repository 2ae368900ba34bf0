#!/usr/bin/env python3
"""cohort-run --scheduler kubernetes against the API-server double, whose
kubelet (--run-pods) runs each pod's command as a local process. Cases:

  oom_relaunch  two workers; one pod is OOMKilled (its process SIGKILLed,
                the pod's container terminated with reason OOMKilled, exit
                137): a worker_failed event with cause oom, a plan
                that relaunches it, a new pod for it; then both finish and
                cohort-run exits 0 with no pod left. Prints how long the
                death took from the kill to the policy's plan.
  pending       two workers, room for one pod (--capacity 1),
                --pending-timeout 1: the second pod stays Unschedulable,
                is given up (cause pending_timeout) and removed by the
                policy while the job goes on with one worker; a placeholder
                pod takes its place in the queue; once there is room
                (capacity 2) a capacity event grows the job back with a new
                worker; exit 0.
  master_addr   two workers (--nnodes 1) that meet as torch's env://
                does: rank 0 listens on MASTER_ADDR:MASTER_PORT, rank 1
                connects and says hello. Rank 0's pod has
                MASTER_ADDR=$(COHORT_POD_IP), which the kubelet expands to
                its own IP; the other pod is created once that IP is known,
                with it as MASTER_ADDR.

    k8s_cohort_run.py --run COHORT_RUN --double DOUBLE CASE [--repeat N]

Every wait is bounded; the double and cohort-run are killed at the end
whatever happens. Standard library only.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# master_addr: rank 0 listens where MASTER_ADDR says, rank 1 connects there.
RENDEZVOUS = """
import os, socket, time
addr, port, rank = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), int(os.environ["RANK"])
out = os.path.join(os.environ["OUT_DIR"], "rank%d" % rank)
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen()
    s.settimeout(30)
    c, _ = s.accept()
    c.settimeout(10)
    said = c.recv(64).decode()
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    said = "rank %d said hello" % rank
    c.sendall(said.encode())
with open(out, "w") as f:
    f.write("%s %d %s" % (addr, port, said))
"""

WORKER = ('if [ "$COHORT_RESTART_COUNT" -ge 1 ]; then exit 0; fi; i=0; '
          'while [ ! -f "$DONE_FILE" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done')


class Run:
    def __init__(self, args, case_dir, double_args):
        self.dir = case_dir
        self.double = subprocess.Popen([args.double, "--port", "0", "--run-pods", *double_args],
                                       stdout=subprocess.PIPE, text=True, env={**os.environ,
                                       "DONE_FILE": os.path.join(case_dir, "DONE"), "OUT_DIR": case_dir})
        line = self.double.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"the double did not start: {line!r}")
        self.url = line.split()[-1]
        self.kubeconfig = os.path.join(case_dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
current-context: double
clusters: [{{name: double, cluster: {{server: "{self.url}"}}}}]
contexts: [{{name: double, context: {{cluster: double, user: u, namespace: default}}}}]
users: [{{name: u, user: {{token: t}}}}]
""")
        self.events_file = os.path.join(case_dir, "events.jsonl")
        self.launcher = None
        self.seen = []  # (monotonic time first seen, event)
        self.offset = 0

    def start(self, args, *flags, program=("/bin/sh", "-c", WORKER)):
        cmd = [args.run, "--standalone", "--scheduler", "kubernetes", "--k8s-kubeconfig", self.kubeconfig,
               "--k8s-image", "registry.invalid/trainer:1", "--job", "kjob", "--node-id", "k8s",
               "--relaunch-delay", "0", "--progress", "0", "--events", self.events_file, "-q", *flags,
               "--", *program]
        self.launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def control(self, path):
        with urllib.request.urlopen(urllib.request.Request(self.url + path, method="POST"), timeout=10) as r:
            return r.read().decode()

    def pods(self):
        with urllib.request.urlopen(self.url + "/_double/pods", timeout=10) as r:
            return dict(l.split() for l in r.read().decode().splitlines() if l.strip())

    def read_events(self):
        if not os.path.exists(self.events_file):
            return
        with open(self.events_file) as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind("\n") + 1
        self.offset += end
        now = time.monotonic()
        for line in data[:end].splitlines():
            self.seen.append((now, json.loads(line)))

    def wait(self, what, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.read_events()
            result = predicate()
            if result:
                return result
            if self.launcher and self.launcher.poll() is not None:
                self.read_events()
                result = predicate()
                if result:
                    return result
                raise AssertionError(f"cohort-run exited {self.launcher.returncode} while waiting for {what}: "
                                     f"{self.launcher.stderr.read()}")
            time.sleep(0.005)
        raise AssertionError(f"timed out waiting for {what}; events: {[e for _, e in self.seen]}")

    def event(self, kind, **fields):
        def find():
            for t, e in self.seen:
                if e.get("event") == kind and all(e.get(k) == v for k, v in fields.items()):
                    return t, e
            return None
        return find

    def finish(self, timeout=30):
        open(os.path.join(self.dir, "DONE"), "w").close()
        try:
            self.launcher.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("cohort-run did not finish")
        self.read_events()
        return self.launcher.returncode

    def close(self):
        for p in (self.launcher, self.double):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def running(run, count):
    return lambda: sum(1 for phase in run.pods().values() if phase == "Running") >= count and run.pods()


def oom_relaunch(args, case_dir):
    run = Run(args, case_dir, [])
    try:
        run.start(args, "--nproc-per-node", "2")
        run.wait("two running pods", running(run, 2))
        assert set(run.pods()) == {"kjob-k8s-0-0", "kjob-k8s-1-0"}, run.pods()
        run.wait("both workers started", lambda: sum(1 for _, e in run.seen if e["event"] == "worker_started") == 2)
        killed_at = time.monotonic()
        assert run.control("/_double/pods/kjob-k8s-1-0/oom") == "ok\n"
        t_failed, failed = run.wait("worker_failed", run.event("worker_failed", worker="k8s-1"))
        assert failed.get("cause") == "oom", failed
        assert "OOMKilled" in failed["detail"] and "exit code 137" in failed["detail"], failed
        t_plan, plan = run.wait("a plan", run.event("plan"))
        assert [s["kind"] for s in plan["steps"]] == ["relaunch"], plan
        run.wait("the relaunched pod", lambda: "kjob-k8s-1-1" in run.pods())
        rc = run.finish()
        assert rc == 0, (rc, run.launcher.stderr.read())
        done = [e for _, e in run.seen if e["event"] == "done"]
        assert done and done[0]["exit_code"] == 0, done
        assert run.pods() == {}, f"pods left behind: {run.pods()}"
        return t_failed - killed_at, t_plan - killed_at
    finally:
        run.close()


def pending(args, case_dir):
    run = Run(args, case_dir, ["--capacity", "1"])
    try:
        run.start(args, "--nproc-per-node", "2", "--min-workers", "1", "--pending-timeout", "1")
        _, failed = run.wait("the stuck pod given up", run.event("worker_failed", cause="pending_timeout"), 30)
        assert "Unschedulable" in failed["detail"], failed
        _, plan = run.wait("a plan", run.event("plan"))
        assert [s["kind"] for s in plan["steps"]] == ["remove"], plan
        run.wait("a placeholder", lambda: "kjob-placeholder-0" in run.pods())
        assert run.control("/_double/capacity?pods=2") == "ok\n"
        _, cap = run.wait("a capacity event", run.event("capacity"))
        assert cap["free_slots"] == 1, cap
        run.wait("a launch on capacity", lambda: any(
            e["event"] == "plan" and [s["kind"] for s in e["steps"]] == ["launch"] for _, e in run.seen))
        run.wait("the new worker", run.event("relaunched"))
        rc = run.finish()
        assert rc == 0, (rc, run.launcher.stderr.read(), [e for _, e in run.seen])
        assert run.pods() == {}, f"pods left behind: {run.pods()}"
    finally:
        run.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pod_env(run, name):
    with urllib.request.urlopen(run.url + "/api/v1/namespaces/default/pods/" + name, timeout=10) as r:
        pod = json.loads(r.read().decode())
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0]["env"]}


def master_addr(args, case_dir):
    run = Run(args, case_dir, [])
    try:
        port = free_port()
        run.start(args, "--nproc-per-node", "2", "--nnodes", "1", "--k8s-master-port", str(port),
                  program=("/usr/bin/python3", "-c", RENDEZVOUS))
        _, master = run.wait("rank 0's address", run.event("master"))
        assert master["master_addr"] == "127.0.0.1" and master["master_port"] == port, master
        starts = run.wait("both workers started",
                          lambda: [e for _, e in run.seen if e["event"] == "worker_started"][:2]
                          if sum(1 for _, e in run.seen if e["event"] == "worker_started") >= 2 else None)
        assert [s["rank"] for s in starts] == [0, 1], starts  # rank 0's pod first
        envs = {}
        for s in starts:
            try:
                envs[s["rank"]] = pod_env(run, s["pod"])
            except urllib.error.HTTPError:
                pass  # ended and deleted already: the files below still tell
        if 0 in envs:
            assert envs[0]["MASTER_ADDR"] == "$(COHORT_POD_IP)", envs[0]
            assert envs[0]["COHORT_POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}, envs[0]
        if 1 in envs:
            assert envs[1]["MASTER_ADDR"] == "127.0.0.1" and envs[1]["MASTER_PORT"] == str(port), envs[1]
        rc = run.finish()
        assert rc == 0, (rc, run.launcher.stderr.read(), [e for _, e in run.seen])
        with open(os.path.join(case_dir, "rank0")) as f:
            assert f.read() == f"127.0.0.1 {port} rank 1 said hello", "rank 0 heard rank 1"
        with open(os.path.join(case_dir, "rank1")) as f:
            assert f.read() == f"127.0.0.1 {port} rank 1 said hello"
        assert run.pods() == {}, f"pods left behind: {run.pods()}"
    finally:
        run.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--run", required=True)
    parser.add_argument("--double", required=True)
    parser.add_argument("case", choices=["oom_relaunch", "pending", "master_addr"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    for i in range(args.repeat):
        case_dir = tempfile.mkdtemp(prefix=f"k8s-cohort-run-{args.case}-")
        try:
            if args.case == "oom_relaunch":
                to_failed, to_plan = oom_relaunch(args, case_dir)
                print(f"run {i + 1}: OOMKilled pod to worker_failed {to_failed * 1000:.0f} ms, "
                      f"to the policy's plan {to_plan * 1000:.0f} ms")
            elif args.case == "master_addr":
                master_addr(args, case_dir)
                print(f"run {i + 1}: rank 1's pod reached rank 0's pod at MASTER_ADDR:MASTER_PORT")
            else:
                pending(args, case_dir)
                print(f"run {i + 1}: pending pod given up, job went on, grew back on capacity")
        finally:
            shutil.rmtree(case_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
