//! Range scans: one cursor per stage, merged newest-first.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::Result;

use super::Db;
use super::memtable::{MemTable, Slot};
use super::stage::StaticStage;

impl Db {
    /// Records with keys in `range`, ascending, newest value of each key,
    /// deleted keys skipped. The iterator holds one version: the static stage
    /// it started with stays readable through later merges. It sees every
    /// write acknowledged before the call and may see concurrent ones.
    pub fn range(&self, range: impl RangeBounds<u64>) -> DbRange {
        let v = self.inner.version.load_full();
        let start = match range.start_bound() {
            Bound::Included(&k) => Some(k),
            Bound::Excluded(&k) => k.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&k) => Bound::Included(k),
            Bound::Excluded(&k) => Bound::Excluded(k),
            Bound::Unbounded => Bound::Unbounded,
        };
        DbRange {
            active: MemCursor::new(v.active.clone(), start),
            frozen: v.frozen.clone().map(|f| MemCursor::new(f, start)),
            stat: StaticCursor {
                stage: v.stat.clone(),
                next: start,
                buf: Vec::new(),
                pos: 0,
            },
            end,
            done: start.is_none(),
        }
    }
}

/// A cursor over one dynamic stage, fetching slots in chunks.
struct MemCursor {
    table: Arc<MemTable>,
    next: Option<u64>,
    buf: Vec<Slot>,
    pos: usize,
}

const CURSOR_CHUNK: usize = 256;

impl MemCursor {
    fn new(table: Arc<MemTable>, start: Option<u64>) -> Self {
        MemCursor {
            table,
            next: start,
            buf: Vec::new(),
            pos: 0,
        }
    }

    fn peek(&mut self) -> Option<Slot> {
        if self.pos >= self.buf.len() {
            let from = self.next?;
            self.buf.clear();
            self.pos = 0;
            self.table.range_from(from, CURSOR_CHUNK, &mut self.buf);
            self.next = match self.buf.last() {
                Some(s) if self.buf.len() == CURSOR_CHUNK => s.key.checked_add(1),
                _ => None,
            };
        }
        self.buf.get(self.pos).copied()
    }

    fn skip(&mut self, key: u64) {
        if self.peek().is_some_and(|s| s.key == key) {
            self.pos += 1;
        }
    }
}

/// A cursor over the static stage, scanning records in chunks.
struct StaticCursor {
    stage: Option<Arc<StaticStage>>,
    next: Option<u64>,
    buf: Vec<(u64, u64)>,
    pos: usize,
}

impl StaticCursor {
    fn peek(&mut self) -> Result<Option<(u64, u64)>> {
        if self.pos >= self.buf.len() {
            let (Some(stage), Some(from)) = (&self.stage, self.next) else {
                return Ok(None);
            };
            self.buf.clear();
            self.pos = 0;
            stage.index.scan(from, CURSOR_CHUNK, &mut self.buf)?;
            self.next = match self.buf.last() {
                Some(r) if self.buf.len() == CURSOR_CHUNK => r.0.checked_add(1),
                _ => None,
            };
        }
        Ok(self.buf.get(self.pos).copied())
    }

    fn skip(&mut self, key: u64) -> Result<()> {
        if self.peek()?.is_some_and(|r| r.0 == key) {
            self.pos += 1;
        }
        Ok(())
    }
}

/// An iterator over a key range of a store (see [`Db::range`]). Yields
/// `Err` once and then ends if a read fails.
pub struct DbRange {
    active: MemCursor,
    frozen: Option<MemCursor>,
    stat: StaticCursor,
    end: Bound<u64>,
    done: bool,
}

impl DbRange {
    fn step(&mut self) -> Result<Option<(u64, u64)>> {
        loop {
            let a = self.active.peek();
            let f = self.frozen.as_mut().and_then(MemCursor::peek);
            let s = self.stat.peek()?;
            let key = [a.map(|x| x.key), f.map(|x| x.key), s.map(|x| x.0)]
                .into_iter()
                .flatten()
                .min();
            let Some(key) = key else { return Ok(None) };
            let past = match self.end {
                Bound::Included(e) => key > e,
                Bound::Excluded(e) => key >= e,
                Bound::Unbounded => false,
            };
            if past {
                return Ok(None);
            }
            // Newest stage first: writable, frozen, static.
            let value = match (a, f, s) {
                (Some(x), _, _) if x.key == key => x.value(),
                (_, Some(x), _) if x.key == key => x.value(),
                (_, _, Some(r)) => Some(r.1),
                _ => None,
            };
            self.active.skip(key);
            if let Some(c) = self.frozen.as_mut() {
                c.skip(key);
            }
            self.stat.skip(key)?;
            if let Some(v) = value {
                return Ok(Some((key, v)));
            }
            if key == u64::MAX {
                return Ok(None);
            }
        }
    }
}

impl Iterator for DbRange {
    type Item = Result<(u64, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
