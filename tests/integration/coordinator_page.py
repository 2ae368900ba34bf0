#!/usr/bin/env python3
"""The coordinator's status page (GET /) as a browser shows it.

Starts the cohort-coordinator executable, forms a 2-node job over plain HTTP
(urllib) with members heartbeating a step metric, then renders the page in
headless Chromium (--dump-dom, with a virtual-time budget so the page's
script fetches the JSON API and fills its tables) and checks what it shows.
Cases:

  members   the job's name, phase and generation; each member's rank (0 and
            1), id, host, state (active), last heartbeat ("3 s ago") and
            step ("1,200"). Then one
            member goes silent: once the coordinator declares it failed, the
            page shows it failed, the round the failure opened, and the
            other member still active. Then the other member leaves: the
            page shows it left.
  token     with --token-file: GET / needs no token, the API does; the page
            opened as http://HOST:PORT/#token=TOKEN shows the members, and
            opened without the fragment it says it cannot reach the
            coordinator.

    coordinator_page.py --coordinator PATH [--chromium PATH] CASE [CASE...]

Exits 77 (skipped) when no Chromium is installed (Debian: apt-get install
chromium). A watchdog kills every child and fails the case when it
overruns, so the test never hangs. Standard library only.
"""

import argparse
import html.parser
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import case_runner  # beside this file, so on sys.path when run as a script
import urllib.error
import urllib.request

CASE_DEADLINE_S = 100.0
CHROMIUM_TIMEOUT_S = 40.0     # one page dump; Chromium starts slowly on busy cores
FAILURE_TIMEOUT_S = 5.0       # the job's: how long a silent member takes to fail
STEPS = {"node-alpha": 1200, "node-beta": 3400}
HOSTS = {"node-alpha": "host-alpha", "node-beta": "host-beta"}
JOB = "page-job"
TOKEN = "page-secret-7f3a"
SKIP = 77


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


children = []  # every process started, for the watchdog: (Popen, is a process group)


def kill_child(proc, group):
    if proc.poll() is None or group:
        try:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)  # Chromium and its helpers
            else:
                proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------- coordinator

class Coordinator:
    """One cohort-coordinator process on a free port; its stderr goes to a file."""

    def __init__(self, exe, workdir, extra=()):
        self.stderr_path = os.path.join(workdir, "coordinator.stderr")
        self.stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen([exe, "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=self.stderr_file)
        children.append((self.proc, False))
        self.url = self.proc.stdout.readline().decode().strip()
        check(self.url.startswith("http://"),
              f"the coordinator did not start (exit {self.proc.poll()}): {self.stderr()}")

    def stderr(self):
        self.stderr_file.flush()
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def request(url, method, path, body=None, token=None, timeout=10):
    """(status, content type, parsed JSON or raw bytes)."""
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, payload, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, payload, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, ctype, json.loads(payload)
    return status, ctype, payload


def ok(url, method, path, body=None, token=None, expect=(200, 201)):
    status, _, answer = request(url, method, path, body, token)
    check(status in expect, f"{method} {path}: {status} {answer}")
    return answer


class Heartbeats(threading.Thread):
    """A member heartbeating every 0.25 s with its step; stop() makes it silent."""

    def __init__(self, url, member, generation, token=None):
        super().__init__(daemon=True)
        self.url, self.member, self.generation, self.token = url, member, generation, token
        self.silent = threading.Event()
        self.bad = []

    def run(self):
        while not self.silent.wait(0.25):
            try:
                status, _, answer = request(
                    self.url, "POST", f"/v1/jobs/{JOB}/heartbeat",
                    {"member": self.member, "generation": self.generation,
                     "metrics": {"step": STEPS[self.member], "step_time": 0.5}},
                    self.token, timeout=5)
            except OSError as e:
                self.bad.append(repr(e))
                continue
            if status != 200:
                self.bad.append((status, answer))


def form_job(url, token=None):
    """A running 2-node job whose members heartbeat; (heartbeats by member, ranks)."""
    settings = {"min_nodes": 2, "max_nodes": 2, "last_call": 0, "heartbeat_interval": 0.25,
                "failure_timeout": FAILURE_TIMEOUT_S}
    ok(url, "POST", "/v1/jobs", {"name": JOB, "settings": settings}, token)
    for i, m in enumerate(STEPS):
        ok(url, "POST", f"/v1/jobs/{JOB}/join",
           {"id": m, "host": HOSTS[m], "address": f"127.0.0.1:{29500 + i}"}, token)
    worlds = {}
    deadline = time.monotonic() + 15
    while len(worlds) < len(STEPS):
        check(time.monotonic() < deadline, f"the world did not form within 15 s: {worlds}")
        for m in STEPS:
            w = ok(url, "GET", f"/v1/jobs/{JOB}/world?member={m}", token=token, expect=(200, 503))
            if w.get("state") == "active":
                worlds[m] = w
        time.sleep(0.05)
    ranks = {m: w["rank"] for m, w in worlds.items()}
    check(sorted(ranks.values()) == [0, 1], f"ranks {ranks}")
    beats = {m: Heartbeats(url, m, worlds[m]["generation"], token) for m in STEPS}
    for b in beats.values():
        b.start()
    # Wait until the coordinator has both steps, so the page has them to show.
    deadline = time.monotonic() + 15
    while True:
        state = ok(url, "GET", f"/v1/jobs/{JOB}", token=token)
        steps = {m["id"]: m.get("step") for m in state["members"]}
        if steps == STEPS:
            break
        check(time.monotonic() < deadline, f"steps not reported within 15 s: {steps}")
        time.sleep(0.1)
    return beats, ranks


# ---------------------------------------------------------------- chromium

def find_chromium(given):
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def dump_dom(chromium, page_url, workdir, label):
    """The page's DOM after Chromium ran its script for 5 s of virtual time."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
    command = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               "--disable-background-networking", "--disable-component-update",
               f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page_url]
    log = os.path.join(workdir, f"chromium-{label}.stderr")
    last = None
    for attempt in (1, 2):  # Chromium itself (not the page) may fail to start once on a loaded machine
        print(f"{label}: {shlex.join(command)}", flush=True)
        started = time.monotonic()
        with open(log, "wb") as err:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            children.append((proc, True))
            try:
                out, _ = proc.communicate(timeout=CHROMIUM_TIMEOUT_S)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                out, rc = b"", None
            finally:
                kill_child(proc, True)  # its helpers too, whether or not it finished
                children.remove((proc, True))
        took = time.monotonic() - started
        dom = out.decode(errors="replace")
        if rc == 0 and "<body" in dom:
            print(f"{label}: dumped {len(dom)} bytes in {took:.1f} s", flush=True)
            return dom
        with open(log, "rb") as f:
            tail = f.read().decode(errors="replace")[-3000:]
        why = f"timed out after {CHROMIUM_TIMEOUT_S} s" if rc is None else f"exit {rc}"
        last = f"chromium {why} (attempt {attempt}); stdout {dom[:2000]!r}; stderr tail:\n{tail}"
        print(f"{label}: {last}", file=sys.stderr, flush=True)
    raise CaseFailed(last)


class PageReader(html.parser.HTMLParser):
    """What the page shows: the status line and, per job section, its title,
    summary and member rows (cell texts and the state cell's class)."""

    def __init__(self):
        super().__init__()
        self.status = ""
        self.jobs = {}
        self._job = None
        self._row = None
        self._cell = None
        self._text = None    # where character data goes: (dict, key)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("id") == "status":
            self._text = (self.__dict__, "status")
        elif tag == "section" and "data-job" in a:
            self._job = {"title": "", "summary": "", "rows": {}}
            self.jobs[a["data-job"]] = self._job
        elif self._job is not None and tag == "h2":
            self._text = (self._job, "title")
        elif self._job is not None and tag == "div" and a.get("class") == "summary":
            self._text = (self._job, "summary")
        elif self._job is not None and tag == "tr" and "data-member" in a:
            self._row = {"cells": [], "classes": [], "row_class": a.get("class") or ""}
            self._job["rows"][a["data-member"]] = self._row
        elif self._row is not None and tag == "td":
            self._row["cells"].append("")
            self._row["classes"].append(a.get("class") or "")
            self._cell = len(self._row["cells"]) - 1

    def handle_endtag(self, tag):
        if tag in ("div", "h2"):
            self._text = None
        elif tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "section":
            self._job = None

    def handle_data(self, data):
        if self._cell is not None:
            self._row["cells"][self._cell] += data
        elif self._text is not None:
            target, key = self._text
            target[key] += data


def read_page(dom):
    reader = PageReader()
    reader.feed(dom)
    reader.close()
    return reader


COLUMNS = ["rank", "member", "host", "state", "step", "step time", "samples/s", "straggler score",
           "GPU memory", "GPU util.", "GPU temp.", "last heartbeat"]


def rows_of(page, job):
    """{member: {column: cell text, "class": the member's state}} of the members table."""
    check(job in page.jobs, f"job {job} not on the page (status {page.status!r}; jobs {sorted(page.jobs)})")
    rows = {}
    for member, row in page.jobs[job]["rows"].items():
        check(len(row["cells"]) == len(COLUMNS), f"{member}: cells {row['cells']}")
        rows[member] = dict(zip(COLUMNS, (c.strip() for c in row["cells"])))
        rows[member]["class"] = row["row_class"].split()[0] if row["row_class"] else ""
    return rows


def check_heartbeat_cell(text, member):
    """"just now" or "N s ago" with N under a minute."""
    if text == "just now":
        return
    check(text.endswith(" s ago"), f"{member}: last heartbeat {text!r}")
    age = int(text[:-len(" s ago")])
    check(0 <= age < 60, f"{member}: last heartbeat {text!r}")


def check_running_page(page, ranks, label):
    """Both members active with their rank, host and step."""
    check(page.status.startswith("1 job(s); updated"), f"{label}: status line {page.status!r}")
    job = page.jobs.get(JOB)
    check(job is not None, f"{label}: job {JOB} not on the page")
    check(job["title"].strip() == f"job {JOB}", f"{label}: title {job['title']!r}")
    check(job["summary"].startswith("phase running, generation 1, world size 2"),
          f"{label}: summary {job['summary']!r}")
    rows = rows_of(page, JOB)
    check(sorted(rows) == sorted(STEPS), f"{label}: members {sorted(rows)}")
    order = [m for m in job["rows"]]
    check(order == sorted(STEPS, key=lambda m: ranks[m]), f"{label}: rows not in rank order: {order}")
    for m, r in rows.items():
        check(r["member"] == m, f"{label}: {m}: member cell {r['member']!r}")
        check(r["rank"] == str(ranks[m]), f"{label}: {m}: rank {r['rank']!r}, want {ranks[m]}")
        check(r["host"] == HOSTS[m], f"{label}: {m}: host {r['host']!r}")
        check(r["state"] == "active" and r["class"] == "active", f"{label}: {m}: state {r['state']!r} ({r['class']})")
        check(r["step"] == f"{STEPS[m]:,}", f"{label}: {m}: step {r['step']!r}, want {STEPS[m]:,}")
        check(r["step time"] == "500 ms", f"{label}: {m}: step time {r['step time']!r}, want 500 ms")
        check_heartbeat_cell(r["last heartbeat"], m)
    return rows


def checked_dump(chromium, page_url, workdir, label, checker):
    """Dumps the page and runs checker(page); on failure prints the DOM."""
    dom = dump_dom(chromium, page_url, workdir, label)
    try:
        return checker(read_page(dom))
    except CaseFailed:
        print(f"{label}: the dumped DOM:\n{dom}", file=sys.stderr, flush=True)
        raise


# ------------------------------------------------------------------- cases

def case_members(exe, chromium, workdir):
    c = Coordinator(exe, workdir)
    url = c.url
    status, ctype, body = request(url, "GET", "/")
    check(status == 200 and ctype.startswith("text/html") and b"/dashboard/dashboard.js" in body,
          f"GET /: {status} {ctype} {body[:200]!r}")
    beats, ranks = form_job(url)
    page_url = url + "/"

    checked_dump(chromium, page_url, workdir, "members: running",
                 lambda page: check_running_page(page, ranks, "running"))

    # node-beta goes silent: the coordinator fails it and opens a round.
    silent, other = "node-beta", "node-alpha"
    beats[silent].silent.set()
    beats[silent].join()
    deadline = time.monotonic() + 6 * FAILURE_TIMEOUT_S
    while True:
        state = ok(url, "GET", f"/v1/jobs/{JOB}")
        states = {m["id"]: m["state"] for m in state["members"]}
        if states[silent] == "failed":
            break
        check(time.monotonic() < deadline, f"{silent} not failed after {6 * FAILURE_TIMEOUT_S} s: {states}")
        time.sleep(0.1)
    reason = next(m.get("reason", "") for m in state["members"] if m["id"] == silent)
    print(f"members: {silent} failed ({reason}); phase {state['phase']}", flush=True)

    def after_failure(page):
        rows = rows_of(page, JOB)
        summary = page.jobs[JOB]["summary"]
        check(summary.startswith("phase rendezvous, generation 1, world size 2;") and
              f"round open: node '{silent}' failed" in summary, f"failed: summary {summary!r}")
        s = rows[silent]
        check(s["state"].startswith("failed") and s["class"] == "failed", f"failed: {silent}: state {s['state']!r}")
        check(s["rank"] == "", f"failed: {silent}: rank {s['rank']!r}, want none")
        check(s["host"] == HOSTS[silent] and s["step"] == f"{STEPS[silent]:,}", f"failed: {silent}: {s}")
        check("no heartbeat for" in s["state"] and ".0000" not in s["state"], f"failed: {silent}: reason {s['state']!r}")
        o = rows[other]
        check(o["state"] == "active" and o["rank"] == str(ranks[other]), f"failed: {other}: {o}")
        check(list(page.jobs[JOB]["rows"])[0] == other, f"failed: the active member is not first: {list(rows)}")

    checked_dump(chromium, page_url, workdir, "members: one failed", after_failure)

    # node-alpha leaves.
    beats[other].silent.set()
    beats[other].join()
    ok(url, "POST", f"/v1/jobs/{JOB}/leave", {"member": other})

    def after_leave(page):
        rows = rows_of(page, JOB)
        o = rows[other]
        check(o["state"].startswith("left") and o["class"] == "left" and o["rank"] == "",
              f"left: {other}: {o}")
        check(rows[silent]["state"].startswith("failed"), f"left: {silent}: {rows[silent]}")

    checked_dump(chromium, page_url, workdir, "members: one left", after_leave)
    for b in beats.values():
        check(not b.bad, f"{b.member}: heartbeats answered {b.bad[:3]}")
    check(c.terminate() == 0, f"SIGTERM: exit {c.proc.returncode}: {c.stderr()}")
    print("members: ok", flush=True)


def case_token(exe, chromium, workdir):
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    c = Coordinator(exe, workdir, ["--token-file", token_file])
    url = c.url
    status, ctype, body = request(url, "GET", "/")
    check(status == 200 and ctype.startswith("text/html"), f"GET / without a token: {status} {ctype}")
    status, _, body = request(url, "GET", "/v1/jobs")
    check(status == 401, f"GET /v1/jobs without a token: {status} {body}")
    beats, ranks = form_job(url, TOKEN)

    checked_dump(chromium, f"{url}/#token={TOKEN}", workdir, "token: with the fragment",
                 lambda page: check_running_page(page, ranks, "token"))

    def refused(page):
        check(page.status.startswith("cannot reach the coordinator:"), f"no token: status {page.status!r}")
        check(not page.jobs, f"no token: jobs shown {sorted(page.jobs)}")

    checked_dump(chromium, url + "/", workdir, "token: without the fragment", refused)
    for b in beats.values():
        b.silent.set()
        b.join()
        check(not b.bad, f"{b.member}: heartbeats answered {b.bad[:3]}")
    check(c.terminate() == 0, f"SIGTERM: exit {c.proc.returncode}: {c.stderr()}")
    print("token: ok", flush=True)


CASES = {"members": case_members, "token": case_token}


def kill_children():
    for p, group in list(children):
        kill_child(p, group)


def reap_children():
    kill_children()
    children.clear()


def run_case(exe, chromium, name):
    return case_runner.run_case(name, lambda workdir: CASES[name](exe, chromium, workdir),
                                prefix=f"cohort-page-{name}-", deadline_s=CASE_DEADLINE_S,
                                kill_all=kill_children, clean_up=reap_children, expected=(CaseFailed,))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True, help="the cohort-coordinator executable")
    parser.add_argument("--chromium", help="the Chromium executable (default: chromium on PATH)")
    parser.add_argument("cases", nargs="+", choices=sorted(CASES))
    args = parser.parse_args()
    chromium = find_chromium(args.chromium or os.environ.get("COHORT_CHROMIUM"))
    if chromium is None:
        print("SKIPPED: no Chromium to render the status page (Debian: apt-get install chromium; "
              "or set COHORT_CHROMIUM)", flush=True)
        return SKIP
    failed = [c for c in args.cases if not run_case(args.coordinator, chromium, c)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
