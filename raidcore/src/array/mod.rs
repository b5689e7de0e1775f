//! The array engine: assembly from members, the read and write paths (full-row, read-modify-write,
//! reconstruct-write, degraded), row locking, member failure handling and per-member accounting.
//! Shared by many threads (`Send + Sync`); prints nothing.

mod assemble;
mod create;
mod io;
mod locks;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

pub use assemble::AssembleOptions;
pub use create::{preflight, CreateSpec};

use crate::device::Member;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{self, SlotState, Superblock, WearRecord};
use crate::layout::Layout;
use crate::parity::Kernel;
use locks::RowLocks;

/// Kinds of bytes written to a member, for wear accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Data = 0,
    Parity = 1,
    Metadata = 2,
    Rebuild = 3,
}

/// Run-time view of one member state, as `status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    Active,
    Faulty,
    Missing,
    Rebuilding,
}

impl MemberState {
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Active => "active",
            MemberState::Faulty => "faulty",
            MemberState::Missing => "missing",
            MemberState::Rebuilding => "rebuilding",
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

/// One slot at run time.
pub(crate) struct Slot {
    pub(crate) member: Option<Arc<dyn Member>>,
    pub(crate) path: Option<PathBuf>,
    /// Why the member is missing or was failed (for status and errors).
    pub(crate) reason: Mutex<Option<String>>,
    /// Set when the member is missing, recorded faulty, or failed at run time.
    pub(crate) failed: AtomicBool,
    /// Generation and copy index of the newest superblock on this member.
    pub(crate) sb_state: Mutex<(u64, u32)>,
    /// This member's own uuid and the wear it had when opened.
    pub(crate) member_uuid: [u8; 16],
    pub(crate) wear_base: WearRecord,
    pub(crate) written: [AtomicU64; 4],
    pub(crate) read_errors: AtomicU64,
    pub(crate) write_errors: AtomicU64,
}

impl Slot {
    fn new(member: Option<Arc<dyn Member>>, path: Option<PathBuf>) -> Slot {
        let failed = member.is_none();
        Slot {
            member,
            path,
            reason: Mutex::new(None),
            failed: AtomicBool::new(failed),
            sb_state: Mutex::new((0, 1)),
            member_uuid: [0; 16],
            wear_base: WearRecord::default(),
            written: Default::default(),
            read_errors: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
        }
    }

    /// The member, if it is present and not failed.
    #[inline]
    pub(crate) fn usable(&self) -> Option<&Arc<dyn Member>> {
        if self.failed.load(Ordering::Acquire) {
            None
        } else {
            self.member.as_ref()
        }
    }

    /// Wear record: what the superblock had at open plus what this process wrote since.
    pub(crate) fn wear(&self) -> WearRecord {
        let mut w = self.wear_base.clone();
        w.data_bytes += self.written[WriteKind::Data as usize].load(Ordering::Relaxed);
        w.parity_bytes += self.written[WriteKind::Parity as usize].load(Ordering::Relaxed);
        w.metadata_bytes += self.written[WriteKind::Metadata as usize].load(Ordering::Relaxed);
        w.rebuild_bytes += self.written[WriteKind::Rebuild as usize].load(Ordering::Relaxed);
        w
    }
}

/// Per-member facts for status reports.
#[derive(Clone, Debug)]
pub struct MemberInfo {
    pub slot: usize,
    pub path: Option<PathBuf>,
    pub uuid: [u8; 16],
    pub state: MemberState,
    pub reason: Option<String>,
    pub wear: WearRecord,
    pub read_errors: u64,
    pub write_errors: u64,
}

/// An assembled array.
pub struct Array {
    layout: Layout,
    /// Array-wide superblock fields (slot states, events, name...). Per-member fields are
    /// filled in when written.
    meta: Mutex<Superblock>,
    slots: Vec<Slot>,
    locks: RowLocks,
    kernel: &'static Kernel,
    writable: bool,
    data_offset: u64,
    size: u64,
    /// Set once a write was accepted since the array was marked dirty.
    dirty: AtomicBool,
    /// Unix seconds of the last superblock write (wear counters are persisted at most every
    /// [`PERSIST_INTERVAL`] seconds under load).
    last_persist: AtomicU64,
}

/// Seconds between superblock updates that record the wear counters while writes go on.
pub const PERSIST_INTERVAL: u64 = 5;

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Array {
    pub(crate) fn from_parts(sb: Superblock, slots: Vec<Slot>, writable: bool) -> Result<Array> {
        let layout = sb.validate()?;
        Ok(Array {
            data_offset: sb.data_offset,
            size: sb.array_bytes,
            layout,
            meta: Mutex::new(sb),
            slots,
            locks: RowLocks::new(),
            kernel: Kernel::best(),
            writable,
            dirty: AtomicBool::new(false),
            last_persist: AtomicU64::new(now()),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Logical size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// A copy of the array-wide superblock as this process sees it.
    pub fn superblock(&self) -> Superblock {
        self.meta.lock().expect("meta lock").clone()
    }

    /// Chooses the parity kernel (tests and benchmarks).
    pub fn set_kernel(&mut self, kernel: &'static Kernel) {
        self.kernel = kernel;
    }

    fn lost(&self) -> Vec<bool> {
        self.slots.iter().map(|s| s.usable().is_none()).collect()
    }

    /// State of every member.
    pub fn members(&self) -> Vec<MemberInfo> {
        let meta = self.meta.lock().expect("meta lock");
        self.slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let state = if s.member.is_none() {
                    MemberState::Missing
                } else if s.failed.load(Ordering::Acquire) {
                    MemberState::Faulty
                } else if matches!(meta.slots[i].state, SlotState::Rebuilding { .. }) {
                    MemberState::Rebuilding
                } else {
                    MemberState::Active
                };
                MemberInfo {
                    slot: i,
                    path: s.path.clone(),
                    uuid: meta.slots[i].member_uuid,
                    state,
                    reason: s.reason.lock().expect("reason lock").clone(),
                    wear: s.wear(),
                    read_errors: s.read_errors.load(Ordering::Relaxed),
                    write_errors: s.write_errors.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    pub fn state(&self) -> ArrayState {
        let lost = self.lost();
        if !self.layout.survives(&lost) {
            ArrayState::Failed
        } else if lost.iter().any(|&l| l) {
            ArrayState::Degraded
        } else {
            ArrayState::Clean
        }
    }

    fn check_alive(&self) -> Result<()> {
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
                let who = s
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "missing".into());
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

    pub(crate) fn count(&self, slot: usize, kind: WriteKind, bytes: u64) {
        self.slots[slot].written[kind as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Takes a member out of service after an I/O error (or on request). When the array is
    /// writable the change is persisted to the surviving members with the events counter bumped,
    /// so the failed member is recognised as stale if it comes back.
    pub fn fail_member(&self, slot: usize, reason: &str) -> Result<()> {
        let s = &self.slots[slot];
        if s.failed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        *s.reason.lock().expect("reason lock") = Some(reason.to_string());
        if self.writable {
            {
                let mut meta = self.meta.lock().expect("meta lock");
                meta.slots[slot].state = SlotState::Faulty;
                meta.events += 1;
            }
            self.persist()?;
        }
        Ok(())
    }

    /// Writes the current superblock to every usable member (next generation, alternate copy).
    pub(crate) fn persist(&self) -> Result<()> {
        let mut meta = self.meta.lock().expect("meta lock");
        meta.updated = now();
        self.last_persist.store(meta.updated, Ordering::Relaxed);
        let mut first_err = None;
        for (i, s) in self.slots.iter().enumerate() {
            let Some(m) = s.usable() else { continue };
            self.count(i, WriteKind::Metadata, format::SB_SIZE as u64);
            let mut sb = meta.clone();
            sb.slot = i as u32;
            sb.member_uuid = s.member_uuid;
            sb.wear = s.wear();
            let mut st = s.sb_state.lock().expect("sb lock");
            if let Err(e) = format::write_next(m.as_ref(), &sb, &mut st) {
                s.write_errors.fetch_add(1, Ordering::Relaxed);
                first_err.get_or_insert((i, e));
            }
        }
        drop(meta);
        if let Some((i, e)) = first_err {
            // A member that cannot take its superblock is failed; the others record that.
            self.fail_member(i, &format!("superblock write failed: {e}"))?;
        }
        self.check_alive()
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
    fn mark_dirty(&self) -> Result<()> {
        if self.dirty.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.meta.lock().expect("meta lock").clean = false;
        self.persist()
    }

    /// Flushes every usable member (fdatasync).
    pub fn flush(&self) -> Result<()> {
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(m) = s.usable() {
                if let Err(e) = m.flush() {
                    s.write_errors.fetch_add(1, Ordering::Relaxed);
                    self.fail_member(i, &format!("flush failed: {e}"))?;
                }
            }
        }
        self.check_alive()
    }

    /// Flushes, records the wear counters and marks the array clean.
    pub fn close(self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.flush()?;
        self.meta.lock().expect("meta lock").clean = true;
        self.persist()
    }
}

#[cfg(test)]
mod tests;
