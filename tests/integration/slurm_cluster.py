"""A real Slurm cluster on emulated hosts (hosts.py), for the Slurm tests
(docs/schedulers.md). As root:

    with SlurmCluster(3, workdir) as sc:      # host0..host2; slurmctld on host0
        out = sc.client(0, ["sinfo", "-h"])   # a client in host0's network
        sc.kill_slurmd(1)

One munged runs in this machine's namespaces (its Unix socket is a path,
which works across network namespaces); slurmctld runs in host 0's network
and UTS namespaces and one slurmd in each host's, not in the hosts' mount
namespace: slurmd needs this machine's /sys/fs/cgroup, which a host's own
sysfs hides. Everything lives under `workdir`: slurm.conf, cgroup.conf,
the munge key and socket, state, spool and logs.

Cleanup: close() (the `with` block, atexit, and close_all() for a
watchdog) kills the daemons (each started with setsid, a process group of
its own), every process in the hosts' network namespaces (slurmstepd and
the tasks, which live in this machine's PID namespace) and the emulated
hosts. A daemon also has a death signal tied to this process; a test that
is SIGKILLed before close() can leave slurmstepd and its tasks behind,
which are daemons of slurmd's, not children of the test.
"""

import atexit
import os
import signal
import subprocess
import time

import hosts

# Clients and daemons of Debian's slurm-wlm 22.05 and munge.
TOOLS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "squeue", "scontrol", "scancel", "sinfo")


def support():
    """None when a Slurm cluster can run here, else why not."""
    why = hosts.support()
    if why:
        return why
    import shutil
    missing = [t for t in TOOLS if shutil.which(t) is None and not os.path.exists("/usr/sbin/" + t)]
    if missing:
        return "Slurm needs %s (scripts/deps.sh installs slurm-wlm, slurmd, slurmctld, munge)" % ", ".join(missing)
    return None


def _which(tool):
    import shutil
    return shutil.which(tool) or "/usr/sbin/" + tool


class SlurmError(Exception):
    """A daemon did not start or a client failed: says which and why."""


CONF = """ClusterName=cohorttest
SlurmctldHost=host0({ctld})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/sock
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd-%n.log
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
ProctrackType={proctrack}
TaskPlugin={task}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters={select}
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SlurmctldTimeout=10
SlurmdTimeout={slurmd_timeout}
MessageTimeout=5
InactiveLimit=0
KillWait=2
{nodes}
{partitions}
"""

# One partition; or, with preemption, jobs of "high" cancel those of "low"
# (the default) that hold the nodes they need, after a grace time during
# which the low job's steps have SIGTERM.
PARTITIONS = "PartitionName=debug Nodes={all_nodes} Default=YES MaxTime=INFINITE State=UP"
PREEMPTION = """PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=low Nodes={all_nodes} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime={grace}
PartitionName=high Nodes={all_nodes} MaxTime=INFINITE State=UP PriorityTier=2"""


class SlurmCluster:
    _live = set()

    @classmethod
    def close_all(cls):
        """Closes every cluster still open (a watchdog's last resort)."""
        for c in list(cls._live):
            c.close()

    def __init__(self, n, workdir, slurmd_timeout=5, start_timeout_s=30.0, memory_limits=False,
                 preemption_grace_s=None):
        """memory_limits: confine steps with cgroups (task/cgroup,
        proctrack/cgroup, ConstrainRAMSpace) so that Slurm kills a step
        past its --mem; nodes then have RealMemory=1000 (MB).
        preemption_grace_s: partitions "low" (the default) and "high",
        whose jobs preempt low ones after this grace time."""
        self.preemption_grace_s = preemption_grace_s
        self.n, self.workdir = n, workdir
        self.memory_limits = memory_limits
        self.dir = os.path.join(workdir, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.slurmd_timeout = slurmd_timeout
        self.start_timeout_s = start_timeout_s
        self.cluster = None
        self.munged = None
        self.daemons = {}  # name -> Popen (setsid: its own process group)
        self._closed = False

    def __enter__(self):
        atexit.register(self.close)
        SlurmCluster._live.add(self)
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ set-up

    def start(self):
        self.cluster = hosts.Cluster(self.n).start()
        for sub in ("munge", "state", "log") + tuple("spool/host%d" % i for i in range(self.n)):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        os.chmod(os.path.join(self.dir, "munge"), 0o755)
        key = os.path.join(self.dir, "munge", "key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        memory = " RealMemory=1000" if self.memory_limits else ""
        nodes = "\n".join("NodeName=host%d NodeAddr=%s CPUs=2%s State=UNKNOWN" % (i, self.cluster.address(i), memory)
                          for i in range(self.n))
        all_nodes = "host[0-%d]" % (self.n - 1)
        if self.preemption_grace_s is None:
            partitions = PARTITIONS.format(all_nodes=all_nodes)
        else:
            partitions = PREEMPTION.format(all_nodes=all_nodes, grace=self.preemption_grace_s)
        with open(self.conf, "w") as f:
            f.write(CONF.format(partitions=partitions, dir=self.dir, ctld=self.cluster.address(0), ctld_port=6817, slurmd_port=6818,
                                slurmd_timeout=self.slurmd_timeout, nodes=nodes,
                                proctrack="proctrack/cgroup" if self.memory_limits else "proctrack/linuxproc",
                                task="task/cgroup" if self.memory_limits else "task/none",
                                select="CR_CPU_Memory" if self.memory_limits else "CR_CPU"))
        with open(os.path.join(self.dir, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n")
            if self.memory_limits:
                f.write("ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n")
        m = os.path.join(self.dir, "munge")
        self.munged = self._daemon("munged", None, [
            _which("munged"), "--foreground", "--socket=%s/sock" % m, "--key-file=%s/key" % m,
            "--pid-file=%s/munged.pid" % m, "--log-file=%s/munged.log" % m, "--seed-file=%s/seed" % m, "--force"])
        self._wait(lambda: os.path.exists(os.path.join(m, "sock")), "munged's socket %s/sock" % m,
                   lambda: self._log("munge/munged.log"))
        self._daemon("slurmctld", 0, [_which("slurmctld"), "-D", "-f", self.conf, "-i"])
        for i in range(self.n):
            self.start_slurmd(i)
        self.wait_idle(range(self.n))

    def _daemon(self, name, host, argv):
        """Starts a daemon in the foreground (we are its parent), in host's
        network and UTS namespaces (None: this machine's), as a session of
        its own; its output in log/NAME.out."""
        if host is not None:
            argv = ["nsenter", "-t", str(self.cluster.hosts[host].pid), "-n", "-u", "--"] + argv
        out = open(os.path.join(self.dir, "log", name + ".out"), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env=self.env(), preexec_fn=_session_dying_with_parent)
        finally:
            out.close()
        self.daemons[name] = p
        return p

    def start_slurmd(self, i):
        self._daemon("slurmd-host%d" % i, i, [_which("slurmd"), "-D", "-f", self.conf, "-N", "host%d" % i])

    def _log(self, rel):
        try:
            with open(os.path.join(self.dir, rel), errors="replace") as f:
                return f.read()[-2000:]
        except OSError as e:
            return "(no log: %s)" % e

    def _wait(self, ready, what, log, timeout=None):
        limit = time.monotonic() + (timeout or self.start_timeout_s)
        while time.monotonic() < limit:
            if ready():
                return
            time.sleep(0.1)
        raise SlurmError("%s not ready within %.0f s; log:\n%s" % (what, timeout or self.start_timeout_s, log()))

    def node_states(self):
        """{node: state} from sinfo, asked from host 0."""
        out = self.client(0, ["sinfo", "-h", "-N", "-o", "%N %T"], check=False)
        states = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def wait_idle(self, indices, timeout=None):
        want = ["host%d" % i for i in indices]
        self._wait(lambda: all(self.node_states().get(h, "").startswith("idle") for h in want),
                   "nodes %s idle (states %s)" % (want, "see sinfo"),
                   lambda: "sinfo: %s\nslurmctld:\n%s" % (self.node_states(), self._log("log/slurmctld.log")),
                   timeout)

    # ------------------------------------------------------------- use

    def env(self, extra=None):
        e = dict(os.environ)
        e["SLURM_CONF"] = self.conf
        for k in list(e):  # an outer allocation's variables would confuse our clients
            if k.startswith("SLURM_") and k != "SLURM_CONF":
                del e[k]
        if extra:
            e.update(extra)
        return e

    def client_argv(self, host, argv):
        """argv run in host's network and UTS namespaces (where a client
        reaches slurmctld), with SLURM_CONF set by env()."""
        return ["nsenter", "-t", str(self.cluster.hosts[host].pid), "-n", "-u", "--"] + list(argv)

    def client(self, host, argv, timeout=20, check=True):
        try:
            r = subprocess.run(self.client_argv(host, argv), capture_output=True, text=True, timeout=timeout,
                               env=self.env())
        except subprocess.TimeoutExpired:
            raise SlurmError("'%s' on host%d did not finish within %d s" % (" ".join(argv), host, timeout)) from None
        if check and r.returncode != 0:
            raise SlurmError("'%s' on host%d exited %d: %s" % (" ".join(argv), host, r.returncode,
                                                                r.stderr.strip()))
        return r.stdout

    def kill_slurmd(self, i):
        p = self.daemons.get("slurmd-host%d" % i)
        if p and p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)

    def slurmstepd_pids(self, i):
        """The slurmstepd processes of host i: they run in its network
        namespace (slurmd forks them) but this machine's PID namespace."""
        net = os.readlink("/proc/%d/ns/net" % self.cluster.hosts[i].pid)
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/comm" % entry) as f:
                    comm = f.read().strip()
                if comm == "slurmstepd" and os.readlink("/proc/%s/ns/net" % entry) == net:
                    pids.append(int(entry))
            except OSError:
                continue
        return pids

    # ---------------------------------------------------------- cleanup

    def close(self):
        if self._closed:
            return
        self._closed = True
        SlurmCluster._live.discard(self)
        for name, p in list(self.daemons.items()):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        for p in self.daemons.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if self.cluster is not None:
            # Every slurmstepd and task lives in the hosts' network namespaces
            # but this machine's PID namespace: find them by their network.
            self._kill_in_hosts()
            self.cluster.close()

    def _kill_in_hosts(self):
        nets = set()
        for h in self.cluster.hosts:
            if h.pid is not None:
                try:
                    nets.add(os.readlink("/proc/%d/ns/net" % h.pid))
                except OSError:
                    pass
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if os.readlink("/proc/%s/ns/net" % entry) in nets:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


_PR_SET_PDEATHSIG = 1


def _session_dying_with_parent():
    os.setsid()
    hosts._libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
