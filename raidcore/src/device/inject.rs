//! Run-time fault injection for failure drills: a member wrapper ([`Injected`]) whose faults
//! (read or write errors over a range or at a rate, latency, requests that hang, bit rot on
//! read, a vanished device, a full one) are switched on and off while the array runs, the
//! requests in flight on it (for the member timeout), and a table of them by member path
//! ([`InjectTable`]). Nothing here is persisted: a restart clears every fault.
//!
//! Lock order: `InjectTable::states`, then one `FaultState`'s locks in field order (`faults`,
//! `gate`, `healed`, `rot_healed`, `rng`); none is held across the inner member's I/O. The
//! requests in flight are tracked without a lock (a fixed set of atomic slots).

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Member;
use crate::error::{Error, Result};
use crate::rng::SplitMix64;

const BLOCK: u64 = 4096;
/// Requests tracked in flight per member at once.
const SLOTS: usize = 128;
/// The operations a tracked request can be, by code.
const OPS: [&str; 4] = ["read", "write", "flush", "other"];

/// Where errors strike: a byte range of the member, or a share of requests.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Where {
    /// Member bytes `start..end`.
    Range { start: u64, end: u64 },
    /// This fraction (0 to 1) of requests.
    Rate(f64),
}

/// The faults of one member. `Default` is none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Reads fail with EIO: over a range until the block is rewritten (an SSD remaps a bad
    /// sector on write), or at a rate.
    pub read_errors: Option<Where>,
    /// Writes fail with EIO.
    pub write_errors: Option<Where>,
    /// Every request waits this long, plus up to `latency_jitter_us` more.
    pub latency_us: Option<u64>,
    pub latency_jitter_us: u64,
    /// After this many more requests, every request hangs (a dying drive) until the faults
    /// change or the member timeout gives up on it.
    pub hang_after: Option<u64>,
    /// This fraction of the member's 4 KiB blocks (of `corrupt_in` only, when set) has rotted:
    /// they read back with one bit flipped, every time, until rewritten. Which blocks is fixed
    /// when it is set.
    pub corrupt_on_read: Option<f64>,
    /// Member bytes `start..end` the rot is confined to.
    pub corrupt_in: Option<(u64, u64)>,
    /// The device is gone: every request fails with ENXIO.
    pub vanished: bool,
    /// Writes fail with ENOSPC.
    pub full: bool,
}

/// The longest latency a fault may add to one request (a request waiting longer holds up
/// `inject --clear` and a clean stop).
pub const MAX_LATENCY_US: u64 = 60_000_000;

impl Faults {
    pub fn is_none(&self) -> bool {
        *self == Faults::default()
    }

    /// Refuses faults that mean nothing or cannot end: a rate outside 0..1, an empty or
    /// reversed range, a latency over a minute.
    pub fn validate(&self) -> std::result::Result<(), String> {
        for (what, w) in [
            ("read_errors", &self.read_errors),
            ("write_errors", &self.write_errors),
        ] {
            match w {
                Some(Where::Rate(r)) if !(0.0..=1.0).contains(r) => {
                    return Err(format!("{what}: a rate is a fraction from 0 to 1, not {r}"))
                }
                Some(Where::Range { start, end }) if start >= end => {
                    return Err(format!("{what}: the range {start}..{end} is empty"))
                }
                _ => {}
            }
        }
        if let Some(r) = self.corrupt_on_read {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("corrupt_on_read: a fraction from 0 to 1, not {r}"));
            }
        }
        if let Some((start, end)) = self.corrupt_in {
            if start >= end {
                return Err(format!("corrupt_in: the range {start}..{end} is empty"));
            }
        }
        if self.latency_us.unwrap_or(0) > MAX_LATENCY_US || self.latency_jitter_us > MAX_LATENCY_US
        {
            return Err(format!(
                "latency: at most {} s per request",
                MAX_LATENCY_US / 1_000_000
            ));
        }
        Ok(())
    }
}

/// How many faults were injected, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Injections {
    pub read_errors: u64,
    pub write_errors: u64,
    pub delayed: u64,
    pub hung: u64,
    pub corrupted_blocks: u64,
    pub vanished: u64,
    pub full: u64,
}

/// One request in flight: when it started, what it is, where.
#[derive(Clone, Copy, Debug)]
pub struct InFlight {
    pub started: Instant,
    pub op: &'static str,
    pub offset: u64,
}

/// The faults of one member path and what they did; shared by every wrapper of that path.
pub struct FaultState {
    path: PathBuf,
    faults: RwLock<Faults>,
    /// Any fault set: the fast path of every request reads only this.
    armed: AtomicBool,
    /// Requests answered since `hang_after` was set.
    answered: AtomicU64,
    /// Bumped whenever the faults change or hung requests are given up on; hung requests wait
    /// for it to move.
    gate: (Mutex<u64>, Condvar),
    /// Set when the member timeout gave up on a request: every later request fails at once
    /// with ETIMEDOUT, until the faults change.
    given_up: AtomicBool,
    /// Blocks of a read-error range that were rewritten since (healed).
    healed: Mutex<HashSet<u64>>,
    /// Rotten blocks rewritten since (healed).
    rot_healed: Mutex<HashSet<u64>>,
    /// Picks the rotten blocks; new at every change of the rot.
    rot_seed: AtomicU64,
    rng: Mutex<SplitMix64>,
    /// Requests in flight: start (nanoseconds since `epoch`, 0 when free), offset, operation.
    /// A request that finds every slot taken goes untracked (more than SLOTS in flight on one
    /// member); the oldest of the others still shows a stall.
    starts: [AtomicU64; SLOTS],
    offsets: [AtomicU64; SLOTS],
    ops: [std::sync::atomic::AtomicU8; SLOTS],
    epoch: Instant,
    /// Whether requests are tracked at all (off without a member timeout: nothing reads it).
    tracking: AtomicBool,
    counts: [AtomicU64; 7],
}

impl FaultState {
    fn new(path: &Path) -> FaultState {
        let seed = path
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            });
        FaultState {
            path: path.to_path_buf(),
            faults: RwLock::new(Faults::default()),
            armed: AtomicBool::new(false),
            answered: AtomicU64::new(0),
            gate: (Mutex::new(0), Condvar::new()),
            given_up: AtomicBool::new(false),
            healed: Mutex::new(HashSet::new()),
            rot_healed: Mutex::new(HashSet::new()),
            rot_seed: AtomicU64::new(seed),
            rng: Mutex::new(SplitMix64(seed)),
            starts: std::array::from_fn(|_| AtomicU64::new(0)),
            offsets: std::array::from_fn(|_| AtomicU64::new(0)),
            ops: std::array::from_fn(|_| std::sync::atomic::AtomicU8::new(0)),
            epoch: Instant::now(),
            tracking: AtomicBool::new(true),
            counts: Default::default(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn faults(&self) -> Faults {
        self.faults.read().expect("faults lock").clone()
    }

    /// Replaces the faults; hung requests go on (the drive answered after all), and a member
    /// the timeout gave up on answers again.
    pub fn set(&self, f: Faults) {
        let none = f.is_none();
        let old = std::mem::replace(&mut *self.faults.write().expect("faults lock"), f.clone());
        if old.hang_after != f.hang_after {
            self.answered.store(0, Ordering::SeqCst);
        }
        if old.read_errors != f.read_errors {
            self.healed.lock().expect("healed lock").clear();
        }
        if (old.corrupt_on_read, old.corrupt_in) != (f.corrupt_on_read, f.corrupt_in) {
            self.rot_healed.lock().expect("rot lock").clear();
            self.rot_seed
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::SeqCst);
        }
        self.given_up.store(false, Ordering::SeqCst);
        self.armed.store(!none, Ordering::SeqCst);
        self.open_gate();
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.set(Faults::default());
    }

    /// Gives up on hung requests: they fail with ETIMEDOUT, as does every later request until
    /// the faults change. Called by the member timeout.
    pub fn give_up(&self) {
        self.given_up.store(true, Ordering::SeqCst);
        self.open_gate();
    }

    pub fn given_up(&self) -> bool {
        self.given_up.load(Ordering::SeqCst)
    }

    fn open_gate(&self) {
        let (m, c) = &self.gate;
        *m.lock().expect("gate lock") += 1;
        c.notify_all();
    }

    /// The oldest request in flight, if any.
    pub fn oldest(&self) -> Option<InFlight> {
        let (i, ns) = self
            .starts
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.load(Ordering::Acquire)))
            .filter(|&(_, ns)| ns != 0)
            .min_by_key(|&(_, ns)| ns)?;
        Some(InFlight {
            started: self.epoch + Duration::from_nanos(ns),
            op: OPS[self.ops[i].load(Ordering::Relaxed) as usize % OPS.len()],
            offset: self.offsets[i].load(Ordering::Relaxed),
        })
    }

    /// Tracks requests in flight (for a member timeout) or not.
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }

    /// Takes back a member the timeout gave up on (it was added back, or answered again), its
    /// faults unchanged.
    pub fn forgive(&self) {
        self.given_up.store(false, Ordering::SeqCst);
        self.open_gate();
    }

    pub fn injections(&self) -> Injections {
        let c = |i: usize| self.counts[i].load(Ordering::Relaxed);
        Injections {
            read_errors: c(0),
            write_errors: c(1),
            delayed: c(2),
            hung: c(3),
            corrupted_blocks: c(4),
            vanished: c(5),
            full: c(6),
        }
    }

    fn count(&self, i: usize) {
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    fn chance(&self, p: f64) -> bool {
        let x = self.rng.lock().expect("rng lock").next_u64();
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn err(&self, errno: i32, op: &str, offset: u64) -> Error {
        let why = if errno == libc::ETIMEDOUT {
            "no answer within the member timeout"
        } else {
            "injected"
        };
        Error::io(
            io::Error::from_raw_os_error(errno),
            &format!("{op} ({why})"),
            &self.path.display().to_string(),
            offset,
        )
    }

    /// Faults every request meets before it reaches the device: vanished, given up, latency,
    /// hang.
    fn before(&self, op: &'static str, offset: u64) -> Result<()> {
        // The gate's generation before the faults are read: a change made while this request
        // sleeps or decides to hang is one it has not seen, and must not wait for (a lost
        // wakeup kept a request hung after --clear).
        let seen = *self.gate.0.lock().expect("gate lock");
        if self.given_up.load(Ordering::SeqCst) {
            return Err(self.err(libc::ETIMEDOUT, op, offset));
        }
        let f = self.faults();
        if f.vanished {
            self.count(5);
            return Err(self.err(libc::ENXIO, op, offset));
        }
        if let Some(us) = f.latency_us {
            let jitter = if f.latency_jitter_us > 0 {
                self.rng
                    .lock()
                    .expect("rng lock")
                    .below(f.latency_jitter_us + 1)
            } else {
                0
            };
            self.count(2);
            std::thread::sleep(Duration::from_micros(us + jitter));
            // Given up on while it slept: it fails as every pending request does.
            if self.given_up.load(Ordering::SeqCst) {
                return Err(self.err(libc::ETIMEDOUT, op, offset));
            }
        }
        if let Some(n) = f.hang_after {
            if self.answered.fetch_add(1, Ordering::SeqCst) >= n {
                self.count(3);
                let (m, c) = &self.gate;
                let mut g = m.lock().expect("gate lock");
                while *g == seen {
                    g = c.wait(g).expect("gate lock");
                }
                drop(g);
                if self.given_up.load(Ordering::SeqCst) {
                    return Err(self.err(libc::ETIMEDOUT, op, offset));
                }
                // The faults changed while it hung: start over with the new ones.
                return self.before(op, offset);
            }
        }
        Ok(())
    }

    fn hits(&self, w: &Where, offset: u64, len: u64, heal: bool) -> Option<u64> {
        match *w {
            Where::Rate(p) => self.chance(p).then_some(offset),
            Where::Range { start, end } => {
                let (lo, hi) = (offset.max(start), (offset + len).min(end));
                if lo >= hi {
                    return None;
                }
                if !heal {
                    return Some(lo);
                }
                let healed = self.healed.lock().expect("healed lock");
                let mut b = lo / BLOCK * BLOCK;
                while b < hi {
                    if !healed.contains(&b) {
                        return Some(b.max(lo));
                    }
                    b += BLOCK;
                }
                None
            }
        }
    }

    /// A write of whole blocks heals the read-error and rot blocks it covers.
    fn rewritten(&self, offset: u64, len: u64) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let first = offset.div_ceil(BLOCK) * BLOCK;
        let end = (offset + len) / BLOCK * BLOCK;
        if first >= end {
            return;
        }
        let f = self.faults();
        if let Some(Where::Range { start, end: e }) = f.read_errors {
            let mut h = self.healed.lock().expect("healed lock");
            let mut b = first.max(start / BLOCK * BLOCK);
            while b < end.min(e) {
                h.insert(b);
                b += BLOCK;
            }
        }
        if f.corrupt_on_read.is_some() {
            let mut h = self.rot_healed.lock().expect("rot lock");
            let mut b = first;
            while b < end {
                if self.rotten(b, &f) {
                    h.insert(b);
                }
                b += BLOCK;
            }
        }
    }

    /// Whether block `b` (byte offset) rotted under `f` (healed or not).
    fn rotten(&self, b: u64, f: &Faults) -> bool {
        let Some(p) = f.corrupt_on_read else {
            return false;
        };
        if f.corrupt_in.is_some_and(|(s, e)| b < s || b + BLOCK > e) {
            return false;
        }
        let h = SplitMix64(self.rot_seed.load(Ordering::Relaxed) ^ (b / BLOCK)).next_u64();
        ((h >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Flips one bit in every rotten block of `buf` not rewritten since it rotted.
    fn rot(&self, buf: &mut [u8], offset: u64, f: &Faults) {
        if f.corrupt_on_read.is_none() {
            return;
        }
        let end = offset + buf.len() as u64;
        let healed = self.rot_healed.lock().expect("rot lock");
        let mut b = offset / BLOCK * BLOCK;
        while b < end {
            if self.rotten(b, f) && !healed.contains(&b) {
                // The same bit of the block every time: rot is on the medium. Where, depends on
                // the member too: two members rotten at one offset flipped the same bit, which
                // cancels in RAID5 parity and read back wrong with exit 0 (an outside attack),
                // a correlation no real drive's rot has.
                let seed = self.rot_seed.load(Ordering::Relaxed);
                let pos = b + SplitMix64(seed ^ (b / BLOCK) ^ 0x5bd1_e995).next_u64() % BLOCK;
                if (offset..end).contains(&pos) {
                    buf[(pos - offset) as usize] ^= 0x10;
                    self.count(4);
                }
            }
            b += BLOCK;
        }
    }

    /// Marks a request in flight; the slot to free, if one was free.
    fn track(&self, op: &'static str, offset: u64) -> Option<usize> {
        if !self.tracking.load(Ordering::Relaxed) {
            return None;
        }
        // 0 means free: a request starting in the epoch's first nanosecond counts as 1.
        let now = (self.epoch.elapsed().as_nanos() as u64).max(1);
        let first = (offset / BLOCK) as usize % SLOTS;
        for k in 0..SLOTS {
            let i = (first + k) % SLOTS;
            if self.starts[i]
                .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.offsets[i].store(offset, Ordering::Relaxed);
                let code = OPS.iter().position(|&o| o == op).unwrap_or(0);
                self.ops[i].store(code as u8, Ordering::Relaxed);
                return Some(i);
            }
        }
        None
    }

    fn untrack(&self, slot: Option<usize>) {
        if let Some(i) = slot {
            self.starts[i].store(0, Ordering::Release);
        }
    }
}

/// A member whose requests meet the faults of its [`FaultState`].
pub struct Injected {
    inner: Arc<dyn Member>,
    state: Arc<FaultState>,
}

impl Injected {
    pub fn new(inner: Arc<dyn Member>, state: Arc<FaultState>) -> Injected {
        Injected { inner, state }
    }

    /// Runs one request that is not timed (its length is unbounded), through the faults when
    /// armed.
    fn run_untimed<T>(
        &self,
        op: &'static str,
        offset: u64,
        io: impl FnOnce(&dyn Member) -> Result<T>,
    ) -> Result<T> {
        if self.state.armed.load(Ordering::Relaxed) || self.state.given_up() {
            self.state
                .before(op, offset)
                .and_then(|()| io(&*self.inner))
        } else {
            io(&*self.inner)
        }
    }

    /// Runs one request: tracked for the member timeout; through the faults when armed.
    fn run<T>(
        &self,
        op: &'static str,
        offset: u64,
        io: impl FnOnce(&dyn Member) -> Result<T>,
    ) -> Result<T> {
        let slot = self.state.track(op, offset);
        let r = self.run_untimed(op, offset, io);
        self.state.untrack(slot);
        r
    }
}

impl Member for Injected {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let s = &self.state;
        self.run("read", offset, |m| {
            if s.armed.load(Ordering::Relaxed) {
                let f = s.faults();
                if let Some(w) = &f.read_errors {
                    if let Some(at) = s.hits(w, offset, buf.len() as u64, true) {
                        s.count(0);
                        return Err(s.err(libc::EIO, "read", at));
                    }
                }
                m.read_at(buf, offset)?;
                s.rot(buf, offset, &f);
                return Ok(());
            }
            m.read_at(buf, offset)
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let s = &self.state;
        self.run("write", offset, |m| {
            if s.armed.load(Ordering::Relaxed) {
                let f = s.faults();
                if f.full {
                    s.count(6);
                    return Err(s.err(libc::ENOSPC, "write", offset));
                }
                if let Some(w) = &f.write_errors {
                    if let Some(at) = s.hits(w, offset, buf.len() as u64, false) {
                        s.count(1);
                        return Err(s.err(libc::EIO, "write", at));
                    }
                }
            }
            m.write_at(buf, offset)?;
            s.rewritten(offset, buf.len() as u64);
            Ok(())
        })
    }

    fn flush(&self) -> Result<()> {
        self.run("flush", 0, |m| m.flush())
    }

    // Discards and zeroing of large ranges run for as long as their size asks (zeroing the
    // checksum area of a new 4 TB member moves gigabytes): they are not timed, only the
    // requests of bounded size are.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.run_untimed("discard", offset, |m| m.discard(offset, len))
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let s = &self.state;
        self.run_untimed("write zeroes", offset, |m| {
            if s.armed.load(Ordering::Relaxed) && s.faults().full {
                s.count(6);
                return Err(s.err(libc::ENOSPC, "write zeroes", offset));
            }
            m.write_zeroes(offset, len)?;
            s.rewritten(offset, len);
            Ok(())
        })
    }

    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let s = &self.state;
        self.run_untimed("unmap", offset, |m| {
            m.unmap_zeroes(offset, len)?;
            s.rewritten(offset, len);
            Ok(())
        })
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn direct_io(&self) -> bool {
        self.inner.direct_io()
    }

    fn memory_backed(&self) -> bool {
        self.inner.memory_backed()
    }

    fn data_extents(&self, offset: u64, len: u64) -> Option<Vec<std::ops::Range<u64>>> {
        self.inner.data_extents(offset, len)
    }
}

/// The fault states of a process, by member path (canonical where it resolves).
pub struct InjectTable {
    states: Mutex<Vec<Arc<FaultState>>>,
    /// Whether members made from now on track their requests in flight.
    tracking: AtomicBool,
}

impl Default for InjectTable {
    fn default() -> InjectTable {
        InjectTable {
            states: Mutex::new(Vec::new()),
            tracking: AtomicBool::new(true),
        }
    }
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

impl InjectTable {
    pub fn new() -> InjectTable {
        InjectTable::default()
    }

    /// The state of `path`, made (with no faults) if it has none yet.
    pub fn state(&self, path: &Path) -> Arc<FaultState> {
        let p = canonical(path);
        let mut v = self.states.lock().expect("inject table lock");
        if let Some(s) = v.iter().find(|s| s.path == p) {
            return s.clone();
        }
        let s = Arc::new(FaultState::new(&p));
        s.set_tracking(self.tracking.load(Ordering::Relaxed));
        v.push(s.clone());
        s
    }

    /// Tracks requests in flight on every member, now and later, or on none (no member
    /// timeout: nothing would read them).
    pub fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
        for s in self.all() {
            s.set_tracking(on);
        }
    }

    /// The state of `path`, if it has one.
    pub fn get(&self, path: &Path) -> Option<Arc<FaultState>> {
        let p = canonical(path);
        self.states
            .lock()
            .expect("inject table lock")
            .iter()
            .find(|s| s.path == p)
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<FaultState>> {
        self.states.lock().expect("inject table lock").clone()
    }

    /// Wraps a member opened at `path` so that its requests meet that path's faults.
    pub fn wrap(&self, path: &Path, inner: Arc<dyn Member>) -> Arc<dyn Member> {
        Arc::new(Injected::new(inner, self.state(path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemMember;

    /// Reads 4 KiB at `off` of `m` on another thread (which may hang there).
    fn spawn_read(m: &Arc<Injected>, off: u64) -> std::thread::JoinHandle<crate::Result<()>> {
        let m = m.clone();
        std::thread::spawn(move || {
            let mut b = vec![0u8; 4096];
            m.read_at(&mut b, off)
        })
    }

    fn member() -> (Arc<FaultState>, Injected) {
        let s = Arc::new(FaultState::new(Path::new("/dev/test")));
        let m = Injected::new(Arc::new(MemMember::new(1 << 20)), s.clone());
        m.write_at(&[7u8; 65536], 0).unwrap();
        (s, m)
    }

    /// Two members rotten at the same offsets flip different bytes there (independent rot):
    /// flips at the same byte of two members cancel in RAID5 parity, which an outside attack's
    /// drill read back as wrong data with exit 0.
    #[test]
    fn two_members_rotten_at_one_offset_flip_different_bytes() {
        let rotten = |path: &str| {
            let s = Arc::new(FaultState::new(Path::new(path)));
            let m = Injected::new(Arc::new(MemMember::new(1 << 20)), s.clone());
            m.write_at(&[7u8; 1 << 20], 0).unwrap();
            s.set(Faults {
                corrupt_on_read: Some(1.0),
                ..Default::default()
            });
            let mut b = vec![0u8; 1 << 20];
            m.read_at(&mut b, 0).unwrap();
            b
        };
        let (a, b) = (rotten("/dev/one"), rotten("/dev/two"));
        let flipped = |x: &[u8]| x.iter().position(|&v| v != 7).expect("a flip per block");
        let same = a
            .chunks(4096)
            .zip(b.chunks(4096))
            .filter(|(x, y)| flipped(x) == flipped(y))
            .count();
        assert!(
            same < 3,
            "{same} of 256 blocks flipped at the same byte on both"
        );
    }

    #[test]
    fn a_read_error_range_fails_until_its_block_is_rewritten() {
        let (s, m) = member();
        s.set(Faults {
            read_errors: Some(Where::Range {
                start: 8192,
                end: 16384,
            }),
            ..Default::default()
        });
        let mut b = vec![0u8; 4096];
        m.read_at(&mut b, 0).unwrap();
        let e = m.read_at(&mut b, 12288).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert!(e.to_string().contains("injected"), "{e}");
        assert!(e.to_string().contains("12288"), "{e}");
        m.write_at(&b, 12288).unwrap();
        m.read_at(&mut b, 12288).unwrap();
        assert!(
            m.read_at(&mut b, 8192).is_err(),
            "the other block is still bad"
        );
        assert_eq!(s.injections().read_errors, 2);
        s.clear();
        m.read_at(&mut b, 8192).unwrap();
    }

    #[test]
    fn rot_is_the_same_bit_every_time_until_rewritten() {
        let (s, m) = member();
        s.set(Faults {
            corrupt_on_read: Some(1.0),
            corrupt_in: Some((4096, 12288)),
            ..Default::default()
        });
        let mut a = vec![0u8; 16384];
        m.read_at(&mut a, 0).unwrap();
        let mut b = vec![0u8; 16384];
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(a, b, "the same blocks and bits every time");
        let bad: Vec<usize> = (0..4)
            .filter(|i| a[i * 4096..(i + 1) * 4096] != [7u8; 4096])
            .collect();
        assert_eq!(bad, vec![1, 2], "only the blocks of the range rot");
        assert_eq!(
            a.iter().filter(|&&x| x != 7).count(),
            2,
            "one byte per block"
        );
        m.write_at(&[7u8; 4096], 4096).unwrap();
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(b[4096..8192], [7u8; 4096], "rewritten block healed");
        assert_ne!(b[8192..12288], [7u8; 4096], "the other block still rotten");
        assert_eq!(s.injections().corrupted_blocks, 5);
        s.clear();
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(b, vec![7u8; 16384]);
    }

    #[test]
    fn a_rot_rate_rots_about_that_share_of_blocks() {
        let (s, m) = member();
        m.write_at(&vec![7u8; 1 << 20], 0).unwrap();
        s.set(Faults {
            corrupt_on_read: Some(0.1),
            ..Default::default()
        });
        let mut a = vec![0u8; 1 << 20];
        m.read_at(&mut a, 0).unwrap();
        let bad = a.chunks(4096).filter(|c| c.iter().any(|&x| x != 7)).count();
        assert!((10..=45).contains(&bad), "{bad} of 256 blocks");
    }

    #[test]
    fn a_hung_request_waits_until_given_up_then_fails_fast() {
        let (s, m) = member();
        let m = Arc::new(m);
        s.set(Faults {
            hang_after: Some(1),
            ..Default::default()
        });
        let mut b = vec![0u8; 4096];
        m.read_at(&mut b, 0).unwrap();
        let t = spawn_read(&m, 4096);
        let started = Instant::now();
        while s.oldest().is_none() {
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::yield_now();
        }
        assert_eq!(s.oldest().unwrap().offset, 4096);
        s.give_up();
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ETIMEDOUT));
        assert_eq!(
            m.read_at(&mut b, 0).unwrap_err().raw_os_error(),
            Some(libc::ETIMEDOUT)
        );
        assert!(s.oldest().is_none());
        s.clear();
        m.read_at(&mut b, 0).unwrap();
    }

    #[test]
    fn clear_during_a_latency_sleep_releases_the_request_that_would_hang() {
        // A dying drive: slow, then no answer. The faults are cleared while the request
        // sleeps; it must not go on to wait for a change it has already missed.
        let (s, m) = member();
        let m = Arc::new(m);
        s.set(Faults {
            latency_us: Some(300_000),
            hang_after: Some(0),
            ..Default::default()
        });
        let t = spawn_read(&m, 0);
        std::thread::sleep(Duration::from_millis(100));
        s.clear();
        let started = Instant::now();
        while !t.is_finished() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the request stayed hung after --clear"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        t.join().unwrap().unwrap();
    }

    #[test]
    fn a_request_given_up_on_while_it_slept_fails() {
        let (s, m) = member();
        let m = Arc::new(m);
        s.set(Faults {
            latency_us: Some(300_000),
            ..Default::default()
        });
        let m2 = m.clone();
        let t = std::thread::spawn(move || m2.write_at(&[1u8; 4096], 0));
        std::thread::sleep(Duration::from_millis(100));
        s.give_up();
        let e = t.join().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ETIMEDOUT));
        let mut b = vec![0u8; 4096];
        s.set(Faults::default());
        m.read_at(&mut b, 0).unwrap();
        assert_eq!(
            b,
            vec![7u8; 4096],
            "the late write never reached the device"
        );
        // Forgiven without changing faults.
        s.give_up();
        assert!(m.read_at(&mut b, 0).is_err());
        s.forgive();
        m.read_at(&mut b, 0).unwrap();
    }

    #[test]
    fn tracking_switched_off_tracks_nothing() {
        let (s, m) = member();
        let m = Arc::new(m);
        s.set_tracking(false);
        s.set(Faults {
            hang_after: Some(0),
            ..Default::default()
        });
        let t = spawn_read(&m, 0);
        std::thread::sleep(Duration::from_millis(100));
        assert!(s.oldest().is_none());
        s.clear();
        t.join().unwrap().unwrap();
    }

    #[test]
    fn vanished_full_and_write_errors() {
        let (s, m) = member();
        let b = vec![1u8; 4096];
        s.set(Faults {
            full: true,
            ..Default::default()
        });
        assert_eq!(
            m.write_at(&b, 0).unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
        let mut r = vec![0u8; 4096];
        m.read_at(&mut r, 0).unwrap();
        s.set(Faults {
            vanished: true,
            ..Default::default()
        });
        assert_eq!(
            m.read_at(&mut r, 0).unwrap_err().raw_os_error(),
            Some(libc::ENXIO)
        );
        s.set(Faults {
            write_errors: Some(Where::Rate(1.0)),
            ..Default::default()
        });
        assert!(m.write_at(&b, 0).is_err());
        m.read_at(&mut r, 0).unwrap();
        assert_eq!(r, vec![7u8; 4096], "failed writes changed nothing");
        let i = s.injections();
        assert_eq!((i.full, i.vanished, i.write_errors), (1, 1, 1));
    }

    #[test]
    fn the_table_shares_one_state_per_path() {
        let t = InjectTable::new();
        let a = t.state(Path::new("/nonexistent/x"));
        let b = t.state(Path::new("/nonexistent/x"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(t.get(Path::new("/nonexistent/y")).is_none());
        assert_eq!(t.all().len(), 1);
    }
}
