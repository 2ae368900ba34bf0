"""Where this process stands in its job, read from the variables its
launcher set: cohort's own COHORT_*, torchrun's, Open MPI's (mpirun) or
Slurm's (srun), in that order of precedence (docs/launch-env.md).

    env = cohort.read_launch_env()       # env.rank, env.world_size, env.source, ...
    with cohort.Communicator.from_env(timeout=30) as comm:
        comm.allreduce(grads)

The store is $COHORT_STORE whatever the launcher, else
tcp://$MASTER_ADDR:$MASTER_PORT. A malformed or inconsistent variable raises
cohort.InvalidArgument naming it and its value.
"""

import dataclasses
from ctypes import byref, c_char_p, c_int32, c_uint32

from . import _lib, _util
from .comm import Communicator
from .errors import InvalidArgument, NotFound

__all__ = ["LaunchEnv", "read_launch_env", "communicator_from_env"]

_LOOKED_FOR = ("COHORT_RANK/COHORT_WORLD_SIZE, RANK/WORLD_SIZE (torchrun), "
               "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun), SLURM_PROCID/SLURM_NTASKS (srun)")


@dataclasses.dataclass(frozen=True)
class LaunchEnv:
    """rank and world_size; local_rank, local_world_size and node_rank, None
    where the launcher does not say (Open MPI gives no node rank); store, a
    URL or None; source: "cohort", "torchrun", "openmpi", "slurm", or "none"
    when no launcher variables were found (rank 0 of 1); notes: what was
    read from which variable, for logs."""

    rank: int
    world_size: int
    local_rank: "int | None"
    local_world_size: "int | None"
    node_rank: "int | None"
    store: "str | None"
    source: str
    notes: tuple


def read_launch_env():
    """The launch environment of this process (cohort_launch_env_from_env)."""
    lib = _lib.load()
    env = _util.create(lib.cohort_launch_env_from_env, _lib.launch_env_p)
    try:
        def number(name):
            out = c_int32()
            getattr(lib, "cohort_launch_env_" + name)(env, byref(out))
            return out.value

        def known(name):
            value = number(name)
            return None if value < 0 else value

        def text(name):
            out = c_char_p()
            getattr(lib, "cohort_launch_env_" + name)(env, byref(out))
            return _util.decode(out.value)

        count = c_uint32()
        lib.cohort_launch_env_note_count(env, byref(count))
        notes = []
        for i in range(count.value):
            out = c_char_p()
            lib.cohort_launch_env_note(env, i, byref(out))
            notes.append(_util.decode(out.value))
        return LaunchEnv(rank=number("rank"), world_size=number("world_size"),
                         local_rank=known("local_rank"),
                         local_world_size=known("local_world_size"),
                         node_rank=known("node_rank"), store=text("store") or None,
                         source=text("source"), notes=tuple(notes))
    finally:
        lib.cohort_launch_env_destroy(env)


def communicator_from_env(*, rank=None, size=None, store=None, **kwargs):
    """A Communicator whose rank, size and store come from read_launch_env(),
    each unless given here; the other keyword arguments are Communicator's
    (timeout, job_id, secret, ...). Raises cohort.NotFound when no launcher
    variables are set (and rank and size are not given), and
    cohort.InvalidArgument when a world of more than one rank has no store."""
    env = read_launch_env()
    if env.source == "none" and (rank is None or size is None):
        raise NotFound(
            f"no launcher variables found (looked for {_LOOKED_FOR}); start the program with "
            "torchrun, mpirun or srun, or set COHORT_RANK and COHORT_WORLD_SIZE "
            "(COHORT_RANK=0 COHORT_WORLD_SIZE=1 for a single process)")
    rank = env.rank if rank is None else rank
    size = env.world_size if size is None else size
    store = env.store if store is None else store
    if store is None and size != 1:
        raise InvalidArgument(
            f"rank {rank} of {size} (from {env.source}) needs a store where the ranks meet: "
            "set COHORT_STORE=tcp://HOST:PORT (rank 0's host listens there) or "
            "COHORT_STORE=file:///SHARED/DIR, or MASTER_ADDR and MASTER_PORT")
    return kwargs.pop("_cls", Communicator)(rank, size, store, **kwargs)


def _from_env(cls, **kwargs):
    return communicator_from_env(_cls=cls, **kwargs)


_from_env.__doc__ = communicator_from_env.__doc__
Communicator.from_env = classmethod(_from_env)
