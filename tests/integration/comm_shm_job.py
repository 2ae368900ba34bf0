"""The ranks of one comm_shm.py case: comm_shm_worker.py processes that meet
through a tcp:// store on 127.0.0.1, their output lines as they come, a
watchdog that kills them all when the case overruns, /dev/shm before and
after, and the checks every case makes of the ranks' results."""

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "comm_shm_worker.py")
PRIVATE = os.environ.get("COHORT_SHM_TEST_PRIVATE") == "1"  # in our own mount namespace
ERRC = {"timeout": 6, "peer_failed": 13, "closed": 15}
SEED = int(os.environ.get("COHORT_TEST_SEED", "7"))


class CaseFailed(Exception):
    pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(extra):
    """Our environment without the knobs under test, plus the case's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("COHORT_SHM_SIZE", "COHORT_DIRECT_COPY")}
    env.update(extra or {})
    return env


class Job:
    """N ranks, their output lines as they come, and a watchdog. flags, env
    and wrap may be functions of the rank. worker: the rank's script; store:
    its URL (default a tcp:// store on 127.0.0.1); spawn(rank, argv,
    **popen) starts a rank elsewhere (hosts.Cluster), default Popen."""

    def __init__(self, size, scenario, flags=(), env=None, wrap=(), deadline_s=60.0, name="job",
                 worker=WORKER, store=None, spawn=None):
        self.size, self.name = size, name
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.eof = {r: 0 for r in range(size)}
        self.events = queue.Queue()  # (rank, monotonic time, line or None at EOF, from stderr)
        self.lines = {r: [] for r in range(size)}
        self.stderr = {r: [] for r in range(size)}
        self.marks = {r: {} for r in range(size)}  # "ready", "progress 3", ... -> monotonic time
        self.results = {}
        self.ready = {}  # rank -> its "ready {...}" line: describe(), transports, mapped files
        self.procs = {}
        self.store = store or "tcp://127.0.0.1:%d" % free_port()
        spawn = spawn or (lambda rank, argv, **popen: subprocess.Popen(argv, **popen))
        try:
            for rank in range(size):
                prefix = wrap(rank) if callable(wrap) else wrap  # e.g. unshare --pid ...
                argv = list(prefix) + [sys.executable, worker, "--rank", str(rank), "--size", str(size),
                                     "--store", self.store, "--scenario", scenario, "--seed", str(SEED)]
                argv += list(flags(rank) if callable(flags) else flags)
                proc = spawn(rank, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=worker_env(env(rank) if callable(env) else env))
                self.procs[rank] = proc
                for stream, is_err in ((proc.stdout, False), (proc.stderr, True)):
                    threading.Thread(target=self._read, args=(rank, stream, is_err), daemon=True).start()
        except BaseException:
            self.close()
            raise

    def _read(self, rank, stream, is_err):
        for line in stream:
            self.events.put((rank, time.monotonic(), line.rstrip("\n"), is_err))
        self.events.put((rank, time.monotonic(), None, is_err))

    def _handle(self, event):
        rank, at, line, is_err = event
        if line is None:
            self.eof[rank] += 1
        elif is_err:
            self.stderr[rank].append(line)
        else:
            self.lines[rank].append(line)
            if line.startswith("{"):
                try:
                    self.results[rank] = json.loads(line)
                except ValueError:
                    pass
            elif line.startswith("ready "):
                self.ready[rank] = json.loads(line[len("ready "):])
                self.marks[rank].setdefault("ready", at)
            else:
                self.marks[rank].setdefault(line, at)

    def pump(self, until, limit=None, poll_s=0.05):
        """Handles output until `until()` holds, asking every poll_s at
        least; False when `limit` (a monotonic time) passes first. The
        watchdog deadline fails the case."""
        while not until():
            now = time.monotonic()
            if limit is not None and now >= limit:
                return False
            if now >= self.deadline:
                self.kill_all()
                raise CaseFailed("watchdog: %s ran past its %.0f s deadline; killed every rank\n%s"
                                 % (self.name, self.deadline_s, self.dump()))
            stop = self.deadline if limit is None else min(self.deadline, limit)
            try:
                self._handle(self.events.get(timeout=max(0.0001, min(poll_s, stop - now))))
            except queue.Empty:
                pass
        return True

    def release(self):
        """Answers every rank waiting on its stdin (--wait-go)."""
        for proc in self.procs.values():
            try:
                proc.stdin.write("go\n")
                proc.stdin.flush()
            except OSError:  # it is gone already
                pass

    def exited(self, ranks):
        return all(self.procs[r].poll() is not None and self.eof[r] == 2 for r in ranks)

    def wait_exit(self, ranks=None, limit=None):
        """Until every rank in `ranks` (default all) exited and its output was read."""
        ranks = list(range(self.size) if ranks is None else ranks)
        return self.pump(lambda: self.exited(ranks), limit)

    def progress(self, rank):
        done = [int(m.split()[1]) for m in self.marks[rank] if m.startswith("progress ")]
        return max(done, default=0)

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def close(self):
        self.kill_all()

    def dump(self):
        parts = ["%s: store %s, seed %d (COHORT_TEST_SEED)" % (self.name, self.store, SEED)]
        for r in range(self.size):
            proc = self.procs.get(r)
            parts.append("--- rank %d (exit %s): %s" % (r, proc.poll() if proc else "?",
                                                        " ".join(proc.args) if proc else ""))
            parts.extend("  out: " + line[:2000] for line in self.lines[r][-10:])
            parts.extend("  err: " + line for line in self.stderr[r][-30:])
        return "\n".join(parts)


def check(condition, message, job):
    if not condition:
        raise CaseFailed(message + "\n" + job.dump())


def names_rank(text, rank):
    return re.search(r"\brank %d\b" % rank, text) is not None


def signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return "signal %d" % -code


# --------------------------------------------------------------- /dev/shm

def listing():
    return sorted(os.listdir("/dev/shm"))


@contextlib.contextmanager
def devshm(size="1g", filler=0, readonly=False):
    """A fresh tmpfs on /dev/shm for one case (in our private mount
    namespace), holding `filler` bytes in a file named filler, read-only if
    asked. Yields the listing before the case."""
    if not PRIVATE:
        yield listing()
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=1777" % size, "cohort-test", "/dev/shm"],
                   check=True, timeout=20)
    if readonly:
        subprocess.run(["mount", "-o", "remount,ro", "/dev/shm"], check=True, timeout=20)
    try:
        if filler:
            with open("/dev/shm/filler", "wb") as f:
                f.write(b"\x5a" * filler)
        before = listing()
        print("  /dev/shm: a private %s tmpfs; before: %s" % (size, before or "empty"))
        yield before
    finally:
        subprocess.run(["umount", "-l", "/dev/shm"], timeout=20)


def no_leftovers(job, before, what=""):
    """Nothing new in /dev/shm (exact in a private namespace), and none of
    the files the ranks mapped still there."""
    problems = []
    if PRIVATE:
        new = sorted(set(listing()) - set(before))
        if new:
            problems.append("left in /dev/shm%s: %s" % (what, ", ".join(new)))
    mapped = sorted({s for res in list(job.results.values()) + list(job.ready.values())
                     for s in res.get("segments", [])})
    still = [s for s in mapped if os.path.exists(s)]
    if still:
        problems.append("files the ranks mapped still exist%s: %s" % (what, ", ".join(still)))
    print("  /dev/shm after%s: %s; the ranks had mapped %s" % (what, listing() or "empty", mapped or "nothing"))
    check(not problems, "\n".join(problems), job)


# ------------------------------------------------------------------ checks

def all_ok(job):
    failures = []
    for r in range(job.size):
        res, code = job.results.get(r), job.procs[r].returncode
        if code is not None and code < 0:
            failures.append("rank %d died of %s" % (r, signal_name(code)))
        elif res is None:
            failures.append("rank %d printed no result (exit %s)" % (r, code))
        elif not res["ok"] or code != 0:
            failures.append("rank %d failed (exit %s) in %s: %s %s%s" % (
                r, code, res.get("op"), res.get("error_type", ""), res.get("error", ""),
                "".join("\n    " + f for f in res.get("failures", []))))
    check(not failures, "\n".join(failures), job)


def transports_are(job, expect, results=None, hosts=None):
    """Every rank lists "self" for itself and `expect` for every peer (or
    one of expect(rank, peer)), and describe() agrees and says whether shm
    is in use. results: the ranks' result lines, or their ready lines.
    hosts: the host labels the ranks were given (default: one host)."""
    failures = []
    results = job.results if results is None else results
    for r in range(job.size):
        res = results.get(r)
        if res is None:
            failures.append("rank %d told nothing about its transports" % r)
            continue
        want = [("self",) if p == r else expect(r, p) if callable(expect) else (expect,)
                for p in range(job.size)]
        d = res.get("describe") or {}
        got = res.get("transports") or []
        if len(got) != job.size or any(t not in w for t, w in zip(got, want)):
            failures.append("rank %d: transports %s, expected %s" % (r, got, " ".join("/".join(w) for w in want)))
        missing = [k for k in ("rank", "size", "hosts", "transports", "shm", "shm_unavailable") if k not in d]
        if missing:
            failures.append("rank %d: describe() lacks %s: %s" % (r, ", ".join(missing), d))
            continue
        if d["rank"] != r or d["size"] != job.size or d["transports"] != res.get("transports"):
            failures.append("rank %d: describe() disagrees: %s" % (r, d))
        if hosts is not None and d["hosts"] != hosts:
            failures.append("rank %d: hosts %s, expected %s" % (r, d["hosts"], hosts))
        elif hosts is None and (len(d["hosts"]) != job.size or len(set(d["hosts"])) != 1):
            failures.append("rank %d: hosts %s, expected one host for all %d" % (r, d["hosts"], job.size))
        # Every peer over TCP says why it is not copied from directly, and only those.
        why = d.get("direct_unavailable") or {}
        over_tcp = {str(p) for p, t in enumerate(got) if t == "tcp"}
        if "direct_unavailable" not in d or set(why) != over_tcp or not all(why.values()):
            failures.append("rank %d: describe()['direct_unavailable'] is %r, expected a reason for each peer over "
                            "TCP (%s)" % (r, d.get("direct_unavailable", "absent"), sorted(over_tcp)))
        if expect == "shm":
            if not (isinstance(d["shm"], dict) and "bytes" in d["shm"] and "ranks" in d["shm"]):
                failures.append("rank %d: describe()['shm'] is %r, expected a dict with bytes and ranks"
                                % (r, d["shm"]))
            if d["shm_unavailable"] is not None:
                failures.append("rank %d: shm in use but shm_unavailable is %r" % (r, d["shm_unavailable"]))
        elif not callable(expect) and d["shm"] is not None:
            failures.append("rank %d: transports %s but describe()['shm'] is %r" % (r, expect, d["shm"]))
    check(not failures, "\n".join(failures), job)


def identical(job):
    """Each result's bytes are the same on every rank."""
    keys = [set(job.results[r].get("digests", {})) for r in range(job.size)]
    failures = ["rank %d ran other operations than rank 0: %s" % (r, sorted(keys[r] ^ keys[0])[:5])
                for r in range(1, job.size) if keys[r] != keys[0]]
    for key in sorted(keys[0]):
        values = [job.results[r]["digests"].get(key) for r in range(job.size)]
        if len(set(values)) != 1:
            failures.append("%s: not bit-identical across ranks (sha256 %s)" % (key, values))
    check(not failures, "\n".join(failures[:20]), job)
    return len(keys[0])


def barriers_hold(job):
    """Nobody left barrier k before the last rank entered it."""
    rounds = len(job.results[0]["barriers"])
    for k in range(rounds):
        entered = max(job.results[r]["barriers"][k][0] for r in range(job.size))
        left = min(job.results[r]["barriers"][k][1] for r in range(job.size))
        check(left >= entered, "barrier %d: a rank left %.1f ms before the last one entered"
              % (k, (entered - left) * 1000), job)
