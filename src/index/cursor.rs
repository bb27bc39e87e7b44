//! Cursors: reading an index in key order from any key on, a page at a time.
//!
//! A [`Cursor`] is what scans, merges and joins read through: [`Cursor::seek`]
//! positions it at a key's lower bound, [`Cursor::next`] returns records in
//! ascending key order. Kinds over pages read one more page only when the
//! records already read run out, never the whole range up front;
//! [`Cursor::next_batch`] lets a kind read the pages a known number of records
//! needs in fewer calls (the data-run kinds read them in one).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::{Index, Record};
use crate::Result;

/// An ordered cursor over the records of an index.
///
/// A new cursor is positioned before the first record (as after
/// `seek(0)`, without reading anything yet). A cursor borrows its index; it
/// holds no lock between calls, so writers are not blocked by it. On an
/// updatable kind, records written while a cursor is open may or may not be
/// seen, but the keys it returns are always strictly increasing.
/// Errors (I/O, a page failing its checksum) are returned by the call that
/// met them; the cursor's position after an error is unspecified until the
/// next [`Cursor::seek`].
pub trait Cursor {
    /// Positions the cursor before the first record whose key is `>= key`.
    /// Kinds over pages read the pages that locate the key here (the same
    /// pages a [`Index::lower_bound`] reads to find it) and no more.
    fn seek(&mut self, key: u64) -> Result<()>;

    /// The record under the cursor, moving past it; `None` past the last
    /// record (and on every later call until the next seek). Reads at most
    /// one page (or one leaf) when the records read so far are used up.
    fn next(&mut self) -> Result<Option<Record>>;

    /// Appends to `out` the next records, up to `count`, as repeated
    /// [`Cursor::next`] calls would return them, and returns how many it
    /// appended (fewer than `count` only at the end). Kinds may read the
    /// pages this needs in fewer, larger read calls than `next` would.
    fn next_batch(&mut self, count: usize, out: &mut Vec<Record>) -> Result<usize> {
        let mut n = 0;
        while n < count {
            match self.next()? {
                Some(r) => out.push(r),
                None => break,
            }
            n += 1;
        }
        Ok(n)
    }
}

/// A cursor over any [`Index`] that answers each [`Cursor::next`] with one
/// [`Index::lower_bound`] call: the fallback for kinds without a cursor of
/// their own (it reads what a lower-bound lookup reads, per record).
#[derive(Debug)]
pub struct LowerBoundCursor<'a, I: ?Sized> {
    index: &'a I,
    /// Lower bound of the next record; `None` past the end.
    next_key: Option<u64>,
}

impl<'a, I: Index + ?Sized> LowerBoundCursor<'a, I> {
    /// A cursor over `index`, before its first record.
    pub fn new(index: &'a I) -> Self {
        LowerBoundCursor {
            index,
            next_key: Some(0),
        }
    }
}

impl<I: Index + ?Sized> Cursor for LowerBoundCursor<'_, I> {
    fn seek(&mut self, key: u64) -> Result<()> {
        self.next_key = Some(key);
        Ok(())
    }

    fn next(&mut self) -> Result<Option<Record>> {
        let Some(key) = self.next_key else {
            return Ok(None);
        };
        let r = self.index.lower_bound(key)?;
        self.next_key = r.and_then(|(k, _)| k.checked_add(1));
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Cursor, LowerBoundCursor};
    use crate::Result;
    use crate::index::{self, BuildOptions, OpenOptions, Records};
    use crate::storage::{Directory, MemDirectory};

    #[test]
    fn lower_bound_cursor_walks_and_reseeks() -> Result<()> {
        let keys: Vec<u64> = (0..700u64).map(|i| i * 3).chain([u64::MAX]).collect();
        let dir: Arc<dyn Directory> = Arc::new(MemDirectory::new());
        let spec = "binary".parse()?;
        index::registry().build_in(
            &spec,
            Records::ranked(&keys),
            dir.clone(),
            &BuildOptions::default(),
        )?;
        let idx = index::registry().open_in(dir, &OpenOptions::default())?;
        let mut c = LowerBoundCursor::new(idx.as_ref());
        assert_eq!(c.next()?, Some((0, 0)));
        c.seek(4)?;
        let mut got = Vec::new();
        assert_eq!(c.next_batch(3, &mut got)?, 3);
        assert_eq!(got, [(6, 2), (9, 3), (12, 4)]);
        c.seek(2_097)?;
        assert_eq!(c.next()?, Some((2_097, 699)));
        assert_eq!(c.next()?, Some((u64::MAX, 700)));
        assert_eq!(c.next()?, None);
        assert_eq!(c.next()?, None);
        c.seek(0)?;
        got.clear();
        assert_eq!(c.next_batch(usize::MAX, &mut got)?, keys.len());
        let want: Vec<(u64, u64)> = keys.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
        assert_eq!(got, want);
        Ok(())
    }
}
