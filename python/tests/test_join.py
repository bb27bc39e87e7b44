"""strata.join against a dict oracle: every algorithm, key files, arrays and indexes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata


def oracle(outer, inner):
    pos = {int(k): i for i, k in enumerate(inner)}
    return sum(1 for k in outer if int(k) in pos)


@settings(max_examples=20, deadline=None)
@given(
    outer=st.lists(st.integers(0, 300), max_size=2000),
    inner=st.sets(st.integers(0, 400), max_size=300),
)
def test_every_algorithm_counts_the_oracle(outer, inner, tmp_path_factory):
    inner = np.array(sorted(inner), dtype=np.uint64)
    outer = np.array(outer, dtype=np.uint64)
    want = oracle(outer, inner)
    results = [strata.join(outer, inner, algo, memory="1M") for algo in ("smj", "hash")]
    if len(inner):
        d = tmp_path_factory.mktemp("idx")
        idx = strata.build(inner, "btree", d / "i.bt")
        results.append(strata.join(outer, idx, "inlj", memory="1M", threads=2))
    for r in results:
        assert r["count"] == want
    assert len({r["checksum"] for r in results}) == 1


def test_key_files_pairs_file_and_errors(tmp_path):
    inner = np.arange(1, 20_000, 3, dtype=np.uint64)
    outer = np.sort(np.random.default_rng(1).integers(0, 20_000, 50_000).astype(np.uint64))
    strata.write_keys(tmp_path / "i.keys", inner)
    # write_keys wants distinct keys: the outer relation repeats, so it is written by hand.
    with open(tmp_path / "o.keys", "wb") as f:
        f.write(np.uint64(len(outer)).tobytes())
        f.write(outer.tobytes())
    want = oracle(outer, inner)
    idx = strata.build(inner, "pgm", tmp_path / "i.pgm")
    a = strata.join(tmp_path / "o.keys", tmp_path / "i.keys", "smj", memory="1M", spill_dir=tmp_path)
    b = strata.join(tmp_path / "o.keys", idx, "inlj", out=tmp_path / "out.pairs")
    assert a["count"] == b["count"] == want and a["checksum"] == b["checksum"]
    assert (tmp_path / "out.pairs").stat().st_size == 40 + 24 * want
    # Nothing else left behind (spill files are removed).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.keys", "i.pgm", "o.keys", "out.pairs"]
    with pytest.raises(strata.InvalidInputError, match="algo must be"):
        strata.join(outer, inner, "nested")
    with pytest.raises(strata.InvalidInputError, match="needs an index"):
        strata.join(outer, inner, "inlj")
    with pytest.raises(strata.InvalidInputError, match="at least"):
        strata.join(outer, inner, "hash", memory=1000)
    with pytest.raises(strata.InvalidInputError, match="repeats key"):
        strata.join(inner, outer, "hash")
    shuffled = tmp_path / "u.keys"
    with open(shuffled, "wb") as f:
        f.write(np.uint64(3).tobytes())
        f.write(np.array([5, 1, 3], dtype=np.uint64).tobytes())
    with pytest.raises(strata.InvalidInputError, match="not sorted"):
        strata.join(shuffled, inner, "smj")
    assert strata.join(shuffled, inner, "smj", outer_sorted=False)["count"] == oracle([5, 1, 3], inner)


def test_learned_sort_matches_the_external_sort(tmp_path):
    rng = np.random.default_rng(7)
    outer = rng.integers(0, 1 << 40, 120_000).astype(np.uint64)
    inner = np.unique(np.concatenate([outer[::3], rng.integers(0, 1 << 40, 20_000).astype(np.uint64)]))
    shuffled_inner = rng.permutation(inner)
    want = oracle(outer, inner)
    spill = tmp_path / "spill"
    spill.mkdir()
    idx = strata.build(inner, "pgm", tmp_path / "i.pgm")
    for algo, inn in (("smj", shuffled_inner), ("inlj", idx)):
        ext = strata.join(outer, inn, algo, memory="1M", spill_dir=spill)
        lrn = strata.join(outer, inn, algo, memory="1M", spill_dir=spill, sort="learned")
        assert lrn["count"] == ext["count"] == want, algo
        assert lrn["checksum"] == ext["checksum"], algo
        assert (ext["sort"], lrn["sort"]) == ("external", "learned"), algo
        assert lrn["partitions"] >= 2 and lrn["spill_bytes_written"] >= 16 * len(outer), lrn
        assert list(spill.iterdir()) == [], algo
    # Sorted inputs are not sorted again; hash joins sort nothing.
    assert strata.join(np.sort(outer), inner, "smj", sort="learned")["sort"] is None
    assert strata.join(outer, inner, "hash", sort="learned")["sort"] is None
    with pytest.raises(strata.InvalidInputError, match="sort must be"):
        strata.join(outer, inner, "smj", sort="quick")
