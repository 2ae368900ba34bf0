"""This process as a member of an elastic job (docs/elastic.md): Membership
joins the coordinator, heartbeats on a thread of its own with the metrics the
program records, says when a new round opens, and builds each world's
Communicator on the coordinator's store.

    with cohort.Membership.from_env() as member:    # under a launcher
        world = member.next_world(timeout=600)
        comm = member.communicator()
        for step in ...:
            if member.round_pending:
                comm.close()
                world = member.next_world(timeout=600)
                comm = member.communicator()
            ...
            member.record_step(step, step_time=dt, samples_per_sec=n / dt)
        member.leave()

Worlds and shard leases are dicts. Every method may be called from any
thread; the blocking ones release the GIL.
"""

import json
from ctypes import byref, c_char_p, c_int32

from . import _lib, _util
from .comm import Communicator
from .coordinator import RELEASE_OUTCOMES, SHARD_OUTCOMES
from .errors import InvalidArgument

__all__ = ["Membership", "role_job"]


def _measured(name, value):
    """A metric for the C call: None (not measured) becomes -1."""
    if value is None:
        return -1.0
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a number of seconds or None, not {value!r}")
    return float(value)


def role_job(job, role=None):
    """The coordinator job of role `role` of job `job` (docs/elastic.md,
    "Role groups"): `job` for the default role (None, "", "default" or
    "worker"), else "job.role". cohort.InvalidArgument for a role that is
    not 1 to 64 letters, digits, '_' or '-'."""
    lib = _lib.load()
    return _util.owned_bytes(lib.cohort_role_job, _util.text("job", job),
                             _util.text("role", role, True)).decode("utf-8")


class Membership(_util.Handle):
    """A member of job `job` on the coordinator at `coordinator`
    ("http://HOST:PORT" or "HOST:PORT", a comma-separated list of those for
    replicas, or "etcd://HOST:PORT/PREFIX"). member None: HOST-PID; host None:
    this machine's name. The token is $COHORT_COORDINATOR_TOKEN. Contacts
    nobody until next_world().

    role: the member's role in a job of several (None: the default role).
    Each role is a world of its own, the coordinator job role_job(job, role):
    an evaluator's rounds never touch the workers'.

    close() (or the end of a `with` block) stops heartbeating without
    leaving: the coordinator finds the member failed after its
    failure_timeout. Call leave() to say goodbye."""

    _kind = "membership"
    _destroy_name = "cohort_membership_destroy"

    def __init__(self, coordinator, job, member=None, host=None, *, role=None, _ptr=None):
        lib = _lib.load()
        if _ptr is None:
            _ptr = _util.create(lib.cohort_membership_from_role, _lib.membership_p,
                                _util.text("coordinator", coordinator), _util.text("job", job),
                                _util.text("role", role, True), _util.text("member", member, True),
                                _util.text("host", host, True))
        super().__init__(_ptr)
        self._lib = lib

    @classmethod
    def from_env(cls):
        """A Membership from $COHORT_COORDINATOR, $COHORT_JOB, $COHORT_ROLE,
        $COHORT_MEMBER, $COHORT_HOST, $COHORT_COORDINATOR_TOKEN and
        $COHORT_GENERATION (a launcher that joined this member already). cohort.InvalidArgument
        names a variable that is missing or malformed."""
        lib = _lib.load()
        return cls(None, None, _ptr=_util.create(lib.cohort_membership_from_env, _lib.membership_p))

    def _text(self, name):
        out = c_char_p()
        getattr(self._lib, "cohort_membership_" + name)(self._h(), byref(out))
        return _util.decode(out.value)

    @property
    def member(self):
        """The member's id in the job."""
        return self._text("member")

    @property
    def job(self):
        """The coordinator job the member is in: role_job(job, role)."""
        return self._text("job")

    @property
    def role(self):
        """The member's role, "default" when none was given."""
        return self._text("role")

    def _json(self, func, *args):
        return json.loads(_util.owned_bytes(func, self._h(), *args))

    def next_world(self, timeout=60.0):
        """Joins (or, once round_pending, joins the new round), heartbeats and
        waits up to `timeout` seconds for the member's world: {"state":
        "active", "generation", "rank", "world_size", "local_rank", "local_world_size",
        "node_rank"}. With no round pending, the current world at once.
        Raises cohort.Timeout when the round has not closed in time (the
        member keeps waiting in the job: call again)."""
        return self._json(self._lib.cohort_membership_next_world,
                          _util.seconds("timeout", timeout))

    @property
    def round_pending(self):
        """True once a heartbeat answer said a new round is open (or the
        member is no longer in its world): finish or abandon the step, close
        the communicator, call next_world()."""
        out = c_int32()
        self._lib.cohort_membership_round_pending(self._h(), byref(out))
        return bool(out.value)

    def request_round(self):
        """Asks for a new round now (after a failed collective); True when
        one is open, and then round_pending is True at once."""
        out = c_int32()
        self._lib.cohort_membership_request_round(self._h(), byref(out))
        return bool(out.value)

    def report_dead(self, comm):
        """After a collective failed on `comm` (this world's communicator):
        tells the coordinator which members died (comm.dead_ranks, mapped to
        member ids), so it marks them failed at once instead of waiting
        last_call, then asks for a round as request_round. Returns how many
        members were reported; round_pending says whether a round is open."""
        reported = c_int32()
        pending = c_int32()
        self._lib.cohort_membership_report_dead(self._h(), comm._h(), byref(reported), byref(pending))
        return reported.value

    def communicator(self):
        """A cohort.Communicator for the last world, bootstrapped on the
        coordinator's store of its generation; blocks until every rank of the
        world made one."""
        ptr = _util.create(self._lib.cohort_comm_from_membership, _lib.comm_p, self._h())
        return Communicator(None, None, _ptr=ptr)

    def record_step(self, step, step_time=None, samples_per_sec=None, data_wait=None,
                    collective_wait=None):
        """One training step for the next heartbeat (seconds; None: not
        measured). At most 64 steps are kept between two heartbeats."""
        self._lib.cohort_membership_record_step(
            self._h(), _util.u64("step", step), _measured("step_time", step_time),
            _measured("samples_per_sec", samples_per_sec), _measured("data_wait", data_wait),
            _measured("collective_wait", collective_wait))

    def add_data_wait(self, seconds):
        """Time spent waiting for input that the program did not measure
        itself (a ShardLoader over this membership adds its waits): the sum
        since the last record_step becomes that step's data_wait when
        record_step leaves data_wait None or 0."""
        self._lib.cohort_membership_add_data_wait(self._h(), _measured("seconds", seconds))

    def set_collective(self, sequence, inside):
        """The collective the program is in (inside True) or last left, by
        its sequence number."""
        self._lib.cohort_membership_set_collective(self._h(), _util.u64("sequence", sequence),
                                                   1 if inside else 0)

    def set_gpu_json(self, samples):
        """GPU samples sent with the heartbeats from now on: JSON text (str),
        or any value json.dumps takes; None sends none."""
        if samples is None:
            text = None
        elif isinstance(samples, str):
            text = _util.text("samples", samples)
        else:
            text = json.dumps(samples).encode()
        self._lib.cohort_membership_set_gpu_json(self._h(), text)

    def next_shard(self):
        """The member's next shard lease: {"granted", "finished", and when
        granted "lease", "shard_id", "shard", "epoch", "bytes", "expiry"}."""
        return self._json(self._lib.cohort_membership_next_shard)

    def shard_done(self, lease):
        """Reports a lease done: {"outcome": "counted", "counted_late" or
        "already_done", "counted": whether this report counted the shard}."""
        outcome = c_int32()
        self._lib.cohort_membership_shard_done(self._h(), _util.u64("lease", lease), byref(outcome))
        name = SHARD_OUTCOMES[outcome.value]
        return {"outcome": name, "counted": name != "already_done"}

    def shard_release(self, lease):
        """Gives a lease back unread: "released", "requeued" or "reported",
        as CoordinatorClient.shard_release."""
        outcome = c_int32()
        self._lib.cohort_membership_shard_release(self._h(), _util.u64("lease", lease), byref(outcome))
        return RELEASE_OUTCOMES[outcome.value]

    def leave(self):
        """Stops heartbeating and says goodbye: the job opens a new round at
        once. Calling it again does nothing; next_world() joins again."""
        self._lib.cohort_membership_leave(self._h())

    def __repr__(self):
        if self.closed:
            return "cohort.Membership(closed)"
        return f"cohort.Membership(job={self.job!r}, member={self.member!r})"
