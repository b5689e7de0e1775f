//! One simulated run: a seeded array, epochs of concurrent actors (clients on disjoint ranges,
//! a lifecycle actor that fails, breaks, adds, replaces and rebuilds members, a scrub actor),
//! power cuts and clean restarts between epochs, and the final checks: every byte reads back as
//! the model says, healthy and degraded, and scrub --repair settles to a clean second scrub.
//!
//! Silent rot (runs with checksums, drawn from a stream of its own): a `rot` actor flips bytes
//! of data or parity cells at random moments (under client I/O, rebuild, replace and scrub),
//! one more rot may land just before a power cut (in a row written lately, so the resync after
//! the restart meets it), and some members return flipped bytes on their next few reads. Every
//! injection keeps each row correctable: members out of service or carrying a fault, plus the
//! rotten cells of the row, stay within the level's tolerance, and member faults are injected
//! only while that sum stays below it.
//!
//! Large members (one seed in 8, `members=1T` in the description, see [`Spec::large`]): every
//! member is 1 TiB and sparse, so the bitmap has thousands of 64 MiB regions and the checksum
//! tables millions of pages. Clients write only a few windows spread over the capacity (two in
//! one bitmap region, one across a region boundary, one at the end of the array, maybe one at
//! its start); the reads back after a restart and at the end cover the windows plus a few
//! never-written pages (zeros), scrubs (the scrubber's, after a restart, the final ones) cover
//! the windows' rows, rot, unreadable blocks and table damage land there, and the resync after
//! an unclean stop covers what the engine says (the dirty regions, whole). Jobs over the whole
//! array cannot run at this size: a rebuild or replace pass stops after a few batches (its
//! target stays pending), and the final checks leave pending targets pending (the array is
//! read degraded instead).
//!
//! Errors the array may return (the oracle's bound, computed from what was injected and what
//! was in flight; never "whatever the array says"):
//! - a read may fail only where `unrecoverable` holds (a row with more cells out of service
//!   or rotten than tolerated, counting cells whose checksum table page was damaged in a row
//!   with rot or torn by a power cut: nothing can tell rot from a torn write there; per row,
//!   not per 4 KiB column: conservative) or where the model
//!   says a crash lost the block and no write has covered it whole since;
//! - after a power cut, each block on the bad-block list must be within `crash_bound`: torn
//!   (an unsure block in its column of the row: a write in flight or completed but unflushed)
//!   with its own cell on a slot lost with the crash. Slots count as lost when out of service
//!   at any moment of the epoch or at the restart, or faulty (conservative);
//! - scrub findings after a restart and in the final scrub --repair must lie in a row with an
//!   injected fault (rot, unreadable block, transient flip seen), a crash-lost block, or be
//!   checksum table damage that was injected; the second scrub must find nothing.

#![allow(clippy::single_range_in_vec_init)] // one range of rows is a meaningful list here

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::member::{Faults, Image, SimMember, Store};
use super::model::Model;
use super::sched::{Abort, Aborted, Sched};
use crate::array::bitmap::ClearPolicy;
use crate::array::csum::{CsumAlgo, PER_PAGE};
use crate::array::pending::{Backing, PendingStore};
use crate::array::{ArrayState, AssembleOptions, CreateSpec, MemberRef};
use crate::device::Member;
use crate::error::ErrorKind;
use crate::jobs::rebuild::{self, RebuildOptions};
use crate::jobs::scrub::{self, Mode};
use crate::layout::{f1_weights, Layout, LayoutParams, Level, Redundancy};
use crate::rng::SplitMix64;
use crate::Array;

/// Seeds the random stream of checksum table damage (apart from every other draw).
const TABLE_DAMAGE_STREAM: u64 = 0x7ab1_e0da_3a6e_0001;
/// Seeds the random stream of silent rot (apart from every other draw, so runs without rot
/// replay as before).
const ROT_STREAM: u64 = 0x0b17_0b17_5117_0031;
/// Seeds the draw of large members and their windows (apart from every other draw, so runs
/// with small members replay as before).
const LARGE_STREAM: u64 = 0x1a76_e5ee_d000_0007;
/// Seeds the draw of which crashes are process crashes (apart from every other draw).
const KILL_STREAM: u64 = 0x0c11_9b0c_e55e_0009;
/// Draws the bitmap chunk of small arrays (`Spec::bitmap_rows`).
const BITMAP_STREAM: u64 = 0xb17a_9c4e_0000_000b;
/// Draws the write-intent bits' clear policy (`Spec::clear`).
const CLEAR_STREAM: u64 = 0xc1ea_4b17_0000_001e;
/// The size of a large member: 1 TiB, sparse.
const LARGE_MEMBER: u64 = 1 << 40;

/// What a run is made of, drawn from the seed.
#[derive(Clone, Debug)]
pub struct Spec {
    pub params: LayoutParams,
    pub rows: u64,
    pub checksums: Option<CsumAlgo>,
    pub stripe_cache: usize,
    pub clients: usize,
    pub epochs: usize,
    /// Lifecycle events and jobs are drawn more often (a run about rebuilds).
    pub busy_lifecycle: bool,
    pub scrubber: bool,
    /// Checksum table pages get damaged now and then (their own hash then fails): reads and
    /// scrub must go on by redundancy, never return wrong data nor fail good data. Drawn from
    /// a stream of its own, so every other choice of a seed is what it was before.
    pub table_damage: bool,
    /// Silent rot: data and parity cells of members rot on the medium (persistent, at any
    /// moment: under client I/O, during jobs, just before a power cut) and single reads return
    /// flipped bytes (transient), never more cells of a row than the level corrects next to
    /// the members out of service. Only with checksums (without them rot is not detectable on
    /// RAID5 or a two-way mirror). Drawn from a stream of its own.
    pub rot: bool,
    /// Large sparse members (1 TiB each, see [`LARGE_MEMBER`]): clients write a few windows
    /// spread over the capacity (two in one 64 MiB bitmap region, one across a region
    /// boundary, one at the end of the array, maybe one at its start), and every check reads
    /// back the windows and a few never-written pages (zeros). Jobs over the whole array are
    /// restricted to the windows' rows (scrub) or cut short (rebuild and replace: a pass stops
    /// after a few batches, and the final checks leave pending targets pending: a rebuild of
    /// 1 TiB cannot run in a simulator). One seed in 8, drawn from a stream of its own.
    pub large: bool,
    /// A crash that keeps every completed member write is, one time in two, a process crash
    /// (kill -9) rather than a power cut: the pending checksum entries (array/pending.rs, kept
    /// in tmpfs) survive it and the next open restores them. Drawn from a stream of its own.
    pub kills: bool,
    /// Rows per write-intent bit (`create --bitmap-chunk`): one small array in three with
    /// checksums, two in three without, has regions of 1 to 8 rows (so region boundaries, and what a power cut puts at risk per
    /// region, are exercised); the rest, and large arrays, have the default (64 MiB: one region
    /// covers a small array). Drawn from a stream of its own; `SIM_BITMAP_ROWS=N` (or `none`)
    /// overrides the draw (debugging a seed: does it fail with other regions?).
    pub bitmap_rows: Option<u64>,
    /// When write-intent bits clear: None, the age rule alone (a region idle for 5 s clears
    /// after a flush: every bit may clear, as before the policy kept any); one array with
    /// checksums in two with several regions (`bitmap_rows`) keeps 1 to 3 bits set, clearing
    /// the least recently written first, for 10 to 40 s after 1 to 5 s idle ([`ClearPolicy`];
    /// `raidctl` runs the age rule: the draws vary the order of clears and marks the engine
    /// must survive). Drawn from a stream of its own, so runs without it replay as before.
    pub clear: Option<ClearPolicy>,
}

impl Spec {
    pub fn draw(seed: u64) -> Spec {
        let mut r = SplitMix64(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0xa11ce);
        let (level, n) = match r.below(12) {
            0 => (Level::Raid1, 2 + r.below(2) as usize),
            1 | 2 => (Level::Raid10, 2 + r.below(3) as usize),
            3..=5 => (Level::Raid5, 3 + r.below(3) as usize),
            6 | 7 => (Level::F1, 3 + r.below(3) as usize),
            _ => (Level::Raid6, 4 + r.below(3) as usize),
        };
        let chunk = [4096u64, 8192, 16384, 65536][r.below(4) as usize];
        let mut params = LayoutParams::with_defaults(level, n, chunk);
        if level == Level::F1 {
            params.weights = f1_weights(n, r.below(n as u64) as usize, 1 + r.below(2) as u32);
        }
        if level == Level::Raid10 {
            params.copies = 2 + r.below((n as u64).min(3) - 1) as usize;
        }
        let rows = ((256u64 << 10) / chunk).max(8) + r.below(16);
        Spec {
            params,
            rows,
            checksums: match r.below(4) {
                0 => None,
                1 => Some(CsumAlgo::Blake3),
                _ => Some(CsumAlgo::default()),
            },
            stripe_cache: if r.below(3) == 0 { 0 } else { 1 << 20 },
            clients: 1 + r.below(2) as usize,
            epochs: 1 + r.below(3) as usize,
            busy_lifecycle: r.below(2) == 0,
            scrubber: r.below(2) == 0,
            table_damage: SplitMix64(seed ^ TABLE_DAMAGE_STREAM).below(3) == 0,
            rot: false,
            large: SplitMix64(seed ^ LARGE_STREAM).below(8) == 0,
            kills: true,
            bitmap_rows: None,
            clear: None,
        }
        .with_rot(seed)
        .with_bitmap(seed)
        .with_clear(seed)
    }

    fn with_clear(mut self, seed: u64) -> Spec {
        let mut r = SplitMix64(seed ^ CLEAR_STREAM);
        if self.bitmap_rows.is_some() && self.checksums.is_some() && r.below(2) == 0 {
            self.clear = Some(ClearPolicy {
                idle: Duration::from_secs(1 + r.below(5)),
                linger: Duration::from_secs(10 + r.below(31)),
                keep: 1 + r.below(3),
            });
        }
        self
    }

    /// The clear policy the run's arrays take, when they keep a bitmap.
    fn clear_policy(&self) -> ClearPolicy {
        self.clear.unwrap_or(ClearPolicy::AGE)
    }

    fn with_rot(mut self, seed: u64) -> Spec {
        self.rot = self.checksums.is_some() && SplitMix64(seed ^ ROT_STREAM).below(2) == 0;
        self
    }

    fn with_bitmap(mut self, seed: u64) -> Spec {
        let mut r = SplitMix64(seed ^ BITMAP_STREAM);
        // Two arrays in three without checksums, where a member lost with a power cut costs
        // the marked regions (the bound is then tight enough to catch listing too much).
        let small = match self.checksums {
            None => r.below(3) != 0,
            Some(_) => r.below(3) == 0,
        };
        self.bitmap_rows = (!self.large && small).then(|| 1 << r.below(4));
        if let Some(v) = std::env::var_os("SIM_BITMAP_ROWS") {
            self.bitmap_rows = v.to_str().and_then(|v| v.parse().ok());
        }
        self
    }

    pub fn describe(&self) -> String {
        let p = &self.params;
        format!(
            "{} N={}{} chunk={}K {}{}{} checksums={} stripe-cache={} clients={} epochs={}{}{}{}{}",
            p.level.name(),
            p.members,
            if p.level == Level::Raid10 {
                format!(" K={}", p.copies)
            } else if p.level == Level::F1 {
                format!(" weights={:?}", p.weights)
            } else {
                String::new()
            },
            p.chunk_bytes >> 10,
            if self.large {
                format!("members={}T", LARGE_MEMBER >> 40)
            } else {
                format!("rows={}", self.rows)
            },
            self.bitmap_rows
                .map(|b| format!(" bitmap-rows={b}"))
                .unwrap_or_default(),
            self.clear
                .map(|c| format!(
                    " keep-bits={}/{}s/{}s",
                    c.keep,
                    c.idle.as_secs(),
                    c.linger.as_secs()
                ))
                .unwrap_or_default(),
            self.checksums.map(|c| c.name()).unwrap_or("none"),
            self.stripe_cache,
            self.clients,
            self.epochs,
            if self.busy_lifecycle {
                " lifecycle"
            } else {
                ""
            },
            if self.scrubber { " scrubber" } else { "" },
            if self.table_damage && self.checksums.is_some() {
                " table-damage"
            } else {
                ""
            },
            if self.rot { " rot" } else { "" },
        )
    }
}

/// A run that passed.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub spec: String,
    pub steps: u64,
    /// Digest of every scheduling decision: equal for equal seeds.
    pub digest: u64,
    pub power_cuts: usize,
}

/// A run that failed: the seed replays it.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub spec: String,
    pub what: String,
    pub log: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} ({}): {}", self.seed, self.spec, self.what)?;
        writeln!(f, "last events:")?;
        for l in &self.log {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

const DATA_OFFSET_GUESS: u64 = 2 << 20;
const LOG_LINES: usize = 3000;

/// Shared by the actors of one run.
struct World {
    store: Store,
    model: Mutex<Model>,
    power: Mutex<Arc<AtomicBool>>,
    /// Scheduler step at which the power goes (u64::MAX: not in this epoch).
    cut_at: AtomicU64,
    log: Mutex<VecDeque<String>>,
    failed: Mutex<Option<String>>,
    next_member: AtomicU64,
    member_bytes: u64,
    /// A slow member was injected: request latency says nothing about the engine then.
    slow: AtomicBool,
    /// Member rows where a fault was injected (rot, unreadable blocks, a transient flip seen):
    /// what explains a scrub's findings.
    injected_rows: Mutex<BTreeSet<u64>>,
    /// Slots out of service at some moment of this epoch (bit per slot): the slots a crash now
    /// may have lost.
    epoch_lost: AtomicU64,
    /// Member rows written lately (where rot is drawn to hit dirty regions).
    recent_rows: Mutex<VecDeque<u64>>,
    /// The windows of a run with large members (set once the array exists).
    large: std::sync::OnceLock<Large>,
    /// The pending checksum entries' store (tmpfs in raidctl): kept across a process crash,
    /// replaced by an empty one at a power cut.
    pending: Mutex<Backing>,
    /// Checksum table pages damaged, by member path: the blocks they cover may have unknown
    /// entries from then on (conservative: a rewrite that records them again is not tracked).
    damaged_pages: Mutex<BTreeSet<(PathBuf, u64)>>,
    /// Rot as a power cut left it (member row -> slots), from the cut until the checks after
    /// the restart are done: the resync may write over a rotten copy (making an undecided
    /// block's copies agree), which takes it off the member's record, but the rot was there to
    /// confuse it ([`rot_by_row`] counts it meanwhile).
    rot_at_crash: Mutex<BTreeMap<u64, u64>>,
    /// A job that writes member rows (add, replace, rebuild, resync, scrub --repair) ran since
    /// the last clean stop: its writes mark write-intent regions the clients never touched.
    jobs_wrote: AtomicBool,
    /// The lifecycle actor changed something this epoch (a fail, add, replace, rebuild...):
    /// the members' durable superblocks may then lag their state in memory (a rebuild that
    /// finished after the power went), so no member is made to die with the crash.
    lifecycle_acted: AtomicBool,
    /// Persistent rot by content: (member rotted, member offset, the rotten bytes) of every rot
    /// injected. A member in service that is that member or a copy of it ([`lineage`]) and
    /// holds those bytes there holds the rot: a replace or a role move copies what it cannot
    /// verify as it is, and that copy's write takes the rot off the receiving member's record
    /// ([`SimMember::rotten`]). Never another member holding the same bytes: an array that
    /// copied rot over a good mirror copy would then be excused (an outside attack's mutant).
    rot_marks: Mutex<Vec<(PathBuf, u64, [u8; 8])>>,
    /// Redundant levels: member rows (start, end) a damaged table page covered on a member in
    /// service while no redundancy was left to check its unknown entries. What a read, write
    /// or rebuild there rested on could not be verified: its blocks may be refused, listed or
    /// (mirrors) poisoned on a rebuild target from then on (io.rs, rebuild.rs).
    exposed_rows: Mutex<BTreeSet<(u64, u64)>>,
    /// Member rows a power cut may have torn (rows of blocks in flight or unflushed at a cut),
    /// over the whole run (conservative: a later write that covers them is not tracked).
    torn_rows: Mutex<BTreeSet<u64>>,
    /// Parity levels: the cells of those rows a power cut may have torn, as (member row,
    /// 4 KiB column, slot) of data blocks in flight or unflushed at a cut (over the run).
    torn_cells: Mutex<BTreeSet<(u64, u64, usize)>>,
    /// Array offsets of the 4 KiB blocks a power cut may have torn, and of those written more
    /// than once since they were last durable (over the run).
    torn_blocks: Mutex<(BTreeSet<u64>, BTreeSet<u64>)>,
    /// Replace targets and the members they copy (new path -> old path): a replace copies the
    /// blocks it can neither verify nor rebuild as they are, rot included, so the copy may hold
    /// the old member's outstanding rot (conservative: the blocks it rebuilt are clean).
    copied_from: Mutex<BTreeMap<PathBuf, PathBuf>>,
}

/// Where a run with large members works: its clients write only the windows; reads back,
/// scrubs and injected faults cover the windows (and a few never-written pages).
struct Large {
    /// Client byte ranges of the array: sorted, disjoint, not aligned.
    windows: Vec<std::ops::Range<u64>>,
    /// What is read back and checked: the windows rounded out to 4 KiB, and a few pages never
    /// written (they must read as zeros); sorted, disjoint, 4 KiB aligned.
    reads: Vec<std::ops::Range<u64>>,
    /// Member rows of the windows, sorted and merged: what scrubs cover, where rot and
    /// unreadable blocks are injected.
    rows: Vec<std::ops::Range<u64>>,
}

impl Large {
    /// Draws the windows over the array `a` (see [`Spec::large`]).
    fn draw(a: &Array, r: &mut SplitMix64) -> Large {
        let (size, rows) = (a.size(), a.rows());
        let l = a.layout();
        let region_rows = a
            .bitmap_region_rows()
            .unwrap_or(((64u64 << 20) / l.chunk()).max(1));
        // Array bytes per member row (exact for parity levels, near enough for mirrors).
        let bpr = (size / rows).max(4096);
        let region = region_rows * bpr;
        let regions = rows.div_ceil(region_rows).max(2);
        let len = |r: &mut SplitMix64| (bpr * (1 + r.below(4))).max(64 << 10) + r.below(bpr);
        let mut w: Vec<std::ops::Range<u64>> = Vec::new();
        let mut put = |start: u64, len: u64| {
            let start = start.min(size.saturating_sub(len));
            w.push(start..(start + len).min(size));
        };
        // Two windows in one region.
        let ra = r.below(regions - 1) * region;
        let n = len(r);
        put(ra + r.below(region / 4), n);
        let n = len(r);
        put(ra + region / 2 + r.below(region / 4), n);
        // One across the boundary of two other regions.
        let rb = (1 + r.below(regions - 1)) * region;
        let n = len(r);
        put(rb.saturating_sub(n / 2 + r.below(n / 2)), n);
        // One at the end of the array (ending at its last byte, or a little before).
        let n = len(r);
        let end = size - if r.below(2) == 0 { 0 } else { r.below(2 * bpr) };
        put(end.saturating_sub(n), n);
        // Maybe one at its start.
        if r.below(2) == 0 {
            let n = len(r);
            put(r.below(bpr), n);
        }
        let windows = merge(w);
        let round = |x: &std::ops::Range<u64>| x.start / 4096 * 4096..x.end.div_ceil(4096) * 4096;
        let mut reads: Vec<std::ops::Range<u64>> = windows.iter().map(round).collect();
        // Never-written pages: anywhere, and in the first window's region.
        let pages = size / 4096;
        let mut probes = vec![(ra + region * 3 / 4) / 4096 % pages];
        probes.extend((0..4).map(|_| r.below(pages)));
        for pg in probes {
            let p = pg * 4096..pg * 4096 + 4096;
            if !reads.iter().any(|x| x.start < p.end && p.start < x.end) {
                reads.push(p);
            }
        }
        let reads = merge(reads);
        let rows = merge(
            windows
                .iter()
                .map(|x| rows_of(l, x.start, x.end - x.start))
                .collect(),
        );
        Large {
            windows,
            reads,
            rows,
        }
    }

    /// The `n`th row (modulo their count) of the windows' rows.
    fn nth_row(&self, n: u64) -> u64 {
        let total: u64 = self.rows.iter().map(|x| x.end - x.start).sum();
        let mut n = n % total.max(1);
        for x in &self.rows {
            if n < x.end - x.start {
                return x.start + n;
            }
            n -= x.end - x.start;
        }
        0
    }
}

/// Sorts ranges and merges those that overlap or touch.
fn merge(mut v: Vec<std::ops::Range<u64>>) -> Vec<std::ops::Range<u64>> {
    v.sort_by_key(|x| x.start);
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for x in v {
        match out.last_mut() {
            Some(l) if x.start <= l.end => l.end = l.end.max(x.end),
            _ => out.push(x),
        }
    }
    out
}

impl World {
    fn note(&self, sched: &Sched, s: String) {
        let mut l = self.log.lock().expect("log lock");
        if l.len() >= LOG_LINES {
            l.pop_front();
        }
        l.push_back(format!("[{}] {s}", sched.steps()));
    }

    fn fail(&self, s: String) {
        self.failed.lock().expect("fail lock").get_or_insert(s);
    }

    fn failed(&self) -> bool {
        self.failed.lock().expect("fail lock").is_some()
    }

    fn power_on(&self) -> bool {
        self.power
            .lock()
            .expect("power lock")
            .load(Ordering::SeqCst)
    }

    /// The rows jobs over the whole array cover: every row, or on large members the rows of
    /// the windows.
    fn job_rows(&self, a: &Array) -> Vec<std::ops::Range<u64>> {
        match self.large.get() {
            Some(l) => l.rows.clone(),
            None => vec![0..a.rows()],
        }
    }

    /// A row drawn at random (`r.below(rows)`), mapped into the windows' rows on large members.
    fn any_row(&self, a: &Array, r: &mut SplitMix64) -> u64 {
        let row = r.below(a.rows());
        match self.large.get() {
            Some(l) => l.nth_row(row),
            None => row,
        }
    }

    fn new_member(&self) -> (PathBuf, Arc<SimMember>) {
        let i = self.next_member.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(format!("/sim/m{i}"));
        let m = Arc::new(SimMember::new(
            &path.display().to_string(),
            Image::zeroed(self.member_bytes),
            self.power.lock().expect("power lock").clone(),
        ));
        self.store.insert(&path, m.clone());
        (path, m)
    }
}

/// Runs seed `seed`.
pub fn run(seed: u64) -> Result<Report, Failure> {
    run_spec(seed, Spec::draw(seed))
}

/// Runs seed `seed` as it ran when it was named a regression test: without the event kinds
/// added to the simulator since (checksum table damage, rot, large members, process crashes,
/// small bitmap chunks), so the test keeps replaying the run that found its bug.
pub fn run_as_named(seed: u64) -> Result<Report, Failure> {
    let mut spec = Spec::draw(seed);
    spec.table_damage = false;
    spec.rot = false;
    spec.large = false;
    spec.kills = false;
    spec.bitmap_rows = None;
    run_spec(seed, spec)
}

/// Runs seed `seed` with every crash a power cut (the run a seed named before process crashes
/// were drawn had; nor small bitmap chunks, drawn later still).
pub fn run_power_cuts_only(seed: u64) -> Result<Report, Failure> {
    let mut spec = Spec::draw(seed);
    spec.kills = false;
    spec.bitmap_rows = None;
    run_spec(seed, spec)
}

/// Runs seed `seed` with everything it draws but large members (the run a seed named with
/// silent rot had before large members were drawn; nor small bitmap chunks, drawn later still).
pub fn run_small(seed: u64) -> Result<Report, Failure> {
    let mut spec = Spec::draw(seed);
    spec.large = false;
    spec.bitmap_rows = None;
    run_spec(seed, spec)
}

fn run_spec(seed: u64, spec: Spec) -> Result<Report, Failure> {
    let desc = spec.describe();
    let sched = Sched::new(seed, 2_000_000);
    sched.observe();
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_inner(seed, &spec, &sched)
    }));
    Sched::leave();
    let (world, res) = match out {
        Ok(x) => x,
        Err(p) => {
            let what = panic_text(&p);
            return Err(Failure {
                seed,
                spec: desc,
                what: format!("panic in the run: {what}"),
                log: vec![],
            });
        }
    };
    let log: Vec<String> = world
        .log
        .lock()
        .expect("log lock")
        .iter()
        .cloned()
        .collect();
    if std::env::var_os("SIM_PRINT_LOG").is_some() {
        // Debugging a seed that passes: its last events, as a failure would print them.
        log.iter().for_each(|l| eprintln!("  {l}"));
    }
    match res {
        Ok(cuts) => {
            let (steps, digest) = sched.trace_digest();
            Ok(Report {
                seed,
                spec: desc,
                steps,
                digest,
                power_cuts: cuts,
            })
        }
        Err(what) => Err(Failure {
            seed,
            spec: desc,
            what,
            log,
        }),
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if p.downcast_ref::<Aborted>().is_some() {
        "aborted by the scheduler".into()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "panic".into()
    }
}

fn run_inner(seed: u64, spec: &Spec, sched: &Arc<Sched>) -> (Arc<World>, Result<usize, String>) {
    let c = spec.params.chunk_bytes;
    let member_bytes = if spec.large {
        LARGE_MEMBER
    } else {
        DATA_OFFSET_GUESS + spec.rows * c
    };
    let world = Arc::new(World {
        store: Store::default(),
        model: Mutex::new(Model::new(0)),
        power: Mutex::new(Arc::new(AtomicBool::new(true))),
        cut_at: AtomicU64::new(u64::MAX),
        log: Mutex::new(VecDeque::new()),
        failed: Mutex::new(None),
        next_member: AtomicU64::new(0),
        member_bytes,
        slow: AtomicBool::new(false),
        injected_rows: Mutex::new(BTreeSet::new()),
        damaged_pages: Mutex::new(BTreeSet::new()),
        rot_at_crash: Mutex::new(BTreeMap::new()),
        jobs_wrote: AtomicBool::new(false),
        lifecycle_acted: AtomicBool::new(false),
        rot_marks: Mutex::new(Vec::new()),
        exposed_rows: Mutex::new(BTreeSet::new()),
        torn_rows: Mutex::new(BTreeSet::new()),
        torn_cells: Mutex::new(BTreeSet::new()),
        torn_blocks: Mutex::new((BTreeSet::new(), BTreeSet::new())),
        copied_from: Mutex::new(BTreeMap::new()),
        epoch_lost: AtomicU64::new(0),
        recent_rows: Mutex::new(VecDeque::new()),
        large: std::sync::OnceLock::new(),
        pending: Mutex::new(fresh_pending()),
    });
    let r = (|| -> Result<usize, String> {
        let mut rng = SplitMix64(seed);
        let members: Vec<(PathBuf, Arc<dyn Member>)> = (0..spec.params.members)
            .map(|_| {
                let (p, m) = world.new_member();
                (p, m as Arc<dyn Member>)
            })
            .collect();
        let cs = CreateSpec {
            name: "sim".into(),
            layout: spec.params.clone(),
            overprovision_pct: 0.0,
            endurance_bytes: vec![],
            history_interval: 86_400,
            checksums: spec.checksums,
            bitmap_chunk: spec.bitmap_rows.map(|b| b * spec.params.chunk_bytes),
        };
        let mut array =
            Array::create_on(members, &cs, &mut |_, _| {}).map_err(|e| format!("create: {e}"))?;
        array
            .set_stripe_cache(spec.stripe_cache)
            .map_err(|e| e.to_string())?;
        array.set_clear_policy(spec.clear_policy());
        adopt_pending(&world, &array)?;
        *world.model.lock().expect("model lock") = Model::new(array.size());
        if spec.large {
            let l = Large::draw(&array, &mut SplitMix64(seed ^ LARGE_STREAM ^ 0x3d));
            world.note(
                sched,
                format!(
                    "large members: {} bytes of array, {} rows, windows {:?}, rows {:?}, read back {:?}",
                    array.size(),
                    array.rows(),
                    l.windows,
                    l.rows,
                    l.reads
                ),
            );
            let _ = world.large.set(l);
        }
        let mut cuts = 0;
        let mut rot_rng = SplitMix64(seed ^ ROT_STREAM ^ 0xc0ffee);
        for epoch in 0..spec.epochs {
            world.epoch_lost.store(0, Ordering::SeqCst);
            world.lifecycle_acted.store(false, Ordering::SeqCst);
            observe_slots(&world, &array);
            let cut = rng.below(100) < 45;
            let base = sched.steps();
            world.cut_at.store(
                if cut {
                    base + 20 + rng.below(1500)
                } else {
                    u64::MAX
                },
                Ordering::SeqCst,
            );
            epoch_run(&world, &array, spec, sched, seed ^ (epoch as u64) << 32)?;
            if let Some(f) = world.failed.lock().expect("fail lock").clone() {
                return Err(f);
            }
            let was_cut = !world.power_on();
            world.cut_at.store(u64::MAX, Ordering::SeqCst);
            if was_cut {
                cuts += 1;
                world.note(sched, format!("epoch {epoch}: power cut; restart"));
                {
                    let m = world.model.lock().expect("model lock");
                    let blocks =
                        |v: Vec<u64>| -> Vec<u64> { v.iter().take(32).map(|o| o / 4096).collect() };
                    world.note(
                        sched,
                        format!(
                            "torn 4 KiB blocks (first 32): {:?}, written twice since durable: {:?}",
                            blocks(m.unsure_blocks()),
                            blocks(m.multi_blocks())
                        ),
                    );
                }
                if spec.rot && rot_rng.below(2) == 0 {
                    // Rot just before the power goes: the resync after the restart meets it.
                    inject_rot(
                        &world,
                        &array,
                        &mut rot_rng,
                        sched,
                        true,
                        "before the power cut",
                    );
                }
                observe_slots(&world, &array);
                // Rot as the crash left it, counted until the checks after the restart.
                let rot_at_crash = rot_by_row(&world, &array);
                *world.rot_at_crash.lock().expect("rot lock") = rot_at_crash;
                let (torn, multi) = {
                    let m = world.model.lock().expect("model lock");
                    (m.unsure_blocks(), m.multi_blocks())
                };
                {
                    let mut tb = world.torn_blocks.lock().expect("torn lock");
                    tb.0.extend(torn.iter().copied());
                    tb.1.extend(multi);
                }
                {
                    let mut rows = world.torn_rows.lock().expect("torn lock");
                    let mut cells = world.torn_cells.lock().expect("torn lock");
                    let l = array.layout();
                    for &o in &torn {
                        let len = 4096.min(array.size() - o);
                        rows.extend(rows_of(l, o, len));
                        if matches!(l.redundancy(), Redundancy::Parity { .. }) {
                            let (r, d) = l.parity_locate(o / l.chunk());
                            cells.insert((r, (o % l.chunk()) / 4096, l.data_slot(r, d)));
                        }
                    }
                }
                // Every member keeps its durable image and some of what was unflushed; a
                // process crash keeps it all (and the pending entries, below).
                let keep = [0u64, 50, 100][rng.below(3) as usize];
                let kill = keep == 100
                    && spec.kills
                    && SplitMix64(seed ^ KILL_STREAM ^ epoch as u64).below(2) == 0;
                if array.layout().parity_count() == 2 {
                    // A RAID6 member in service dies with the crash (half the process crashes,
                    // a quarter of the power cuts): the resync then meets the cut writes' rows
                    // with a member missing, after a process crash with their entries restored
                    // from the pending store (the degraded resync's branches that decide by
                    // them, never reached before).
                    let mut die = SplitMix64(seed ^ KILL_STREAM ^ 0xdead ^ epoch as u64);
                    let usable: Vec<usize> = (0..array.layout().members())
                        .filter(|&s| !slot_faulty(&world, &array, s))
                        .collect();
                    if usable.len() == array.layout().members()
                        && !world.lifecycle_acted.load(Ordering::SeqCst)
                        && die.below(if kill { 2 } else { 4 }) == 0
                    {
                        let slot = usable[die.below(usable.len() as u64) as usize];
                        if let Some(m) = array.slot_path_of(slot).and_then(|p| world.store.get(&p))
                        {
                            let mut f = m.faults();
                            f.dead = true;
                            m.set_faults(f);
                            world
                                .note(sched, format!("slot {slot}: the drive dies with the crash"));
                        }
                    }
                }
                let mut lost_mask = world.epoch_lost.load(Ordering::SeqCst);
                for s in 0..array.layout().members() {
                    if slot_faulty(&world, &array, s) {
                        lost_mask |= 1 << s;
                    }
                }
                // Mirrors: where each copy of a torn block lies, to tell after the cut which
                // of them still hold its durable value.
                let copies_of: Vec<(u64, Vec<(PathBuf, u64)>)> = {
                    let l = array.layout();
                    let (c, d0) = (l.chunk(), array.data_offset_of());
                    if matches!(l.redundancy(), Redundancy::Mirror { .. }) {
                        torn.iter()
                            .map(|&o| {
                                let copies = (0..l.copies())
                                    .filter_map(|k| {
                                        let (slot, row) = l.mirror_cell(o / c, k);
                                        array
                                            .slot_usable(slot)
                                            .then(|| array.slot_path_of(slot))
                                            .flatten()
                                            .map(|p| (p, d0 + row * c + o % c))
                                    })
                                    .collect();
                                (o, copies)
                            })
                            .collect()
                    } else {
                        Vec::new()
                    }
                };
                let size = array.size();
                // Members whose bitmap counts after the cut: those in service before it.
                let bitmap_paths: Vec<PathBuf> = (0..array.layout().members())
                    .filter(|&s| array.slot_usable(s))
                    .filter_map(|s| array.slot_path_of(s))
                    .collect();
                let bitmap_geo =
                    crate::array::bitmap::BitmapGeometry::from_superblock(&array.superblock());
                let caused = caused_regions(&world, &array);
                drop(array);
                if kill {
                    world.note(sched, "a process crash: the pending entries survive".into());
                } else {
                    *world.pending.lock().expect("pending lock") = fresh_pending();
                }
                let power = Arc::new(AtomicBool::new(true));
                *world.power.lock().expect("power lock") = power.clone();
                for p in world.store.paths() {
                    let old = world.store.get(&p).expect("listed");
                    let img = old.crash_image(&mut rng, keep);
                    let m = Arc::new(SimMember::new(&p.display().to_string(), img, power.clone()));
                    m.set_faults(Faults {
                        dead: old.faults().dead,
                        ..Faults::default()
                    });
                    m.set_rotten(old.rotten());
                    world.store.insert(&p, m);
                }
                // Torn mirror blocks whose durable value no copy holds after the cut: each copy
                // holds a later write (never flushed, its entries lost with the power), which
                // nothing can verify; the durable value is gone, so listing them is no loss
                // (simulator seed 907: one copy flushed by a flush the write began after).
                let durable_gone: BTreeSet<u64> = {
                    let m = world.model.lock().expect("model lock");
                    copies_of
                        .iter()
                        .filter(|(o, copies)| {
                            let (want, unknown) = m.durable_block(*o);
                            let len = 4096.min(size - o) as usize;
                            !copies.iter().any(|(p, at)| {
                                let Some(mem) = world.store.get(p) else {
                                    return false;
                                };
                                let mut got = [0u8; 4096];
                                mem.peek_live(*at, &mut got[..len]);
                                (0..len).all(|i| unknown[i] || got[i] == want[i])
                            })
                        })
                        .map(|(o, _)| *o)
                        .collect()
                };
                let mut marked = marked_regions(&world, &bitmap_paths, bitmap_geo);
                if let Some(caused) = caused {
                    marked.regions.retain(|r| caused.contains(r));
                }
                array = reopen(&world, sched, spec.clear_policy())?;
                for s in 0..array.layout().members() {
                    if !array.slot_usable(s) {
                        lost_mask |= 1 << s;
                    }
                }
                // After a process crash every block a cut write left newer than its entry has
                // its entry back (pending store): the resync decides every row it meets, by
                // checksums, unless damage the run injected leaves a row with too little to
                // decide by.
                if kill
                    && array.has_checksums()
                    && !spec.table_damage
                    && !spec.rot
                    && lost_mask == 0
                    && array.unchecked_bytes() > 0
                {
                    return Err(format!(
                        "after a process crash the resync left {} bytes unverified (pending entries not restored?)",
                        array.unchecked_bytes()
                    ));
                }
                let (got, bad, unverified) = read_image(&world, &array, "read after restart")?;
                crash_bound(
                    &world,
                    &array,
                    &torn,
                    lost_mask,
                    &bad,
                    &durable_gone,
                    &marked,
                )?;
                world
                    .model
                    .lock()
                    .expect("model lock")
                    .after_crash(&got, &bad, &unverified)?;
                let rep = scrub::run(
                    &array,
                    &world.job_rows(&array),
                    Mode::Scrub { repair: false },
                    None,
                    &mut |_, _| {},
                )
                .map_err(|e| format!("scrub after restart: {e}"))?;
                if let Some(p) = unexplained(&world, &array, spec, &rep.problems) {
                    return Err(format!(
                        "after the power cut and resync, scrub finds {} problems, one that no injected fault explains: {p:?}",
                        rep.problems.len(),
                    ));
                }
                world.rot_at_crash.lock().expect("rot lock").clear();
            } else if rng.below(2) == 0 {
                world.note(sched, format!("epoch {epoch}: clean stop; restart"));
                // Members in service that can still take the close's bitmap write (one whose
                // drive died or fails writes is failed by it instead).
                let paths: Vec<PathBuf> = (0..array.layout().members())
                    .filter(|&s| array.slot_usable(s))
                    .filter_map(|s| array.slot_path_of(s))
                    .filter(|p| {
                        world.store.get(p).is_some_and(|m| {
                            let f = m.faults();
                            !f.dead && f.write_errno.is_none()
                        })
                    })
                    .collect();
                let geo =
                    crate::array::bitmap::BitmapGeometry::from_superblock(&array.superblock());
                array.close().map_err(|e| format!("close: {e}"))?;
                // A clean close clears every write-intent bit (a bit left set would make the
                // next unclean stop resync, and without checksums list, more than it must).
                let left = marked_regions(&world, &paths, geo);
                if !left.regions.is_empty() {
                    let on: Vec<String> = paths
                        .iter()
                        .filter(|p| {
                            !marked_regions(&world, std::slice::from_ref(*p), geo)
                                .regions
                                .is_empty()
                        })
                        .map(|p| p.display().to_string())
                        .collect();
                    return Err(format!(
                        "after a clean close the members still hold write-intent bits of regions {:?} (on {on:?})",
                        left.regions.iter().take(8).collect::<Vec<_>>()
                    ));
                }
                world.model.lock().expect("model lock").clean_stop();
                world.jobs_wrote.store(false, Ordering::SeqCst);
                array = reopen(&world, sched, spec.clear_policy())?;
            }
        }
        final_checks(&world, &array, spec, sched, &mut rng)?;
        Ok(cuts)
    })();
    (world, r)
}

/// What a read back gives: segments of the array (offset, bytes; in order, 4 KiB aligned).
type Segments = Vec<(u64, Vec<u8>)>;

/// Reads the whole array (on large members: the windows and the never-written pages of
/// [`Large::reads`]). Blocks on its bad-block list fail to read (that is their point): they are
/// left zero and returned apart, after checking that each follows a crash that lost a member
/// (the model knows which blocks a crash may have lost).
/// Reads back what the model checks (`w.large`'s ranges, or the whole array): the bytes, the
/// 4 KiB blocks that failed (on the bad-block list, or beyond what the level corrects; zeros
/// in the bytes), and which of those failed only because nothing could verify them now (not
/// listed: they may read once redundancy returns).
type ReadBack = (Segments, Vec<u64>, Vec<u64>);

fn read_image(w: &World, a: &Array, what: &str) -> Result<ReadBack, String> {
    let ranges = match w.large.get() {
        Some(l) => l.reads.clone(),
        None => vec![0..a.size()],
    };
    let mut segs = Vec::with_capacity(ranges.len());
    let mut bad = Vec::new();
    let mut unverified = Vec::new();
    for x in ranges {
        let mut got = vec![0u8; (x.end - x.start) as usize];
        if a.read(&mut got, x.start).is_err() {
            for off in (x.start..x.end).step_by(4096) {
                let len = 4096.min(x.end - off);
                let i = (off - x.start) as usize;
                let out = &mut got[i..i + len as usize];
                match a.read(out, off) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::BadBlock => {
                        out.fill(0);
                        bad.push(off);
                    }
                    // Beyond what the level corrects (the bound checks it): an error, not a
                    // guess.
                    Err(_) if unrecoverable(w, a, off, len) => {
                        out.fill(0);
                        bad.push(off);
                        unverified.push(off);
                    }
                    Err(e) => return Err(format!("{what}: 4 KiB block {}: {e}", off / 4096)),
                }
            }
        }
        segs.push((x.start, got));
    }
    Ok((segs, bad, unverified))
}

/// Checks what [`read_image`] read against the model: bad blocks must be ones a crash lost.
fn check_image(
    w: &World,
    a: &Array,
    segs: &Segments,
    bad: &[u64],
    what: &str,
) -> Result<(), String> {
    let size = a.size();
    let unrec: Vec<bool> = bad
        .iter()
        .map(|&o| unrecoverable(w, a, o, 4096.min(size - o)))
        .collect();
    let mut m = w.model.lock().expect("model lock");
    let mut bad = bad.iter().zip(unrec).peekable();
    for (base, got) in segs {
        let end = base + got.len() as u64;
        let mut from = *base;
        while let Some((&o, unrec)) = bad.next_if(|(&o, _)| o < end) {
            let len = 4096.min(end - o);
            if !m.was_lost(o, len as usize) && !unrec {
                return Err(format!(
                    "{what}: 4 KiB block {} fails to read (needless loss): no crash lost it and its row keeps the redundancy to rebuild it",
                    o / 4096
                ));
            }
            m.check_read(from, &got[(from - base) as usize..(o - base) as usize])
                .map_err(|e| format!("{what}: {e}"))?;
            from = o + len;
        }
        m.check_read(from, &got[(from - base) as usize..])
            .map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// An empty pending-entries store (tmpfs after a boot).
fn fresh_pending() -> Backing {
    Backing::Memory(Arc::new(std::sync::Mutex::new(Vec::new())))
}

/// Gives the array the world's pending store, as `raidctl` does at a writable open (restoring
/// the entries a process crash left).
fn adopt_pending(world: &World, a: &Array) -> Result<(), String> {
    let backing = world.pending.lock().expect("pending lock").clone();
    let (found, store) = PendingStore::open(backing, &a.superblock().array_uuid, [0x5e; 16])
        .map_err(|e| format!("pending store: {e}"))?;
    a.adopt_pending(found, store)
        .map(|_| ())
        .map_err(|e| format!("restoring pending entries: {e}"))
}

/// Assembles the array from the store the way `raidctl` does: name a member (a stale one is
/// refused, so try the next), resync after an unclean stop, promote spares.
fn reopen(world: &World, sched: &Arc<Sched>, clear: ClearPolicy) -> Result<Array, String> {
    let opts = AssembleOptions {
        writable: true,
        ..Default::default()
    };
    let mut why = Vec::new();
    for p in world.store.paths() {
        match Array::open_from(&world.store, &p, &opts) {
            Ok(a) => {
                a.set_clear_policy(clear);
                adopt_pending(world, &a)?;
                let mut resynced = String::new();
                if !a.superblock().clean {
                    let dirty = a.dirty_rows();
                    let n: u64 = dirty.iter().map(|x| x.end - x.start).sum();
                    let region = a.bitmap_region_rows().unwrap_or(a.rows());
                    if world.large.get().is_some() && n > 64 * region {
                        // The windows and the rebuild passes dirty a dozen regions at most.
                        return Err(format!(
                            "resync after restart: {n} dirty rows of {} ({} regions): more than the run wrote (a resync of this size cannot run in a simulator)",
                            a.rows(),
                            dirty.len()
                        ));
                    }
                    let rep = scrub::run(&a, &dirty, Mode::Resync, None, &mut |_, _| {})
                        .map_err(|e| format!("resync after restart: {e}"))?;
                    // The first 8 problems; `SIM_ALL_PROBLEMS=1` lists every one.
                    let probs: Vec<String> = rep
                        .problems
                        .iter()
                        .take(if std::env::var_os("SIM_ALL_PROBLEMS").is_some() {
                            usize::MAX
                        } else {
                            8
                        })
                        .map(|p| {
                            format!(
                                "row {} slot {} {} {}{}",
                                p.row,
                                p.slot,
                                p.kind,
                                if p.repaired { "repaired" } else { "unrepaired" },
                                if p.note.is_empty() {
                                    String::new()
                                } else {
                                    format!(" ({})", p.note)
                                }
                            )
                        })
                        .collect();
                    resynced = format!(
                        "; resync of rows {dirty:?}: {} problems, {} unrepaired {probs:?}",
                        rep.problems.len(),
                        rep.unrepaired()
                    );
                }
                if !a
                    .promote_spares()
                    .map_err(|e| format!("promote spares: {e}"))?
                    .is_empty()
                {
                    world.jobs_wrote.store(true, Ordering::SeqCst);
                }
                world.note(sched, format!("reassembled from {}{resynced}", p.display()));
                return Ok(a);
            }
            Err(e) => why.push(format!("{}: {e}", p.display())),
        }
    }
    Err(format!(
        "no member assembles the array: {}; superblocks: {}",
        why.join("; "),
        superblock_summary(world)
    ))
}

/// Each member's newest superblock in one line: events and the role of every slot it lists.
fn superblock_summary(world: &World) -> String {
    let mut out = Vec::new();
    for p in world.store.paths() {
        let Some(m) = world.store.get(&p) else {
            continue;
        };
        let line = match crate::format::probe(m.as_ref()) {
            Ok(crate::format::Probe::Valid(l)) => {
                let roles: Vec<String> =
                    l.sb.slots
                        .iter()
                        .map(|e| format!("{}={:?}", e.path_hint, e.state))
                        .collect();
                format!(
                    "events {} gen {} slot {} [{}]",
                    l.sb.events,
                    l.generation,
                    l.sb.slot,
                    roles.join(" ")
                )
            }
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("{e}"),
        };
        out.push(format!("{}: {line}", p.display()));
    }
    out.join("; ")
}

fn epoch_run(
    world: &Arc<World>,
    array: &Array,
    spec: &Spec,
    sched: &Arc<Sched>,
    seed: u64,
) -> Result<(), String> {
    let size = array.size();
    let mut rng = SplitMix64(seed ^ 0xe90c);
    // Client ranges: contiguous, split at byte offsets that are not row-aligned.
    let mut cuts: Vec<u64> = (1..spec.clients).map(|_| rng.below(size)).collect();
    cuts.sort_unstable();
    let mut bounds = vec![0];
    bounds.extend(cuts);
    bounds.push(size);
    let mut actors: Vec<(usize, Box<dyn FnOnce() + Send + '_>)> = Vec::new();
    for k in 0..spec.clients {
        let mut ranges: Vec<std::ops::Range<u64>> = match world.large.get() {
            // Large members: client k writes windows k, k + clients, ... (one actor a window).
            Some(l) => l
                .windows
                .iter()
                .skip(k)
                .step_by(spec.clients)
                .cloned()
                .collect(),
            None => vec![bounds[k]..bounds[k + 1]],
        };
        ranges.retain(|x| x.end > x.start);
        if ranges.is_empty() {
            continue;
        }
        let id = sched.add_actor(&format!("client{k}"));
        let seed = rng.next_u64();
        let w = world.clone();
        let s = sched.clone();
        actors.push((id, Box::new(move || client(&w, array, &s, k, ranges, seed))));
    }
    let id = sched.add_actor("lifecycle");
    let lseed = rng.next_u64();
    let (w, s) = (world.clone(), sched.clone());
    actors.push((id, Box::new(move || lifecycle(&w, array, spec, &s, lseed))));
    if spec.scrubber {
        let id = sched.add_actor("scrubber");
        let sseed = rng.next_u64();
        let (w, s) = (world.clone(), sched.clone());
        actors.push((id, Box::new(move || scrubber(&w, array, &s, sseed))));
    }
    if spec.rot {
        let id = sched.add_actor("rot");
        let rseed = SplitMix64(seed ^ ROT_STREAM).next_u64();
        let (w, s) = (world.clone(), sched.clone());
        actors.push((id, Box::new(move || rotter(&w, array, &s, rseed))));
    }
    let abort = std::thread::scope(|sc| {
        for (id, f) in actors {
            let s = sched.clone();
            let w = world.clone();
            sc.spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.enter(id, f)));
                if let Err(p) = r {
                    if p.downcast_ref::<Aborted>().is_none() {
                        w.fail(format!("actor {id} panicked: {}", panic_text(&p)));
                    }
                }
            });
        }
        sched.run_until_done()
    });
    match abort {
        Some(Abort::Deadlock(who)) => Err(format!(
            "deadlock: every actor waits for a lock ({who}); where: {}",
            sched.stuck().join(" | ")
        ) + &sched.leaked()),
        Some(Abort::Steps(n)) => Err(format!(
            "no end after {n} scheduler steps (livelock or hang)"
        )),
        None => Ok(()),
    }
}

/// Checks the power after an operation: false once it is cut (the epoch is over; nothing
/// completed after the cut counts as acknowledged).
fn cut_now(w: &World, sched: &Sched) -> bool {
    if !w.power_on() {
        return true;
    }
    if sched.steps() >= w.cut_at.load(Ordering::SeqCst) {
        w.power
            .lock()
            .expect("power lock")
            .store(false, Ordering::SeqCst);
        w.note(sched, "power cut".into());
        return true;
    }
    false
}

/// The longest a client request may wait in virtual time (the engine promises one small batch).
const MAX_REQUEST_WAIT: Duration = Duration::from_secs(10);

/// A client: writes, reads, flushes and trims in `ranges` (one range on small members: no draw
/// picks it, so those runs replay as before; the windows of this client on large members).
fn client(
    w: &World,
    a: &Array,
    sched: &Sched,
    k: usize,
    ranges: Vec<std::ops::Range<u64>>,
    seed: u64,
) {
    let mut r = SplitMix64(seed);
    let chunk = a.layout().chunk();
    let row = chunk * a.layout().data_per_row().max(1) as u64;
    let ops = 15 + r.below(40);
    for i in 0..ops {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        let range = if ranges.len() > 1 {
            ranges[r.below(ranges.len() as u64) as usize].clone()
        } else {
            ranges[0].clone()
        };
        let span = range.end - range.start;
        let len = match r.below(6) {
            0 => 1 + r.below(600),
            1 => 4096 * (1 + r.below(4)),
            2 => 1 + r.below(3 * chunk),
            3 => row * (1 + r.below(2)),
            _ => 1 + r.below(2 * chunk),
        }
        .min(span);
        let mut off = range.start + r.below(span - len + 1);
        if r.below(3) == 0 {
            // Aligned starts too (whole blocks, chunks, rows).
            let a = [4096, chunk, row][r.below(3) as usize];
            let al = off / a * a;
            if al >= range.start {
                off = al;
            }
        }
        let t0 = crate::clock::Instant::now();
        let what = r.below(20);
        // A FUA write or a flush waits for the writes in flight when it begins (their records
        // must land before its checksum-log cut: csum.rs, epochs), each bounded as any request
        // is: its own bound is twice the one request's (simulator seed 46101599: a FUA write
        // on a degraded RAID6 during a rebuild waited 5 s for its own journaled rows and 5 s for
        // another client's).
        let mut flushes = false;
        let outcome = match what {
            0..=8 => {
                let fua = r.below(4) == 0;
                flushes = fua;
                let fill = (r.next_u64() as u8) | 1;
                let mut data = vec![fill; len as usize];
                data[0] = i as u8;
                w.model
                    .lock()
                    .expect("model lock")
                    .begin_write(off, data.len());
                // Parity rows the run's faults made unrecoverable: a write into one may list
                // the row's blocks nothing verifies (which is wrong cannot be told), now or when
                // the stripe cache destages it, and those then may fail until written whole,
                // though the faults that made the row so may be gone (rot written over) by the
                // time they are read.
                let unrec_chunks = doubtful_chunks_under(w, a, off, len);
                let res = a.write(&data, off).and_then(|()| {
                    if fua {
                        a.flush_range(off, len)
                    } else {
                        Ok(())
                    }
                });
                let cut = cut_now(w, sched);
                let ok = res.is_ok() && !cut;
                {
                    let mut m = w.model.lock().expect("model lock");
                    m.end_write(off, &data, ok);
                    for r in &unrec_chunks {
                        m.mark_was_lost(r.clone(), off..off + len);
                    }
                    if ok && fua {
                        // A FUA write is durable (its own cells: other writes completed before
                        // it only by a flush).
                        m.fua_end(off, data.len());
                    }
                }
                {
                    let rows = rows_of(a.layout(), off, len);
                    let mut rr = w.recent_rows.lock().expect("recent lock");
                    rr.push_back(rows.start);
                    rr.push_back(rows.end - 1);
                    while rr.len() > 16 {
                        rr.pop_front();
                    }
                }
                w.note(
                    sched,
                    format!(
                        "client{k} write{} {len} at {off}: {:?}",
                        if fua { "+fua" } else { "" },
                        err_of(&res)
                    ),
                );
                if let Err(e) = res {
                    // A write of part of a block a crash lost cannot be merged with the rest.
                    let lost_block = e.kind() == ErrorKind::BadBlock
                        && w.model.lock().expect("model lock").was_lost(
                            off / 4096 * 4096,
                            ((off + len).div_ceil(4096) * 4096).min(a.size()) as usize
                                - (off / 4096 * 4096) as usize,
                        );
                    // A partial write to a row beyond what the level corrects cannot verify
                    // the old bytes its parity update needs.
                    let unrec = unrecoverable(w, a, off, len);
                    if !cut && !lost_block && !unrec && a.state() != ArrayState::Failed {
                        w.fail(format!(
                            "client{k}: write of {len} at {off} failed while the array is {}: {e}",
                            a.state().name()
                        ));
                    }
                }
                Ok(())
            }
            9..=14 => {
                let mut got = vec![0u8; len as usize];
                let res = a.read(&mut got, off);
                let cut = cut_now(w, sched);
                w.note(
                    sched,
                    format!("client{k} read {len} at {off}: {:?}", err_of(&res)),
                );
                match res {
                    Ok(()) if !cut => w.model.lock().expect("model lock").check_read(off, &got),
                    Ok(()) => Ok(()),
                    Err(e) if cut || a.state() == ArrayState::Failed => {
                        let _ = e;
                        Ok(())
                    }
                    Err(e)
                        if e.kind() == ErrorKind::BadBlock
                            && w.model
                                .lock()
                                .expect("model lock")
                                .was_lost(off, len as usize) =>
                    {
                        Ok(())
                    }
                    // More cells of a row lost or rotten than the level corrects.
                    Err(_) if unrecoverable(w, a, off, len) => Ok(()),
                    Err(e) => Err(format!(
                        "read of {len} at {off} failed while the array is {}: {e}",
                        a.state().name()
                    )),
                }
            }
            15..=17 => {
                flushes = true;
                let seq0 = w.model.lock().expect("model lock").flush_begin();
                let res = a.flush();
                let cut = cut_now(w, sched);
                w.note(sched, format!("client{k} flush: {:?}", err_of(&res)));
                if res.is_ok() && !cut {
                    w.model.lock().expect("model lock").flush_end(seq0);
                }
                Ok(())
            }
            _ => {
                w.model
                    .lock()
                    .expect("model lock")
                    .begin_write(off, len as usize);
                let res = a.trim(off, len);
                let mut got = vec![0u8; len as usize];
                let rd = a.read(&mut got, off);
                let cut = cut_now(w, sched);
                w.note(
                    sched,
                    format!(
                        "client{k} trim {len} at {off}: {:?}",
                        res.as_ref().map_err(|e| e.to_string())
                    ),
                );
                let mut m = w.model.lock().expect("model lock");
                if res.is_ok() && rd.is_ok() && !cut {
                    m.end_trim(off, &got)
                } else {
                    m.end_write(off, &got, false);
                    Ok(())
                }
            }
        };
        observe_slots(w, a);
        if let Err(e) = outcome {
            w.fail(format!("client{k}: {e}"));
            return;
        }
        let waited = t0.elapsed();
        let bound = if flushes {
            2 * MAX_REQUEST_WAIT
        } else {
            MAX_REQUEST_WAIT
        };
        if waited > bound && w.power_on() && !w.slow.load(Ordering::Relaxed) {
            w.fail(format!("client{k}: a request of {len} bytes at {off} took {:.1} s of virtual time (the engine promises at most one small batch of waiting)", waited.as_secs_f64()));
            return;
        }
    }
}

/// Members out of service, plus those carrying an injected fault the array has not met yet
/// (a dead drive, failing writes, unreadable blocks): another fault is injected only while
/// this stays below what the level tolerates, so every block keeps some redundancy.
fn burden(w: &World, a: &Array) -> usize {
    (0..a.layout().members())
        .filter(|&s| {
            !a.slot_usable(s)
                || a.slot_path_of(s)
                    .and_then(|p| w.store.get(&p))
                    .is_some_and(|m| {
                        let f = m.faults();
                        f.dead
                            || f.write_errno.is_some()
                            || !f.bad_reads.is_empty()
                            || f.flip_reads.is_some()
                    })
        })
        .count()
}

/// True when one more member may fail (or one more fault be injected) without losing data:
/// the members [`burden`] counts plus the most rotten cells of any row stay below what the
/// level tolerates.
fn spare_tolerance(w: &World, a: &Array) -> bool {
    let rot = most_rot(w, a, &rot_by_row(w, a));
    burden(w, a) + rot < a.layout().tolerance() && a.state() != ArrayState::Failed
}

/// The most rotten cells of one row, or (mirrors) of one logical chunk's copies.
fn most_rot(w: &World, a: &Array, rot: &BTreeMap<u64, u64>) -> usize {
    let rows = rot
        .values()
        .map(|m| m.count_ones() as usize)
        .max()
        .unwrap_or(0);
    rows.max(rot_by_chunk(w, a, rot).values().copied().max().unwrap_or(0))
}

/// Mirrors: rotten copies per logical chunk (a chunk's copies may lie in two member rows, when
/// the members are not a multiple of the copies: per row counts miss two rotten copies of one
/// chunk). Empty for parity levels.
fn rot_by_chunk(_w: &World, a: &Array, rot: &BTreeMap<u64, u64>) -> BTreeMap<u64, usize> {
    let l = a.layout();
    let mut out = BTreeMap::new();
    if matches!(l.redundancy(), Redundancy::Parity { .. }) {
        return out;
    }
    for (&row, &mask) in rot {
        for s in 0..l.members() {
            if mask & (1 << s) != 0 {
                if let Some((c, _)) = l.mirror_chunk_at(a.rows(), s, row) {
                    *out.entry(c).or_insert(0) += 1;
                }
            }
        }
    }
    out
}

/// Whether a slot is out of service or carries an injected fault that makes it one (dead,
/// failing writes, unreadable blocks, a pending transient flip).
fn slot_faulty(w: &World, a: &Array, s: usize) -> bool {
    !a.slot_usable(s)
        || a.slot_path_of(s)
            .and_then(|p| w.store.get(&p))
            .is_some_and(|m| {
                let f = m.faults();
                f.dead
                    || f.write_errno.is_some()
                    || !f.bad_reads.is_empty()
                    || f.flip_reads.is_some()
            })
}

/// Records the slots out of service now in the epoch's mask, and (redundant levels) the rows
/// exposed now: covered by a damaged table page of a member in service while no redundancy is
/// left.
fn observe_slots(w: &World, a: &Array) {
    let mut mask = 0;
    for s in 0..a.layout().members() {
        if !a.slot_usable(s) {
            mask |= 1u64 << s;
        }
    }
    w.epoch_lost.fetch_or(mask, Ordering::SeqCst);
    let l = a.layout();
    // RAID0 keeps no second copy: its unchecked blocks are read as they lie (io.rs).
    let redundant = match l.redundancy() {
        Redundancy::Parity { .. } => true,
        Redundancy::Mirror { copies } => copies >= 2,
    };
    if !redundant {
        return;
    }
    // Rows where rot on members in service and the slots out of service together are more
    // than the level tolerates: a rebuild or resync now can only list them (simulator seed
    // 1127: RAID6 with two slots out and rot in a third, rebuilt; the rows were listed, then
    // read as unexplained once the slots were back).
    // (Parity levels: a mirror's copies are sets of their own, whose slots the row's count
    // would mix.)
    let faulty = faulty_slots(w, a);
    if faulty != 0 && matches!(l.redundancy(), Redundancy::Parity { .. }) {
        let mut exposed = w.exposed_rows.lock().expect("exposed lock");
        for (row, rotten) in rot_by_row(w, a) {
            if ((faulty | rotten).count_ones() as usize) > l.tolerance() {
                exposed.insert((row, row + 1));
            }
        }
    }
    if (faulty.count_ones() as usize) < l.tolerance() {
        return;
    }
    let damaged = w.damaged_pages.lock().expect("damage lock").clone();
    if damaged.is_empty() {
        return;
    }
    let per_row = l.chunk() / 4096;
    let mut exposed = w.exposed_rows.lock().expect("exposed lock");
    for s in 0..l.members() {
        let Some(p) = a.slot_path_of(s) else {
            continue;
        };
        for old in lineage(w, &p) {
            for (_, pg) in damaged.range((old.clone(), 0)..=(old.clone(), u64::MAX)) {
                let blocks = pg * PER_PAGE..(pg + 1) * PER_PAGE;
                exposed.insert((blocks.start / per_row, blocks.end.div_ceil(per_row)));
            }
        }
    }
}

/// Whether member row `row` was exposed ([`World::exposed_rows`]).
fn row_exposed(w: &World, row: u64) -> bool {
    w.exposed_rows
        .lock()
        .expect("exposed lock")
        .iter()
        .any(|&(r0, r1)| r0 <= row && row < r1)
}

/// Member rows that the array byte range `off..off + len` occupies.
fn rows_of(l: &Layout, off: u64, len: u64) -> std::ops::Range<u64> {
    let c = l.chunk();
    let (c0, c1) = (off / c, (off + len.max(1) - 1) / c);
    match l.redundancy() {
        Redundancy::Parity { .. } => l.parity_locate(c0).0..l.parity_locate(c1).0 + 1,
        Redundancy::Mirror { .. } => {
            l.mirror_cell(c0, 0).1..l.mirror_cell(c1, l.copies() - 1).1 + 1
        }
    }
}

/// Outstanding persistent rot of the members in service: per member row, a bit per slot whose
/// member holds rotten bytes there (members already counted by [`burden`] left out).
fn rot_by_row(w: &World, a: &Array) -> BTreeMap<u64, u64> {
    let (c, d0) = (a.layout().chunk(), a.data_offset_of());
    let mut out = BTreeMap::new();
    for s in 0..a.layout().members() {
        if slot_faulty(w, a, s) {
            continue;
        }
        let Some(path) = a.slot_path_of(s) else {
            continue;
        };
        let Some(m) = w.store.get(&path) else {
            continue;
        };
        let mut rot = m.rotten();
        // What a replace copied as it was from the member it replaced.
        let lineage = lineage(w, &path);
        for old in &lineage[1..] {
            if let Some(o) = w.store.get(old) {
                rot.extend(o.rotten());
            }
        }
        // Rotten bytes of the member or of one it copied that it still holds, however it got
        // them back. With the power cut (before the restart takes the crash images), also
        // those its durable image holds: an unflushed write over rot may be lost with the power
        // and the rot come back (simulator seed 46408785: a RAID10 copy's rot covered by a
        // write the cut undid, counted as gone, so rot was let onto the other copy of the block
        // and the array's listing of it was taken for needless loss).
        let cut = !w.power_on();
        for (origin, off, bytes) in w.rot_marks.lock().expect("rot lock").iter() {
            if !lineage.contains(origin) {
                continue;
            }
            let (mut now, mut durable) = ([0u8; 8], [0u8; 8]);
            m.peek_live(*off, &mut now);
            m.peek_durable(*off, &mut durable);
            if now == *bytes || (cut && durable == *bytes) {
                rot.push(*off..*off + 8);
            }
        }
        for r in rot {
            if r.end <= d0 {
                continue;
            }
            let (r0, r1) = ((r.start.max(d0) - d0) / c, (r.end - 1 - d0) / c);
            for row in r0..=r1 {
                *out.entry(row).or_insert(0u64) |= 1 << s;
            }
        }
    }
    for (&row, &slots) in w.rot_at_crash.lock().expect("rot lock").iter() {
        *out.entry(row).or_insert(0) |= slots;
    }
    out
}

/// Member rows `rows` of a parity level, when the run's faults just made them unrecoverable:
/// the 4 KiB blocks of their cells in doubt may fail to read from now until written whole
/// ([`Model::mark_was_lost`]), as the array may list what nothing verifies there, though the rot
/// that made the row so may be written over before the block is read.
fn note_unrecoverable_rows(w: &World, a: &Array, rows: impl IntoIterator<Item = u64>) {
    if !matches!(a.layout().redundancy(), Redundancy::Parity { .. }) {
        return;
    }
    for row in rows {
        for r in doubtful_chunks(w, a, row) {
            w.model.lock().expect("model lock").mark_was_lost(r, 0..0);
        }
    }
}

/// The array ranges of the data chunks of parity row `row` whose cells the run's faults leave in
/// doubt ([`row_doubtful_slots`]) when they leave the row beyond what its level corrects: what
/// the array may list there (nothing, when the row is not such).
fn doubtful_chunks(w: &World, a: &Array, row: u64) -> Vec<std::ops::Range<u64>> {
    let l = a.layout();
    let (c, d) = (l.chunk(), l.data_per_row() as u64);
    let lo = row * d * c;
    if lo >= a.size() || !unrecoverable(w, a, lo, (d * c).min(a.size() - lo)) {
        return Vec::new();
    }
    let doubtful = row_doubtful_slots(w, a, row);
    (0..d)
        .filter(|&i| doubtful & (1 << l.data_slot(row, i as usize)) != 0)
        .map(|i| lo + i * c..(lo + (i + 1) * c).min(a.size()))
        .collect()
}

/// [`doubtful_chunks`] of the parity rows under `off..off + len` (none on mirror levels).
fn doubtful_chunks_under(w: &World, a: &Array, off: u64, len: u64) -> Vec<std::ops::Range<u64>> {
    let l = a.layout();
    if !matches!(l.redundancy(), Redundancy::Parity { .. }) {
        return Vec::new();
    }
    let row_bytes = l.data_per_row() as u64 * l.chunk();
    (off / row_bytes..(off + len.max(1)).div_ceil(row_bytes))
        .flat_map(|r| doubtful_chunks(w, a, r))
        .collect()
}

/// True when some member row under the array range `off..off + len` has more cells out of
/// service or rotten than the level corrects: slots out of service or faulty count for every
/// row, rotten cells for their row (and, in a row with rot or that a power cut may have torn,
/// cells whose checksum table page was damaged). Conservative: per row, not per 4 KiB column, and a member with an unreadable
/// block counts as lost for every row. Mirrors: also every copy of a chunk out of service or
/// rotten (copies can sit in two member rows).
fn unrecoverable(w: &World, a: &Array, off: u64, len: u64) -> bool {
    let l = a.layout();
    if rows_of(l, off, len).any(|row| row_unrecoverable(w, a, row) || row_exposed(w, row)) {
        return true;
    }
    if torn_past_parity(w, a, off, len) {
        return true;
    }
    if matches!(l.redundancy(), Redundancy::Mirror { .. }) {
        let faulty = faulty_slots(w, a);
        let rot = rot_by_row(w, a);
        let damaged = w.damaged_pages.lock().expect("damage lock").clone();
        let torn = w.torn_rows.lock().expect("torn lock").clone();
        let c = l.chunk();
        // As for parity rows: in a row with rot or torn by a power cut, a copy whose entries a
        // damaged table page may have made unknown cannot vouch for itself.
        // (Rot or a tear on any copy of the chunk: the copies then differ, wherever they lie.)
        let unchecked = |s: usize, r: u64, ch: u64| {
            !damaged.is_empty()
                && (0..l.copies()).any(|k| {
                    let (_, r) = l.mirror_cell(ch, k);
                    rot.contains_key(&r) || torn.contains(&r)
                })
                && unchecked_slots(w, a, &damaged, r) & (1 << s) != 0
        };
        let bad = |s: usize, r: u64, ch: u64| {
            faulty & (1 << s) != 0
                || rot.get(&r).is_some_and(|m| m & (1 << s) != 0)
                || unchecked(s, r, ch)
        };
        return (off / c..=(off + len.max(1) - 1) / c).any(|ch| {
            (0..l.copies())
                .filter(|&k| {
                    let (s, r) = l.mirror_cell(ch, k);
                    bad(s, r, ch)
                })
                .count()
                > l.tolerance()
        });
    }
    false
}

/// Whether a 4 KiB block of `off..off + len` may read as an error after a power cut because
/// nothing can verify it: its own cell was torn by the cut (or is rotten, faulty or has an
/// unknown checksum entry), and either its column holds more such cells than the level's
/// redundancy can check, or the block was written more than once since it was last durable
/// (its cell may hold one unflushed version, its parity or other copy another). A write the
/// crash cut (never durable, its checksum entry not logged) cannot be told from rot there, so
/// the resync leaves the blocks failing their entries as they are, and reads of them fail
/// rather than return bytes nothing verified. Parity levels count the torn data cells of the
/// column; mirrors count rotten or faulty copies of a torn block.
fn torn_past_parity(w: &World, a: &Array, off: u64, len: u64) -> bool {
    let l = a.layout();
    let c = l.chunk();
    let rot = rot_by_row(w, a);
    let faulty = faulty_slots(w, a);
    let damaged = w.damaged_pages.lock().expect("damage lock").clone();
    let (torn_blocks, multi) = w.torn_blocks.lock().expect("torn lock").clone();
    let end = off + len.max(1);
    (off / 4096..end.div_ceil(4096)).any(|blk| {
        let o = blk * 4096;
        let me_torn = torn_blocks.contains(&o);
        let me_multi = multi.contains(&o);
        match l.redundancy() {
            Redundancy::Parity { .. } => {
                let (r, d) = l.parity_locate(o / c);
                let col = (o % c) / 4096;
                let torn = w
                    .torn_cells
                    .lock()
                    .expect("torn lock")
                    .range((r, col, 0)..=(r, col, usize::MAX))
                    .fold(0u64, |m, &(_, _, s)| m | 1 << s);
                let doubtful = faulty
                    | rot.get(&r).copied().unwrap_or(0)
                    | if damaged.is_empty() {
                        0
                    } else {
                        unchecked_slots(w, a, &damaged, r)
                    };
                let own = 1u64 << l.data_slot(r, d);
                // The parity a torn write changed is in doubt as well (its bytes and its entry
                // each old or new): with one torn data cell the others still decide it (a
                // rebuild from some parity matches one of its entries), with two or more, or
                // none left over in a degraded row, they may not. Nor when the one torn cell
                // has no entry to match (a damaged table page), or rot: which version a parity
                // holds is then decided only by another parity (simulator seed 18002486, F1: a
                // torn block with an unknown entry next to a parity the write reached).
                let degraded = (0..l.members()).any(|s| faulty & (1 << s) != 0);
                let parity_doubt = if torn.count_ones() >= 2 {
                    l.tolerance()
                } else {
                    usize::from(degraded || torn & doubtful != 0)
                };
                let at_risk = (torn | doubtful).count_ones() as usize + parity_doubt;
                (me_torn || doubtful & own != 0)
                    && torn != 0
                    && (me_multi || at_risk > l.tolerance())
            }
            Redundancy::Mirror { .. } => {
                let ch = o / c;
                let bad = (0..l.copies())
                    .filter(|&k| {
                        let (s, r) = l.mirror_cell(ch, k);
                        faulty & (1 << s) != 0 || rot.get(&r).is_some_and(|m| m & (1 << s) != 0)
                    })
                    .count();
                me_torn && (me_multi || (bad > 0 && bad >= l.tolerance()))
            }
        }
    })
}

/// As [`torn_past_parity`], for any data block of member row `row` (parity levels): blocks a
/// power cut left that nothing can verify stay failing (or listed) until written, and scrub
/// keeps reporting them.
fn row_torn_past_parity(w: &World, a: &Array, row: u64) -> bool {
    let l = a.layout();
    match l.redundancy() {
        Redundancy::Parity { .. } => {
            let span = l.data_per_row() as u64 * l.chunk();
            row * span < a.size()
                && torn_past_parity(w, a, row * span, span.min(a.size() - row * span))
        }
        Redundancy::Mirror { .. } => false,
    }
}

/// Slots out of service or faulty now (bit per slot).
fn faulty_slots(w: &World, a: &Array) -> u64 {
    let mut faulty = 0u64;
    for s in 0..a.layout().members() {
        if slot_faulty(w, a, s) {
            faulty |= 1 << s;
        }
    }
    faulty
}

/// As [`unrecoverable`], for member row `row`.
fn row_unrecoverable(w: &World, a: &Array, row: u64) -> bool {
    row_doubtful_slots(w, a, row).count_ones() as usize > a.layout().tolerance()
}

/// The slots whose cell of member row `row` the run's faults leave in doubt (bit per slot):
/// out of service or faulty, rotten, or, where that matters, on a damaged checksum table page.
fn row_doubtful_slots(w: &World, a: &Array, row: u64) -> u64 {
    let l = a.layout();
    let faulty = faulty_slots(w, a);
    let rot = rot_by_row(w, a);
    let damaged = w.damaged_pages.lock().expect("damage lock").clone();
    let rotten = rot.get(&row).copied().unwrap_or(0);
    let mut m = faulty | rotten;
    // In a row with rot, or one a power cut may have torn, cells whose checksum entries a
    // damaged table page may have made unknown cannot vouch for themselves: the row's parity
    // alone is left to tell which cell is wrong (rot and a torn write look alike), and it
    // cannot when too many are unchecked.
    // So can none in a row with no redundancy left to check them: reads refuse what nothing
    // verifies (io.rs), and writes that need them to update parity fail with them.
    let torn = w.torn_rows.lock().expect("torn lock").contains(&row);
    let unchecked_fail = faulty.count_ones() as usize >= l.tolerance();
    if (rotten != 0 || torn || unchecked_fail) && !damaged.is_empty() {
        m |= unchecked_slots(w, a, &damaged, row);
        // A slot out of service at some moment of the epoch (a rebuild target whose rows past
        // its checkpoint a power cut left unrebuilt) was no source when the resync or the
        // rebuild decided the row, whatever it holds now (simulator seed 31001106: P and Q
        // unchecked, one rotten, the missing block's member being rebuilt).
        if rotten != 0 || torn {
            m |= w.epoch_lost.load(Ordering::SeqCst);
        }
    }
    m
}

/// A member and the members a replace copied it from, newest first: what a replace could not
/// verify it copies as it was (bytes, and unknown checksum entries), so rot and table damage of
/// an old member carry over.
fn lineage(w: &World, path: &Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    let copied = w.copied_from.lock().expect("copied lock");
    while let Some(old) = copied.get(out.last().expect("non-empty")) {
        if out.contains(old) {
            break;
        }
        out.push(old.clone());
    }
    out
}

/// Slots whose checksum table page covering member row `row` was damaged, on the member or on
/// one a replace copied it from (bit per slot).
fn unchecked_slots(w: &World, a: &Array, damaged: &BTreeSet<(PathBuf, u64)>, row: u64) -> u64 {
    let per_row = a.layout().chunk() / 4096;
    let pages = row * per_row / PER_PAGE..=((row + 1) * per_row - 1) / PER_PAGE;
    let mut m = 0u64;
    for s in 0..a.layout().members() {
        if let Some(p) = a.slot_path_of(s) {
            let copies = lineage(w, &p);
            if pages
                .clone()
                .any(|pg| copies.iter().any(|c| damaged.contains(&(c.clone(), pg))))
            {
                m |= 1 << s;
            }
        }
    }
    m
}

/// Injects silent rot on a member in service whose row stays correctable: persistent (8 bytes
/// flipped in one 4 KiB block of a data or parity cell, in a row written lately or anywhere)
/// or transient (the member's next 1 to 3 data-area reads return flipped bytes).
fn inject_rot(
    w: &World,
    a: &Array,
    r: &mut SplitMix64,
    sched: &Sched,
    persistent: bool,
    when: &str,
) {
    let l = a.layout();
    let n = l.members();
    let slot = r.below(n as u64) as usize;
    let recent = {
        let rr = w.recent_rows.lock().expect("recent lock");
        (!rr.is_empty()).then(|| rr[r.below(rr.len() as u64) as usize])
    };
    let row = match recent {
        Some(x) if r.below(3) != 0 => x,
        _ => w.any_row(a, r),
    };
    let within = r.below(l.chunk() / 4096) * 4096 + r.below(4096 - 8);
    if a.state() == ArrayState::Failed || slot_faulty(w, a, slot) {
        return;
    }
    let Some(m) = a.slot_path_of(slot).and_then(|p| w.store.get(&p)) else {
        return;
    };
    let mut burden = burden(w, a);
    if !w.power_on() {
        // After a power cut the restart finds the members as the cut left them, not as the
        // array in memory went on to make them: a slot out of service at some moment of the
        // epoch (a rebuild target whose rebuild finished only after the cut) may be out again
        // (simulator seed 45002770: rot landed on the one copy in service of a RAID10 chunk
        // while the other two were rebuild targets, the rebuild having finished in memory
        // past the cut, and the model took the chunk for recoverable).
        let lost = w.epoch_lost.load(Ordering::SeqCst);
        burden += (0..n)
            .filter(|&s| lost & (1 << s) != 0 && a.slot_usable(s))
            .count();
    }
    let rot = rot_by_row(w, a);
    if persistent {
        let mut cells = (rot.get(&row).copied().unwrap_or(0) | 1 << slot).count_ones() as usize;
        // Mirrors: the rotten copies of the chunk this cell holds (they may lie in other rows).
        if let Some((c, _)) = l.mirror_chunk_at(a.rows(), slot, row) {
            let rotten = (0..l.copies())
                .filter(|&k| {
                    let (s, r) = l.mirror_cell(c, k);
                    s != slot && rot.get(&r).is_some_and(|m| m & (1 << s) != 0)
                })
                .count();
            cells = cells.max(rotten + 1);
        }
        if burden + cells > l.tolerance() {
            return;
        }
        let off = a.data_offset_of() + row * l.chunk() + within;
        m.rot(off, 8);
        let mut rotten = [0u8; 8];
        m.peek_live(off, &mut rotten);
        if let Some(p) = a.slot_path_of(slot) {
            w.rot_marks.lock().expect("rot lock").push((p, off, rotten));
        }
        w.injected_rows.lock().expect("injected lock").insert(row);
        note_unrecoverable_rows(w, a, [row]);
        w.note(
            sched,
            format!("rot ({when}): slot {slot} row {row}, member offset {off}"),
        );
    } else {
        let most = most_rot(w, a, &rot);
        if burden + most + 1 > l.tolerance() {
            return;
        }
        let mut f = m.faults();
        let reads = 1 + r.below(3) as u32;
        f.flip_reads = Some((a.data_offset_of(), reads));
        m.set_faults(f);
        w.note(
            sched,
            format!("rot ({when}): slot {slot}'s next {reads} reads return flipped bytes"),
        );
    }
}

/// Rot at random moments of an epoch: under client I/O, rebuilds, replaces and scrubs.
fn rotter(w: &World, a: &Array, sched: &Sched, seed: u64) {
    let mut r = SplitMix64(seed);
    for _ in 0..1 + r.below(4) {
        crate::clock::sleep(Duration::from_millis(r.below(1500)));
        if w.failed() || cut_now(w, sched) {
            return;
        }
        let persistent = r.below(3) != 0;
        inject_rot(w, a, &mut r, sched, persistent, "at run time");
    }
}

/// How many reads of each member returned flipped bytes so far.
fn flip_counts(w: &World) -> BTreeMap<PathBuf, usize> {
    w.store
        .paths()
        .into_iter()
        .filter_map(|p| w.store.get(&p).map(|m| (p, m.flipped().len())))
        .collect()
}

/// Member rows where a read returned flipped bytes since `before` ([`flip_counts`]).
fn flipped_rows_since(w: &World, a: &Array, before: &BTreeMap<PathBuf, usize>) -> BTreeSet<u64> {
    let (c, d0) = (a.layout().chunk(), a.data_offset_of());
    let mut out = BTreeSet::new();
    for p in w.store.paths() {
        if let Some(m) = w.store.get(&p) {
            let skip = before.get(&p).copied().unwrap_or(0);
            for (off, len) in m.flipped().into_iter().skip(skip) {
                if off + len > d0 {
                    let a0 = off.max(d0) - d0;
                    out.extend(a0 / c..=(off + len - 1 - d0) / c);
                }
            }
        }
    }
    out
}

/// Member rows where a transient flip happened (reads that returned flipped bytes).
fn flipped_rows(w: &World, a: &Array) -> BTreeSet<u64> {
    flipped_rows_since(w, a, &BTreeMap::new())
}

/// The first scrub finding that no injected fault or crash explains: a finding must lie in a
/// row where rot, an unreadable block or a transient flip was injected, or a crash lost blocks;
/// or be checksum table damage that was injected.
fn unexplained<'a>(
    w: &World,
    a: &Array,
    spec: &Spec,
    probs: &'a [scrub::Problem],
) -> Option<&'a scrub::Problem> {
    if probs.is_empty() {
        return None;
    }
    let injected = w.injected_rows.lock().expect("injected lock").clone();
    let flipped = flipped_rows(w, a);
    let lost: BTreeSet<u64> = {
        let m = w.model.lock().expect("model lock");
        m.was_lost_blocks()
            .into_iter()
            .flat_map(|o| rows_of(a.layout(), o, 4096.min(a.size() - o)))
            .collect()
    };
    let explained = |row: u64| {
        row_exposed(w, row)
            // A row a power cut tore past what its redundancy and entries can check (damaged
            // table pages beside the torn cells): the resync leaves it undecided and scrub
            // reports it (simulator seeds 11001209, 14001891).
            || row_torn_past_parity(w, a, row)
            || injected.contains(&row)
            || flipped.contains(&row)
            || lost.contains(&row)
    };
    probs.iter().find(|p| {
        !((p.kind == "checksum" && spec.table_damage)
            || problem_rows(a, p).into_iter().any(explained))
    })
}

/// The member rows a scrub finding covers: its own, or for a batch scrub could not read (named
/// by its first row) all of the batch's, any of which explains it (simulator seed 19004808:
/// the seventeenth row of the batch held an unreadable block next to a damaged table page's,
/// with no redundancy left to check them).
fn problem_rows(a: &Array, p: &scrub::Problem) -> Vec<u64> {
    let l = a.layout();
    if p.kind == "unreadable" {
        return (p.row..p.row + (p.bytes / l.chunk()).max(1)).collect();
    }
    // Mirrors: every row holding a copy of the chunk (rot on one copy makes the copies
    // differ wherever the other lies; simulator seed 26001614, RAID10 copies in two rows).
    match l.mirror_chunk_at(a.rows(), p.slot, p.row) {
        Some((c, _)) => (0..l.copies()).map(|k| l.mirror_cell(c, k).1).collect(),
        None => vec![p.row],
    }
}

/// The write-intent regions set on the members' images after a power cut: the bit of a region
/// set on any member that was in service before the cut (so at least what the next open
/// reads).
struct Marked {
    region_rows: u64,
    regions: BTreeSet<u64>,
}

impl Marked {
    fn holds(&self, row: u64) -> bool {
        self.regions.contains(&(row / self.region_rows))
    }
}

/// The regions something since the last clean stop may have marked: where a client write or
/// trim began (a clean close leaves no bit set, checked at every clean stop; the model's record
/// of writes is not the engine's bitmap); None (any region) when a job that writes member rows
/// ran (add, replace, rebuild, resync or repair by the scrubber: conservative, as their writes
/// do not mark regions today, and a joining member's image may carry old bits). A region set on
/// the members but outside these was set by nothing the run did.
fn caused_regions(w: &World, a: &Array) -> Option<BTreeSet<u64>> {
    if w.jobs_wrote.load(Ordering::SeqCst) {
        return None;
    }
    let per = a.bitmap_region_rows()?;
    let l = a.layout();
    let c = l.chunk();
    let mut out: BTreeSet<u64> = BTreeSet::new();
    for o in w.model.lock().expect("model lock").touched_blocks() {
        let len = 4096.min(a.size() - o);
        if matches!(l.redundancy(), Redundancy::Mirror { .. }) {
            for k in 0..l.copies() {
                out.insert(l.mirror_cell(o / c, k).1 / per);
            }
        } else {
            for r in rows_of(l, o, len) {
                out.insert(r / per);
            }
        }
    }
    Some(out)
}

fn marked_regions(
    w: &World,
    paths: &[PathBuf],
    geo: Option<crate::array::bitmap::BitmapGeometry>,
) -> Marked {
    let Some(geo) = geo else {
        return Marked {
            region_rows: 1,
            regions: BTreeSet::new(),
        };
    };
    let mut bits = vec![0u8; geo.bytes as usize];
    for p in paths {
        if let Some(m) = w.store.get(p) {
            let mut b = vec![0u8; bits.len()];
            m.peek_live(geo.offset, &mut b);
            bits.iter_mut().zip(&b).for_each(|(x, y)| *x |= y);
        }
    }
    Marked {
        region_rows: geo.region_rows,
        regions: (0..bits.len() as u64 * 8)
            .filter(|r| bits[(r / 8) as usize] & (1 << (r % 8)) != 0)
            .collect(),
    }
}

/// Checks the blocks a restart after a power cut put on the bad-block list (`bad`, array
/// offsets) against what the crash put at risk. A block may be lost only when
/// - it was lost at an earlier crash and not written whole since, or
/// - its row is beyond what the level corrects (cells out of service plus rotten cells), or
/// - it is torn and the crash lost a slot: for parity levels, its column (the same 4 KiB of
///   every data chunk of the row) held an unsure block (a write in flight, or completed but
///   unflushed) and its own cell is on a slot lost at the crash, or the block itself is
///   unsure; for mirrors, the block itself is unsure and a slot holding a copy is lost.
///   Also when the torn row holds rot (torn and rotten cells cannot be told apart), now or
///   at the crash ([`World::rot_at_crash`]: the resync may have written over it since), or
/// - its own cell is rotten and its entry unknown (a damaged table page) where the level has
///   one parity: nothing tells that from a write torn elsewhere in the row, or
/// - (mirrors) it is torn and no copy in service holds its durable value after the cut
///   (`durable_gone`): every copy holds a later write, none of which can be verified.
///
/// - (without checksums) its own cell is on a slot lost with the crash and its row lies in a
///   region whose write-intent bit is set on the members after the cut (`marked`, read from
///   their images, not asked of the array) and that something the run did since the last
///   clean stop may have marked ([`caused_regions`]): without checksums nothing durable says
///   which rows of a marked region a write was tearing (the bound is the bitmap chunk; a bit
///   wrongly clear shows as wrong data, which the reads check, and a bit a clean close leaves
///   set fails the run at that close).
///
/// `lost_mask` is conservative: every slot out of service at any moment of the epoch or at
/// the restart, or carrying a fault, counts as lost with the crash for every row.
fn crash_bound(
    w: &World,
    a: &Array,
    torn: &[u64],
    lost_mask: u64,
    bad: &[u64],
    durable_gone: &BTreeSet<u64>,
    marked: &Marked,
) -> Result<(), String> {
    if bad.is_empty() {
        return Ok(());
    }
    let l = a.layout();
    let c = l.chunk();
    let torn_set: BTreeSet<u64> = torn.iter().copied().collect();
    let rot = rot_by_row(w, a);
    let damaged = w.damaged_pages.lock().expect("damage lock").clone();
    // Parity: torn (row, column) pairs.
    let parity = matches!(l.redundancy(), Redundancy::Parity { .. });
    let torn_cols: BTreeSet<(u64, u64)> = torn
        .iter()
        .map(|&o| (l.parity_locate(o / c).0, (o % c) / 4096))
        .collect();
    let size = a.size();
    for &o in bad {
        let len = 4096.min(size - o);
        let (row, col) = if parity {
            (l.parity_locate(o / c).0, (o % c) / 4096)
        } else {
            (rows_of(l, o, len).start, 0)
        };
        let own_lost = if parity {
            let (r, d) = l.parity_locate(o / c);
            lost_mask & (1 << l.data_slot(r, d)) != 0
        } else {
            (0..l.copies()).any(|k| lost_mask & (1 << l.mirror_cell(o / c, k).0) != 0)
        };
        let me_torn = torn_set.contains(&o);
        let torn_row = if parity {
            torn_cols.contains(&(row, col))
        } else {
            me_torn
        };
        let rows = rows_of(l, o, len);
        let rotten = rows.clone().any(|r| rot.contains_key(&r));
        // A rotten data cell whose own entry a damaged table page made unknown, next to one
        // parity: after a power cut its disagreeing with the parity cannot be told from a write
        // the cut tore elsewhere in the row (another cell new and matching its new entry, the
        // parity old and matching its old one), so nothing decides it (simulator seed
        // 18005629, F1). A second parity would.
        let rotten_unchecked = parity && l.tolerance() == 1 && !damaged.is_empty() && {
            let (r, d) = l.parity_locate(o / c);
            let own = 1u64 << l.data_slot(r, d);
            rot.get(&r).is_some_and(|m| m & own != 0)
                && unchecked_slots(w, a, &damaged, r) & own != 0
        };
        let allowed = w
            .model
            .lock()
            .expect("model lock")
            .was_lost(o, len as usize)
            || unrecoverable(w, a, o, len)
            || (torn_row && own_lost)
            || (me_torn && lost_mask != 0)
            || (torn_row && rotten)
            || rotten_unchecked
            || durable_gone.contains(&o)
            || (!a.has_checksums() && own_lost && rows.clone().any(|r| marked.holds(r)));
        if !allowed {
            let slots: Vec<usize> = (0..l.members())
                .filter(|s| lost_mask & (1 << s) != 0)
                .collect();
            return Err(format!(
                "after the power cut: 4 KiB block {} (row {row}) is on the bad-block list (needless loss): it was not at risk ({}; slots lost with the crash: {slots:?}; {} bad blocks in all)",
                o / 4096,
                if torn_row { "its row was torn, but its own cell survived" } else { "no write in flight or unflushed in its row" },
                bad.len()
            ));
        }
    }
    Ok(())
}

fn lifecycle(w: &World, a: &Array, spec: &Spec, sched: &Sched, seed: u64) {
    let mut r = SplitMix64(seed);
    let n = a.layout().members();
    let ops = if spec.busy_lifecycle {
        6 + r.below(10)
    } else {
        2 + r.below(4)
    };
    let redundant = a.layout().tolerance() > 0;
    let mut dmg = SplitMix64(seed ^ TABLE_DAMAGE_STREAM);
    for _ in 0..ops {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        if spec.table_damage && dmg.below(3) == 0 {
            damage_a_table_page(w, a, &mut dmg, sched);
        }
        crate::clock::sleep(Duration::from_millis(r.below(400)));
        let slot = r.below(n as u64) as usize;
        let path = a.slot_path_of(slot);
        let choice = r.below(10);
        let msg = match choice {
            0 | 1 if redundant && spare_tolerance(w, a) && a.slot_usable(slot) => {
                match r.below(4) {
                    0 => format!(
                        "fail slot {slot}: {:?}",
                        a.fail(&MemberRef::Slot(slot)).err().map(|e| e.to_string())
                    ),
                    1 => {
                        // A few unreadable blocks in the data area.
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let row = w.any_row(a, &mut r);
                            let off = a.data_offset_of()
                                + row * a.layout().chunk()
                                + r.below(a.layout().chunk() / 4096) * 4096;
                            let mut f = m.faults();
                            f.bad_reads.push(off..off + 4096 * (1 + r.below(2)));
                            m.set_faults(f);
                            w.injected_rows.lock().expect("injected lock").insert(row);
                            format!("slot {slot}: unreadable blocks at member offset {off}")
                        } else {
                            String::new()
                        }
                    }
                    2 => {
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let mut f = m.faults();
                            f.write_errno = Some(if r.below(2) == 0 {
                                libc::EIO
                            } else {
                                libc::ENOSPC
                            });
                            m.set_faults(f);
                            format!("slot {slot}: writes fail")
                        } else {
                            String::new()
                        }
                    }
                    _ => {
                        let m = path.as_deref().and_then(|p| w.store.get(p));
                        if let Some(m) = m {
                            let mut f = m.faults();
                            f.dead = true;
                            m.set_faults(f);
                            format!("slot {slot}: the drive dies")
                        } else {
                            String::new()
                        }
                    }
                }
            }
            2..=4 if !a.slot_usable(slot) && !a.slot_has_target(slot) => {
                if r.below(2) == 0 {
                    // Re-add the same (stale) device, healed: it must be rebuilt, never trusted.
                    match path
                        .as_deref()
                        .and_then(|p| a.take_failed(p).map(|m| (p.to_path_buf(), m)))
                    {
                        Some((p, m)) => {
                            if let Some(sm) = w.store.get(&p) {
                                sm.set_faults(Faults::default());
                            }
                            format!("re-add {} to slot {slot}: {:?}", p.display(), {
                                w.jobs_wrote.store(true, Ordering::SeqCst);
                                a.add(m, &p, None).err().map(|e| e.to_string())
                            })
                        }
                        None => String::new(),
                    }
                } else {
                    let (p, m) = w.new_member();
                    w.jobs_wrote.store(true, Ordering::SeqCst);
                    format!(
                        "add {} for slot {slot}: {:?}",
                        p.display(),
                        a.add(m, &p, None).err().map(|e| e.to_string())
                    )
                }
            }
            5 if redundant && a.slot_usable(slot) && !a.slot_has_target(slot) => {
                let (p, m) = w.new_member();
                let old = a.slot_path_of(slot);
                w.jobs_wrote.store(true, Ordering::SeqCst);
                let res = a.replace(&MemberRef::Slot(slot), m, &p, None, false);
                // A replace copies the blocks it can neither verify nor rebuild with the old
                // member's entries: unknown entries from damaged pages (and rot) may move to
                // the copy. Where the parity-heavy role moves, the new device copies the
                // most-worn member's slot and that member then copies the heavy slot's.
                let mut copies = Vec::new();
                match &res {
                    Ok(Some(change)) => {
                        let worn = a.slot_path_of(change.heavy_to_slot);
                        if let Some(worn) = worn {
                            copies.push((p.clone(), worn.clone()));
                            copies.extend(old.map(|old| (worn, old)));
                        }
                    }
                    Ok(None) => copies.extend(old.map(|old| (p.clone(), old))),
                    Err(_) => {}
                }
                for (to, from) in copies {
                    w.copied_from
                        .lock()
                        .expect("copied lock")
                        .insert(to.clone(), from.clone());
                    let mut d = w.damaged_pages.lock().expect("damage lock");
                    let pages: Vec<u64> =
                        d.iter().filter(|(q, _)| *q == from).map(|x| x.1).collect();
                    d.extend(pages.into_iter().map(|pg| (to.clone(), pg)));
                }
                format!(
                    "replace slot {slot} with {}: {:?}",
                    p.display(),
                    res.err().map(|e| e.to_string())
                )
            }
            6..=8 if !a.pending_targets().is_empty() => {
                let max_rate = [None, None, Some(256 << 10), Some(4 << 20)][r.below(4) as usize];
                // Drawn for the rebuild's keep-roles flag, which no longer exists (spares
                // rebuild the heavy slot in place): the seeds keep their meaning.
                let _ = r.below(2);
                let mut opts = RebuildOptions {
                    max_rate,
                    min_rate: RebuildOptions::default().min_rate,
                    checkpoint_every: Duration::from_millis(50 + r.below(3000)),
                    batch_bytes: [a.layout().chunk(), 64 << 10, 8 << 20][r.below(3) as usize],
                    stop: None,
                };
                // Large members: a pass of 1 TiB cannot run here; it stops after a few batches
                // (the target stays pending at its checkpoint).
                let stop = Arc::new(AtomicBool::new(false));
                let mut batches = 0u64;
                let limit = if w.large.get().is_some() {
                    opts.stop = Some(stop.clone());
                    1 + r.below(40)
                } else {
                    u64::MAX
                };
                w.jobs_wrote.store(true, Ordering::SeqCst);
                let res = rebuild::run(a, &opts, &mut |_, _, _| {
                    batches += 1;
                    if batches >= limit {
                        stop.store(true, Ordering::Release);
                    }
                });
                format!(
                    "rebuild: {:?}",
                    res.map(|v| v.len()).map_err(|e| e.to_string())
                )
            }
            9 if r.below(2) == 0 => {
                // A slow drive (or a fast one again): requests in flight on it take seconds.
                match path.as_deref().and_then(|p| w.store.get(p)) {
                    Some(m) => {
                        let mut f = m.faults();
                        f.latency = match f.latency {
                            Some(_) => None,
                            None => Some(Duration::from_millis(500 + r.below(6000))),
                        };
                        w.slow.store(true, Ordering::Relaxed);
                        let msg = format!("slot {slot}: latency {:?}", f.latency);
                        m.set_faults(f);
                        msg
                    }
                    None => String::new(),
                }
            }
            9 if !a.slot_usable(slot) && !a.slot_has_target(slot) && a.slot_present(slot) => {
                format!(
                    "remove slot {slot}: {:?}",
                    a.remove(&MemberRef::Slot(slot))
                        .err()
                        .map(|e| e.to_string())
                )
            }
            _ => String::new(),
        };
        observe_slots(w, a);
        if !msg.is_empty() {
            w.lifecycle_acted.store(true, Ordering::SeqCst);
            w.note(sched, format!("lifecycle: {msg}"));
        }
    }
}

/// Breaks the own hash of one checksum table page of one member (a few flipped bytes): its
/// entries become unknown the next time the page is read from the member.
fn damage_a_table_page(w: &World, a: &Array, r: &mut SplitMix64, sched: &Sched) {
    let Some(geo) = a.checksum_geometry() else {
        return;
    };
    let slot = r.below(a.layout().members() as u64) as usize;
    let mut page = r.below(geo.table_pages);
    if let Some(l) = w.large.get() {
        // Large members: a page of the windows' rows (others are never read).
        let row = l.nth_row(page);
        page = (row * a.layout().chunk() / 4096 + r.below(a.layout().chunk() / 4096))
            / crate::array::csum::PER_PAGE;
    }
    let within = r.below(4096 - 8);
    let Some(m) = a.slot_path_of(slot).and_then(|p| w.store.get(&p)) else {
        return;
    };
    let off = geo.page_offset(page) + within;
    m.damage(off, 8);
    if let Some(p) = a.slot_path_of(slot) {
        w.damaged_pages
            .lock()
            .expect("damage lock")
            .insert((p, page));
    }
    // Damaged pages count against rows with rot (or torn by a power cut).
    let rows: Vec<u64> = rot_by_row(w, a).into_keys().collect();
    note_unrecoverable_rows(w, a, rows);
    w.note(
        sched,
        format!("damage: slot {slot} checksum table page {page} (member offset {off})"),
    );
}

fn scrubber(w: &World, a: &Array, sched: &Sched, seed: u64) {
    let mut r = SplitMix64(seed);
    for _ in 0..1 + r.below(3) {
        if w.failed() || cut_now(w, sched) {
            return;
        }
        crate::clock::sleep(Duration::from_millis(r.below(2000)));
        let rows = a.rows();
        let mut lo = r.below(rows);
        if let Some(l) = w.large.get() {
            lo = l.nth_row(lo);
        }
        let (ranges, mode) = match r.below(3) {
            // A resync runs over rows an unclean stop left marked (at open, beside clients, as
            // the daemon's does): on rows no crash can have torn it would take rot next to an
            // unknown entry for a cut write and list it (simulator seed 9001353). Elsewhere the
            // same rows are scrubbed.
            0 => {
                let want = lo..(lo + 1 + r.below(8)).min(rows);
                let stale: Vec<_> = a
                    .stale_dirty_rows()
                    .into_iter()
                    .map(|s| s.start.max(want.start)..s.end.min(want.end))
                    .filter(|s| !s.is_empty())
                    .collect();
                if stale.is_empty() {
                    (vec![want], Mode::Scrub { repair: false })
                } else {
                    (stale, Mode::Resync)
                }
            }
            1 => (w.job_rows(a), Mode::Scrub { repair: true }),
            _ => (w.job_rows(a), Mode::Scrub { repair: false }),
        };
        let rate = [None, Some(1 << 20)][r.below(2) as usize];
        if !matches!(mode, Mode::Scrub { repair: false }) {
            w.jobs_wrote.store(true, Ordering::SeqCst);
        }
        let res = scrub::run(a, &ranges, mode, rate, &mut |_, _| {});
        w.note(
            sched,
            format!(
                "scrubber: {mode:?} {ranges:?}: {:?}",
                res.map(|r| (r.problems.len(), r.unrepaired()))
                    .map_err(|e| e.to_string())
            ),
        );
    }
}

fn final_checks(
    w: &World,
    a: &Array,
    spec: &Spec,
    sched: &Sched,
    rng: &mut SplitMix64,
) -> Result<(), String> {
    // Finish any rebuild, then every byte must read back as last written. On large members the
    // data map lets it skip the regions never written (zeroed on the target, not read): only
    // the windows' regions are rebuilt, and the reads back check the never-written pages too.
    // (What the slots out of service expose now, before the rebuild brings them back.)
    observe_slots(w, a);
    if !a.pending_targets().is_empty() && a.state() != ArrayState::Failed {
        rebuild::run(a, &RebuildOptions::default(), &mut |_, _, _| {})
            .map_err(|e| format!("final rebuild: {e}"))?;
    }
    let (got, bad, _) = read_image(w, a, "final read")?;
    check_image(w, a, &got, &bad, "final read")?;
    let all = w.job_rows(a);
    let rep = scrub::run(a, &all, Mode::Scrub { repair: true }, None, &mut |_, _| {})
        .map_err(|e| format!("final scrub --repair: {e}"))?;
    w.note(
        sched,
        format!(
            "final scrub --repair: {} problems, {} unrepaired",
            rep.problems.len(),
            rep.unrepaired()
        ),
    );
    if let Some(p) = unexplained(w, a, spec, &rep.problems) {
        return Err(format!(
            "the final scrub --repair finds {} problems, one that no injected fault or crash explains: {p:?}",
            rep.problems.len()
        ));
    }
    let flips_before = flip_counts(w);
    let rep2 = scrub::run(a, &all, Mode::Scrub { repair: false }, None, &mut |_, _| {})
        .map_err(|e| format!("second scrub: {e}"))?;
    // Reads of this scrub that returned flipped bytes (a transient fault's last reads):
    // explained (simulator seed 3000189).
    let flipped_now = flipped_rows_since(w, a, &flips_before);
    // Rows that rot and damaged table pages left beyond what the level corrects stay as they
    // are (reported, never blessed).
    let left: Vec<&scrub::Problem> = rep2
        .problems
        .iter()
        .filter(|p| {
            !problem_rows(a, p).into_iter().any(|row| {
                flipped_now.contains(&row)
                    || row_unrecoverable(w, a, row)
                    || row_exposed(w, row)
                    || row_torn_past_parity(w, a, row)
            }) && !p.logical_offset.is_some_and(|o| {
                let len = p.bytes.min(a.size() - o);
                torn_past_parity(w, a, o, len) || unrecoverable(w, a, o, len)
            })
        })
        .collect();
    if !left.is_empty() {
        return Err(format!(
            "a second scrub after scrub --repair still finds {} problems (first: {:?}; bad-block list {:?}); the repair found {} ({} unrepaired)",
            rep2.problems.len(),
            rep2.problems[0],
            a.bad_blocks(),
            rep.problems.len(),
            rep.unrepaired()
        ));
    }
    let (got, bad, _) = read_image(w, a, "read after scrub")?;
    check_image(w, a, &got, &bad, "read after scrub")?;
    // Degraded: every byte must still read back with one member gone.
    if spare_tolerance(w, a) {
        let usable: Vec<usize> = (0..a.layout().members())
            .filter(|&s| a.slot_usable(s))
            .collect();
        let s = usable[rng.below(usable.len() as u64) as usize];
        a.fail_member(s, "final degraded check")
            .map_err(|e| e.to_string())?;
        let what = format!("degraded read without slot {s}");
        let (got, bad, _) = read_image(w, a, &what)?;
        check_image(w, a, &got, &bad, &what)?;
    }
    Ok(())
}

/// Runs seeds `from..from+count`, returning the failures.
pub fn run_many(from: u64, count: u64) -> Vec<Failure> {
    (from..from + count).filter_map(|s| run(s).err()).collect()
}

/// An operation's error, for the event log.
fn err_of<T>(r: &crate::Result<T>) -> Option<String> {
    r.as_ref().err().map(|e| e.to_string())
}
