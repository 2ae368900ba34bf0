#!/usr/bin/env python3
"""Question: what does one scrape of GET /metrics cost at 10,000 members,
against the same coordinator at 1,000 (the anchor)?

For each N: a fresh cohort-coordinator, one job (min = max = N), N members
joined over one keep-alive connection, each heartbeating three times 0.4 s
apart with a step, a step time and samples/s (so every per-member series
exists, straggler scores included), then GET /metrics 7 times. Prints a
table: body size, series, series per member, and the scrape's time (median
and max, client side, one connection).

    benchmarks/bench_metrics.py --coordinator build/examples/cohort-coordinator [--members 1000,10000]
"""

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import time


def call(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    payload = r.read()
    if r.status not in (200, 201):
        sys.exit(f"bench_metrics: {method} {path}: {r.status} {payload[:300]!r}")
    return payload


def measure(exe, n):
    proc = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        url = proc.stdout.readline().decode().strip()
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        call(conn, "POST", "/v1/jobs", {"name": "train", "settings": {
            "min_nodes": n, "max_nodes": n, "heartbeat_interval": 1, "failure_timeout": 60}})
        for i in range(n):
            call(conn, "POST", "/v1/jobs/train/join", {"id": f"m{i:05}", "host": f"h{i // 8}",
                                                       "address": f"10.0.{i // 250}.{i % 250}:29500"})
        for beat in range(3):
            for i in range(n):
                step = 100 * beat + 10
                call(conn, "POST", "/v1/jobs/train/heartbeat", {"member": f"m{i:05}", "generation": 1, "metrics": {
                    "step": step, "step_time": 0.1 + (i % 7) / 100, "samples_per_sec": 1000.0 - i % 13}})
            time.sleep(0.4)
        times, body = [], b""
        for _ in range(7):
            started = time.perf_counter()
            body = call(conn, "GET", "/metrics")
            times.append(time.perf_counter() - started)
        lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
        per_member = [line for line in lines if 'member="m00000"' in line]
        return {"bytes": len(body), "series": len(lines), "per_member": len(per_member),
                "median_ms": statistics.median(times) * 1000, "max_ms": max(times) * 1000}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--members", default="1000,10000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.members.split(",")]
    rows = [(n, measure(args.coordinator, n)) for n in sizes]
    print("| members | /metrics body | series | series per member | scrape median | scrape max |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, r in rows:
        print(f"| {n:,} | {r['bytes'] / 1e6:.2f} MB | {r['series']:,} | {r['per_member']} | "
              f"{r['median_ms']:.1f} ms | {r['max_ms']:.1f} ms |")
    if len(rows) > 1:
        (n0, a), (n1, b) = rows[0], rows[-1]
        print(f"\n{n1:,} against {n0:,} members: body x{b['bytes'] / a['bytes']:.1f}, "
              f"scrape time x{b['median_ms'] / a['median_ms']:.1f} (members x{n1 / n0:.0f})")


if __name__ == "__main__":
    main()
