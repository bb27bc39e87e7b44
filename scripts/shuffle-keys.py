#!/usr/bin/env python3
"""Writes a SOSD key file's keys in a random order (an unsorted relation for
`strata join --outer-unsorted/--inner-unsorted`).

Usage: shuffle-keys.py IN.keys OUT.keys [SEED]
The permutation is numpy's for SEED (default 1); the header (the count) is
kept. The file is read whole into memory (8 bytes a key).
"""
import sys

import numpy as np


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) == 4 else 1
    keys = np.fromfile(src, dtype="<u8")
    if len(keys) == 0 or int(keys[0]) != len(keys) - 1:
        sys.exit(f"{src}: not a SOSD key file of u64 keys")
    body = keys[1:]
    np.random.default_rng(seed).shuffle(body)
    with open(dst, "wb") as f:
        f.write(keys[:1].tobytes())
        f.write(body.tobytes())


if __name__ == "__main__":
    main()
