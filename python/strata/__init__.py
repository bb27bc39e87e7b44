"""strata: disk-resident learned indexes, from Python.

Ordered ``uint64 -> uint64`` indexes whose small models live in memory and
whose data lives in checksummed pages on disk. This package wraps the Rust
library (the extension module ``strata._strata``):

>>> import strata
>>> keys = strata.gen("osm-like", 100_000, seed=42)     # numpy uint64, sorted
>>> idx = strata.build(keys, kind="pgm-disk-cpr", path=None, epsilon=64)
>>> int(idx.get(int(keys[7])))                           # values default to ranks
7
>>> idx.get_many(keys[:3]).tolist()
[0, 1, 2]

The durable hybrid store (write-ahead log, in-memory dynamic stage, learned
static stage on disk) is :class:`Db`:

>>> import tempfile
>>> with strata.Db(tempfile.mkdtemp(), memory="8M") as db:
...     db.put(5, 50)
...     db.put_many(keys[:3], [10, 11, 12])
...     db.delete(5)
...     db.get(int(keys[1])), db.get(5), len(db)
(11, None, 3)

Key arrays are passed to Rust as numpy buffers without copying when they are
C-contiguous ``uint64`` (anything else is converted once). Batch calls
(``Index.get_many``, ``Index.range``, ``build``, ``bench``) release the GIL.

Errors mirror ``strata::Error``: every exception derives from
:class:`StrataError` (see ``strata.errors``).

:func:`tune` runs AirTune: it chooses the layers of an index (kind ``air``)
for a storage profile and optionally builds it.

Extension points: a binding written on another branch is one Rust file in
``crates/strata-py/src/`` (registered in ``lib.rs``), one name in
``_EXTENSIONS`` below and its stub in ``_strata.pyi``; until it lands, using
it raises ``AttributeError`` naming the branch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np

from . import _strata
from ._strata import (
    BadMagicError,
    CorruptionError,
    DB_MAX_BATCH,
    Db,
    Index,
    InjectedError,
    InvalidInputError,
    IoError,
    LockedError,
    ConflictError,
    LsmStore,
    NotFoundError,
    OutOfOrderError,
    StrataError,
    TruncatedError,
    UnsupportedError,
    UnsupportedVersionError,
    dists,
    kinds,
    peers,
    profiles,
    workloads,
)

__version__: str = _strata.__version__

__all__ = [
    "BadMagicError",
    "CorruptionError",
    "DB_MAX_BATCH",
    "Db",
    "Index",
    "InjectedError",
    "InvalidInputError",
    "IoError",
    "LockedError",
    "ConflictError",
    "LsmStore",
    "NotFoundError",
    "OutOfOrderError",
    "StrataError",
    "TruncatedError",
    "UnsupportedError",
    "UnsupportedVersionError",
    "as_keys",
    "bench",
    "build",
    "dists",
    "gen",
    "join",
    "kinds",
    "open",
    "peers",
    "profiles",
    "read_keys",
    "tune",
    "workloads",
    "write_keys",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Value that ``Index.get_many`` returns for absent keys unless told otherwise.
MISSING: int = 2**64 - 1

# Names provided by other branches once they land: name -> where it comes from.
_EXTENSIONS: Dict[str, str] = {}


def __getattr__(name: str) -> Any:
    if name in _EXTENSIONS:
        if hasattr(_strata, name):
            return getattr(_strata, name)
        raise AttributeError(
            f"strata.{name} is not in this build: it will wrap {_EXTENSIONS[name]} "
            "when that branch lands (see crates/strata-py/src/lib.rs)"
        )
    raise AttributeError(f"module 'strata' has no attribute {name!r}")


def as_keys(keys: Any, name: str = "keys") -> np.ndarray:
    """Returns ``keys`` as a C-contiguous ``uint64`` array.

    A C-contiguous ``uint64`` array is returned as it is (no copy). Other
    integer arrays and sequences are converted once; negative keys raise
    :class:`InvalidInputError`, non-integer input raises ``TypeError``.
    """
    if isinstance(keys, np.ndarray) and keys.dtype == np.uint64 and keys.ndim == 1:
        return keys if keys.flags.c_contiguous else np.ascontiguousarray(keys)
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.dtype.kind == "u":
        return np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.dtype.kind == "i":
        if int(arr.min()) < 0:
            raise InvalidInputError(f"{name} must be >= 0 (uint64), got {int(arr.min())}")
        return np.ascontiguousarray(arr, dtype=np.uint64)
    if arr.dtype.kind == "O":
        try:
            return np.array([int(k) for k in arr], dtype=np.uint64)
        except OverflowError as e:
            raise InvalidInputError(f"{name} must fit in uint64: {e}") from None
    raise TypeError(f"{name} must be integers (uint64), got dtype {arr.dtype}")


def gen(dist: str, n: int, seed: int = 42) -> np.ndarray:
    """``n`` strictly increasing keys of distribution ``dist``, deterministic for ``seed``.

    ``dist`` is one of :func:`dists` (``uniform``, ``fb-like``, ``osm-like``,
    ``hard:local=L,global=G``, ...). Returns a ``uint64`` array owned by numpy.
    """
    return _strata.gen(dist, n, seed)


def read_keys(path: PathLike, dedup: bool = False, width: str = "auto") -> np.ndarray:
    """Reads a SOSD key file (little-endian ``u64`` count, then the keys).

    ``width`` is ``"u64"``, ``"u32"`` or ``"auto"`` (from the file size). Keys
    must be strictly increasing (:class:`OutOfOrderError` names the first
    offender), or non-decreasing with ``dedup=True``, which drops repeats.
    """
    return _strata.read_keys(os.fspath(path), dedup, width)


def write_keys(path: PathLike, keys: Any, width: str = "u64") -> None:
    """Writes ``keys`` as a SOSD key file (``width`` ``"u64"`` or ``"u32"``)."""
    _strata.write_keys(os.fspath(path), as_keys(keys), width)


def open(
    path: PathLike,
    resident: str = "index",
    direct: bool = False,
    cache_pages: int = 0,
    profile: Optional[str] = None,
    queue_depth: int = 32,
) -> Index:
    """Opens the index directory at ``path`` (written by :func:`build` or ``strata build``).

    - ``resident``: ``"index"`` keeps models and inner nodes in memory and
      reads only data pages from storage; ``"none"`` reads every level.
    - ``direct``: read with ``O_DIRECT`` (cold reads that bypass the OS cache;
      the file system must support it).
    - ``cache_pages``: pages of an LRU buffer pool in front of storage.
    - ``profile``: storage profile whose modelled time ``Index.io()`` reports
      (``nvme``, ``hdd``, ..., ``custom:LAT_US:BW_MB_S``; see :func:`profiles`).
    - ``queue_depth``: reads in flight at most in ``Index.get_many`` (io_uring
      on local files where the kernel has it, else a pool of threads; 1 reads
      one page after another).
    """
    return _strata.open(os.fspath(path), resident, direct, cache_pages, profile, None, queue_depth)


def _missing_dirs(path: str) -> List[str]:
    """``path`` and its ancestors that do not exist, deepest first."""
    out = []
    q = os.path.abspath(path)
    while not os.path.lexists(q):
        out.append(q)
        parent = os.path.dirname(q)
        if parent == q:
            break
        q = parent
    return out


def build(
    keys: Any,
    kind: str = "pgm-disk-cpr",
    path: Optional[PathLike] = None,
    *,
    values: Any = None,
    page_size: int = 4096,
    resident: str = "index",
    direct: bool = False,
    cache_pages: int = 0,
    profile: Optional[str] = None,
    **params: Union[int, float, str, bool],
) -> Index:
    """Builds an index of ``kind`` over sorted, distinct ``keys`` and opens it.

    ``kind`` is a kind name (see :func:`kinds`), optionally with parameters
    (``"pgm:epsilon=64"``); keyword ``params`` add more (``epsilon=64``).
    ``values`` (same length) replaces the default values, each key's rank.
    ``path`` is the index directory (created; an index already there is
    replaced); with ``path=None`` a temporary directory is used and removed
    when the returned index is garbage-collected. The open options are those
    of :func:`open`. The build report (sizes, build time) is
    ``Index.build_report``.

    Raises :class:`OutOfOrderError` for unsorted or duplicate keys and
    :class:`InvalidInputError` for unknown kinds or parameters.
    """
    k = as_keys(keys)
    v = None if values is None else as_keys(values, "values")
    temporary = path is None
    p = tempfile.mkdtemp(prefix="strata-") if temporary else os.fspath(path)
    # A call that raises leaves no directory it created (the build removes
    # its own on failure; an index built but not opened goes here).
    created = [] if temporary else _missing_dirs(p)
    try:
        report = _strata.build(k, kind, p, params or None, v, page_size)
        idx = _strata.open(p, resident, direct, cache_pages, profile, report)
    except BaseException:
        if temporary:
            shutil.rmtree(p, ignore_errors=True)
        elif created:
            shutil.rmtree(created[0], ignore_errors=True)
            for d in created[1:]:
                try:
                    os.rmdir(d)
                except OSError:
                    break
        raise
    if temporary:
        weakref.finalize(idx, shutil.rmtree, p, True)
    return idx


def bench(
    keys: Any,
    indexes: Union[str, Sequence[str]],
    workloads: Union[str, Sequence[str]] = ("lookup",),
    *,
    ops: int = 100_000,
    profile: str = "nvme",
    resident: str = "index",
    cache_pages: int = 0,
    direct: bool = True,
    repeat: int = 1,
    seed: int = 1,
    key_choice: str = "uniform",
    threads: int = 1,
    work_dir: Optional[PathLike] = None,
    page_size: int = 4096,
    dataset: str = "data",
) -> List[Dict[str, Any]]:
    """Runs the experiment runner of ``strata bench`` and returns its JSON records.

    Every workload (see :func:`workloads`) runs on every index spec over the
    same ``keys``; the first spec is the baseline of the ratios. Each record
    is a dict with the fields of ``BENCHMARKS.md`` (``throughput_ops_s``,
    ``latency_ns``, ``io``, ``memory_bytes``, ``bits_per_key``, ...), exactly
    as ``strata bench`` writes them. Peers (``lmdb``, ``rocksdb``) are
    available when the extension was built with those features
    (:func:`peers`). ``direct=True`` reads with ``O_DIRECT`` (cold); the
    ``work_dir`` (default: a temporary directory, removed afterwards) must be
    on a file system that supports it, or pass ``direct=False``.

    Raises :class:`InvalidInputError` if any answer was wrong.
    """
    k = as_keys(keys)
    idx_list = [indexes] if isinstance(indexes, str) else list(indexes)
    wl_list = [workloads] if isinstance(workloads, str) else list(workloads)
    temporary = work_dir is None
    wd = tempfile.mkdtemp(prefix="strata-bench-", dir=_bench_tmp()) if temporary else os.fspath(work_dir)
    try:
        return _strata.bench(
            k, idx_list, wl_list, wd, ops, profile, resident, cache_pages, direct,
            repeat, seed, key_choice, threads, page_size, dataset,
        )
    finally:
        if temporary:
            shutil.rmtree(wd, ignore_errors=True)


def tune(
    keys_or_path: Any,
    profile: str = "nvme",
    out: Optional[PathLike] = None,
    top_k: int = 5,
    memory_budget: int = 0,
    *,
    builders: str = "all",
    threads: int = 0,
    samples: int = 65536,
    page_size: int = 4096,
) -> Dict[str, Any]:
    """Tunes a layered index for a storage profile with AirTune (kind ``air``).

    ``keys_or_path`` is a key array (sorted, distinct ``uint64``) or the path
    of a SOSD key file. ``profile`` is a preset (``nvme``, ``sata-ssd``,
    ``hdd``, ``azure-ssd``, ``nfs``, ...; see :func:`profiles`),
    ``custom:LAT_US:BW_MB_S``, or ``local``: the device is measured first
    (where ``out`` will be, else the key file's directory, else the temporary
    directory). ``top_k`` is the number of candidates kept per layer of the
    search; ``memory_budget`` (bytes, 0 = none) asks for the fastest index
    whose pinned top layers fit in that much memory. ``builders`` restricts
    the layer builders (``all``, ``airindex`` or names joined by ``+``).

    Returns the report as a dict. ``report["design"]`` describes the chosen
    index: ``layers`` bottom-up (``builder``, ``lambda`` granularity in bytes,
    ``entries``, ``bytes``, ``pages``, ``reads_below_bytes`` expected bytes read
    from the layer below per lookup, ``reads_below_ns``), the ``root`` read,
    ``modelled_ns`` (expected cold lookup time under the profile) and
    ``expected_read_bytes``. With ``out`` the index is built there (open it
    with :func:`open`; its manifest stores the same design) and the report
    has ``build``; without it only the design is computed and ``tune_s`` is
    the tuning time. ``report["spec"]`` rebuilds the same index with
    :func:`build`.
    """
    local_dir = None
    if isinstance(keys_or_path, (str, os.PathLike)):
        path = os.fspath(keys_or_path)
        k = read_keys(path)
        local_dir = os.path.dirname(os.path.abspath(path))
    else:
        k = as_keys(keys_or_path)
    o = None if out is None else os.fspath(out)
    if o is not None:
        local_dir = os.path.dirname(os.path.abspath(o))
    return _strata.tune(
        k, profile, o, top_k, memory_budget, builders, threads, samples, page_size, local_dir,
    )


def join(
    outer: Any,
    inner: Any,
    algo: str,
    memory: Union[int, str, None] = None,
    threads: int = 1,
    batch: int = 65536,
    *,
    outer_sorted: bool = True,
    inner_sorted: bool = True,
    out: Optional[PathLike] = None,
    spill_dir: Optional[PathLike] = None,
    sort: str = "external",
) -> Dict[str, Any]:
    """Joins two relations on their keys, within a memory budget.

    ``outer`` and ``inner`` are each a SOSD key file path, a ``uint64`` key
    array (a record's payload is its position; the outer keys may repeat,
    the inner ones may not) or an open :class:`Index` (its records; an
    ``Index`` as ``inner`` is what ``algo="inlj"`` probes). ``algo`` is
    ``"inlj"`` (index nested-loop join: the outer keys in batches of
    ``batch`` probed with the index's batched lookups), ``"smj"``
    (sort-merge join: an external merge sort of what is not sorted) or
    ``"hash"`` (Grace hash join). ``memory`` (bytes or ``"64M"``; default
    256 MiB, at least 1 MiB) bounds the join's buffers; ``threads`` runs
    probe batches or partitions in parallel. ``outer_sorted`` /
    ``inner_sorted`` say whether key files are sorted (non-decreasing; a
    key out of order is then :class:`InvalidInputError`). ``out`` writes the
    matched ``(key, outer payload, inner payload)`` triples to a new file;
    ``spill_dir`` is where spill files go (removed at the end). ``sort``
    says how an unsorted relation is sorted (both sides of ``"smj"``, the
    outer side of ``"inlj"``, whose probes then come in key order):
    ``"external"`` (an external merge sort) or ``"learned"`` (learned
    partitioning: a PGM trained on a 1 % sample scatters the records into
    key-ordered partitions in one pass, each sorted in memory).

    Returns ``count``, ``checksum`` (order-independent: equal for equal
    outputs, whatever the algorithm), ``seconds``, ``spill_bytes_written``,
    ``spill_bytes_read``, ``passes`` (external merge passes, or learned
    partitioning levels), ``sort`` (``"external"``, ``"learned"`` or
    ``None`` when nothing was sorted) and ``partitions``.
    """
    def rel(x: Any) -> Any:
        if isinstance(x, (str, os.PathLike)):
            return os.fspath(x)
        if isinstance(x, Index):
            return x
        return as_keys(x)

    return _strata.join(
        rel(outer), rel(inner), algo, memory, threads, batch, outer_sorted, inner_sorted,
        None if out is None else os.fspath(out), None if spill_dir is None else os.fspath(spill_dir),
        sort,
    )


def _bench_tmp() -> Optional[str]:
    # /tmp is often tmpfs, which refuses O_DIRECT; prefer a disk-backed
    # directory when the user names one.
    return os.environ.get("STRATA_BENCH_TMP") or None
