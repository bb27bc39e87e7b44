//! Tests of the pager: allocation order, freeing and reuse, counts,
//! checkpoints across a crash, corrupt pages as typed errors, and a property
//! test of random allocate/free sequences against a model.

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::storage::{AlignedBuf, Directory, MemDirectory};

const ID: FileId = FileId {
    magic: u64::from_le_bytes(*b"PAGERTST"),
    version: 3,
    what: "pager test file",
};
const PS: usize = 4096;

fn create(dir: &MemDirectory) -> (Pager, Checkpoint) {
    let f = dir.create("p.db").unwrap();
    dir.sync_dir().unwrap();
    Pager::create(f, &IoContext::default(), ID, PS).unwrap()
}

/// Loads, checks and opens the file as an owner does.
fn reopen(dir: &MemDirectory) -> Result<(Pager, Checkpoint)> {
    let raw = dir.open("p.db")?;
    let cp = Checkpoint::load(raw.as_ref(), &ID)?;
    cp.check_file(raw.as_ref())?;
    Ok((Pager::open(raw, &IoContext::default(), ID, cp.page_size)?, cp))
}

/// Writes a page marked with `tag` as page `page`.
fn write_tagged(p: &Pager, page: u64, tag: u8) {
    let mut buf = AlignedBuf::zeroed(PS);
    buf.fill(tag);
    p.write_page(Role::Leaf, page, &buf).unwrap();
}

fn free_list(p: &Pager, space: &PageSpace) -> Result<Vec<u64>> {
    let mut pages = Vec::new();
    let mut buf = AlignedBuf::zeroed(PS);
    p.walk_free_list(space, &mut buf, |f| {
        pages.push(f);
        Ok(())
    })?;
    Ok(pages)
}

#[test]
fn allocates_from_the_free_list_then_the_end() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    assert_eq!(cp.space, PageSpace::new());
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    assert_eq!(p.allocate(&mut space, 4, &mut buf).unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(space.page_count, 5);
    for page in 1..5 {
        write_tagged(&p, page, page as u8);
    }
    p.free(&mut space, 2, &mut buf).unwrap();
    p.free(&mut space, 4, &mut buf).unwrap();
    assert_eq!((space.free_head, space.free_pages), (4, 2));
    assert_eq!(free_list(&p, &space).unwrap(), vec![4, 2]);
    // Last freed first, then the end of the file.
    assert_eq!(p.allocate(&mut space, 3, &mut buf).unwrap(), vec![4, 2, 5]);
    assert_eq!(
        space,
        PageSpace {
            page_count: 6,
            free_head: NO_PAGE,
            free_pages: 0
        }
    );
    assert_eq!(p.allocate(&mut space, 0, &mut buf).unwrap(), Vec::<u64>::new());
    // Freeing the checkpoint page or a page beyond the file is refused.
    for bad in [META_PAGE, 6, u64::MAX] {
        assert!(matches!(
            p.free(&mut space, bad, &mut buf),
            Err(Error::InvalidInput(_))
        ));
    }
    assert_eq!(space.free_pages, 0);
}

#[test]
fn reads_and_writes_are_counted() {
    let dir = MemDirectory::new();
    let f = dir.create("p.db").unwrap();
    let io = IoContext::default();
    let (p, cp) = Pager::create(f, &io, ID, PS).unwrap();
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 2, &mut buf).unwrap();
    write_tagged(&p, 1, 7);
    let before = io.stats.snapshot();
    p.read_page(Role::Leaf, 1, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 7));
    let d = io.stats.snapshot().since(&before);
    assert_eq!((d.read_calls, d.pages_read), (1, 1));
}

#[test]
fn checkpoint_survives_a_crash_and_later_changes_do_not() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 3, &mut buf).unwrap();
    for page in 1..4 {
        write_tagged(&p, page, 0x10 + page as u8);
    }
    p.free(&mut space, 2, &mut buf).unwrap();
    let mut root = [0u8; ROOT_SLOT_LEN];
    root[0] = 42;
    root[ROOT_SLOT_LEN - 1] = 9;
    let synced = Checkpoint {
        page_size: PS,
        root,
        space,
        build_id: 0,
        number: 0,
    };
    p.checkpoint(&synced).unwrap();
    // Changes after the checkpoint: reuse the free page, grow, no checkpoint.
    p.allocate(&mut space, 2, &mut buf).unwrap();
    write_tagged(&p, 2, 0xEE);
    write_tagged(&p, 4, 0xEE);
    write_tagged(&p, 3, 0xEE);
    dir.crash();
    let (p, cp) = reopen(&dir).unwrap();
    assert_eq!(cp, synced);
    assert_eq!(free_list(&p, &cp.space).unwrap(), vec![2]);
    p.read_page(Role::Leaf, 3, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0x13), "page 3 as of the checkpoint");
    // A checkpoint of another page size is refused.
    let other = Checkpoint {
        page_size: 8192,
        ..synced
    };
    assert!(matches!(p.checkpoint(&other), Err(Error::InvalidInput(_))));
}

#[test]
fn a_crash_before_the_first_checkpoint_leaves_the_empty_file() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 5, &mut buf).unwrap();
    write_tagged(&p, 5, 1);
    dir.crash();
    let (_, cp2) = reopen(&dir).unwrap();
    assert_eq!(cp2, cp);
}

#[test]
fn corrupt_free_pages_are_typed_errors() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 3, &mut buf).unwrap();
    p.free(&mut space, 1, &mut buf).unwrap();
    p.free(&mut space, 3, &mut buf).unwrap();
    // A flipped byte in the head free page: its checksum fails.
    dir.file("p.db").unwrap().corrupt_byte(3 * PS as u64 + 100);
    let before = space;
    let err = p.allocate(&mut space, 1, &mut buf).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert_eq!(space, before, "a failed allocation changes nothing");
    assert!(free_list(&p, &space).unwrap_err().is_corruption());
    // A page of another type on the list.
    write_tagged(&p, 3, 0);
    assert!(p.allocate(&mut space, 1, &mut buf).unwrap_err().is_corruption());
    // A head outside the file.
    let mut wild = PageSpace {
        free_head: 99,
        ..space
    };
    assert!(p.allocate(&mut wild, 1, &mut buf).unwrap_err().is_corruption());
    assert!(free_list(&p, &wild).unwrap_err().is_corruption());
    // A list longer than counted.
    p.free(&mut space, 2, &mut buf).unwrap(); // 2 -> 3 (corrupt), fine for the count check
    let short = PageSpace {
        free_pages: 0,
        ..space
    };
    assert!(free_list(&p, &short).unwrap_err().is_corruption());
    let mut short2 = short;
    assert!(p.allocate(&mut short2, 1, &mut buf).unwrap_err().is_corruption());
}

#[test]
fn bad_checkpoint_pages_are_typed_errors() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    let f = dir.file("p.db").unwrap();
    // Another owner's magic and version.
    let other = FileId { magic: 1, ..ID };
    assert!(matches!(
        Checkpoint::load(f.as_ref(), &other),
        Err(Error::BadMagic {
            expected: "pager test file",
            ..
        })
    ));
    let newer = FileId { version: 4, ..ID };
    assert!(matches!(
        Checkpoint::load(f.as_ref(), &newer),
        Err(Error::UnsupportedVersion {
            found: 3,
            supported: 4,
            ..
        })
    ));
    // The checkpoint counts pages the file does not hold.
    let big = Checkpoint {
        space: PageSpace {
            page_count: 3,
            ..cp.space
        },
        ..cp
    };
    p.checkpoint(&big).unwrap();
    assert!(matches!(reopen(&dir), Err(Error::Truncated { .. })));
    // A flipped byte in the root slot: the checksum fails.
    p.checkpoint(&cp).unwrap();
    f.corrupt_byte(40);
    assert!(reopen(&dir).unwrap_err().is_corruption());
    // A file shorter than a page.
    f.set_len(100).unwrap();
    assert!(matches!(reopen(&dir), Err(Error::Truncated { .. })));
    // A page cache of another page size.
    let io = IoContext {
        cache: Some(std::sync::Arc::new(crate::storage::PageCache::new(2, 8192))),
        ..IoContext::default()
    };
    assert!(matches!(
        Pager::open(dir.open("p.db").unwrap(), &io, ID, PS),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn checkpoint_page_layout() {
    // Bytes 16..32 identify the file, 32..72 are the root slot, 72..96 the
    // page space (docs/format/pager.md).
    let mut root = [0u8; ROOT_SLOT_LEN];
    for (i, b) in root.iter_mut().enumerate() {
        *b = i as u8 + 1;
    }
    let cp = Checkpoint {
        page_size: PS,
        root,
        space: PageSpace {
            page_count: 7,
            free_head: 5,
            free_pages: 2,
        },
        build_id: 0,
        number: 0,
    };
    let mut page = vec![0xFFu8; PS];
    cp.encode(&ID, &mut page);
    assert_eq!(&page[16..24], b"PAGERTST");
    assert_eq!(&page[24..28], &3u32.to_le_bytes());
    assert_eq!(&page[28..32], &(PS as u32).to_le_bytes());
    assert_eq!(&page[32..72], &root);
    assert_eq!(&page[72..80], &7u64.to_le_bytes());
    assert_eq!(&page[80..88], &5u64.to_le_bytes());
    assert_eq!(&page[88..96], &2u64.to_le_bytes());
    assert!(page[96..].iter().all(|&b| b == 0));
    assert_eq!(page[4], 1, "page type FileHeader");
}

#[derive(Debug, Clone)]
enum Op {
    Allocate(usize),
    /// Free the in-use page at this index (modulo the pages in use).
    Free(usize),
    /// Checkpoint, crash, reopen.
    Reboot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..5).prop_map(Op::Allocate),
        4 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::Reboot),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random allocate/free sequences against a model: no page is handed out
    /// twice, freed pages are reused (last freed first) before the file
    /// grows, the counts match, and a checkpoint reopens to the same state.
    #[test]
    fn allocate_and_free_match_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        let dir = MemDirectory::new();
        let (mut p, cp) = create(&dir);
        let mut space = cp.space;
        let mut buf = AlignedBuf::zeroed(PS);
        let mut in_use: Vec<u64> = Vec::new();
        let mut free: Vec<u64> = Vec::new(); // a stack: last freed on top
        let mut end = 1u64;
        for op in ops {
            match op {
                Op::Allocate(k) => {
                    let got = p.allocate(&mut space, k, &mut buf).unwrap();
                    let mut want = Vec::new();
                    for _ in 0..k {
                        match free.pop() {
                            Some(f) => want.push(f),
                            None => {
                                want.push(end);
                                end += 1;
                            }
                        }
                    }
                    prop_assert_eq!(&got, &want);
                    for &g in &got {
                        prop_assert!(g != META_PAGE && !in_use.contains(&g), "page {} handed out twice", g);
                        write_tagged(&p, g, 0xAB);
                    }
                    in_use.extend(got);
                }
                Op::Free(i) => {
                    if in_use.is_empty() {
                        continue;
                    }
                    let page = in_use.swap_remove(i % in_use.len());
                    p.free(&mut space, page, &mut buf).unwrap();
                    free.push(page);
                }
                Op::Reboot => {
                    let cp = Checkpoint { page_size: PS, root: [7; ROOT_SLOT_LEN], space, build_id: 0, number: 0 };
                    p.checkpoint(&cp).unwrap();
                    dir.crash();
                    let (p2, cp2) = reopen(&dir).unwrap();
                    prop_assert_eq!(cp2, cp);
                    p = p2;
                }
            }
            prop_assert_eq!(space.page_count, end);
            prop_assert_eq!(space.free_pages, free.len() as u64);
            let walked = free_list(&p, &space).unwrap();
            let want: Vec<u64> = free.iter().rev().copied().collect();
            prop_assert_eq!(walked, want);
            let all: HashSet<u64> = in_use.iter().chain(free.iter()).copied().collect();
            prop_assert_eq!(all.len() as u64 + 1, space.page_count, "every page is in use or free");
        }
    }
}

/// The build id survives every checkpoint; the pure decoder agrees with
/// the loader.
#[test]
fn build_id_is_kept_by_checkpoints() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    let cp = Checkpoint { build_id: 99, ..cp };
    p.checkpoint(&cp).unwrap();
    let (_, back) = reopen(&dir).unwrap();
    assert_eq!(back, cp);
    let mut page = AlignedBuf::zeroed(PS);
    cp.encode(&ID, &mut page);
    assert_eq!(Checkpoint::decode(&page, &ID, "p.db").unwrap(), cp);
    assert!(Checkpoint::decode(&page[..100], &ID, "p.db").is_err());
}

/// Issue 16, failure 6: a page count whose size overflows
/// `page_count * page_size`, in a checkpoint with a valid checksum, is
/// corruption (the size saturated before); an inconsistent free list too.
#[test]
fn huge_page_count_in_a_sealed_checkpoint_is_corruption() {
    let dir = MemDirectory::new();
    let (p, cp) = create(&dir);
    for page_count in [u64::MAX, u64::MAX / 4096 + 1, 1 << 40] {
        let huge = Checkpoint {
            space: PageSpace {
                page_count,
                ..cp.space
            },
            ..cp
        };
        // `checkpoint` seals page 0 with its checksum.
        p.checkpoint(&huge).unwrap();
        let e = reopen(&dir).unwrap_err();
        if page_count > u64::MAX / PS as u64 {
            assert!(
                matches!(e, Error::Corruption { page: 0, .. }),
                "{page_count}: {e}"
            );
        } else {
            assert!(matches!(e, Error::Truncated { .. }), "{page_count}: {e}");
        }
    }
    for (free_head, free_pages) in [(0, 3), (2, 0), (u64::MAX, 1), (1, u64::MAX)] {
        let bad = Checkpoint {
            space: PageSpace {
                page_count: 4,
                free_head,
                free_pages,
            },
            ..cp
        };
        p.checkpoint(&bad).unwrap();
        assert!(
            reopen(&dir).unwrap_err().is_corruption(),
            "{free_head} {free_pages}"
        );
    }
}

// ---------------------------------------------------------- rollback journal

/// Opens `p.db` in `dir` for writing with its journal, as an owner does.
fn open_j(dir: &MemDirectory) -> Result<(Pager, Checkpoint, Recovery)> {
    let d: Arc<dyn Directory> = Arc::new(dir.clone());
    let raw = d.open("p.db")?;
    let (p, cp, r) = Pager::open_journaled(d, "p.db", raw.clone(), &IoContext::default(), ID)?;
    cp.check_file(raw.as_ref())?;
    Ok((p, cp, r))
}

/// A checkpoint's state as the file holds it: the checkpoint and pages
/// `1 .. page_count`.
type FileState = (Checkpoint, Vec<Vec<u8>>);

fn state_of(p: &Pager, cp: &Checkpoint) -> FileState {
    let mut buf = AlignedBuf::zeroed(PS);
    let pages = (1..cp.space.page_count)
        .map(|pg| {
            p.read_page(Role::Leaf, pg, &mut buf).unwrap();
            buf.to_vec()
        })
        .collect();
    (*cp, pages)
}

fn tagged(tag: u8, pages: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(PS * pages);
    buf.fill(tag);
    buf
}

/// Four checkpoint intervals of appends (one two-page write), overwrites of
/// pages of the last checkpoint (one two-page write), a free and its reuse;
/// `acked` is the number of the last checkpoint that returned `Ok`, `snap`
/// sees each.
fn journal_workload(dir: &MemDirectory, acked: &mut u64, snap: &mut dyn FnMut(FileState)) -> Result<()> {
    let (p, mut cp, _) = open_j(dir)?;
    let mut buf = AlignedBuf::zeroed(PS);
    for round in 0..4u8 {
        let mut space = cp.space;
        let new = p.allocate(&mut space, 2, &mut buf)?;
        if new.get(1).copied() == new.first().map(|f| f + 1) {
            p.write_page(Role::Leaf, new[0], &tagged(10 * round + 1, 2))?;
        } else {
            for &pg in &new {
                p.write_page(Role::Leaf, pg, &tagged(10 * round + 1, 1))?;
            }
        }
        p.write_page(Role::Leaf, 1, &tagged(10 * round + 2, 2))?;
        p.write_page(
            Role::Leaf,
            4.min(space.page_count - 1),
            &tagged(10 * round + 3, 1),
        )?;
        if round == 2 {
            p.free(&mut space, 2, &mut buf)?;
        }
        let next = Checkpoint {
            space,
            root: [round + 1; ROOT_SLOT_LEN],
            ..cp
        };
        p.checkpoint(&next)?;
        cp = Checkpoint {
            number: cp.number + 1,
            ..next
        };
        *acked = cp.number;
        snap(state_of(&p, &cp));
    }
    Ok(())
}

/// A file with its empty checkpoint durable; the mutating calls made so far.
fn journal_setup() -> (MemDirectory, u64) {
    let dir = MemDirectory::new();
    drop(create(&dir));
    dir.crash();
    let before = dir.mutating_calls();
    (dir, before)
}

/// Power cut after every mutating call of writes and checkpoints (journal
/// appends and syncs, in-place writes, the data sync, page 0, the journal
/// reset), crashed with and without torn writes: the file always reopens
/// exactly at the last acknowledged checkpoint or the one in flight.
#[test]
fn crash_at_every_step_reopens_at_a_checkpoint() {
    let (dir, before) = journal_setup();
    let mut states = vec![state_of(
        &open_j(&dir).unwrap().0,
        &Checkpoint::load(dir.open("p.db").unwrap().as_ref(), &ID).unwrap(),
    )];
    let mut acked = 0;
    journal_workload(&dir, &mut acked, &mut |s| states.push(s)).unwrap();
    assert_eq!(acked, 4);
    let calls = dir.mutating_calls() - before;
    let (mut at_acked, mut at_next, mut restored) = (0, 0, 0);
    for k in 0..=calls {
        for tear in [None, Some(k), Some(k + 1_000)] {
            let (dir, _) = journal_setup();
            dir.cut_power_after(k);
            let mut acked = 0;
            let res = journal_workload(&dir, &mut acked, &mut |_| {});
            assert_eq!(res.is_ok(), k == calls, "cut after {k} of {calls}");
            match tear {
                None => dir.crash(),
                Some(seed) => dir.crash_torn(seed),
            }
            let what = format!("cut after call {k} of {calls}, tear {tear:?}");
            let (p, cp, rec) = open_j(&dir).unwrap_or_else(|e| panic!("{what}: {e}"));
            restored += rec.pages_restored;
            assert!(
                cp.number == acked || cp.number == acked + 1,
                "{what}: at {}",
                cp.number
            );
            if cp.number == acked {
                at_acked += 1;
            } else {
                at_next += 1;
            }
            assert!(
                states[cp.number as usize] == state_of(&p, &cp),
                "{what}: pages differ"
            );
            // The journal is empty and the file writable again.
            assert_eq!(
                dir.file("p.db-journal").map_or(0, |f| f.contents().len()),
                0,
                "{what}"
            );
        }
    }
    eprintln!(
        "journal crash points: {} ({calls} calls x 3 crash modes): {at_acked} at the acknowledged checkpoint, \
         {at_next} at the one in flight, {restored} page images restored",
        3 * (calls + 1)
    );
    assert!(
        at_next > 0 && at_acked > 0 && restored > 0,
        "{at_acked} {at_next} {restored}"
    );
}

/// The journal's cost is deterministic: one append and one sync per write
/// call that first touches pages of the last checkpoint (page 0's image
/// rides on the first), none for pages appended since, one sync to empty it.
#[test]
fn journal_writes_are_counted() {
    let (dir, _) = journal_setup();
    let d: Arc<dyn Directory> = Arc::new(dir.clone());
    let raw = d.open("p.db").unwrap();
    let io = IoContext::default();
    let (p, cp, _) = Pager::open_journaled(d, "p.db", raw, &io, ID).unwrap();
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 4, &mut buf).unwrap();
    p.write_page(Role::Leaf, 1, &tagged(1, 4)).unwrap();
    let cp = Checkpoint { space, ..cp };
    p.checkpoint(&cp).unwrap();
    let s = io.stats.snapshot();
    assert_eq!(
        (s.journal_writes, s.journal_syncs),
        (1, 2),
        "only page 0 journaled"
    );
    io.stats.reset();
    for pg in [1, 2, 3, 1, 2] {
        p.write_page(Role::Leaf, pg, &tagged(2, 1)).unwrap();
    }
    p.allocate(&mut space, 1, &mut buf).unwrap();
    p.write_page(Role::Leaf, 5, &tagged(2, 1)).unwrap();
    p.checkpoint(&Checkpoint { space, ..cp }).unwrap();
    let s = io.stats.snapshot();
    assert_eq!((s.journal_writes, s.journal_syncs), (3, 4));
    assert_eq!(s.journal_bytes, 40 + 4 * (PS as u64 + 12));
    assert_eq!(
        Checkpoint::load(dir.open("p.db").unwrap().as_ref(), &ID)
            .unwrap()
            .number,
        2
    );
}

/// A journaled file whose checkpoint 1 holds pages `1 ..= n`, each filled
/// with 1s; the pager and that checkpoint (number 1).
fn journaled_with_pages(n: usize) -> (MemDirectory, Pager, Checkpoint) {
    let (dir, _) = journal_setup();
    let (p, cp, _) = open_j(&dir).unwrap();
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, n, &mut buf).unwrap();
    p.write_page(Role::Leaf, 1, &tagged(1, n)).unwrap();
    let cp = Checkpoint {
        space,
        number: 1,
        ..cp
    };
    p.checkpoint(&cp).unwrap();
    (dir, p, cp)
}

/// A journal of an earlier checkpoint (its reset lost) is ignored: applying
/// it would roll back pages of later checkpoints.
#[test]
fn stale_journal_is_ignored() {
    let (dir, p, cp) = journaled_with_pages(2);
    p.write_page(Role::Leaf, 1, &tagged(2, 1)).unwrap();
    let stale = dir.file("p.db-journal").unwrap().contents();
    assert!(stale.len() > 40);
    p.checkpoint(&cp).unwrap();
    p.write_page(Role::Leaf, 1, &tagged(3, 1)).unwrap();
    p.checkpoint(&cp).unwrap();
    drop(p);
    // Put back the journal that protected checkpoint 1.
    let j = dir.open("p.db-journal").unwrap();
    j.write_at(0, &stale).unwrap();
    j.sync().unwrap();
    dir.crash();
    let (p, cp, rec) = open_j(&dir).unwrap();
    assert_eq!((cp.number, rec.pages_restored, rec.ignored), (3, 0, true));
    let (_, pages) = state_of(&p, &cp);
    assert_eq!(pages[0], vec![3u8; PS], "page 1 keeps checkpoint 3's image");
    assert_eq!(pages[1], vec![1u8; PS]);
}

/// A journal whose last record is torn (cut short, or a flipped byte)
/// applies up to its last valid record.
#[test]
fn torn_journal_tail_applies_up_to_the_last_valid_record() {
    for cut in [true, false] {
        let (dir, p, _) = journaled_with_pages(3);
        for pg in 1..4 {
            p.write_page(Role::Leaf, pg, &tagged(2, 1)).unwrap();
        }
        drop(p);
        // Damage the record of page 3 (as if its append was torn; the
        // in-place write of page 3 then cannot have been issued, but the
        // test keeps it to see which records were applied).
        let j = dir.file("p.db-journal").unwrap();
        let len = j.contents().len() as u64;
        if cut {
            dir.open("p.db-journal").unwrap().set_len(len - 100).unwrap();
        } else {
            j.corrupt_byte(len - 2_000);
        }
        let (p, cp, rec) = open_j(&dir).unwrap();
        assert_eq!(
            (cp.number, rec.pages_restored),
            (1, 3),
            "cut {cut}: page 0, 1 and 2"
        );
        let (_, pages) = state_of(&p, &cp);
        assert_eq!(pages[0], vec![1u8; PS]);
        assert_eq!(pages[1], vec![1u8; PS]);
        assert_eq!(pages[2], vec![2u8; PS], "page 3's torn record is not applied");
    }
}

/// Page 0 torn while a checkpoint writes it: it fails its checksum, the
/// journal holds its image, recovery restores the previous checkpoint.
/// Without the journal the file is refused, never misread.
#[test]
fn page_zero_torn_during_checkpoint_is_restored() {
    let (dir, p, _) = journaled_with_pages(2);
    p.write_page(Role::Leaf, 2, &tagged(2, 1)).unwrap();
    drop(p);
    let data = dir.file("p.db").unwrap();
    data.corrupt_byte(100); // the checkpoint write of page 0, torn
    let (p, cp, rec) = open_j(&dir).unwrap();
    assert_eq!((cp.number, rec.pages_restored), (1, 2));
    assert_eq!(state_of(&p, &cp).1, vec![vec![1u8; PS], vec![1u8; PS]]);
    drop(p);
    // The same tear with the journal lost: a typed error.
    let (p, _, _) = open_j(&dir).unwrap();
    p.write_page(Role::Leaf, 2, &tagged(3, 1)).unwrap();
    drop(p);
    dir.file("p.db").unwrap().corrupt_byte(100);
    dir.remove("p.db-journal").unwrap();
    assert!(matches!(open_j(&dir), Err(Error::Corruption { .. })));
}

/// A read-only user sees whether recovery is pending (and refuses the
/// file then); a checkpoint clears it.
#[test]
fn read_only_users_see_a_pending_journal() {
    let (dir, _) = journal_setup();
    let (p, cp, _) = open_j(&dir).unwrap();
    let raw = dir.open("p.db").unwrap();
    assert!(!Pager::journal_pending(&dir, "p.db", raw.as_ref(), &ID).unwrap());
    let mut space = cp.space;
    let mut buf = AlignedBuf::zeroed(PS);
    p.allocate(&mut space, 1, &mut buf).unwrap();
    p.checkpoint(&Checkpoint { space, ..cp }).unwrap();
    p.write_page(Role::Leaf, 1, &tagged(1, 1)).unwrap();
    assert!(Pager::journal_pending(&dir, "p.db", raw.as_ref(), &ID).unwrap());
    p.checkpoint(&Checkpoint { space, ..cp }).unwrap();
    assert!(!Pager::journal_pending(&dir, "p.db", raw.as_ref(), &ID).unwrap());
}
