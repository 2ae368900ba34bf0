"""Shard plans: which nodes hold which shards (plan_shards, ShardPlan)."""

import json
import operator
import os
import threading
from ctypes import byref, c_char_p, c_size_t, c_uint32, c_uint64

from . import _lib, _util
from ._util import STRATEGIES
from .dataset import Dataset, Shards, split_shards
from .errors import BufferTooSmall, CallbackError, Error, InvalidArgument, NotFound
from .topology import Topology, role_mask

_DEFAULT_WEIGHTS = {"locality": 1.0, "load": 0.5, "hardware": 0.1}


class _Custom:
    """A Python callable as a cohort_assign_fn. An exception must not unwind
    through C, so it is kept here (per thread: replans of one plan may run on
    several), -1 aborts planning, and _planning() raises it once the C call
    has returned."""

    def __init__(self, fn):
        if not callable(fn):
            raise InvalidArgument(f"custom must be callable, not {type(fn).__name__}")
        self.fn = fn
        self._state = threading.local()
        self.cfunc = _lib.assign_fn(self._call)  # referenced by every plan using it

    @property
    def error(self):
        return getattr(self._state, "error", None)

    @error.setter
    def error(self, value):
        self._state.error = value

    def _call(self, user_data, shard, replica, taken, taken_count, member_count):
        if self.error is not None:
            return -1
        try:
            member = operator.index(self.fn(shard, replica, taken[:taken_count], member_count))
        except BaseException as exc:  # everything: nothing may cross into C
            self.error = exc
            return -1
        return max(-1, min(member, 2**63 - 1))


def _planning(custom, func, *args):
    """Calls a planning function, surfacing an exception the callback raised."""
    if custom is not None:
        custom.error = None
    try:
        func(*args)
    except Error as exc:
        raised = custom.error if custom is not None else None
        if raised is None:
            raise
        custom.error = None
        if not isinstance(raised, Exception):  # KeyboardInterrupt, SystemExit
            raise raised from None
        raise CallbackError(f"{exc.message} (the custom callback raised "
                            f"{type(raised).__name__}: {raised})") from raised


class PlanOptions(_util.Handle):
    """The options of a plan; the arguments are those of plan_shards()."""

    _kind = "plan options"
    _destroy_name = "cohort_plan_options_destroy"

    def __init__(self, strategy=None, replication=1, seed=0, load_slack=None, locality=None,
                 weights=None, custom=None, roles=None):
        lib = _lib.load()
        # What made these options, so a replan can change some and keep the rest.
        self.arguments = dict(strategy=strategy, replication=replication, seed=seed,
                              load_slack=load_slack, locality=locality, weights=weights,
                              custom=custom, roles=roles)
        if strategy is None:
            strategy = "hash" if custom is None else "custom"
        code = _util.choice("strategy", STRATEGIES, strategy)
        self.strategy = STRATEGIES[code]
        if (self.strategy == "custom") != (custom is not None):
            raise InvalidArgument("strategy 'custom' and a custom= callable go together")
        self.custom = _Custom(custom) if custom is not None else None
        super().__init__(_util.create(lib.cohort_plan_options_create, _lib.plan_options_p))
        h = self._h()
        lib.cohort_plan_options_set_strategy(h, code)
        lib.cohort_plan_options_set_replication(h, _util.u32("replication", replication))
        lib.cohort_plan_options_set_seed(h, _util.u64("seed", seed))
        lib.cohort_plan_options_set_roles(h, role_mask(roles))
        if load_slack is not None:
            lib.cohort_plan_options_set_load_slack(h, float(load_slack))
        if weights is not None:
            lib.cohort_plan_options_set_weights(h, *_weights(weights))
        if isinstance(locality, (str, bytes, os.PathLike)):
            lib.cohort_plan_options_add_locality_file(h, _util.fspath(locality))
            locality = None
        for node_id, path, score in _locality(locality):
            lib.cohort_plan_options_add_locality(h, _util.text("node id", node_id),
                                                 _util.text("file path", path), float(score))
        if self.custom is not None:
            lib.cohort_plan_options_set_custom(h, self.custom.cfunc, None)


def _weights(weights):
    if isinstance(weights, dict):
        unknown = set(weights) - set(_DEFAULT_WEIGHTS)
        if unknown:
            raise InvalidArgument(f"unknown weight {sorted(unknown)[0]!r}; expected "
                                  "locality, load or hardware")
        return [float(weights.get(k, v)) for k, v in _DEFAULT_WEIGHTS.items()]
    values = [float(w) for w in weights]
    if len(values) != 3:
        raise InvalidArgument("weights are (locality, load, hardware)")
    return values


def _locality(locality):
    """(node, file, score) triples from {node: {file: score}} or from triples."""
    if not locality:
        return []
    if isinstance(locality, dict):
        return [(node, path, score) for node, files in locality.items()
                for path, score in files.items()]
    return list(locality)


class ShardPlan(_util.Handle):
    """Which members hold each shard. Made by plan_shards() and replan()."""

    _kind = "shard plan"
    _destroy_name = "cohort_shard_plan_destroy"

    def __init__(self, ptr, shards, custom, strategy, arguments):
        super().__init__(ptr)
        self._arguments = arguments  # the plan_shards options, for replan
        self._shards = shards  # for .shards: the plan's own copy is not readable
        self._custom = custom  # keeps the callback alive: replan may call it again
        self.strategy = strategy
        lib = _lib.load()
        h = self._h()
        count, replication, members, moved = c_uint64(), c_uint32(), c_uint32(), c_uint64()
        lib.cohort_shard_plan_shard_count(h, byref(count))
        lib.cohort_shard_plan_replication(h, byref(replication))
        lib.cohort_shard_plan_member_count(h, byref(members))
        lib.cohort_shard_plan_moved(h, byref(moved))
        self._count, self.replication, self.moved = count.value, replication.value, moved.value
        out = c_char_p()
        self._members = []
        for m in range(members.value):
            lib.cohort_shard_plan_member_id(h, m, byref(out))
            self._members.append(_util.decode(out.value))
        self._member_index = {m: i for i, m in enumerate(self._members)}

    def __len__(self):
        return self._count

    @property
    def members(self):
        """Member ids (the ready nodes), in the caller's order."""
        return list(self._members)

    @property
    def shards(self):
        """The shards, as a lazy sequence of Shard."""
        return self._shards

    def _member(self, member):
        if isinstance(member, str):
            if member not in self._member_index:
                raise NotFound(f"'{member}' is not a member of this plan")
            return self._member_index[member]
        return _util.u32("member", member)

    def owner(self, shard, replica=0):
        """The id of the member holding replica `replica` of `shard` (0 = primary)."""
        out = c_uint32()
        _lib.load().cohort_shard_plan_owner(self._h(), _util.u64("shard", shard),
                                            _util.u32("replica", replica), byref(out))
        return self._members[out.value]

    def owners(self, shard):
        """Member ids holding `shard`, primary first."""
        return [self.owner(shard, r) for r in range(self.replication)]

    def load(self, member):
        """How many placements (shard replicas) a member (id or index) holds."""
        out = c_uint64()
        _lib.load().cohort_shard_plan_member_load(self._h(), self._member(member), byref(out))
        return out.value

    @property
    def loads(self):
        return {m: self.load(i) for i, m in enumerate(self._members)}

    def member_shards(self, member):
        """The shards a member (id or index) holds, ascending."""
        lib = _lib.load()
        index = self._member(member)
        capacity = self.load(index)
        count = c_size_t()
        while True:
            buf = (c_uint64 * capacity)()
            try:
                lib.cohort_shard_plan_member_shards(self._h(), index, buf, capacity,
                                                    byref(count))
                return buf[:count.value]
            except BufferTooSmall:
                capacity = max(count.value, 2 * capacity + 1)

    @property
    def assignments(self):
        """{member id: [shard indices, ascending]}."""
        return {m: self.member_shards(i) for i, m in enumerate(self._members)}

    def to_json(self):
        """The plan as JSON: strategy, members, shards with segments, owners, loads."""
        return _util.owned_string(_lib.load().cohort_shard_plan_to_json, self._h())

    def to_dict(self):
        return json.loads(self.to_json())

    def replan(self, nodes, **options):
        """A plan for a new membership (a Topology or node ids) that moves only
        the departed members' shards and the fewest needed to give newcomers an
        even share; .moved counts the moved placements. Keyword options (those
        of plan_shards) replace the plan's own; the others are kept."""
        lib = _lib.load()
        topology = Topology.of(nodes)
        arguments = {**self._arguments, **options}
        if "custom" in options and "strategy" not in options:
            arguments["strategy"] = None  # follows whether a callable is given
        opts = PlanOptions(**arguments) if options else None
        custom = opts.custom if opts else self._custom
        strategy = opts.strategy if opts else self.strategy
        out = _lib.shard_plan_p()
        try:
            _planning(custom, lib.cohort_shard_plan_replan, self._h(), topology._h(),
                      opts._h() if opts else None, byref(out))
        finally:
            if opts:
                opts.close()
            if topology is not nodes:
                topology.close()
        return ShardPlan(out, self._shards, custom, strategy, arguments)

    def __repr__(self):
        return (f"ShardPlan({self._count} shards, {len(self._members)} members, "
                f"replication={self.replication}, moved={self.moved})")


def plan_shards(files, nodes, strategy=None, shard_bytes=None, shard_count=None,
                replication=1, seed=0, load_slack=None, locality=None, weights=None,
                custom=None, roles=None):
    """Splits `files` into shards and assigns each to `replication` distinct
    ready nodes of `nodes` whose role is in `roles` (default: worker and
    chief; "all" for any role).

    files: a Dataset, a list of (path, bytes[, records]), a dict {path: bytes},
        or Shards from split_shards() (then give neither shard_bytes nor
        shard_count).
    nodes: a Topology, or node ids (each on its own host).
    strategy: "hash" (default), "round_robin", "locality", "random" or
        "custom" (the default when custom is given).
    locality: {node_id: {file_path: score in [0, 1]}} for "locality", or the
        path of a YAML/JSON file holding that mapping.
    load_slack: "hash": a member holds at most ceil(average * (1 + slack))
        placements; None keeps the library's default.
    weights: {"locality": 1.0, "load": 0.5, "hardware": 0.1} for "locality".
    custom: f(shard, replica, taken, member_count) -> member index.
    """
    if isinstance(files, Shards):
        if shard_bytes is not None or shard_count is not None:
            raise InvalidArgument("files are already split: give neither shard_bytes "
                                  "nor shard_count")
        shards = files
    else:
        dataset = Dataset.of(files)
        try:
            shards = split_shards(dataset, shard_bytes, shard_count)
        finally:
            if dataset is not files:
                dataset.close()
    try:
        return _create(shards, nodes, PlanOptions(strategy, replication, seed, load_slack,
                                                  locality, weights, custom, roles))
    except BaseException:
        if shards is not files:
            shards.close()
        raise


def _create(shards, nodes, opts):
    topology = Topology.of(nodes)
    out = _lib.shard_plan_p()
    try:
        _planning(opts.custom, _lib.load().cohort_shard_plan_create, shards._h(),
                  topology._h(), opts._h(), byref(out))
    finally:
        opts.close()
        if topology is not nodes:
            topology.close()
    return ShardPlan(out, shards, opts.custom, opts.strategy, opts.arguments)
