"""strata.Db (the hybrid store strata::Db) against a dict oracle, with reopen."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strata

U64_MAX = 2**64 - 1

# Keys from a small pool (so overwrites and deletes hit) and the extremes.
keys_st = st.one_of(st.integers(0, 300), st.integers(U64_MAX - 3, U64_MAX), st.integers(0, U64_MAX))
values_st = st.integers(0, U64_MAX)
ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("put"), keys_st, values_st),
        st.tuples(st.just("delete"), keys_st),
        st.tuples(st.just("put_many"), st.lists(st.tuples(keys_st, values_st), max_size=200)),
        st.tuples(st.just("delete_many"), st.lists(keys_st, max_size=50)),
        st.tuples(st.just("flush")),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("check"), keys_st, keys_st),
    ),
    max_size=60,
)


def oracle_range(model, lo, hi):
    ks = sorted(k for k in model if lo <= k and (hi is None or k < hi))
    return np.array([[k, model[k]] for k in ks], dtype=np.uint64).reshape(len(ks), 2)


def check_against(db, model, lo, hi):
    assert len(db) == len(model)
    probe = sorted(set(model) | {lo, hi, 0, U64_MAX})
    got, found = db.get_many(np.array(probe, dtype=np.uint64), with_found=True)
    for k, v, f in zip(probe, got.tolist(), found.tolist()):
        assert f == (k in model)
        if f:
            assert v == model[k]
        assert db.get(k) == model.get(k)
    lo, hi = min(lo, hi), max(lo, hi)
    np.testing.assert_array_equal(db.range(lo, hi), oracle_range(model, lo, hi))
    np.testing.assert_array_equal(db.range(lo), oracle_range(model, lo, None))
    np.testing.assert_array_equal(db.scan(lo, 7), oracle_range(model, lo, None)[:7])


# A constant trigger of 2 KiB merges every few dozen writes, so the runs
# cross the dynamic, frozen and static stages and several generations.
@pytest.mark.parametrize("sync", ["never", "always"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_st)
def test_operations_against_dict_oracle(sync, ops, tmp_path_factory):
    path = tmp_path_factory.mktemp("db")
    opts = dict(memory="1M", sync=sync, trigger="constant:2048")
    model = {}
    db = strata.Db(path, **opts)
    try:
        for op in ops:
            if op[0] == "put":
                db.put(op[1], op[2])
                model[op[1]] = op[2]
            elif op[0] == "delete":
                db.delete(op[1])
                model.pop(op[1], None)
            elif op[0] == "put_many":
                ks = np.array([k for k, _ in op[1]], dtype=np.uint64)
                vs = np.array([v for _, v in op[1]], dtype=np.uint64)
                db.put_many(ks, vs)
                model.update(op[1])  # later repeats of a key win, in both
            elif op[0] == "delete_many":
                db.delete_many(np.array(op[1], dtype=np.uint64))
                for k in op[1]:
                    model.pop(k, None)
            elif op[0] == "flush":
                db.flush()
                assert db.stats()["active_entries"] == 0
            elif op[0] == "reopen":
                db.close()
                db = strata.Db.open(path, **opts)
            else:
                check_against(db, model, op[1], op[2])
        check_against(db, model, 0, U64_MAX)
        db.close()
        with strata.Db(path, **opts) as again:
            check_against(again, model, 0, U64_MAX)
            assert again.verify() >= 0
    finally:
        db.close()


def test_sync_takes_the_words_of_the_cli(tmp_path):
    # "always" and its alias "every", "never", a period as an int or "10ms":
    # the words of `strata db --sync` and of the kinds' `sync=`.
    for i, (sync, shown) in enumerate(
        [("always", "always"), ("every", "always"), ("never", "never"), (10, "10 ms"), ("10ms", "10 ms")]
    ):
        with strata.Db(tmp_path / f"s{i}", memory=1 << 20, sync=sync) as db:
            assert f"sync={shown}" in repr(db)
            db.put(1, 10)
    for bad in ["sometimes", True, 1.5]:
        with pytest.raises(strata.InvalidInputError, match=r"always.*\(or .*every.*\).*never"):
            strata.Db(tmp_path / "bad", sync=bad)
        with pytest.raises(strata.InvalidInputError, match=r"always.*\(or .*every.*\).*never"):
            strata.LsmStore(tmp_path / "bad-lsm", sync=bad)


def test_context_manager_close_and_repr(tmp_path):
    with strata.Db(tmp_path / "s", memory=1 << 20) as db:
        assert not db.closed and db.path == str(tmp_path / "s")
        assert "sync=always" in repr(db)
        db.put(1, 10)
        assert 1 in db and 2 not in db
    assert db.closed and "closed" in repr(db)
    with pytest.raises(strata.InvalidInputError, match="closed"):
        db.get(1)
    with pytest.raises(strata.InvalidInputError, match="closed"):
        db.put(1, 2)
    db.close()  # closing twice is fine
    # The block's exception propagates, and the store is closed and durable.
    with pytest.raises(KeyError):
        with strata.Db(tmp_path / "s") as db2:
            db2.put(2, 20)
            raise KeyError("boom")
    assert db2.closed
    with strata.Db.open(tmp_path / "s") as db3:
        assert db3.range().tolist() == [[1, 10], [2, 20]]


def test_put_many_is_one_batch_and_accepts_lists(tmp_path):
    keys = strata.gen("osm-like", 50_000, seed=5)
    vals = np.arange(len(keys), dtype=np.uint64) * 3
    with strata.Db(tmp_path / "s", memory="4M", sync="never") as db:
        db.put_many(keys, vals)
        assert db.stats()["last_seq"] == 1  # one sequence number: one batch
        np.testing.assert_array_equal(db.get_many(keys[::101]), vals[::101])
        db.put_many([1, 2, 2], [5, 6, 7])  # lists; the later 2 wins
        assert (db.get(1), db.get(2)) == (5, 7)
        db.delete_many([1, 2])
        assert db.get_many([1, 2], missing=9).tolist() == [9, 9]
        with pytest.raises(strata.InvalidInputError, match="as many values as keys"):
            db.put_many(keys[:3], vals[:2])
        with pytest.raises(strata.InvalidInputError):
            db.put_many([-1], [1])
        with pytest.raises(strata.InvalidInputError, match="at most"):
            db.put_many(np.arange(strata.DB_MAX_BATCH + 1, dtype=np.uint64),
                        np.zeros(strata.DB_MAX_BATCH + 1, dtype=np.uint64))
        db.flush()
        st_ = db.stats()
        assert st_["static_records"] == len(keys) and st_["merges"] >= 1
        assert st_["static_kind"] and st_["disk_bytes"] > 0 and st_["memory_bytes"] > 0
        assert st_["sync"] == "never"
        # range has the layout of Index.range: (m, 2), keys then values.
        r = db.range(int(keys[10]), int(keys[20]))
        assert r.shape == (10, 2) and r.dtype == np.uint64
        np.testing.assert_array_equal(r[:, 0], keys[10:20])
        np.testing.assert_array_equal(r[:, 1], vals[10:20])


def test_options_and_errors(tmp_path):
    for bad in (
        dict(sync="sometimes"),
        dict(sync=True),
        dict(memory=0),
        dict(memory="lots"),
        dict(trigger="ratio:0"),
        dict(trigger="often"),
        dict(resident="sometimes"),
        dict(profile="floppy"),
        dict(page_size=1000),
        dict(static="no-such-kind"),
    ):
        with pytest.raises(strata.InvalidInputError):
            strata.Db(tmp_path / "bad", **bad)
    for good in (
        dict(sync=5, memory="2M", static="pgm-disk-cpr:epsilon=16", background_merge=False),
        dict(trigger="ratio:4", resident="none", profile="nvme", epsilon=32),
    ):
        p = tmp_path / str(len(good))
        with strata.Db(p, **good) as db:
            db.put_many(np.arange(5000, dtype=np.uint64), np.arange(5000, dtype=np.uint64))
            db.flush()
            assert db.get(4999) == 4999
        with strata.Db(p, **good) as db:
            assert len(db) == 5000
    # A damaged manifest is a CorruptionError (never a wrong answer).
    p = tmp_path / "c"
    with strata.Db(p) as db:
        db.put(1, 1)
        db.flush()
    man = p / "strata-db.manifest"
    raw = bytearray(man.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    man.write_bytes(bytes(raw))
    with pytest.raises(strata.CorruptionError):
        strata.Db(p)
    # A file where the directory should be is an IoError.
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(strata.IoError):
        strata.Db(tmp_path / "file")


def test_sync_always_survives_process_exit(tmp_path):
    # The child exits with os._exit: no close, no destructor, no flush.
    code = (
        "import os, sys, strata\n"
        "db = strata.Db(sys.argv[1], sync=sys.argv[2])\n"
        "for k in range(100): db.put(k, k * 2)\n"
        "db.delete(7)\n"
        "if sys.argv[2] == 'never': db.sync()\n"
        "os._exit(0)\n"
    )
    for sync in ("always", "never"):
        p = tmp_path / sync
        subprocess.run([sys.executable, "-c", code, str(p), sync], check=True)
        with strata.Db(p) as db:
            assert len(db) == 99 and db.get(7) is None and db.get(99) == 198


def test_threads_share_one_store(tmp_path):
    # Merges every ~1000 writes: writers meet a running merge (back-pressure).
    with strata.Db(tmp_path / "s", memory="1M", sync="never", trigger="constant:64K") as db:
        def writer(t):
            for i in range(2000):
                db.put(t * 1_000_000 + i, i)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(db) == 8000
        for t in range(4):
            r = db.range(t * 1_000_000, t * 1_000_000 + 2000)
            np.testing.assert_array_equal(r[:, 1], np.arange(2000, dtype=np.uint64))


def test_a_second_writer_or_a_reader_under_a_writer_is_locked(tmp_path):
    p = tmp_path / "s"
    d = strata.Db(p)
    d.put(1, 1)
    with pytest.raises(strata.LockedError) as e:
        strata.Db(p)
    assert e.value.exclusive and str(p) in e.value.dir
    with pytest.raises(strata.LockedError):
        strata.Db(p, read_only=True)
    d.close()
    r = strata.Db(p, read_only=True)
    assert r.get(1) == 1
    with pytest.raises(strata.UnsupportedError, match="read-only"):
        r.put(2, 2)
    with pytest.raises(strata.LockedError) as e:
        strata.Db(p)
    assert not e.value.exclusive
    r.close()
    strata.Db(p).close()


def test_read_only_missing_store_is_not_found_and_not_created(tmp_path):
    with pytest.raises(strata.NotFoundError):
        strata.Db(tmp_path / "nosuch", read_only=True)
    assert not (tmp_path / "nosuch").exists()
