#!/usr/bin/env python3
"""How long does the coordinator's dashboard take to render and to update in
headless Chromium, at 1,000 members (target: under 200 ms each)?

Starts cohort-coordinator, fills a job with N synthetic members over the
HTTP API (joins, then a heartbeat per member per second with a step, step
time, samples/s and a GPU sample, a few members slow), lets the history
fill for --fill seconds, then opens the dashboard in headless Chromium
(tests/integration/cdp.py, the DevTools protocol) with #refresh=0 so that
only the benchmark triggers refreshes, and measures:

  first render  the page's first refresh, from its data in hand to the DOM
                built, the charts drawn and the layout done (the page's
                own timing: window.cohortDashboard.timings[0].render_ms);
                the median of --loads page loads; (charts): the part of it
                spent making and drawing the charts
  update        the same for each later refresh (--updates of them, one a
                second while heartbeats go on, so each has new points)
  to painted    a whole update as a user waits for it: fetching the JSON,
                rendering, and the next frame painted
  JSON          the bytes of the job view and the history of one update

The anchor is the same page with 10 members in the same run: the ratio
says how the cost grows with the members.

    bench_dashboard.py --coordinator build/examples/cohort-coordinator [--members 10,1000] [--fill 20]
"""

import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import cdp  # noqa: E402

TOKEN = "bench-dashboard"


class Api:
    """One keep-alive connection to the coordinator."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        self.headers = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.headers)
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None, len(data)


def gpu_sample(i, t):
    return {"time": t, "backend": "file:bench", "health": "ok", "gpus": [{
        "index": 0, "memory_total_bytes": 80 * 2**30, "memory_used_bytes": (40 + i % 30) * 2**30,
        "gpu_utilization_percent": 50 + (i * 7 + int(t)) % 50, "temperature_celsius": 50 + i % 30}]}


class Members(threading.Thread):
    """N members of job `job`, each heartbeating once a second."""

    def __init__(self, url, job, n, seed):
        super().__init__(daemon=True)
        self.api = Api(url)
        self.job, self.n = job, n
        self.stop = threading.Event()
        rng = random.Random(seed)
        # Most members step in about 0.5 s; 1 in 50 is twice as slow.
        self.step_time = [rng.uniform(0.45, 0.55) * (2 if rng.random() < 0.02 else 1) for _ in range(n)]
        self.api.call("POST", "/v1/jobs", {"name": job, "settings": {
            "min_nodes": n, "max_nodes": n, "last_call": 0, "heartbeat_interval": 5, "failure_timeout": 600,
            "join_timeout": 600, "health": {"straggler_for": 5}}})
        for i in range(n):
            self.api.call("POST", f"/v1/jobs/{job}/join", {"id": f"m{i:05d}", "host": f"host-{i // 8:04d}",
                                                          "address": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:29500"})
        deadline = time.monotonic() + 60
        while self.api.call("GET", f"/v1/jobs/{job}")[0]["generation"] == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{job}: no world of {n} within 60 s")
            time.sleep(0.1)
        self.beats = 0

    def beat_all(self):
        t = time.time()
        self.beats += 1
        for i in range(self.n):
            st = self.step_time[i]
            self.api.call("POST", f"/v1/jobs/{self.job}/heartbeat", {
                "member": f"m{i:05d}", "generation": 1,
                "metrics": {"step": int(self.beats / st), "step_time": st, "samples_per_sec": 64 / st,
                            "gpu": gpu_sample(i, t)}})

    def run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            self.beat_all()
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))


UPDATE_AND_PAINT = """(async () => {
  const t0 = performance.now();
  await window.cohortDashboard.refresh();
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const t = window.cohortDashboard.timings.slice(-1)[0];
  return {painted_ms: performance.now() - t0, render_ms: t.render_ms, fetch_ms: t.fetch_ms, members: t.members};
})()"""


def measure(chromium, url, job, members, updates, loads, workdir):
    api = Api(url)
    _, view_bytes = api.call("GET", f"/v1/jobs/{job}")
    query = "" if members <= 64 else "&members=slowest&limit=8"
    _, history_bytes = api.call("GET", f"/v1/jobs/{job}/history?since={time.time() - 1.5}{query}")
    with cdp.Browser(chromium, workdir) as browser:
        page = browser.open(f"{url}/#token={TOKEN}&refresh=0", width=1400, height=1000)
        firsts, first_charts = [], []
        for load in range(loads):
            if load > 0:
                page.evaluate("window.reloaded = false")
                page.send("Page.reload")
            page.wait_for("window.reloaded === undefined && window.cohortDashboard && window.cohortDashboard.ready",
                          60, "the first refresh")
            first = page.evaluate("window.cohortDashboard.timings[0]")
            error = page.evaluate("window.cohortDashboard.error")
            if error or first is None or first["members"] != members:
                raise RuntimeError(f"the page did not show {members} members: {error} {first}")
            firsts.append(first["render_ms"])
            first_charts.append(first["parts"]["charts_ms"])
        results = []
        for _ in range(updates):
            time.sleep(1.0)
            results.append(page.evaluate(UPDATE_AND_PAINT, timeout=60))
    return {
        "members": members,
        "first_ms": statistics.median(firsts),
        "first_charts_ms": statistics.median(first_charts),
        "update_ms": statistics.median(r["render_ms"] for r in results),
        "update_max_ms": max(r["render_ms"] for r in results),
        "painted_ms": statistics.median(r["painted_ms"] for r in results),
        "view_kib": view_bytes / 1024,
        "history_kib": history_bytes / 1024,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--chromium")
    parser.add_argument("--members", default="10,1000", help="comma-separated job sizes (the first is the anchor)")
    parser.add_argument("--fill", type=float, default=20, help="seconds of heartbeats before measuring")
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--loads", type=int, default=5, help="page loads for the first render's median")
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    chromium = cdp.find_chromium(args.chromium or os.environ.get("COHORT_CHROMIUM"))
    if chromium is None:
        sys.exit("no Chromium (Debian: apt-get install chromium)")
    print(f"seed {args.seed}; {args.fill:g} s of history; {args.loads} loads and {args.updates} updates each; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as workdir:
        for n in (int(x) for x in args.members.split(",")):
            token_file = os.path.join(workdir, "token")
            with open(token_file, "w") as f:
                f.write(TOKEN)
            proc = subprocess.Popen([args.coordinator, "--port", "0", "--token-file", token_file],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            try:
                url = proc.stdout.readline().decode().strip()
                job = f"bench{n}"
                members = Members(url, job, n, args.seed)
                members.start()
                time.sleep(args.fill)
                rows.append(measure(chromium, url, job, n, args.updates, args.loads, workdir))
                members.stop.set()
                members.join(timeout=60)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=20)
    anchor = rows[0]
    print(f"{'members':>8} {'first render':>13} {'(charts)':>10} {'update':>9} {'update max':>11} {'to painted':>11} "
          f"{'view JSON':>10} {'history JSON':>13} {'update / anchor':>16}")
    for r in rows:
        print(f"{r['members']:>8} {r['first_ms']:>10.1f} ms {r['first_charts_ms']:>7.1f} ms "
              f"{r['update_ms']:>6.1f} ms {r['update_max_ms']:>8.1f} ms "
              f"{r['painted_ms']:>8.1f} ms {r['view_kib']:>6.0f} KiB {r['history_kib']:>9.1f} KiB "
              f"{r['update_ms'] / anchor['update_ms']:>15.1f}x")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
