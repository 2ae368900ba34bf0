#!/usr/bin/env python3
"""One worker of a role group under cohort-run (roles.py): prints the
variables its launcher set (a line "ROLE-ENV {json}"), joins its role's
world through cohort.Membership ($COHORT_JOB and $COHORT_ROLE), all-reduces
rank + 1 at every step, following new rounds, and writes what it saw (its
variables, job, role, generation, world size and sum at every step) to
OUT/MEMBER.PID.json when it is done.

    role_worker.py --out DIR [--steps N] [--step-seconds S] [--torch]

With --torch it forms torch's process group from the variables instead
(init_process_group("gloo", init_method="env://"): RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT of its role's own world) and all-reduces once.
"""

import argparse
import array
import json
import os
import sys
import time

NAMES = ("ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
         "GROUP_RANK", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "COHORT_JOB", "COHORT_ROLE", "COHORT_MEMBER",
         "COHORT_RESTART_COUNT", "COHORT_GENERATION", "COHORT_CHECKPOINT_DIR")


def with_membership(args, record):
    import cohort
    with cohort.Membership.from_env() as member:
        record["job"], record["role"] = member.job, member.role
        world = member.next_world(timeout=60)
        comm = member.communicator()
        for step in range(args.steps):
            if member.round_pending:
                comm.close()
                world = member.next_world(timeout=60)
                comm = member.communicator()
            data = array.array("i", [world["rank"] + 1])
            try:
                comm.allreduce(data)
            except cohort.Error as e:  # a peer died: the next round
                record["errors"].append(str(e))
                member.request_round()
                continue
            record["steps"].append({"generation": world["generation"], "rank": world["rank"],
                                    "world_size": world["world_size"], "sum": data[0]})
            member.record_step(step, step_time=args.step_seconds)
            time.sleep(args.step_seconds)
        comm.close()
        member.leave()


def with_torch(record):
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    record["torch"] = {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "sum": t.item()}
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--torch", action="store_true")
    args = parser.parse_args()
    env = {name: os.environ.get(name) for name in NAMES}
    print("ROLE-ENV " + json.dumps(env), flush=True)
    record = {"env": env, "pid": os.getpid(), "steps": [], "errors": []}
    if args.torch:
        with_torch(record)
    else:
        with_membership(args, record)
    path = os.path.join(args.out, f"{env['COHORT_MEMBER']}.{os.getpid()}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.rename(path + ".tmp", path)
    print(f"role_worker {env['COHORT_MEMBER']}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
