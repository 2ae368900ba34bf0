"""Autotuning: a communicator's tuning by field name, and the Autotuner,
which tunes it (and any value the program adds: a prefetch depth) online
from each step's throughput. Rank 0 decides; every rank applies the
decision at the same step; the search is bounded, then freezes and saves
the values per job. docs/collectives.md#autotuning describes the search.

    tuner = cohort.Autotuner(comm, job_id="resnet", samples=5,
                             parameters=[cohort.TunableParameter(
                                 "prefetch_depth", [1, 2, 4, 8, 16], 8, set_depth)])
    for batch in data:
        start = time.perf_counter()
        comm.allreduce_named(grads)
        tuner.step(nbytes / (time.perf_counter() - start))
"""

import ctypes
import json
from ctypes import byref, c_double, c_int32, c_int64, c_uint64

from . import _lib, _util
from .errors import InvalidArgument

TUNING_FIELDS = ("fusion_threshold", "doubling_max", "hierarchical_min", "pipeline_chunk",
                 "shm_single_round_max")
SEARCHES = ("coordinate", "bayesian")


def comm_tuning(comm):
    """The tuning in force on `comm`, as {field: bytes}."""
    lib = _lib.load()
    out = {}
    value = c_uint64()
    for name in TUNING_FIELDS:
        lib.cohort_comm_tuning(comm._h(), name.encode(), byref(value))
        out[name] = value.value
    return out


def set_comm_tuning(comm, **fields):
    """Changes tuning fields from the next operation on (every rank must make
    the same change before the same operation). Unknown names and values out
    of range raise InvalidArgument; the fields before the bad one stay set."""
    lib = _lib.load()
    for name, value in fields.items():
        lib.cohort_comm_set_tuning(comm._h(), _util.text("field", name), _util.u64(name, value))


class TunableParameter:
    """A value the Autotuner may change: `candidates` ascending, `initial`
    the value in force (one of them unless `fixed`), `apply(value)` puts a
    value in force on this rank; an exception fails that step."""

    def __init__(self, name, candidates, initial, apply, fixed=False):
        if not callable(apply):
            raise InvalidArgument(f"parameter {name!r}: apply must be callable")
        self.name = name
        self.candidates = [float(c) for c in candidates]
        self.initial = float(initial)
        self.apply = apply
        self.fixed = bool(fixed)


class Autotuner(_util.Handle):
    """Tunes `comm`'s tuning and `parameters` (TunableParameter) online.
    Collective: every rank constructs it, and rank 0's starting values are
    applied everywhere before it returns.

    Autotuner(comm, *, job_id="cohort", search="coordinate", warmup_steps=3,
              settle_steps=1, samples=5, max_steps=500, max_seconds=600,
              state_file=None, fixed=None, parameters=())

    fixed: {name: value} never tuned ($COHORT_AUTOTUNE_<NAME> does the
    same). state_file: where rank 0 keeps the job's best values (default
    $COHORT_AUTOTUNE_DIR/JOB.json when that is set)."""

    _kind = "autotuner"
    _destroy_name = "cohort_autotuner_destroy"

    def __init__(self, comm, *, job_id="cohort", search="coordinate", warmup_steps=3,
                 settle_steps=1, samples=5, max_steps=500, max_seconds=600.0, state_file=None,
                 fixed=None, parameters=()):
        lib = _lib.load()
        if search not in SEARCHES:
            raise InvalidArgument(f"search must be one of {', '.join(SEARCHES)}, not {search!r}")
        self._comm = comm  # the tuner applies to it: keep it alive
        self._raised = []
        self._callbacks = []
        options = _util.create(lib.cohort_autotune_options_create, _lib.autotune_options_p)
        try:
            lib.cohort_autotune_options_set_job_id(options, _util.text("job_id", job_id))
            lib.cohort_autotune_options_set_search(options, SEARCHES.index(search))
            lib.cohort_autotune_options_set_steps(
                options, _util.index("warmup_steps", warmup_steps),
                _util.index("settle_steps", settle_steps), _util.index("samples", samples),
                _util.index("max_steps", max_steps))
            lib.cohort_autotune_options_set_max_seconds(options,
                                                        _util.seconds("max_seconds", max_seconds))
            if state_file is not None:
                lib.cohort_autotune_options_set_state_file(options,
                                                           _util.text("state_file", str(state_file)))
            for name, value in (fixed or {}).items():
                lib.cohort_autotune_options_fix(options, _util.text("fixed", name), float(value))
            for p in parameters:
                cfunc = _lib.tune_apply_fn(self._apply_for(p))
                self._callbacks.append(cfunc)
                values = (c_double * max(len(p.candidates), 1))(*p.candidates)
                lib.cohort_autotune_options_add_parameter(
                    options, _util.text("name", p.name), values, len(p.candidates), p.initial,
                    1 if p.fixed else 0, cfunc, None)
            out = _lib.autotuner_p()
            try:
                lib.cohort_autotuner_create(comm._h(), options, byref(out))
            except Exception as exc:
                self._reraise(exc)
        finally:
            lib.cohort_autotune_options_destroy(options)
        super().__init__(out)
        self._lib = lib

    def _apply_for(self, parameter):
        def call(name, value, user_data):
            try:
                parameter.apply(value)
            except BaseException as exc:  # nothing may unwind through C
                self._raised.append(exc)
                return 1
            return 0
        return call

    def _reraise(self, exc):
        if self._raised:
            raised = self._raised[:]
            self._raised.clear()
            raise raised[0] from exc
        raise exc

    def step(self, throughput):
        """One training step ended with `throughput` (higher is better).
        Returns (changed, frozen): changed when the next step runs with new
        values."""
        changed, frozen = c_int32(), c_int32()
        try:
            self._lib.cohort_autotuner_step(self._h(), float(throughput), byref(changed),
                                            byref(frozen))
        except Exception as exc:
            self._reraise(exc)
        return bool(changed.value), bool(frozen.value)

    def value(self, name):
        out = c_double()
        self._lib.cohort_autotuner_value(self._h(), _util.text("name", name), byref(out))
        return out.value

    @property
    def step_bound(self):
        """The most steps tuning can take (rank 0; 0 elsewhere)."""
        out = c_int64()
        self._lib.cohort_autotuner_step_bound(self._h(), byref(out))
        return out.value

    def report(self):
        """{"job", "search", "rank", "step", "frozen", "values", "best",
        "measured", "history", "state_file", "notes"}."""
        return json.loads(_util.owned_string(self._lib.cohort_autotuner_report, self._h()))

    @property
    def frozen(self):
        return self.report()["frozen"]

    @property
    def values(self):
        return self.report()["values"]
