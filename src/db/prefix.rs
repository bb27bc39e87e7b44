//! A view of a directory restricted to the files whose names start with a
//! prefix: how each static generation keeps its index files (`data.run`,
//! `layer-*.bin`, `strata-index.json`) in the store's flat directory.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;

use crate::storage::{Directory, PassThrough};

/// Files `NAME` of this view are the files `PREFIX + NAME` of the inner
/// directory.
#[derive(Debug, Clone)]
pub(super) struct PrefixDirectory<D> {
    inner: D,
    prefix: String,
}

impl<D> PrefixDirectory<D> {
    /// A view of `inner` with `prefix`.
    pub(super) fn new(inner: D, prefix: impl Into<String>) -> Self {
        PrefixDirectory {
            inner,
            prefix: prefix.into(),
        }
    }
}

/// A handle to the directory a view shows: shared or borrowed.
pub(super) trait DirHandle: Send + Sync + Debug {
    /// The directory.
    fn dir(&self) -> &dyn Directory;
}

impl DirHandle for Arc<dyn Directory> {
    fn dir(&self) -> &dyn Directory {
        self.as_ref()
    }
}

impl DirHandle for &dyn Directory {
    fn dir(&self) -> &dyn Directory {
        *self
    }
}

impl<D: DirHandle> PassThrough for PrefixDirectory<D> {
    fn inner(&self) -> &dyn Directory {
        self.inner.dir()
    }

    fn map_name<'n>(&self, name: &'n str) -> Cow<'n, str> {
        Cow::Owned(format!("{}{name}", self.prefix))
    }

    fn unmap_name(&self, inner_name: String) -> Option<String> {
        inner_name.strip_prefix(&self.prefix).map(str::to_string)
    }

    fn describe_wrapped(&self) -> String {
        format!("{}/{}*", self.inner.dir().describe(), self.prefix)
    }
}

#[cfg(test)]
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
