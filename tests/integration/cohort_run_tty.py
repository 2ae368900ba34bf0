#!/usr/bin/env python3
"""cohort-run on a terminal and off one: two cohort-train workers under
`cohort-run --standalone`. Cases:

  tty    stdout is a pseudo-terminal (Python's pty) of 24 rows, and local
         worker 1 is SIGKILLed 1.5 s in (--kill-worker): cohort-run keeps
         the bottom row for its status (a scroll region of rows 1..23) and
         draws there the phase, generation, world size, the epoch's
         progress bar, steps/s, samples/s and, after the kill, "failures
         1"; the kill's event lines scroll above; no "progress:" lines;
         the terminal is resized to 30 rows mid-run and the region follows;
         at the end the region is reset before the summary, and it exits 0
  plain  stdout is a pipe: plain "cohort-run [  1.23s] ..." lines as
         before, "progress:" lines among them, not one escape sequence
  quiet  a terminal again, with --quiet: nothing drawn at all

    cohort_run_tty.py --run PATH --train PATH [CASE...]

A watchdog kills every child and fails a case that overruns.
"""

import argparse
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

import case_runner  # beside this file, so on sys.path when run as a script

from coordinator_http import CaseFailed, check

CASE_DEADLINE_S = 90.0
children = []


def command(tools, *extra):
    return [tools.run, "--standalone", "--nproc-per-node", "2", "--progress", "0.5", *extra, "--",
            tools.train, "--epochs", "3", "--shards", "24", "--step-ms", "100"]


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def run_on_pty(tools, workdir, extra=(), on_output=None, timeout=60.0):
    """Runs cohort-run with stdout on a new pty; returns (exit code, bytes
    written to the terminal). on_output(master_fd, output so far) is called
    as output arrives."""
    master, slave = os.openpty()
    set_size(slave, 24, 120)
    env = dict(os.environ, TERM="xterm")
    with open(os.path.join(workdir, "stderr"), "wb") as err:
        proc = subprocess.Popen(command(tools, *extra), stdin=subprocess.DEVNULL, stdout=slave, stderr=err,
                                env=env, cwd=workdir)
    children.append(proc)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            check(time.monotonic() < deadline, f"cohort-run did not finish within {timeout} s: {bytes(out[-800:])!r}")
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    chunk = b""
                if not chunk:
                    break
                out += chunk
                if on_output:
                    on_output(master, out)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
    return code, bytes(out)


def stderr_of(workdir):
    with open(os.path.join(workdir, "stderr"), errors="replace") as f:
        return f.read()[-1500:]


STATUS = re.compile(rb"\x1b7\x1b\[(\d+);1H\x1b\[2K\x1b\[7m([^\x1b]*)\x1b\[0m\x1b8")


def case_tty(tools, workdir):
    resized = []

    def resize(master, out):
        # Once a status row with a step rate is drawn, make the terminal taller.
        if not resized and re.search(rb"\d steps/s", out):
            set_size(master, 30, 100)
            resized.append(len(out))

    code, out = run_on_pty(tools, workdir, extra=("--kill-worker", "1@1.5"), on_output=resize)
    check(code == 0, f"cohort-run exited {code}: {out[-800:]!r} {stderr_of(workdir)}")
    check(out.count(b"\x1b[1;23r") == 1, f"the scroll region of rows 1..23 was not set once: {out[:300]!r}")
    rows = STATUS.findall(out)
    check(len(rows) >= 3, f"{len(rows)} status rows drawn: {out[-800:]!r}")
    texts = [t.decode() for _, t in rows]
    pattern = re.compile(r"^\d\d:\d\d (forming|rendezvous|running) gen \d+ world \d+ ")
    check(all(pattern.match(t) for t in texts), f"a status row without phase, generation and world: {texts}")
    running = [t for t in texts if re.match(r"^\d\d:\d\d running gen 1 world 2 epoch [123]/3 \[#*-*\] +\d+% \d+/24 "
                                            r"[\d.]+ steps/s [\d.k]+ samples/s$", t)]
    check(running, f"no status row of the running job with its epoch bar and step rate: {texts}")
    check(resized, f"no step rate shown before the end: {texts}")
    after = out[resized[0]:]
    check(b"\x1b[1;29r" in after, "the scroll region did not follow the terminal to 30 rows")
    check(any(int(r) == 30 for r, _ in STATUS.findall(after)), "no status row drawn on row 30 after the resize")
    check(any(t.endswith(" failures 1") for t in texts), f"no status row counts the killed worker: {texts[-5:]}")
    check(b"--kill-worker: sent SIGKILL" in out, "the kill's event line is missing")
    check(b"progress:" not in out, "progress lines printed on a terminal: the status row shows them")
    reset = out.rfind(b"\x1b[r")
    check(reset > out.rfind(b"\x1b[7m"), "the scroll region was not reset after the last status row")
    check(b"done: every worker finished" in out[reset:], f"no final line after the reset: {out[reset:][:400]!r}")
    print(f"tty: {len(rows)} status rows, e.g. {running[-1]!r}", flush=True)


def case_plain(tools, workdir):
    with open(os.path.join(workdir, "stderr"), "wb") as err:
        proc = subprocess.Popen(command(tools), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                env=dict(os.environ, TERM="xterm"), cwd=workdir)
    children.append(proc)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        raise CaseFailed("cohort-run did not finish within 60 s") from None
    check(proc.returncode == 0, f"cohort-run exited {proc.returncode}: {out[-800:]!r} {stderr_of(workdir)}")
    check(b"\x1b" not in out, f"an escape sequence on a pipe: {out[:400]!r}")
    lines = out.decode().splitlines()
    ours = [line for line in lines if line.startswith("cohort-run ")]
    check(any(re.match(r"cohort-run \[ *[\d.]+s\] progress: round \d+, 2 workers, step \d+", line) for line in ours),
          f"no progress line: {ours}")
    check(any("done: every worker finished (exit 0)" in line for line in ours), f"no done line: {ours[-5:]}")
    print(f"plain: {len(ours)} cohort-run lines, no escape sequence", flush=True)


def case_quiet(tools, workdir):
    code, out = run_on_pty(tools, workdir, extra=("--quiet",))
    check(code == 0, f"cohort-run --quiet exited {code}: {stderr_of(workdir)}")
    check(b"\x1b[" not in out, f"--quiet drew on the terminal: {out[:400]!r}")
    check(b"cohort-run [" not in out, f"--quiet printed event lines: {out[:400]!r}")
    print("quiet: nothing drawn", flush=True)


CASES = {"tty": case_tty, "plain": case_plain, "quiet": case_quiet}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all: {', '.join(CASES)})")
    parser.add_argument("--run", required=True, help="cohort-run")
    parser.add_argument("--train", required=True, help="cohort-train")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (expected {', '.join(CASES)})")
    failed = 0
    for name in args.cases or list(CASES):
        passed = case_runner.run_case(name, lambda workdir, n=name: CASES[n](args, workdir),
                                      prefix=f"cohort-run-tty-{name}-", deadline_s=CASE_DEADLINE_S,
                                      kill_all=lambda: case_runner.kill_live(children),
                                      clean_up=lambda: case_runner.reap(children), expected=(CaseFailed,))
        failed += 0 if passed else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
