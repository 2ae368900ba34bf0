"""Emulated hosts on this machine, for the multi-host integration tests
(docs/hosts.md). As root:

    with Cluster(2) as c:                       # host0 10.77.0.1, host1 10.77.0.2
        p = c.run(1, ["python3", "rank.py"], env={...})  # a Popen, "on host 1"
        c.link_down(1); c.link_up(1)            # its cable, at the switch
        c.drop(1, 20)                           # 20 % of its packets, both ways
        c.set_mtu(1, 1280)

Each host is a process tree of its own: a small init, pid 1 of a new PID
namespace, with its own network (one veth per network, eth0, eth1, ...),
UTS (hostname hostI), IPC and mount namespaces and a private tmpfs on
/dev/shm. Each network is a bridge in one more network namespace, so the
machine's own interfaces are never touched and packets only ever go between
the namespaces made here. Nothing is named in /run/netns: the namespaces
live as long as the processes in them, so they vanish with them.

Cleanup, whatever happens: close() (the `with` block, atexit, SIGTERM, SIGINT
and SIGHUP) kills every init, and the kernel kills everything in a host's
PID namespace with its init; the namespaces, veths and bridges go with their
last process. If this process is SIGKILLed, its inits get SIGKILL from the
kernel (PR_SET_PDEATHSIG on unshare, --kill-child on the init), so nothing
outlives it. Create a Cluster from a thread that outlives it (the main
thread): the death signal follows the thread that started the init.

support() says why this machine cannot run it (None when it can);
require(), for tests, exits 77 (skipped) with that reason, or fails (1)
when CI=true, since CI runs as root and must run them.
"""

import atexit
import ctypes
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
DEFAULT_SUBNETS = ("10.77.0.0/24", "10.78.0.0/24")  # network k; COHORT_HOSTS_SUBNETS overrides
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)

# The host's init: pid 1 of its PID namespace. It reaps the orphans that end
# up with it (a rank whose nsenter parent died) and leaves on SIGTERM.
_INIT = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
sys.stdout.write("ready\\n"); sys.stdout.flush()
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
"""


class HostsError(Exception):
    """A step of setting hosts up or changing them failed: says which."""


def _die_with_parent():
    """In the child before exec: SIGKILL when the thread that started it dies."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def support():
    """None when this machine can run emulated hosts, else why not."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network, PID and mount namespaces); running as uid %d" % os.geteuid()
    for tool in ("ip", "unshare", "nsenter", "mount"):
        if shutil.which(tool) is None:
            return "emulated hosts need '%s' (iproute2 / util-linux), which is not on PATH" % tool
    try:
        r = subprocess.run(["unshare", "--net", "--uts", "--ipc", "--mount", "--pid", "--fork", "--mount-proc",
                            "sh", "-c", "ip link add cohort-probe type bridge && mount -t tmpfs t /dev/shm"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run unshare: %s" % e
    if r.returncode != 0:
        return "cannot make namespaces, a bridge or a tmpfs here (unshare ... ip link add type bridge): %s" \
            % (r.stderr.strip() or "exit %d" % r.returncode)
    return None


def require():
    """For a test's main(): returns when emulated hosts work here; otherwise
    exits 77 (ctest SKIP_RETURN_CODE) saying why, or 1 when CI=true."""
    why = support()
    if why is None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        print("FAIL: CI=true but %s; CI runs as root and must run the multi-host tests" % why, flush=True)
        sys.exit(1)
    print("SKIP: %s" % why, flush=True)
    sys.exit(SKIP)


def _subnets():
    text = os.environ.get("COHORT_HOSTS_SUBNETS")
    if not text:
        return [ipaddress.ip_network(s) for s in DEFAULT_SUBNETS]
    nets = []
    for item in text.split(","):
        try:
            net = ipaddress.ip_network(item.strip())
        except ValueError as e:
            raise HostsError("COHORT_HOSTS_SUBNETS: '%s' is not an IPv4 network like 10.77.0.0/24: %s"
                             % (item.strip(), e)) from None
        if net.version != 4 or net.num_addresses < 8 or not net.is_private:
            raise HostsError("COHORT_HOSTS_SUBNETS: '%s' must be a private IPv4 network of at least 8 addresses"
                             % item.strip())
        nets.append(net)
    return nets


class HostProcess(subprocess.Popen):
    """A process on a host: a Popen of nsenter, whose one child is the
    program itself, in the host's PID namespace. Signals go to the program
    (nsenter forwards none); nsenter exits as the program did (killed by a
    signal: the same signal), so returncode reads as the program's."""

    def inner_pid(self, wait_s=5.0):
        """The program's pid (in this machine's PID namespace)."""
        limit = time.monotonic() + wait_s
        while True:
            try:
                with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
                    children = f.read().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            if self.poll() is not None or time.monotonic() >= limit:
                return None
            time.sleep(0.01)

    def send_signal(self, sig):
        pid = self.inner_pid() if self.poll() is None else None
        if pid is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        else:
            super().send_signal(sig)


class Host:
    def __init__(self, index, init, addresses):
        self.index = index
        self.name = "host%d" % index
        self.init = init          # the unshare Popen
        self.pid = None           # the init's pid here: pid 1 there
        self.addresses = addresses


class Cluster:
    """N emulated hosts on `networks` networks (docs/hosts.md)."""

    _live = set()
    _handlers_installed = False

    def __init__(self, n, networks=1, default_route=None, shm_size="512m", setup_timeout_s=20.0):
        if not isinstance(n, int) or not 1 <= n <= 200:
            raise HostsError("Cluster(n): n must be a number of hosts from 1 to 200, got %r" % (n,))
        subnets = _subnets()
        if not isinstance(networks, int) or not 1 <= networks <= len(subnets):
            raise HostsError("Cluster(networks=%r): from 1 to %d (one subnet each in COHORT_HOSTS_SUBNETS)"
                             % (networks, len(subnets)))
        for net in subnets[:networks]:
            if n + 2 > net.num_addresses:
                raise HostsError("subnet %s has room for %d hosts, not %d" % (net, net.num_addresses - 3, n))
        if default_route is not None and not 0 <= default_route < networks:
            raise HostsError("Cluster(default_route=%r): a network from 0 to %d, or None" % (default_route, networks - 1))
        self.n, self.networks, self.default_route = n, networks, default_route
        self.subnets = subnets[:networks]
        self.shm_size = shm_size
        self.setup_timeout_s = setup_timeout_s
        self.hosts = []
        self.bridge = None        # the sleep holding the bridges' namespace
        self.procs = []
        self._lock = threading.RLock()  # a signal handler may close() while run() holds it
        self._closed = False

    # ------------------------------------------------------------ set-up

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        Cluster._install_handlers()
        Cluster._live.add(self)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _spawn_holder(self, argv, what):
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        except OSError as e:
            raise HostsError("cannot start %s (%s): %s" % (what, " ".join(argv[:3]), e)) from None

    def _wait_ready(self, proc, what):
        """The first stdout line of `proc` must be 'ready' within the set-up timeout."""
        result = []
        reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.setup_timeout_s)
        if not result or result[0].strip() != "ready":
            err = ""
            if proc.poll() is not None:
                err = proc.stderr.read().strip()
            raise HostsError("%s did not start within %.0f s (exit %s): %s"
                             % (what, self.setup_timeout_s, proc.poll(), err or "no output"))

    def _start(self):
        # The switch: one bridge per network in a namespace of its own.
        self.bridge = self._spawn_holder(
            ["unshare", "--net", "--", sys.executable, "-c",
             "import sys, time; print('ready', flush=True); time.sleep(1e9)"], "the bridges' namespace")
        self._wait_ready(self.bridge, "the bridges' namespace")
        self._ip(self.bridge.pid, "link", "set", "lo", "up")
        for k in range(self.networks):
            self._ip(self.bridge.pid, "link", "add", "br%d" % k, "type", "bridge")
            self._ip(self.bridge.pid, "link", "set", "br%d" % k, "up")
        for i in range(self.n):
            self._start_host(i)

    def _start_host(self, i):
        addresses = [str(net.network_address + i + 1) for net in self.subnets]
        name = "host%d" % i
        # A sysfs of its own, so /sys/class/net shows the host's interfaces.
        script = ("mount -t tmpfs -o size=%s,mode=1777 cohort-%s /dev/shm && mount -t sysfs cohort-%s /sys && "
                  "hostname %s && exec %s -c '%s'" % (self.shm_size, name, name, name, sys.executable, _INIT))
        init = self._spawn_holder(
            ["unshare", "--net", "--uts", "--ipc", "--mount", "--pid", "--fork", "--mount-proc",
             "--kill-child=SIGKILL", "--", "sh", "-c", script], name)
        host = Host(i, init, addresses)
        self.hosts.append(host)
        self._wait_ready(init, name)
        host.pid = HostProcess.inner_pid(init, wait_s=self.setup_timeout_s)
        if host.pid is None:
            raise HostsError("%s: its init has no pid (unshare exited %s)" % (name, init.poll()))
        self._ip(host.pid, "link", "set", "lo", "up")
        for k, net in enumerate(self.subnets):
            port, dev = "h%dn%d" % (i, k), "eth%d" % k
            self._ip(self.bridge.pid, "link", "add", port, "type", "veth", "peer", "name", dev,
                     "netns", str(host.pid))
            self._ip(self.bridge.pid, "link", "set", port, "master", "br%d" % k)
            self._ip(self.bridge.pid, "link", "set", port, "up")
            self._ip(host.pid, "addr", "add", "%s/%d" % (addresses[k], net.prefixlen), "dev", dev)
            self._ip(host.pid, "link", "set", dev, "up")
        if self.default_route is not None:
            # A gateway that does not exist: routes lookups off the subnet
            # through this network (as a host's default route would), while
            # any packet sent that way ends on the bridge, unanswered.
            net = self.subnets[self.default_route]
            self._ip(host.pid, "route", "add", "default", "via", str(net.broadcast_address - 1),
                     "dev", "eth%d" % self.default_route)

    def _nsenter(self, pid, net_only=True):
        if net_only:
            return ["nsenter", "-t", str(pid), "-n", "--"]
        return ["nsenter", "-t", str(pid), "-n", "-u", "-i", "-m", "-p", "--wd=" + os.getcwd(), "--"]

    def _run_in(self, pid, argv, what, timeout=10):
        try:
            r = subprocess.run(self._nsenter(pid) + argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostsError("%s: '%s' did not finish within %d s" % (what, " ".join(argv), timeout)) from None
        if r.returncode != 0:
            raise HostsError("%s: '%s' failed (exit %d): %s"
                             % (what, " ".join(argv), r.returncode, r.stderr.strip()))
        return r.stdout

    def _ip(self, pid, *args):
        where = "the bridges" if self.bridge is not None and pid == self.bridge.pid else "a host"
        return self._run_in(pid, ["ip"] + list(args), where)

    def _host(self, i):
        if self._closed:
            raise HostsError("this cluster is closed")
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.hosts):
            raise HostsError("no host %r: hosts are 0 to %d" % (i, len(self.hosts) - 1))
        h = self.hosts[i]
        if h.pid is None or h.init.poll() is not None:
            raise HostsError("%s is down (its init exited %s)" % (h.name, h.init.poll()))
        return h

    def _network(self, net):
        if isinstance(net, bool) or not isinstance(net, int) or not 0 <= net < self.networks:
            raise HostsError("no network %r: networks are 0 to %d" % (net, self.networks - 1))
        return net

    # ------------------------------------------------------------- use

    def address(self, i, net=0):
        """Host i's address on network `net`."""
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.n:
            raise HostsError("no host %r: hosts are 0 to %d" % (i, self.n - 1))
        return str(self.subnets[self._network(net)].network_address + i + 1)

    def run(self, i, argv, env=None, **popen):
        """Starts argv on host i (all its namespaces; this working directory)
        and returns a HostProcess (a Popen). env: the whole environment, as
        for Popen (default: ours)."""
        h = self._host(i)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise HostsError("run(%d, argv): argv must be a non-empty list of str, got %r" % (i, argv))
        if "cwd" in popen:
            raise HostsError("run(): no cwd=, the program starts in this process's working directory")
        proc = HostProcess(self._nsenter(h.pid, net_only=False) + list(argv), env=env,
                           preexec_fn=_die_with_parent, **popen)
        with self._lock:
            self.procs.append(proc)
        return proc

    def check_output(self, i, argv, timeout=30):
        """Runs argv on host i to the end; its stdout, or HostsError naming the host."""
        proc = self.run(i, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise HostsError("host%d: '%s' did not finish within %s s" % (i, " ".join(argv), timeout)) from None
        if proc.returncode != 0:
            raise HostsError("host%d: '%s' exited %d: %s" % (i, " ".join(argv), proc.returncode, err.strip()))
        return out

    def link_down(self, i, net=0):
        """Pulls host i's cable out of the switch of network `net`: its
        bridge port goes down, and with it the carrier of its eth."""
        self._host(i)
        self._ip(self.bridge.pid, "link", "set", "h%dn%d" % (i, self._network(net)), "down")

    def link_up(self, i, net=0):
        self._host(i)
        self._ip(self.bridge.pid, "link", "set", "h%dn%d" % (i, self._network(net)), "up")

    def set_mtu(self, i, mtu, net=0, where="both"):
        """Host i's MTU on network `net`: on both ends of its cable, or only
        on the "host" end or the "switch" end. Peers that keep a larger MTU
        learn the smaller one only from TCP's MSS at connect time: on a
        bridge no ICMP says "fragmentation needed", so a switch port smaller
        than both hosts' MTU is a black hole for full frames. Veths and
        bridges forward GSO packets whatever their MTU, so "switch" also
        turns GSO off (gso_max_segs 1) on every host's eth of that network,
        making the black hole hold for every frame; "both" and "host" turn
        it back on for host i."""
        h = self._host(i)
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 65535:
            raise HostsError("set_mtu(%d, %r): an MTU from 68 to 65535 bytes" % (i, mtu))
        if where not in ("both", "host", "switch"):
            raise HostsError("set_mtu(%d, %d, where=%r): where is 'both', 'host' or 'switch'" % (i, mtu, where))
        self._network(net)
        if where == "switch":
            for other in self.hosts:
                self._ip(self._host(other.index).pid, "link", "set", "eth%d" % net, "gso_max_segs", "1")
        else:
            self._ip(h.pid, "link", "set", "eth%d" % net, "gso_max_segs", "65535")
        if where in ("both", "host"):
            self._ip(h.pid, "link", "set", "eth%d" % net, "mtu", str(mtu))
        if where in ("both", "switch"):
            self._ip(self.bridge.pid, "link", "set", "h%dn%d" % (i, net), "mtu", str(mtu))

    def drop(self, i, percent):
        """Drops `percent` (0..100) of the packets host i sends and of those it
        receives, at random, with nftables in its namespace; 0 removes the rule."""
        h = self._host(i)
        if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 <= percent <= 100:
            raise HostsError("drop(%d, %r): a percentage from 0 to 100" % (i, percent))
        if shutil.which("nft") is None:
            raise HostsError("drop() needs nftables ('nft' is not on PATH; scripts/deps.sh installs it)")
        self._run_in(h.pid, ["nft", "delete table inet cohort_drop"], h.name, timeout=10) \
            if self._has_drop_table(h) else None
        if percent == 0:
            return
        # In hundredths of a percent; 100 % drops without drawing.
        verdict = "drop" if percent >= 100 else "numgen random mod 10000 < %d drop" % round(percent * 100)
        rules = ("table inet cohort_drop {\n"
                 " chain in { type filter hook input priority 0; iifname \"lo\" accept; %s; }\n"
                 " chain out { type filter hook output priority 0; oifname \"lo\" accept; %s; }\n}\n"
                 % (verdict, verdict))
        try:
            r = subprocess.run(self._nsenter(h.pid) + ["nft", "-f", "-"], input=rules, capture_output=True,
                               text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise HostsError("%s: nft -f did not finish within 10 s" % h.name) from None
        if r.returncode != 0:
            raise HostsError("%s: nft -f failed (exit %d): %s" % (h.name, r.returncode, r.stderr.strip()))

    def _has_drop_table(self, h):
        out = self._run_in(h.pid, ["nft", "list", "tables"], h.name)
        return "cohort_drop" in out

    def counters(self, i, net=0):
        """(rx_bytes, tx_bytes) of host i's eth on network `net`."""
        h = self._host(i)
        dev = "eth%d" % self._network(net)
        with open("/proc/%d/net/dev" % h.pid) as f:  # the init's network namespace
            for line in f:
                name, _, fields = line.partition(":")
                if name.strip() == dev:
                    values = fields.split()
                    return int(values[0]), int(values[8])
        raise HostsError("%s has no %s" % (h.name, dev))

    def kill_processes(self, i, sig=signal.SIGKILL):
        """Sends `sig` to every process on host i but its init (the host
        stays up, its network too). Returns how many were signalled."""
        h = self._host(i)
        ns = os.readlink("/proc/%d/ns/pid" % h.pid)
        count = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == h.pid:
                continue
            try:
                if os.readlink("/proc/%s/ns/pid" % entry) == ns:
                    os.kill(int(entry), sig)
                    count += 1
            except OSError:
                pass
        return count

    # ---------------------------------------------------------- cleanup

    def close(self):
        """Kills every process on every host and the hosts themselves; the
        namespaces, links and bridges go with them. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        holders = [h.init for h in self.hosts] + ([self.bridge] if self.bridge else [])
        for p in holders + self.procs:
            if p.poll() is None:
                try:
                    p.kill()  # unshare: --kill-child takes the host's pid 1, hence all of it
                except OSError:
                    pass
        for p in holders + self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (p.stdout, p.stderr, p.stdin):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass
        Cluster._live.discard(self)

    @classmethod
    def _close_all(cls):
        for c in list(cls._live):
            c.close()

    @classmethod
    def _install_handlers(cls):
        if cls._handlers_installed:
            return
        cls._handlers_installed = True
        atexit.register(cls._close_all)
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous = signal.getsignal(sig)

            def handler(signum, frame, previous=previous):
                cls._close_all()
                if callable(previous):
                    previous(signum, frame)
                else:
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)
            signal.signal(sig, handler)
