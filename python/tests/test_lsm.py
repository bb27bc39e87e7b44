"""strata.LsmStore (the LSM store strata::lsm::Store) against a dict oracle, with reopen."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strata

# Keys from a small pool of short byte strings (so overwrites and deletes
# hit), plus arbitrary ones.
keys_st = st.one_of(st.binary(min_size=0, max_size=3), st.binary(max_size=40))
values_st = st.one_of(st.binary(max_size=30), st.binary(min_size=1000, max_size=3000))
ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys_st, values_st),
        st.tuples(st.just("delete"), keys_st),
        st.tuples(
            st.just("batch"),
            st.lists(st.tuples(keys_st, st.one_of(st.none(), values_st)), max_size=50),
        ),
        st.tuples(st.just("flush")),
        st.tuples(st.just("compact")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("check"), keys_st),
    ),
    max_size=60,
)


def check_against(s, model, start):
    probe = list(model)[:50] + [start, b"", b"\xff" * 4]
    for k in probe:
        assert s.get(k) == model.get(k)
        assert (k in s) == (k in model)
    assert s.get_many(probe + probe[:3]) == [model.get(k) for k in probe + probe[:3]]
    assert s.get_many([]) == []
    want = sorted(model.items())
    assert s.scan() == want
    assert s.scan(start) == [(k, v) for k, v in want if k >= start]
    assert s.scan(start, limit=3) == [(k, v) for k, v in want if k >= start][:3]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_st)
def test_operations_against_dict_oracle(ops, tmp_path_factory):
    path = tmp_path_factory.mktemp("lsm")
    # A 256 KiB budget: small memtables, so flushes and compactions happen.
    opts = dict(index="pgm", boundary=8, memory="256K", sync="never")
    s = strata.LsmStore(path, **opts)
    model = {}
    try:
        for op in ops:
            if op[0] == "put":
                s.put(op[1], op[2])
                model[op[1]] = op[2]
            elif op[0] == "delete":
                s.delete(op[1])
                model.pop(op[1], None)
            elif op[0] == "batch":
                s.write_batch(op[1])
                for k, v in op[1]:
                    if v is None:
                        model.pop(k, None)
                    else:
                        model[k] = v
            elif op[0] == "flush":
                s.flush()
            elif op[0] == "compact":
                s.compact()
            elif op[0] == "reopen":
                s.close()
                s = strata.LsmStore(path, **opts)
            else:
                check_against(s, model, op[1])
        check_against(s, model, b"")
    finally:
        s.close()
    with strata.LsmStore(path, **opts) as s:
        check_against(s, model, b"\x01")


def test_u64_conveniences_are_big_endian(tmp_path):
    keys = np.array([1, 255, 256, 2**40, 2**64 - 1], dtype=np.uint64)
    values = keys * np.uint64(3)
    with strata.LsmStore(tmp_path / "s", index="fp", boundary=4) as s:
        s.put_u64(keys, values)
        found, got = s.get_u64(np.array([256, 7, 2**64 - 1], dtype=np.uint64))
        assert found.tolist() == [True, False, True]
        assert got.dtype == np.uint64 and got.tolist() == [768, 0, (2**64 - 1) * 3 % 2**64]
        # Byte order is numeric order: the keys come back sorted.
        assert [int.from_bytes(k, "big") for k, _ in s.scan()] == keys.tolist()
        assert s.get((256).to_bytes(8, "big")) == (768).to_bytes(8, "big")
        s.put(b"short", b"not a u64")
        with pytest.raises(strata.InvalidInputError):
            s.put_u64(keys, values[:2])
        s.put(b"\x00" * 7 + b"\x07", b"abc")
        with pytest.raises(strata.InvalidInputError):
            s.get_u64(np.array([7], dtype=np.uint64))


def test_stats_flush_compact_verify(tmp_path):
    with strata.LsmStore(tmp_path / "s", memory="1M", sync="always") as s:
        for i in range(2000):
            s.put(b"key%06d" % i, b"v" * 50)
        s.flush()
        st = s.stats()
        assert st["sync"] == "always"
        assert sum(level["files"] for level in st["levels"]) >= 1
        for name in ("memtable_bytes", "index_bytes", "filter_bytes", "block_cache_capacity"):
            assert name in st
        s.compact()
        s.verify()
        assert len(s.scan()) == 2000
    assert s.closed
    with pytest.raises(strata.InvalidInputError):
        s.get(b"key000001")
    s.close()  # closing twice does nothing


def test_errors_map_to_the_exception_tree(tmp_path):
    path = tmp_path / "s"
    with pytest.raises(strata.NotFoundError):
        strata.LsmStore(path, read_only=True)
    with strata.LsmStore(path) as s:
        with pytest.raises(strata.LockedError):
            strata.LsmStore(path)
        with pytest.raises(strata.InvalidInputError):
            s.put(b"k" * (64 * 1024 + 1), b"v")
        with pytest.raises(strata.InvalidInputError):
            s.write_batch([(b"k",)])
        with pytest.raises(TypeError):
            s.put("text", b"v")
        s.put(b"a", b"1")
    with pytest.raises(strata.StrataError):
        strata.LsmStore(path, index="nosuch")
    with pytest.raises(strata.InvalidInputError):
        strata.LsmStore(path, sync="sometimes")
    with strata.LsmStore(path, read_only=True) as r:
        assert r.get(b"a") == b"1"
        with pytest.raises(strata.StrataError):
            r.put(b"b", b"2")
