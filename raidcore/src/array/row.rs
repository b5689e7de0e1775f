//! The row executor's member I/O: the only code that reads or writes data and parity cells on
//! members (and rebuild or replace targets). Every write takes a [`Verified`] source, whose
//! constructor names why its bytes may be trusted (ARCHITECTURE.md, Engine rules: verify
//! before trust); reads come back with the verdict of their checksums.
//!
//! Metadata areas (superblocks, bitmap, journal, checksum tables and log) are read and written
//! by the modules that own their formats; nothing else touches a member.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::sync::Mutex;

use super::csum::BLOCK;
use super::{Array, Dev, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::{Error, ErrorKind, Result};

/// What a member read's checksums said about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every block matches its entry (or there is nothing to judge by: no checksums, or a row
    /// an unclean stop left unjudged on a read-only open).
    Good,
    /// Some block differs from its entry.
    Bad,
    /// No block differs, but some entries are unknown (their table page is damaged).
    Unknown,
}

/// What a caller of `reconstruct_span` already found reading a row cell over the span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Known {
    /// The read failed (and was counted): not read again.
    Unreadable,
    /// Read, and judged (and counted) against its checksums: read again for its blocks'
    /// states, not counted again.
    Judged,
}

/// Bytes the executor may write to a member cell, with the reason they can be trusted. Every
/// write of a data or parity cell takes one; the constructors are the only ways to make one, so
/// each writer states its reason where it writes, and a reason that is not verification at all
/// ([`Verified::unchecked`]) is counted.
#[derive(Clone, Copy)]
pub(crate) struct Verified<'a> {
    bytes: &'a [u8],
    why: Why,
}

/// Why a [`Verified`] cell may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// New data of a client request (merged, where it covers part of a 4 KiB block, with
    /// blocks read and verified).
    Client,
    /// Parity computed from cells that are client data or verified.
    Parity,
    /// A cell rebuilt from cells that verified, or read from a member and verified.
    Rebuilt,
    /// Without checksums: agreed with independent redundancy (RAID-6 P and Q, all copies of a
    /// mirror chunk, or a majority of them).
    Agreed,
    /// A write-hole journal image whose record's own checksum verified at replay.
    Journal,
    /// Zeros written for a trimmed range.
    Zeros,
    /// A data block a resync could not decide, already on the bad-block list (durably): its
    /// entry is made to match it as it lies so that the row's other cells stay recoverable by
    /// parity; no read returns it until a write covers it; and parity computed over it.
    Listed,
    /// Nothing could verify it: the array keeps no checksum or second redundancy that could
    /// (a RAID-5 without checksums resynced after an unclean stop, as md does), or more cells of
    /// a row fail their checksums than parity can check. Counted in
    /// [`Array::unchecked_bytes`].
    Unchecked,
}

impl Verified<'_> {
    /// New data of a client request.
    pub(crate) fn client<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Client,
        }
    }

    /// Parity computed from cells that are client data or verified.
    pub(crate) fn parity<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Parity,
        }
    }

    /// A cell rebuilt from verified cells, or read and verified against its entries.
    pub(crate) fn rebuilt<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Rebuilt,
        }
    }

    /// Without checksums: bytes that agreed with independent redundancy.
    pub(crate) fn agreed<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Agreed,
        }
    }

    /// A journal image whose record checksum verified.
    pub(crate) fn journal<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Journal,
        }
    }

    /// A rebuild batch for a target: cells rebuilt from cells that verified; a block nothing
    /// verified is written with an unknown entry, and a block that could not be rebuilt with
    /// an entry matching nothing, then listed bad (array/refill.rs, `marks`, `poison`), so
    /// neither is ever vouched for.
    pub(crate) fn rebuilt_batch<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Rebuilt,
        }
    }

    /// Zeros for a trimmed range.
    pub(crate) fn zeros<'a>(bytes: &'a [u8]) -> Verified<'a> {
        debug_assert!(bytes.iter().all(|&b| b == 0));
        Verified {
            bytes,
            why: Why::Zeros,
        }
    }

    /// A data block on the bad-block list (durably listed before this is made), as it lies on
    /// its member, or parity computed from such blocks and verified ones: the listed bytes are
    /// never read as data, and the parity keeps the row's verified cells recoverable.
    pub(crate) fn listed<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Listed,
        }
    }

    /// Bytes nothing could verify, written anyway for the reason the caller documents.
    pub(crate) fn unchecked<'a>(bytes: &'a [u8]) -> Verified<'a> {
        Verified {
            bytes,
            why: Why::Unchecked,
        }
    }
}

impl<'a> Verified<'a> {
    /// The bytes.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Why they may be written.
    pub(crate) fn why(&self) -> Why {
        self.why
    }
}

/// Read errors a slot's member may have since the array was opened before it is failed (each
/// is repaired from redundancy and rewritten; md allows 20 corrected read errors).
pub const READ_ERROR_LIMIT: u64 = 20;

/// Bytes of member I/O in one row from which its members are driven on parallel threads.
const PARALLEL_FROM: usize = 128 << 10;

/// Threads that drive one row's members at once, kept for the life of the process (a thread
/// spawned per row cost 13 % of a served RAID5 read in clone alone).
fn io_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(8)
            .thread_name(|i| format!("raidctl-io-{i}"))
            .build()
            .expect("member I/O thread pool")
    })
}

/// A member I/O item: its size decides whether threads are worth it.
pub(super) trait MemberIo {
    fn len(&self) -> usize;
}

impl MemberIo for (usize, Verified<'_>, u64, WriteKind) {
    fn len(&self) -> usize {
        self.1.bytes().len()
    }
}

impl MemberIo for (usize, u64, &[u8]) {
    fn len(&self) -> usize {
        self.2.len()
    }
}

impl MemberIo for (usize, &mut [u8], u64) {
    fn len(&self) -> usize {
        self.1.len()
    }
}

/// Runs `f` on every item at once on the I/O pool; the results in the order of `items` (all of
/// them finish before it returns).
fn on_pool<T: Send>(items: Vec<T>, f: impl Fn(T) -> Result<()> + Sync) -> Vec<Result<()>> {
    let results: Vec<Mutex<Option<Result<()>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    io_pool().scope(|sc| {
        let f = &f;
        for (x, slot) in items.into_iter().zip(&results) {
            sc.spawn(move |_| *slot.lock().expect("result lock") = Some(f(x)));
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .expect("result lock")
                .expect("ran in the scope")
        })
        .collect()
}

impl Array {
    /// Reads one member range; on failure the device is failed and the error returned.
    pub(crate) fn member_read(
        &self,
        slot: usize,
        buf: &mut [u8],
        row: u64,
        within: u64,
    ) -> Result<()> {
        self.member_read_on(slot, buf, row, within).map(|_| ())
    }

    /// [`Array::member_read`], returning the device read: the one whose checksum entries
    /// judge the bytes, even where the slot's member fails or changes before they are judged.
    fn member_read_on(
        &self,
        slot: usize,
        buf: &mut [u8],
        row: u64,
        within: u64,
    ) -> Result<Arc<Dev>> {
        let Some(d) = self.source(slot, row) else {
            return Err(Error::new(
                ErrorKind::Io,
                format!("slot {slot} unavailable"),
            ));
        };
        let off = self.cell_offset(row, within);
        d.member.read_at(buf, off).map(|()| d.clone()).map_err(|e| {
            d.read_errors.fetch_add(1, Ordering::Relaxed);
            let cause = e.to_string();
            d.note_error(format!("read at member offset {off}: {cause}"));
            let e = e.context(format!("slot {slot}"));
            // As md does: a slot's member stays in after a read error (the caller rebuilds
            // the range from redundancy and rewrites it, which remaps a bad sector on an SSD;
            // a member that cannot take the rewrite is failed then). Past
            // READ_ERROR_LIMIT errors since open it is failed. A target is failed at once.
            // Failing is best effort here; the caller reconstructs or reports.
            let why = format!("read error at member offset {off} ({cause})");
            let member = self.slots[slot]
                .usable()
                .is_some_and(|u| Arc::ptr_eq(&u, &d));
            let _ = if !member {
                self.fail_target(slot, &why)
            } else if d.read_errors_open.fetch_add(1, Ordering::Relaxed) + 1 > READ_ERROR_LIMIT {
                self.fail_member(
                    slot,
                    &format!("{why}: more than {READ_ERROR_LIMIT} read errors"),
                )
            } else if !self.device_answers(&d) {
                self.fail_member(
                    slot,
                    &format!("{why}, and its superblock cannot be read either"),
                )
            } else {
                Ok(())
            };
            e
        })
    }

    /// Whether a device still reads its own superblock: a read error on a device that does not
    /// is a device gone (unplugged, dead), not a bad sector.
    fn device_answers(&self, d: &Dev) -> bool {
        let mut probe = AlignedBuf::zeroed(4096);
        d.member
            .read_at(&mut probe, crate::format::SB_A_OFFSET)
            .is_ok()
    }

    /// As [`Array::member_read`], then checks the blocks against their checksums (mismatches
    /// are counted on the device).
    pub(crate) fn member_read_verified(
        &self,
        slot: usize,
        buf: &mut [u8],
        row: u64,
        within: u64,
    ) -> Result<Verdict> {
        let (bad, unknown) = self.member_read_blocks(slot, buf, row, within, true)?;
        Ok(if !bad.is_empty() {
            Verdict::Bad
        } else if !unknown.is_empty() {
            Verdict::Unknown
        } else {
            Verdict::Good
        })
    }

    /// As [`Array::member_read`], then the 4 KiB blocks of `buf` that fail their checksums and
    /// those whose entries are unknown (indices, ascending; both empty without checksums).
    /// `count`: count the failing blocks on the device (false when the caller counted them
    /// at an earlier read of the same range).
    pub(crate) fn member_read_blocks(
        &self,
        slot: usize,
        buf: &mut [u8],
        row: u64,
        within: u64,
        count: bool,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let d = self.member_read_on(slot, buf, row, within)?;
        Ok(self.judge_blocks_of(&d, buf, row, within, count))
    }

    /// The checks of [`Array::member_read_blocks`] over `buf`, just read from `slot`'s member
    /// at (`row`, `within`): the blocks that fail their checksums (not counting those on the
    /// bad-block list) and those whose entries are unknown.
    pub(super) fn judge_blocks(
        &self,
        slot: usize,
        buf: &[u8],
        row: u64,
        within: u64,
        count: bool,
    ) -> (Vec<usize>, Vec<usize>) {
        match self.source(slot, row) {
            Some(d) => self.judge_blocks_of(&d, buf, row, within, count),
            None if self.csum_geo.is_none() => (Vec::new(), Vec::new()),
            // Failed since the read: nothing vouches for the bytes (simulator seed 3000135
            // took them as good, and a flipped read reached the client).
            None => (
                Vec::new(),
                (0..buf.len().div_ceil(BLOCK as usize)).collect(),
            ),
        }
    }

    /// [`Array::judge_blocks`] by device `d`'s entries: the device `buf` was read from.
    fn judge_blocks_of(
        &self,
        d: &Dev,
        buf: &[u8],
        row: u64,
        within: u64,
        count: bool,
    ) -> (Vec<usize>, Vec<usize>) {
        if self.csum_geo.is_none() {
            return (Vec::new(), Vec::new());
        }
        // Blocks on the bad-block list (known lost) are judged like any other: their contents
        // are a placeholder consistent with the row's parity (what the rebuild, the resync or
        // a write resting on them computed it from), which reads of them never return
        // (check_bad) but parity updates and reconstructions of other blocks need, and every
        // listing makes their entries match the placeholder once the list holding them is
        // durable (the resync's `record_listed`, the rebuild's `poison`, the replace's
        // `list_kept`, the write's listing in io.rs). One failing its entry changed since (rot
        // of the placeholder), and one whose entry is unknown cannot be checked: used as they
        // lie, they carried rot into the blocks rebuilt from them (simulator seed 34003322, and
        // two outside attacks: a rebuild's poisoned target block and a write's listed block
        // with an unknown entry, each rotten, fed a neighbour's reconstruction). A crash
        // between a listing and its entries leaves the old entry: the placeholder then counts
        // as missing, an error at worst.
        let (bad, unknown) = self.csum_blocks(d, row, self.cell_offset(row, within), buf);
        if count {
            if let Some(&i) = bad.first() {
                d.csum_error(
                    bad.len() as u64,
                    self.cell_offset(row, within) + i as u64 * BLOCK,
                );
            }
        }
        (bad, unknown)
    }

    /// [`Array::member_write`] of a repair (a read's or a job's rewrite of a cell with what
    /// its row says it holds: scrub --repair, the resync, read-repair, the journal's replay).
    /// Where a crash could lose or tear the rewrite without anything noticing, its 4 KiB blocks
    /// count as a write in flight, then as not durable until the next flush (`unflushed`), so
    /// a member failing meanwhile suspects them: a parity block (the one it replaces may be
    /// stale and still match its entry), any block without checksums, and a block whose entry
    /// is unknown. A data block with a known entry is not counted: a lost or torn rewrite
    /// leaves it failing that entry, which the next read or resync sees; nor is a rewrite of the
    /// bytes the member holds already, or of blocks it cannot read (a lost rewrite leaves them
    /// unreadable): read back first to tell. Only the blocks written: a
    /// scrub batch once counted whole, and a crash after a member failed mid-scrub listed 2 MiB
    /// of its flushed data (an outside attack, simulator seed 9001188).
    pub(crate) fn repair_write(
        &self,
        slot: usize,
        cell: Verified<'_>,
        row: u64,
        within: u64,
        kind: WriteKind,
    ) -> Result<()> {
        let per_row = self.layout.chunk() / BLOCK;
        let len = cell.bytes().len() as u64;
        let unnoticed = kind != WriteKind::Data
            || self.source(slot, row).is_none_or(|d| {
                self.csum_of(&d).is_none_or(|s| {
                    let first = s.block_of(self.cell_offset(row, within));
                    s.expected(d.member.as_ref(), first, len.div_ceil(BLOCK) as usize)
                        .iter()
                        .any(|e| matches!(e, super::csum::Expect::Unknown))
                })
            });
        // (Straight from the device: a sector that cannot be read, the reason for many
        // repairs, is not counted again as a read error.)
        let harmless = || {
            let mut now = crate::buf::AlignedBuf::zeroed(cell.bytes().len());
            self.source(slot, row).is_some_and(|d| {
                d.member
                    .read_at(&mut now, self.cell_offset(row, within))
                    .map_or(true, |()| now[..] == *cell.bytes())
            })
        };
        let _writing = (unnoticed && !harmless()).then(|| {
            let first = row * per_row + within / BLOCK;
            let end = row * per_row + (within + len).div_ceil(BLOCK);
            self.unflushed.begin(std::iter::once(first..end), false)
        });
        self.member_write_as(slot, cell, row, within, kind, true)
    }

    /// Writes one cell range to the slot's member and, for rows it already holds, to the slot's
    /// rebuild or replace target; counts the bytes. A device that fails is failed.
    pub(crate) fn member_write(
        &self,
        slot: usize,
        cell: Verified<'_>,
        row: u64,
        within: u64,
        kind: WriteKind,
    ) -> Result<()> {
        self.member_write_as(slot, cell, row, within, kind, false)
    }

    /// [`Array::member_write`]; `restoring`: a repair's (its checksum records say so,
    /// [`super::csum::CsumStore::record_digests_as`]).
    fn member_write_as(
        &self,
        slot: usize,
        cell: Verified<'_>,
        row: u64,
        within: u64,
        kind: WriteKind,
        restoring: bool,
    ) -> Result<()> {
        let buf = cell.bytes();
        self.note_written(cell);
        let s = &self.slots[slot];
        let off = self.cell_offset(row, within);
        if let Some(d) = s.usable() {
            let noted = self.csum_note(&d, off, cell);
            match d.member.write_at(buf, off) {
                Ok(()) => {
                    d.count(kind, buf.len() as u64);
                    self.csum_record_noted(&d, off, cell, noted, restoring);
                }
                Err(e) => {
                    d.write_error(&e);
                    self.fail_member(slot, &format!("write error at member offset {off}: {e}"))?;
                }
            }
        }
        if let Some(t) = s
            .target()
            .filter(|t| row < t.checkpoint.load(Ordering::Acquire))
        {
            let noted = self.csum_note(&t.dev, off, cell);
            match t.dev.member.write_at(buf, off) {
                Ok(()) => {
                    t.dev.count(kind, buf.len() as u64);
                    self.csum_record_noted(&t.dev, off, cell, noted, restoring);
                }
                Err(e) => {
                    t.dev.write_error(&e);
                    self.fail_target(slot, &format!("write error at member offset {off}: {e}"))?;
                }
            }
        }
        Ok(())
    }

    /// Writes rows `row..` of a rebuild or replace target (`buf` from the start of the row,
    /// whole rows) and records their checksums, `marks` (byte offset in `buf`, entry) in place
    /// of the computed ones for blocks nothing verified or that are lost
    /// ([`Array::csum_note_marked`]); false when the write failed and the target was failed.
    pub(crate) fn target_write(
        &self,
        slot: usize,
        dev: &Dev,
        cell: Verified<'_>,
        row: u64,
        marks: &[(usize, super::csum::Digest)],
    ) -> Result<bool> {
        let buf = cell.bytes();
        self.note_written(cell);
        let off = self.cell_offset(row, 0);
        let noted = self.csum_note_marked(dev, off, cell, marks);
        debug_assert!(
            marks.is_empty() || noted.is_some() || self.csum_of(dev).is_none(),
            "a marked target write is whole blocks"
        );
        match dev.member.write_at(buf, off) {
            Ok(()) => {
                dev.count(WriteKind::Rebuild, buf.len() as u64);
                self.csum_record_noted(dev, off, cell, noted, true);
                Ok(true)
            }
            Err(e) => {
                dev.write_error(&e);
                self.fail_target(slot, &format!("write error at member offset {off}: {e}"))?;
                Ok(false)
            }
        }
    }

    /// Makes rows `rows` of a rebuild or replace target read as zeros, as they do on every
    /// member (rows the data map shows empty): a punched hole on files, the device's
    /// write-zeroes (unmapping where it guarantees zeros) on block devices. A new device's
    /// checksum area was zeroed when it joined, which says "zeros": no records. A re-added
    /// member keeps its own, which may say otherwise there (rows trimmed since it left): they
    /// get zero records. False when the target failed.
    pub(crate) fn target_zero(
        &self,
        slot: usize,
        t: &super::Target,
        rows: Range<u64>,
    ) -> Result<bool> {
        let dev = &t.dev;
        let off = self.cell_offset(rows.start, 0);
        let len = (rows.end - rows.start) * self.layout.chunk();
        // (No pending note: a crash before the record lands only makes the rebuild redo these
        // rows, past its durable checkpoint, zeroing and recording them again.)
        match dev.member.write_zeroes(off, len) {
            Ok(()) => {
                if t.readd {
                    self.csum_record_zero(dev, off, len, true);
                }
                Ok(true)
            }
            Err(e) => {
                dev.write_error(&e);
                self.fail_target(
                    slot,
                    &format!("zeroing member offsets {off}..{}: {e}", off + len),
                )?;
                Ok(false)
            }
        }
    }

    /// Bytes read from members (or rebuilt from them) that the read's checks passed: verified
    /// when the array keeps checksums (each block matched its own entry, or was rebuilt from
    /// blocks that matched theirs); without checksums nothing could verify them, and writing
    /// them is counted as unchecked (a mirror copy rewritten from another, a RAID-5 chunk
    /// rebuilt from parity: what md does).
    pub(crate) fn judged_good<'a>(&self, bytes: &'a [u8]) -> Verified<'a> {
        if self.csum_geo.is_some() {
            Verified::rebuilt(bytes)
        } else {
            Verified::unchecked(bytes)
        }
    }

    /// Reads `buf.len()` bytes of `dev`'s data area from byte `from` of it (a scrub rebuilding
    /// a checksum table page from the blocks it covers). No checksum judges them: the caller
    /// has checked them against redundancy.
    pub(crate) fn member_read_data(&self, dev: &Dev, from: u64, buf: &mut [u8]) -> Result<()> {
        let off = self.cell_offset(0, 0) + from;
        dev.member.read_at(buf, off).map_err(|e| {
            e.context(format!(
                "{}: reading member offset {off}",
                dev.path.display()
            ))
        })
    }

    /// Counts a write nothing verified.
    fn note_written(&self, cell: Verified<'_>) {
        if cell.why() == Why::Unchecked {
            self.unchecked
                .fetch_add(cell.bytes().len() as u64, Ordering::Relaxed);
        }
    }

    /// Bytes written to members since open that nothing could verify ([`Verified::unchecked`]).
    pub fn unchecked_bytes(&self) -> u64 {
        self.unchecked.load(Ordering::Relaxed)
    }

    /// Runs `f` for every member I/O of one row: on the I/O pool, one task per member, when
    /// there are several, they are large enough to be worth it and the members wait on devices
    /// (separate devices, so their I/O overlaps); in order otherwise. The first error is
    /// returned after all finish.
    pub(super) fn on_members<T: MemberIo + Send>(
        &self,
        items: Vec<T>,
        f: impl Fn(T) -> Result<()> + Sync,
    ) -> Result<()> {
        let bytes: usize = items.iter().map(|x| x.len()).sum();
        // With several requests in flight the members are kept busy by the requests already.
        if items.len() < 2
            || bytes < PARALLEL_FROM
            || self.requests.load(Ordering::Relaxed) > 2
            || !self.waits_on_devices()
        {
            return items.into_iter().try_for_each(f);
        }
        on_pool(items, f)
            .into_iter()
            .find(|r| r.is_err())
            .unwrap_or(Ok(()))
    }

    /// Runs `f` (metadata I/O: a bitmap or superblock write and flush) on every device of
    /// `devs`: at once on the I/O pool when there are several and they wait on devices, in
    /// order otherwise. The results, in the order of `devs`.
    pub(super) fn on_each_dev(
        &self,
        devs: &[Arc<Dev>],
        f: impl Fn(&Dev) -> Result<()> + Sync,
    ) -> Vec<Result<()>> {
        if devs.len() < 2 || !self.waits_on_devices() {
            return devs.iter().map(|d| f(d)).collect();
        }
        on_pool(devs.iter().map(|d| &**d).collect(), f)
    }

    /// Whether some member has a device to wait on. Only then do threads pay: a member in
    /// memory (tmpfs, even with O_DIRECT, or a RAM disk) copies on the caller's core, and
    /// handing its I/O to the pool adds wake-ups and rayon's idle spinning (served RAID5 reads
    /// over tmpfs files: 0.49-0.68 s per GiB with the pool, 0.47-0.55 without).
    pub fn waits_on_devices(&self) -> bool {
        self.slots
            .iter()
            .any(|s| s.usable().is_some_and(|d| !d.member.memory_backed()))
    }
}
