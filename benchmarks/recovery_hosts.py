"""Host scenarios of bench_recovery.py, on emulated hosts
(tests/integration/hosts.py, docs/hosts.md; root only).

Host 0 runs the cohort-coordinator (on its address, 10.77.0.1) and node a's
cohort-run; host 1 runs node b's; each launcher has 2 workers of the
training demo, so the world is 4, and only the network joins the two
hosts. The job state is polled from a thread that entered host 0's network
namespace. Once the world of 4 trains (and no earlier than --kill-at):

  host-kill       every process of host 1 gets SIGKILL (Cluster.kill_processes):
                  its kernel closes their connections, so node a's workers
                  learn at once, but no launcher reports b's workers, and
                  node a's run with --no-report-dead: they only ask for a
                  round (the anchor: the round waits last_call for b's).
  host-kill-report
                  the same kill, node a's workers reporting the peers whose
                  connections closed without a goodbye (cohort-train's
                  default: Communicator::dead_ranks, Membership::report_dead);
                  nothing in this program posts anything.
  host-partition  host 1's link goes down (Cluster.link_down): nothing is
                  closed, only the coordinator's failure timeout can tell.
  host-heal       the same, and the link comes back up --heal-after s
                  later: phases for node a as for host-partition, then
                  link up → host 1's workers train again in a world with
                  them, and a check that they did not train in a stale
                  world in between.

Phases for node a: kill → the coordinator opens a round (detection) →
closes it (new round) → the new world's first shard reported (training
again), as bench_recovery's 'node' scenarios.
"""

import os
import re
import signal
import subprocess
import sys
import time

import bench_recovery as br

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import hosts  # noqa: E402

JOB = "recovery"
PORT = 29400  # each host has its own ports: nothing else can hold it
B_MEMBERS = {"b-0", "b-1"}
# host-heal trains longer, so the job outlasts the partition and the rejoin.
HEAL_TRAIN_FLAGS = ["--epochs", "60", "--shards", "64", "--step-ms", "100"]
# A worker's output that only a step in a world can print.
TRAINED_LINE = re.compile(r"^\[(b-\d+)\] (epoch \d+/\d+: loss|shard_done\(|shard \d+ of epoch \d+:)")

TITLES = {
    "host-kill": "SIGKILL of every process of host 1 (2 hosts x 2 workers); phases on host 0",
    "host-partition": "host 1's link down (2 hosts x 2 workers); phases on host 0",
    "host-heal": "host 1's link down, then up again; phases on host 0, then host 1's return",
    "host-kill-report": "SIGKILL of every process of host 1, the survivors reporting their dead peers "
                        "(Membership::report_dead); phases on host 0",
}
REPORT_ROWS = [
    ("reported", "kill → the last dead peer marked failed on a survivor's report (`POST .../report`)"),
]
HEAL_ROWS = [
    ("back_launcher", "link up → host 1's cohort-run has a `round_formed` with its workers"),
    ("back_round", "link up → the coordinator closes that round"),
    ("back_training", "**link up → that world's first step (host 1 trains again)**"),
    ("back_total", "link down → host 1 trains again"),
]


def unsupported():
    """Why these scenarios cannot run here, or None."""
    return hosts.support()


def start_coordinator(args, c, workdir, name):
    err = open(os.path.join(workdir, f"{name}.coordinator.log"), "w")
    proc = c.run(0, [args.coordinator, "--host", c.address(0), "--port", str(PORT)], env=dict(os.environ),
                 stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    err.close()
    url = proc.stdout.readline().decode().strip()
    if not url.startswith("http://"):
        proc.kill()
        proc.wait()
        raise br.Missing(f"cohort-coordinator on host 0 printed '{url}' instead of its URL")
    return proc, url


def launcher_on(args, c, host, node, url, workdir, name, flags):
    cmd = [args.run, "--coordinator", url, "--job", JOB, "--nnodes", "2", "--nproc-per-node", "2", "--node-id",
           node, "--events", "{EVENTS}", "--", args.train] + flags

    def spawn(argv, **popen):
        return c.run(host, argv, env=dict(os.environ), **popen)

    return br.Launcher(f"{name}-{node}", cmd, workdir, spawn=spawn)


def run_host(args, workdir, index, scenario):
    try:
        return run_on_hosts(args, workdir, index, scenario)
    except hosts.HostsError as e:
        raise br.Missing(f"emulated hosts: {e}") from None


def run_on_hosts(args, workdir, index, scenario):
    name = f"{scenario}-{index}"
    flags = HEAL_TRAIN_FLAGS if scenario == "host-heal" else args.train_flags
    if scenario == "host-kill":
        flags = flags + ["--no-report-dead"]
    with hosts.Cluster(2) as c:
        coordinator, url = start_coordinator(args, c, workdir, name)
        watch = br.JobWatch(url, JOB, netns=f"/proc/{c.hosts[0].pid}/ns/net")
        launchers = []
        try:
            a = launcher_on(args, c, 0, "a", url, workdir, name, flags)
            launchers.append(a)
            b = launcher_on(args, c, 1, "b", url, workdir, name, flags)
            launchers.append(b)
            deadline = time.monotonic() + args.timeout
            br.wait_full_world(a, b, 4, args.kill_at, deadline)
            kill_mono = time.monotonic()
            if scenario in ("host-kill", "host-kill-report"):
                n = c.kill_processes(1, signal.SIGKILL)
                br.log(f"  host 1: SIGKILL to its {n} processes")
            else:
                c.link_down(1)
                br.log("  host 1: link down")
            if scenario == "host-heal":
                return heal(args, c, a, b, watch, kill_mono)
            code = a.wait(max(1.0, deadline - time.monotonic()))
            watch.stop()
            if code is None:
                raise br.Missing(f"node a did not finish within {args.timeout:g} s (--timeout); last lines:\n{a.tail()}")
            if code != 0:
                raise br.Missing(f"node a's cohort-run exited {code}{outside_kills(a)}; last lines:\n{a.tail()}")
            watch.offset = a.offset()
            p = br.analyze_node(a.events(), kill_mono - watch.offset, watch, B_MEMBERS, a.synced())
            if scenario == "host-kill-report":
                p.update(reported(watch, kill_mono))
            return p
        finally:
            watch.stop()
            for launcher in launchers:
                launcher.kill()
            coordinator.kill()
            coordinator.wait()


def outside_kills(a):
    """This program never signals host 0's workers: a worker_failed there
    by a signal came from elsewhere on the machine (another test killing
    processes it did not start)."""
    try:
        killed = [e for e in a.events() if e["event"] == "worker_failed" and e.get("signal")]
    except br.Missing:
        return ""
    if not killed:
        return ""
    named = ", ".join(f"{e.get('worker')} by signal {e.get('signal')} at {e['t']:.2f} s" for e in killed)
    return f" (host 0's workers were killed from outside this benchmark: {named})"


def heal(args, c, a, b, watch, down_mono):
    """Link up after --heal-after s; phases for node a, then until host 1's
    workers train in a world that has them (at most --rejoin-timeout s)."""
    while time.monotonic() < down_mono + args.heal_after:
        time.sleep(0.01)
    c.link_up(1)
    up_mono = time.monotonic()
    br.log(f"  host 1: link up after {up_mono - down_mono:.2f} s")
    limit = up_mono + args.rejoin_timeout
    back = None
    while back is None:
        if time.monotonic() > limit:
            raise br.Missing(f"host 1's workers did not train again within {args.rejoin_timeout:g} s of the link "
                             f"coming back (--rejoin-timeout); host 1's last lines:\n{b.tail()}")
        if b.proc.poll() is not None:
            raise br.Missing(f"host 1's cohort-run exited {b.proc.poll()} before its workers trained again; "
                             f"last lines:\n{b.tail()}")
        if a.proc.poll() is not None:
            raise br.Missing(f"node a's cohort-run exited {a.proc.poll()} before host 1 came back (the job ended: "
                             f"more epochs?){outside_kills(a)}; last lines:\n{a.tail()}")
        back = back_world(b, up_mono, watch)
        time.sleep(0.05)
    time.sleep(0.3)  # a few more polls past that step
    watch.stop()
    watch.offset = a.offset()
    kill_t = down_mono - watch.offset
    p = br.analyze_node(a.events(), kill_t, watch, B_MEMBERS, a.synced(), finished=False)
    gen, formed_mono = back
    up_t = up_mono - watch.offset
    step = watch.first_step(gen)
    closed = watch.round_closed(gen)
    if step is None or closed is None:
        raise br.Missing(f"the coordinator's state has no round or step of generation {gen}, host 1's return")
    p.update({
        "heal_after": up_mono - down_mono,
        "back_generation": gen,
        "back_launcher": formed_mono - up_mono,
        "back_round": closed - up_t,
        "back_training": step - up_t,
        "back_total": step - kill_t,
    })
    stale = stale_training(b, down_mono, formed_mono, gen, watch, kill_t)
    if stale:
        raise br.Missing(f"host 1 trained in a stale world while cut off: {stale}")
    p["stale"] = "none"
    return p


def back_world(b, up_mono, watch):
    """(generation, monotonic time) of the first round_formed on host 1's
    launcher after the heal whose workers include b's, once the coordinator
    has a step of that world; None before."""
    try:
        events = b.events()
    except br.Missing:
        return None
    offset = b.offset()
    for e in events:
        if e["event"] != "round_formed" or offset + e["t"] < up_mono - 0.05:
            continue
        if not B_MEMBERS <= set(e.get("workers", [])):
            continue
        watch.offset = 0.0  # first_step in monotonic time here
        if watch.first_step(e["generation"]) is not None:
            return e["generation"], offset + e["t"]
    return None


def stale_training(b, down_mono, formed_mono, back_gen, watch, kill_t):
    """What host 1's workers did between the partition and the world that
    brought them back that only training in a world does: a state synced
    in another world, a step's output, or the coordinator counting them
    active in a generation without them. Empty when nothing."""
    found = []
    for now, text in list(b.lines):
        if down_mono <= now < formed_mono and TRAINED_LINE.match(text):
            found.append(f"host 1 printed '{text}' {now - down_mono:.2f} s after the link went down")
    for t, member, g in b.synced():
        mono = t + b.offset()
        if down_mono <= mono < formed_mono + 0.05 and g != back_gen:
            found.append(f"{member} synced its state in world {g} {mono - down_mono:.2f} s after the link went down")
    g_down = max((g for now, g, _, _ in watch.samples if now - watch.offset <= kill_t), default=0)
    for now, g, _, states in watch.samples:
        if now - watch.offset > kill_t and g_down < g < back_gen:
            active = sorted(m for m in B_MEMBERS if states.get(m) == "active")
            if active:
                found.append(f"the coordinator had {', '.join(active)} active in generation {g}")
                break
    return "; ".join(found[:4])


def reported(watch, kill_mono):
    """When the coordinator had every member of host 1 failed on a
    survivor's report (its reason says "reported dead by node ..."), from
    the job states polled after the kill."""
    members = {m.get("id"): m for m in watch.state.get("members", [])}
    why = {b: (members.get(b) or {}).get("reason", "") for b in B_MEMBERS}
    late = [f"{b}: {why[b] or 'no reason'}" for b in sorted(B_MEMBERS) if not why[b].startswith("reported dead by")]
    if late:
        raise br.Missing("host 1's members were not failed on a survivor's report (" + "; ".join(late) + ")")
    for now, _, _, states in watch.samples:
        if now >= kill_mono and all(states.get(b) == "failed" for b in B_MEMBERS):
            return {"reported": now - kill_mono, "reported_members": len(B_MEMBERS)}
    raise br.Missing("the polled job states never had every member of host 1 failed")
