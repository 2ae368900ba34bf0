#!/usr/bin/env python3
"""One member of a coordinator job, as a process of its own (started by
coordinator_members.py). It joins, heartbeats at the job's interval, joins
again when a heartbeat answers `rendezvous: true` (docs/coordinator.md),
reads its world whenever it gets a new one, and prints one JSON line per
event to stdout, flushed:

  {"event": "started",  "id", "t"}                 the job's settings read
  {"event": "joined",   "id", "t", "state", "generation", "rank"?}
  {"event": "rendezvous", "id", "t", "generation"} a heartbeat said a round is open
  {"event": "world",    "id", "t", "generation", "rank", "size", "peers": [[rank, id, address]...]}
  {"event": "conflict", "id", "t", "status", "error", "detail"}   a heartbeat refused: join again
  {"event": "left",     "id", "t"}                 after POST leave
  {"event": "error",    "id", "t", "detail"}       anything unexpected; exits 1

`t` is Unix time (time.time()), comparable between the processes of one
machine. Commands on stdin, one a line: `leave` (leave gracefully, exit 0).
At the end of stdin (the test went away) it exits at once without leaving.

    coordinator_member_worker.py --url URL --job JOB --id ID [--token-file F]
                                 [--host H] [--address HOST:PORT]

Standard library only.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse

from coordinator_http import request

WORLD_POLL_S = 0.02  # while waiting for a world, between looks


def emit(member, event, **fields):
    line = {"event": event, "id": member, "t": time.time()}
    line.update(fields)
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def read_commands(leave):
    for line in sys.stdin:
        if line.strip() == "leave":
            leave.set()
    if not leave.is_set():
        os._exit(0)  # the test is gone: so is this member


class Member:
    def __init__(self, args, token):
        self.url, self.job, self.id, self.token = args.url, args.job, args.id, token
        self.descriptor = {"id": args.id, "host": args.host or args.id, "address": args.address}
        self.generation = 0  # of the last world seen
        self.state = "waiting"
        self.interval = 1.0

    def call(self, method, path, body=None, expect=(200, 201)):
        """(status, answer); a connection error or an unexpected status ends
        the member with an error line."""
        try:
            status, answer = request(self.url, method, f"/v1/jobs/{self.job}{path}", body, token=self.token, timeout=5)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            self.fail(f"{method} {path}: {e!r}")
        if status not in expect:
            self.fail(f"{method} {path}: {status} {answer}")
        return status, answer

    def fail(self, detail):
        emit(self.id, "error", detail=detail)
        sys.exit(1)

    def join(self):
        _, answer = self.call("POST", "/join", self.descriptor)
        self.state = "waiting"  # until its world is read (next look_at_world)
        emit(self.id, "joined", **answer)

    def look_at_world(self):
        """Reads the world; emits it when it is new. True when active."""
        quoted = urllib.parse.quote(self.id, safe="")
        status, w = self.call("GET", f"/world?member={quoted}", expect=(200, 409, 503))
        if status == 409:
            # A round closed without it (stale): join again.
            emit(self.id, "conflict", status=status, error=w.get("error"), detail=w.get("detail"))
            self.join()
            return False
        if w.get("state") != "active":
            return False
        if w["generation"] != self.generation or self.state != "active":
            self.generation = w["generation"]
            self.state = "active"
            emit(self.id, "world", generation=w["generation"], rank=w["rank"], size=w["world_size"],
                 peers=[[p["rank"], p["id"], p["address"]] for p in w["peers"]])
        return True

    def heartbeat(self, again=True):
        if self.state != "active":
            self.look_at_world()
        generation = self.generation if self.state == "active" else 0
        status, hb = self.call("POST", "/heartbeat", {"member": self.id, "generation": generation},
                               expect=(200, 408, 409))
        if status == 409 and again and self.state != "active" and self.look_at_world():
            # The round closed between the look at the world and the heartbeat.
            return self.heartbeat(again=False)
        if status != 200:
            emit(self.id, "conflict", status=status, error=hb.get("error"), detail=hb.get("detail"))
            self.join()
            return
        if hb["state"] == "active" and hb.get("rendezvous"):
            emit(self.id, "rendezvous", generation=hb["generation"])
            self.join()
        elif hb["state"] == "active" and (self.state != "active" or hb["generation"] != self.generation):
            self.look_at_world()

    def run(self, leave):
        _, job = self.call("GET", "")
        self.interval = float(job["settings"]["heartbeat_interval"])
        emit(self.id, "started", interval=self.interval)
        self.join()
        next_beat = time.monotonic()
        while True:
            if leave.is_set():
                self.call("POST", "/leave", {"member": self.id})
                emit(self.id, "left")
                return
            now = time.monotonic()
            if now >= next_beat:
                next_beat = max(next_beat + self.interval, now)
                self.heartbeat()
            if self.state != "active":
                self.look_at_world()
                wait = min(WORLD_POLL_S, max(0.0, next_beat - time.monotonic()))
            else:
                wait = max(0.0, next_beat - time.monotonic())
            leave.wait(wait)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--host", default=None)
    parser.add_argument("--address", default="127.0.0.1:29500")
    parser.add_argument("--token-file", default=None)
    args = parser.parse_args()
    token = None
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    leave = threading.Event()
    threading.Thread(target=read_commands, args=(leave,), daemon=True).start()
    Member(args, token).run(leave)
    return 0


if __name__ == "__main__":
    sys.exit(main())
