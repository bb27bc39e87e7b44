"""Type stubs of the extension module strata._strata (crates/strata-py)."""

from os import PathLike
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

_Path = Union[str, PathLike[str]]
_U64Array = npt.NDArray[np.uint64]
_Keys = Union[_U64Array, Sequence[int]]

class StrataError(Exception):
    """Base class of every error strata raises (strata::Error)."""

class IoError(StrataError):
    """An operating-system I/O error on a file (Error::Io)."""
    file: str
    errno: Optional[int]

class CorruptionError(StrataError):
    """A checksum or structural check failed (Error::Corruption)."""
    file: str
    page: int
    detail: str

class BadMagicError(CorruptionError):
    """A file does not start with the expected magic number (Error::BadMagic)."""
    expected: str
    found: int

class TruncatedError(CorruptionError):
    """A file is shorter or longer than its header says (Error::Truncated)."""
    expected: int
    found: int

class UnsupportedVersionError(StrataError):
    """A file has a format version this build cannot read (Error::UnsupportedVersion)."""
    file: str
    found: int
    supported: int

class InvalidInputError(StrataError):
    """An argument or configuration value is invalid (Error::InvalidInput)."""

class OutOfOrderError(InvalidInputError):
    """Keys that must be strictly increasing are not (Error::OutOfOrder)."""
    position: int
    previous: int
    got: int

class UnsupportedError(StrataError):
    """The operation is not supported by this index kind (Error::Unsupported)."""

class NotFoundError(StrataError):
    """A key or object that must exist does not (Error::NotFound)."""

class InjectedError(StrataError):
    """An injected fault (Error::Injected)."""

class ConflictError(StrataError):
    """Another writer changed the file first: a conditional put on an object store lost (Error::Conflict)."""

class LockedError(StrataError):
    """The directory is locked by another user (Error::Locked)."""

    dir: str
    exclusive: bool

class Index:
    """An opened index of any kind; methods release the GIL while reading storage."""

    @property
    def kind(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def build_report(self) -> Optional[Dict[str, Any]]: ...
    @property
    def closed(self) -> bool: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: int) -> bool: ...
    def __enter__(self) -> "Index": ...
    def __exit__(self, *exc: Any) -> bool: ...
    def close(self) -> None: ...
    def get(self, key: int) -> Optional[int]: ...
    @overload
    def get_many(self, keys: _Keys, missing: int = ..., with_found: Literal[False] = ...) -> _U64Array: ...
    @overload
    def get_many(
        self, keys: _Keys, missing: int = ..., *, with_found: Literal[True]
    ) -> Tuple[_U64Array, npt.NDArray[np.bool_]]: ...
    def lower_bound(self, key: int) -> Optional[Tuple[int, int]]: ...
    def scan(self, start: int, count: int) -> _U64Array: ...
    def range(self, lo: int, hi: int) -> _U64Array: ...
    def approx(self, key: int) -> Optional[Tuple[int, int, int]]: ...
    def supports_updates(self) -> bool: ...
    def insert(self, key: int, value: int) -> Optional[int]: ...
    def delete(self, key: int) -> bool: ...
    def sync(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def io(self) -> Dict[str, Any]: ...
    def reset_io(self) -> None: ...
    def verify(self) -> int: ...

DB_MAX_BATCH: int

class Db:
    """The durable hybrid store strata::Db: uint64 -> uint64, WAL + dynamic stage + learned static stage."""

    def __init__(
        self,
        path: _Path,
        memory: Optional[Union[int, str]] = None,
        sync: Optional[Union[Literal["always", "every", "never"], str, int]] = None,
        static: str = "auto",
        epsilon: int = 8,
        trigger: str = "budget",
        background_merge: bool = True,
        resident: str = "index",
        profile: Optional[str] = None,
        page_size: int = 4096,
        read_only: bool = False,
    ) -> None: ...
    @classmethod
    def open(
        cls,
        path: _Path,
        memory: Optional[Union[int, str]] = None,
        sync: Optional[Union[Literal["always", "every", "never"], str, int]] = None,
        static: str = "auto",
        epsilon: int = 8,
        trigger: str = "budget",
        background_merge: bool = True,
        resident: str = "index",
        profile: Optional[str] = None,
        page_size: int = 4096,
        read_only: bool = False,
    ) -> "Db": ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: int) -> bool: ...
    def __enter__(self) -> "Db": ...
    def __exit__(self, *exc: Any) -> bool: ...
    def close(self) -> None: ...
    def get(self, key: int) -> Optional[int]: ...
    @overload
    def get_many(self, keys: _Keys, missing: int = ..., with_found: Literal[False] = ...) -> _U64Array: ...
    @overload
    def get_many(
        self, keys: _Keys, missing: int = ..., *, with_found: Literal[True]
    ) -> Tuple[_U64Array, npt.NDArray[np.bool_]]: ...
    def put(self, key: int, value: int) -> None: ...
    def delete(self, key: int) -> None: ...
    def put_many(self, keys: _Keys, values: _Keys) -> None: ...
    def delete_many(self, keys: _Keys) -> None: ...
    def scan(self, start: int, count: int) -> _U64Array: ...
    def range(self, lo: int = 0, hi: Optional[int] = None) -> _U64Array: ...
    def sync(self) -> None: ...
    def flush(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def verify(self) -> int: ...

class LsmStore:
    """The LSM-tree store strata::lsm::Store: bytes -> bytes, WAL + memtable + leveled SSTables with learned indexes."""

    def __init__(
        self,
        path: _Path,
        index: str = "pgm",
        boundary: int = 16,
        memory: Optional[Union[int, str]] = None,
        sync: Optional[Union[Literal["always", "every", "never"], str, int]] = None,
        read_only: bool = False,
    ) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def __contains__(self, key: bytes) -> bool: ...
    def __enter__(self) -> "LsmStore": ...
    def __exit__(self, *exc: Any) -> bool: ...
    def close(self) -> None: ...
    def get(self, key: bytes) -> Optional[bytes]: ...
    def get_many(self, keys: Sequence[bytes]) -> List[Optional[bytes]]: ...
    def put(self, key: bytes, value: bytes) -> None: ...
    def delete(self, key: bytes) -> None: ...
    def write_batch(self, ops: Sequence[Tuple[bytes, Optional[bytes]]]) -> None: ...
    def scan(self, start: Optional[bytes] = None, limit: Optional[int] = None) -> List[Tuple[bytes, bytes]]: ...
    def flush(self) -> None: ...
    def compact(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def verify(self) -> Dict[str, Any]: ...
    def put_u64(self, keys: _Keys, values: _Keys) -> None: ...
    def get_u64(self, keys: _Keys) -> Tuple[npt.NDArray[np.bool_], _U64Array]: ...

def gen(dist: str, n: int, seed: int = 42) -> _U64Array: ...
def read_keys(path: _Path, dedup: bool = False, width: str = "auto") -> _U64Array: ...
def write_keys(path: _Path, keys: _U64Array, width: str = "u64") -> None: ...
def dists() -> List[str]: ...
def workloads() -> List[str]: ...
def peers() -> List[str]: ...
def kinds() -> List[Tuple[str, str]]: ...
def profiles() -> List[Tuple[str, float, float, str]]: ...
def open(
    path: _Path,
    resident: str = "index",
    direct: bool = False,
    cache_pages: int = 0,
    profile: Optional[str] = None,
    build_report: Optional[Dict[str, Any]] = None,
    queue_depth: int = 32,
) -> Index: ...
def build(
    keys: _U64Array,
    spec: str,
    path: _Path,
    params: Optional[Dict[str, Union[int, float, str, bool]]] = None,
    values: Optional[_U64Array] = None,
    page_size: int = 4096,
) -> Dict[str, Any]: ...
def bench(
    keys: _U64Array,
    indexes: List[str],
    workloads: List[str],
    work_dir: _Path,
    ops: int = 100000,
    profile: str = "nvme",
    resident: str = "index",
    cache_pages: int = 0,
    direct: bool = True,
    repeat: int = 1,
    seed: int = 1,
    key_choice: str = "uniform",
    threads: int = 1,
    page_size: int = 4096,
    dataset: str = "data",
) -> List[Dict[str, Any]]: ...
def join(
    outer: Any,
    inner: Any,
    algo: str,
    memory: Union[int, str, None] = None,
    threads: int = 1,
    batch: int = 65536,
    outer_sorted: bool = True,
    inner_sorted: bool = True,
    out: Optional[str] = None,
    spill_dir: Optional[str] = None,
    sort: str = "external",
) -> Dict[str, Any]: ...
def tune(
    keys: _U64Array,
    profile: str = "nvme",
    out: Optional[_Path] = None,
    top_k: int = 5,
    memory_budget: int = 0,
    builders: str = "all",
    threads: int = 0,
    samples: int = 65536,
    page_size: int = 4096,
    local_dir: Optional[_Path] = None,
) -> Dict[str, Any]: ...
