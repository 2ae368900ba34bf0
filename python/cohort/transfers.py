"""The transfer scheduler (TransferScheduler): reads of byte ranges of real
files, run by I/O threads into your buffers or a staging directory, ordered
by priority with aging, and steered by a policy: a GpuMonitor's GPU rule
pack, or a Python callable. docs/data.md is the guide.

    with cohort.data.TransferScheduler(workers=4, staging_dir="/dev/shm/cohort",
                                       policy=monitor, registry=registry) as scheduler:
        batch = bytearray(64 << 20)             # or a numpy array, a memoryview
        t = scheduler.submit("shard-17/batch-3", "/data/train-017.tar", offset=3 * len(batch),
                             buffer=batch, workload="train", prefetch=True)
        r = t.wait()                            # a TransferResult: r.ok, r.error, r.decisions
        print(scheduler.explain("shard-17/batch-3"), scheduler.stats())

A policy callable gets a TransferFacts and returns PolicyActions (or dicts
of their fields). It, and a transfer's on_done, are called on the
scheduler's own threads (the policy on its dispatcher, on_done on an I/O
thread), holding the GIL only while they run; an exception in a policy is
recorded as a "policy" decision and the transfer goes on as if no rule
applied.
"""

import ctypes
import itertools
import json
import math
import numbers
import os
import threading
import traceback
import weakref
from ctypes import byref, c_int32
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from . import _lib, _util
from .errors import Error, InvalidArgument, Timeout, error_for

ACTION_TYPES = ("reduce_prefetch", "delay_transfer", "prioritize", "stage_transfer")


@dataclass(frozen=True)
class TransferFacts:
    """What the scheduler tells a policy about a transfer it is about to
    queue or start. priority is the transfer's plus its workload's."""
    id: str
    workload: str
    kind: str
    bytes: int
    priority: int
    prefetch: bool


@dataclass
class PolicyAction:
    """One rule's say on a transfer: type is one of ACTION_TYPES; factor for
    reduce_prefetch (multiplies the prefetch depth), delay (seconds) for
    delay_transfer, boost for prioritize (None: the scheduler's
    prioritize_boost). category "memory" or "thermal" is counted in the
    stats; values are what the rule saw, shown in the decisions."""
    type: str
    rule: str = "policy"
    category: str = ""
    factor: float = 1.0
    delay: float = 0.0
    boost: Optional[int] = None
    values: Dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TransferDecision:
    """One decision taken on a transfer, and why."""
    at_seconds: float          # after submit
    rule: str                  # "scheduler" for the scheduler's own
    action: str                # delay_transfer, prioritize, reduce_prefetch, stage_transfer,
                               # dispatch, deadline, policy
    values: Dict[str, Optional[float]]
    effect: str
    delay_seconds: float


@dataclass(frozen=True)
class TransferResult:
    """How a transfer ended. code is 0 or a COHORT_ERR_* status; error names
    the file and the offset; staged is the staging file (the caller removes
    it) or None."""
    id: str
    code: int
    error: str
    bytes: int
    staged: Optional[str]
    missed_deadline: bool
    waited_seconds: float
    seconds: float
    decisions: Tuple[TransferDecision, ...]

    @property
    def ok(self):
        return self.code == 0

    def check(self):
        """Returns self, or raises the failure (cohort.FileError, NotFound,
        Closed, ...) with its message."""
        if self.code != 0:
            raise error_for(self.code, self.error)
        return self


@dataclass(frozen=True)
class TransferStats:
    """The scheduler's queue and counters now (docs/data.md, "Metrics")."""
    queued: int
    held: int
    running: int
    submitted: int
    completed: int
    failed: int
    dropped: int
    delayed: int
    total_delay_seconds: float
    prioritized: int
    staged: int
    prefetch_waits: int
    misses: int
    bytes: int
    bytes_per_second: float
    memory_pressure_events: int
    temperature_events: int
    prefetch_factor: float
    prefetch_depth: int


def _decision(d):
    return TransferDecision(d["at_seconds"], d["rule"], d["action"], dict(d["values"]),
                            d["effect"], d["delay_seconds"])


def _result(text):
    d = json.loads(text)
    return TransferResult(
        id=d["id"], code=d["status"], error=d["error"], bytes=d["bytes"],
        staged=d["staged"] or None, missed_deadline=d["missed_deadline"],
        waited_seconds=d["waited_seconds"], seconds=d["seconds"],
        decisions=tuple(_decision(x) for x in d["decisions"]))


def _number(where, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(f"{where}: {name} must be a number, not {type(value).__name__}")
    return float(value)


def _int(where, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgument(f"{where}: {name} must be an integer, not {type(value).__name__}")
    return int(value)


# ------------------------------------------------------------- buffers

class _Pin:
    """A writable, C-contiguous buffer's address, and the references that
    keep it exported (alive and unmoved) until release()."""

    __slots__ = ("obj", "view", "array", "address", "nbytes")

    def __init__(self, where, obj):
        try:
            view = memoryview(obj)
        except TypeError:
            raise InvalidArgument(
                f"{where}: buffer must support the buffer protocol (bytearray, numpy array, "
                f"memoryview), not {type(obj).__name__}") from None
        if view.readonly:
            view.release()
            raise InvalidArgument(f"{where}: buffer is read-only ({type(obj).__name__}); pass a "
                                  "writable one (bytearray, a writable numpy array)")
        if not view.c_contiguous:
            view.release()
            raise InvalidArgument(f"{where}: buffer is not C-contiguous; pass a contiguous one "
                                  "(numpy.ascontiguousarray)")
        self.obj, self.view, self.nbytes = obj, view, view.nbytes
        self.array = (ctypes.c_char * view.nbytes).from_buffer(view) if view.nbytes else None
        self.address = ctypes.addressof(self.array) if self.array is not None else None

    def release(self):
        self.array = None  # drops the ctypes export first, then the view's
        if self.view is not None:
            try:
                self.view.release()
            except BufferError:
                pass
            self.view = None
        self.obj = None


class _State:
    """What the C scheduler's callbacks reach, kept apart from the
    TransferScheduler so that they hold no reference to it: the transfers
    in flight (their buffers and on_done) by key."""

    def __init__(self):
        self.lock = threading.Lock()
        self.inflight = {}  # key -> (_Pin or None, on_done or None)
        self.keys = itertools.count(1)

    def add(self, entry):
        with self.lock:
            key = next(self.keys)
            self.inflight[key] = entry
            return key

    def pop(self, key):
        with self.lock:
            entry = self.inflight.pop(key, None)
        if entry is not None and entry[0] is not None:
            entry[0].release()
        return entry

    def clear(self):
        with self.lock:
            keys = list(self.inflight)
        for key in keys:
            self.pop(key)


# Set while a scheduler's thread runs a Python callback: a scheduler whose
# last reference goes away there is destroyed on another thread, since its
# destructor joins the thread it would be called on.
_callback_thread = threading.local()


def _policy_callback(policy):
    """The C policy for a Python callable: its actions into the sink; an
    exception (or a bad answer) becomes the policy's error."""
    lib = _lib.load()

    def call(_user_data, tid, workload, kind, nbytes, priority, prefetch, actions):
        _callback_thread.active = True
        try:
            facts = TransferFacts(_util.decode(tid), _util.decode(workload), _util.decode(kind),
                                  nbytes, priority, bool(prefetch))
            answer = policy(facts)
            for action in (answer or ()):
                _add_action(lib, actions, action)
            return 0
        except BaseException as exc:
            try:
                lib.cohort_transfer_actions_set_error(
                    actions, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
            except BaseException:
                pass
            return 1
        finally:
            _callback_thread.active = False

    return _lib.transfer_policy_fn(call)


def _add_action(lib, actions, action):
    if isinstance(action, dict):
        action = PolicyAction(**action)
    if not isinstance(action, PolicyAction):
        raise TypeError(f"a policy returns PolicyActions (or dicts), not {type(action).__name__}")
    where = f"policy action {action.type!r}"
    boost = None
    if action.boost is not None:
        boost = byref(c_int32(_int(where, "boost", action.boost)))
    lib.cohort_transfer_actions_add(
        actions, _util.text("rule", action.rule or "policy"), _util.text("type", action.type),
        _util.text("category", action.category or ""), _number(where, "factor", action.factor),
        _number(where, "delay", action.delay), boost)
    for name, value in (action.values or {}).items():
        lib.cohort_transfer_actions_add_value(actions, _util.text("value name", name),
                                              _number(where, f"value {name!r}", value))


def _done_callback(state):
    def call(user_data, _tid, _status, result_json, _length):
        entry = state.pop(user_data or 0)
        if entry is None or entry[1] is None:
            return
        _callback_thread.active = True
        try:
            entry[1](_result(result_json.decode("utf-8", "replace")))
        except BaseException:  # the transfer is done; the callback's failure is the caller's
            traceback.print_exc()
        finally:
            _callback_thread.active = False

    return _lib.transfer_done_fn(call)


def _destroy_scheduler(destroy, ptr, state, *callbacks):
    """Destroys the C scheduler (joining its threads, so no callback runs
    after it returns), then lets go of the buffers still pinned."""
    if getattr(_callback_thread, "active", False):
        threading.Thread(target=_destroy_scheduler, args=(destroy, ptr, state, *callbacks),
                         name="cohort-scheduler-close", daemon=True).start()
        return
    try:
        destroy(ptr)
    except Exception:  # interpreter shutdown: the library may be gone
        pass
    state.clear()


# ---------------------------------------------------------- transfers

class Transfer(_util.Handle):
    """A submitted transfer: wait() for its TransferResult, done to poll.
    Its buffer stays referenced until the transfer finished."""

    _kind = "transfer"
    _destroy_name = "cohort_transfer_destroy"

    def __init__(self, ptr, id, state, key, pin):
        super().__init__(ptr)
        self.id = id
        self._state, self._key, self._pin = state, key, pin
        self._result = None

    def __repr__(self):
        return f"<cohort.data.Transfer {self.id!r} {'done' if self.done else 'pending'}>"

    @property
    def done(self):
        """True once the transfer finished (read, failed or dropped)."""
        if self._result is not None:
            return True
        out = c_int32()
        _lib.load().cohort_transfer_test(self._h(), byref(out))
        return bool(out.value)

    def wait(self, timeout=None):
        """Blocks until the transfer finishes and returns its TransferResult
        (a failed read is a result whose .ok is False; .check() raises it).
        With `timeout` (seconds) raises cohort.Timeout after that long while
        the transfer goes on."""
        if self._result is not None:
            return self._result
        limit = 0.0 if timeout is None else _util.seconds("timeout", timeout)
        if timeout is not None and limit == 0:
            raise InvalidArgument(f"Transfer.wait: timeout must be a positive number of seconds "
                                  f"(None waits until done), got {timeout!r}")
        if math.isinf(limit):
            limit = 0.0  # forever
        try:
            _lib.load().cohort_transfer_wait(self._h(), limit)
        except Timeout:
            raise
        except Error:
            pass  # the transfer failed: its result says how
        return self.result()

    def result(self):
        """The TransferResult of a finished transfer; cohort.InvalidArgument
        while it runs (wait() for it)."""
        if self._result is None:
            text = _util.owned_string(_lib.load().cohort_transfer_result, self._h())
            self._result = _result(text)
            self._unpin()
        return self._result

    def _unpin(self):
        if self._pin is not None:
            self._pin = None
            self._state.pop(self._key)


class TransferScheduler(_util.Handle):
    """Reads file ranges on `workers` I/O threads (1 to 256), by priority
    with aging (`aging` priority per second waited); `prefetch_depth`
    prefetch transfers at once before reduce_prefetch scales it;
    `staging_dir` (an existing directory) for staged transfers; `registry`
    (a WorkloadRegistry) whose workloads transfers must name; `policy` a
    GpuMonitor (its GPU rule pack) or a callable(TransferFacts) returning
    PolicyActions. The registry and monitor are kept referenced. close()
    (or the end of a `with`) lets the running transfers finish and completes
    the queued ones with cohort.Closed."""

    _kind = "transfer scheduler"
    _destroy_name = "cohort_transfer_scheduler_destroy"

    def __init__(self, workers=2, prefetch_depth=8, aging=1.0, prioritize_boost=100,
                 staging_dir=None, registry=None, policy=None, explain_history=1024):
        from .gpu import GpuMonitor
        from .workloads import WorkloadRegistry
        lib = _lib.load()
        where = "TransferScheduler"
        options = {"workers": _int(where, "workers", workers),
                   "prefetch_depth": _int(where, "prefetch_depth", prefetch_depth),
                   "aging_per_second": _number(where, "aging", aging),
                   "prioritize_boost": _int(where, "prioritize_boost", prioritize_boost),
                   "explain_history": _int(where, "explain_history", explain_history)}
        if staging_dir is not None:
            options["staging_dir"] = os.fsdecode(staging_dir)
        if registry is not None and not isinstance(registry, WorkloadRegistry):
            raise InvalidArgument(f"{where}: registry must be a cohort.data.WorkloadRegistry, "
                                  f"not {type(registry).__name__}")
        monitor = callback = None
        if isinstance(policy, GpuMonitor):
            monitor = policy
        elif callable(policy):
            callback = _policy_callback(policy)
        elif policy is not None:
            raise InvalidArgument(f"{where}: policy must be a GpuMonitor or a callable"
                                  f"(TransferFacts) -> [PolicyAction], not {type(policy).__name__}")
        self._state = _State()
        self._on_done = _done_callback(self._state)
        ptr = _util.create(lib.cohort_transfer_scheduler_create, _lib.transfer_scheduler_p,
                           json.dumps(options).encode("utf-8"),
                           registry._h() if registry is not None else None,
                           monitor._h() if monitor is not None else None,
                           callback if callback is not None else _lib.transfer_policy_fn(), None)
        super().__init__(ptr)
        # Destroyed before the callbacks, the registry and the monitor go.
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _destroy_scheduler,
                                           lib.cohort_transfer_scheduler_destroy, ptr, self._state,
                                           callback, self._on_done, registry, monitor)
        self.registry, self.policy = registry, policy
        if registry is not None:
            registry._schedulers.add(self)

    def submit(self, id, path, length=None, *, offset=0, buffer=None, stage=False, workload="",
               priority=0, kind="dataset", prefetch=False, deadline=None, on_done=None):
        """Queues a read of `length` bytes of `path` at `offset` (length
        None: the buffer's size) into `buffer` (any writable buffer: a
        bytearray, a numpy array, a memoryview; referenced until done), or
        with stage=True into the staging directory. deadline: seconds after
        submit (finishing later counts as a miss). on_done(TransferResult)
        is called on an I/O thread when a started transfer ends. Returns a
        Transfer. cohort.InvalidArgument names the transfer and the field;
        cohort.NotFound for a workload the registry does not know."""
        where = f"TransferScheduler.submit: transfer {id!r}"
        lib = _lib.load()
        handle = self._h()
        if on_done is not None and not callable(on_done):
            raise InvalidArgument(f"{where}: on_done must be a callable(TransferResult), "
                                  f"not {type(on_done).__name__}")
        pin = _Pin(where, buffer) if buffer is not None else None
        try:
            if length is None:
                if pin is None:
                    raise InvalidArgument(f"{where}: give length (bytes to read), or a buffer "
                                          "whose size is the length")
                length = pin.nbytes
            request = {"id": _util.decode(_util.text("id", id)), "workload": workload,
                       "path": os.fsdecode(path), "offset": _int(where, "offset", offset),
                       "length": _int(where, "length", length),
                       "priority": _int(where, "priority", priority), "kind": kind,
                       "prefetch": bool(prefetch), "stage": bool(stage)}
            if deadline is not None:
                request["deadline_seconds"] = _number(where, "deadline", deadline)
            key = self._state.add((pin, on_done))
        except BaseException:
            if pin is not None:
                pin.release()
            raise
        out = _lib.transfer_p()
        try:
            lib.cohort_transfer_submit(handle, json.dumps(request).encode("utf-8"),
                                       pin.address if pin is not None else None,
                                       pin.nbytes if pin is not None else 0, self._on_done, key,
                                       byref(out))
        except BaseException:
            self._state.pop(key)
            raise
        return Transfer(out, request["id"], self._state, key, pin)

    def explain(self, id):
        """The TransferDecisions taken on a transfer so far, while queued or
        running or among the last explain_history finished; cohort.NotFound
        otherwise."""
        text = _util.owned_string(_lib.load().cohort_transfer_scheduler_explain, self._h(),
                                  _util.text("id", id))
        return [_decision(d) for d in json.loads(text)]

    def stats(self):
        """A TransferStats of the queue and the counters now."""
        raw = _lib.transfer_stats()
        _lib.load().cohort_transfer_scheduler_stats(self._h(), byref(raw))
        return TransferStats(**{name: getattr(raw, name) for name, _ in raw._fields_})


__all__ = ["TransferScheduler", "Transfer", "TransferResult", "TransferDecision",
           "TransferStats", "TransferFacts", "PolicyAction", "ACTION_TYPES"]
