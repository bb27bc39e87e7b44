//! What every owner of a journaled [`Pager`](super::Pager) keeps between
//! checkpoints ([`WriteState`]), and the root-slot codec ([`SlotWriter`],
//! [`SlotReader`]).
//!
//! The write protocol is the same for every page-based updatable kind:
//!
//! - a write runs under the owner's exclusive lock through
//!   [`WriteState::write`]: refused once the owner is poisoned; on success
//!   the owner is dirty (the next sync or close checkpoints); on error it is
//!   *poisoned*: a write failed half-way, so the pages may disagree with the
//!   root fields in memory. Reads stay correct (they see the last consistent
//!   state or the completed writes), but the owner takes no more writes and
//!   never checkpoints again: reopening rolls back to the last checkpoint;
//! - [`WriteState::sync`] checkpoints if dirty (refused when poisoned);
//! - [`WriteState::close`] (from `Drop`) checkpoints if dirty and not
//!   poisoned, logging a failure (a drop cannot return one).

use crate::format::bytes::{Cursor, put_u16, put_u32, put_u64};
use crate::{Error, Result};

use super::{ROOT_SLOT_LEN, RootSlot};

/// Dirty and poisoned flags of one pager owner, with the label its errors
/// use (e.g. `B+-tree idx/btree.db`). Keep it in the state behind the
/// owner's lock; see the module documentation for the protocol.
#[derive(Debug)]
pub struct WriteState {
    label: String,
    /// Changes since the last checkpoint.
    dirty: bool,
    /// The first error of a failed write.
    poisoned: Option<String>,
}

impl WriteState {
    /// A clean, writable state; `what` names the structure and `file` its
    /// file in error messages.
    pub fn new(what: &str, file: &str) -> WriteState {
        WriteState {
            label: format!("{what} {file}"),
            dirty: false,
            poisoned: None,
        }
    }

    /// Whether anything changed since the last checkpoint.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Records a change that the next checkpoint must capture (for a write
    /// step not run through [`WriteState::write`]).
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// [`Error::Unsupported`] once a write has failed.
    pub fn check_writable(&self) -> Result<()> {
        match &self.poisoned {
            Some(why) => Err(Error::Unsupported(format!(
                "{} is read-only after a failed write ({why}); reopen it",
                self.label
            ))),
            None => Ok(()),
        }
    }

    /// Poisons on `r`'s error (keeping the first); passes `r` on.
    pub fn poison<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            if self.poisoned.is_none() {
                self.poisoned = Some(e.to_string());
            }
        }
        r
    }

    /// Runs write step `f` on the owner's state `st`: refused when
    /// poisoned; success marks dirty, an error poisons.
    pub fn write<S, T>(st: &mut S, f: impl FnOnce(&mut S) -> Result<T>) -> Result<T>
    where
        S: AsMut<WriteState>,
    {
        st.as_mut().check_writable()?;
        let r = f(st);
        let w = st.as_mut();
        if r.is_ok() {
            w.dirty = true;
        }
        w.poison(r)
    }

    /// Runs `checkpoint` if `st` is dirty, then marks it clean; refused when
    /// poisoned, and a failed checkpoint poisons.
    pub fn sync<S>(st: &mut S, checkpoint: impl FnOnce(&mut S) -> Result<()>) -> Result<()>
    where
        S: AsMut<WriteState>,
    {
        st.as_mut().check_writable()?;
        if !st.as_mut().dirty {
            return Ok(());
        }
        let r = checkpoint(st);
        let w = st.as_mut();
        if r.is_ok() {
            w.dirty = false;
        }
        w.poison(r)
    }

    /// For `Drop`: runs `checkpoint` if `st` is dirty and not poisoned,
    /// logging a failure.
    pub fn close<S>(st: &mut S, checkpoint: impl FnOnce(&mut S) -> Result<()>)
    where
        S: AsMut<WriteState>,
    {
        let w = st.as_mut();
        if !w.dirty || w.poisoned.is_some() {
            return;
        }
        if let Err(e) = checkpoint(st) {
            log::warn!("closing {}: {e}", st.as_mut().label);
        }
    }
}

/// Writes an owner's root fields into a [`RootSlot`] one after the other
/// (little-endian); the rest stays zero. Writing past the slot is a bug of
/// the owner's layout, caught by its tests: the field is dropped.
#[derive(Debug)]
pub struct SlotWriter {
    slot: RootSlot,
    at: usize,
}

impl Default for SlotWriter {
    fn default() -> Self {
        SlotWriter::new()
    }
}

impl SlotWriter {
    /// An all-zero slot, writing from byte 0.
    pub fn new() -> SlotWriter {
        SlotWriter {
            slot: [0; ROOT_SLOT_LEN],
            at: 0,
        }
    }

    /// Appends a u64.
    pub fn u64(mut self, v: u64) -> Self {
        if self.at + 8 <= ROOT_SLOT_LEN {
            put_u64(&mut self.slot, self.at, v);
        }
        self.at += 8;
        self
    }

    /// Appends a u32.
    pub fn u32(mut self, v: u32) -> Self {
        if self.at + 4 <= ROOT_SLOT_LEN {
            put_u32(&mut self.slot, self.at, v);
        }
        self.at += 4;
        self
    }

    /// Appends a u16.
    pub fn u16(mut self, v: u16) -> Self {
        if self.at + 2 <= ROOT_SLOT_LEN {
            put_u16(&mut self.slot, self.at, v);
        }
        self.at += 2;
        self
    }

    /// The slot.
    pub fn finish(self) -> RootSlot {
        debug_assert!(self.at <= ROOT_SLOT_LEN, "root fields overflow the slot");
        self.slot
    }
}

/// Reads root fields from a [`RootSlot`] in the order [`SlotWriter`] wrote
/// them; a field past the slot reads as 0.
#[derive(Debug)]
pub struct SlotReader<'a>(Cursor<'a>);

impl<'a> SlotReader<'a> {
    /// Reads from byte 0 of `slot`.
    pub fn new(slot: &'a RootSlot) -> SlotReader<'a> {
        SlotReader(Cursor::new(slot))
    }

    /// The next u64.
    pub fn u64(&mut self) -> u64 {
        self.0.u64().unwrap_or(0)
    }

    /// The next u32.
    pub fn u32(&mut self) -> u32 {
        self.0.u32().unwrap_or(0)
    }

    /// The next u16.
    pub fn u16(&mut self) -> u16 {
        self.0.u16().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owner {
        w: WriteState,
        checkpoints: u32,
    }

    impl AsMut<WriteState> for Owner {
        fn as_mut(&mut self) -> &mut WriteState {
            &mut self.w
        }
    }

    fn owner() -> Owner {
        Owner {
            w: WriteState::new("test tree", "t.db"),
            checkpoints: 0,
        }
    }

    fn checkpoint(o: &mut Owner) -> Result<()> {
        o.checkpoints += 1;
        Ok(())
    }

    #[test]
    fn a_write_dirties_and_sync_checkpoints_once() {
        let mut o = owner();
        WriteState::sync(&mut o, checkpoint).unwrap();
        assert_eq!(o.checkpoints, 0, "nothing to checkpoint");
        assert_eq!(WriteState::write(&mut o, |_| Ok(7)).unwrap(), 7);
        assert!(o.w.is_dirty());
        WriteState::sync(&mut o, checkpoint).unwrap();
        WriteState::sync(&mut o, checkpoint).unwrap();
        assert_eq!(o.checkpoints, 1);
        WriteState::close(&mut o, checkpoint);
        assert_eq!(o.checkpoints, 1, "clean at close");
    }

    #[test]
    fn a_failed_write_poisons_and_nothing_checkpoints_after_it() {
        let mut o = owner();
        WriteState::write(&mut o, |_| Ok(())).unwrap();
        let e = WriteState::write(&mut o, |_| -> Result<()> { Err(Error::invalid("disk full")) });
        assert!(e.is_err());
        let msg = WriteState::write(&mut o, |_| Ok(())).unwrap_err().to_string();
        assert!(
            msg.contains("test tree t.db is read-only") && msg.contains("disk full"),
            "{msg}"
        );
        assert!(WriteState::sync(&mut o, checkpoint).is_err());
        WriteState::close(&mut o, checkpoint);
        assert_eq!(o.checkpoints, 0, "a poisoned owner never checkpoints");
    }

    #[test]
    fn a_failed_checkpoint_poisons() {
        let mut o = owner();
        WriteState::write(&mut o, |_| Ok(())).unwrap();
        assert!(WriteState::sync(&mut o, |_| Err(Error::invalid("fsync"))).is_err());
        assert!(o.w.check_writable().is_err());
    }

    #[test]
    fn slot_fields_round_trip_in_order() {
        let s = SlotWriter::new().u64(1 << 40).u32(7).u16(3).u64(9).finish();
        let mut r = SlotReader::new(&s);
        assert_eq!((r.u64(), r.u32(), r.u16(), r.u64()), (1 << 40, 7, 3, 9));
        assert_eq!(r.u64(), 0, "unwritten fields read 0");
    }
}
