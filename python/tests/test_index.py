"""The Python API against a sorted-array oracle (numpy.searchsorted)."""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strata

# Kinds exercised by the property tests; every kind runs the fixed tests.
PROPERTY_KINDS = ["btree", "pgm-disk-cpr", "leco-zonemap-d", "zonemap", "binary", "rs"]
ALL_KINDS = [name for name, _ in strata.kinds() if name not in strata.peers()]

U64_MAX = 2**64 - 1


def oracle_lower_bound(keys, values, q):
    i = int(np.searchsorted(keys, np.uint64(q), side="left"))
    return None if i == len(keys) else (int(keys[i]), int(values[i]))


@st.composite
def key_arrays(draw, max_size=3000):
    """Sorted distinct uint64 arrays, mixing dense runs, huge gaps and extremes."""
    raw = draw(
        hnp.arrays(
            np.uint64,
            st.integers(1, max_size),
            elements=st.one_of(
                st.integers(0, 2**64 - 1),
                st.integers(0, 5000),
                st.integers(2**64 - 5000, 2**64 - 1),
            ),
        )
    )
    return np.unique(raw)


def queries_for(keys, draw):
    extra = draw(st.lists(st.integers(0, U64_MAX), max_size=50))
    picks = keys[draw(st.lists(st.integers(0, len(keys) - 1), max_size=50))] if len(keys) else []
    near = [int(k) + d for k in picks for d in (-1, 1) if 0 <= int(k) + d <= U64_MAX]
    return np.array(sorted(set(extra) | {int(k) for k in picks} | set(near) | {0, U64_MAX}), dtype=np.uint64)


@pytest.mark.parametrize("kind", PROPERTY_KINDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_keys_against_oracle(kind, data, tmp_path_factory):
    keys = data.draw(key_arrays())
    values = data.draw(hnp.arrays(np.uint64, len(keys)))
    path = tmp_path_factory.mktemp(kind)
    idx = strata.build(keys, kind=kind, path=path, values=values)
    assert len(idx) == len(keys)
    qs = queries_for(keys, data.draw)
    got, found = idx.get_many(qs, with_found=True)
    pos = np.searchsorted(keys, qs)
    present = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == qs)
    np.testing.assert_array_equal(found, present)
    np.testing.assert_array_equal(got[present], values[pos[present]])
    for q in qs[:40]:
        q = int(q)
        assert idx.lower_bound(q) == oracle_lower_bound(keys, values, q)
        i = int(np.searchsorted(keys, np.uint64(q)))
        assert idx.get(q) == (int(values[i]) if i < len(keys) and int(keys[i]) == q else None)
    lo, hi = sorted(int(x) for x in data.draw(st.lists(st.integers(0, U64_MAX), min_size=2, max_size=2)))
    r = idx.range(lo, hi)
    a, b = np.searchsorted(keys, np.uint64(lo)), np.searchsorted(keys, np.uint64(hi))
    assert r.shape == (b - a, 2) and r.dtype == np.uint64
    np.testing.assert_array_equal(r[:, 0], keys[a:b])
    np.testing.assert_array_equal(r[:, 1], values[a:b])
    idx.close()


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_kind_round_trip(kind, tmp_path):
    keys = strata.gen("osm-like", 20_000, seed=7)
    idx = strata.build(keys, kind=kind, path=tmp_path / "idx")
    assert idx.kind == kind
    np.testing.assert_array_equal(idx.get_many(keys[::97]), np.arange(0, len(keys), 97, dtype=np.uint64))
    assert idx.build_report["n"] == len(keys)
    st_ = idx.stats()
    assert st_["n"] == len(keys) and st_["disk_bytes"] > 0 and st_["kind"] == kind
    assert idx.verify() > 0
    idx.close()
    # Reopen from the directory, cold and with a page cache.
    for opts in ({"direct": False}, {"cache_pages": 64, "profile": "hdd"}):
        with strata.open(tmp_path / "idx", **opts) as again:
            assert again.build_report is None
            np.testing.assert_array_equal(again.get_many(keys[5:500:7]), np.arange(5, 500, 7, dtype=np.uint64))
            r = again.range(int(keys[100]), int(keys[300]))
            np.testing.assert_array_equal(r[:, 0], keys[100:300])


def test_get_many_missing_and_dtypes(tmp_path):
    keys = np.arange(10, 10_000, 10, dtype=np.uint64)
    idx = strata.build(keys, kind="btree", path=tmp_path / "b")
    q = np.array([10, 11, 20, 99_999], dtype=np.uint64)
    assert idx.get_many(q).tolist() == [0, strata.MISSING, 1, strata.MISSING]
    assert idx.get_many(q, missing=7).tolist() == [0, 7, 1, 7]
    # A strided (non-contiguous) view works too.
    np.testing.assert_array_equal(idx.get_many(keys[::3]), np.arange(0, len(keys), 3, dtype=np.uint64))
    # Python lists and signed arrays through strata.as_keys.
    assert idx.get_many(strata.as_keys([10, 30])).tolist() == [0, 2]
    assert strata.as_keys(np.array([1, 2], dtype=np.int64)).dtype == np.uint64
    with pytest.raises(strata.InvalidInputError):
        strata.as_keys([-1, 2])
    with pytest.raises(TypeError):
        strata.as_keys([1.5, 2.5])
    with pytest.raises(TypeError):
        idx.get_many(np.array([1.0, 2.0]))
    assert 10 in idx and 11 not in idx
    assert idx.scan(15, 3).tolist() == [[20, 1], [30, 2], [40, 3]]
    assert idx.range(5, 5).shape == (0, 2)


def test_zero_copy_key_arrays():
    keys = strata.gen("uniform", 1000, seed=1)
    # The Rust Vec became the array's buffer (no copy): numpy does not own it.
    assert keys.dtype == np.uint64 and keys.flags.c_contiguous and keys.flags.writeable
    assert not keys.flags.owndata and keys.base is not None
    assert strata.as_keys(keys) is keys


def test_build_with_params_and_spec(tmp_path):
    keys = strata.gen("fb-like", 50_000, seed=3)
    a = strata.build(keys, kind="pgm", path=tmp_path / "a", epsilon=16)
    b = strata.build(keys, kind="pgm:epsilon=256", path=tmp_path / "b")
    assert a.build_report["config"]["epsilon"] == 16
    assert b.build_report["config"]["epsilon"] == 256
    assert a.stats()["models"] >= b.stats()["models"]
    assert a.approx(int(keys[100])) is not None
    with pytest.raises(strata.InvalidInputError):
        strata.build(keys, kind="pgm", path=tmp_path / "c", no_such_param=1)


def test_a_rejected_build_leaves_no_directory(tmp_path):
    keys = np.arange(0, 30_000, 3, dtype=np.uint64)
    unsorted = keys.copy()
    unsorted[500] = 1
    out = tmp_path / "a" / "b" / "idx"
    with pytest.raises(strata.InvalidInputError):
        strata.build(keys, kind="pgm:eps=3", path=out)
    with pytest.raises(strata.InvalidInputError):
        strata.build(keys, kind="pgm", path=out, no_such_param=1)
    for kind in ["pgm", "btree", "db"]:
        with pytest.raises(strata.OutOfOrderError):
            strata.build(unsorted, kind=kind, path=out)
    # Built, but the open options are refused: the index goes too.
    with pytest.raises(strata.InvalidInputError):
        strata.build(keys, kind="pgm", path=out, resident="everything")
    assert list(tmp_path.iterdir()) == []
    # An existing directory stays.
    (tmp_path / "kept").mkdir()
    with pytest.raises(strata.OutOfOrderError):
        strata.build(unsorted, kind="pgm", path=tmp_path / "kept")
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    # A store refused for its options creates no directory either.
    with pytest.raises(strata.InvalidInputError):
        strata.Db(tmp_path / "s" / "t", sync=0)
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]


def test_temporary_index_directory_is_removed():
    import gc
    import os

    idx = strata.build(strata.gen("dense", 1000), kind="binary")
    path = idx.path
    assert os.path.isdir(path)
    del idx
    gc.collect()
    assert not os.path.exists(path)


def test_io_counters(tmp_path):
    keys = strata.gen("uniform", 100_000, seed=2)
    strata.build(keys, kind="btree", path=tmp_path / "b").close()
    idx = strata.open(tmp_path / "b", profile="nvme")
    idx.reset_io()
    for k in keys[:100]:
        idx.get(int(k))
    io = idx.io()
    assert io["read_calls"] >= 100 and io["pages_read"] >= 100
    assert io["bytes_read"] >= 100 * 4096
    assert io["modelled_read_ns"] >= 100 * 70_000 * 0.99
    # A batch reads each key's leaf once, up to 32 reads in flight (the
    # default queue depth): the modelled time pays the nvme latency once per
    # wave of 32 reads, the bandwidth for every byte.
    idx.reset_io()
    spread = keys[::1000]  # 100 keys, each on a leaf of its own
    assert idx.get_many(spread).tolist() == list(range(0, 100_000, 1000))
    io = idx.io()
    assert io["read_calls"] == 100 and io["pages_read"] == 100
    assert io["bytes_read"] == 100 * 4096
    want = 4 * 70_000 + 100 * 4096 * 1e9 / 6900e6
    assert abs(io["modelled_read_ns"] - want) < 0.01 * want


def test_updates_on_btree_and_static_kinds(tmp_path):
    keys = np.arange(0, 2000, 2, dtype=np.uint64)
    bt = strata.build(keys, kind="btree", path=tmp_path / "bt")
    assert bt.supports_updates()
    assert bt.insert(1, 77) is None
    assert bt.insert(1, 78) == 77
    assert bt.get(1) == 78
    assert bt.delete(1) and not bt.delete(1)
    bt.sync()
    st_ = strata.build(keys, kind="pgm-disk-cpr", path=tmp_path / "p")
    assert not st_.supports_updates()
    with pytest.raises(strata.UnsupportedError):
        st_.insert(1, 1)


def test_concurrent_readers_release_the_gil(tmp_path):
    keys = strata.gen("osm-like", 200_000, seed=5)
    idx = strata.build(keys, kind="pgm-disk-cpr", path=tmp_path / "p")
    errors = []

    def worker(part):
        try:
            np.testing.assert_array_equal(idx.get_many(keys[part::4]), np.arange(part, len(keys), 4, dtype=np.uint64))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_closed_index(tmp_path):
    idx = strata.build(strata.gen("dense", 100), kind="binary", path=tmp_path / "x")
    with idx:
        assert idx.get(0) == 0
    assert idx.closed
    with pytest.raises(strata.InvalidInputError, match="closed"):
        idx.get(0)
    assert "closed" in repr(idx)


def test_listings():
    kinds = dict(strata.kinds())
    for k in ("binary", "btree", "pgm-disk-cpr", "zonemap", "leco-zonemap-d"):
        assert k in kinds and kinds[k]
    assert "fb-like" in strata.dists()
    assert "lookup" in strata.workloads() and "balanced" in strata.workloads()
    assert "nvme" in [p[0] for p in strata.profiles()]


def test_extension_points_are_explicit():
    assert strata.Db is strata._strata.Db and "Db" in strata.__all__
    assert callable(strata.tune) and "tune" in strata.__all__
    with pytest.raises(AttributeError):
        strata.no_such_thing  # noqa: B018


def test_index_get_many_accepts_what_db_get_many_accepts(tmp_path):
    """Issue 16: lists, non-negative int64 arrays and uint64 arrays, as ``Db.get_many``."""
    keys = np.arange(10, 10_000, 10, dtype=np.uint64)
    idx = strata.build(keys, kind="pgm", path=tmp_path / "p")
    want = [0, 2, strata.MISSING]
    assert idx.get_many([10, 30, 31]).tolist() == want
    assert idx.get_many(np.array([10, 30, 31], dtype=np.int64)).tolist() == want
    assert idx.get_many(np.array([10, 30, 31], dtype=np.uint32)).tolist() == want
    assert idx.get_many(np.array([10, 30, 31], dtype=np.uint64)).tolist() == want
    values, found = idx.get_many([10, 31], with_found=True)
    assert values.tolist() == [0, strata.MISSING] and found.tolist() == [True, False]
    assert idx.get_many([]).tolist() == []
    with pytest.raises(strata.InvalidInputError):
        idx.get_many(np.array([5, -1], dtype=np.int64))
    with pytest.raises(strata.InvalidInputError):
        idx.get_many([[10, 20]])
