#!/usr/bin/env python3
"""The coordinator's dashboard in headless Chromium during the training demo.

Starts cohort-coordinator with a token and four cohort-train workers (as
train_demo.py does), kills one with SIGKILL once the first epoch is in and
starts a replacement, and beside it runs two small jobs of synthetic
members over HTTP: three whose heartbeats carry GPU samples, one of them
slow (a straggler), and two whose step stopped inside a collective (hung). Then it opens http://HOST:PORT/#token=TOKEN in Chromium,
driven over the DevTools protocol (cdp.py), and checks:

  - the job list shows both jobs with their phase and progress;
  - the training job's rounds table holds generations 1 to 3 and the round
    after the kill names the victim as failed; the timeline (SVG) has a
    failure marker for the victim and a bar per round;
  - the members table has a row per worker, the victim's saying failed, in
    human units (no raw floats such as 5.000633955001831);
  - the charts are drawn: step time, samples/s and throughput of the
    training job, and the GPU job's GPU memory, utilisation and
    temperature, each canvas with coloured (data) pixels;
  - the verdict names the GPU job's straggler, and says the hung job is
    hung with the coordinator's diagnosis; sorting and filtering the
    members table work; numbers read as people write them (5.0 s,
    1.2 GiB, 3 min ago);
  - the page refreshes on its own, and its later refreshes still show
    every member.

It saves screenshots to --screenshots DIR (default: the case's temporary
directory): dashboard.png (the whole page) and dashboard-timeline.png
(the training job's rounds with the kill). docs/images/ holds copies made
with --screenshots docs/images.

    dashboard_browser.py --coordinator PATH --train PATH [--chromium PATH]
                         [--screenshots DIR]

Exits 77 (skipped) when no Chromium is installed. A watchdog kills every
child and fails the case when it overruns. Standard library only.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

import case_runner
import cdp
from coordinator_http import CaseFailed, check, ok

CASE_DEADLINE_S = 150.0
TOKEN = "dash-demo-token"
SETTINGS = {"heartbeat_interval": 0.2, "failure_timeout": 1.5, "last_call": 0.5}
TRAIN_FLAGS = ["--epochs", "8", "--shards", "64", "--step-ms", "100"]
GPU_JOB = "gpu-demo"
HUNG_JOB = "hang-demo"
SKIP = 77

children = []


class Coordinator:
    def __init__(self, exe, workdir):
        token_file = os.path.join(workdir, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        self.stderr_path = os.path.join(workdir, "coordinator.stderr")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([exe, "--port", "0", "--token-file", token_file],
                                         stdout=subprocess.PIPE, stderr=err)
        children.append(self.proc)
        self.url = self.proc.stdout.readline().decode().strip()
        check(self.url.startswith("http://"), f"the coordinator did not start (exit {self.proc.poll()})")


def call(url, method, path, body=None, expect=(200, 201)):
    return ok(url, method, path, body, token=TOKEN, expect=expect)


class Worker:
    def __init__(self, train, url, member, local_rank, workdir, restart=0):
        self.member = member
        self.out_path = os.path.join(workdir, f"{member}.out")
        env = dict(os.environ, COHORT_COORDINATOR=url, COHORT_COORDINATOR_TOKEN=TOKEN, COHORT_JOB="train",
                   COHORT_MEMBER=member, LOCAL_RANK=str(local_rank), COHORT_RESTART_COUNT=str(restart))
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen([train, *TRAIN_FLAGS], stdout=out, stderr=subprocess.STDOUT, env=env)
        children.append(self.proc)

    def output(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def describe(self):
        return f"{self.member} (exit {self.proc.poll()}): {self.output()[-1200:]!r}"

    def rank(self):
        m = re.search(r"world \d+: rank (\d+) of", self.output())
        return int(m.group(1)) if m else None


def wait_for(condition, what, workers, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        for w in workers:
            check(w.proc.poll() in (None, 0), f"while waiting for {what}: {w.describe()}")
        check(time.monotonic() < deadline, f"no {what} within {timeout} s: " + " | ".join(w.describe() for w in workers))
        time.sleep(0.05)


class GpuMembers(threading.Thread):
    """Three members of GPU_JOB heartbeating every 0.2 s with steps and GPU
    samples; g2 steps three times slower than the others."""

    STEP_TIME = {"g0": 0.2, "g1": 0.2, "g2": 0.6}

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.errors = []
        settings = {"min_nodes": 3, "max_nodes": 3, "last_call": 0, "heartbeat_interval": 0.2,
                    "failure_timeout": 30, "health": {"straggler_for": 2, "min_samples": 3}}
        call(url, "POST", "/v1/jobs", {"name": GPU_JOB, "settings": settings})
        for i, m in enumerate(self.STEP_TIME):
            call(url, "POST", f"/v1/jobs/{GPU_JOB}/join", {"id": m, "host": f"gpu-host-{i}", "address": f"127.0.0.1:{29600 + i}"})
        self.generation = 0
        deadline = time.monotonic() + 15
        while self.generation == 0:
            check(time.monotonic() < deadline, "the GPU job's world did not form within 15 s")
            self.generation = call(url, "GET", f"/v1/jobs/{GPU_JOB}")["generation"]
            time.sleep(0.05)

    def gpu_sample(self, member, t):
        i = int(member[1:])
        return {"time": time.time(), "backend": "file:test", "health": "ok", "gpus": [{
            "index": 0, "name": "Test GPU", "memory_total_bytes": 80 * 2**30,
            "memory_used_bytes": int((30 + 10 * i + 5 * ((t * (i + 1)) % 3)) * 2**30),
            "gpu_utilization_percent": 60 + 30 * ((t + i) % 2) - 20 * (member == "g2"),
            "temperature_celsius": 55 + 5 * i + (t % 4)}]}

    def run(self):
        step = 0
        while not self.stop.wait(0.2):
            step += 1
            for m, step_time in self.STEP_TIME.items():
                body = {"member": m, "generation": self.generation,
                        "metrics": {"step": int(step * 0.2 / step_time), "step_time": step_time,
                                    "samples_per_sec": 32 / step_time, "gpu": self.gpu_sample(m, step)}}
                try:
                    call(self.url, "POST", f"/v1/jobs/{GPU_JOB}/heartbeat", body)
                except Exception as e:  # noqa: BLE001 - reported at the end
                    self.errors.append(repr(e))


class HungMembers(threading.Thread):
    """Two members of HUNG_JOB heartbeating every 0.2 s at step 40: h0
    inside collective 9, h1 not inside, its latest collective 8. The job
    hangs after hang_timeout (2 s)."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.errors = []
        settings = {"min_nodes": 2, "max_nodes": 2, "last_call": 0, "heartbeat_interval": 0.2,
                    "failure_timeout": 30, "health": {"hang_timeout": 2}}
        call(url, "POST", "/v1/jobs", {"name": HUNG_JOB, "settings": settings})
        for i in range(2):
            call(url, "POST", f"/v1/jobs/{HUNG_JOB}/join", {"id": f"h{i}", "host": f"hang-host-{i}", "address": f"127.0.0.1:{29700 + i}"})

    def run(self):
        generation = 0
        while not self.stop.wait(0.2):
            try:
                if generation == 0:
                    generation = call(self.url, "GET", f"/v1/jobs/{HUNG_JOB}")["generation"]
                    continue
                for i, (seq, inside) in enumerate(((9, True), (8, False))):
                    call(self.url, "POST", f"/v1/jobs/{HUNG_JOB}/heartbeat", {
                        "member": f"h{i}", "generation": generation,
                        "metrics": {"step": 40, "step_time": 0.3, "collective_seq": seq, "in_collective": inside}})
            except Exception as e:  # noqa: BLE001 - reported at the end
                self.errors.append(repr(e))


# What the page shows, read from its DOM in one evaluation.
READ_PAGE = r"""(() => {
  const d = window.cohortDashboard;
  const text = (e) => (e ? e.textContent.trim() : null);
  const jobs = {};
  for (const section of document.querySelectorAll("section.job")) {
    const canvases = {};
    for (const c of section.querySelectorAll("canvas[data-chart]")) {
      const visible = c.offsetParent !== null && c.width > 0 && c.height > 0;
      let coloured = 0;
      if (visible) {
        const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < pixels.length; i += 4) {
          const r = pixels[i], g = pixels[i + 1], b = pixels[i + 2], a = pixels[i + 3];
          if (a > 128 && Math.max(r, g, b) - Math.min(r, g, b) > 60) coloured++;
        }
      }
      canvases[c.dataset.chart] = { visible, coloured, datasets: Chart.getChart(c)?.data.datasets.length ?? 0 };
    }
    jobs[section.dataset.job] = {
      summary: text(section.querySelector(".summary")),
      verdict: text(section.querySelector(".verdict")),
      verdict_level: section.querySelector(".verdict").className,
      rounds: [...section.querySelectorAll("table.rounds tbody tr")].map((r) => ({
        generation: r.dataset.generation, open: r.classList.contains("open"),
        cells: [...r.cells].map((c) => c.textContent) })),
      round_bars: section.querySelectorAll("svg.timeline rect.round-open").length,
      failure_marks: [...section.querySelectorAll("svg.timeline g.event.failed")].map((g) => g.dataset.member),
      members: [...section.querySelectorAll("table.members tbody tr")].map((r) => ({
        id: r.dataset.member, cls: r.className, cells: [...r.cells].map((c) => c.textContent) })),
      members_note: text(section.querySelector(".members-note")),
      shards: [...section.querySelectorAll(".shard-bars .epoch")].length,
      canvases,
    };
  }
  const list = [...document.querySelectorAll("#jobs tbody tr")].map((r) => [...r.cells].map((c) => c.textContent));
  return { status: text(document.getElementById("status")), error: d.error, refreshes: d.refreshes,
           list, jobs };
})()"""


def check_page(page, victim, replacement, workers, hang_summary):
    p = page.evaluate(READ_PAGE)
    check(p["error"] is None, f"the page reports an error: {p['error']}")
    check(p["status"].startswith("3 job(s); updated"), f"status line {p['status']!r}")
    names = sorted(row[0] for row in p["list"])
    check(names == [GPU_JOB, HUNG_JOB, "train"], f"job list {p['list']}")
    hung = p["jobs"][HUNG_JOB]
    check(hung["verdict"].startswith("Hung.") and hang_summary in hung["verdict"] and "bad" in hung["verdict_level"],
          f"{HUNG_JOB}: verdict {hung['verdict']!r}, expected the diagnosis {hang_summary!r}")
    train = p["jobs"]["train"]
    gens = [r["generation"] for r in train["rounds"] if not r["open"]]
    check({"1", "2", "3"} <= set(gens), f"rounds table generations {gens}: {train['rounds']}")
    after_kill = [r for r in train["rounds"] if victim in r["cells"][6]]
    check(after_kill and "failed" in after_kill[0]["cells"][3], f"no round names {victim} failed: {train['rounds']}")
    check(victim in train["failure_marks"], f"the timeline has no failure marker for {victim}: {train['failure_marks']}")
    check(train["round_bars"] >= 3, f"{train['round_bars']} round bars in the timeline")
    ids = {m["id"]: m for m in train["members"]}
    expected = {w.member for w in workers} | {replacement}
    check(expected <= set(ids), f"members table {sorted(ids)}, expected {sorted(expected)}")
    check(ids[victim]["cells"][3].startswith("failed"), f"{victim}: state {ids[victim]['cells'][3]!r}")
    raw = [c for m in train["members"] for c in m["cells"] if re.search(r"\d\.\d{5,}", c)]
    check(not raw, f"raw floats in the members table: {raw[:5]}")
    active = [m for m in train["members"] if m["cls"].startswith("active")]
    check(all(re.fullmatch(r"\d+(\.\d)? m?s", m["cells"][5]) for m in active),
          f"step times not in human units: {[m['cells'][5] for m in active]}")
    check(train["shards"] == 8, f"{train['shards']} epoch bars, expected 8")
    for chart in ("step_time", "samples_per_sec", "throughput"):
        c = train["canvases"][chart]
        check(c["visible"] and c["datasets"] > 0 and c["coloured"] > 200, f"train: chart {chart} not drawn: {c}")
    gpu = p["jobs"][GPU_JOB]
    for chart in ("gpu_memory", "gpu_utilization", "gpu_temperature", "step_time", "score"):
        c = gpu["canvases"][chart]
        check(c["visible"] and c["datasets"] >= 3 and c["coloured"] > 200, f"{GPU_JOB}: chart {chart} not drawn: {c}")
    check("straggler" in gpu["verdict"] and "g2" in gpu["verdict"], f"{GPU_JOB}: verdict {gpu['verdict']!r}")
    gpu_rows = {m["id"]: m for m in gpu["members"]}
    check("straggler" in gpu_rows["g2"]["cls"], f"g2's row is not marked a straggler: {gpu_rows['g2']}")
    check(re.fullmatch(r"\d+\.\d GiB of 80\.0 GiB", gpu_rows["g0"]["cells"][8]), f"GPU memory cell {gpu_rows['g0']['cells'][8]!r}")
    return p


def check_units(page):
    """The page's number formats on the issue's examples."""
    got = page.evaluate("""(async () => {
      const f = await import("/dashboard/format.js");
      return [f.seconds(5.000633955001831), f.bytes(1.2 * 2 ** 30), f.ago(185), f.seconds(0.25), f.rate(1234.5),
              f.count(1200), f.ago(0.4), f.seconds(4000)];
    })()""")
    want = ["5.0 s", "1.2 GiB", "3 min ago", "250 ms", "1,235/s", "1,200", "just now", "1.1 h"]
    check(got == want, f"number formats {got}, expected {want}")


def check_table_controls(page):
    """Sorting by step time (twice: descending) puts the slow member first;
    filtering leaves the matching rows."""
    order = page.evaluate(f"""(() => {{
      const s = document.querySelector('section[data-job="{GPU_JOB}"]');
      const th = s.querySelector('table.members th[data-key="step_time"]');
      th.click(); th.click();
      const first = s.querySelector('table.members tbody tr').dataset.member;
      const input = s.querySelector('input.member-filter');
      input.value = 'gpu-host-1';
      input.dispatchEvent(new Event('input'));
      const filtered = [...s.querySelectorAll('table.members tbody tr')].map((r) => r.dataset.member);
      input.value = '';
      input.dispatchEvent(new Event('input'));
      return [first, filtered, s.querySelector('.members-note').textContent];
    }})()""")
    check(order[0] == "g2", f"sorted by step time, descending: first row {order[0]}")
    check(order[1] == ["g1"], f"filtered on gpu-host-1: {order[1]}")


def case_demo(tools, workdir):
    shots = tools.screenshots or workdir
    os.makedirs(shots, exist_ok=True)
    c = Coordinator(tools.coordinator, workdir)
    call(c.url, "POST", "/v1/jobs", {"name": "train", "settings": dict(SETTINGS, min_nodes=3, max_nodes=4)})
    workers = [Worker(tools.train, c.url, f"w{i}", i, workdir) for i in range(4)]
    gpu = GpuMembers(c.url)
    gpu.start()
    hang = HungMembers(c.url)
    hang.start()
    try:
        wait_for(lambda: all(w.rank() is not None for w in workers), "a world of 4", workers)
        victim = next(w for w in workers if w.rank() == 2)
        wait_for(lambda: any("epoch 1/8" in w.output() for w in workers), "the first epoch", workers)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        survivors = [w for w in workers if w is not victim]

        def member_state(m):
            state = call(c.url, "GET", "/v1/jobs/train")
            return next((x["state"] for x in state["members"] if x["id"] == m), None)

        wait_for(lambda: member_state(victim.member) == "failed", "the victim found failed", survivors)
        replacement = Worker(tools.train, c.url, "w4", 2, workdir, restart=1)
        wait_for(lambda: call(c.url, "GET", "/v1/jobs/train")["generation"] >= 3 and member_state("w4") == "active",
                 "the replacement in generation 3", survivors + [replacement])
        # A few seconds of steps in the new world, and the GPU job's straggler found.
        wait_for(lambda: call(c.url, "GET", f"/v1/jobs/{GPU_JOB}")["health"]["stragglers"] == ["g2"],
                 "the GPU job's straggler", survivors, timeout=30)
        hang_state = {}

        def hung():
            hang_state.update(call(c.url, "GET", f"/v1/jobs/{HUNG_JOB}")["health"])
            return hang_state.get("hung")

        wait_for(hung, "the hung job found hung", survivors, timeout=30)
        hang_summary = hang_state["diagnosis"]["summary"]
        time.sleep(2)

        with cdp.Browser(tools.chromium, workdir) as browser:
            page = browser.open(f"{c.url}/#token={TOKEN}", width=1400, height=1000)
            page.wait_for("window.cohortDashboard && window.cohortDashboard.refreshes >= 2", 45, "two refreshes")
            first = check_page(page, victim.member, "w4", workers, hang_summary)
            check_table_controls(page)
            check_units(page)
            refreshes = first["refreshes"]
            page.wait_for(f"window.cohortDashboard.refreshes >= {refreshes + 2}", 20, "the page refreshing by itself")
            later = page.evaluate("window.cohortDashboard.timings.slice(-1)[0]")
            check(later and later["members"] >= 10, f"last refresh {later}")
            timeline = page.evaluate("""(() => {
              const r = document.querySelector('section[data-job="train"] .timeline-box').getBoundingClientRect();
              return {x: r.x + scrollX, y: r.y + scrollY - 30, width: r.width, height: r.height + 40};
            })()""")
            page.screenshot(os.path.join(shots, "dashboard-timeline.png"), timeline)
            page.screenshot(os.path.join(shots, "dashboard.png"))
        for name in ("dashboard.png", "dashboard-timeline.png"):
            size = os.path.getsize(os.path.join(shots, name))
            check(size > 10_000, f"{name}: {size} bytes")
        print(f"demo: screenshots in {shots}", flush=True)
    finally:
        for thread in (gpu, hang):
            thread.stop.set()
            thread.join(timeout=5)
    check(not gpu.errors, f"GPU job heartbeats failed: {gpu.errors[:3]}")
    check(not hang.errors, f"hung job heartbeats failed: {hang.errors[:3]}")


def run_case(tools, name):
    return case_runner.run_case(name, lambda workdir: case_demo(tools, workdir), prefix="cohort-dashboard-",
                                deadline_s=CASE_DEADLINE_S, kill_all=lambda: case_runner.kill_live(children),
                                clean_up=lambda: case_runner.reap(children), expected=(CaseFailed, cdp.BrowserError))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="the cohort-coordinator executable")
    parser.add_argument("--train", required=True, help="the cohort-train executable")
    parser.add_argument("--chromium", help="the Chromium executable (default: chromium on PATH)")
    parser.add_argument("--screenshots", help="where to save the screenshots (default: a temporary directory)")
    args = parser.parse_args()
    args.chromium = cdp.find_chromium(args.chromium or os.environ.get("COHORT_CHROMIUM"))
    if args.chromium is None:
        print("SKIPPED: no Chromium (Debian: apt-get install chromium; or set COHORT_CHROMIUM)", flush=True)
        return SKIP
    if args.screenshots:
        args.screenshots = os.path.abspath(args.screenshots)
    return 0 if run_case(args, "demo") else 1


if __name__ == "__main__":
    sys.exit(main())
