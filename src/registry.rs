//! The standard registry: every index kind this build knows, and the
//! functions that build and open index directories by kind name with it.
//!
//! The kinds are defined on different rungs (see `docs/architecture.md`):
//! `index` defines `binary`, `btree` and the layered kinds, `tune` the kind
//! `air`, `db` the hybrid store `db`. None of them may import a module above
//! it, so the list that names them all lives here, above them all. A
//! program that adds kinds of its own (a benchmark's peers) builds its own
//! [`Registry`] from [`standard`] and more.
//!
//! ```no_run
//! use strata::index::{BuildOptions, IndexSpec, OpenOptions};
//!
//! # fn main() -> strata::Result<()> {
//! let keys: Vec<u64> = (0..10_000).map(|i| i * 3).collect();
//! let spec: IndexSpec = "pgm:epsilon=64".parse()?;
//! strata::registry::build(&spec, &keys, "pgm.idx".as_ref(), &BuildOptions::default())?;
//! let idx = strata::registry::open("pgm.idx".as_ref(), &OpenOptions::default())?;
//! assert_eq!(idx.get(30)?, Some(10));
//! # Ok(())
//! # }
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::Arc;

use crate::Result;
pub use crate::index::Registry;
use crate::index::{BuildOptions, BuildReport, Index, IndexKind, IndexSpec, OpenOptions, Records};
use crate::storage::Directory;

/// Every kind of this build, in `strata list` order: `index`'s kinds
/// (`binary`, `btree`, the layered kinds), then `air`, then `db`, then `lsm`.
pub fn standard() -> Registry {
    crate::tune::registry()
        .with(&crate::db::DbKind)
        .with(&crate::lsm::kind::LsmKind)
}

/// The kinds of the [`standard`] registry, in order.
pub fn kinds() -> Vec<&'static dyn IndexKind> {
    standard().kinds().to_vec()
}

/// The kind named `kind` in the [`standard`] registry; an
/// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the known kinds
/// if there is none.
pub fn find(kind: &str) -> Result<&'static dyn IndexKind> {
    standard().find(kind)
}

/// Builds `spec` over `keys` (values: their ranks) into the directory at
/// `path` (created if needed; an existing index there is replaced), with the
/// [`standard`] registry. See [`Registry::build`].
pub fn build(spec: &IndexSpec, keys: &[u64], path: &Path, opts: &BuildOptions) -> Result<BuildReport> {
    standard().build(spec, keys, path, opts)
}

/// Builds `spec` over records with explicit values into the directory at
/// `path`, with the [`standard`] registry. See [`Registry::build_records`].
pub fn build_records(
    spec: &IndexSpec,
    records: Records<'_>,
    path: &Path,
    opts: &BuildOptions,
) -> Result<BuildReport> {
    standard().build_records(spec, records, path, opts)
}

/// Builds `spec` over `records` into `dir`, with the [`standard`] registry.
/// See [`Registry::build_in`].
pub fn build_in(
    spec: &IndexSpec,
    records: Records<'_>,
    dir: Arc<dyn Directory>,
    opts: &BuildOptions,
) -> Result<BuildReport> {
    standard().build_in(spec, records, dir, opts)
}

/// Opens the index directory at `path`, whatever its kind in the
/// [`standard`] registry.
pub fn open(path: &Path, opts: &OpenOptions) -> Result<Box<dyn Index>> {
    standard().open(path, opts)
}

/// Opens the index in `dir`, whatever its kind in the [`standard`] registry.
pub fn open_in(dir: Arc<dyn Directory>, opts: &OpenOptions) -> Result<Box<dyn Index>> {
    standard().open_in(dir, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::BuildOptions;

    /// The order `strata list` printed before the registry moved above
    /// `index`, `tune` and `db`.
    #[test]
    fn standard_kinds_keep_their_order() {
        let names: Vec<&str> = kinds().iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "binary",
                "btree",
                "btree-ld",
                "fiting",
                "dpgm",
                "lipp",
                "alex",
                "zonemap",
                "btree-static",
                "leco-zonemap",
                "leco-zonemap-d",
                "gap-zonemap-d",
                "pgm",
                "pgm-disk",
                "pgm-disk-cpr",
                "rs",
                "rs-disk",
                "rmi",
                "fiting-static",
                "air",
                "db",
                "lsm",
            ]
        );
    }

    /// Each layer's registry holds its own kinds and those below, none above.
    #[test]
    fn lower_registries_hold_lower_kinds() {
        let index = crate::index::registry();
        assert!(index.find("pgm").is_ok() && index.find("btree").is_ok());
        assert!(index.find("air").is_err() && index.find("db").is_err());
        let tune = crate::tune::registry();
        assert!(tune.find("air").is_ok() && tune.find("db").is_err());
        // `db` and `lsm` above it.
        assert_eq!(tune.kinds().len() + 2, standard().kinds().len());
    }

    /// `strata list` prints [`Registry::params_of`]: every parameter a kind
    /// resolves is documented, every documented one is taken, and a spec
    /// that gives each its listed default builds the configuration a spec
    /// without parameters builds (the listed defaults are the builds').
    #[test]
    fn every_kind_documents_its_parameters_with_their_defaults() {
        use crate::index::{IndexSpec, Records};
        use crate::storage::MemDirectory;

        let reg = standard();
        let opts = BuildOptions::default();
        let keys: Vec<u64> = (0..3000).map(|i| i * 7 + 1).collect();
        let build = |spec: &IndexSpec| {
            reg.build_in(spec, Records::ranked(&keys), Arc::new(MemDirectory::new()), &opts)
                .unwrap_or_else(|e| panic!("{spec}: {e}"))
        };
        for kind in reg.kinds() {
            let name = kind.name();
            let listed = reg.params_of(name).unwrap();
            let mut names: Vec<&str> = listed.iter().map(|p| p.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), listed.len(), "{name}: a parameter listed twice");
            assert!(!names.contains(&"page"), "{name}: page is every kind's");
            assert!(listed.iter().all(|p| !p.meaning.is_empty()), "{name}");
            let base = build(&IndexSpec::new(name));
            for resolved in base.config.keys() {
                assert!(
                    resolved == "page" || names.contains(&resolved.as_str()),
                    "{name} takes {resolved}, which its params() does not list"
                );
            }
            let mut spec = IndexSpec::new(name);
            for p in &listed {
                match &p.default {
                    Some(v) => {
                        assert_eq!(base.config.get(p.name), Some(v), "{name}: {}", p.name);
                        spec = spec.with(p.name, v.clone());
                    }
                    None => {
                        // Read only when given (`page_slack`): a bad value is
                        // refused for its value, not as an unknown parameter.
                        let e = reg
                            .check_spec(&IndexSpec::new(name).with(p.name, "no-such-value"), &opts)
                            .unwrap_err()
                            .to_string();
                        assert!(!e.contains("unknown parameter"), "{name}: {}: {e}", p.name);
                    }
                }
            }
            // Through the text form, as a user writes it.
            let text: IndexSpec = spec.to_string().parse().unwrap();
            assert_eq!(build(&text).config, base.config, "{text}");
        }
    }

    #[test]
    fn unknown_kind_names_the_known_ones() {
        let Err(e) = find("no-such-kind") else {
            panic!("an unknown kind was found");
        };
        let msg = e.to_string();
        assert!(
            msg.contains("no-such-kind") && msg.contains("pgm") && msg.contains("db"),
            "{msg}"
        );
    }
}
