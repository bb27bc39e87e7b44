//! The manifest of an index directory: `strata-index.json`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::format::DataRun;
use crate::format::page::check_page_size;
use crate::storage::Directory;
use crate::{Error, Result};

/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "strata-index.json";
/// The `magic` field every manifest carries.
pub(super) const MANIFEST_MAGIC: &str = "strata-index";
/// Largest manifest accepted (manifests are a few KiB; a larger file is not
/// one, and is not read into memory).
const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// Format version of manifests written by this build.
pub(super) const MANIFEST_VERSION: u32 = 1;

/// What an index directory holds. Written last and atomically
/// ([`Directory::publish`]: temporary file, sync, rename, directory sync
/// locally), so a directory with a manifest is complete.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    /// Always `MANIFEST_MAGIC`.
    pub magic: String,
    /// Manifest format version.
    pub format_version: u32,
    /// Index kind name.
    pub kind: String,
    /// Resolved build configuration of the kind.
    pub config: Map<String, Value>,
    /// Number of records.
    pub n: u64,
    /// Page size of the index's paged files.
    pub page_size: usize,
    /// Files of the index (besides the manifest).
    pub files: Vec<String>,
    /// Build time in seconds.
    pub build_s: f64,
    /// Kind-specific description (layers of a learned index, ...).
    #[serde(default)]
    pub description: Value,
    /// Version of strata that wrote it.
    pub strata_version: String,
    /// Random id of the build that wrote the directory (nonzero), also in
    /// the header of every file it lists; absent in manifests written
    /// before build ids (their files carry none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<u64>,
}

/// A fresh random build id: nonzero, so that 0 in a file header can mean
/// "none".
pub fn new_build_id() -> u64 {
    rand::random::<u64>().max(1)
}

impl Manifest {
    /// A manifest for a freshly built index.
    pub fn new(kind: &str, config: Map<String, Value>, n: u64, page_size: usize) -> Self {
        Manifest {
            magic: MANIFEST_MAGIC.to_string(),
            format_version: MANIFEST_VERSION,
            kind: kind.to_string(),
            config,
            n,
            page_size,
            files: Vec::new(),
            build_s: 0.0,
            description: Value::Null,
            strata_version: env!("CARGO_PKG_VERSION").to_string(),
            build_id: None,
        }
    }

    /// The build id files of this directory carry: the manifest's, or 0
    /// (none) for a manifest from before build ids.
    pub fn file_build_id(&self) -> u64 {
        self.build_id.unwrap_or(0)
    }

    /// Checks that `file`, whose header says it was written by build
    /// `found` (0: none), belongs to this directory's build.
    ///
    /// Errors: [`Error::Corruption`] naming `file` and page 0 ("built by
    /// another build") when the ids differ, including a file with an id in
    /// a directory whose manifest has none, and one without in a directory
    /// whose manifest has one.
    pub fn check_build_id(&self, file: &str, found: u64) -> Result<()> {
        let want = self.file_build_id();
        if found == want {
            return Ok(());
        }
        Err(Error::corruption(
            file,
            0,
            format!(
                "built by another build: its header has build id {}, the manifest {}",
                show_id(found),
                show_id(want)
            ),
        ))
    }

    /// Checks the checkpoint of an updatable paged file: build id and page
    /// size (its counts change with every update and are not compared).
    ///
    /// Errors: [`Error::Corruption`] naming `file`.
    pub fn check_paged(&self, file: &str, build_id: u64, page_size: usize) -> Result<()> {
        self.check_build_id(file, build_id)?;
        if page_size != self.page_size {
            return Err(Error::corruption(
                file,
                0,
                format!(
                    "checkpoint says page size {page_size}, the manifest says {}",
                    self.page_size
                ),
            ));
        }
        Ok(())
    }

    /// Checks the data run of this directory: build id, record count (the
    /// manifest's `n`) and page size.
    ///
    /// Errors: [`Error::Corruption`] naming the run's file.
    pub fn check_data_run(&self, run: &DataRun) -> Result<()> {
        let name = run.storage().name();
        let meta = run.meta();
        self.check_build_id(name, meta.build_id)?;
        self.check_count(name, "records", meta.n, self.n)?;
        self.check_count(
            name,
            "bytes per page",
            meta.page_size as u64,
            self.page_size as u64,
        )
    }

    /// Checks a count the header of `file` holds (`what`: "records",
    /// "entries", ...) against what the manifest recorded for it.
    ///
    /// Errors: [`Error::Corruption`] naming `file` and page 0.
    pub fn check_count(&self, file: &str, what: &str, found: u64, want: u64) -> Result<()> {
        if found == want {
            return Ok(());
        }
        Err(Error::corruption(
            file,
            0,
            format!("built by another build: its header says {found} {what}, the manifest {want}"),
        ))
    }

    /// Writes the manifest atomically into `dir` ([`Directory::publish`]):
    /// after a crash, `dir` holds the old manifest or this one, never a mix.
    pub fn store(&self, dir: &dyn Directory) -> Result<()> {
        let text =
            serde_json::to_vec_pretty(self).map_err(|e| Error::invalid(format!("manifest encoding: {e}")))?;
        dir.publish(MANIFEST_FILE, &text)
    }

    /// Reads and checks the manifest of `dir`.
    pub fn load(dir: &dyn Directory) -> Result<Self> {
        if !dir.exists(MANIFEST_FILE) {
            return Err(Error::NotFound(format!(
                "{} has no {MANIFEST_FILE}: not a strata index directory (or its build did not finish)",
                dir.describe()
            )));
        }
        let f = dir.open_read(MANIFEST_FILE)?;
        let file = format!("{}/{MANIFEST_FILE}", dir.describe());
        let len = f.len()?;
        if len > MAX_MANIFEST_BYTES {
            return Err(Error::corruption(
                &file,
                0,
                format!("manifest of {len} bytes, more than the {MAX_MANIFEST_BYTES} a manifest can have"),
            ));
        }
        let len = usize::try_from(len).map_err(|_| Error::corruption(&file, 0, "manifest too large"))?;
        let mut buf = vec![0u8; len];
        f.read_at(0, &mut buf)?;
        let v: Value = serde_json::from_slice(&buf)
            .map_err(|e| Error::corruption(&file, 0, format!("manifest is not valid JSON: {e}")))?;
        let magic = v.get("magic").and_then(Value::as_str).unwrap_or("");
        if magic != MANIFEST_MAGIC {
            return Err(Error::corruption(
                &file,
                0,
                format!("manifest magic is {magic:?}, expected {MANIFEST_MAGIC:?}"),
            ));
        }
        let version = v.get("format_version").and_then(Value::as_u64).unwrap_or(0);
        if version != MANIFEST_VERSION as u64 {
            return Err(Error::UnsupportedVersion {
                file,
                found: version as u32,
                supported: MANIFEST_VERSION,
            });
        }
        let m: Manifest = serde_json::from_value(v)
            .map_err(|e| Error::corruption(&file, 0, format!("manifest fields: {e}")))?;
        check_page_size(m.page_size).map_err(|_| {
            Error::corruption(
                &file,
                0,
                format!("manifest page size {} is not supported", m.page_size),
            )
        })?;
        if m.build_id == Some(0) {
            return Err(Error::corruption(&file, 0, "manifest build id is 0"));
        }
        Ok(m)
    }
}

fn show_id(id: u64) -> String {
    if id == 0 {
        "none".to_string()
    } else {
        format!("{id:#018x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemDirectory;

    #[test]
    fn store_load_and_reject_bad() {
        let dir = MemDirectory::new();
        assert!(matches!(Manifest::load(&dir), Err(Error::NotFound(_))));
        let mut m = Manifest::new("binary", Map::new(), 10, 4096);
        m.files.push("data.run".into());
        m.store(&dir).unwrap();
        assert_eq!(Manifest::load(&dir).unwrap(), m);
        let f = dir.create(MANIFEST_FILE).unwrap();
        f.write_at(0, b"{\"magic\":\"strata-index\",\"format_version\":99}")
            .unwrap();
        assert!(matches!(
            Manifest::load(&dir),
            Err(Error::UnsupportedVersion { found: 99, .. })
        ));
        let f = dir.create(MANIFEST_FILE).unwrap();
        f.write_at(0, b"not json").unwrap();
        assert!(Manifest::load(&dir).unwrap_err().is_corruption());
    }

    /// Header-derived sizes: an unsupported page size and a zero build id
    /// are corruption; build ids and counts are compared.
    #[test]
    fn page_size_build_id_and_counts_are_checked() {
        let dir = MemDirectory::new();
        let mut m = Manifest::new("binary", Map::new(), 10, 4096);
        m.build_id = Some(12);
        m.store(&dir).unwrap();
        let back = Manifest::load(&dir).unwrap();
        assert_eq!(back.build_id, Some(12));
        assert!(back.check_build_id("data.run", 12).is_ok());
        let e = back.check_build_id("data.run", 13).unwrap_err();
        assert!(e.to_string().contains("another build"), "{e}");
        assert!(back.check_build_id("data.run", 0).unwrap_err().is_corruption());
        assert!(
            back.check_count("data.run", "records", 11, 10)
                .unwrap_err()
                .is_corruption()
        );
        for (page_size, build_id) in [
            (usize::MAX, Some(1)),
            (1 << 40, Some(1)),
            (4095, Some(1)),
            (4096, Some(0)),
        ] {
            let mut bad = m.clone();
            bad.page_size = page_size;
            bad.build_id = build_id;
            bad.store(&dir).unwrap();
            assert!(Manifest::load(&dir).unwrap_err().is_corruption(), "{page_size}");
        }
        // A manifest from before build ids: files without one belong to it.
        let mut old = m.clone();
        old.build_id = None;
        old.store(&dir).unwrap();
        let text = String::from_utf8(dir.file(MANIFEST_FILE).unwrap().contents()).unwrap();
        assert!(!text.contains("build_id"), "{text}");
        let old = Manifest::load(&dir).unwrap();
        assert!(old.check_build_id("data.run", 0).is_ok());
        assert!(old.check_build_id("data.run", 12).unwrap_err().is_corruption());
    }

    /// Fuzz regression (target `index_manifest`, 1,087,713 executions in):
    /// a float in the description reparsed to a neighbouring f64
    /// (`1.8888888888888892e+100` → `1.888888888888889e+100`), so a stored
    /// and reloaded manifest was not the one written. serde_json's
    /// `float_roundtrip` feature makes parsing exact.
    #[test]
    fn fuzz_regression_description_float_round_trips_exactly() {
        let fill = format!("1{}00", "8".repeat(98));
        let text = format!(
            "{{\"magic\":\"strata-index\",\"format_version\":1,\"kind\":\"btree\",\"config\":{{}},\
             \"n\":300,\"page_size\":4096,\"files\":[\"b.run\"],\"build_s\":5.000582303,\
             \"description\":{{\"fanout\":256,\"fill\":{fill},\"leaves\":2}},\"strata_version\":\"0.1.0\"}}"
        );
        let dir = MemDirectory::new();
        dir.create(MANIFEST_FILE)
            .unwrap()
            .write_at(0, text.as_bytes())
            .unwrap();
        let m = Manifest::load(&dir).unwrap();
        let again = MemDirectory::new();
        m.store(&again).unwrap();
        let m2 = Manifest::load(&again).unwrap();
        assert_eq!(
            serde_json::to_string(&m2).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
    }
}
