#!/usr/bin/env python3
"""The coordinator's /metrics as Prometheus and Grafana see it. Cases:

  metrics   a coordinator (with a bearer token) and a job whose members
            join, heartbeat with step metrics, one of them fails and the
            rest form a new round: `promtool check metrics` finds no
            problem in /metrics, and the per-member step, step-time and
            samples/s series, the job's step-time histogram, the rounds by
            reason with their durations and the failures hold what the
            members sent
  examples  examples/prometheus: `promtool check config` (the token file
            and target filled in), `promtool check rules`, `promtool test
            rules`; examples/grafana/cohort.json is JSON, every panel has a
            query, and every metric a query or an alert names is in the
            /metrics of the `metrics` case's coordinator
  scrape    Debian's `prometheus` on a free loopback port, with a temporary
            storage directory, a 0.5 s scrape interval and the example's
            scrape config and alerts, scrapes a coordinator while two
            cohort-train workers train; /api/v1/query gives each member's
            step rate (rate() of its steps), which must agree with the step
            time the members report; the training job keeps its `job` label;
            every Grafana query and every alert evaluates without error

    prometheus_metrics.py --coordinator PATH --train PATH [CASE...]

A watchdog kills every child and fails a case that overruns; each case's
processes and temporary directory are removed whatever happens. Standard
library only; needs `promtool` and `prometheus` (Debian's prometheus
package, scripts/deps.sh): a missing one is a failure, not a skip.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import case_runner  # beside this file, so on sys.path when run as a script

from coordinator_http import CaseFailed, check, free_port, request

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(SOURCE, "examples", "prometheus")
DASHBOARD = os.path.join(SOURCE, "examples", "grafana", "cohort.json")
TOKEN = "prometheus-test-token"
CASE_DEADLINE_S = 90.0

children = []  # every process started, for the watchdog


def tool(name):
    path = shutil.which(name)
    check(path is not None, f"`{name}` is not installed (Debian's prometheus package; run scripts/deps.sh)")
    return path


def start_coordinator(exe, workdir):
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    with open(os.path.join(workdir, "coordinator.stderr"), "wb") as err:
        proc = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", "0", "--token-file", token_file],
                                stdout=subprocess.PIPE, stderr=err)
    children.append(proc)
    url = proc.stdout.readline().decode().strip()
    check(url.startswith("http://"), f"the coordinator did not start (exit {proc.poll()})")
    return url, token_file


def call(url, method, path, body=None, expect=(200, 201)):
    status, answer = request(url, method, path, body, token=TOKEN)
    check(status in expect, f"{method} {path}: {status} {answer}")
    return answer


def metrics_text(url):
    status, body = request(url, "GET", "/metrics", token=TOKEN)
    check(status == 200, f"GET /metrics: {status} {body[:300]!r}")
    return body.decode()


def samples(text):
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        out[series] = float(value)
    return out


def wait_until(condition, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        check(time.monotonic() < deadline, f"no {what} within {timeout} s")
        time.sleep(0.05)


# Member b's id has a quote and a backslash, which /metrics must escape.
B = 'b"\\'
B_LABEL = 'b\\"\\\\'


def busy_job(url):
    """Job "m": a, b and c form generation 1; a sends a batch of three steps,
    b and c one each; c's launcher reports it failed; a and b form
    generation 2 and report again. Returns /metrics."""
    call(url, "POST", "/v1/jobs", {"name": "m", "settings": {"min_nodes": 2, "max_nodes": 3, "last_call": 0.2,
                                                              "heartbeat_interval": 0.5, "failure_timeout": 30}})
    for i, m in enumerate(("a", B, "c")):
        call(url, "POST", "/v1/jobs/m/join", {"id": m, "host": f"h{i}", "address": f"127.0.0.1:{29500 + i}"})
    check(call(url, "GET", "/v1/jobs/m")["generation"] == 1, "a, b and c did not form generation 1")
    batch = {"step": 12, "step_time": 0.03, "samples_per_sec": 2000.0,
             "samples": [{"step": s, "step_time": t, "age": 0.0} for s, t in ((10, 0.02), (11, 0.03), (12, 0.03))]}
    call(url, "POST", "/v1/jobs/m/heartbeat", {"member": "a", "generation": 1, "metrics": batch})
    call(url, "POST", "/v1/jobs/m/heartbeat",
         {"member": B, "generation": 1, "metrics": {"step": 11, "step_time": 0.04, "samples_per_sec": 1500.0}})
    call(url, "POST", "/v1/jobs/m/heartbeat", {"member": "c", "generation": 1, "metrics": {"step": 9}})
    call(url, "POST", "/v1/jobs/m/leave", {"member": "c", "failed": "exit status 9"})
    call(url, "POST", "/v1/jobs/m/join", {"id": "a", "host": "h0", "address": "127.0.0.1:29500"})
    call(url, "POST", "/v1/jobs/m/join", {"id": B, "host": "h1", "address": "127.0.0.1:29501"})
    wait_until(lambda: call(url, "GET", "/v1/jobs/m")["generation"] == 2, "generation 2 after c failed")
    call(url, "POST", "/v1/jobs/m/heartbeat",
         {"member": "a", "generation": 2, "metrics": {"step": 13, "step_time": 0.5, "samples_per_sec": 128.0}})
    call(url, "POST", "/v1/jobs/m/heartbeat",
         {"member": B, "generation": 2, "metrics": {"step": 12, "step_time": 0.05, "samples_per_sec": 1280.0}})
    return metrics_text(url)


# ------------------------------------------------------------------ cases

def case_metrics(tools, workdir):
    url, _ = start_coordinator(tools.coordinator, workdir)
    status, _ = request(url, "GET", "/metrics")
    check(status == 401, f"GET /metrics without the token: {status}, expected 401")
    text = busy_job(url)
    promtool = subprocess.run([tool("promtool"), "check", "metrics"], input=text.encode(), capture_output=True,
                              timeout=30)
    problems = (promtool.stdout + promtool.stderr).decode().strip()
    check(promtool.returncode == 0 and not problems,
          f"promtool check metrics (exit {promtool.returncode}): {problems}")
    s = samples(text)

    def expect(series, value):
        check(series in s, f"no {series} in /metrics:\n{text}")
        check(abs(s[series] - value) < 1e-9, f"{series} is {s[series]}, expected {value}")

    expect('cohort_coordinator_member_steps_total{job="m",member="a"}', 13)
    expect(f'cohort_coordinator_member_steps_total{{job="m",member="{B_LABEL}"}}', 12)
    check(not any('member="c"' in k and k.startswith("cohort_coordinator_member_steps_total") for k in s),
          "the failed member c still has a step series")
    expect('cohort_coordinator_member_step_seconds{job="m",member="a"}', 0.5)
    expect(f'cohort_coordinator_member_samples_per_second{{job="m",member="{B_LABEL}"}}', 1280)
    # Every step reported: a's batch of three, b's one, c's none (no step
    # time), then one each in generation 2.
    expect('cohort_coordinator_step_seconds_count{job="m"}', 6)
    expect('cohort_coordinator_step_seconds_sum{job="m"}', 0.02 + 0.03 + 0.03 + 0.04 + 0.5 + 0.05)
    expect('cohort_coordinator_step_seconds_bucket{job="m",le="0.025"}', 1)
    expect('cohort_coordinator_step_seconds_bucket{job="m",le="0.05"}', 5)
    expect('cohort_coordinator_step_seconds_bucket{job="m",le="+Inf"}', 6)
    expect('cohort_coordinator_round_duration_seconds_count{job="m",reason="created"}', 1)
    expect('cohort_coordinator_round_duration_seconds_count{job="m",reason="failed"}', 1)
    expect('cohort_coordinator_round_duration_seconds_count{job="m",reason="left"}', 0)
    # Once every live member is back the round closes, last_call or not:
    # a and b joined right after c failed.
    failed_round = s['cohort_coordinator_round_duration_seconds_sum{job="m",reason="failed"}']
    check(0 <= failed_round < 5, f"the failure's round lasted {failed_round} s")
    expect('cohort_coordinator_round_duration_seconds_bucket{job="m",reason="failed",le="0.1"}', 1 if failed_round <= 0.1 else 0)
    expect('cohort_coordinator_round_duration_seconds_bucket{job="m",reason="failed",le="+Inf"}', 1)
    expect('cohort_coordinator_member_removals_total{job="m",state="failed"}', 1)
    expect('cohort_coordinator_member_removals_total{job="m",state="left"}', 0)
    expect('cohort_coordinator_rounds_total{job="m"}', 2)
    print(f"metrics: promtool found no problem in {len(s)} samples", flush=True)


def families(text):
    """Every name /metrics declares (a # TYPE line, with or without samples
    yet: straggler scores need a few heartbeats' history), histograms'
    _bucket, _sum and _count included."""
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(name)
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
    return names


def metric_names(expr):
    """The metric names a PromQL expression reads (cohort_* and up)."""
    return set(re.findall(r"\b(cohort_[a-z_]+|up)\b(?!\s*\()", expr))


def case_examples(tools, workdir):
    promtool = tool("promtool")
    config_dir = os.path.join(workdir, "prometheus")
    os.makedirs(config_dir)
    shutil.copy(os.path.join(EXAMPLES, "cohort-alerts.yml"), config_dir)
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write(TOKEN + "\n")
    with open(os.path.join(EXAMPLES, "prometheus.yml")) as f:
        config = f.read()
    check("credentials_file: /etc/cohort/coordinator.token" in config, "the example names no token file")
    with open(os.path.join(config_dir, "prometheus.yml"), "w") as f:
        f.write(config.replace("/etc/cohort/coordinator.token", token_file))
    for args, cwd in ((["check", "config", "prometheus.yml"], config_dir),
                      (["check", "rules", "cohort-alerts.yml"], EXAMPLES),
                      (["test", "rules", "cohort-alerts.test.yml"], EXAMPLES)):
        r = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, timeout=60)
        check(r.returncode == 0, f"promtool {' '.join(args)} (exit {r.returncode}): "
                                 f"{(r.stdout + r.stderr).decode().strip()}")

    with open(DASHBOARD) as f:
        try:
            dashboard = json.load(f)
        except json.JSONDecodeError as e:
            raise CaseFailed(f"{DASHBOARD} is not JSON: {e}") from None
    exprs = dashboard_exprs(dashboard)
    with open(os.path.join(EXAMPLES, "cohort-alerts.yml")) as f:
        alert_exprs = re.findall(r"^\s+expr: (.+)$", f.read(), re.M)
    check(len(alert_exprs) == 4, f"expected 4 alerts' expr lines, found {alert_exprs}")

    url, _ = start_coordinator(tools.coordinator, workdir)
    served = families(busy_job(url)) | {"up"}
    for where, expr in exprs + [("alert", e) for e in alert_exprs]:
        names = metric_names(expr)
        check(names, f"{where}: no metric in {expr!r}")
        missing = names - served
        check(not missing, f"{where}: {sorted(missing)} not in the coordinator's /metrics ({expr!r})")
    print(f"examples: config and {len(alert_exprs)} alerts check, {len(exprs)} dashboard queries name served "
          "metrics", flush=True)


def dashboard_exprs(dashboard):
    """[(where, expr)] of every panel's targets and every query variable."""
    check(dashboard.get("panels"), "the dashboard has no panels")
    variables = dashboard.get("templating", {}).get("list", [])
    check(any(v.get("name") == "datasource" and v.get("type") == "datasource" and v.get("query") == "prometheus"
              for v in variables), "no Prometheus data source variable to pick at import")
    out = []
    for p in dashboard["panels"]:
        targets = p.get("targets") or []
        check(targets, f"panel {p.get('title')!r} has no query")
        check(p.get("datasource", {}).get("uid") == "${datasource}",
              f"panel {p.get('title')!r} does not use the data source variable: {p.get('datasource')}")
        for t in targets:
            check(t.get("expr"), f"panel {p.get('title')!r}: a target without expr: {t}")
            out.append((f"panel {p['title']!r}", t["expr"]))
    for v in variables:
        if v.get("type") == "query":
            out.append((f"variable {v['name']!r}", v["definition"]))
    return out


def case_scrape(tools, workdir):
    prometheus = tool("prometheus")
    url, token_file = start_coordinator(tools.coordinator, workdir)
    host_port = url.removeprefix("http://").rstrip("/")
    config_dir = os.path.join(workdir, "prometheus")
    os.makedirs(config_dir)
    shutil.copy(os.path.join(EXAMPLES, "cohort-alerts.yml"), config_dir)
    with open(os.path.join(EXAMPLES, "prometheus.yml")) as f:
        config = f.read()
    config = (config.replace("scrape_interval: 15s", "scrape_interval: 500ms")
              .replace("evaluation_interval: 15s", "evaluation_interval: 500ms")
              .replace("/etc/cohort/coordinator.token", token_file)
              .replace("coordinator.example.com:29400", host_port))
    with open(os.path.join(config_dir, "prometheus.yml"), "w") as f:
        f.write(config)
    port = free_port()
    prom_url = f"http://127.0.0.1:{port}"
    with open(os.path.join(workdir, "prometheus.log"), "wb") as log:
        proc = subprocess.Popen([prometheus, f"--config.file={config_dir}/prometheus.yml",
                                 f"--storage.tsdb.path={workdir}/tsdb", f"--web.listen-address=127.0.0.1:{port}",
                                 "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
    children.append(proc)

    def prometheus_log():
        with open(os.path.join(workdir, "prometheus.log"), errors="replace") as f:
            return f.read()[-2000:]

    def ready():
        check(proc.poll() is None, f"prometheus exited {proc.returncode}: {prometheus_log()}")
        try:
            with urllib.request.urlopen(prom_url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(ready, "ready prometheus", timeout=30)

    call(url, "POST", "/v1/jobs", {"name": "train", "settings": {"min_nodes": 2, "max_nodes": 2,
                                                                  "heartbeat_interval": 0.2, "failure_timeout": 3}})
    step_ms = 100
    flags = ["--epochs", "6", "--shards", "40", "--step-ms", str(step_ms)]
    workers = []
    for i in range(2):
        env = dict(os.environ, COHORT_COORDINATOR=url, COHORT_COORDINATOR_TOKEN=TOKEN, COHORT_JOB="train",
                   COHORT_MEMBER=f"w{i}", LOCAL_RANK=str(i), COHORT_RESTART_COUNT="0")
        with open(os.path.join(workdir, f"w{i}.out"), "wb") as out:
            p = subprocess.Popen([tools.train, *flags, "--weights-out", os.path.join(workdir, f"w{i}.json")],
                                 stdout=out, stderr=subprocess.STDOUT, env=env)
        children.append(p)
        workers.append(p)

    def query(expr):
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{prom_url}/api/v1/query?{q}", timeout=5) as r:
            answer = json.load(r)
        check(answer.get("status") == "success", f"query {expr!r}: {answer}")
        return answer["data"]

    def rates():
        for i, w in enumerate(workers):
            if w.poll() not in (None, 0):
                with open(os.path.join(workdir, f"w{i}.out"), errors="replace") as f:
                    raise CaseFailed(f"worker w{i} exited {w.returncode}: {f.read()[-1500:]}")
        got = query('rate(cohort_coordinator_member_steps_total{job="train"}[3s])')["result"]
        by_member = {r["metric"]["member"]: float(r["value"][1]) for r in got}
        return by_member if len(by_member) == 2 and all(v > 0 for v in by_member.values()) else None

    by_member = wait_until(rates, "step rate for both members in Prometheus", timeout=40)
    # A step takes step_ms of compute plus its lease and the all-reduce: the
    # rate is under 1000/step_ms a second (about 3/s against 10 on a quiet
    # 2-core machine), and even on a loaded one not under a twentieth of it.
    for member, rate in by_member.items():
        check(0.05 * 1000 / step_ms <= rate <= 1.05 * 1000 / step_ms,
              f"{member}'s step rate is {rate:.2f}/s, expected under {1000 / step_ms:.0f}/s (step {step_ms} ms)")
    step_time = {r["metric"]["member"]: float(r["value"][1])
                 for r in query('cohort_coordinator_member_step_seconds{job="train"}')["result"]}
    check(set(step_time) == set(by_member), f"step times for {sorted(step_time)}, rates for {sorted(by_member)}")
    for member, seconds in step_time.items():
        check(step_ms / 1000 * 0.9 <= seconds < 5, f"{member} reports {seconds} s a step (step {step_ms} ms)")
    up = query('up{job="cohort-coordinator"}')["result"]
    check(len(up) == 1 and up[0]["value"][1] == "1", f"up{{job=\"cohort-coordinator\"}}: {up}")
    check(not query("cohort_coordinator_generation{exported_job!=\"\"}")["result"],
          "the training job's label became exported_job: honor_labels is off")

    with open(DASHBOARD) as f:
        exprs = dashboard_exprs(json.load(f))
    for where, expr in exprs:
        if where.startswith("variable"):
            continue
        query(expr.replace("$__rate_interval", "3s").replace("$job", "train"))
    nonempty = [w for w, e in exprs if not w.startswith("variable")
                and query(e.replace("$__rate_interval", "3s").replace("$job", "train"))["result"]]
    check(len(nonempty) >= len(exprs) // 2, f"only {nonempty} of the dashboard's queries have data")

    def rules_evaluated():
        with urllib.request.urlopen(prom_url + "/api/v1/rules", timeout=5) as r:
            groups = json.load(r)["data"]["groups"]
        rules = [rule for g in groups for rule in g["rules"]]
        done = len(rules) == 4 and all(rule.get("lastEvaluation", "").startswith("20") for rule in rules)
        return rules if done else None

    rules = wait_until(rules_evaluated, "the four alerts evaluated", timeout=10)
    bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") != "ok"]
    check(not bad, f"alerts that did not evaluate: {bad}")
    print("scrape: step rates " + ", ".join(f"{m} {r:.2f}/s (step time {step_time[m]:.3f} s)"
                                            for m, r in sorted(by_member.items())) +
          f"; {len(exprs)} dashboard queries and 4 alerts evaluate", flush=True)


CASES = {"metrics": case_metrics, "examples": case_examples, "scrape": case_scrape}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--coordinator", required=True, help="cohort-coordinator")
    parser.add_argument("--train", help="cohort-train (the scrape case)")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    cases = args.cases or list(CASES)
    if "scrape" in cases and not args.train:
        parser.error("the scrape case needs --train")
    failed = 0
    for name in cases:
        passed = case_runner.run_case(name, lambda workdir, n=name: CASES[n](args, workdir),
                                      prefix=f"cohort-prometheus-{name}-", deadline_s=CASE_DEADLINE_S,
                                      kill_all=lambda: case_runner.kill_live(children),
                                      clean_up=lambda: case_runner.reap(children), expected=(CaseFailed,))
        failed += 0 if passed else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
