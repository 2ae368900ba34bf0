"""The exceptions cohort raises: one class per COHORT_ERR_* status code.

Every class derives from cohort.Error, which carries the status ``code`` and
the library's message (cohort_last_error()); most also derive from the
built-in exception a Python user would expect (ValueError, OSError, ...).
"""

__all__ = [
    "Error", "InvalidArgument", "ParseError", "FileError", "NotFound",
    "OutOfRange", "Timeout", "Unavailable", "NoMemory", "CallbackError",
    "InternalError", "BufferTooSmall", "Unsatisfiable", "PeerFailed",
    "Mismatch", "Closed", "PermissionDenied", "LibraryNotFound",
    "error_for",
]


class Error(Exception):
    """Base of every cohort error. ``code`` is the C status (0 if none)."""

    code = 0

    def __init__(self, message="", code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


# One class per COHORT_ERR_* code: (name, code, the built-in exception a
# Python user would also catch it as). cohort.h's numbering is the contract.
_CODES = (
    ("InvalidArgument", 1, ValueError),
    ("ParseError", 2, ValueError),
    ("FileError", 3, OSError),
    ("NotFound", 4, LookupError),
    ("OutOfRange", 5, IndexError),
    ("Timeout", 6, TimeoutError),
    ("Unavailable", 7, ConnectionError),
    ("NoMemory", 8, MemoryError),
    ("CallbackError", 9, None),
    ("InternalError", 10, None),
    ("BufferTooSmall", 11, None),
    ("Unsatisfiable", 12, None),
    ("PeerFailed", 13, ConnectionError),
    ("Mismatch", 14, ValueError),
    ("Closed", 15, ConnectionError),
    ("PermissionDenied", 16, PermissionError),
)

_BY_CODE = {}
for _name, _code, _builtin in _CODES:
    _BY_CODE[_code] = globals()[_name] = type(
        _name, (Error,) if _builtin is None else (Error, _builtin),
        {"code": _code, "__doc__": f"COHORT_ERR status {_code}."})
del _name, _code, _builtin


class LibraryNotFound(Error, ImportError):
    """libcohort could not be found or loaded; the message lists where we looked."""


def error_for(code, message):
    """The exception for a C status code; an unknown code gives a plain Error."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return Error(message or f"unknown status {code}", code)
    return cls(message)


# Show the public name (cohort.ParseError), not the module that defines it.
for _cls in (Error, LibraryNotFound, *_BY_CODE.values()):
    _cls.__module__ = "cohort"
del _cls
