//! Blocks fetched and written per role (Lan et al. Table 4: inner and leaf
//! blocks per operation), counted by the [`Pager`](super::Pager) for every
//! page-based structure on it, plus the structure modifications (SMOs) the
//! owner reports.
//!
//! These are *logical* fetches: a page served by the page cache in front of
//! the file is counted here too (as Lan counts blocks with no buffer pool);
//! what reached the device is in [`IoStats`](crate::storage::IoStats).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde_json::{Value, json};

/// What a page is to its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A node above the records (B+-tree inner node, segment directory, model
    /// node).
    Inner,
    /// A page holding records (leaf, data node, segment, insert buffer).
    Leaf,
    /// Pager bookkeeping: free pages, the checkpoint page.
    Other,
}

/// Counters of one pager (shared by its clones).
#[derive(Debug, Default)]
pub struct BlockCounts {
    inner_read: AtomicU64,
    leaf_read: AtomicU64,
    other_read: AtomicU64,
    inner_written: AtomicU64,
    leaf_written: AtomicU64,
    other_written: AtomicU64,
    smo: AtomicU64,
}

impl BlockCounts {
    /// Counts `pages` pages fetched in the role `role`.
    #[inline]
    pub fn read(&self, role: Role, pages: u64) {
        match role {
            Role::Inner => &self.inner_read,
            Role::Leaf => &self.leaf_read,
            Role::Other => &self.other_read,
        }
        .fetch_add(pages, Relaxed);
    }

    /// Counts `pages` pages written in the role `role`.
    #[inline]
    pub fn written(&self, role: Role, pages: u64) {
        match role {
            Role::Inner => &self.inner_written,
            Role::Leaf => &self.leaf_written,
            Role::Other => &self.other_written,
        }
        .fetch_add(pages, Relaxed);
    }

    /// Counts one structure modification (a split, a node expansion, a
    /// resegmentation, a level merge: whatever the owner's format calls one).
    #[inline]
    pub fn smo(&self) {
        self.smo.fetch_add(1, Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> BlockSnapshot {
        BlockSnapshot {
            inner_read: self.inner_read.load(Relaxed),
            leaf_read: self.leaf_read.load(Relaxed),
            other_read: self.other_read.load(Relaxed),
            inner_written: self.inner_written.load(Relaxed),
            leaf_written: self.leaf_written.load(Relaxed),
            other_written: self.other_written.load(Relaxed),
            smo: self.smo.load(Relaxed),
        }
    }
}

/// A copy of [`BlockCounts`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockSnapshot {
    /// Inner pages fetched.
    pub inner_read: u64,
    /// Leaf pages fetched.
    pub leaf_read: u64,
    /// Bookkeeping pages fetched.
    pub other_read: u64,
    /// Inner pages written.
    pub inner_written: u64,
    /// Leaf pages written.
    pub leaf_written: u64,
    /// Bookkeeping pages written.
    pub other_written: u64,
    /// Structure modifications.
    pub smo: u64,
}

impl BlockSnapshot {
    /// The counts since `before`.
    pub fn since(&self, before: &BlockSnapshot) -> BlockSnapshot {
        BlockSnapshot {
            inner_read: self.inner_read.saturating_sub(before.inner_read),
            leaf_read: self.leaf_read.saturating_sub(before.leaf_read),
            other_read: self.other_read.saturating_sub(before.other_read),
            inner_written: self.inner_written.saturating_sub(before.inner_written),
            leaf_written: self.leaf_written.saturating_sub(before.leaf_written),
            other_written: self.other_written.saturating_sub(before.other_written),
            smo: self.smo.saturating_sub(before.smo),
        }
    }

    /// As JSON (the `blocks` entry of an index's stats `extra`).
    pub fn to_json(&self) -> Value {
        json!({
            "inner_read": self.inner_read,
            "leaf_read": self.leaf_read,
            "other_read": self.other_read,
            "inner_written": self.inner_written,
            "leaf_written": self.leaf_written,
            "other_written": self.other_written,
            "smo": self.smo,
        })
    }

    /// Parses [`BlockSnapshot::to_json`]'s output; `None` if a field is
    /// missing.
    pub fn from_json(v: &Value) -> Option<BlockSnapshot> {
        let f = |k: &str| v.get(k).and_then(Value::as_u64);
        Some(BlockSnapshot {
            inner_read: f("inner_read")?,
            leaf_read: f("leaf_read")?,
            other_read: f("other_read")?,
            inner_written: f("inner_written")?,
            leaf_written: f("leaf_written")?,
            other_written: f("other_written")?,
            smo: f("smo")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_role_and_round_trips_json() {
        let c = BlockCounts::default();
        c.read(Role::Inner, 2);
        c.read(Role::Leaf, 1);
        c.read(Role::Other, 3);
        c.written(Role::Leaf, 4);
        c.written(Role::Inner, 5);
        c.smo();
        let before = BlockSnapshot {
            inner_read: 1,
            ..Default::default()
        };
        let s = c.snapshot().since(&before);
        assert_eq!(
            s,
            BlockSnapshot {
                inner_read: 1,
                leaf_read: 1,
                other_read: 3,
                inner_written: 5,
                leaf_written: 4,
                other_written: 0,
                smo: 1
            }
        );
        assert_eq!(BlockSnapshot::from_json(&s.to_json()), Some(s));
        assert_eq!(BlockSnapshot::from_json(&json!({"smo": 1})), None);
    }
}
