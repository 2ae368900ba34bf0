"""Question: how close does cohort's all-reduce over TCP come to what TCP
allows here, and how does it compare with Open MPI (btl tcp,self), Gloo and
torch.distributed's gloo, on loopback and across emulated hosts, in one run?

As root (emulated hosts, docs/hosts.md), with /usr/bin/python3:

    /usr/bin/python3 benchmarks/run_hosts_allreduce.py build \\
        [--configs lo2,2x1,2x2,4x1] [--sizes 1K,64K,1M,4M,16M,64M,256M] [--seconds 0.3]

Each configuration is "loN" (N ranks on loopback, cohort on TCP only:
COHORT_SHM_SIZE=0 COHORT_DIRECT_COPY=0) or "HxK" (H emulated hosts, K ranks
each; cohort as shipped: shared memory inside a host, TCP between). For each:

1. the ceiling: build/benchmarks/tcp_ceiling, one endpoint per host (per rank
   on loopback), all sending and receiving at once; its bound on busbw
   (derivation at the top of tcp_ceiling.cpp);
2. bench_allreduce under one mpirun (cohort, Open MPI over TCP, Gloo). Across
   hosts mpirun runs in host0's network namespace and starts its daemons on
   each host through benchmarks/netns_rsh.sh (--mca plm_rsh_agent);
3. bench_container.py (torch.distributed gloo, and cohort through Python);
then a summary: busbw per library, cohort / MPI, cohort / ceiling.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import hosts  # noqa: E402

CEILING_PORT = 47300
COHORT_PORT = 47310
GLOO_PORT = 47320
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1",
             "--mca", "btl", "tcp,self", "--mca", "mpi_yield_when_idle", "1"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("build")
    p.add_argument("--configs", default="lo2,2x1,2x2,4x1")
    p.add_argument("--sizes", default="1K,64K,1M,4M,16M,64M,256M")
    p.add_argument("--seconds", default="0.3")
    p.add_argument("--ceiling-bytes", default="64M")
    p.add_argument("--no-torch", action="store_true", help="leave torch.distributed's gloo out")
    p.add_argument("--cohort-also", default="",
                   help="more cohort algorithms for bench_allreduce to measure, as in ring,doubling (not summarised)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds for each program")
    return p.parse_args()


def parse_config(text):
    if text.startswith("lo") and text[2:].isdigit():
        return 1, int(text[2:]), True
    h, _, k = text.partition("x")
    if not (h.isdigit() and k.isdigit()) or int(h) < 2 or int(k) < 1:
        sys.exit(f"run_hosts_allreduce: config {text!r}: use loN (N ranks on loopback) or HxK (H >= 2 hosts, K ranks each)")
    return int(h), int(k), False


def size_text(n):
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def wait_all(procs, timeout, what):
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            sys.exit(f"run_hosts_allreduce: {what} did not finish within {timeout} s")
        outs.append(out)
    bad = [i for i, p in enumerate(procs) if p.returncode != 0]
    if bad:
        print(outs[bad[0]])
        sys.exit(f"run_hosts_allreduce: {what}: process {bad[0]} exited {procs[bad[0]].returncode}")
    return outs


def ceiling(args, cluster, h, k, loopback):
    n = h * k
    endpoints = n if loopback else h
    addr = (lambda i: "127.0.0.1") if loopback else cluster.address
    eps = ",".join(f"{addr(i)}:{CEILING_PORT + i}" for i in range(endpoints))
    procs = []
    for i in range(endpoints):
        argv = [os.path.join(args.build, "benchmarks", "tcp_ceiling"), "--endpoints", eps, "--rank", str(i),
                "--bytes", args.ceiling_bytes, "--ranks", str(n)]
        kw = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(subprocess.Popen(argv, **kw) if loopback else cluster.run(i, argv, **kw))
    out = wait_all(procs, args.timeout, "tcp_ceiling")[0]
    print(out, end="", flush=True)
    line = next(x for x in out.splitlines() if x.startswith("ceiling "))
    return {kv.split("=")[0]: float(kv.split("=")[1]) for kv in line.split()[1:]}


def mpi_bench(args, cluster, h, k, loopback, json_path):
    n = h * k
    bench = [os.path.join(args.build, "benchmarks", "bench_allreduce"), "--sizes", args.sizes,
             "--seconds", args.seconds, "--mem-bytes", "0", "--json", json_path]
    if args.cohort_also:
        bench += ["--cohort-also", args.cohort_also]
    env = dict(os.environ)
    if loopback:
        env.update(COHORT_SHM_SIZE="0", COHORT_DIRECT_COPY="0")
        argv = ["mpirun", "-np", str(n)] + MPI_FLAGS + ["--mca", "btl_tcp_if_include", "lo",
                                                         "--mca", "oob_tcp_if_include", "lo"] + bench
    else:
        env["COHORT_HOST_PIDS"] = " ".join(str(x.pid) for x in cluster.hosts)
        hostlist = ",".join(f"host{i}:{k}" for i in range(h))
        argv = (["nsenter", "-t", str(cluster.hosts[0].pid), "-n", "--", "mpirun", "-np", str(n), "--host", hostlist,
                 "--mca", "plm_rsh_agent", os.path.join(HERE, "netns_rsh.sh"), "--mca", "btl_tcp_if_include", "eth0",
                 "--mca", "oob_tcp_if_include", "eth0", "-x", "PATH"] + MPI_FLAGS + bench + ["--iface", "eth0"])
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = wait_all([p], args.timeout, "mpirun bench_allreduce")[0]
    print(out, end="", flush=True)
    with open(json_path) as f:
        return json.load(f)["rows"]


def torch_bench(args, cluster, h, k, loopback, json_path):
    n = h * k
    master = "127.0.0.1" if loopback else cluster.address(0)
    procs = []
    for r in range(n):
        host = r // k
        address = "127.0.0.1" if loopback else cluster.address(host)
        argv = ["/usr/bin/python3", os.path.join(HERE, "bench_container.py"), "--rank", str(r), "--size", str(n),
                "--cohort-port", str(COHORT_PORT), "--gloo-port", str(GLOO_PORT), "--master", master,
                "--address", address, "--sizes", args.sizes, "--seconds", args.seconds, "--json", json_path]
        env = dict(os.environ, COHORT_PYTHONPATH=os.path.join(ROOT, "python"),
                   COHORT_LIBRARY=os.path.join(args.build, "libcohort.so"))
        if loopback:
            env.update(COHORT_SHM_SIZE="0", COHORT_DIRECT_COPY="0", GLOO_SOCKET_IFNAME="lo")
        else:
            env.update(GLOO_SOCKET_IFNAME="eth0")
        kw = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        procs.append(subprocess.Popen(argv, **kw) if loopback else cluster.run(host, argv, **kw))
    out = wait_all(procs, args.timeout, "bench_container.py")[0]
    print(out, end="", flush=True)
    with open(json_path) as f:
        return json.load(f)["rows"]


def summary(name, n, ceil, rows, torch_rows):
    busbw = {}
    for r in rows + [dict(x, library="torch-gloo" if x["library"] == "gloo" else "cohort-py") for x in torch_rows]:
        lib = r["library"]
        if lib == "cohort" and r.get("algorithm", "auto").startswith("auto") is False:
            continue  # the forced-algorithm rows
        busbw.setdefault(r["bytes"], {})[lib] = (r["busbw_gbps"], r["time_us"])
    print(f"\nsummary {name}: {n} ranks; busbw GB/s (time at 1 KiB); ceiling bound {ceil['bound_GBps']:.2f} GB/s "
          f"({ceil['rate_GBps']:.2f} GB/s per direction, {int(ceil['endpoints'])} endpoints)")
    print("| size | Open MPI | Gloo | torch gloo | cohort | cohort / MPI | cohort / ceiling |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size in sorted(busbw):
        b = busbw[size]

        def cell(lib):
            if lib not in b:
                return "-"
            return f"{b[lib][1]:.1f} us" if size <= 1024 else f"{b[lib][0]:.2f}"
        c, m = b.get("cohort"), b.get("mpi")
        if c and m:
            ratio = f"{c[1] / m[1]:.2f}x time" if size <= 1024 else f"{c[0] / m[0]:.2f}x"
        else:
            ratio = "-"
        to_ceiling = f"{c[0] / ceil['bound_GBps']:.2f}" if c and size > 1024 else "-"
        print(f"| {size_text(size)} | {cell('mpi')} | {cell('gloo')} | {cell('torch-gloo')} | {cell('cohort')} "
              f"| {ratio} | {to_ceiling} |")


def main():
    args = parse_args()
    if os.geteuid() != 0:
        sys.exit("run_hosts_allreduce: needs root for the emulated hosts")
    print(f"load: {open('/proc/loadavg').read().split()[:3]} (1, 5, 15 min), cpus {os.cpu_count()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="hosts_allreduce.")
    for name in args.configs.split(","):
        h, k, loopback = parse_config(name)
        print(f"\n== {name}: {'loopback' if loopback else f'{h} emulated hosts'}, {h * k} ranks ==", flush=True)
        cluster = None if loopback else hosts.Cluster(h)
        if cluster is not None:
            cluster.start()
        try:
            ceil = ceiling(args, cluster, h, k, loopback)
            rows = mpi_bench(args, cluster, h, k, loopback, os.path.join(tmp, f"{name}-mpi.json"))
            torch_rows = [] if args.no_torch else torch_bench(args, cluster, h, k, loopback,
                                                              os.path.join(tmp, f"{name}-torch.json"))
            after = ceiling(args, cluster, h, k, loopback)
            if after["bound_GBps"] > ceil["bound_GBps"]:
                ceil = after  # the better of the two, measured before and after
        finally:
            if cluster is not None:
                cluster.close()
        summary(name, h * k, ceil, rows, torch_rows)
        print(f"load: {open('/proc/loadavg').read().split()[:3]}", flush=True)


if __name__ == "__main__":
    main()
