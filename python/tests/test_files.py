"""SOSD key files round-trip between Python, numpy and strata."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=500, unique=True))
def test_write_read_round_trip(tmp_path_factory, ks):
    keys = np.array(sorted(ks), dtype=np.uint64)
    p = tmp_path_factory.mktemp("k") / "keys.sosd"
    strata.write_keys(p, keys)
    raw = p.read_bytes()
    assert int.from_bytes(raw[:8], "little") == len(keys)
    np.testing.assert_array_equal(np.frombuffer(raw[8:], dtype="<u8"), keys)
    np.testing.assert_array_equal(strata.read_keys(p), keys)


def test_u32_files_and_dedup(tmp_path):
    p = tmp_path / "k32"
    strata.write_keys(p, np.array([1, 2, 70000], dtype=np.uint64), width="u32")
    assert p.stat().st_size == 8 + 3 * 4
    assert strata.read_keys(p, width="u32").tolist() == [1, 2, 70000]
    with pytest.raises(strata.InvalidInputError):
        strata.write_keys(tmp_path / "big", np.array([2**40], dtype=np.uint64), width="u32")
    d = tmp_path / "dup"
    d.write_bytes((3).to_bytes(8, "little") + np.array([5, 5, 9], dtype="<u8").tobytes())
    with pytest.raises(strata.OutOfOrderError):
        strata.read_keys(d)
    assert strata.read_keys(d, dedup=True).tolist() == [5, 9]


def test_generated_keys_file_then_index(tmp_path):
    keys = strata.gen("fb-like", 30_000, seed=11)
    assert np.all(np.diff(keys.astype(object)) > 0) if len(keys) < 10 else np.all(keys[1:] > keys[:-1])
    np.testing.assert_array_equal(strata.gen("fb-like", 30_000, seed=11), keys)
    p = tmp_path / "fb.keys"
    strata.write_keys(p, keys)
    again = strata.read_keys(p)
    idx = strata.build(again, kind="leco-zonemap-d", path=tmp_path / "i")
    np.testing.assert_array_equal(idx.get_many(keys), np.arange(len(keys), dtype=np.uint64))
