"""bench_recovery.py's coordinator-leader-kill scenario: the training demo
under two launchers (nodes a and b, 2 workers each) whose coordinator is
three `cohort-coordinator --etcd` replicas on a local etcd; the launchers
and workers get all three URLs (`--coordinator URL1,URL2,URL3`). Mid-training
this kills the leader replica with SIGKILL. Target (issue 17): training
stops for at most 3 s, and no new round opens.

Measured, on this machine's monotonic clock: kill → the first answer of a
new leader to the job-state poll; kill → the first shard reported done after
the kill (training again: a worker reports a shard only after its step's
collectives succeeded, and it needs the coordinator for its next lease); the
generation before and after; and both launchers' exit status.
"""

import http.client
import json
import os
import signal
import sys
import time

import bench_recovery as br

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import coordinator_ha as ha  # noqa: E402  (the test's etcd and replica helpers)

TARGET_S = 3.0
TITLE = "SIGKILL of the leader of 3 coordinator replicas on etcd; 2 launchers of 2 workers train on"
ROWS = [
    ("new_leader", "kill → a new leader answers (job-state poll)"),
    ("total", "**total: kill → training again (first shard done after the kill)**"),
]


class LeaderWatch(br.JobWatch):
    """JobWatch over several replicas: a refused connection or a 503 moves
    the poll to the leader the answer names, or to the next URL."""

    def __init__(self, urls, job, period=0.02):
        self.urls = list(urls)
        self.current = 0
        self.answers = []  # (monotonic, url) of each 200
        super().__init__(self.urls[0], job, period)

    def _poll(self):
        while not self._stop.is_set():
            url = self.urls[self.current]
            host, port = url.removeprefix("http://").rsplit(":", 1)
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=1)
                conn.request("GET", f"/v1/jobs/{self.job}")
                resp = conn.getresponse()
                body = resp.read()
                now = time.monotonic()
                conn.close()
                if resp.status == 200:
                    self._record(now, json.loads(body))
                    self.answers.append((now, url))
                else:
                    leader = resp.getheader("X-Cohort-Leader", "")
                    self.current = self.urls.index(leader) if leader in self.urls else \
                        (self.current + 1) % len(self.urls)
            except (OSError, ValueError, http.client.HTTPException):
                self.current = (self.current + 1) % len(self.urls)
            self._stop.wait(self.period)


def run_leader_kill(args, workdir, index):
    name = f"leader-kill-{index}"
    case_dir = os.path.join(workdir, name)
    os.makedirs(case_dir, exist_ok=True)
    etcd = ha.Etcd(case_dir, 1)
    ports = ha.free_ports(3)
    replicas = [ha.Replica(args.coordinator, etcd, "/cohort/bench-recovery", case_dir, f"r{i}", ports[i])
                for i in range(3)]
    urls = ",".join(r.url for r in replicas)
    job = "recovery"
    watch = LeaderWatch([r.url for r in replicas], job)
    launchers = {}
    try:
        leader = ha.leader_of(replicas)
        for node in ("a", "b"):
            cmd = [args.run, "--coordinator", urls, "--job", job, "--nnodes", "2", "--nproc-per-node", "2",
                   "--node-id", node, "--events", "{EVENTS}", "--"] + br.train_cmd(args)
            launchers[node] = br.Launcher(f"{name}-{node}", cmd, workdir)
        a, b = launchers["a"], launchers["b"]
        deadline = time.monotonic() + args.timeout
        br.wait_full_world(a, b, 4, args.kill_at, deadline)
        generation = watch.state.get("generation")
        done_before = watch.samples[-1][2] if watch.samples else 0
        kill_mono = time.monotonic()
        leader.proc.send_signal(signal.SIGKILL)
        leader.proc.wait()
        br.log(f"  killed the leader {leader.name} at generation {generation}, {done_before} shards done")
        codes = {node: launcher.wait(max(1.0, deadline - time.monotonic())) for node, launcher in launchers.items()}
        watch.stop()
        for node, code in codes.items():
            if code != 0:
                raise br.Missing(f"node {node}'s cohort-run exited {code}; last lines:\n{launchers[node].tail()}")
        new_leader = next((t for t, url in watch.answers if t > kill_mono and url != leader.url), None)
        again = next((t for t, _, d, _ in watch.samples if t > kill_mono and d > done_before), None)
        if again is None:
            raise br.Missing("no shard was reported done after the kill")
        generations = sorted({g for t, g, _, _ in watch.samples if t > kill_mono})
        result = {
            "new_leader": None if new_leader is None else new_leader - kill_mono,
            "total": again - kill_mono,
            "generation_before": generation,
            "generations_after": ",".join(map(str, generations)),
            "same_round": generations == [generation],
        }
        if not result["same_round"]:
            raise br.Missing(f"a new round opened: generation {generation} before the kill, {generations} after")
        return result
    finally:
        watch.stop()
        for launcher in launchers.values():
            launcher.kill()
        for p in ha.CHILDREN:
            if p.poll() is None:
                p.kill()
            p.wait()
        ha.CHILDREN.clear()


def report(results, failures, runs):
    print(f"\n### {TITLE}\n")
    print(f"{len(results)} of {runs} runs complete.\n")
    if results:
        print("| phase | min | median | max |")
        print("|---|---:|---:|---:|")
        for row in br.phase_rows(results, ROWS):
            print(row)
        worst = max(r["total"] for r in results)
        median = br.statistics.median(r["total"] for r in results)
        met = "met" if worst <= TARGET_S else "NOT met"
        same = sum(1 for r in results if r.get("same_round"))
        print(f"\nTarget kill → training again <= {TARGET_S:g} s: **{met}** (worst {worst:.2f} s, median "
              f"{median:.2f} s). No new round in {same} of {len(results)} runs.")
    for index, why in failures:
        print(f"\nrun {index} failed: {why}")
