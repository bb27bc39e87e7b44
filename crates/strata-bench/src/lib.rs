//! The strata experiment runner.
