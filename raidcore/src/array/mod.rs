//! The array engine: assembly from members, the read and write paths (full-row, read-modify-write,
//! reconstruct-write, degraded), row locking, member failure handling, rebuild and replace
//! targets, and per-member accounting. Shared by many threads (`Send + Sync`); prints nothing.

mod assemble;
pub mod badblocks;
pub mod bitmap;
mod check;
mod create;
pub mod csum;
pub mod events;
pub mod health;
mod io;
pub mod job;
mod row;
pub(crate) use io::KeptAsIs;
pub(crate) use row::Verified;
pub mod journal;
mod lifecycle;
mod locks;
mod pace;
pub mod pending;
pub mod readd;
mod refill;
mod stripe;
mod unflushed;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sync::{Mutex, RwLock};
use csum::Epochs;
use std::time::{SystemTime, UNIX_EPOCH};

pub use assemble::{
    discover, member_to_assemble, AssembleOptions, Discovered, Files, InjectingFiles, MemberSource,
};
pub use create::{preflight, CreateSpec};
pub use lifecycle::{MemberRef, RoleChange};
pub use stripe::DEFAULT_STRIPE_CACHE;

use crate::device::Member;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{self, SlotInfo, SlotState, Superblock, WearRecord};
use crate::layout::{Layout, Redundancy};
use crate::parity::Kernel;
pub(crate) use locks::{RowGuard, RowLocks};

/// Kinds of bytes written to a member, for wear accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Data = 0,
    Parity = 1,
    Metadata = 2,
    Rebuild = 3,
}

impl WriteKind {
    /// The kind of a parity row's cell at row position `pos` (data 0..`data`, then P, Q).
    pub(crate) fn of_cell(pos: usize, data: usize) -> WriteKind {
        if pos < data {
            WriteKind::Data
        } else {
            WriteKind::Parity
        }
    }
}

/// Run-time view of one member state, as `status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    Active,
    Faulty,
    Missing,
    Rebuilding,
    Spare,
    /// Copying a live member's contents (replace).
    Replacing,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Active => "active",
            MemberState::Faulty => "faulty",
            MemberState::Missing => "missing",
            MemberState::Rebuilding => "rebuilding",
            MemberState::Spare => "spare",
            MemberState::Replacing => "replacing",
        }
    }
}

/// Overall array state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayState {
    Clean,
    Degraded,
    Rebuilding,
    Failed,
}

impl ArrayState {
    pub fn name(self) -> &'static str {
        match self {
            ArrayState::Clean => "clean",
            ArrayState::Degraded => "degraded",
            ArrayState::Rebuilding => "rebuilding",
            ArrayState::Failed => "failed",
        }
    }
}

/// One member device in use by the array: a slot's member, a rebuild or replace target, or a
/// spare. Counters are per device, so wear follows the SSD, not the slot.
pub struct Dev {
    pub(crate) member: Arc<dyn Member>,
    pub(crate) path: PathBuf,
    pub(crate) uuid: [u8; 16],
    /// Generation and copy index of the newest superblock on this device.
    pub(crate) sb_state: Mutex<(u64, u32)>,
    /// Wear recorded in its superblock when opened.
    pub(crate) wear_base: Mutex<WearRecord>,
    pub(crate) written: [AtomicU64; 4],
    pub(crate) read_errors: AtomicU64,
    /// Read errors since the array was opened (the limit before a member is failed).
    pub(crate) read_errors_open: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    /// Blocks that read back different from their checksum (counted once per repair).
    pub(crate) csum_errors: AtomicU64,
    /// The newest read, write or checksum error: operation, member offset and cause.
    pub(crate) last_error: Mutex<Option<String>>,
    /// Per-block checksums, opened on first use when the array has them.
    pub(crate) csum: std::sync::OnceLock<csum::CsumStore>,
    /// Taken by whoever opens `csum` (which reads the member): a second user waits on this
    /// lock, which the simulator's scheduler sees, rather than inside the `OnceLock`, which it
    /// does not (simulator seed 10000154 hung: a client blocked in the `OnceLock` while the
    /// replace opening the store waited for its turn to read). A leaf lock.
    pub(crate) csum_opening: crate::sync::Mutex<()>,
    /// Page digests of what each bad-block area copy on this device holds, as written by this
    /// process (empty: not known, so written whole). Taken inside the meta lock (persist).
    pub(crate) bad_area: Mutex<[Vec<[u8; 16]>; 2]>,
}

impl Dev {
    pub(crate) fn new(
        member: Arc<dyn Member>,
        path: PathBuf,
        uuid: [u8; 16],
        wear_base: WearRecord,
        sb: (u64, u32),
    ) -> Dev {
        Dev {
            member,
            path,
            uuid,
            sb_state: Mutex::new(sb),
            wear_base: Mutex::new(wear_base),
            written: Default::default(),
            read_errors: AtomicU64::new(0),
            read_errors_open: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            csum_errors: AtomicU64::new(0),
            last_error: Mutex::new(None),
            csum: std::sync::OnceLock::new(),
            csum_opening: crate::sync::Mutex::new(()),
            bad_area: Mutex::new([Vec::new(), Vec::new()]),
        }
    }

    /// Remembers the newest error of this device, for status.
    pub(crate) fn note_error(&self, what: String) {
        *self.last_error.lock().expect("last error lock") = Some(what);
    }

    /// Counts a write (or flush) error, and remembers it (it names operation and offset).
    pub(crate) fn write_error(&self, e: &Error) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        self.note_error(e.to_string());
    }

    /// Counts `n` blocks failing their checksums, and remembers where.
    pub(crate) fn csum_error(&self, n: u64, at: u64) {
        if n > 0 {
            self.csum_errors.fetch_add(n, Ordering::Relaxed);
            self.note_error(format!(
                "checksum mismatch at member offset {at} ({n} blocks)"
            ));
        }
    }

    pub(crate) fn count(&self, kind: WriteKind, bytes: u64) {
        self.written[kind as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Wear record: what the superblock had at open plus what this process wrote since.
    pub(crate) fn wear(&self) -> WearRecord {
        let mut w = self.wear_base.lock().expect("wear lock").clone();
        w.data_bytes += self.written[WriteKind::Data as usize].load(Ordering::Relaxed);
        w.parity_bytes += self.written[WriteKind::Parity as usize].load(Ordering::Relaxed);
        w.metadata_bytes += self.written[WriteKind::Metadata as usize].load(Ordering::Relaxed);
        w.rebuild_bytes += self.written[WriteKind::Rebuild as usize].load(Ordering::Relaxed);
        w
    }
}

/// What a target device is filling in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// The slot has no usable member: its contents are reconstructed from redundancy.
    Rebuild,
    /// The slot's member still serves; its contents are copied (replace).
    Replace { old_to_slot: Option<u32> },
}

/// A device being filled with a slot's contents.
pub struct Target {
    pub(crate) dev: Arc<Dev>,
    pub(crate) kind: TargetKind,
    /// Rows below this are in sync on the target (in memory; writes below it go to the target).
    pub(crate) checkpoint: AtomicU64,
    /// Rows below this are in sync and flushed (what the superblock records).
    pub(crate) durable: AtomicU64,
    /// The slot's own member come back (re-add): it holds the rows the re-add map shows
    /// unchanged since it left, which the rebuild leaves as they are (readd.rs).
    pub(crate) readd: bool,
}

/// One of the N slots of the layout at run time.
pub(crate) struct Slot {
    /// The member recorded for this slot, if present (it may still be failed).
    pub(crate) dev: RwLock<Option<Arc<Dev>>>,
    /// Set when the member is missing, recorded faulty, stale, or failed at run time.
    pub(crate) failed: AtomicBool,
    /// Whether the durable superblocks record this slot's member as out of service (read with
    /// `failed` set only). Cleared before a failure at run time sets `failed`; set by the
    /// superblock write that records it. A flush returns only once every failed slot is
    /// recorded: writes skip the slot as soon as `failed` is set, and a flush that returned
    /// before the record was durable left the skipped member looking in sync after a power
    /// cut, its older copy then trusted (simulator seed 43003747).
    pub(crate) recorded: AtomicBool,
    /// Why the member is unavailable (for status and errors).
    pub(crate) reason: Mutex<Option<String>>,
    pub(crate) target: RwLock<Option<Arc<Target>>>,
}

impl Slot {
    pub(crate) fn new(dev: Option<Arc<Dev>>) -> Slot {
        Slot {
            failed: AtomicBool::new(dev.is_none()),
            recorded: AtomicBool::new(true),
            dev: RwLock::new(dev),
            reason: Mutex::new(None),
            target: RwLock::new(None),
        }
    }

    /// The member, if it is present and not failed.
    #[inline]
    pub(crate) fn usable(&self) -> Option<Arc<Dev>> {
        if self.failed.load(Ordering::Acquire) {
            None
        } else {
            self.dev.read().expect("slot lock").clone()
        }
    }

    pub(crate) fn target(&self) -> Option<Arc<Target>> {
        self.target.read().expect("slot lock").clone()
    }

    pub(crate) fn set_reason(&self, why: Option<String>) {
        *self.reason.lock().expect("reason lock") = why;
    }
}

/// Per-member facts for status reports.
#[derive(Clone, Debug)]
pub struct MemberInfo {
    /// The slot this device serves or is filling; None for spares.
    pub slot: Option<usize>,
    pub path: Option<PathBuf>,
    pub uuid: [u8; 16],
    pub state: MemberState,
    pub reason: Option<String>,
    pub wear: WearRecord,
    pub read_errors: u64,
    pub write_errors: u64,
    pub checksum_errors: u64,
    /// The newest read, write or checksum error since open, with its member offset.
    pub last_error: Option<String>,
    /// For rebuild and replace targets: fraction of rows in sync.
    pub progress: Option<f64>,
}

/// An assembled array.
pub struct Array {
    layout: Layout,
    /// Array-wide superblock fields (slot entries, events, name...). Per-device fields are
    /// filled in when written.
    meta: Mutex<Superblock>,
    slots: Vec<Slot>,
    spares: Mutex<Vec<Arc<Dev>>>,
    locks: RowLocks,
    /// Held shared by every request and exclusively by role changes (a finished rebuild or
    /// replace becomes the slot's member), so no request sees half a role change.
    pub(crate) config: RwLock<()>,
    /// One job at a time.
    job: Mutex<()>,
    /// Jobs waiting for `job`: a scrub gives way to them ([`Array::job_waiting`]).
    job_waiters: AtomicUsize,
    kernel: &'static Kernel,
    writable: bool,
    data_offset: u64,
    data_rows: u64,
    size: u64,
    /// Set once the superblock saying "not clean" is durable (after the first write since the
    /// array was marked clean asked for it).
    dirty: AtomicBool,
    /// Held while the array is marked dirty: every writer waits until that superblock is
    /// durable (lock order: after config, before meta; docs/locking.md).
    dirtying: Mutex<()>,
    /// Unix seconds of the last superblock write (wear counters are persisted at most every
    /// [`PERSIST_INTERVAL`] seconds under load).
    last_persist: AtomicU64,
    /// When the last completed superblock update began (clock nanoseconds + 1; 0: none since
    /// open). A write-intent bit is cleared only for writes before it: an image of a member
    /// taken before a write then carries an older superblock generation than the member had
    /// when it left, and is never re-added as it (readd.rs; found by an outside attack: a
    /// copy one generation behind was re-added without a write its bits no longer showed).
    persisted_from: AtomicU64,
    /// The superblock events count a flush must see durable before it returns (a target taken
    /// out of service, which writes skip from then on: `fail_target`), and the count of the
    /// newest superblock update written to every device in service.
    events_to_record: AtomicU64,
    events_recorded: AtomicU64,
    /// Assembly notes about devices left out (missing spares, stale targets).
    notes: Mutex<Vec<String>>,
    /// Write mix since open: row writes, data chunks touched, full-row writes.
    mix: [AtomicU64; 3],
    mix_base: format::WriteMix,
    /// Write-intent bitmap, when the format records one.
    pub(crate) bitmap: Option<bitmap::Bitmap>,
    /// Write-hole journal for degraded partial-row writes, when the format records one.
    pub(crate) journal: Option<journal::JournalGeometry>,
    pub(crate) journal_enabled: AtomicBool,
    pub(crate) journal_seq: AtomicU64,
    /// One degraded journaled write at a time (the journal has one entry).
    pub(crate) journal_lock: Mutex<()>,
    /// Per-block checksum area, when the format records one.
    pub(crate) csum_geo: Option<csum::CsumGeometry>,
    /// The array was dirty at open and is read-only: blocks in bitmap-dirty regions may
    /// legitimately differ from their checksums (entries lagging a completed write), so reads
    /// there accept a row that agrees with its parity as read (io.rs), and scrub does not
    /// report them.
    pub(crate) unverified_dirty: bool,
    /// The last scrub, or an unfinished one (persisted with every superblock write).
    pub(crate) scrub_record: Mutex<health::ScrubRecord>,
    /// Reads and writes in progress (member I/O of one request runs in parallel only when
    /// few are).
    pub(crate) requests: AtomicUsize,
    /// Requests begun since open (reads, writes, trims, flushes): jobs yield while it moves.
    pub(crate) served: AtomicU64,
    /// Partial-row writes held until their row is complete (parity levels).
    stripes: stripe::StripeCache,
    /// Blocks whose contents were lost (persisted with every superblock write). A leaf lock.
    pub(crate) bad: Mutex<badblocks::BadBlocks>,
    /// Rows written and not yet durable (writes in flight, and completed since the last flush
    /// began): what a member failure records as suspect. A leaf lock.
    pub(crate) unflushed: unflushed::Unflushed,
    /// Bytes written to members since open that nothing could verify (row.rs, `Verified`).
    unchecked: AtomicU64,
    /// Entries of member writes in progress, kept outside the members (set by
    /// [`Array::keep_pending_entries`]; pending.rs).
    pub(crate) pending: std::sync::OnceLock<pending::PendingStore>,
    /// After an unclean stop that was not a power cut (the pending store of an earlier session
    /// of this boot survived and was applied): every completed write's entries are known, so
    /// a block failing its entry is rot, never a write whose entry lags (scrub.rs, the
    /// resync).
    pub(crate) entries_current: AtomicBool,
    /// Flushes take turns to drain the writes in flight and cut the checksum logs (csum.rs,
    /// epochs; lock order: after config, docs/locking.md); their log writes and device flushes
    /// run at once.
    flush_turn: Mutex<()>,
    /// The epoch of the next flush, set at first use past every epoch the members' logs name.
    log_epoch: std::sync::OnceLock<AtomicU64>,
    /// The newest flush epoch that returned since open (0: none yet).
    log_done: AtomicU64,
    /// Rows an unclean stop left marked that no resync or repairing scrub has gone over since
    /// open: a row there may be torn with every cell matching its entry (a write killed between
    /// its cells), so a write into it recomputes parity from the whole span, never adds a
    /// change into parity that may not match the data (an outside attack: a read-modify-write
    /// carried the tear into parity with settled entries). A leaf lock.
    unsynced: Mutex<Vec<std::ops::Range<u64>>>,
    /// `unsynced` is not empty: read without its lock on every partial-row write.
    unsynced_any: AtomicBool,
    /// The superblocks do not say that checksum log pages with epochs may be in the logs
    /// (format feature CSUM_EPOCHS): set before the first such page, cleared by a clean close.
    logs_plain: AtomicBool,
}

/// A request's write in progress: its write-intent bits held (the regions stay marked) and its
/// rows registered as not yet durable, until dropped when the write completed.
pub(crate) struct WriteHold<'a> {
    _bitmap: Option<bitmap::BitmapHold<'a>>,
    rows: unflushed::WriteTicket<'a>,
}

impl WriteHold<'_> {
    /// Row `row` of this write went through the write-hole journal and is durable on every
    /// member: no crash can tear it now, so it leaves the rows at risk. Returns whether that
    /// changed the suspect rows of a member failure (to be recorded, [`Array::journaled`]).
    fn journaled(&self, blocks: std::ops::Range<u64>) -> bool {
        self.rows.settle(blocks)
    }
}

/// Seconds between superblock updates that record the wear counters while writes go on.
pub const PERSIST_INTERVAL: u64 = 5;

/// Unix seconds now. `RAIDCTL_NOW` (Unix seconds) overrides the clock, like SOURCE_DATE_EPOCH,
/// for reproducible reports and for tests of time-based behaviour (history, projections). The
/// override is read once per process: this runs on every write.
pub fn now_secs() -> u64 {
    if let Some(t) = crate::clock::unix_secs() {
        return t;
    }
    static OVERRIDE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    if let Some(t) = *OVERRIDE.get_or_init(|| {
        let v = std::env::var("RAIDCTL_NOW").ok()?;
        let t = v.parse().ok();
        if t.is_none() {
            // Said once, not silently replaced: a report for the wrong day misleads.
            eprintln!("raidctl: RAIDCTL_NOW={v:?} is not Unix seconds; the system clock is used");
        }
        t
    }) {
        return t;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) use now_secs as now;

impl Array {
    pub(crate) fn from_parts(
        sb: Superblock,
        slots: Vec<Slot>,
        spares: Vec<Arc<Dev>>,
        writable: bool,
    ) -> Result<Array> {
        let layout = sb.validate()?;
        let mix_base = sb.write_mix;
        let journal = journal::JournalGeometry::from_superblock(&sb);
        let csum_geo = csum::CsumGeometry::from_superblock(&sb);
        let unverified_dirty = !writable && !sb.clean;
        let epochs_bit_clear = sb.incompat_features & format::feature::CSUM_EPOCHS == 0;
        let scrub_record = health::scrub_of(&sb);
        let mut bad = badblocks::BadBlocks::load(&sb)?;
        let area_refused = bad.read_area(&sb, &slots);
        let counters_sb = sb.clone();
        let bitmap = bitmap::BitmapGeometry::from_superblock(&sb).map(|geo| {
            // The bits on disk: the union over the members present (any may hold the newest).
            // (With the data map's bits after the bitmap's: one read.)
            let mut bits = vec![0u8; (geo.end() - geo.offset) as usize];
            let mut buf = crate::buf::AlignedBuf::zeroed(bits.len());
            let mut unread = false;
            for s in &slots {
                if let Some(d) = s.usable() {
                    match d.member.read_at(&mut buf, geo.offset) {
                        Ok(()) => {
                            for (b, x) in bits.iter_mut().zip(buf.iter()) {
                                *b |= x;
                            }
                        }
                        Err(e) => {
                            d.read_errors.fetch_add(1, Ordering::Relaxed);
                            d.note_error(format!("reading the write-intent bitmap: {e}"));
                            unread = true;
                        }
                    }
                }
            }
            // Known on every member: at most what was read from all of them.
            let durable = if unread {
                vec![0u8; bits.len()]
            } else {
                bits.clone()
            };
            if unread {
                // A member's bits are unknown, and any of them may be set only there: every
                // region counts as holding data (a needless full rebuild, never a region
                // skipped that holds data) and, after an unclean stop, as marked (a full
                // resync). None counts as durable, so the first write writes them all to
                // every member before its data: a crash after it cannot find a region it
                // wrote empty on members whose bits read fine.
                let half = geo.bytes as usize;
                if geo.data_map {
                    // (And the re-add map after it: every region counts as missed.)
                    bits[half..].fill(0xff);
                }
                if !sb.clean {
                    bits[..half].fill(0xff);
                }
            }
            bitmap::Bitmap::new(geo, geo.regions(sb.data_rows), bits, durable)
        });
        let array = Array {
            data_offset: sb.data_offset,
            data_rows: sb.data_rows,
            size: sb.array_bytes,
            layout,
            meta: Mutex::new(sb),
            slots,
            spares: Mutex::new(spares),
            locks: RowLocks::new(),
            config: RwLock::new(()),
            job: Mutex::new(()),
            job_waiters: Default::default(),
            kernel: Kernel::best(),
            writable,
            dirty: AtomicBool::new(false),
            dirtying: Mutex::new(()),
            last_persist: AtomicU64::new(now()),
            persisted_from: AtomicU64::new(0),
            events_to_record: AtomicU64::new(0),
            events_recorded: AtomicU64::new(0),
            notes: Mutex::new(area_refused.into_iter().collect()),
            mix: Default::default(),
            mix_base,
            bitmap,
            journal,
            journal_enabled: AtomicBool::new(true),
            journal_seq: AtomicU64::new(0),
            journal_lock: Mutex::new(()),
            csum_geo,
            unverified_dirty,
            scrub_record: Mutex::new(scrub_record),
            requests: Default::default(),
            served: Default::default(),
            stripes: stripe::StripeCache::new(),
            bad: Mutex::new(bad),
            unflushed: Default::default(),
            unchecked: AtomicU64::new(0),
            pending: std::sync::OnceLock::new(),
            entries_current: AtomicBool::new(false),
            flush_turn: Mutex::new(()),
            log_epoch: std::sync::OnceLock::new(),
            log_done: AtomicU64::new(0),
            logs_plain: AtomicBool::new(epochs_bit_clear),
            unsynced: Mutex::new(Vec::new()),
            unsynced_any: AtomicBool::new(false),
        };
        array.set_stripe_cache(DEFAULT_STRIPE_CACHE)?;
        array.load_counters(&counters_sb);
        // Replay every member's checksum log now, so the first write does no metadata reads.
        for d in array.live_devs() {
            array.csum_of(&d);
        }
        if array.csum_geo.is_some() {
            array.epoch_now();
        }
        Ok(array)
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Logical size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Chunk rows on each member.
    pub fn rows(&self) -> u64 {
        self.data_rows
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// A copy of the array-wide superblock as this process sees it.
    pub fn superblock(&self) -> Superblock {
        self.meta.lock().expect("meta lock").clone()
    }

    /// Notes from assembly about devices that were left out.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().expect("notes lock").clone()
    }

    pub(crate) fn kernel(&self) -> &'static Kernel {
        self.kernel
    }

    pub(crate) fn slot_target(&self, slot: usize) -> Option<Arc<Target>> {
        self.slots[slot].target()
    }

    /// The row lock manager (jobs lock their batches through it).
    pub(crate) fn row_locks(&self) -> &RowLocks {
        &self.locks
    }

    /// Admits one job at a time (rebuild, replace, scrub, resync): held for the whole job.
    pub(crate) fn job_slot(&self) -> std::sync::MutexGuard<'_, ()> {
        self.job_waiters.fetch_add(1, Ordering::AcqRel);
        let g = self.job.lock().unwrap_or_else(|e| e.into_inner());
        self.job_waiters.fetch_sub(1, Ordering::AcqRel);
        g
    }

    /// Whether another job waits for the job slot: a scrub stops at its next batch (its
    /// checkpoint recorded; the next scrub resumes there) so that a rebuild is not held up by
    /// a scrub yielding to clients for hours (an outside attack: a hot spare stayed idle, the
    /// array degraded, for as long as clients kept the scrub at its minimum rate).
    pub(crate) fn job_waiting(&self) -> bool {
        self.job_waiters.load(Ordering::Acquire) > 0
    }

    /// Chooses the parity kernel (tests and benchmarks).
    pub fn set_kernel(&mut self, kernel: &'static Kernel) {
        self.kernel = kernel;
    }

    /// Slots without a usable member.
    pub fn lost_slots(&self) -> usize {
        self.lost().iter().filter(|&&l| l).count()
    }

    /// Whether a slot's member is present and in service.
    pub fn slot_usable(&self, slot: usize) -> bool {
        self.slots[slot].usable().is_some()
    }

    /// Whether a slot has a device recorded (in service or failed).
    pub fn slot_present(&self, slot: usize) -> bool {
        self.slots[slot].dev.read().expect("slot lock").is_some()
    }

    /// Whether a slot is being rebuilt or replaced.
    pub fn slot_has_target(&self, slot: usize) -> bool {
        self.slots[slot].target().is_some()
    }

    /// Path of the device recorded for a slot, if any.
    pub fn slot_path_of(&self, slot: usize) -> Option<PathBuf> {
        self.slots[slot]
            .dev
            .read()
            .expect("slot lock")
            .as_ref()
            .map(|d| d.path.clone())
    }

    /// Byte offset of the data area on every member.
    pub fn data_offset_of(&self) -> u64 {
        self.data_offset
    }

    pub(crate) fn lost(&self) -> Vec<bool> {
        self.slots.iter().map(|s| s.usable().is_none()).collect()
    }

    /// State of every member: the N slots in order, then spares and replacement targets.
    pub fn members(&self) -> Vec<MemberInfo> {
        let rows = self.data_rows.max(1) as f64;
        let mut out = Vec::new();
        let mut extras = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let dev = s.dev.read().expect("slot lock").clone();
            let target = s.target();
            let failed = s.failed.load(Ordering::Acquire);
            let info = |dev: &Dev, slot, state, reason, progress| MemberInfo {
                slot,
                path: Some(dev.path.clone()),
                uuid: dev.uuid,
                state,
                reason,
                wear: dev.wear(),
                read_errors: dev.read_errors.load(Ordering::Relaxed),
                write_errors: dev.write_errors.load(Ordering::Relaxed),
                checksum_errors: dev.csum_errors.load(Ordering::Relaxed),
                last_error: dev.last_error.lock().expect("last error lock").clone(),
                progress,
            };
            let reason = s.reason.lock().expect("reason lock").clone();
            match (&dev, &target) {
                (_, Some(t)) if t.kind == TargetKind::Rebuild => {
                    let p = t.checkpoint.load(Ordering::Relaxed) as f64 / rows;
                    out.push(info(
                        &t.dev,
                        Some(i),
                        MemberState::Rebuilding,
                        None,
                        Some(p),
                    ));
                }
                (Some(d), _) => {
                    let state = if failed {
                        MemberState::Faulty
                    } else {
                        MemberState::Active
                    };
                    out.push(info(
                        d,
                        Some(i),
                        state,
                        if failed { reason } else { None },
                        None,
                    ));
                }
                (None, _) => {
                    let uuid = self.meta.lock().expect("meta lock").slots[i].member_uuid;
                    out.push(MemberInfo {
                        slot: Some(i),
                        path: None,
                        uuid,
                        state: MemberState::Missing,
                        reason,
                        wear: WearRecord::default(),
                        read_errors: 0,
                        write_errors: 0,
                        checksum_errors: 0,
                        last_error: None,
                        progress: None,
                    });
                }
            }
            if let Some(t) = target.filter(|t| t.kind != TargetKind::Rebuild) {
                let p = t.checkpoint.load(Ordering::Relaxed) as f64 / rows;
                extras.push(info(&t.dev, Some(i), MemberState::Replacing, None, Some(p)));
            }
        }
        out.extend(extras);
        for d in self.spares.lock().expect("spares lock").iter() {
            out.push(MemberInfo {
                slot: None,
                path: Some(d.path.clone()),
                uuid: d.uuid,
                state: MemberState::Spare,
                reason: None,
                wear: d.wear(),
                read_errors: d.read_errors.load(Ordering::Relaxed),
                write_errors: d.write_errors.load(Ordering::Relaxed),
                checksum_errors: d.csum_errors.load(Ordering::Relaxed),
                last_error: d.last_error.lock().expect("last error lock").clone(),
                progress: None,
            });
        }
        out
    }

    pub fn state(&self) -> ArrayState {
        let lost = self.lost();
        if !self.layout.survives(&lost) {
            ArrayState::Failed
        } else if self.slots.iter().any(|s| s.target().is_some()) {
            ArrayState::Rebuilding
        } else if lost.iter().any(|&l| l) {
            ArrayState::Degraded
        } else {
            ArrayState::Clean
        }
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        let lost = self.lost();
        if self.layout.survives(&lost) {
            return Ok(());
        }
        let names: Vec<String> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.usable().is_none())
            .map(|(i, s)| {
                let who = self.slot_path(i);
                let why = s
                    .reason
                    .lock()
                    .expect("reason lock")
                    .clone()
                    .unwrap_or_default();
                format!(
                    "slot {i} ({who}{}{why})",
                    if why.is_empty() { "" } else { ": " }
                )
            })
            .collect();
        Err(Error::new(
            ErrorKind::ArrayFailed,
            format!(
                "{} of {} members unavailable, {} tolerates {}: {}",
                names.len(),
                self.slots.len(),
                self.layout.level().name(),
                self.layout.tolerance(),
                names.join(", ")
            ),
        ))
    }

    /// Takes a slot's member out of service after an I/O error (or on request). When the array
    /// is writable the change is persisted to the surviving members with the events counter
    /// bumped, so the failed member is recognised as stale if it comes back. A replace in
    /// progress on that slot turns into a rebuild of the same target.
    pub fn fail_member(&self, slot: usize, reason: &str) -> Result<()> {
        let s = &self.slots[slot];
        if s.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        // The re-add map counts what the member misses from before any write can skip it
        // (the bits of writes in flight or unflushed now are taken in).
        self.track_departure(slot);
        s.recorded.store(false, Ordering::Release);
        if s.failed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        s.set_reason(Some(reason.to_string()));
        if matches!(self.layout.redundancy(), Redundancy::Parity { .. }) {
            // Writes made healthy are not journaled: until they are durable, a crash may leave
            // their rows torn, with this member's data no longer computable from them. Those
            // rows, exactly: writes in flight, writes completed since the last flush began, and
            // regions marked before this open that no write touched since (a resync may still
            // be settling them). Nothing flushed before is among them.
            let stale = self.stale_dirty_rows();
            self.unflushed.fail(
                slot,
                stale.into_iter().map(|r| self.row_blocks(r)).collect(),
            );
            let lists = self.unflushed.suspects(self.slots.len());
            self.bad.lock().expect("bad-block lock").set_suspect(lists);
        }
        {
            let mut meta = self.meta.lock().expect("meta lock");
            self.note_departure(&mut meta, slot);
            meta.slots[slot].state = SlotState::Faulty;
            self.replace_into_rebuild(slot, &mut meta);
            meta.events += 1;
        }
        self.event("member-failed", Some(slot), reason.to_string());
        self.event_state();
        if self.writable {
            self.persist()?;
        }
        Ok(())
    }

    /// A replace whose source member is gone turns into a rebuild of the same target: it keeps
    /// what it copied and is rebuilt from redundancy from there. Returns whether it did.
    fn replace_into_rebuild(&self, slot: usize, meta: &mut Superblock) -> bool {
        let s = &self.slots[slot];
        let mut t = s.target.write().expect("slot lock");
        let Some(old) = t
            .as_ref()
            .filter(|t| t.kind != TargetKind::Rebuild)
            .cloned()
        else {
            return false;
        };
        let cp = old.durable.load(Ordering::Acquire);
        meta.retain_extras(|e| e.member_uuid != old.dev.uuid);
        meta.slots[slot] = SlotInfo {
            member_uuid: old.dev.uuid,
            state: SlotState::Rebuilding { checkpoint_row: cp },
            path_hint: old.dev.path.display().to_string(),
        };
        *t = Some(Arc::new(Target {
            dev: old.dev.clone(),
            kind: TargetKind::Rebuild,
            checkpoint: AtomicU64::new(old.checkpoint.load(Ordering::Acquire)),
            durable: AtomicU64::new(cp),
            readd: false,
        }));
        true
    }

    /// For a replace job that finds its source member unusable (failed before the replace
    /// could notice, or left out at assembly): the replace becomes a rebuild, recorded.
    pub(crate) fn replace_source_lost(&self, slot: usize) -> Result<()> {
        let changed = {
            let mut meta = self.meta.lock().expect("meta lock");
            let c = self.replace_into_rebuild(slot, &mut meta);
            if c {
                meta.events += 1;
            }
            c
        };
        if changed && self.writable {
            self.persist()?;
        }
        Ok(())
    }

    /// Drops a failing rebuild or replace target; its slot stays as it was without it.
    pub(crate) fn fail_target(&self, slot: usize, reason: &str) -> Result<()> {
        let s = &self.slots[slot];
        // Taken out under meta, with the record changed and the count a flush waits for
        // (`events_to_record`): writes stop reaching the target as it is taken, and a flush
        // that returned before the record was durable left the superblocks naming it in sync
        // up to its checkpoint, without the writes that skipped it (a power cut then, and the
        // slot's other copies lost, read its older blocks).
        let t = {
            let mut meta = self.meta.lock().expect("meta lock");
            let Some(t) = s.target.write().expect("slot lock").take() else {
                return Ok(());
            };
            match t.kind {
                TargetKind::Rebuild => meta.slots[slot].state = SlotState::Faulty,
                TargetKind::Replace { .. } => meta.retain_extras(|e| e.member_uuid != t.dev.uuid),
            }
            meta.events += 1;
            self.events_to_record
                .fetch_max(meta.events, Ordering::AcqRel);
            t
        };
        s.set_reason(Some(format!("{}: {reason}", t.dev.path.display())));
        self.event(
            "member-failed",
            Some(slot),
            format!(
                "{} (rebuild or replace target): {reason}",
                t.dev.path.display()
            ),
        );
        if self.writable {
            self.persist()?;
        }
        Ok(())
    }

    /// Every device that receives superblocks: usable slot members, targets, spares.
    pub(crate) fn live_devs(&self) -> Vec<Arc<Dev>> {
        let mut v = Vec::new();
        for s in &self.slots {
            v.extend(s.usable());
            v.extend(s.target().map(|t| t.dev.clone()));
        }
        v.extend(self.spares.lock().expect("spares lock").iter().cloned());
        v
    }

    /// Counts one row write touching `chunks` data chunks (the write mix).
    pub(crate) fn count_row_write(&self, chunks: usize, full: bool) {
        self.mix[0].fetch_add(1, Ordering::Relaxed);
        self.mix[1].fetch_add(chunks as u64, Ordering::Relaxed);
        if full {
            self.mix[2].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The array's write mix: what the superblock had plus this process's writes.
    pub fn write_mix(&self) -> format::WriteMix {
        format::WriteMix {
            row_writes: self.mix_base.row_writes + self.mix[0].load(Ordering::Relaxed),
            data_chunk_writes: self.mix_base.data_chunk_writes
                + self.mix[1].load(Ordering::Relaxed),
            full_row_writes: self.mix_base.full_row_writes + self.mix[2].load(Ordering::Relaxed),
        }
    }

    /// Adds a wear history sample to every live device if one is due (or `force`), with SMART
    /// facts per device uuid where given, and persists.
    pub fn sample_wear(
        &self,
        smart: &std::collections::HashMap<[u8; 16], (Option<f32>, Option<u64>)>,
        force: bool,
    ) -> Result<()> {
        let t = now();
        let interval = self.meta.lock().expect("meta lock").history_interval;
        if force {
            for d in self.live_devs() {
                if let Some(last) = d.wear_base.lock().expect("wear lock").history.last() {
                    if last.time > t {
                        return Err(Error::new(
                            ErrorKind::InvalidInput,
                            format!(
                                "the clock ({t}, Unix seconds) is earlier than {}'s newest wear sample ({}): not recording a sample out of order; check the system clock (or RAIDCTL_NOW)",
                                d.path.display(),
                                last.time
                            ),
                        ));
                    }
                }
            }
        }
        for d in self.live_devs() {
            let mut w = d.wear();
            if w.sample(t, interval, smart.get(&d.uuid).copied(), force) {
                d.wear_base.lock().expect("wear lock").history = w.history;
            }
        }
        self.persist()
    }

    /// Writes the current superblock to every live device (next generation, alternate copy).
    pub(crate) fn persist(&self) -> Result<()> {
        let began = crate::clock::Instant::now();
        let mut meta = self.meta.lock().expect("meta lock");
        meta.updated = now();
        meta.write_mix = self.write_mix();
        // Before the health records: those give way when the body grows too large, this never.
        let live = self.live_devs();
        let area = self
            .bad
            .lock()
            .expect("bad-block lock")
            .store(&mut meta, &live);
        self.store_health(&mut meta);
        let interval = meta.history_interval;
        // A member without history has just joined (add, replace, spare): every member takes
        // a sample with it, so that shares are compared from that moment on
        // (wear::shares_since_all_joined).
        let joined = live
            .iter()
            .any(|d| d.wear_base.lock().expect("wear lock").history.is_empty());
        for d in live {
            // A history sample rides along with any superblock write once one is due.
            let mut w = d.wear();
            if w.sample(meta.updated, interval, None, joined) {
                d.wear_base.lock().expect("wear lock").history = w.history;
            }
        }
        self.last_persist.store(meta.updated, Ordering::Relaxed);
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(t) = s.target() {
                let cp = t.durable.load(Ordering::Acquire);
                for e in meta.slots.iter_mut() {
                    if e.member_uuid != t.dev.uuid {
                        continue;
                    }
                    match &mut e.state {
                        SlotState::Rebuilding { checkpoint_row } => *checkpoint_row = cp,
                        SlotState::Replacing {
                            checkpoint_row,
                            slot,
                            ..
                        } if *slot as usize == i => *checkpoint_row = cp,
                        _ => {}
                    }
                }
            }
        }
        // The slots this update records out of service (`Slot::recorded`, once it is written).
        let events = meta.events;
        let out: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                meta.slots
                    .get(i)
                    .is_some_and(|e| e.state != SlotState::Active)
            })
            .collect();
        let mut first_err = None;
        // Each member's generation after this update, recorded in every member: a member
        // found behind its record later is an older copy (a restored backup), never trusted.
        let gens: Vec<([u8; 16], u64)> = self
            .live_devs()
            .iter()
            .map(|d| (d.uuid, d.sb_state.lock().expect("sb lock").0 + 1))
            .collect();
        meta.set_member_generations(&gens);
        for d in self.live_devs() {
            let Some(index) = meta.slots.iter().position(|e| e.member_uuid == d.uuid) else {
                continue;
            };
            d.count(WriteKind::Metadata, format::SB_SIZE as u64);
            let mut sb = meta.clone();
            sb.slot = index as u32;
            sb.member_uuid = d.uuid;
            sb.wear = d.wear();
            let mut st = d.sb_state.lock().expect("sb lock");
            // The list's area copy first, flushed (`AreaWrite::write_to`): a crash before the
            // superblock leaves the older one, which names the other copy.
            let wrote = match &area {
                Some(w) => w.write_to(&d),
                None => Ok(0),
            };
            if let Err(e) = wrote
                .map(|n| d.count(WriteKind::Metadata, n))
                .and_then(|()| format::write_next(d.member.as_ref(), &sb, &mut st))
            {
                d.write_error(&e);
                first_err.get_or_insert((d.uuid, e));
            }
        }
        // Still under meta: a slot promoted and failed again meanwhile must not read as
        // recorded (an outside review: set after meta was dropped, a slot completed and failed
        // in between took this update's mark).
        if first_err.is_none() {
            for i in out {
                self.slots[i].recorded.store(true, Ordering::Release);
            }
            self.events_recorded.fetch_max(events, Ordering::AcqRel);
        }
        drop(meta);
        self.persisted_from
            .fetch_max(began.nanos() + 1, Ordering::AcqRel);
        if let Some((uuid, e)) = first_err {
            // A device that cannot take its superblock is failed; the others record that.
            let why = format!("superblock write failed: {e}");
            if let Some(i) = self.slot_of(&uuid) {
                self.fail_member(i, &why)?;
            } else if let Some(i) = self.target_slot_of(&uuid) {
                self.fail_target(i, &why)?;
            } else {
                self.spares
                    .lock()
                    .expect("spares lock")
                    .retain(|d| d.uuid != uuid);
            }
        }
        self.check_alive()
    }

    /// For every slot with a usable member: whether its aligned I/O bypasses the page cache,
    /// and whether it lives in memory (tmpfs, a RAM disk).
    pub fn direct_io(&self) -> Vec<(usize, bool, bool)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.usable()
                    .map(|d| (i, d.member.direct_io(), d.member.memory_backed()))
            })
            .collect()
    }

    /// Path of the device serving a slot now ("missing" when none), for messages.
    fn slot_path(&self, slot: usize) -> String {
        self.slots[slot]
            .dev
            .read()
            .expect("slot lock")
            .as_ref()
            .map(|d| d.path.display().to_string())
            .unwrap_or_else(|| "missing".into())
    }

    /// "slot N (path)" of the device serving a slot now, for messages.
    pub(crate) fn slot_name(&self, slot: usize) -> String {
        format!("slot {slot} ({})", self.slot_path(slot))
    }

    /// Fails whatever role `d` has: a slot's member or a target (spares are just dropped).
    pub(crate) fn fail_dev(&self, d: &Dev, why: &str) -> Result<()> {
        if let Some(i) = self.slot_of(&d.uuid) {
            self.fail_member(i, why)
        } else if let Some(i) = self.target_slot_of(&d.uuid) {
            self.fail_target(i, why)
        } else {
            self.spares
                .lock()
                .expect("spares lock")
                .retain(|x| x.uuid != d.uuid);
            Ok(())
        }
    }

    /// Slot whose member has this uuid.
    pub(crate) fn slot_of(&self, uuid: &[u8; 16]) -> Option<usize> {
        self.slots.iter().position(|s| {
            s.dev
                .read()
                .expect("slot lock")
                .as_ref()
                .is_some_and(|d| d.uuid == *uuid)
        })
    }

    /// Slot whose target has this uuid.
    pub(crate) fn target_slot_of(&self, uuid: &[u8; 16]) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.target().is_some_and(|t| t.dev.uuid == *uuid))
    }

    /// Persists the wear counters if the last superblock write is older than [`PERSIST_INTERVAL`].
    pub(crate) fn maybe_persist(&self) -> Result<()> {
        let last = self.last_persist.load(Ordering::Relaxed);
        let t = now();
        if t >= last + PERSIST_INTERVAL
            && self
                .last_persist
                .compare_exchange(last, t, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.persist()?;
        }
        Ok(())
    }

    /// Marks the array dirty on disk before the first write (an unclean stop is then detectable).
    ///
    /// `dirty` is set only once that superblock is durable, and a second writer waits for it:
    /// before, the first writer set the flag and then persisted, so a concurrent writer saw it
    /// set and wrote members while the durable superblock still said clean. A power cut then
    /// left a torn row that no resync looked at (simulator seed 906906).
    fn mark_dirty(&self) -> Result<()> {
        if self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        let _g = self.dirtying.lock().expect("dirtying lock");
        if self.dirty.load(Ordering::Acquire) {
            return Ok(());
        }
        self.meta.lock().expect("meta lock").clean = false;
        self.persist()?;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes out what the stripe cache holds, flushes every usable member and target
    /// (fdatasync); then regions idle long enough get their write-intent bit cleared.
    pub fn flush(&self) -> Result<()> {
        self.flush_with(None)
    }

    /// [`Array::flush`], writing out of the stripe cache only rows `held` when given (the
    /// rest of a flush's work is the same: what the members hold is made durable whole, so
    /// the epochs of `unflushed` and the bitmap's clearing stay exact).
    fn flush_with(&self, held: Option<std::ops::Range<u64>>) -> Result<()> {
        self.served.fetch_add(1, Ordering::Relaxed);
        let _cfg = self.config.read().unwrap_or_else(|e| e.into_inner());
        let whole = held.is_none();
        match held {
            Some(rows) => self.write_back_rows(rows)?,
            None => self.write_back_held(None)?,
        }
        // Writes completed before this are durable once the members are flushed below.
        let start = crate::clock::Instant::now();
        // Rewrites of listed blocks held in the stripe cache are not on the members unless it
        // was written out whole.
        let rewritten = if whole {
            self.bad.lock().expect("bad-block lock").rewritten_now()
        } else {
            Vec::new()
        };
        // Writes completed before this are durable once the members are flushed; the suspect
        // rows of a member failure once none of the writes it caught is still in flight.
        let mark = self.unflushed.flush_begin();
        self.sync_devices(false)?;
        let settled = self
            .unflushed
            .flush_done(&mark)
            .then(|| self.unflushed.suspects(self.slots.len()));
        let changed = {
            let mut bad = self.bad.lock().expect("bad-block lock");
            let a = bad.settle(&rewritten);
            a | settled.is_some_and(|l| bad.set_suspect(l))
        };
        if changed {
            self.persist()?;
        }
        self.record_failures()?;
        self.bitmap_clear(start, false)
    }

    /// Returns once the durable superblocks record every slot failed at run time
    /// (`Slot::recorded`) and every target taken out of service (`events_to_record`), writing
    /// them where needed: a write that skipped a failed member or target is durable only then.
    /// A failure still being taken in (its slot marked, its record not yet in the superblock
    /// being built) is waited for.
    fn record_failures(&self) -> Result<()> {
        let unrecorded = || {
            self.events_recorded.load(Ordering::Acquire)
                < self.events_to_record.load(Ordering::Acquire)
                || self.slots.iter().any(|s| {
                    s.failed.load(Ordering::Acquire) && !s.recorded.load(Ordering::Acquire)
                })
        };
        while self.writable && unrecorded() {
            self.persist()?;
            if unrecorded() {
                crate::clock::sleep(std::time::Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// Makes every usable member and rebuild or replace target durable: each writes its
    /// waiting checksum records (and folds its log into its table when `fold`), then flushes
    /// (fdatasync); all devices at once where they wait on devices, so a flush takes the
    /// slowest member's time, not the sum of them (issue 30: one after another, a FLUSH's p99
    /// was 9.4x nbdkit's).
    pub(crate) fn sync_devices(&self, fold: bool) -> Result<()> {
        let mut devs = Vec::new();
        for s in &self.slots {
            devs.extend(s.usable());
            devs.extend(s.target().map(|t| t.dev.clone()));
        }
        let checksums = self.csum_geo.is_some();
        if checksums {
            self.epochs_in_use()?;
        }
        // With checksums: no write in flight, every store notes where this flush's records
        // end, and the stores it cut make its mask (csum.rs, epochs).
        //
        // Only the drain and the cuts take turns. A flush that returns has written every
        // record up to its own cut (an earlier flush's too, if that one has not yet) and then
        // flushed every device, so every flush before it is durable by then, whether or not
        // that one returned first.
        let ep = checksums.then(|| {
            let _turn = self.flush_turn.lock().expect("flush turn lock");
            let f = self.epoch_now();
            let mut mask = 0u64;
            {
                let _drained = self.unflushed.drain();
                for (i, s) in self.slots.iter().enumerate() {
                    if let Some(c) = s.usable().as_ref().and_then(|d| d.csum.get()) {
                        if c.cut(f) {
                            mask |= 1 << i;
                        }
                    }
                    if let Some(t) = s.target() {
                        // A finished target (about to become the slot's member) ends every
                        // flush, its store opened if nothing opened it yet, and counts in the
                        // mask: once it is the slot's member its end page proves the flush.
                        if t.checkpoint.load(Ordering::Acquire) >= self.data_rows {
                            if let Some(c) = self.csum_of(&t.dev) {
                                c.cut_always(f);
                                mask |= 1 << i;
                            }
                        } else if let Some(c) = t.dev.csum.get() {
                            c.cut(f);
                        }
                    }
                }
                self.log_epoch
                    .get()
                    .expect("set by epoch_now")
                    .store(f + 1, Ordering::Release);
            }
            Epochs {
                cur: f + 1,
                flush: Some((f, mask)),
                done: self.log_done(),
            }
        });
        let results = self.on_each_dev(&devs, |d| {
            if let Some((s, ep)) = d.csum.get().zip(ep) {
                let m = d.member.as_ref();
                let logged = s.sync_at(m, true, ep);
                match logged {
                    Ok(n) => d.count(WriteKind::Metadata, n),
                    Err(e) => return Err(e.context("checksum log write failed")),
                }
            }
            d.member.flush().map_err(|e| e.context("flush failed"))
        });
        for (d, r) in devs.iter().zip(results) {
            if let Err(e) = r {
                d.write_error(&e);
                self.fail_dev(d, &e.to_string())?;
            }
        }
        self.check_alive()?;
        if let Some((f, _)) = ep.and_then(|e| e.flush) {
            self.log_done.fetch_max(f, Ordering::AcqRel);
            if fold {
                // Every record is of a flush that returned now: each log folds whole into
                // its table (its flushes are the fold's own), leaving it empty.
                let done = Epochs {
                    cur: f + 1,
                    flush: None,
                    done: Some(f),
                };
                let results = self.on_each_dev(&devs, |d| match d.csum.get() {
                    Some(s) => s
                        .fold_at(d.member.as_ref(), done)
                        .map(|n| d.count(WriteKind::Metadata, n))
                        .map_err(|e| e.context("checksum fold failed")),
                    None => Ok(()),
                });
                for (d, r) in devs.iter().zip(results) {
                    if let Err(e) = r {
                        d.write_error(&e);
                        self.fail_dev(d, &e.to_string())?;
                    }
                }
                self.check_alive()?;
            }
        }
        Ok(())
    }

    /// Before the first checksum log page with epochs since open or the last clean close: the
    /// superblocks say such pages may be in the logs (format feature CSUM_EPOCHS), so a raidctl
    /// from before them refuses the array instead of taking them for the end of its logs and
    /// its flushed entries for lost.
    pub(crate) fn epochs_in_use(&self) -> Result<()> {
        if !self.logs_plain.load(Ordering::Acquire) || !self.writable {
            return Ok(());
        }
        let _g = self.dirtying.lock().expect("dirtying lock");
        if !self.logs_plain.load(Ordering::Acquire) {
            return Ok(());
        }
        self.meta.lock().expect("meta lock").incompat_features |= format::feature::CSUM_EPOCHS;
        self.persist()?;
        self.logs_plain.store(false, Ordering::Release);
        Ok(())
    }

    /// The epoch of the next flush: at first use, past every epoch the members' checksum logs
    /// name, by a margin no flush count reaches (a member's log can name epochs the others'
    /// do not, and one that left may come back).
    pub(crate) fn epoch_now(&self) -> u64 {
        self.log_epoch
            .get_or_init(|| {
                let newest = self
                    .live_devs()
                    .iter()
                    .filter_map(|d| self.csum_of(d).map(|s| s.newest_epoch()))
                    .max()
                    .unwrap_or(0);
                AtomicU64::new(newest.saturating_add(1 << 32))
            })
            .load(Ordering::Acquire)
    }

    /// The newest flush epoch that returned since open.
    pub(crate) fn log_done(&self) -> Option<u64> {
        Some(self.log_done.load(Ordering::Acquire)).filter(|&e| e != 0)
    }

    /// What a checksum log write outside a flush needs of the epochs.
    pub(crate) fn log_epochs(&self) -> Epochs {
        Epochs {
            cur: self.epoch_now(),
            flush: None,
            done: self.log_done(),
        }
    }

    /// Makes durable a completed write of logical `offset..offset + len` (a FUA write): as
    /// [`Array::flush`], but of what the stripe cache holds only the write's own rows are
    /// written out first; other held rows wait for the next flush (issue 30: a FUA write ran
    /// the whole cache's write-back). Where a listed block's rewrite waits to leave the list,
    /// a full flush: leaving the list needs every rewrite before it on the members (the cache
    /// included), or the acknowledged write would read as lost after a power cut.
    pub fn flush_range(&self, offset: u64, len: u64) -> Result<()> {
        let rewrites = self.bad.lock().expect("bad-block lock").rewrites_waiting();
        if rewrites || len == 0 {
            return self.flush();
        }
        self.flush_with(Some(self.rows_of(offset, len)))
    }

    /// Requests (reads, writes, trims, flushes) begun since open: what jobs watch to yield to
    /// users ([`crate::jobs`]).
    pub fn requests_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Flushes, records the wear counters and marks the array clean.
    pub fn close(self) -> Result<()> {
        self.mark_clean()
    }

    /// As [`Array::close`] for an array that is shared (the serving daemon): flush, record the
    /// counters, mark clean. Writes after this mark it dirty again.
    pub fn mark_clean(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        // Exclusive: no write is in flight while the array is marked clean.
        let _cfg = self.config.write().unwrap_or_else(|e| e.into_inner());
        self.write_back_held(None)?;
        // Writes completed before this are durable once the members are flushed below.
        let start = crate::clock::Instant::now();
        let rewritten = self.bad.lock().expect("bad-block lock").rewritten_now();
        let mark = self.unflushed.flush_begin();
        self.sync_devices(true)?;
        // Every log folded empty (nothing recorded meanwhile): a raidctl from before epochs
        // may open the array again (format feature CSUM_EPOCHS).
        if self.csum_geo.is_some()
            && self
                .live_devs()
                .iter()
                .all(|d| d.csum.get().is_none_or(|s| s.log_empty()))
        {
            self.meta.lock().expect("meta lock").incompat_features &= !format::feature::CSUM_EPOCHS;
            self.logs_plain.store(true, Ordering::Release);
        }
        self.unflushed.flush_done(&mark);
        self.unflushed.clear_suspects();
        {
            // No write is in flight (exclusive): everything is durable now.
            let mut bad = self.bad.lock().expect("bad-block lock");
            bad.settle(&rewritten);
            bad.clear_suspect();
        }
        // A superblock update after every write, before their bits clear (see
        // `persisted_from`).
        self.persist()?;
        self.bitmap_clear(start, true)?;
        for s in &self.slots {
            if let Some(t) = s.target() {
                t.durable
                    .store(t.checkpoint.load(Ordering::Acquire), Ordering::Release);
            }
        }
        self.meta.lock().expect("meta lock").clean = true;
        self.dirty.store(false, Ordering::Release);
        self.persist()?;
        // Clean and durable: no entry is pending (and no write is in flight).
        if let Some(p) = self.pending.get() {
            let _ = p.restart();
        }
        Ok(())
    }
}

impl Drop for Array {
    /// Held partial-row writes are written out (best effort: an array dropped without `close`
    /// was not flushed either, and errors have no one to go to).
    fn drop(&mut self) {
        if self.writable {
            let _ = self.write_back(None);
        }
        // Closed clean: the pending store has nothing the next open needs.
        if let Some(p) = self.pending.get() {
            if self.meta.lock().map(|m| m.clean).unwrap_or(false)
                && !self.dirty.load(Ordering::Acquire)
            {
                p.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod recovery_tests;
