"""Every strata::Error variant arrives as its exception class, with its fields."""

import os

import numpy as np
import pytest

import strata


def test_exception_tree():
    for cls in (
        strata.IoError,
        strata.CorruptionError,
        strata.UnsupportedVersionError,
        strata.InvalidInputError,
        strata.UnsupportedError,
        strata.NotFoundError,
        strata.InjectedError,
        strata.LockedError,
        strata.ConflictError,
    ):
        assert issubclass(cls, strata.StrataError)
    assert issubclass(strata.BadMagicError, strata.CorruptionError)
    assert issubclass(strata.TruncatedError, strata.CorruptionError)
    assert issubclass(strata.OutOfOrderError, strata.InvalidInputError)
    assert issubclass(strata.StrataError, Exception)


def test_out_of_order_names_position_and_keys(tmp_path):
    with pytest.raises(strata.OutOfOrderError) as e:
        strata.build(np.array([1, 5, 3], dtype=np.uint64), kind="btree", path=tmp_path / "x")
    assert (e.value.position, e.value.previous, e.value.got) == (2, 5, 3)
    assert "position 2" in str(e.value)
    with pytest.raises(strata.OutOfOrderError, match="duplicate"):
        strata.build(np.array([1, 1], dtype=np.uint64), kind="pgm", path=tmp_path / "y")


def test_invalid_input():
    with pytest.raises(strata.InvalidInputError, match="unknown index kind"):
        strata.build(np.arange(10, dtype=np.uint64), kind="no-such-kind")
    with pytest.raises(strata.InvalidInputError, match="unknown distribution"):
        strata.gen("no-such-dist", 10)
    with pytest.raises(strata.InvalidInputError):
        strata.open(".", resident="sometimes")
    with pytest.raises(strata.InvalidInputError):
        strata.open(".", profile="floppy")
    with pytest.raises(strata.InvalidInputError):
        strata.read_keys("x", width="u16")


def test_io_error_on_missing_paths(tmp_path):
    with pytest.raises(strata.IoError) as e:
        strata.read_keys(tmp_path / "missing.keys")
    assert "missing.keys" in e.value.file
    assert e.value.errno == 2
    with pytest.raises(strata.StrataError):
        strata.open(tmp_path / "no-index-here")


def test_truncated_key_file(tmp_path):
    p = tmp_path / "short.keys"
    p.write_bytes(b"\x01\x00")
    with pytest.raises(strata.TruncatedError) as e:
        strata.read_keys(p)
    assert e.value.expected == 8 and e.value.found == 2
    assert isinstance(e.value, strata.CorruptionError)


def test_corrupt_page_is_an_error_never_an_answer(tmp_path):
    keys = strata.gen("uniform", 50_000, seed=9)
    d = tmp_path / "b"
    strata.build(keys, kind="binary", path=d).close()
    data_files = [f for f in os.listdir(d) if not f.endswith(".json")]
    assert data_files
    target = max((d / f for f in data_files), key=lambda p: p.stat().st_size)
    raw = bytearray(target.read_bytes())
    mid = len(raw) // 2
    for i in range(mid, mid + 64):
        raw[i] ^= 0xFF
    target.write_bytes(bytes(raw))
    idx = strata.open(d)
    with pytest.raises(strata.CorruptionError) as e:
        idx.verify()
    assert e.value.page > 0 and e.value.file
    with pytest.raises(strata.CorruptionError):
        idx.get_many(keys)  # some lookup lands on the damaged page


def test_unsupported_write_on_static_kind(tmp_path):
    idx = strata.build(strata.gen("dense", 100), kind="zonemap", path=tmp_path / "z")
    with pytest.raises(strata.UnsupportedError, match="static"):
        idx.delete(3)


def test_huge_gen_raises_strata_error_not_panic():
    """Issue 16: ``strata.gen('uniform', 2**62)`` is a StrataError, never PanicException."""
    for n in (2**62, 2**64 - 1, 2**60):
        with pytest.raises(strata.InvalidInputError, match=f"cannot generate {n} keys"):
            strata.gen("uniform", n)
    with pytest.raises(strata.StrataError):
        strata.gen("uniform", 2**62)


def test_bad_spec_leaves_no_directory(tmp_path):
    """Issue 16: an unknown parameter is refused before anything is written."""
    out = tmp_path / "idx"
    with pytest.raises(strata.InvalidInputError, match="eps"):
        strata.build(np.arange(5000, dtype=np.uint64), kind="pgm:eps=64", path=out)
    assert not out.exists()


def test_object_store_location_without_the_feature():
    # The default wheel is built without object storage (cargo feature `s3`):
    # an s3:// location is refused with a message saying so, before any I/O.
    with pytest.raises(strata.UnsupportedError, match="feature `s3`"):
        strata.open("s3://bucket/prefix")
    with pytest.raises(strata.UnsupportedError, match="feature `s3`"):
        strata.build(np.arange(10, dtype=np.uint64), kind="pgm", path="s3://bucket/prefix")
