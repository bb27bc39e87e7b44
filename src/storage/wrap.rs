//! One pass-through [`Directory`]: a wrapper forwards every call to an inner
//! directory and overrides only what it changes.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;

use super::{DirLock, Directory, LockMode, Storage};
use crate::Result;

/// A directory made from an inner one: every [`Directory`] method forwards to
/// [`inner`](PassThrough::inner), through hooks that map file names, wrap
/// opened storages, and replace the directory sync or description. A type
/// implementing `PassThrough` is a [`Directory`] (blanket implementation) and
/// overrides only the hooks it needs.
///
/// Contract of the name hooks: `unmap_name(map_name(n)) == Some(n)` for
/// every name `n`, and `unmap_name` returns `None` for inner files the
/// wrapper does not show.
pub trait PassThrough: Send + Sync + Debug {
    /// The directory every call goes to.
    fn inner(&self) -> &dyn Directory;

    /// The inner name of this directory's file `name` (default: the same).
    fn map_name<'n>(&self, name: &'n str) -> Cow<'n, str> {
        Cow::Borrowed(name)
    }

    /// The name of the inner file `inner_name` in this directory, or `None`
    /// if this directory does not show it (default: the same name).
    fn unmap_name(&self, inner_name: String) -> Option<String> {
        Some(inner_name)
    }

    /// Wraps a storage the inner directory created or opened (default: as is).
    fn wrap_storage(&self, storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
        storage
    }

    /// [`Directory::sync_dir`] (default: the inner directory's).
    fn sync_inner_dir(&self) -> Result<()> {
        self.inner().sync_dir()
    }

    /// [`Directory::rename`] of inner names (default: the inner directory's).
    fn rename_inner(&self, from: &str, to: &str) -> Result<()> {
        self.inner().rename(from, to)
    }

    /// [`Directory::describe`] (default: the inner directory's).
    fn describe_wrapped(&self) -> String {
        self.inner().describe()
    }
}

impl<W: PassThrough> Directory for W {
    fn create(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Ok(self.wrap_storage(self.inner().create(&self.map_name(name))?))
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Ok(self.wrap_storage(self.inner().open(&self.map_name(name))?))
    }

    fn open_cached(&self, name: &str) -> Result<Arc<dyn Storage>> {
        Ok(self.wrap_storage(self.inner().open_cached(&self.map_name(name))?))
    }

    fn exists(&self, name: &str) -> bool {
        self.inner().exists(&self.map_name(name))
    }

    fn remove(&self, name: &str) -> Result<()> {
        self.inner().remove(&self.map_name(name))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        self.rename_inner(&self.map_name(from), &self.map_name(to))
    }

    fn list(&self) -> Result<Vec<String>> {
        Ok(self
            .inner()
            .list()?
            .into_iter()
            .filter_map(|n| self.unmap_name(n))
            .collect())
    }

    fn sync_dir(&self) -> Result<()> {
        self.sync_inner_dir()
    }

    fn describe(&self) -> String {
        self.describe_wrapped()
    }

    fn lock(&self, mode: LockMode) -> Result<DirLock> {
        self.inner().lock(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemDirectory;

    /// Overrides nothing: a plain view of the inner directory.
    #[derive(Debug)]
    struct Same(MemDirectory);

    impl PassThrough for Same {
        fn inner(&self) -> &dyn Directory {
            &self.0
        }
    }

    /// Hides files starting with `_` and upper-cases nothing else: shows that
    /// name hooks apply to every call.
    #[derive(Debug)]
    struct Hidden(MemDirectory);

    impl PassThrough for Hidden {
        fn inner(&self) -> &dyn Directory {
            &self.0
        }
        fn map_name<'n>(&self, name: &'n str) -> Cow<'n, str> {
            Cow::Owned(format!("_{name}"))
        }
        fn unmap_name(&self, inner_name: String) -> Option<String> {
            inner_name.strip_prefix('_').map(str::to_string)
        }
        fn describe_wrapped(&self) -> String {
            format!("{}/_*", self.0.describe())
        }
    }

    #[test]
    fn defaults_forward_every_call() {
        let mem = MemDirectory::new();
        let d = Same(mem.clone());
        d.create("a").unwrap().write_at(0, b"xyz").unwrap();
        assert!(d.exists("a") && mem.exists("a"));
        d.rename("a", "b").unwrap();
        assert_eq!(d.list().unwrap(), mem.list().unwrap());
        assert_eq!(d.open("b").unwrap().len().unwrap(), 3);
        assert_eq!(d.open_cached("b").unwrap().len().unwrap(), 3);
        assert_eq!(d.total_bytes().unwrap(), 3);
        d.sync_dir().unwrap();
        assert_eq!(d.describe(), mem.describe());
        d.remove("b").unwrap();
        assert!(mem.list().unwrap().is_empty());
    }

    #[test]
    fn name_hooks_apply_to_every_call() {
        let mem = MemDirectory::new();
        mem.create("plain").unwrap();
        let d = Hidden(mem.clone());
        d.create("a").unwrap().write_at(0, b"12").unwrap();
        assert!(mem.exists("_a") && d.exists("a") && !d.exists("plain"));
        d.rename("a", "b").unwrap();
        assert_eq!(d.list().unwrap(), vec!["b".to_string()]);
        assert_eq!(d.total_bytes().unwrap(), 2);
        assert!(d.describe().ends_with("/_*"));
        assert_eq!(d.open_cached("b").unwrap().len().unwrap(), 2);
        assert!(d.open_cached("plain").is_err());
        d.remove("b").unwrap();
        assert_eq!(mem.list().unwrap(), vec!["plain".to_string()]);
    }
}
