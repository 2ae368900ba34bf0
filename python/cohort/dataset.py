"""Datasets (the files training reads) and their split into shards."""

import collections.abc
import ctypes
from ctypes import byref, c_uint32, c_uint64
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from . import _lib, _util
from .errors import InvalidArgument, OutOfRange


@dataclass(frozen=True)
class DataFile:
    path: str
    bytes: int
    records: Optional[int] = None  # None: unknown


class Dataset(_util.Handle):
    """Files with their sizes and, when known, record counts.

    Dataset(files) takes (path, bytes[, records]) tuples, DataFile objects or
    a dict {path: bytes}; Dataset.from_file() and Dataset.from_string() read a
    listing ("PATH BYTES [RECORDS]" lines) or the YAML/JSON schema.
    """

    _kind = "dataset"
    _destroy_name = "cohort_dataset_destroy"

    def __init__(self, files=None, *, _ptr=None):
        lib = _lib.load()
        super().__init__(_ptr or _util.create(lib.cohort_dataset_create, _lib.dataset_p))
        if isinstance(files, dict):
            files = files.items()
        for entry in files or ():
            if isinstance(entry, DataFile):
                self.add_file(entry.path, entry.bytes, entry.records)
            elif isinstance(entry, (tuple, list)) and len(entry) in (2, 3):
                self.add_file(*entry)
            else:
                raise InvalidArgument(
                    f"a file must be (path, bytes[, records]) or a DataFile, not {entry!r}")

    @classmethod
    def from_file(cls, path):
        """Loads .yaml/.yml/.json by extension, otherwise a text listing."""
        lib = _lib.load()
        return cls(_ptr=_util.create(lib.cohort_dataset_load_file, _lib.dataset_p,
                                     _util.fspath(path)))

    @classmethod
    def from_string(cls, text, format="auto", source_name=None):
        """format: "auto", "yaml", "json" or "listing"."""
        lib = _lib.load()
        return cls(_ptr=_util.load_string(lib.cohort_dataset_load_string, _lib.dataset_p, text, format, source_name))

    @classmethod
    def of(cls, files):
        return files if isinstance(files, Dataset) else cls(files)

    def add_file(self, path, bytes, records=None):
        records = _lib.RECORDS_UNKNOWN if records is None else _util.u64("records", records)
        _lib.load().cohort_dataset_add_file(self._h(), _util.text("path", path),
                                            _util.u64("bytes", bytes), records)

    def __len__(self):
        out = c_uint32()
        _lib.load().cohort_dataset_file_count(self._h(), byref(out))
        return out.value

    def file(self, index):
        """The DataFile at `index` (OutOfRange past the end)."""
        path, size, records = ctypes.c_char_p(), c_uint64(), c_uint64()
        _lib.load().cohort_dataset_file(self._h(), _util.u32("index", index), byref(path),
                                        byref(size), byref(records))
        rec = None if records.value == _lib.RECORDS_UNKNOWN else records.value
        return DataFile(_util.decode(path.value), size.value, rec)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.file(i) for i in range(*index.indices(len(self)))]
        index = _util.index("index", index)
        return self.file(index + len(self) if index < 0 else index)

    @property
    def files(self):
        return [self.file(i) for i in range(len(self))]

    def __iter__(self):
        return iter(self.files)

    @property
    def total_bytes(self):
        out = c_uint64()
        _lib.load().cohort_dataset_total_bytes(self._h(), byref(out))
        return out.value

    def split(self, shard_bytes=None, shard_count=None):
        return split_shards(self, shard_bytes, shard_count)

    def __repr__(self):
        return "Dataset(closed)" if self.closed else f"Dataset({len(self)} files)"


@dataclass(frozen=True)
class Shard:
    index: int
    bytes: int
    records: Optional[int]  # estimated per file; None if any file's is unknown
    segments: List[Tuple[str, int, int]] = field(default_factory=list)  # (path, begin, end)


class Shards(_util.Handle, collections.abc.Sequence):
    """The dataset cut into byte ranges; shards[i] is a Shard, computed on access."""

    _kind = "shard set"
    _destroy_name = "cohort_shards_destroy"

    def __init__(self, ptr, paths):
        super().__init__(ptr)
        self._paths = paths  # the file list as it was when split
        out = c_uint64()
        _lib.load().cohort_shards_count(self._h(), byref(out))
        self._count = out.value

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        index = _util.index("shard", index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise OutOfRange(f"shard {index} is past the shard count {self._count}")
        lib = _lib.load()
        h = self._h()
        size, records, count = c_uint64(), c_uint64(), c_uint32()
        lib.cohort_shards_info(h, index, byref(size), byref(records), byref(count))
        file, begin, end = c_uint32(), c_uint64(), c_uint64()
        segments = []
        for s in range(count.value):
            lib.cohort_shards_segment(h, index, s, byref(file), byref(begin), byref(end))
            segments.append((self._paths[file.value], begin.value, end.value))
        rec = None if records.value == _lib.RECORDS_UNKNOWN else records.value
        return Shard(index, size.value, rec, segments)

    def __iter__(self):
        return (self[i] for i in range(self._count))

    @property
    def files(self):
        """The dataset's file paths, indexed as the C segments index them."""
        return list(self._paths)

    def __repr__(self):
        return f"Shards({self._count})"


def split_shards(dataset, shard_bytes=None, shard_count=None):
    """Splits a dataset (or files as Dataset() takes them) into shards: give
    shard_bytes (a target no shard exceeds) or shard_count, not both."""
    dataset = Dataset.of(dataset)
    lib = _lib.load()
    size = 0 if shard_bytes is None else _util.u64("shard_bytes", shard_bytes)
    count = 0 if shard_count is None else _util.u64("shard_count", shard_count)
    ptr = _util.create(lib.cohort_shards_split, _lib.shards_p, dataset._h(), size, count)
    try:
        paths = [f.path for f in dataset.files]
    except BaseException:
        lib.cohort_shards_destroy(ptr)
        raise
    return Shards(ptr, paths)
