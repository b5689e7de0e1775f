//! The simulator's member device: memory with a live and a durable image (a flush makes
//! writes durable; a power cut keeps the durable image plus a seeded subset of the unflushed
//! 4 KiB pieces), faults switched at run time (dead, unreadable ranges that a write heals as
//! an SSD remaps them, EIO or ENOSPC on writes), and a scheduler yield point before every
//! operation. A [`Store`] names members by path for assembly.

use std::collections::BTreeMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::sched;
use crate::array::MemberSource;
use crate::device::Member;
use crate::error::{Error, ErrorKind, Result};
use crate::rng::SplitMix64;

/// `SIM_DEBUG_OFFSET`: a member byte offset whose writes are printed with the scheduler step
/// and actor, with the flush that makes each durable and, at a power cut, whether an unflushed
/// one was kept (debugging a seed).
fn debug_offset() -> Option<u64> {
    static D: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *D.get_or_init(|| {
        std::env::var("SIM_DEBUG_OFFSET")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// Faults a member injects now.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Every operation fails with EIO (the drive is gone).
    pub dead: bool,
    /// Reads overlapping these byte ranges fail with EIO until the range is written.
    pub bad_reads: Vec<Range<u64>>,
    /// Writes fail with this errno (EIO, ENOSPC).
    pub write_errno: Option<i32>,
    /// Every operation takes this long (virtual time): a slow or dying drive.
    pub latency: Option<std::time::Duration>,
}

struct State {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Writes since the last flush, in order.
    pending: Vec<(u64, Vec<u8>)>,
    faults: Faults,
}

/// A simulated member.
pub struct SimMember {
    name: String,
    st: Mutex<State>,
    /// Shared by every member of a run: false once the power is cut (nothing reaches media).
    power: Arc<AtomicBool>,
}

impl SimMember {
    pub fn new(name: &str, image: Vec<u8>, power: Arc<AtomicBool>) -> SimMember {
        SimMember {
            name: name.to_string(),
            st: Mutex::new(State {
                durable: image.clone(),
                live: image,
                pending: Vec::new(),
                faults: Faults::default(),
            }),
            power,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The yield point before an operation: a slow member sleeps (others run meanwhile).
    fn arrive(&self) {
        let latency = self.state().faults.latency;
        match latency {
            Some(d) => {
                sched::sleep(d);
            }
            None => sched::yield_now(),
        }
    }

    pub fn set_faults(&self, f: Faults) {
        self.state().faults = f;
    }

    pub fn faults(&self) -> Faults {
        self.state().faults.clone()
    }

    /// The image left after a power cut now: the durable image plus, per 4 KiB piece of every
    /// unflushed write (in order), the new bytes or not, as `rng` decides (`keep` 0: none).
    pub fn crash_image(&self, rng: &mut SplitMix64, keep_pct: u64) -> Vec<u8> {
        let st = self.state();
        let mut img = st.durable.clone();
        for (off, data) in &st.pending {
            let mut pos = 0usize;
            while pos < data.len() {
                let abs = *off as usize + pos;
                let end = ((abs / 4096 + 1) * 4096 - *off as usize).min(data.len());
                let kept = rng.below(100) < keep_pct;
                if let Some(d) = debug_offset() {
                    if d >= abs as u64 && d < (*off as usize + end) as u64 {
                        eprintln!(
                            "{} crash: unflushed write at {off} {}",
                            self.name,
                            if kept { "kept" } else { "lost" }
                        );
                    }
                }
                if kept {
                    img[abs..*off as usize + end].copy_from_slice(&data[pos..end]);
                }
                pos = end;
            }
        }
        img
    }

    /// Damage on the medium (what a firmware bug or a stray write does): flips `len` bytes at
    /// `offset` in the live and durable images at once. No scheduling point: runs that never
    /// damage replay as before.
    pub fn damage(&self, offset: u64, len: usize) {
        let mut st = self.state();
        let (a, b) = (offset as usize, offset as usize + len);
        let st = &mut *st;
        for img in [&mut st.live, &mut st.durable] {
            if b <= img.len() {
                img[a..b].iter_mut().for_each(|x| *x ^= 0x5a);
            }
        }
    }

    /// The live image (what reads return).
    pub fn live_image(&self) -> Vec<u8> {
        self.state().live.clone()
    }

    fn err(&self, op: &str, offset: u64, errno: i32) -> Error {
        Error::io(io::Error::from_raw_os_error(errno), op, &self.name, offset)
    }

    fn check(&self, st: &State, op: &str, off: u64, len: usize) -> Result<()> {
        if off
            .checked_add(len as u64)
            .is_none_or(|e| e > st.live.len() as u64)
        {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{op} {} at offset {off}: past the end", self.name),
            ));
        }
        Ok(())
    }
}

impl Member for SimMember {
    fn len(&self) -> u64 {
        self.state().live.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.arrive();
        let st = self.state();
        self.check(&st, "read", offset, buf.len())?;
        let end = offset + buf.len() as u64;
        if st.faults.dead
            || st
                .faults
                .bad_reads
                .iter()
                .any(|r| r.start < end && offset < r.end)
        {
            return Err(self.err("read", offset, libc::EIO));
        }
        buf.copy_from_slice(&st.live[offset as usize..end as usize]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.arrive();
        let mut st = self.state();
        self.check(&st, "write", offset, buf.len())?;
        if st.faults.dead {
            return Err(self.err("write", offset, libc::EIO));
        }
        if let Some(e) = st.faults.write_errno {
            return Err(self.err("write", offset, e));
        }
        if !self.power.load(Ordering::SeqCst) {
            return Ok(()); // the power is gone: nothing reaches the media
        }
        let end = offset + buf.len() as u64;
        // Written 4 KiB blocks read again (the drive remapped the sectors).
        let mut left = Vec::new();
        for r in std::mem::take(&mut st.faults.bad_reads) {
            let mut b = r.start / 4096 * 4096;
            while b < r.end {
                let blk = b..b + 4096;
                if !(blk.start >= offset && blk.end <= end) {
                    left.push(blk.start.max(r.start)..blk.end.min(r.end));
                }
                b += 4096;
            }
        }
        st.faults.bad_reads = left;
        if let Some(d) = debug_offset() {
            if d >= offset && d < end {
                eprintln!(
                    "{} {} write {} at {offset}: byte {d} = {:#04x}",
                    sched::debug_where(),
                    self.name,
                    buf.len(),
                    buf[(d - offset) as usize]
                );
                if std::env::var_os("SIM_DEBUG_BT").is_some() {
                    let bt = std::backtrace::Backtrace::force_capture().to_string();
                    let f: Vec<&str> = bt
                        .lines()
                        .filter(|l| l.contains("raidcore::") && !l.contains("sim::member"))
                        .map(|l| l.trim())
                        .take(6)
                        .collect();
                    eprintln!("    {}", f.join(" <- "));
                }
            }
        }
        st.live[offset as usize..end as usize].copy_from_slice(buf);
        st.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.arrive();
        let mut st = self.state();
        if st.faults.dead {
            return Err(self.err("flush", 0, libc::EIO));
        }
        if !self.power.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(d) = debug_offset() {
            if st
                .pending
                .iter()
                .any(|(o, b)| d >= *o && d < *o + b.len() as u64)
            {
                eprintln!(
                    "{} {} flush (byte {d} now durable)",
                    sched::debug_where(),
                    self.name
                );
            }
        }
        let State {
            durable, pending, ..
        } = &mut *st;
        crate::device::crash::make_durable(durable, pending);
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.write_at(&vec![0u8; len as usize], offset)
    }

    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.discard(offset, len)
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    fn memory_backed(&self) -> bool {
        true
    }
}

/// Simulated members by path: what assembly finds in a "directory".
#[derive(Default)]
pub struct Store {
    members: Mutex<BTreeMap<PathBuf, Arc<SimMember>>>,
}

impl Store {
    pub fn insert(&self, path: &Path, m: Arc<SimMember>) {
        self.members
            .lock()
            .expect("store lock")
            .insert(path.to_path_buf(), m);
    }

    pub fn get(&self, path: &Path) -> Option<Arc<SimMember>> {
        self.members.lock().expect("store lock").get(path).cloned()
    }

    pub fn paths(&self) -> Vec<PathBuf> {
        self.members
            .lock()
            .expect("store lock")
            .keys()
            .cloned()
            .collect()
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn Member>> {
        self.get(path)
            .map(|m| m as Arc<dyn Member>)
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("{}: no such member", path.display())))
    }
}

impl MemberSource for Store {
    fn peek(&self, path: &Path) -> Result<Arc<dyn Member>> {
        self.open(path)
    }

    fn claim(&self, path: &Path, _writable: bool) -> Result<Arc<dyn Member>> {
        self.open(path)
    }

    fn id(&self, path: &Path) -> Option<(u64, u64)> {
        let m = self.members.lock().expect("store lock");
        m.keys().position(|p| p == path).map(|i| (0, i as u64))
    }

    fn candidates(&self, locations: &[PathBuf]) -> Vec<PathBuf> {
        self.paths()
            .into_iter()
            .filter(|p| locations.iter().any(|l| p.starts_with(l)))
            .collect()
    }

    fn is_file(&self, path: &Path) -> bool {
        self.get(path).is_some()
    }
}
