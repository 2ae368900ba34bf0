"""python -m cohort: the version, and a look at rank orders and shard plans."""

import argparse
import re
import sys

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def _size(text):
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 64MiB, 1GB)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m cohort",
        description="cohort: coordination for distributed ML training.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--library", action="store_true",
                        help="print the path of the loaded libcohort and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    ranks = commands.add_parser("ranks", help="print the rank order of a cluster file")
    ranks.add_argument("cluster", help="cluster file (.yaml, .yml or .json)")
    ranks.add_argument("--roles", default=None,
                       help="comma-separated roles to rank, or 'all' (default: worker,chief)")
    plan = commands.add_parser("plan", help="print a shard plan as JSON")
    plan.add_argument("dataset", help="dataset listing (.txt, .yaml or .json)")
    plan.add_argument("cluster", help="cluster file (.yaml, .yml or .json)")
    group = plan.add_mutually_exclusive_group(required=True)
    group.add_argument("--shard-bytes", type=_size, help="target shard size, e.g. 256MiB")
    group.add_argument("--shard-count", type=int, help="exact number of shards")
    plan.add_argument("--strategy", default="hash",
                      choices=["round_robin", "hash", "locality", "random"])
    plan.add_argument("--locality", default=None,
                      help="locality map {NODE: {FILE: SCORE}}, YAML or JSON "
                           "(needed by --strategy locality)")
    plan.add_argument("--replication", type=int, default=1)
    plan.add_argument("--seed", type=int, default=0)
    plan.add_argument("--roles", default=None,
                      help="comma-separated roles that hold shards, or 'all' "
                           "(default: worker,chief)")
    return parser


def _roles(text):
    return text.split(",") if text and text != "all" else text


def _ranks(cohort, args):
    with cohort.Topology.from_file(args.cluster) as topo, \
            topo.rank_order(_roles(args.roles)) as order:
        print("rank  node_rank  local_rank  local_world_size  node")
        for info in order:
            print(f"{info.rank:4}  {info.node_rank:9}  {info.local_rank:10}  "
                  f"{info.local_world_size:16}  {info.node_id}")
        print(f"# world size {len(order)}, hosts {order.host_count}, ring crossings: " +
              ", ".join(f"{lv} {order.ring_crossings(lv)}" for lv in cohort.LEVELS))


def _plan(cohort, args):
    if args.strategy == "locality" and args.locality is None:
        raise cohort.InvalidArgument("--strategy locality needs --locality FILE")
    with cohort.Dataset.from_file(args.dataset) as data, \
            cohort.Topology.from_file(args.cluster) as topo:
        plan = cohort.plan_shards(data, topo, strategy=args.strategy,
                                  shard_bytes=args.shard_bytes, shard_count=args.shard_count,
                                  replication=args.replication, seed=args.seed,
                                  locality=args.locality, roles=_roles(args.roles))
        with plan:
            print(plan.to_json())


def main(argv=None):
    args = _parser().parse_args(argv)
    import cohort
    try:
        if args.version:
            print(f"cohort {cohort.version()}")
        elif args.library:
            print(cohort.library_path())
        elif args.command == "ranks":
            _ranks(cohort, args)
        elif args.command == "plan":
            _plan(cohort, args)
        else:
            _parser().print_help()
            return 2
    except cohort.Error as exc:
        print(f"cohort: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
