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

import ctypes
import json
import threading
from ctypes import POINTER, byref, c_char, c_char_p, c_double, c_int32, c_int64, c_size_t, c_uint64

from . import _lib, _util
from .comm import Communicator
from .errors import InvalidArgument, LibraryNotFound

__all__ = ["Membership"]

# The functions below belong in _lib.PROTOTYPES with every other; until that
# table lists them, they are declared here on first use, so that a library
# built before capi/membership.cpp still loads for everything else.
membership_p = getattr(_lib, "membership_p", None) or _lib._opaque("cohort_membership")

_P = POINTER
_owned = _P(_P(c_char))
_S = _lib._STATUS

_PROTOTYPES = {
    "cohort_membership_create": (_S, [c_char_p, c_char_p, c_char_p, c_char_p, _P(membership_p)]),
    "cohort_membership_from_env": (_S, [_P(membership_p)]),
    "cohort_membership_destroy": (None, [membership_p]),
    "cohort_membership_member": (_S, [membership_p, _P(c_char_p)]),
    "cohort_membership_job": (_S, [membership_p, _P(c_char_p)]),
    "cohort_membership_next_world": (_S, [membership_p, c_int64, _owned, _P(c_size_t)]),
    "cohort_membership_round_pending": (_S, [membership_p, _P(c_int32)]),
    "cohort_membership_request_round": (_S, [membership_p, _P(c_int32)]),
    "cohort_membership_communicator": (_S, [membership_p, _P(_lib.comm_p)]),
    "cohort_membership_record_step": (_S, [membership_p, c_uint64, c_double, c_double, c_double,
                                           c_double]),
    "cohort_membership_set_collective": (_S, [membership_p, c_uint64, c_int32]),
    "cohort_membership_set_gpu_json": (_S, [membership_p, c_char_p]),
    "cohort_membership_next_shard": (_S, [membership_p, _owned, _P(c_size_t)]),
    "cohort_membership_shard_done": (_S, [membership_p, c_uint64, _owned, _P(c_size_t)]),
    "cohort_membership_leave": (_S, [membership_p]),
}

_declared = None
_declare_lock = threading.Lock()


def _library():
    """The loaded library with the membership functions declared."""
    global _declared
    lib = _lib.load()
    if _declared is lib:
        return lib
    with _declare_lock:
        for name, (restype, argtypes) in _PROTOTYPES.items():
            if name in _lib.PROTOTYPES:
                continue  # declared by _lib.load()
            try:
                func = getattr(lib, name)
            except AttributeError:
                raise LibraryNotFound(
                    f"{_lib.path()} lacks {name}: it was built without the membership API "
                    "(capi/membership.cpp); rebuild it") from None
            func.restype = restype
            func.argtypes = argtypes
            if restype is _S:
                func.errcheck = _lib._check
        _declared = lib
    return lib


def _seconds_to_ms(name, seconds):
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds >= 0:
        raise InvalidArgument(f"{name} must be a number of seconds >= 0, not {seconds!r}")
    return int(round(seconds * 1000))


def _measured(name, value):
    """A metric for the C call: None (not measured) becomes -1."""
    if value is None:
        return -1.0
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a number of seconds or None, not {value!r}")
    return float(value)


def _adopt_communicator(lib, ptr):
    """A cohort.Communicator around a cohort_comm* the library made."""
    rank, size = c_int32(), c_int32()
    try:
        lib.cohort_comm_rank(ptr, byref(rank))
        lib.cohort_comm_size(ptr, byref(size))
    except Exception:
        lib.cohort_comm_destroy(ptr)
        raise
    comm = Communicator.__new__(Communicator)
    comm._lib = lib
    comm._ptr = ptr
    comm._pending = []
    comm._rank = rank.value
    comm._size = size.value
    return comm


class Membership(_util.Handle):
    """A member of job `job` on the coordinator at `coordinator`
    ("http://HOST:PORT" or "HOST:PORT"). member None: HOST-PID; host None:
    this machine's name. The token is $COHORT_COORDINATOR_TOKEN. Contacts
    nobody until next_world().

    close() (or the end of a `with` block) stops heartbeating without
    leaving: the coordinator finds the member failed after its
    failure_timeout. Call leave() to say goodbye."""

    _kind = "membership"
    _destroy_name = "cohort_membership_destroy"

    def __init__(self, coordinator, job, member=None, host=None, *, _ptr=None):
        lib = _library()
        if _ptr is None:
            _ptr = _util.create(lib.cohort_membership_create, membership_p,
                                _util.text("coordinator", coordinator), _util.text("job", job),
                                _util.text("member", member, True), _util.text("host", host, True))
        super().__init__(_ptr)
        self._lib = lib

    @classmethod
    def from_env(cls):
        """A Membership from $COHORT_COORDINATOR, $COHORT_JOB, $COHORT_MEMBER,
        $COHORT_HOST, $COHORT_COORDINATOR_TOKEN and $COHORT_GENERATION (a
        launcher that joined this member already). cohort.InvalidArgument
        names a variable that is missing or malformed."""
        lib = _library()
        return cls(None, None, _ptr=_util.create(lib.cohort_membership_from_env, membership_p))

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
        return self._text("job")

    def _json(self, func, *args):
        buf = _P(c_char)()
        length = c_size_t()
        func(self._h(), *args, byref(buf), byref(length))
        try:
            return json.loads(ctypes.string_at(buf, length.value))
        finally:
            self._lib.cohort_free(buf)

    def next_world(self, timeout=60.0):
        """Joins (or, once round_pending, joins the new round), heartbeats and
        waits up to `timeout` seconds for the member's world: {"state":
        "active", "generation", "rank", "world_size", "local_rank", "local_world_size",
        "node_rank"}. With no round pending, the current world at once.
        Raises cohort.Timeout when the round has not closed in time (the
        member keeps waiting in the job: call again)."""
        return self._json(self._lib.cohort_membership_next_world,
                          _seconds_to_ms("timeout", timeout))

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

    def communicator(self):
        """A cohort.Communicator for the last world, bootstrapped on the
        coordinator's store of its generation; blocks until every rank of the
        world made one."""
        ptr = _util.create(self._lib.cohort_membership_communicator, _lib.comm_p, self._h())
        return _adopt_communicator(self._lib, ptr)

    def record_step(self, step, step_time=None, samples_per_sec=None, data_wait=None,
                    collective_wait=None):
        """One training step for the next heartbeat (seconds; None: not
        measured). At most 64 steps are kept between two heartbeats."""
        self._lib.cohort_membership_record_step(
            self._h(), _util.u64("step", step), _measured("step_time", step_time),
            _measured("samples_per_sec", samples_per_sec), _measured("data_wait", data_wait),
            _measured("collective_wait", collective_wait))

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
        """Reports a lease done: {"outcome", "counted"}."""
        return self._json(self._lib.cohort_membership_shard_done, _util.u64("lease", lease))

    def leave(self):
        """Stops heartbeating and says goodbye: the job opens a new round at
        once. Calling it again does nothing; next_world() joins again."""
        self._lib.cohort_membership_leave(self._h())

    def __repr__(self):
        if self.closed:
            return "cohort.Membership(closed)"
        return f"cohort.Membership(job={self.job!r}, member={self.member!r})"
