//! Deterministic data and workload generators.
