//! Writing a table: entries into data blocks through a [`Sink`], then the
//! index, the filter, the properties and the footer.

use std::cmp::Ordering;
use std::time::Instant;

use super::block::BlockBuilder;
use super::bloom::{Bloom, hash};
use super::index::{Fences, TableIndex, build_learned};
use super::layout::{Footer, HEADER_LEN, Handles, Props, header, seal};
use super::{TableMeta, TableOptions};
use crate::lsm::key;
use crate::storage::{Directory, Sink};
use crate::{Error, Result};

/// A key for an error message: printable bytes as they are, others escaped,
/// at most 64 bytes.
pub(super) fn show(k: &[u8]) -> String {
    let s: String = k
        .iter()
        .take(64)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if k.len() > 64 {
        format!("{s}... ({} bytes)", k.len())
    } else {
        s
    }
}

/// Builds one table. Entries go in strictly increasing [`key::compare`]
/// order; the file is durable when [`finish`](TableBuilder::finish) returns.
/// Dropping the builder abandons the file (the sink's contract).
#[derive(Debug)]
pub struct TableBuilder {
    sink: Box<dyn Sink>,
    opts: TableOptions,
    block: BlockBuilder,
    handles: Handles,
    entries: u64,
    last: Vec<u8>,
    smallest: Vec<u8>,
    data_bytes: u64,
    /// `fp`: the fence keys so far.
    fences: Option<Fences>,
    /// Learned kinds: the distinct user keys back to back, where each ends,
    /// and the ordinal of each one's first entry.
    users: Vec<u8>,
    user_ends: Vec<usize>,
    firsts: Vec<u32>,
    /// Hashes of the distinct user keys (the filter).
    hashes: Vec<u64>,
}

impl TableBuilder {
    /// Starts the table `name` in `dir` (`Directory::create_sink` with the
    /// 16-byte header region reserved). Checks `opts` before any I/O.
    pub fn new(dir: &dyn Directory, name: &str, opts: &TableOptions) -> Result<TableBuilder> {
        opts.check()?;
        let sink = dir.create_sink(name, HEADER_LEN)?;
        let fences = (opts.index.kind == "fp").then(|| Fences::new(opts.index.boundary as u64, 0));
        Ok(TableBuilder {
            sink,
            opts: opts.clone(),
            block: BlockBuilder::new(opts.restart_interval),
            handles: Handles {
                firsts: vec![0],
                offsets: vec![HEADER_LEN as u64],
            },
            entries: 0,
            last: Vec::new(),
            smallest: Vec::new(),
            data_bytes: 0,
            fences,
            users: Vec::new(),
            user_ends: Vec::new(),
            firsts: Vec::new(),
            hashes: Vec::new(),
        })
    }

    /// Adds an entry. Errors ([`Error::InvalidInput`], nothing written): an
    /// internal key that does not parse or is not after the previous one in
    /// [`key::compare`] order, a key or value over the limits
    /// ([`key::check_entry`]), more than `u32::MAX - 1` entries, fence keys
    /// (`fp`) of more than 4 GiB.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = key::parse(ikey)
            .ok_or_else(|| Error::invalid(format!("{} is not an internal key", show(ikey))))?;
        key::check_entry(parsed.user_key, Some(value))?;
        if self.entries > 0 && key::compare(&self.last, ikey) != Ordering::Less {
            return Err(Error::invalid(format!(
                "table {}: internal keys out of order at entry {}: {} follows {}",
                self.sink.name(),
                self.entries,
                show(ikey),
                show(&self.last)
            )));
        }
        if self.entries >= u64::from(u32::MAX) - 1 {
            return Err(Error::invalid("a table holds fewer than 2^32 - 1 entries"));
        }
        if let Some(f) = &mut self.fences {
            if self.entries % self.opts.index.boundary as u64 == 0 {
                f.push(ikey)?;
            }
        }
        let new_user = self.entries == 0 || key::user_key(&self.last) != parsed.user_key;
        if new_user {
            self.hashes.push(hash(parsed.user_key));
            if self.fences.is_none() {
                self.users.extend_from_slice(parsed.user_key);
                self.user_ends.push(self.users.len());
                self.firsts.push(self.entries as u32);
            }
        }
        if self.entries == 0 {
            self.smallest = ikey.to_vec();
        }
        self.block.add(ikey, value);
        self.last.clear();
        self.last.extend_from_slice(ikey);
        self.entries += 1;
        self.data_bytes += (ikey.len() + value.len()) as u64;
        if self.block.size() >= self.opts.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.entries() == 0 {
            return Ok(());
        }
        let bytes = self.block.finish();
        self.sink.append(&bytes)?;
        self.handles.firsts.push(self.entries as u32);
        self.handles.offsets.push(self.sink.position());
        Ok(())
    }

    /// Entries added.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes of the file so far, with the open block and an estimate of the
    /// index and filter (the store cuts tables at a target size).
    pub fn estimated_size(&self) -> u64 {
        let index = match &self.fences {
            Some(f) => f.encode_len() as u64,
            None => 8 * self.hashes.len() as u64 / self.opts.index.boundary.max(1) as u64,
        };
        let filter = self.hashes.len() as u64 * u64::from(self.opts.bloom_bits_per_key) / 8;
        self.sink.position()
            + self.block.size() as u64
            + index
            + filter
            + 12 * self.handles.firsts.len() as u64
    }

    /// Writes the index, filter, properties and footer and makes the file
    /// durable. An empty table is an error ([`Error::InvalidInput`]); so is
    /// an index that cannot be built.
    pub fn finish(mut self) -> Result<TableMeta> {
        if self.entries == 0 {
            return Err(Error::invalid(format!(
                "table {}: a table needs at least one entry",
                self.sink.name()
            )));
        }
        self.flush_block()?;
        let name = self.sink.name().to_string();
        let n = self.entries;
        let started = Instant::now();
        let index = match &mut self.fences {
            Some(f) => {
                f.set_entries(n);
                f.encode()
            }
            None => build_learned(&self.opts.index, &self.users, &self.user_ends, &self.firsts, n)?,
        };
        let train_nanos = started.elapsed().as_nanos() as u64;
        let index_bytes = TableIndex::decode(&index, n, &name)?.memory_bytes() + self.handles.memory_bytes();
        let (filter, filter_bytes) = if self.opts.bloom_bits_per_key > 0 {
            let b = Bloom::build(&self.hashes, self.opts.bloom_bits_per_key);
            (b.encode(), b.memory_bytes())
        } else {
            (Vec::new(), 0)
        };
        let props = Props {
            entries: n,
            data_bytes: self.data_bytes,
            restart_interval: self.opts.restart_interval as u32,
            boundary: self.opts.index.boundary as u32,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            kind: self.opts.index.kind.clone(),
            smallest: self.smallest.clone(),
            largest: self.last.clone(),
        };
        let mut sections = [(0u64, 0u64); 4];
        for (s, payload) in sections
            .iter_mut()
            .zip([self.handles.encode(), index, filter, props.encode()])
        {
            *s = (self.sink.position(), payload.len() as u64);
            self.sink.append(&seal(payload))?;
        }
        let footer = Footer {
            build_id: self.opts.build_id,
            sections,
        };
        self.sink.append(&footer.encode())?;
        let file_size = self.sink.position();
        self.sink.finish(&header())?;
        Ok(TableMeta {
            file_size,
            entries: n,
            smallest: props.smallest,
            largest: props.largest,
            data_bytes: self.data_bytes,
            index_bytes,
            filter_bytes,
            train_nanos,
        })
    }
}
