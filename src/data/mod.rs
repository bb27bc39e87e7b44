//! Deterministic data and workload generators.
//!
//! Every generator is a pure function of its arguments and seed: the same
//! call gives the same keys on every machine (PCG random numbers, no
//! platform-dependent floating-point functions in the key path beyond IEEE
//! arithmetic). Keys come back sorted and strictly increasing.
//!
//! The SOSD stand-ins (`fb-like`, `osm-like`, `wiki-like`, `books-like`) are
//! described in `docs/datasets.md`, with how they are made and how their
//! segment counts compare with the real data sets.

mod dist;
mod text;
pub mod workload;

pub use dist::{Dist, fnv1a64, generate};
pub use text::{TextDist, URL_HOSTS, WORD_LEN, generate_text, write_text_keys};
pub use workload::{KeyChoice, Op, Workload, WorkloadPlan, Zipfian};
