#!/usr/bin/env python3
"""Writes the outer relation of a join experiment: a uniform random sample
(without replacement, sorted) of 1/RATIO of the keys of a SOSD key file, as
Chesetti & Pandey make the smaller table. RATIO 1 copies the file (a
self-join). With --shuffle the keys are written in a random order instead
(an unsorted table).

    join_sample.py INNER.keys RATIO SEED OUT.keys [--shuffle]
"""

import sys

import numpy as np


def main() -> None:
    src, ratio, seed, dst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    raw = np.fromfile(src, dtype="<u8")
    n = int(raw[0])
    keys = raw[1 : 1 + n]
    if len(keys) != n:
        sys.exit(f"{src}: header says {n} keys, file holds {len(keys)}")
    m = max(1, n // ratio)
    rng = np.random.default_rng(seed)
    if ratio == 1:
        out = keys.copy()
    else:
        out = np.sort(keys[rng.choice(n, size=m, replace=False)])
    if "--shuffle" in sys.argv[5:]:
        rng.shuffle(out)
    tmp = dst + ".tmp"
    np.concatenate([np.array([len(out)], dtype="<u8"), out.astype("<u8")]).tofile(tmp)
    import os

    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
