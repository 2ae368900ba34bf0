#!/usr/bin/env python3
"""The shared-memory transport between separate processes: the real thing.

Starts N comm_shm_worker.py ranks that meet through a tcp:// store hosted by
rank 0 on 127.0.0.1, then judges each one's output. Cases:

  correctness_N          every collective over shm at N ranks (all-reduce for
                         every dtype x op through "shm" and "auto", sizes 0, 1,
                         7, 4097 and 1 MiB + 3 elements; broadcast, allgather,
                         reduce-scatter, async, barrier): results right and
                         bit-identical on every rank, transports "shm"
  correctness_smallslots_N  the same through 80 KiB slots
  kill_N_rankV[_OP]      SIGKILL rank V in the middle of an OP (allreduce by
                         default) over shm: every survivor fails fast, far
                         below the 30 s timeout, with PeerFailed or Closed
                         naming rank V
  stop_N_rankV[_OP]      SIGSTOP rank V instead: the others time out naming it
  mismatch_3             the last rank all-reduces one element more: an error
  kill_startup_4_rankV   SIGKILL rank V at points along construction: the
                         others fail within the connect timeout, naming it
  killall_running_4      SIGKILL every rank in the middle of all-reduces
  killall_startup_4      SIGKILL every rank at points along construction
  exit_MODE_3            every rank leaves after an all-reduce by close(), no
                         close, os._exit, an exception or SIGTERM
  exit_after_barrier_3   ranks os._exit() as their last barrier returns: no
                         other rank may fail in that barrier; _noshm_ with
                         shm off (direct copies and TCP)
  small_devshm_4         /dev/shm a 1 MiB tmpfs, shm_size 8 MiB: a clear error
  small_devshm_default_4 ... or a fallback that works; never a crash (SIGBUS)
  full_devshm_3          a 4 MiB tmpfs that a file fills to 3.5 MiB
  readonly_devshm_3      /dev/shm read-only
  transports_*_3         what each peer goes through: default "shm"; with
                         COHORT_SHM_SIZE=0 "direct"; ranks in separate PID
                         namespaces (process_vm_readv denied) "shm", or "tcp"
                         with shm off, also for only the rank alone in its
                         namespace; COHORT_DIRECT_COPY=0 likewise
  differ_shm_off_3       rank 2 has shm off, the others on: all fall back
                         alike, or all fail up front; no connect timeout
  differ_shm_size_3      each rank asks another shm_size: the same
  hosts_4                ranks labelled as two hosts: shm within each,
                         "hierarchical" and "auto" right
  two_jobs_2             two 2-rank jobs at once on one host (same job id)

No case may leave a file in /dev/shm. As root the driver re-runs itself
under `unshare --mount` and mounts a fresh tmpfs on /dev/shm for each case,
so that it lists /dev/shm before and after with no other test in the way;
the cases that need that, or unshare --pid, fail (not skip) without root.
Otherwise it checks the files the ranks mapped are gone. A watchdog kills
every child and fails the case when it overruns, so the test never hangs.

    comm_shm.py CASE [CASE...]      (or 'all'; COHORT_TEST_SEED sets the seed)
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from comm_shm_failures import (exit_after_barrier, exit_mode, kill, kill_startup, killall_running,
                               killall_startup, mismatch)
from comm_shm_job import (ERRC, PRIVATE, SEED, CaseFailed, Job, all_ok, barriers_hold, check, devshm, identical,
                          no_leftovers, signal_name, transports_are)

MIB = 1 << 20


def run_correct(size, level, expect, env=None, wrap=(), flags=(), deadline_s=240, name="job", hosts=None):
    """A correctness job that must pass on every rank over `expect`."""
    flags = ["--level", level] + list(flags) + (["--hosts", ",".join(hosts)] if hosts else [])
    job = Job(size, "correctness", flags, env=env, wrap=wrap, deadline_s=deadline_s, name=name)
    try:
        job.wait_exit()
        all_ok(job)
        transports_are(job, expect, hosts=hosts)
        shared = identical(job)
        barriers_hold(job)
        if expect == "shm":
            chosen = {r: job.results[r]["choose"] for r in range(size)}
            check(all(set(c.values()) == {"shm"} for c in chosen.values()),
                  "all ranks share a host, but \"auto\" picks %s (by bytes), not shm" % chosen[0], job)
        res = job.results[0]
        print("  %s: %d ranks ok over %s; %d checks each, %d results bit-identical across ranks; "
              "all-reduces %.1f s, all %.1f s; shm %s"
              % (name, size, expect if isinstance(expect, str) else "mixed transports", res["checks"], shared, res["allreduce_s"],
                 max(job.results[r]["total_ms"] for r in range(size)) / 1000, res["describe"]["shm"]))
        return job
    finally:
        job.close()


# ------------------------------------------------------------------- cases

def small_slots(size):
    """An odd shm_size whose slots come out at 80 KiB: a little over the
    64 KiB minimum, under the 128 KiB chunk of the pipelined all-reduce and
    no power of two (docs/collectives.md: a header page and 128 bytes a
    rank, then three slots a rank, rounded down to pages)."""
    return 3 * size * (80 * 1024 + 3001) + 2 * 4096 + 128 * size


def correctness(size, shm_size=None, level="full"):
    """With shm_size, a segment with small slots (small_slots), so most
    messages cross many slot boundaries."""
    print("correctness: %d ranks, every collective over shm, shm_size %s, seed %d"
          % (size, shm_size or "default", SEED))
    flags = ["--shm-size", str(shm_size)] if shm_size else []
    with devshm() as before:
        job = run_correct(size, level, "shm", flags=flags, deadline_s=240)
        if shm_size:
            slot = job.results[0]["describe"]["shm"].get("slot_bytes", 0)
            check(0 < slot < 128 << 10, "slots of %d bytes: not the small ones this case is for" % slot, job)
        no_leftovers(job, before)


def small_devshm(size, tmpfs, filler=0, shm_size=None, readonly=False):
    """A /dev/shm too small for the segment: every rank either fails with an
    error that says so, or falls back (shm_unavailable says why) and works;
    no rank dies of a signal (SIGBUS when a sparse file runs out of pages)."""
    flags = ["--level", "quick"] + (["--shm-size", str(shm_size)] if shm_size is not None else [])
    print("small /dev/shm: %d ranks, a %s%s tmpfs%s, shm_size %s"
          % (size, "read-only " if readonly else "", tmpfs, " holding a %d-byte file" % filler if filler else "",
             shm_size if shm_size is not None else "default"))
    with devshm(tmpfs, filler, readonly) as before:
        job = Job(size, "correctness", flags, deadline_s=90)
        try:
            job.wait_exit()
            crashed = [(r, signal_name(job.procs[r].returncode)) for r in range(size)
                       if job.procs[r].returncode < 0]
            check(not crashed, "ranks crashed: %s" % crashed, job)
            check(all(r in job.results for r in range(size)), "a rank printed no result", job)
            failed = [r for r in range(size) if not job.results[r]["ok"]]
            for r in range(size):
                res = job.results[r]
                print("  rank %d: %s" % (r, "ok, transports %s, shm %s, shm_unavailable %r" % (
                    res["transports"], res["describe"]["shm"], res["describe"]["shm_unavailable"])
                    if res["ok"] else "%s in %s: %s" % (res.get("error_type"), res.get("op"), res.get("error"))))
            if failed:
                check(len(failed) == size, "ranks %s failed but %s went on" % (
                    failed, [r for r in range(size) if r not in failed]), job)
                clear = [r for r in failed if job.results[r].get("op") == "construct"
                         and re.search(r"/dev/shm|shared.memory|\bshm", job.results[r].get("error", ""), re.I)]
                check(clear, "no rank's error says that /dev/shm is too small", job)
                check(all(job.results[r].get("op") == "construct" for r in failed),
                      "ranks failed after construction, not with a clear error up front", job)
            else:
                all_ok(job)
                identical(job)
                uses_shm = {r: job.results[r]["transports"].count("shm") > 0 for r in range(size)}
                if any(uses_shm.values()):
                    # Shrunk to fit is a fallback too, if the segment truly fits.
                    transports_are(job, "shm")
                    nbytes = job.results[0]["describe"]["shm"]["bytes"]
                    print("  shm kept, %d bytes in a %s tmpfs" % (nbytes, tmpfs))
                else:
                    reasons = [job.results[r]["describe"]["shm_unavailable"] for r in range(size)]
                    check(all(isinstance(x, str) and x for x in reasons),
                          "shm not used but shm_unavailable does not say why: %s" % reasons, job)
                    transports_are(job, "direct")  # the next best, process_vm_readv, is allowed
            no_leftovers(job, before)
        finally:
            job.close()


PID_NAMESPACE = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "--")


def transports(expect, env=None, pidns=False, size=3):
    """Which transport each pair of ranks picks when process_vm_readv and
    shm are on or off, and that collectives work over it."""
    print("transports: %d ranks%s, %s: expect %r" % (
        size, " each in its own PID namespace" if pidns else "", env or "default environment", expect))
    with devshm() as before:
        job = run_correct(size, "quick", expect, env=env, wrap=PID_NAMESPACE if pidns else (), deadline_s=90)
        for r in range(size):
            d = job.results[r]["describe"]
            if d.get("shm_unavailable"):
                print("  rank %d: shm_unavailable %r" % (r, d["shm_unavailable"]))
            if d.get("direct_unavailable"):
                print("  rank %d: direct_unavailable %r" % (r, d["direct_unavailable"]))
        no_leftovers(job, before)


def transports_mixed():
    """Ranks 0 and 1 share a PID namespace, rank 2 has its own, shm off:
    0 and 1 copy directly; rank 2 sees neither (though its parent namespace
    sees it), so both sides of each pair with it take TCP."""
    def expect(r, p):
        return ("direct",) if {r, p} == {0, 1} else ("tcp",)

    print("transports: 3 ranks, rank 2 in its own PID namespace, COHORT_SHM_SIZE=0")
    with devshm() as before:
        job = run_correct(3, "quick", expect, env=NOSHM, wrap=lambda r: PID_NAMESPACE if r == 2 else (),
                          deadline_s=90)
        print("  transports: %s" % [job.results[r]["transports"] for r in range(3)])
        print("  direct_unavailable: %s" % [job.results[r]["describe"]["direct_unavailable"] for r in range(3)])
        no_leftovers(job, before)


def host_labels():
    """4 ranks labelled as two hosts (a, a, b, b): shm within each label,
    something else across; "hierarchical" and "auto" right on every rank."""
    hosts = ["a", "a", "b", "b"]

    def expect(r, p):
        return ("shm",) if hosts[r] == hosts[p] else ("direct", "tcp")

    print("host labels: 4 ranks as hosts %s" % hosts)
    with devshm() as before:
        job = run_correct(4, "full", expect, hosts=hosts, deadline_s=180)
        mates = {r: job.results[r]["describe"]["shm"] for r in range(4)}
        print("  transports: %s; shm %s" % ([job.results[r]["transports"] for r in range(4)], mates))
        check(all(m is not None and m["ranks"] == [p for p in range(4) if hosts[p] == hosts[r]]
                  for r, m in mates.items()), "describe()['shm']['ranks'] is not each rank's label-mates", job)
        no_leftovers(job, before)


def settings_differ(name, size=3):
    """The ranks of a host disagree on shared memory: rank 2 has it off
    (COHORT_SHM_SIZE=0 in its environment), or each asks another shm_size.
    Either every rank falls back alike and works, or every rank fails up
    front with an error about shm; nobody waits out the connect timeout."""
    connect_s = 20.0
    if name == "one_off":
        env, flags = (lambda r: NOSHM if r == size - 1 else {}), (lambda r: [])
        what = "rank %d with COHORT_SHM_SIZE=0, the others shm on" % (size - 1)
    else:
        env, flags = None, (lambda r: ["--shm-size", str((1 << 20) << r)])
        what = "shm_size 1, 2 and 4 MiB"
    print("settings differ: %d ranks, %s; connect timeout %.0f s" % (size, what, connect_s))
    with devshm() as before:
        job = Job(size, "correctness", lambda r: ["--level", "quick", "--connect-timeout", str(connect_s)] + flags(r),
                  env=env, deadline_s=100)
        try:
            job.wait_exit()
            results = [job.results.get(r, {}) for r in range(size)]
            for r, res in enumerate(results):
                print("  rank %d: %s" % (r, "ok, transports %s, shm_unavailable %r" % (
                    res["transports"], res["describe"]["shm_unavailable"]) if res.get("ok") else
                    "%s in %s after %.1f s: %s" % (res.get("error_type"), res.get("op"),
                                                   res.get("total_ms", 0) / 1000, res.get("error"))))
            crashed = [r for r in range(size) if job.procs[r].returncode < 0]
            check(not crashed, "ranks %s died of a signal" % crashed, job)
            waited = [r for r, res in enumerate(results) if res.get("code") == ERRC["timeout"]]
            check(not waited, "ranks %s waited out the %.0f s connect timeout instead of seeing that the "
                  "ranks disagree on shared memory" % (waited, connect_s), job)
            if all(res.get("ok") for res in results):
                table = [res["transports"] for res in results]
                check(all(table[r][p] == table[p][r] for r in range(size) for p in range(size)),
                      "the ranks disagree on the transport between them: %s" % table, job)
                identical(job)
            else:
                check(all(not res.get("ok") and res.get("op") == "construct"
                          and re.search(r"shm|shared.memory", res.get("error", ""), re.I) for res in results),
                      "some ranks failed, but not all at construction with an error about shared memory", job)
            no_leftovers(job, before)
        finally:
            job.close()


def two_jobs(size=2):
    """Two jobs with the default job id on one host must not share segments."""
    print("two_jobs: two %d-rank jobs at once, both with job id 'cohort'" % size)
    with devshm() as before:
        results = {}

        def one(name):
            try:
                results[name] = run_correct(size, "quick", "shm", deadline_s=180, name=name)
            except BaseException as e:  # reported below
                results[name] = e

        threads = [threading.Thread(target=one, args=(n,)) for n in ("job A", "job B")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(200)
        problems = ["%s: %s" % (n, r) for n, r in results.items() if isinstance(r, BaseException)]
        if len(results) != 2 or problems:
            raise CaseFailed("\n".join(problems) or "a job did not finish")
        for job in results.values():
            no_leftovers(job, before)


NOSHM = {"COHORT_SHM_SIZE": "0"}
NODIRECT = {"COHORT_DIRECT_COPY": "0"}

# name -> (function, needs a private mount namespace or PID namespaces: root)
CASES = {
    "correctness_2": (lambda: correctness(2), False),
    "correctness_3": (lambda: correctness(3), False),
    "correctness_4": (lambda: correctness(4), False),
    "correctness_8": (lambda: correctness(8), False),
    "correctness_smallslots_3": (lambda: correctness(3, shm_size=small_slots(3)), False),
    "correctness_smallslots_8": (lambda: correctness(8, shm_size=small_slots(8), level="quick"), False),
    "kill_2_rank1": (lambda: kill(2, 1), False),
    "kill_2_rank0": (lambda: kill(2, 0), False),
    "kill_3_rank0": (lambda: kill(3, 0), False),
    "kill_4_rank2": (lambda: kill(4, 2), False),
    "kill_8_rank5": (lambda: kill(8, 5), False),
    "kill_4_rank1_barrier": (lambda: kill(4, 1, "barrier"), False),
    "kill_3_rank2_allgather": (lambda: kill(3, 2, "allgather"), False),
    "kill_3_rank0_broadcast": (lambda: kill(3, 0, "broadcast"), False),
    "stop_3_rank1": (lambda: kill(3, 1, stop=True), False),
    "stop_4_rank0_barrier": (lambda: kill(4, 0, "barrier", stop=True), False),
    "mismatch_3": (mismatch, False),
    "kill_startup_4_rank0": (lambda: kill_startup(4, 0), True),
    "kill_startup_4_rank2": (lambda: kill_startup(4, 2), True),
    "killall_running_4": (killall_running, True),
    "killall_startup_4": (killall_startup, True),
    "exit_close_3": (lambda: exit_mode("close"), True),
    "exit_noclose_3": (lambda: exit_mode("noclose"), True),
    "exit_os_exit_3": (lambda: exit_mode("os_exit"), True),
    "exit_exception_3": (lambda: exit_mode("exception"), True),
    "exit_sigterm_3": (lambda: exit_mode("sigterm"), True),
    "exit_after_barrier_3": (exit_after_barrier, True),
    "exit_after_barrier_noshm_3": (lambda: exit_after_barrier(rounds=60, env=NOSHM), True),
    "small_devshm_4": (lambda: small_devshm(4, "1m", shm_size=8 * MIB), True),
    "small_devshm_default_4": (lambda: small_devshm(4, "1m"), True),
    "full_devshm_3": (lambda: small_devshm(3, "4m", filler=7 * MIB // 2, shm_size=2 * MIB), True),
    "readonly_devshm_3": (lambda: small_devshm(3, "64m", readonly=True), True),
    "transports_default_3": (lambda: transports("shm"), False),
    "transports_noshm_3": (lambda: transports("direct", NOSHM), False),
    "transports_nodirect_3": (lambda: transports("shm", NODIRECT), False),
    "transports_nodirect_noshm_3": (lambda: transports("tcp", dict(NOSHM, **NODIRECT)), False),
    "transports_pidns_3": (lambda: transports("shm", pidns=True), True),
    "transports_pidns_noshm_3": (lambda: transports("tcp", NOSHM, pidns=True), True),
    "transports_pidns_mixed_noshm_3": (transports_mixed, True),
    "hosts_4": (host_labels, False),
    "differ_shm_off_3": (lambda: settings_differ("one_off"), False),
    "differ_shm_size_3": (lambda: settings_differ("sizes"), False),
    "two_jobs_2": (two_jobs, False),
}


def enter_private_namespace(names):
    """As root, re-runs this script in a mount namespace of its own (the
    same process: exec), where each case mounts its own /dev/shm."""
    if PRIVATE:
        return
    needs_root = [n for n in names if CASES[n][1]]
    if os.geteuid() != 0 or not shutil.which("unshare"):
        if needs_root:
            sys.exit("FAIL %s: these cases need root and unshare(1) (util-linux) to mount a private "
                     "/dev/shm and start ranks in PID namespaces; run ctest as root (CI does)"
                     % ", ".join(needs_root))
        print("not root: /dev/shm is shared with other tests, so only the files the ranks mapped are checked")
        return
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=20)
    if probe.returncode != 0:
        if needs_root:
            sys.exit("FAIL %s: unshare --mount failed: %s" % (", ".join(needs_root), probe.stderr.strip()))
        print("unshare --mount failed (%s): /dev/shm is shared with other tests" % probe.stderr.strip())
        return
    sys.stdout.flush()
    env = dict(os.environ, COHORT_SHM_TEST_PRIVATE="1")
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", "--", sys.executable,
                           os.path.abspath(__file__)] + sys.argv[1:], env)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    parser.add_argument("cases", nargs="+", help="case names, or 'all': " + ", ".join(CASES))
    args = parser.parse_args()
    names = list(CASES) if args.cases == ["all"] else args.cases
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error("unknown case(s) %s; known: %s" % (", ".join(unknown), ", ".join(CASES)))
    try:
        import numpy  # noqa: F401  (the ranks' references)
    except ImportError:
        sys.exit("FAIL: %s has no numpy, which the ranks compute their references with; configure with "
                 "-DPython3_EXECUTABLE=/usr/bin/python3 (as scripts/test.sh does) or install numpy"
                 % sys.executable)
    enter_private_namespace(names)
    failed = 0
    for name in names:
        for _ in range(args.repeat):
            start = time.monotonic()
            try:
                CASES[name][0]()
                print("PASS %s (%.1f s)" % (name, time.monotonic() - start))
            except CaseFailed as e:
                failed += 1
                print("FAIL %s (%.1f s): %s" % (name, time.monotonic() - start, e))
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
