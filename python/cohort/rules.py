"""Rules: compiled conditions (Expression), the values they read (Context,
Symbols) and the rule engine (RuleEngine) with its action handlers.

    expr = cohort.Expression("gpu_memory > 80 AND file_type == 'model'")
    expr.test(gpu_memory=91.5, file_type="model")    # True; None if unknown

    engine = cohort.RuleEngine()
    @engine.on("reduce_prefetch")
    def reduce(rule, action): loader.prefetch *= action.parameters["factor"]
    engine.load("rules/gpu_io.yaml")
    result = engine.evaluate({"gpu_memory": 91.5}, now=time.monotonic())

Variables hold bool, int, float or str. Given as a dict or keywords, names
no expression uses are ignored (a rule that needs a missing one says so in
its errors); Context.set raises NotFound for them instead.
"""

import json
import numbers
import time
from ctypes import byref, c_char_p, c_int32, c_uint32
from dataclasses import dataclass, field

from . import _lib, _util
from .errors import InvalidArgument, NotFound

TYPES = ("none", "bool", "int", "number", "string", "list")
STATES = ("inactive", "pending", "firing")
_TRUTH = (False, True, None)  # COHORT_TRUTH_NO, _YES, _UNKNOWN
ALLOW_UNHANDLED = 1


@dataclass(frozen=True)
class Action:
    type: str
    target: str = ""
    parameters: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Firing:
    """A rule whose actions were due, with its actions and labels."""
    rule: str
    priority: int
    actions: list
    labels: dict


@dataclass(frozen=True)
class RuleEvent:
    """A rule changed state ("inactive", "pending", "firing") at `time`."""
    rule: str
    from_state: str
    to_state: str
    time: float


@dataclass(frozen=True)
class RuleError:
    """A rule that could not be decided, or an action handler that failed
    (then `action` is its type and `exception` what a Python handler raised)."""
    rule: str
    message: str
    action: str = None
    exception: BaseException = field(default=None, compare=False)


@dataclass(frozen=True)
class Evaluation:
    time: float
    fired: list   # of Firing, highest priority first
    events: list  # of RuleEvent
    errors: list  # of RuleError

    @property
    def fired_rules(self):
        return [f.rule for f in self.fired]


@dataclass(frozen=True)
class Outcome:
    """truth is True, False or None (unknown); missing names the variables
    that made it unknown; error is a type error found while evaluating."""
    truth: bool
    missing: list
    error: str

    def __bool__(self):
        return self.truth is True


@dataclass(frozen=True)
class ExplainStep:
    text: str
    value: str
    depth: int


def _type_code(value):
    if isinstance(value, str):
        key = value.strip().lower()
        key = {"boolean": "bool", "integer": "int", "float": "number"}.get(key, key)
        if key in TYPES[1:5]:
            return TYPES.index(key)
    raise InvalidArgument(f"unknown type {value!r}; expected bool, int, number or string")


def _from_text(code, text):
    """A Python value from a COHORT_TYPE_* and cohort's plain text."""
    text = _util.decode(text)
    if code == 1:
        return text == "true"
    if code == 2:
        return int(text)
    if code == 3:
        return float(text)
    if code == 4:
        return text
    return None


def _value(func, *args):
    """Calls func(*args, int32_t* type, char** text, size_t* length) and
    returns a Python value."""
    code = c_int32()
    text = _util.owned_bytes(func, *args, byref(code))
    return _from_text(code.value, text)


class Symbols(_util.Handle):
    """A symbol table: variable names (with optional declared types) that
    several expressions share, so one Context serves them all."""

    _kind = "symbol table"
    _destroy_name = "cohort_symbols_destroy"

    def __init__(self, types=None):
        lib = _lib.load()
        super().__init__(_util.create(lib.cohort_symbols_create, _lib.symbols_p))
        for name, kind in (types or {}).items():
            self.declare(name, kind)

    def declare(self, name, type):
        """Declares a variable's type: "bool", "int", "number" or "string"."""
        _lib.load().cohort_symbols_declare(self._h(), _util.text("name", name), _type_code(type))

    def __len__(self):
        count = c_uint32()
        _lib.load().cohort_symbols_count(self._h(), byref(count))
        return count.value

    @property
    def names(self):
        lib, out = _lib.load(), c_char_p()
        names = []
        for slot in range(len(self)):
            lib.cohort_symbols_name(self._h(), slot, byref(out), None)
            names.append(_util.decode(out.value))
        return names

    def type(self, name):
        """The declared type of a variable, or None."""
        lib, slot, code = _lib.load(), c_uint32(), c_int32()
        lib.cohort_symbols_find(self._h(), _util.text("name", name), byref(slot))
        lib.cohort_symbols_name(self._h(), slot, None, byref(code))
        return TYPES[code.value] if code.value else None

    def __contains__(self, name):
        return name in self.names

    def context(self):
        return Context(self)


class Context(_util.Handle):
    """The values of variables for evaluations, for one symbol table: that of
    the Symbols, Expression or RuleEngine it is made for (also made by their
    context() methods)."""

    _kind = "context"
    _destroy_name = "cohort_context_destroy"

    def __init__(self, source):
        """A context for a Symbols table, an Expression or a RuleEngine."""
        lib = _lib.load()
        makers = {Symbols: lib.cohort_context_create, Expression: lib.cohort_context_from_expr,
                  RuleEngine: lib.cohort_context_from_rules}
        func = next((f for kind, f in makers.items() if isinstance(source, kind)), None)
        if func is None:
            raise InvalidArgument("a Context is made for a Symbols, an Expression or a RuleEngine, "
                                  f"not {type(source).__name__}")
        super().__init__(_util.create(func, _lib.context_p, source._h()))

    def set(self, name, value):
        """Sets one variable (None unsets it). NotFound if no expression uses it."""
        lib, h, key = _lib.load(), self._h(), _util.text("name", name)
        if value is None:
            lib.cohort_context_unset(h, key)
        elif isinstance(value, bool):
            lib.cohort_context_set_bool(h, key, int(value))
        elif isinstance(value, numbers.Integral):
            if not -2**63 <= int(value) < 2**63:
                raise InvalidArgument(f"{name}: {value} does not fit in 64 bits")
            lib.cohort_context_set_int(h, key, int(value))
        elif isinstance(value, numbers.Real):
            lib.cohort_context_set_number(h, key, float(value))
        elif isinstance(value, (str, bytes, bytearray)):
            # bytes pass through as they are: file headers hold binary markers.
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            lib.cohort_context_set_string(h, key, data, len(data))
        else:
            raise InvalidArgument(f"{name}: a value is a bool, int, float, str or bytes, "
                                  f"not {type(value).__name__}")

    def set_text(self, name, text):
        """Sets a variable from text as a person types it: 90, 0.5, 100MB, 30s, true."""
        _lib.load().cohort_context_set_text(self._h(), _util.text("name", name),
                                            _util.text("text", text))

    def update(self, variables=None, /, ignore_unknown=False, **kwargs):
        """Sets every name: value of a mapping and of the keywords."""
        for name, value in {**(variables or {}), **kwargs}.items():
            try:
                self.set(name, value)
            except NotFound:
                if not ignore_unknown:
                    raise

    def get(self, name):
        """A variable's value, or None if it is missing."""
        return _value(_lib.load().cohort_context_get, self._h(), _util.text("name", name))

    __getitem__ = get
    __setitem__ = set

    def unset(self, name):
        _lib.load().cohort_context_unset(self._h(), _util.text("name", name))

    def clear(self):
        _lib.load().cohort_context_clear(self._h())

    def slot(self, name):
        """The slot of a variable, for set_at."""
        slot = c_uint32()
        _lib.load().cohort_context_slot(self._h(), _util.text("name", name), byref(slot))
        return slot.value

    def set_at(self, slot, value):
        """Sets a variable by slot (see slot()): the fast path."""
        lib, h, slot = _lib.load(), self._h(), _util.u32("slot", slot)
        if isinstance(value, bool):
            lib.cohort_context_set_bool_at(h, slot, int(value))
        elif isinstance(value, numbers.Integral):
            lib.cohort_context_set_int_at(h, slot, int(value))
        elif isinstance(value, numbers.Real):
            lib.cohort_context_set_number_at(h, slot, float(value))
        elif isinstance(value, (str, bytes, bytearray)):
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            lib.cohort_context_set_string_at(h, slot, data, len(data))
        else:
            raise InvalidArgument(f"slot {slot}: a value is a bool, int, float, str or bytes, "
                                  f"not {type(value).__name__}")


class _Scratch:
    """A context reused for variables given as a dict or keywords. It holds
    no reference to its owner, so the owner is freed as soon as unused."""

    def __init__(self):
        self._context = None

    def __call__(self, owner, variables, kwargs):
        if isinstance(variables, Context):
            if kwargs:
                raise InvalidArgument("give a Context or variables, not both")
            return variables
        if self._context is None:
            self._context = Context(owner)
        self._context.clear()
        self._context.update(variables, ignore_unknown=True, **kwargs)
        return self._context


class Expression(_util.Handle):
    """A compiled condition. Evaluate with a Context, a dict, or keywords."""

    _kind = "expression"
    _destroy_name = "cohort_expr_destroy"

    def __init__(self, text, symbols=None):
        lib = _lib.load()
        data = _util.text("text", text)
        self.symbols = symbols  # kept alive with the expression
        table = symbols._h() if symbols is not None else None
        super().__init__(_util.create(lib.cohort_expr_compile, _lib.expr_p, data, len(data), table))
        self._scratch = _Scratch()

    @property
    def text(self):
        out = c_char_p()
        _lib.load().cohort_expr_text(self._h(), byref(out))
        return _util.decode(out.value)

    @property
    def type(self):
        """The result type ("bool", "number", ...) if known at compile time, else None."""
        code = c_int32()
        _lib.load().cohort_expr_type(self._h(), byref(code))
        return TYPES[code.value] if code.value else None

    @property
    def variables(self):
        lib, count, out = _lib.load(), c_uint32(), c_char_p()
        lib.cohort_expr_variable_count(self._h(), byref(count))
        names = []
        for i in range(count.value):
            lib.cohort_expr_variable(self._h(), i, byref(out))
            names.append(_util.decode(out.value))
        return names

    def context(self):
        return Context(self)

    def test(self, variables=None, /, **kwargs):
        """True, False, or None when unknown (a variable is missing)."""
        truth = c_int32()
        ctx = self._scratch(self, variables, kwargs)
        _lib.load().cohort_expr_test(self._h(), ctx._h(), byref(truth))
        return _TRUTH[truth.value]

    def evaluate(self, variables=None, /, **kwargs):
        ctx, truth = self._scratch(self, variables, kwargs), c_int32()
        doc = json.loads(_util.owned_string(_lib.load().cohort_expr_evaluate, self._h(), ctx._h(), byref(truth)))
        return Outcome(_TRUTH[truth.value], doc["missing"], doc["error"])

    def value(self, variables=None, /, **kwargs):
        """The value of the whole expression (e.g. a number for "a + 1"), or None."""
        ctx = self._scratch(self, variables, kwargs)
        return _value(_lib.load().cohort_expr_value, self._h(), ctx._h())

    def explain(self, variables=None, /, **kwargs):
        """Every sub-expression's value, outermost first."""
        ctx = self._scratch(self, variables, kwargs)
        doc = json.loads(_util.owned_string(_lib.load().cohort_expr_explain, self._h(), ctx._h()))
        return [ExplainStep(s["text"], s["value"], s["depth"]) for s in doc]


class _Handler:
    """A Python callable as a cohort_action_fn. An exception must not unwind
    through C: it is kept in `raised`, the handler reports failure, and
    RuleEngine.evaluate attaches it to the matching RuleError."""

    def __init__(self, fn, raised):
        self.fn = fn
        self.raised = raised
        self.cfunc = _lib.action_fn(self._call)

    def _call(self, user_data, rule, priority, action_type, target, parameters):
        try:
            self.fn(_util.decode(rule), Action(_util.decode(action_type), _util.decode(target),
                                               json.loads(parameters)))
        except BaseException as exc:  # everything: nothing may cross into C
            self.raised.append(exc)
            return 1
        return 0


class RuleEngine(_util.Handle):
    """Loads rule sets and evaluates them; see the module docstring."""

    _kind = "rule engine"
    _destroy_name = "cohort_rules_destroy"

    def __init__(self, allow_unhandled=False):
        lib = _lib.load()
        flags = ALLOW_UNHANDLED if allow_unhandled else 0
        super().__init__(_util.create(lib.cohort_rules_create, _lib.rules_p, flags))
        self._handlers = {}  # action type -> _Handler, kept alive for C
        self._raised = []
        self._scratch = _Scratch()

    def on(self, action_type, handler=None):
        """Registers handler(rule, action) for an action type; register before
        loading. Without a handler, returns a decorator."""
        if handler is None:
            return lambda fn: self.on(action_type, fn) or fn
        if not callable(handler):
            raise InvalidArgument(f"handler must be callable, not {type(handler).__name__}")
        wrapped = _Handler(handler, self._raised)
        _lib.load().cohort_rules_on(self._h(), _util.text("action_type", action_type),
                                    wrapped.cfunc, None)
        self._handlers[action_type] = wrapped

    def load(self, path):
        """Loads or hot-reloads a rule file; on error the last good set stays."""
        _lib.load().cohort_rules_reload_file(self._h(), _util.fspath(path))

    def load_string(self, content, format="auto", source_name=None):
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        _lib.load().cohort_rules_reload_string(self._h(), data, len(data),
                                               _util.choice("format", _util.FORMATS, format),
                                               _util.text("source_name", source_name, True))

    def context(self):
        return Context(self)

    def evaluate(self, variables=None, /, now=None, **kwargs):
        """Evaluates every rule at `now` (seconds; default time.monotonic())."""
        now = time.monotonic() if now is None else float(now)
        ctx = self._scratch(self, variables, kwargs)
        del self._raised[:]
        try:
            doc = json.loads(_util.owned_string(_lib.load().cohort_rules_evaluate, self._h(), ctx._h(), now))
        finally:
            raised, self._raised[:] = list(self._raised), []
        for exc in raised:
            if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
                raise exc
        errors, pending = [], iter(raised)
        for e in doc["errors"]:
            if "action" not in e:
                errors.append(RuleError(e["rule"], e["message"]))
                continue
            exc = next(pending, None)
            message = e["message"]
            if exc is not None:
                message = (f"action '{e['action']}' handler failed: "
                           f"{type(exc).__name__}: {exc}")
            errors.append(RuleError(e["rule"], message, e["action"], exc))
        fired = [Firing(f["rule"], f["priority"],
                        [Action(a["type"], a["target"], a["parameters"]) for a in f["actions"]],
                        f["labels"]) for f in doc["fired"]]
        events = [RuleEvent(e["rule"], e["from"], e["to"], e["time"]) for e in doc["events"]]
        return Evaluation(doc["time"], fired, events, errors)

    def explain(self, rule, variables=None, /, **kwargs):
        ctx = self._scratch(self, variables, kwargs)
        doc = json.loads(_util.owned_string(_lib.load().cohort_rules_explain, self._h(),
                                            _util.text("rule", rule), ctx._h()))
        return [ExplainStep(s["text"], s["value"], s["depth"]) for s in doc]

    def state(self, rule):
        """"inactive", "pending" or "firing"; NotFound for an unknown rule."""
        state = c_int32()
        _lib.load().cohort_rules_state(self._h(), _util.text("rule", rule), byref(state))
        return STATES[state.value]

    @property
    def rules(self):
        """The loaded rules' ids, in file order."""
        lib, count, out = _lib.load(), c_uint32(), c_char_p()
        lib.cohort_rules_count(self._h(), byref(count))
        ids = []
        for i in range(count.value):
            lib.cohort_rules_rule_id(self._h(), i, byref(out))
            ids.append(_util.decode(out.value))
        return ids

    def __len__(self):
        count = c_uint32()
        _lib.load().cohort_rules_count(self._h(), byref(count))
        return count.value

    def describe(self):
        """The loaded rule set as a dict: rules, variables, warnings, ..."""
        return json.loads(_util.owned_string(_lib.load().cohort_rules_describe, self._h()))


def check_rules(path):
    """Validates a rule file without an engine; returns it described as
    RuleEngine.describe() does. Raises ParseError or FileError."""
    return json.loads(_util.owned_string(_lib.load().cohort_rules_check_file, _util.fspath(path)))


def check_rules_string(content, format="auto", source_name=None):
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    return json.loads(_util.owned_string(_lib.load().cohort_rules_check_string, data, len(data),
                                         _util.choice("format", _util.FORMATS, format),
                                         _util.text("source_name", source_name, True)))
