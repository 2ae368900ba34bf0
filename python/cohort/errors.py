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


class InvalidArgument(Error, ValueError):
    code = 1


class ParseError(Error, ValueError):
    code = 2


class FileError(Error, OSError):
    code = 3


class NotFound(Error, LookupError):
    code = 4


class OutOfRange(Error, IndexError):
    code = 5


class Timeout(Error, TimeoutError):
    code = 6


class Unavailable(Error, ConnectionError):
    code = 7


class NoMemory(Error, MemoryError):
    code = 8


class CallbackError(Error):
    code = 9


class InternalError(Error):
    code = 10


class BufferTooSmall(Error):
    code = 11


class Unsatisfiable(Error):
    code = 12


class PeerFailed(Error, ConnectionError):
    code = 13


class Mismatch(Error, ValueError):
    code = 14


class Closed(Error, ConnectionError):
    code = 15


class PermissionDenied(Error, PermissionError):
    code = 16


class LibraryNotFound(Error, ImportError):
    """libcohort could not be found or loaded; the message lists where we looked."""


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgument, ParseError, FileError, NotFound, OutOfRange, Timeout,
    Unavailable, NoMemory, CallbackError, InternalError, BufferTooSmall,
    Unsatisfiable, PeerFailed, Mismatch, Closed, PermissionDenied)}


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
