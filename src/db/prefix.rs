//! A view of a directory restricted to the files whose names start with a
//! prefix: how each static generation keeps its index files (`data.run`,
//! `layer-*.bin`, `strata-index.json`) in the store's flat directory.

use std::fmt::Debug;
use std::ops::Deref;
use std::sync::Arc;

use crate::Result;
use crate::storage::{Directory, Storage};

/// Files `NAME` of this view are the files `PREFIX + NAME` of the inner
/// directory.
#[derive(Debug, Clone)]
pub struct PrefixDirectory<D> {
    inner: D,
    prefix: String,
}

impl<D> PrefixDirectory<D> {
    /// A view of `inner` with `prefix`.
    pub fn new(inner: D, prefix: impl Into<String>) -> Self {
        PrefixDirectory {
            inner,
            prefix: prefix.into(),
        }
    }

    fn full(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

impl<D, T> Directory for PrefixDirectory<D>
where
    D: Deref<Target = T> + Send + Sync + Debug,
    T: Directory + ?Sized,
{
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        self.inner.create(&self.full(name))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        self.inner.open(&self.full(name))
    }

    fn exists(&self, name: &str) -> bool {
        self.inner.exists(&self.full(name))
    }

    fn remove(&self, name: &str) -> Result<()> {
        self.inner.remove(&self.full(name))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.inner.rename(&self.full(from), &self.full(to))
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self
            .inner
            .list()?
            .into_iter()
            .filter_map(|n| n.strip_prefix(&self.prefix).map(str::to_string))
            .collect())
    }

    fn sync_dir(&self) -> Result<()> {
        self.inner.sync_dir()
    }

    fn describe(&self) -> String {
        format!("{}/{}*", self.inner.describe(), self.prefix)
    }

    fn total_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for name in self.list()? {
            total += self.inner.open(&self.full(&name))?.len()?;
        }
        Ok(total)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::storage::MemDirectory;

    #[test]
    fn names_are_prefixed_and_listing_is_filtered() {
        let mem = MemDirectory::new();
        mem.create("other").unwrap();
        let inner: Arc<dyn Directory> = Arc::new(mem.clone());
        let p = PrefixDirectory::new(inner, "g000001-");
        let f = p.create("data.run").unwrap();
        f.write_at(0, b"abc").unwrap();
        assert!(mem.exists("g000001-data.run"));
        assert_eq!(p.list().unwrap(), vec!["data.run".to_string()]);
        assert_eq!(p.total_bytes().unwrap(), 3);
        p.rename("data.run", "x").unwrap();
        assert!(p.exists("x") && !p.exists("data.run"));
        let borrowed = PrefixDirectory::new(&mem as &dyn Directory, "g000001-");
        assert_eq!(borrowed.list().unwrap(), vec!["x".to_string()]);
        borrowed.remove("x").unwrap();
        assert_eq!(mem.list().unwrap(), vec!["other".to_string()]);
    }
}
