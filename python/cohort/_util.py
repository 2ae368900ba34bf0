"""Argument conversion shared by the modules: Python values to the fixed-width
integers, UTF-8 strings and int32 constants the C ABI takes, with errors that
say which argument was wrong."""

import ctypes
import numbers
import operator
import os
import weakref

from . import _lib
from .errors import InvalidArgument

ROLES = ("worker", "chief", "evaluator", "parameter_server", "coordinator")
STATUSES = ("ready", "joining", "draining", "down")
LEVELS = ("host", "switch", "rack", "zone", "region")
STRATEGIES = ("round_robin", "hash", "locality", "random", "custom")
FORMATS = ("auto", "yaml", "json", "listing")


def uint(name, value, bits):
    """value as an unsigned integer of `bits` bits, or InvalidArgument."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an integer, not a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise InvalidArgument(
            f"{name} must be an integer, not {type(value).__name__}") from None
    if not 0 <= value < 2**bits:
        raise InvalidArgument(f"{name} must be in [0, 2^{bits}), got {value}")
    return value


def index(name, value):
    """value as a Python int (which may be negative), or InvalidArgument."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an integer, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise InvalidArgument(
            f"{name} must be an integer, not {type(value).__name__}") from None


def u32(name, value):
    return uint(name, value, 32)


def i32(name, value):
    """An int32_t of the C ABI: ctypes would wrap a larger one silently."""
    value = index(name, value)
    if not -2**31 <= value < 2**31:
        raise InvalidArgument(f"{name} must be in [-2^31, 2^31), got {value}")
    return value


def u64(name, value):
    return uint(name, value, 64)


def rank(name, value):
    """A rank or world size: an int32_t of the C ABI that is not negative."""
    return uint(name, value, 31)


def seconds(name, value, default=None):
    """A duration for the C ABI, which takes every duration as a double of
    seconds: a number >= 0, or `default` for None."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise InvalidArgument(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)


def text(name, value, optional=False):
    """A str as NUL-terminated UTF-8; None stays None where optional."""
    if value is None and optional:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        raise InvalidArgument(f"{name} must be a str, not {type(value).__name__}")
    if b"\0" in data:
        raise InvalidArgument(f"{name} contains a NUL character: {value!r}")
    return data


def fspath(value):
    """A filesystem path (str, bytes or os.PathLike) as bytes for the C library."""
    data = os.fsencode(value)
    if b"\0" in data:
        raise InvalidArgument(f"path contains a NUL character: {value!r}")
    return data


def choice(kind, names, value):
    """The index of `value` (a name from `names`, or an index into it)."""
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_")
        if key in names:
            return names.index(key)
    elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return value
    raise InvalidArgument(f"unknown {kind} {value!r}; expected one of: {', '.join(names)}")


def decode(data):
    return None if data is None else data.decode("utf-8", "replace")


def owned_bytes(func, *args):
    """Calls func(*args, char**, size_t*), as every C function that hands the
    caller a string does, and returns its bytes, freeing the buffer."""
    lib = _lib.load()
    buf = ctypes.POINTER(ctypes.c_char)()
    length = ctypes.c_size_t()
    func(*args, ctypes.byref(buf), ctypes.byref(length))
    try:
        return ctypes.string_at(buf, length.value)
    finally:
        lib.cohort_free(buf)


def owned_string(func, *args):
    """owned_bytes decoded as UTF-8."""
    return owned_bytes(func, *args).decode("utf-8", "replace")


def _destroy_quietly(destroy, ptr):
    try:
        destroy(ptr)
    except Exception:  # interpreter shutdown: the library may be gone
        pass


class Handle:
    """Owns one C handle and destroys it in close(), on `with` exit or when
    collected (a weakref.finalize, which also runs at interpreter exit and
    never resurrects the object). After close() every method raises
    InvalidArgument."""

    _ptr = None
    _finalizer = None
    _kind = "handle"
    _destroy_name = None

    def __init__(self, ptr):
        lib = _lib.load()
        self._ptr = ptr
        if ptr:
            # The finalizer holds the destroy function and the pointer, never
            # self, so the handle can be collected.
            self._finalizer = weakref.finalize(self, _destroy_quietly,
                                               getattr(lib, self._destroy_name), ptr)

    def _h(self):
        if not self._ptr:
            raise InvalidArgument(f"this {self._kind} is closed")
        return self._ptr

    @property
    def closed(self):
        return not self._ptr

    def close(self):
        self._destroy_handle()

    def _destroy_handle(self):
        """Destroys the C handle now (once, whoever asks first)."""
        self._ptr = None
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def create(func, ptr_type, *args):
    """Calls a C constructor whose last parameter is the out-handle."""
    out = ptr_type()
    func(*args, ctypes.byref(out))
    return out


def load_string(func, ptr_type, content, format, source_name):
    """Calls a cohort_*_load_string constructor: content (str or bytes), a
    format name from FORMATS, an optional source name for messages."""
    data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
    return create(func, ptr_type, data, len(data), choice("format", FORMATS, format),
                  text("source_name", source_name, True))
