//! Tests of ALEX on disk.
