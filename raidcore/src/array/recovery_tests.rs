//! Tests of the one recovery routine's use by reads, writes and rebuilds: what an outside review
//! of its introduction found (each failed before its fix), and the rules it relies on.
#![allow(clippy::single_range_in_vec_init)] // one range of rows is a common, meaningful list here

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::csum::UNKNOWN_ENTRY;
use super::*;
use crate::device::{FaultMember, MemMember};
use crate::layout::{LayoutParams, Level};
use crate::rng::SplitMix64 as Rng;

/// An array of `level` over `n` members in memory (4 MiB each, checksums on), filled with
/// the random bytes of `seed` and flushed: (array, members, the bytes written).
fn filled(
    level: Level,
    n: usize,
    chunk: u64,
    seed: u64,
) -> (Array, Vec<Arc<FaultMember>>, Vec<u8>) {
    let (a, faults) = super::tests::make(&LayoutParams::with_defaults(level, n, chunk), 4 << 20);
    let mut model = vec![0u8; a.size() as usize];
    Rng(seed).fill(&mut model);
    a.write(&model, 0).unwrap();
    a.flush().unwrap();
    (a, faults, model)
}

use super::tests::{flip, right_or_error};

/// Makes the checksum entry of the 4 KiB block at `member_off` of `slot` unknown (as a fold
/// does for a page it could not read).
/// The resync of an unclean stop over member rows `rows`.
fn resync(a: &Array, rows: std::ops::Range<u64>) -> crate::jobs::scrub::ScrubReport {
    use crate::jobs::scrub::{self, Mode};
    scrub::run(a, &[rows], Mode::Resync, None, &mut |_, _| {}).unwrap()
}

/// A RAID6 of `n` members (4 KiB chunks, filled from `seed`) with the member of slot `gone`
/// failed and then, as a write the crash cut after its data block landed would leave it, data
/// block 1 of `row` holding 0x5a with its entry while the parities hold the row before it.
/// Returns the array and the model (with the new block).
fn raid6_with_a_cut_data_block(
    n: usize,
    seed: u64,
    row: u64,
    gone: impl Fn(&Array) -> usize,
) -> (Array, Vec<u8>) {
    let (a, _faults, mut model) = filled(Level::Raid6, n, 4096, seed);
    let d = a.layout().data_per_row() as u64;
    a.fail_member(gone(&a), "test").unwrap();
    let new = vec![0x5au8; 4096];
    a.repair_write(
        a.layout().data_slot(row, 1),
        a.judged_good(&new),
        row,
        0,
        WriteKind::Data,
    )
    .unwrap();
    let at = ((row * d + 1) * 4096) as usize;
    model[at..at + 4096].copy_from_slice(&new);
    (a, model)
}

/// A scrub (with `repair`, scrub --repair) over member rows `rows`.
fn scrub_rows(
    a: &Array,
    rows: std::ops::Range<u64>,
    repair: bool,
) -> crate::jobs::scrub::ScrubReport {
    use crate::jobs::scrub::{self, Mode};
    scrub::run(a, &[rows], Mode::Scrub { repair }, None, &mut |_, _| {}).unwrap()
}

fn unknown_entry(a: &Array, slot: usize, member_off: u64) {
    let d = a.slots[slot].usable().unwrap();
    let s = a.csum_of(&d).unwrap();
    s.record_digests(s.block_of(member_off), &[UNKNOWN_ENTRY]);
}

/// Row 2 of a RAID5 with 8 KiB chunks: block 0 of data chunk 0 and block 1 of data chunk 1
/// corrupted (each column keeps one bad block, so each is recoverable). Returns the row's
/// logical offset and its data chunks per row.
fn two_bad_blocks_in_different_columns(a: &Array, chunk: u64) -> (u64, u64) {
    let row = 2u64;
    let d = a.layout().data_per_row() as u64;
    flip(a, a.layout().data_slot(row, 0), a.cell_offset(row, 100));
    flip(
        a,
        a.layout().data_slot(row, 1),
        a.cell_offset(row, 4096 + 100),
    );
    (row * d * chunk, d)
}

/// [`right_or_error`] for the first 4 KiB of each data chunk `data` of row `row`.
fn row_right_or_error(
    a: &Array,
    model: &[u8],
    row: u64,
    data: std::ops::Range<u64>,
    kind: Option<crate::ErrorKind>,
    when: &str,
) {
    let (d, c) = (a.layout().data_per_row() as u64, a.layout().chunk());
    let mut buf = vec![0u8; 4096];
    for i in data {
        let what = format!("data block {i} of the row{when}");
        right_or_error(a, model, (row * d + i) * c, &mut buf, kind, &what);
    }
}

/// Adds a fresh 4 MiB member named `name` (it takes the first missing slot, a rebuild
/// target).
fn add_fresh(a: &Array, name: &str) {
    let fresh: Arc<dyn Member> = Arc::new(MemMember::new(4 << 20));
    a.add(fresh, &PathBuf::from(name), None).unwrap();
}

/// [`add_fresh`], then the rebuild to its end.
fn rebuild_onto_fresh(a: &Array, name: &str) {
    add_fresh(a, name);
    crate::jobs::rebuild::run(a, &Default::default(), &mut |_, _, _| {}).unwrap();
}

fn counters(a: &Array, slot: usize) -> (u64, u64) {
    let d = a.slots[slot].usable().expect("member still in service");
    (
        d.read_errors.load(Ordering::Relaxed),
        d.csum_errors.load(Ordering::Relaxed),
    )
}

/// R1: a mirror rebuild over one unreadable sector on its only source copy. Before the change
/// the source counted 2 read errors (the chunk's whole read and the block's) and no checksum
/// error. After it, the whole chunk is read twice (fill_batch's first try, then
/// mirror_blocks) and the zero-filled unreadable block is also judged against its entry in
/// mirror_blocks and counted as a checksum error.
#[test]
fn mirror_rebuild_counts_an_unreadable_sector_once() {
    let (a, faults, _) = filled(Level::Raid1, 2, 65536, 5);
    a.fail(&MemberRef::Slot(1)).unwrap();
    let row = 3;
    faults[0].bad_block(a.cell_offset(row, 8192));
    let m = a.take_failed(&PathBuf::from("m1")).unwrap();
    a.add(m, &PathBuf::from("m1"), None).unwrap();
    let before = counters(&a, 0);
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    let after = counters(&a, 0);
    let (read, csum) = (after.0 - before.0, after.1 - before.1);
    assert_eq!(
        csum, 0,
        "an unreadable sector counted as a checksum error too (read errors {read})"
    );
    assert!(
        read <= 2,
        "one unreadable sector counted {read} read errors (2 before the change)"
    );
}

/// R2: the same, over 8 chunks with one unreadable sector each on the only source copy. Before
/// the change: 16 read errors, under READ_ERROR_LIMIT (20), and the rebuild completes with 8
/// blocks lost. After it, 3 per chunk: past the limit the last source is failed mid-rebuild
/// and the array fails.
#[test]
fn mirror_rebuild_over_a_few_bad_sectors_does_not_fail_the_last_copy() {
    let (a, faults, _) = filled(Level::Raid1, 2, 65536, 6);
    a.fail(&MemberRef::Slot(1)).unwrap();
    for row in 0..8 {
        faults[0].bad_block(a.cell_offset(row, 4096));
    }
    let m = a.take_failed(&PathBuf::from("m1")).unwrap();
    a.add(m, &PathBuf::from("m1"), None).unwrap();
    let r = crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {});
    assert!(
        a.slots[0].usable().is_some(),
        "the only source copy was failed for 8 bad sectors: {:?}, state {:?}",
        r.as_ref().err(),
        a.state()
    );
    assert!(r.is_ok(), "{:?}", r.err());
}

/// R3: reads recover a parity row per span, rebuild and scrub per 4 KiB block. RAID5, 8 KiB
/// chunks: data chunk 0 of a row fails its checksum in block 0, data chunk 1 in block 1.
/// Block by block the row is fully recoverable (each column has one bad block; scrub
/// --repair repairs both), and 4 KiB reads return the right data; a read of the whole of
/// chunk 0 calls reconstruct_span over 0..8192, where both chunks are "Bad" cells, and
/// plan::recover says Lost: the read fails.
#[test]
fn a_whole_chunk_read_recovers_what_block_reads_recover() {
    let chunk = 8192;
    let (a, _, model) = filled(Level::Raid5, 4, chunk, 7);
    let (at, _) = two_bad_blocks_in_different_columns(&a, chunk);
    // Block by block: fine (read-only open would be the same; here each read heals).
    // Whole chunk first, so nothing is healed yet.
    let mut whole = vec![0u8; chunk as usize];
    let r = a.read(&mut whole, at);
    assert!(
        r.is_ok(),
        "a read of the whole chunk fails: {}",
        r.unwrap_err()
    );
    assert!(
        whole == model[at as usize..(at + chunk) as usize],
        "wrong data"
    );
}

/// R3b: the same row, read block by block, reads right (the contrast for R3).
#[test]
fn block_reads_of_the_same_row_succeed() {
    let chunk = 8192;
    let (a, _, model) = filled(Level::Raid5, 4, chunk, 7);
    let (at, _) = two_bad_blocks_in_different_columns(&a, chunk);
    for b in 0..(2 * chunk / 4096) {
        let mut got = vec![0u8; 4096];
        a.read(&mut got, at + b * 4096).unwrap();
        assert!(got == model[(at + b * 4096) as usize..(at + (b + 1) * 4096) as usize]);
    }
}

/// R3c: the same row, a write of chunk 0's 8 KiB: the read-modify-write finds block 0
/// failing, the reconstruct attempt over 0..8192 says Lost, and the write fails (Checksum)
/// though scrub would repair the row.
#[test]
fn a_write_over_two_bad_blocks_in_different_columns_succeeds() {
    let chunk = 8192;
    let (a, _, mut model) = filled(Level::Raid5, 4, chunk, 7);
    let (at, d) = two_bad_blocks_in_different_columns(&a, chunk);
    let r = a.write(&[9u8; 8192], at).and_then(|_| a.flush());
    assert!(r.is_ok(), "the write fails: {}", r.unwrap_err());
    model[at as usize..(at + 8192) as usize].fill(9);
    for b in 0..(d * chunk / 4096) {
        let o = (at + b * 4096) as usize;
        let mut got = vec![0u8; 4096];
        let r = a.read(&mut got, o as u64);
        assert!(r.is_ok(), "block {b} of the row: {}", r.unwrap_err());
        assert!(
            got == model[o..o + 4096],
            "block {b} of the row reads wrong data"
        );
    }
}

/// R4 (left, not introduced): a write over a block failing its checksum counts the one bad
/// block twice: read_for_update counts it, then the reconstruct attempt reads it again and
/// counts it again.
#[test]
fn a_write_over_a_bad_block_counts_it_once() {
    let chunk = 65536;
    // Six members: read-modify-write (reads D0 and P) beats reconstruct-write.
    let (a, _, _) = filled(Level::Raid5, 6, chunk, 8);
    let row = 1u64;
    let d = a.layout().data_per_row() as u64;
    let s0 = a.layout().data_slot(row, 0);
    flip(&a, s0, a.cell_offset(row, 100));
    let before = counters(&a, s0).1;
    a.write(&[7u8; 4096], row * d * chunk).unwrap();
    a.flush().unwrap();
    let n = counters(&a, s0).1 - before;
    assert_eq!(n, 1, "one bad block counted {n} checksum errors");
}

/// R5 (left, not introduced): a read of an unreadable sector on a healthy RAID5 counts two
/// read errors: read_parity_row's read fails, and reconstruct_span reads the same range again
/// (read_parity_row passes only checksum failures as `bad`, not read errors).
#[test]
fn a_read_of_an_unreadable_sector_counts_it_once() {
    let chunk = 65536;
    let (a, faults, model) = filled(Level::Raid5, 4, chunk, 9);
    let row = 1u64;
    let d = a.layout().data_per_row() as u64;
    let s0 = a.layout().data_slot(row, 0);
    faults[s0].bad_block(a.cell_offset(row, 0));
    let before = counters(&a, s0).0;
    let mut got = vec![0u8; 4096];
    a.read(&mut got, row * d * chunk).unwrap();
    assert!(got == model[(row * d * chunk) as usize..(row * d * chunk + 4096) as usize]);
    let n = counters(&a, s0).0 - before;
    assert_eq!(n, 1, "one unreadable sector counted {n} read errors");
}

/// A mirror rebuild whose only source copy has unknown entries (a damaged table page) copied
/// it with fresh entries: the new copy then vouched for bytes nothing had checked, and reads
/// rewrote the source from it, so a corruption there would have been blessed on both copies.
/// Copied with unknown entries instead, the two copies then agreed and read as confirmed by
/// each other, rot included (simulator seed 30000869). The rebuilt block is poisoned: a read
/// of it fails, as a read of the lone unchecked copy did before the rebuild.
#[test]
fn a_mirror_rebuilt_from_an_unchecked_copy_does_not_vouch_for_it() {
    let (a, _faults, _) = filled(Level::Raid1, 2, 65536, 7);
    a.fail(&MemberRef::Slot(1)).unwrap();
    let row = 2;
    unknown_entry(&a, 0, a.cell_offset(row, 4096));
    let mut b = vec![0u8; 4096];
    let before = a.read(&mut b, row * 65536 + 4096).unwrap_err();
    assert_eq!(before.kind(), ErrorKind::Checksum, "{before}");
    let m = a.take_failed(&PathBuf::from("m1")).unwrap();
    a.add(m, &PathBuf::from("m1"), None).unwrap();
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    let d = a.slots[1].usable().expect("rebuilt");
    d.member.read_at(&mut b, a.cell_offset(row, 4096)).unwrap();
    let (bad, unknown) = a.csum_blocks(&d, row, a.cell_offset(row, 4096), &b);
    assert_eq!(
        (bad, unknown),
        (vec![0], vec![]),
        "the rebuilt block vouches for bytes nothing checked, or agrees with them"
    );
    let e = a.read(&mut b, row * 65536 + 4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Checksum, "{e}");
    // Its neighbours came from checked blocks and vouch for themselves.
    d.member.read_at(&mut b, a.cell_offset(row, 0)).unwrap();
    assert_eq!(
        a.csum_blocks(&d, row, a.cell_offset(row, 0), &b),
        (vec![], vec![])
    );
}

/// Sets the entry of the 4 KiB block of `slot` at member offset `member_off` to `entry`.
fn set_entry(a: &Array, slot: usize, member_off: u64, entry: super::csum::Digest) {
    let d = a.slots[slot].usable().unwrap();
    let s = a.csum_of(&d).unwrap();
    s.record_digests(s.block_of(member_off), &[entry]);
}

/// A listed block is judged by its entry like any other (row.rs `judge_blocks`), away from
/// the row start too: one whose entry its listing made match its placeholder is good, one that
/// changed since (rot) or whose entry is a rebuild's poison is bad, and a block beside it is
/// judged on its own.
#[test]
fn a_listed_block_is_judged_by_the_entry_its_listing_recorded() {
    let chunk = 8192u64;
    let (a, _faults, _) = filled(Level::Raid5, 3, chunk, 11);
    let row = 3u64;
    let slot = a.layout().data_slot(row, 0);
    let d = a.slots[slot].usable().unwrap();
    flip(&a, slot, a.cell_offset(row, 4096 + 100));
    let mut buf = vec![0u8; 4096];
    a.member_read(slot, &mut buf, row, 4096).unwrap();
    // Unlisted: the flipped block fails its entry.
    assert_eq!(a.judge_blocks(slot, &buf, row, 4096, false).0, vec![0]);
    // Listed, its entry made to match it as it lies: good.
    assert!(a.mark_lost_block(slot, row * chunk + 4096));
    a.csum_record(&d, a.cell_offset(row, 4096), Verified::listed(&buf));
    assert_eq!(
        a.judge_blocks(slot, &buf, row, 4096, false),
        (vec![], vec![])
    );
    // Poisoned: bad.
    set_entry(&a, slot, a.cell_offset(row, 4096), super::csum::LOST_ENTRY);
    assert_eq!(a.judge_blocks(slot, &buf, row, 4096, false).0, vec![0]);
    // The whole chunk, block 1 listed with its placeholder's entry: a flip in block 0 is
    // judged, and a flip of block 1 since its listing too.
    a.csum_record(&d, a.cell_offset(row, 4096), Verified::listed(&buf));
    flip(&a, slot, a.cell_offset(row, 100));
    let mut buf = vec![0u8; chunk as usize];
    a.member_read(slot, &mut buf, row, 0).unwrap();
    assert_eq!(a.judge_blocks(slot, &buf, row, 0, false).0, vec![0]);
    flip(&a, slot, a.cell_offset(row, 4096 + 200));
    a.member_read(slot, &mut buf, row, 0).unwrap();
    assert_eq!(a.judge_blocks(slot, &buf, row, 0, false).0, vec![0, 1]);
}

/// Lists the first 4 KiB block of `slot`'s cell in `row` as a listing does it: durably on the
/// list, then its entry made to match it as it lies. Returns the block as read.
fn list_as_a_listing_does(a: &Array, slot: usize, row: u64) -> Vec<u8> {
    assert!(a.mark_lost_block(slot, row * a.layout().chunk()));
    a.persist().unwrap();
    let mut b = vec![0u8; 4096];
    a.member_read(slot, &mut b, row, 0).unwrap();
    let d = a.slots[slot].usable().unwrap();
    a.csum_record(&d, a.cell_offset(row, 0), Verified::listed(&b));
    b
}

/// Simulator seed 34003322 (issue 31): a resync listed a RAID6 data block it could not decide
/// and recorded its entry as it lay (a placeholder consistent with the row); rot then hit the
/// placeholder, a member failed, and a read rebuilt that member's block from the rotten
/// placeholder, returning the rot: listed blocks were never judged by their entries. Now a
/// listed block failing the entry its listing recorded changed since, and counts as missing.
#[test]
fn a_listed_placeholder_that_rots_after_its_listing_never_feeds_a_reconstruction() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 5, chunk, 17);
    let row = 5u64;
    let listed = a.layout().data_slot(row, 0);
    let gone = a.layout().data_slot(row, 1);
    let mut b = list_as_a_listing_does(&a, listed, row);
    assert_eq!(a.judge_blocks(listed, &b, row, 0, false), (vec![], vec![]));
    // Rot of the placeholder is seen.
    flip(&a, listed, a.cell_offset(row, 100));
    a.member_read(listed, &mut b, row, 0).unwrap();
    assert_eq!(a.judge_blocks(listed, &b, row, 0, false).0, vec![0]);
    // The neighbour's member fails: its block comes back right (from P and Q, the rotten
    // placeholder counted missing), never with the rot in it.
    a.fail(&MemberRef::Slot(gone)).unwrap();
    let d_per_row = a.layout().data_per_row() as u64;
    let at = (row * d_per_row + 1) * chunk;
    let mut out = vec![0u8; chunk as usize];
    a.read(&mut out, at).unwrap();
    assert_eq!(
        out,
        model[at as usize..(at + chunk) as usize],
        "rot returned"
    );
}

/// Simulator seed 10003712 (issue 31): a RAID6 row whose checksum pages are all damaged, one
/// data block rotten and Q's member gone. The rebuild of Q could not tell which cell was wrong
/// and poisoned Q's entry, but wrote Q computed from the rotten block: with P gone too, a read
/// rebuilt P and Q from the data, found Q as read equal to its reconstruction and returned the
/// rot with no error. Now nothing vouches for the data there: with P gone and Q poisoned,
/// no redundancy is left to check its unknown entries, and the read fails. (Writing Q's
/// complement instead, tried first, fed garbage into later rebuilds' placeholders: simulator
/// seed 11000833 read 0x55 where 0x00 was written.)
#[test]
fn a_parity_block_the_rebuild_could_not_settle_never_vouches_for_rot() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 5, chunk, 13);
    let row = 3u64;
    let (p, q) = (a.layout().p_slot(row), a.layout().q_slot(row));
    a.fail(&MemberRef::Slot(q)).unwrap();
    add_fresh(&a, "new");
    // Every present cell of the row unknown, one data block rotten.
    for s in (0..5).filter(|&s| s != q) {
        unknown_entry(&a, s, a.cell_offset(row, 0));
    }
    let rotten = a.layout().data_slot(row, 1);
    flip(&a, rotten, a.cell_offset(row, 100));
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    a.fail(&MemberRef::Slot(p)).unwrap();
    let d = a.layout().data_per_row() as u64;
    let at = (row * d + 1) * chunk;
    let mut buf = vec![0u8; chunk as usize];
    right_or_error(
        &a,
        &model,
        at,
        &mut buf,
        None,
        "a degraded read of the rotten block",
    );
}

/// A member whose armed read returns flipped bytes and, before returning them, runs a hook
/// (the test fails the member there: the failure lands between the read and its judgment).
struct FailsMidRead {
    inner: MemMember,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Member for FailsMidRead {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> crate::Result<()> {
        self.inner.read_at(buf, offset)?;
        if let Some(hook) = self.hook.lock().unwrap().take() {
            buf[..8].iter_mut().for_each(|x| *x ^= 0x5a);
            hook();
        }
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> crate::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> crate::Result<()> {
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> crate::Result<()> {
        self.inner.discard(offset, len)
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Simulator seed 3000135 (issue 31): a RAID6 member returned flipped bytes for one read and
/// was failed (`raidctl fail`, in another thread) before the read's bytes were judged. The
/// judgment looked the slot's device up again, found none and judged nothing: the flipped
/// bytes reached the client as good data. Bytes are judged by the entries of the device they
/// were read from.
#[test]
fn a_read_whose_member_fails_before_its_bytes_are_judged_never_returns_them_unjudged() {
    let chunk = 8192u64;
    let n = 4;
    let sick = Arc::new(FailsMidRead {
        inner: MemMember::new(4 << 20),
        hook: std::sync::Mutex::new(None),
    });
    let members: Vec<(PathBuf, Arc<dyn Member>)> = (0..n)
        .map(|i| {
            let m: Arc<dyn Member> = if i == 1 {
                sick.clone()
            } else {
                Arc::new(MemMember::new(4 << 20))
            };
            (PathBuf::from(format!("m{i}")), m)
        })
        .collect();
    let spec = super::tests::spec_of(LayoutParams::with_defaults(Level::Raid6, n, chunk), true);
    let a = Arc::new(Array::create_on(members, &spec, &mut |_, _| {}).unwrap());
    let mut model = vec![0u8; a.size() as usize];
    Rng(17).fill(&mut model);
    a.write(&model, 0).unwrap();
    a.flush().unwrap();
    // A row whose first data chunk lies on slot 1.
    let d = a.layout().data_per_row() as u64;
    let row = (0..a.rows())
        .find(|&r| a.layout().data_slot(r, 0) == 1)
        .unwrap();
    let at = row * d * chunk;
    let weak = Arc::downgrade(&a);
    *sick.hook.lock().unwrap() = Some(Box::new(move || {
        let a = weak.upgrade().unwrap();
        a.fail(&MemberRef::Slot(1)).unwrap();
    }));
    let mut buf = vec![0u8; chunk as usize];
    right_or_error(
        &a,
        &model,
        at,
        &mut buf,
        None,
        "a flipped read of a member failed before it was judged",
    );
    assert!(!a.slot_usable(1), "the hook failed the member");
}

/// Simulator seed 7001917 (issue 31): the resync after an unclean stop met a RAID6 row with a
/// data member missing, P rotten and both parities' entries unknown (damaged table pages). It
/// took the present data's verifying for "a parity is stale", kept P and recomputed Q from
/// it: the missing block then read back as the rot, with both parities agreeing. With a data
/// block missing and no parity verifying itself, which parity is wrong cannot be told: the
/// row is left as it is and reads of the missing block fail.
#[test]
fn a_degraded_raid6_resync_never_recomputes_a_parity_from_an_unverified_one() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 5, chunk, 19);
    let row = 9u64;
    let (p, q) = (a.layout().p_slot(row), a.layout().q_slot(row));
    let gone = a.layout().data_slot(row, 0);
    a.fail_member(gone, "test").unwrap();
    unknown_entry(&a, p, a.cell_offset(row, 0));
    unknown_entry(&a, q, a.cell_offset(row, 0));
    flip(&a, p, a.cell_offset(row, 100));
    resync(&a, row..row + 1);
    let d = a.layout().data_per_row() as u64;
    let at = row * d * chunk;
    let mut buf = vec![0u8; 4096];
    right_or_error(&a, &model, at, &mut buf, None, "the missing block");
    // The other data blocks of the row verify and read right.
    for i in 1..d {
        let o = (row * d + i) * chunk;
        a.read(&mut buf, o).unwrap();
        assert!(buf[..] == model[o as usize..o as usize + 4096]);
    }
}

/// Simulator seed 29006602: RAID6 with the member holding a row's Q gone; a write the crash
/// cut after its data block (and its entry) landed left P stale. The resync kept P, which
/// matched its own (old) entry, and "recomputed" only the missing Q: nothing was written.
/// With a data member gone too, a read rebuilt that member's block from the stale P and the
/// new data: wrong data with no error. With a parity missing, the data decides.
#[test]
fn a_degraded_raid6_resync_recomputes_the_parity_left_where_a_cut_write_made_it_stale() {
    let chunk = 4096u64;
    let row = 6u64;
    let (a, model) = raid6_with_a_cut_data_block(4, 31, row, |a| a.layout().q_slot(row));
    let d = a.layout().data_per_row() as u64;
    let rep = resync(&a, row..row + 1);
    assert_eq!(rep.problems.len(), 1, "P rewritten: {:?}", rep.problems);
    a.fail_member(a.layout().data_slot(row, 0), "test").unwrap();
    row_right_or_error(&a, &model, row, 0..d, None, " with a data member gone too");
    let mut buf = vec![0u8; 4096];
    a.read(&mut buf, row * d * chunk).unwrap();
}

/// The same stale P found by a scrub instead: a scrub skipped every row with a member missing,
/// though RAID6 with one missing keeps one parity equation, and reported 0 problems. Now the
/// check reports it, the repair recomputes P from the data that verifies, and a second
/// member's loss then rebuilds right.
#[test]
fn a_scrub_of_a_degraded_raid6_checks_the_parity_left() {
    let chunk = 4096u64;
    for n in [4, 6] {
        let row = 5u64;
        let (a, model) = raid6_with_a_cut_data_block(n, 37, row, |a| a.layout().q_slot(row));
        let d = a.layout().data_per_row() as u64;
        let check = scrub_rows(&a, row..row + 1, false);
        assert_eq!(check.problems.len(), 1, "n {n}: {:?}", check.problems);
        assert_eq!(check.problems[0].slot, a.layout().p_slot(row));
        assert!(!check.problems[0].repaired);
        let fix = scrub_rows(&a, row..row + 1, true);
        assert!(
            fix.problems.len() == 1 && fix.problems[0].repaired,
            "n {n}: {:?}",
            fix.problems
        );
        let again = scrub_rows(&a, row..row + 1, false);
        assert!(again.problems.is_empty(), "n {n}: {:?}", again.problems);
        a.fail_member(a.layout().data_slot(row, 0), "test").unwrap();
        let mut buf = vec![0u8; 4096];
        a.read(&mut buf, row * d * chunk).unwrap();
        assert!(buf[..] == model[(row * d * chunk) as usize..][..4096]);
    }
}

/// With a data member missing instead, P and Q disagreeing over its block cannot say which is
/// stale: the scrub reports both, repairs neither, and writes nothing.
#[test]
fn a_scrub_of_a_degraded_raid6_reports_parities_that_disagree_over_the_missing_block() {
    for n in [4, 6] {
        let row = 5u64;
        let (a, _model) = raid6_with_a_cut_data_block(n, 43, row, |a| a.layout().data_slot(row, 0));
        let fix = scrub_rows(&a, row..row + 1, true);
        let mut slots: Vec<usize> = fix.problems.iter().map(|p| p.slot).collect();
        slots.sort_unstable();
        let mut want = vec![a.layout().p_slot(row), a.layout().q_slot(row)];
        want.sort_unstable();
        assert_eq!(slots, want, "n {n}: {:?}", fix.problems);
        assert!(fix.problems.iter().all(|p| !p.repaired) && fix.bytes_written == 0);
    }
}

/// Simulator seed 1322 (issue 31, the 1175 class): a RAID6 row with two members missing has no
/// redundancy left, and one of its data blocks, its table page damaged (entry unknown), was
/// rotten. Reads returned the rot, and the missing members' blocks rebuilt from it, as data.
/// Now both reads fail; the other blocks of the row, which verify, read right.
#[test]
fn a_row_with_no_redundancy_left_never_returns_a_block_nothing_verified() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 6, chunk, 23);
    let row = 7u64;
    let d = a.layout().data_per_row() as u64;
    let (gone, sick) = (a.layout().data_slot(row, 0), a.layout().data_slot(row, 1));
    a.fail_member(gone, "test").unwrap();
    a.fail_member(a.layout().q_slot(row), "test").unwrap();
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    flip(&a, sick, a.cell_offset(row, 100));
    row_right_or_error(&a, &model, row, 0..2, Some(crate::ErrorKind::Checksum), "");
    let mut buf = vec![0u8; 4096];
    for i in 2..d {
        let at = (row * d + i) * chunk;
        a.read(&mut buf, at).unwrap();
        assert!(buf[..] == model[at as usize..at as usize + 4096]);
    }
}

/// Issue 31 (the 1175 class): a rebuild of a RAID5 member over a column where a survivor's
/// entry is unknown (damaged table page) and nothing is left to check it wrote the target
/// from it: the row then agreed with the survivor's rot, and reads returned it as verified.
/// Now the survivor's block and the target's are listed as lost (reads fail until written).
#[test]
fn a_rebuild_over_unverifiable_cells_lists_them_instead_of_agreeing_with_them() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid5, 3, chunk, 29);
    let row = 5u64;
    let d = a.layout().data_per_row() as u64;
    let (gone, sick) = (a.layout().data_slot(row, 0), a.layout().data_slot(row, 1));
    a.fail(&MemberRef::Slot(gone)).unwrap();
    add_fresh(&a, "new");
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    flip(&a, sick, a.cell_offset(row, 100));
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    row_right_or_error(&a, &model, row, 0..d, Some(crate::ErrorKind::BadBlock), "");
    let mut buf = vec![0u8; 4096];
    // The rest of the array was rebuilt and reads right.
    let next = (row + 1) * d * chunk;
    a.read(&mut buf, next).unwrap();
    assert!(buf[..] == model[next as usize..next as usize + 4096]);
}

/// Issue 31 (the 1175 class): a write to a RAID5 row with a member missing and another data
/// block whose entry is unknown computed the new parity from that block as it lay: parity then
/// vouched for it, rot included. Now the write goes in and the unverifiable block is listed
/// (reads of it fail until it is written) rather than blessed.
#[test]
fn a_write_resting_on_unverifiable_data_lists_it_instead_of_vouching_for_it() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid5, 4, chunk, 31);
    let row = 6u64;
    let d = a.layout().data_per_row() as u64;
    let gone = a.layout().data_slot(row, 0);
    let sick = a.layout().data_slot(row, 1);
    a.fail_member(gone, "test").unwrap();
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    flip(&a, sick, a.cell_offset(row, 100));
    let at = (row * d + 2) * chunk;
    a.write(&[0x3c; 4096], at).unwrap();
    let mut buf = vec![0u8; 4096];
    a.read(&mut buf, at).unwrap();
    assert!(
        buf.iter().all(|&x| x == 0x3c),
        "the client's write reads back"
    );
    let u = (row * d + 1) * chunk;
    match a.read(&mut buf, u) {
        Err(e) => assert_eq!(e.kind(), crate::ErrorKind::BadBlock, "{e}"),
        Ok(()) => panic!(
            "the unverifiable block read back ({})",
            if buf[..] == model[u as usize..u as usize + 4096] {
                "right, unchecked"
            } else {
                "as the rot"
            }
        ),
    }
}

/// An outside attack on the rule above (RAID5, 64 KiB chunks there): a column with one
/// survivor rotten and its entry unknown, another rotten and failing its entry, and a member
/// being rebuilt. The rebuild could not settle the column and listed the failing survivor and
/// its target, but not the unchecked survivor; the target's placeholder, computed from both
/// rotten cells, then agreed with it, and the rot read back as data with the array whole.
/// Every survivor block nothing verified is listed with the column now.
#[test]
fn a_rebuild_that_cannot_settle_a_column_lists_its_unchecked_survivors_too() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid5, 4, chunk, 37);
    let row = 8u64;
    let d = a.layout().data_per_row() as u64;
    let gone = a.layout().data_slot(row, 2);
    let (unchecked, failing) = (a.layout().data_slot(row, 0), a.layout().data_slot(row, 1));
    a.fail(&MemberRef::Slot(gone)).unwrap();
    unknown_entry(&a, unchecked, a.cell_offset(row, 0));
    flip(&a, unchecked, a.cell_offset(row, 100));
    flip(&a, failing, a.cell_offset(row, 1500));
    rebuild_onto_fresh(&a, "new");
    row_right_or_error(&a, &model, row, 0..d, None, "");
}

/// An outside attack: a write to the block of a missing member in a degraded RAID5 row where
/// another data block's entry is unknown (a damaged table page, no rot). The write listed
/// that block, as it should, and put the new data in parity; but reads of the new data were
/// refused (the listed block counted as unchecked), and a rebuild then listed it too: a
/// write that succeeded was lost. A listed block is the placeholder the write's parity
/// assumed, so the new data reads back.
#[test]
fn a_write_into_a_missing_block_beside_an_unverifiable_one_reads_back() {
    let chunk = 4096u64;
    let (a, _faults, _model) = filled(Level::Raid5, 4, chunk, 41);
    let row = 10u64;
    let d = a.layout().data_per_row() as u64;
    let gone = a.layout().data_slot(row, 1);
    let sick = a.layout().data_slot(row, 0);
    a.fail(&MemberRef::Slot(gone)).unwrap();
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    let at = (row * d + 1) * chunk;
    a.write(&[0x6b; 4096], at).unwrap();
    let mut buf = vec![0u8; 4096];
    a.read(&mut buf, at).unwrap();
    assert!(
        buf.iter().all(|&x| x == 0x6b),
        "the write reads back degraded"
    );
    rebuild_onto_fresh(&a, "new");
    a.read(&mut buf, at).unwrap();
    assert!(
        buf.iter().all(|&x| x == 0x6b),
        "the write reads back after the rebuild"
    );
}

/// A second outside attack: RAID6 with two members out, a data block rotten with its entry
/// unknown. The first rebuild listed it (nothing could verify it); the second rebuild read the
/// listed block as the placeholder its row's parity assumes, rebuilt the other target from it
/// and "repaired" the block, after which the rot read back as data with no error.
#[test]
fn a_block_listed_as_unverifiable_stays_unreadable_across_rebuilds() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 5, chunk, 47);
    let row = 9u64;
    let d = a.layout().data_per_row() as u64;
    let (g1, g2) = (a.layout().data_slot(row, 0), a.layout().p_slot(row));
    let sick = a.layout().data_slot(row, 1);
    a.fail(&MemberRef::Slot(g1)).unwrap();
    a.fail(&MemberRef::Slot(g2)).unwrap();
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    flip(&a, sick, a.cell_offset(row, 5));
    for k in 0..2 {
        rebuild_onto_fresh(&a, &format!("new{k}"));
        row_right_or_error(&a, &model, row, 0..d, None, &format!(" after rebuild {k}"));
    }
}

/// Simulator seed 777000900 (issue 31, RAID10): after an unclean stop one copy of a block had
/// rotted (it fails its entry) and the other's entry was unknown (a damaged table page). No
/// copy verified by its own entry, so the resync kept the first copy, the rot, and copied it
/// over the good one. The copies hold the same data, so the rotten copy's entry vouches for
/// the other: that copy is kept and the rot rewritten from it.
#[test]
fn a_mirror_resync_takes_the_copy_another_copys_entry_vouches_for() {
    use crate::jobs::scrub::{self, Mode};
    for (level, n) in [(Level::Raid1, 2), (Level::Raid10, 4)] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(level, n, chunk, 23);
        let c = 5u64;
        let (s0, r0) = a.layout().mirror_cell(c, 0);
        let (s1, r1) = a.layout().mirror_cell(c, 1);
        flip(&a, s0, a.cell_offset(r0, 100));
        unknown_entry(&a, s1, a.cell_offset(r1, 0));
        scrub::run(
            &a,
            &[r0.min(r1)..r0.max(r1) + 1],
            Mode::Resync,
            None,
            &mut |_, _| {},
        )
        .unwrap();
        let mut buf = vec![0u8; 4096];
        a.read(&mut buf, c * chunk).unwrap();
        assert!(
            buf[..] == model[(c * chunk) as usize..(c * chunk + 4096) as usize],
            "{level:?}: the rot was kept"
        );
    }
}

/// Simulator seed 11001781 (issue 31, RAID1): after an unclean stop the one copy of a block
/// left (the other members failed or still being rebuilt) had rotted and failed its entry. The
/// resync's majority rule counted that lone copy as a majority of one, recorded a fresh entry
/// for the rot, and reads returned it. A lone copy is no majority: nothing decides, and the
/// block is listed, so reads of it fail.
#[test]
fn a_mirror_resync_never_takes_a_lone_failing_copy_as_a_majority() {
    let chunk = 8192u64;
    let (a, _faults, model) = filled(Level::Raid1, 3, chunk, 29);
    let row = 9u64;
    a.fail_member(0, "test").unwrap();
    a.fail_member(1, "test").unwrap();
    flip(&a, 2, a.cell_offset(row, 100));
    resync(&a, row..row + 1);
    let mut buf = vec![0u8; 4096];
    right_or_error(
        &a,
        &model,
        row * chunk,
        &mut buf,
        Some(crate::ErrorKind::BadBlock),
        "the rotten lone copy",
    );
    assert!(a.read(&mut buf, row * chunk).is_err(), "the rot read back");
    // The block's other half did not rot and reads right.
    a.read(&mut buf, row * chunk + 4096).unwrap();
}

/// Issue 31 (the crash test's RAID10 case 79 when the resync left such blocks as they were):
/// after an unclean stop the two copies of a block differ and both fail their entries (writes
/// the cut tore, or rot on both). Which is right cannot be told: the block is listed (durably)
/// and reads of it fail until it is written again, its copies made to agree so a scrub finds
/// the chunk consistent; a write of the whole block makes it readable again.
#[test]
fn a_mirror_block_no_copy_of_which_verifies_is_listed_and_its_copies_agree() {
    use crate::jobs::scrub::{self, Mode};
    let chunk = 8192u64;
    let (a, _faults, _model) = filled(Level::Raid1, 2, chunk, 31);
    let row = 4u64;
    flip(&a, 0, a.cell_offset(row, 100));
    flip(&a, 1, a.cell_offset(row, 200));
    let rep = resync(&a, row..row + 1);
    assert_eq!(rep.listed, 1, "{:?}", rep.problems);
    let mut buf = vec![0u8; 4096];
    let e = a.read(&mut buf, row * chunk).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::BadBlock, "{e}");
    assert_eq!(a.lost_data_ranges().len(), 1);
    let all = 0..a.rows();
    let rep = scrub::run(
        &a,
        std::slice::from_ref(&all),
        Mode::Scrub { repair: false },
        None,
        &mut |_, _| {},
    )
    .unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    // Part of the block: its rest is not known, so the write is refused (an outside attack:
    // it went in, and its bytes then read as an error).
    let e = a.write(&[5u8; 512], row * chunk + 512).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::BadBlock, "{e}");
    a.write(&[7u8; 4096], row * chunk).unwrap();
    a.read(&mut buf, row * chunk).unwrap();
    assert_eq!(buf, [7u8; 4096]);
}

/// Simulator seed 11003878 (issue 31, RAID6 N=4): during the resync after an unclean stop both
/// data blocks of a row read back rotten alike (flips that cancel in P) and failed their
/// entries; P agreed with them, Q (matching its own entry too) did not. The resync took P's
/// agreement for a write the crash cut between P and Q, recomputed Q from the rot and recorded
/// entries for it: the rot then read back with no error. The two blocks rebuilt from P and Q
/// match their own entries: that is the row.
#[test]
fn a_raid6_resync_never_takes_rot_that_cancels_in_p_for_a_write_cut_before_q() {
    let chunk = 8192u64;
    let (a, _faults, model) = filled(Level::Raid6, 4, chunk, 37);
    let row = 6u64;
    let d = a.layout().data_per_row() as u64;
    for i in 0..d as usize {
        flip(&a, a.layout().data_slot(row, i), a.cell_offset(row, 100));
    }
    resync(&a, row..row + 1);
    row_right_or_error(&a, &model, row, 0..d, None, "after the resync");
    let mut buf = vec![0u8; 4096];
    a.read(&mut buf, row * d * chunk).unwrap();
}

/// Outside attack on the mirror resync (issue 31): after kill -9, both copies of a flushed
/// block rotted alike and failed their entries; the resync took the agreeing copies for a
/// completed write whose entries lagged and recorded entries for the rot, which then read back
/// with exit 0 (RAID1 and RAID10). After a stop that was not a power cut the pending store
/// leaves no entry lagging (pending.rs), so such copies are rot: the block is listed.
#[test]
fn after_a_process_crash_copies_rotten_alike_are_never_taken_for_a_lagging_write() {
    use crate::jobs::scrub::{self, Mode};
    for (level, n) in [(Level::Raid1, 2), (Level::Raid10, 4)] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(level, n, chunk, 41);
        // As `adopt_pending` leaves it when an earlier session of this boot left its store.
        a.entries_current.store(true, Ordering::Release);
        let c = 7u64;
        let (s0, r0) = a.layout().mirror_cell(c, 0);
        let (s1, r1) = a.layout().mirror_cell(c, 1);
        flip(&a, s0, a.cell_offset(r0, 100));
        flip(&a, s1, a.cell_offset(r1, 100));
        scrub::run(
            &a,
            &[r0.min(r1)..r0.max(r1) + 1],
            Mode::Resync,
            None,
            &mut |_, _| {},
        )
        .unwrap();
        let mut buf = vec![0u8; 4096];
        right_or_error(
            &a,
            &model,
            c * chunk,
            &mut buf,
            Some(crate::ErrorKind::BadBlock),
            &format!("{level:?}: the rotten block"),
        );
        assert!(
            a.read(&mut buf, c * chunk).is_err(),
            "{level:?}: the rot read back"
        );
    }
}

/// Outside attack on the RAID6 resync (issue 31): after kill -9, two data blocks rotten alike
/// (cancelling in P) and Q failing its entry (or missing): P's agreement was taken for a
/// write the crash cut before Q, Q recomputed from the rot and the rot read back with exit 0.
/// With no entry lagging, data failing their entries are rot: the row is left undecided and
/// its failing blocks listed.
#[test]
fn after_a_process_crash_raid6_never_takes_rot_that_p_agrees_with_for_a_cut_write() {
    let chunk = 8192u64;
    let (a, _faults, model) = filled(Level::Raid6, 4, chunk, 43);
    a.entries_current.store(true, Ordering::Release);
    let row = 5u64;
    let d = a.layout().data_per_row() as u64;
    for i in 0..d as usize {
        flip(&a, a.layout().data_slot(row, i), a.cell_offset(row, 100));
    }
    flip(&a, a.layout().q_slot(row), a.cell_offset(row, 300));
    resync(&a, row..row + 1);
    row_right_or_error(&a, &model, row, 0..d, None, "after the resync");
}

/// Simulator seed 13002991 (issue 31, RAID5, table damage only: wrong data with no error): a
/// replace copied a member whose block was unreadable and listed (nothing could verify a
/// rebuild of it: a neighbour's entry was unknown). The copy got zeros there, not the
/// placeholder its row's parity assumes; reads count listed blocks as consistent with their
/// row, so a read of the neighbour (entry unknown) rebuilt it from the zeros, found it
/// differing, and wrote the wrong bytes over it. The copy now holds the placeholder.
/// RAID5 of four (8 KiB chunks): the block at `within` of row 4's data cell 1 listed (a write
/// that could not verify it did so), then unreadable on its member; data cell 0's block there
/// with its entry unknown (a damaged table page); then data cell 1's member replaced by a new
/// one. Returns the array, its model, the row, the data cells per row and data cell 1's slot.
fn replace_over_a_listed_unreadable_block(within: u64) -> (Array, Vec<u8>, u64, u64, usize) {
    let chunk = 8192u64;
    let (a, faults, model) = filled(Level::Raid5, 4, chunk, 47);
    let row = 4u64;
    let d = a.layout().data_per_row() as u64;
    let (s0, s1) = (a.layout().data_slot(row, 0), a.layout().data_slot(row, 1));
    assert!(a.mark_lost_block(s1, row * chunk + within));
    a.persist().unwrap();
    faults[s1].bad_block(a.cell_offset(row, within));
    unknown_entry(&a, s0, a.cell_offset(row, within));
    let new: Arc<dyn Member> = Arc::new(MemMember::new(4 << 20));
    a.replace(&MemberRef::Slot(s1), new, &PathBuf::from("new"), None, true)
        .unwrap();
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    (a, model, row, d, s1)
}

#[test]
fn a_replace_copies_an_unreadable_listed_block_as_the_placeholder_parity_assumes() {
    let chunk = 8192u64;
    let (a, model, row, d, _) = replace_over_a_listed_unreadable_block(0);
    let mut buf = vec![0u8; 4096];
    right_or_error(&a, &model, row * d * chunk, &mut buf, None, "data cell 0");
    // And again: a read that wrote its reconstruction would now return it.
    right_or_error(
        &a,
        &model,
        row * d * chunk,
        &mut buf,
        None,
        "data cell 0, again",
    );
}

/// After such a replace (the listed block at 4 KiB into its cell), a placeholder that rots on
/// the new member never feeds the reconstruction of its neighbour, whose entry is unknown: a
/// read returns the right bytes or an error. Written for a mutation gap (`at / c` for `at % c`
/// in `list_kept`, which records the placeholder's entry at the wrong block): the read alone
/// does not catch it (the neighbour's read fails either way, an error, not wrong data), so the
/// test also checks the placeholder's entry on the new member.
#[test]
fn a_replace_placeholder_that_rots_never_feeds_a_reconstruction() {
    let chunk = 8192u64;
    let (a, model, row, d, s1) = replace_over_a_listed_unreadable_block(4096);
    // The placeholder's entry on the new member matches the placeholder it holds.
    let dev = a.slots[s1].usable().unwrap();
    let off = a.cell_offset(row, 4096);
    let mut held = crate::buf::AlignedBuf::zeroed(4096);
    dev.member.read_at(&mut held, off).unwrap();
    let store = a.csum_of(&dev).unwrap();
    assert_eq!(
        store.expected(dev.member.as_ref(), (off - a.data_offset) / 4096, 1),
        vec![super::csum::Expect::Known(a.csum_digest(&held))],
        "the placeholder's entry"
    );
    // The placeholder rots on the new member.
    flip(&a, s1, a.cell_offset(row, 4096) + 100);
    let mut buf = vec![0u8; 4096];
    right_or_error(
        &a,
        &model,
        row * d * chunk + 4096,
        &mut buf,
        None,
        "data cell 0 beside the rotten placeholder",
    );
}

/// Simulator seed 45002276 (RAID6, wrong data with exit 0, older than issue 31's work): a
/// replace met a block its old member could not read and nothing could rebuild (another
/// member of the row missing), wrote zeros there, listed it, and gave the zeros a matching
/// entry, though the row's parity assumes other bytes. From then on the zeros counted as good
/// data: the missing member's block was rebuilt from them and read back wrong. Only a
/// placeholder the row's parity agrees with gets a matching entry now; the zeros keep the
/// entry that matches nothing, and the rebuilt member's block reads as an error (both blocks
/// of that column are gone).
#[test]
fn a_replace_never_vouches_for_zeros_written_where_its_old_member_could_not_read() {
    let chunk = 8192u64;
    let (a, faults, model) = filled(Level::Raid5, 4, chunk, 53);
    let row = 4u64;
    let d = a.layout().data_per_row() as u64;
    let (s1, s2) = (a.layout().data_slot(row, 1), a.layout().data_slot(row, 2));
    let off = a.cell_offset(row, 0);
    faults[s1].bad_block(off);
    a.fail_member(s2, "test: gone").unwrap();
    let new: Arc<dyn Member> = Arc::new(MemMember::new(4 << 20));
    a.replace(&MemberRef::Slot(s1), new, &PathBuf::from("new"), None, true)
        .unwrap();
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    assert!(
        a.is_lost_block(s1, row * chunk),
        "the unreadable block is listed"
    );
    // Data cell 2's slot gets a new member, rebuilt from the row, the listed block among it.
    let path = PathBuf::from("n2");
    a.take_failed(&a.slot_path_of(s2).unwrap());
    a.add(Arc::new(MemMember::new(4 << 20)), &path, None)
        .unwrap();
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, _, _| {}).unwrap();
    assert!(a.slot_usable(s2));
    let mut buf = vec![0u8; 4096];
    right_or_error(
        &a,
        &model,
        (row * d + 2) * chunk,
        &mut buf,
        None,
        "data cell 2",
    );
}

/// Makes the 4 KiB column at `within` of parity row `row` disagree with its parity where
/// nothing tells which cell is wrong: the first `doubtful` data cells' entries unknown, the
/// first `rotten` of them rotten.
fn disagree(a: &Array, row: u64, within: u64, doubtful: usize, rotten: usize) {
    for i in 0..doubtful {
        unknown_entry(a, a.layout().data_slot(row, i), a.cell_offset(row, within));
    }
    for i in 0..rotten {
        flip(
            a,
            a.layout().data_slot(row, i),
            a.cell_offset(row, within + 100),
        );
    }
}

/// Simulator seed 9001270 and its class (issue 31; RAID5 and F1 with damaged table pages and
/// rot): a write into a row whose parity disagrees with two data cells whose entries are
/// unknown (which of them is wrong cannot be told) was refused, the next and every later
/// write there too, though nothing the write needs is in doubt: the client's data could
/// never be written. The write now goes in; the cells nothing verifies are listed (reads of
/// them failed already), the one that verifies keeps its data, and the row agrees with its
/// new parity. RAID6 likewise, with three unknown cells, two of them rotten (P and Q name no
/// single cell).
#[test]
fn a_write_into_a_row_whose_parity_disagrees_with_unverifiable_cells_goes_in() {
    use crate::jobs::scrub;
    for (level, n, doubtful, rotten) in [(Level::Raid5, 4, 2, 1), (Level::Raid6, 6, 3, 2)] {
        let chunk = 4096u64;
        let (a, _faults, model) = filled(level, n, chunk, 53);
        let row = 6u64;
        let d = a.layout().data_per_row() as u64;
        disagree(&a, row, 0, doubtful, rotten);
        let mut buf = vec![0u8; 4096];
        assert!(
            a.read(&mut buf, row * d * chunk).is_err(),
            "{level:?}: the rot"
        );
        let at = (row * d + d - 1) * chunk;
        let new = vec![0x3cu8; 4096];
        a.write(&new, at).unwrap();
        a.read(&mut buf, at).unwrap();
        assert!(buf == new, "{level:?}: the client's write reads back");
        a.flush().unwrap();
        a.read(&mut buf, at).unwrap();
        assert!(buf == new, "{level:?}: and after the flush");
        row_right_or_error(&a, &model, row, 0..d - 1, None, &format!(" ({level:?})"));
        let rep = scrub::scrub_array(&a, false, &Default::default(), &mut |_, _| {}).unwrap();
        assert!(
            rep.problems.iter().all(|p| p.row == row),
            "{level:?}: {:?}",
            rep.problems
        );
    }
}

/// Simulator seed 11003132 (F1, damaged table pages, rot): the write above listed the blocks
/// of its row that nothing verified over whole column runs, its own blocks among them. Direct,
/// the write's end took its whole blocks off the list again; through the stripe cache the list
/// came at the destage, after that, and the client's acknowledged data read as an error. The
/// write's own whole blocks are never listed.
#[test]
fn a_write_into_a_row_whose_parity_disagrees_never_lists_its_own_blocks() {
    for cache in [0usize, 1 << 20] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(Level::Raid5, 4, chunk, 59);
        a.set_stripe_cache(cache).unwrap();
        let row = 6u64;
        let d = a.layout().data_per_row() as u64;
        // Column 1 (the second block of each chunk): data cells 0 and 1 unknown, cell 0
        // rotten: the parity disagrees and which is wrong cannot be told.
        disagree(&a, row, 4096, 2, 1);
        // From the second block of cell 1 to the row's end (the stripe cache holds such a
        // write): cell 1 is written over part of the span only.
        let at = row * d * chunk + chunk + 4096;
        let new = vec![0x5au8; (2 * chunk - 4096) as usize];
        a.write(&new, at).unwrap();
        a.flush().unwrap();
        let mut buf = vec![0u8; new.len()];
        a.read(&mut buf, at)
            .unwrap_or_else(|e| panic!("stripe cache {cache}: the client's write: {e}"));
        assert!(
            buf == new,
            "stripe cache {cache}: the client's write reads back"
        );
        let mut one = vec![0u8; 4096];
        right_or_error(
            &a,
            &model,
            row * d * chunk,
            &mut one,
            None,
            "cell 0, block 0",
        );
    }
}

/// Outside attack on the write above: listing the row's cells that verify too (a planted bug)
/// passed every test, as no test's row had a cell that verified and that the write left
/// alone. Such a cell keeps its data, and stays recoverable after its member fails (or reads
/// as an error by the rule of two faults: never as wrong data).
#[test]
fn a_write_into_a_row_whose_parity_disagrees_keeps_the_cells_that_verify() {
    for (level, n, doubtful, rotten) in [(Level::Raid5, 5, 2, 1), (Level::Raid6, 7, 3, 2)] {
        let chunk = 4096u64;
        let (a, _faults, mut model) = filled(level, n, chunk, 53);
        let row = 6u64;
        let d = a.layout().data_per_row() as u64;
        disagree(&a, row, 0, doubtful, rotten);
        // One of the unknown cells, replaced whole (a write only of a good cell takes the
        // read-modify-write path and never meets the disagreement).
        let at = (row * d + doubtful as u64 - 1) * chunk;
        let new = vec![0x3cu8; 4096];
        a.write(&new, at).unwrap();
        model[at as usize..at as usize + 4096].copy_from_slice(&new);
        a.flush().unwrap();
        let good = (row * d + d - 1) * chunk;
        let mut buf = vec![0u8; 4096];
        a.read(&mut buf, good)
            .unwrap_or_else(|e| panic!("{level:?}: the cell that verifies: {e}"));
        assert!(buf[..] == model[good as usize..good as usize + 4096]);
        row_right_or_error(&a, &model, row, 0..d, None, "");
        a.fail(&MemberRef::Slot(
            a.layout().data_slot(row, (d - 1) as usize),
        ))
        .unwrap();
        right_or_error(&a, &model, good, &mut buf, None, "the good cell, degraded");
        row_right_or_error(&a, &model, row, 0..d, None, ", degraded");
    }
}

/// The 4 KiB blocks at (`row`, `within`) of a parity row, data first then P (and Q), as the
/// members hold them: (their slots, the blocks, their member offset).
fn column(a: &Array, row: u64, within: u64) -> (Vec<usize>, Vec<Vec<u8>>, u64) {
    let l = a.layout();
    let d = l.data_per_row();
    let slots: Vec<usize> = (0..d)
        .map(|i| l.data_slot(row, i))
        .chain(std::iter::once(l.p_slot(row)))
        .chain((l.parity_count() == 2).then(|| l.q_slot(row)))
        .collect();
    let off = a.cell_offset(row, within);
    let blocks = slots
        .iter()
        .map(|&s| {
            let mut b = crate::buf::AlignedBuf::zeroed(4096);
            a.slots[s]
                .usable()
                .unwrap()
                .member
                .read_at(&mut b, off)
                .unwrap();
            b.to_vec()
        })
        .collect();
    (slots, blocks, off)
}

/// P and Q of data blocks `data`.
fn parities(a: &Array, data: &[Vec<u8>]) -> [Vec<u8>; 2] {
    let mut pq = [vec![0u8; 4096], vec![0u8; 4096]];
    let refs: Vec<&[u8]> = data.iter().map(|x| &x[..]).collect();
    let [p, q] = &mut pq;
    (a.kernel.gen_pq)(&refs, p, Some(q));
    pq
}

/// A member write that reached `slot`'s member: `bytes` at `off`.
fn put_block(a: &Array, slot: usize, off: u64, bytes: &[u8]) {
    let mut b = crate::buf::AlignedBuf::zeroed(bytes.len());
    b.copy_from_slice(bytes);
    a.slots[slot]
        .usable()
        .unwrap()
        .member
        .write_at(&b, off)
        .unwrap();
}

/// A checksum log page that reached `slot`'s member: the entry of its block at `off` is
/// `bytes`' digest.
fn put_entry(a: &Array, slot: usize, off: u64, bytes: &[u8]) {
    let dev = a.slots[slot].usable().unwrap();
    let s = a.csum_of(&dev).unwrap();
    s.record_digests(s.block_of(off), &[a.csum_digest(bytes)]);
}

/// Simulator seed 16001076 (F1 of three, a FUA write of part of a row cut by a power cut): the
/// device kept the write's checksum log page and its parity block but lost its data block (all
/// unsynced), so the data block is old next to its new entry and the parity new next to its
/// old entry. Both one-cell rebuilds match an entry: the data block from the new parity (its
/// new entry), and the parity from the old data block (the parity's old entry), and the resync
/// listed the block as undecided. Only the first leaves every data block matching its own
/// entry; the second keeps a data block failing its checksum. The block now reads as the
/// write's bytes, which its entry vouches for.
#[test]
fn a_data_block_a_power_cut_left_behind_its_entry_is_rebuilt_from_parity_not_listed() {
    for (level, n) in [(Level::F1, 3), (Level::Raid5, 4)] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(level, n, chunk, 47);
        let row = 3u64;
        let within = 4096u64;
        let (slots, blocks, off) = column(&a, row, within);
        let d = a.layout().data_per_row();
        let new: Vec<u8> = blocks[0].iter().map(|x| x ^ 0x3c).collect();
        // The parity as the write left it, and the data block's entry as its log page did.
        let parity: Vec<u8> = blocks[d].iter().map(|x| x ^ 0x3c).collect();
        put_block(&a, slots[d], off, &parity);
        put_entry(&a, slots[0], off, &new);
        let rep = resync(&a, row..row + 1);
        let logical = (row * a.layout().data_per_row() as u64) * chunk + within;
        let mut got = vec![0u8; 4096];
        a.read(&mut got, logical)
            .unwrap_or_else(|e| panic!("{level:?}: the block was listed: {e}; {rep:?}"));
        assert_eq!(got, new, "{level:?}: the block its entry vouches for");
        let mut rest = vec![0u8; 4096];
        a.read(&mut rest, logical + 4096).unwrap();
        assert_eq!(rest, model[logical as usize + 4096..][..4096], "{level:?}");
    }
}

/// Simulator seeds 18000319 and 18003145 (RAID6, damaged table pages, a power cut): a write of
/// one data block cut between P and Q left one parity new and the other old, and the resync
/// listed the block as lost though the old version verified. 18000319: the data block new with
/// its old entry, P new with an unknown entry, Q old; the block rebuilt from Q (P recomputed)
/// matches its entry. 18003145: the data block new with an unknown entry, Q new failing its
/// old entry, P old; the block rebuilt from P gives a Q that matches Q's entry. Rebuilding
/// with one parity only (P) verified neither.
#[test]
fn a_raid6_write_cut_between_p_and_q_is_rolled_back_where_the_old_parity_verifies() {
    for new_parity_is_p in [true, false] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(Level::Raid6, 6, chunk, 53);
        let row = 4u64;
        let within = 4096u64;
        let d = a.layout().data_per_row();
        let (slots, mut cells, off) = column(&a, row, within);
        // Data block 2 rewritten; the parity the write reached computed from the new data.
        cells[2].iter_mut().for_each(|x| *x ^= 0x5a);
        let [p, q] = parities(&a, &cells[..d]);
        put_block(&a, slots[2], off, &cells[2]);
        if new_parity_is_p {
            put_block(&a, slots[d], off, &p);
            unknown_entry(&a, slots[d], off);
        } else {
            put_block(&a, slots[d + 1], off, &q);
            unknown_entry(&a, slots[2], off);
        }
        let rep = resync(&a, row..row + 1);
        let logical = (row * d as u64 + 2) * chunk + within;
        let mut got = vec![0u8; 4096];
        a.read(&mut got, logical).unwrap_or_else(|e| {
            panic!("new parity is P: {new_parity_is_p}: the block was listed: {e}; {rep:?}")
        });
        assert_eq!(
            got,
            model[logical as usize..][..4096],
            "new parity is P: {new_parity_is_p}: the old version, which the entries verify"
        );
        row_right_or_error(&a, &model, row, 0..d as u64, None, "after the resync");
    }
}

/// Simulator seed 12001369 (RAID10, a power cut): a write the cut tore left one copy old next
/// to its new entry (its data write lost, its log page kept) and the other new next to its old
/// entry (the other way round). Each copy's bytes are what the other copy's entry names, and
/// the resync listed the block as lost, since each failed its own entry. Either version is a
/// whole one a write put there, none older than the last flush: one is taken and the block
/// reads back (RAID1 and RAID10).
#[test]
fn mirror_copies_a_power_cut_left_crossed_with_their_entries_are_not_listed() {
    for (level, n) in [(Level::Raid1, 2), (Level::Raid10, 4)] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(level, n, chunk, 59);
        let c = 5u64;
        let within = 4096u64;
        let (s0, r0) = a.layout().mirror_cell(c, 0);
        let (s1, r1) = a.layout().mirror_cell(c, 1);
        let old = model[(c * chunk + within) as usize..][..4096].to_vec();
        let new: Vec<u8> = old.iter().map(|x| x ^ 0x77).collect();
        put_block(&a, s1, a.cell_offset(r1, within), &new);
        put_entry(&a, s0, a.cell_offset(r0, within), &new);
        let rep = resync(&a, r0.min(r1)..r0.max(r1) + 1);
        let mut got = vec![0u8; 4096];
        a.read(&mut got, c * chunk + within)
            .unwrap_or_else(|e| panic!("{level:?}: the block was listed: {e}; {rep:?}"));
        assert!(
            got == old || got == new,
            "{level:?}: neither version read back"
        );
        // Both copies now hold it.
        for (slot, row) in [(s0, r0), (s1, r1)] {
            let mut b = crate::buf::AlignedBuf::zeroed(4096);
            let d = a.slots[slot].usable().unwrap();
            d.member
                .read_at(&mut b, a.cell_offset(row, within))
                .unwrap();
            assert_eq!(&b[..], &got[..], "{level:?}: slot {slot}");
        }
    }
}

/// Simulator seeds 19000863 and 19006384 (RAID5, a member gone, damaged table pages): a write
/// into a row where one member is missing and another cell fails its entry was refused
/// ("2 chunks fail their checksums, are unreadable or unavailable, parity covers 1"); through
/// the stripe cache the refusal came at the destage, so every flush and the clean stop failed
/// for good, and the acknowledged write never reached the members. Neither cell could be read
/// before the write (nothing checks the other one, and the missing one rests on it); now both
/// are listed and the write goes in. With the cache and without; the write's data block is
/// the missing member's or another; the other cell rotten or with its entry unknown.
#[test]
fn a_write_into_a_degraded_row_with_an_unverifiable_cell_goes_in() {
    for k in 0..8usize {
        // Every combination: stripe cache off or on, data cell 0 or 1 written, rot or not.
        let (cache, target, rot) = ([0usize, 1 << 20][k & 1], k >> 1 & 1, k >> 2 == 1);
        {
            let chunk = 4096u64;
            let (a, _faults, model) = filled(Level::Raid5, 4, chunk, 61);
            a.set_stripe_cache(cache).unwrap();
            let row = 6u64;
            let d = a.layout().data_per_row();
            a.fail_member(a.layout().data_slot(row, 0), "test").unwrap();
            if rot {
                flip(&a, a.layout().data_slot(row, 1), a.cell_offset(row, 100));
            } else {
                unknown_entry(&a, a.layout().data_slot(row, 1), a.cell_offset(row, 0));
            }
            let at = (row * d as u64 + target as u64) * chunk;
            let new = vec![0x6bu8; 4096];
            let what = format!("cache {cache}, data cell {target}, rot {rot}");
            a.write(&new, at)
                .unwrap_or_else(|e| panic!("{what}: the write was refused: {e}"));
            a.flush()
                .unwrap_or_else(|e| panic!("{what}: the flush failed: {e}"));
            let mut buf = vec![0u8; 4096];
            a.read(&mut buf, at).unwrap();
            assert!(buf == new, "{what}: the client's write reads back");
            row_right_or_error(&a, &model, row, 2..d as u64, None, &what);
            a.mark_clean()
                .unwrap_or_else(|e| panic!("{what}: the clean stop failed: {e}"));
        }
    }
}

/// Simulator seed 19009195 (RAID6 of four, damaged table pages, rot, a power cut): a rotten
/// data block whose entry was unknown, in a row whose Q's entry was unknown too. Rebuilt from
/// the other data block and P (both matching their entries), it gives a Q equal to Q as read:
/// three cells agree, which rot or cells of different writes cannot do. The resync counted only
/// parities matching their entries as a check, and listed the block.
#[test]
fn a_raid6_rebuild_that_the_unchecked_parity_agrees_with_is_taken() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid6, 4, chunk, 67);
    let row = 9u64;
    let d = a.layout().data_per_row() as u64;
    let s1 = a.layout().data_slot(row, 1);
    flip(&a, s1, a.cell_offset(row, 100));
    unknown_entry(&a, s1, a.cell_offset(row, 0));
    unknown_entry(&a, a.layout().q_slot(row), a.cell_offset(row, 0));
    let rep = resync(&a, row..row + 1);
    let at = (row * d + 1) * chunk;
    let mut got = vec![0u8; 4096];
    a.read(&mut got, at)
        .unwrap_or_else(|e| panic!("the block was listed: {e}; {rep:?}"));
    assert_eq!(
        got,
        model[at as usize..][..4096],
        "the rot was not restored"
    );
}

/// An outside attack on the RAID6 trials: a one-block write cut by a power cut, one parity's
/// data write landed and the data block's and the other parity's log pages did (the rest not).
/// The data block rebuilt from the parity that landed matches its entry, with the other parity
/// recomputed matching its own: the new version is whole. The trial that rebuilt the data block
/// alone and the one that also recomputed the other parity gave rows differing only in that
/// parity, counted as two results, and the block was listed. Trials are now told apart by their
/// data only.
#[test]
fn raid6_trials_that_differ_only_in_parity_are_one_result() {
    for landed in [0usize, 1] {
        let chunk = 8192u64;
        let (a, _faults, model) = filled(Level::Raid6, 5, chunk, 77);
        let (row, within, w) = (3u64, 4096u64, 0usize);
        let d = a.layout().data_per_row();
        let (slots, mut cells, off) = column(&a, row, within);
        cells[w].iter_mut().for_each(|x| *x ^= 0x5a);
        let pq = parities(&a, &cells[..d]);
        put_block(&a, slots[d + landed], off, &pq[landed]);
        let other = 1 - landed;
        put_entry(&a, slots[w], off, &cells[w]);
        put_entry(&a, slots[d + other], off, &pq[other]);
        let rep = resync(&a, row..row + 1);
        let logical = (row * d as u64 + w as u64) * chunk + within;
        let mut got = vec![0u8; 4096];
        a.read(&mut got, logical).unwrap_or_else(|e| {
            panic!("parity {landed} landed: listed though the new version verifies: {e}; {rep:?}")
        });
        assert!(
            got == cells[w] || got[..] == model[logical as usize..][..4096],
            "parity {landed} landed: neither version"
        );
    }
}

/// Simulator seed 18003145 (RAID6, a damaged table page, a power cut; found again when the
/// checksum log's pages split at flush and restoring boundaries): a write cut between P and Q
/// left data block 2 new with its new entry, P new next to its old entry, Q old, and data block
/// 0's entry unknown. No trial verified (each rebuild either kept P failing its entry or used
/// the old Q) and block 0 was listed, though P agrees with the data as read: P was computed
/// from these very bytes, which vouches for block 0, and Q is recomputed.
#[test]
fn a_raid6_row_whose_data_one_parity_agrees_with_is_kept_and_the_other_parity_recomputed() {
    for p_agrees in [true, false] {
        let chunk = 8192u64;
        let (a, _faults, mut model) = filled(Level::Raid6, 6, chunk, 61);
        let row = 4u64;
        let within = 4096u64;
        let d = a.layout().data_per_row();
        let (slots, mut cells, off) = column(&a, row, within);
        cells[2].iter_mut().for_each(|x| *x ^= 0x3c);
        let [p, q] = parities(&a, &cells[..d]);
        put_block(&a, slots[2], off, &cells[2]);
        put_entry(&a, slots[2], off, &cells[2]);
        // The parity the write reached is new next to its old entry; the other is old.
        if p_agrees {
            put_block(&a, slots[d], off, &p);
        } else {
            put_block(&a, slots[d + 1], off, &q);
        }
        unknown_entry(&a, slots[0], off);
        let logical = (row * d as u64 + 2) * chunk + within;
        model[logical as usize..][..4096].copy_from_slice(&cells[2]);
        let rep = resync(&a, row..row + 1);
        assert!(
            a.bad_blocks().is_empty(),
            "P agrees: {p_agrees}: listed: {:?}; {rep:?}",
            a.bad_blocks()
        );
        row_right_or_error(&a, &model, row, 0..d as u64, None, "after the resync");
        // Both parities agree with the data now, and the block no entry checked is recorded.
        let (_, after, _) = column(&a, row, within);
        let [p2, q2] = parities(&a, &after[..d]);
        assert!(after[d] == p2 && after[d + 1] == q2, "P agrees: {p_agrees}");
    }
}

/// An outside attack on the mirror rebuild's poisoning: the one copy left of a block was
/// rotten and its table page damaged, the rebuild poisoned the target there, and a later
/// scrub --repair rewrote the damaged page from the blocks as they lay (the scrub reported the
/// poisoned target but not the unchecked source), vouching for the rot: the next read returned
/// it. The unchecked copy is now unconfirmed for the page repair, and the read keeps failing.
#[test]
fn a_scrub_repair_never_vouches_for_the_unchecked_copy_a_rebuild_poisoned_its_target_over() {
    let (a, _f, model) = filled(Level::Raid1, 2, 65536, 7);
    a.mark_clean().unwrap(); // entries folded into the table pages
    a.fail(&MemberRef::Slot(1)).unwrap();
    let off = a.cell_offset(2, 4096);
    flip(&a, 0, off + 8);
    let geo = a.checksum_geometry().unwrap();
    let d0 = a.slots[0].usable().unwrap();
    let s0 = a.csum_of(&d0).unwrap();
    flip(
        &a,
        0,
        geo.page_offset(s0.block_of(off) / csum::PER_PAGE) + 300,
    );
    s0.verify_table(d0.member.as_ref()).unwrap();
    a.take_failed(&PathBuf::from("m1")).unwrap();
    rebuild_onto_fresh(&a, "m1new");
    let mut buf = vec![0u8; 4096];
    let mut check = |when: &str| right_or_error(&a, &model, 2 * 65536 + 4096, &mut buf, None, when);
    check("after the rebuild");
    crate::jobs::scrub::scrub_array(&a, true, &Default::default(), &mut |_, _| {}).unwrap();
    check("after scrub --repair");
}

/// An outside attack (issue 31): a rebuild that could not settle a column (a survivor rotten,
/// no redundancy left) poisoned its target's block and listed it, the placeholder written
/// there with an entry matching nothing; listed blocks with such entries were never judged, so
/// when the placeholder rotted and a neighbour's member failed, the neighbour was rebuilt from
/// the rot and read back wrong with no error. The rebuild now makes a listed target block's
/// entry match its placeholder once the list is durable, and listed blocks are judged by it
/// (unrotten, the placeholder then still rebuilds a neighbour: a cargo-mutants survivor that
/// skipped the recording, leaving an error where the data was recoverable).
#[test]
fn a_rebuilds_poisoned_placeholder_that_rots_never_feeds_a_reconstruction() {
    for (level, n, rots) in [
        (Level::Raid5, 4, true),
        (Level::Raid6, 5, true),
        (Level::Raid6, 6, true),
        (Level::Raid5, 4, false),
        (Level::Raid6, 6, false),
    ] {
        let chunk = 4096u64;
        let (a, _faults, model) = filled(level, n, chunk, 101 + n as u64);
        let row = 7u64;
        let d = a.layout().data_per_row() as u64;
        let gone = a.layout().data_slot(row, 0);
        let victim = a.layout().data_slot(row, d as usize - 1);
        a.fail(&MemberRef::Slot(gone)).unwrap();
        // The column lost beyond what is left to check it: survivors rotten (RAID5 one data
        // block; RAID6 two blocks, P among them when only the victim's data is left).
        let rotten: Vec<usize> = match (level, n) {
            (Level::Raid5, _) => vec![a.layout().data_slot(row, 1)],
            (_, 5) => vec![a.layout().data_slot(row, 1), a.layout().p_slot(row)],
            _ => vec![a.layout().data_slot(row, 1), a.layout().data_slot(row, 2)],
        };
        for &s in &rotten {
            flip(&a, s, a.cell_offset(row, 100));
        }
        rebuild_onto_fresh(&a, "new");
        let what = format!("{level:?} n={n}");
        assert!(
            a.is_lost_block(gone, row * chunk),
            "{what}: poisoned and listed"
        );
        let at = (row * d + d - 1) * chunk;
        let mut buf = vec![0u8; 4096];
        a.read(&mut buf, at).unwrap();
        assert!(buf[..] == model[at as usize..at as usize + 4096], "{what}");
        // The poisoned placeholder rots; the victim's member fails (and Q's, on RAID6).
        if rots {
            flip(&a, gone, a.cell_offset(row, 200));
        }
        a.fail(&MemberRef::Slot(victim)).unwrap();
        if level == Level::Raid6 {
            a.fail(&MemberRef::Slot(a.layout().q_slot(row))).unwrap();
        }
        if rots || level == Level::Raid6 {
            // (RAID6 unrotten: the target, rebuilt from P beside rotten survivors, disagrees
            // with Q, so the listed blocks keep entries that do not match them and count as
            // missing: an error, where only P could have rebuilt the victim right.)
            right_or_error(&a, &model, at, &mut buf, None, &what);
        } else {
            // Unrotten, the placeholders (the target's, and the rotten survivors' as the
            // rebuild found them) agree with P: the victim's block is rebuilt from them, its
            // entries made to match once listed (without that, a needless loss).
            a.read(&mut buf, at)
                .unwrap_or_else(|e| panic!("{what}: needless loss: {e}"));
            assert!(buf[..] == model[at as usize..at as usize + 4096], "{what}");
        }
    }
}

/// An outside attack (issue 31): a write into a degraded RAID5 row beside a block whose entry
/// was unknown (a damaged table page) listed that block and left its entry unknown; listed
/// blocks were never judged, so when the listed placeholder rotted (after a rebuild) and the
/// written block's member failed, the client's acknowledged write was rebuilt from the rot and
/// read back wrong with no error. The write now makes the listed block's entry match the
/// placeholder its new parity assumes.
#[test]
fn a_placeholder_a_write_listed_with_an_unknown_entry_that_rots_never_feeds_a_reconstruction() {
    let chunk = 4096u64;
    let (a, _faults, _model) = filled(Level::Raid5, 4, chunk, 31);
    let row = 6u64;
    let d = a.layout().data_per_row() as u64;
    let gone = a.layout().data_slot(row, 0);
    let sick = a.layout().data_slot(row, 1);
    let victim = a.layout().data_slot(row, 2);
    a.fail_member(gone, "test").unwrap();
    unknown_entry(&a, sick, a.cell_offset(row, 0));
    let at = (row * d + 2) * chunk;
    a.write(&[0x3c; 4096], at).unwrap();
    assert!(a.is_lost_block(sick, row * chunk));
    rebuild_onto_fresh(&a, "new");
    let mut buf = vec![0u8; 4096];
    a.read(&mut buf, at).unwrap();
    assert!(buf.iter().all(|&x| x == 0x3c));
    flip(&a, sick, a.cell_offset(row, 300));
    a.fail(&MemberRef::Slot(victim)).unwrap();
    if a.read(&mut buf, at).is_ok() {
        assert!(
            buf.iter().all(|&x| x == 0x3c),
            "the client's write read back wrong with no error"
        );
    }
}

/// The rebuild's own reads took listed blocks as placeholders consistent with their rows
/// without judging them (as reads once did): a listed block that rotted after its listing was
/// rebuilt into the target of a failed neighbour, which then held the rot with a fresh entry.
/// Listed blocks are judged by the entry their listing recorded there too.
#[test]
fn a_rebuild_never_rebuilds_a_target_from_a_listed_placeholder_that_rotted() {
    let chunk = 4096u64;
    let (a, _faults, model) = filled(Level::Raid5, 4, chunk, 23);
    let row = 5u64;
    let listed = a.layout().data_slot(row, 1);
    let gone = a.layout().data_slot(row, 0);
    list_as_a_listing_does(&a, listed, row);
    flip(&a, listed, a.cell_offset(row, 300));
    a.fail(&MemberRef::Slot(gone)).unwrap();
    rebuild_onto_fresh(&a, "new");
    let at = row * a.layout().data_per_row() as u64 * chunk;
    let mut buf = vec![0u8; chunk as usize];
    right_or_error(&a, &model, at, &mut buf, None, "the rebuilt neighbour");
}

/// Mutation gap (cargo-mutants on the rebuild's `poison`): only listed blocks get their
/// entries made to match them. A rebuild that cannot settle a column (a data block's entry
/// unknown, P rotten, a member gone) lists the unchecked data block; P, a parity, is never
/// listed, and its entry must keep failing its rot, or later reads would trust it.
#[test]
fn a_rebuild_that_cannot_settle_a_column_never_records_a_rotten_paritys_entry() {
    let chunk = 4096u64;
    let (a, _faults, _model) = filled(Level::Raid5, 4, chunk, 29);
    let row = 4u64;
    let gone = a.layout().data_slot(row, 0);
    let unchecked = a.layout().data_slot(row, 1);
    let p = a.layout().p_slot(row);
    unknown_entry(&a, unchecked, a.cell_offset(row, 0));
    flip(&a, p, a.cell_offset(row, 50));
    a.fail(&MemberRef::Slot(gone)).unwrap();
    rebuild_onto_fresh(&a, "new");
    let d = a.slots[p].usable().unwrap();
    let mut b = vec![0u8; chunk as usize];
    d.member.read_at(&mut b, a.cell_offset(row, 0)).unwrap();
    assert_eq!(
        a.csum_blocks(&d, row, a.cell_offset(row, 0), &b).0,
        vec![0],
        "the rotten parity's entry was made to match its rot"
    );
}

/// Simulator seed 38002895 (F1, a needless loss): a write starting and ending inside blocks,
/// covering a listed block whole between them, read its whole span first to fill in the
/// partial blocks, met the listed block and was refused: the client's data, which would have
/// restored the block, never went in. Only the partly written blocks are read now.
#[test]
fn a_write_over_a_listed_block_with_partial_ends_goes_in_and_restores_it() {
    for level in [Level::Raid5, Level::Raid6, Level::Raid1] {
        let n = if level == Level::Raid1 { 2 } else { 4 };
        let chunk = 16384u64;
        let (a, _faults, _model) = filled(level, n, chunk, 37);
        let at = 3 * chunk + 4096; // block 1 of logical chunk 3
        let (slot, row) = match level {
            Level::Raid1 => a.layout().mirror_cell(3, 0),
            _ => {
                let (row, d) = a.layout().parity_locate(3);
                (a.layout().data_slot(row, d), row)
            }
        };
        let listed = if level == Level::Raid1 {
            a.mark_lost_copy_block(3, 4096)
        } else {
            a.mark_lost_block(slot, row * chunk + 4096)
        };
        assert!(listed, "{level:?}");
        a.persist().unwrap();
        let data = vec![0x6bu8; 4096 + 2 * 1000];
        a.write(&data, at - 1000)
            .unwrap_or_else(|e| panic!("{level:?}: the write was refused: {e}"));
        let mut got = vec![0u8; data.len()];
        a.read(&mut got, at - 1000).unwrap();
        assert!(got == data, "{level:?}");
    }
}

/// A RAID10 whose cells do not divide evenly among the copies leaves the last cell of the last
/// row unused: the rebuild of its member fills that cell with zeros and goes on, and every
/// byte reads back. (A cargo-mutants survivor: the zero fill of `fill_batch` was never run,
/// so a wrong range there went unseen.)
#[test]
fn a_raid10_rebuild_fills_the_cell_no_chunk_uses_with_zeros() {
    let mut odd = 0;
    for member in [3 << 20, (3 << 20) + 4096, (3 << 20) + 8192] {
        let (a, _) =
            super::tests::make(&LayoutParams::with_defaults(Level::Raid10, 3, 4096), member);
        let rows = a.rows();
        if rows * 3 % 2 == 0 {
            continue; // every cell holds a copy
        }
        odd += 1;
        assert!(a.layout().mirror_chunk_at(rows, 2, rows - 1).is_none());
        let mut model = vec![0u8; a.size() as usize];
        Rng(rows).fill(&mut model);
        a.write(&model, 0).unwrap();
        a.flush().unwrap();
        a.fail(&MemberRef::Slot(2)).unwrap();
        rebuild_onto_fresh(&a, "fresh");
        assert_eq!(a.state(), ArrayState::Clean, "rows {rows}");
        let mut back = vec![0u8; model.len()];
        a.read(&mut back, 0).unwrap();
        assert!(back == model, "rows {rows}: read back after the rebuild");
        let mut last = vec![0xffu8; 4096];
        a.member_read(2, &mut last, rows - 1, 0).unwrap();
        assert!(last.iter().all(|&b| b == 0), "rows {rows}: the unused cell");
    }
    assert!(odd > 0, "no member size gave an odd number of rows");
}

/// A rebuild's progress counts the bytes its targets hold: it only grows, ends at the total,
/// and the total is the slot's capacity on each target. (A cargo-mutants survivor: the
/// progress arithmetic could be anything and no test looked.)
#[test]
fn rebuild_progress_grows_to_the_targets_capacity() {
    let (a, _, model) = filled(Level::Raid5, 4, 65536, 9);
    a.fail(&MemberRef::Slot(2)).unwrap();
    add_fresh(&a, "fresh");
    let mut seen: Vec<(u64, u64)> = Vec::new();
    crate::jobs::rebuild::run(&a, &Default::default(), &mut |_, done, total| {
        seen.push((done, total))
    })
    .unwrap();
    let want = a.rows() * a.layout().chunk();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|&(_, t)| t == want), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
    assert_eq!(seen.last().unwrap().0, want, "{seen:?}");
    let mut back = vec![0u8; model.len()];
    a.read(&mut back, 0).unwrap();
    assert!(back == model);
}

/// Simulator seed 47002557 (RAID1 of three): every copy of a block had its entry unknown (a
/// scrub --repair rewrote damaged table pages while a re-add was refilling the third copy),
/// the copies agreed, and no later scrub --repair recorded entries for them; when two members
/// went, the copy left read as an error though it held the durable bytes. Copies that agree
/// confirm each other (as reads and the resync take them): scrub --repair records them.
#[test]
fn mirror_copies_agreeing_with_unknown_entries_get_their_entries_back_from_scrub_repair() {
    for level in [Level::Raid1, Level::Raid10] {
        let n = if level == Level::Raid1 { 3 } else { 4 };
        let (a, _faults, model) = filled(level, n, 64 << 10, 47002557);
        let l = a.layout().clone();
        let chunk = 5u64;
        let copies: Vec<(usize, u64)> = (0..l.copies()).map(|k| l.mirror_cell(chunk, k)).collect();
        for &(slot, row) in &copies {
            unknown_entry(&a, slot, a.cell_offset(row, 8192));
        }
        let rep = super::tests::scrub_whole(&a, true);
        assert_eq!(rep.unrepaired(), 0, "{level:?}: {rep:?}");
        // Only the first copy left: it must vouch for itself now.
        for &(slot, _) in &copies[1..] {
            a.fail_member(slot, "test").unwrap();
        }
        let off = chunk * l.chunk() + 8192;
        let mut buf = vec![0u8; 4096];
        a.read(&mut buf, off)
            .unwrap_or_else(|e| panic!("{level:?}: the copy left fails to read: {e}"));
        assert_eq!(buf, model[off as usize..off as usize + 4096], "{level:?}");
    }
}
