//! The simulator's member device: sparse memory (4 KiB pages, allocated when first written, so
//! a 1 TiB member costs what was written to it) with a live and a durable image (a flush makes
//! writes durable; a power cut keeps the durable image plus a seeded subset of the unflushed
//! 4 KiB pieces), faults switched at run time (dead, unreadable ranges that a write heals as
//! an SSD remaps them, EIO or ENOSPC on writes, silent rot), and a scheduler yield point before
//! every operation. A [`Store`] names members by path for assembly. Large zeroings (create's,
//! a new member's checksum area) are kept as a size, never as bytes, unflushed or not, so a
//! 1 TiB member costs nothing until written.
//!
//! Silent rot comes in two kinds. Persistent rot ([`SimMember::rot`]) flips bytes on the medium
//! (live, durable and unflushed images alike) and is remembered as outstanding until a write
//! covers it, so the run knows which cells of which rows are rotten. Transient rot
//! ([`Faults::flip_reads`]) flips bytes of the next few reads at or past an offset (the data
//! area) while the medium stays good: a re-read, or redundancy, gives the right bytes.

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
    /// Transient rot: the next `.1` reads that start at or past member offset `.0` return their
    /// first bytes flipped (the medium is fine; a bus or controller glitch). Stays `Some` with
    /// zero reads left once they are used.
    pub flip_reads: Option<(u64, u32)>,
}

const PAGE: u64 = 4096;

/// A sparse image: 4 KiB pages, absent pages read as zeros. Memory follows the data written.
#[derive(Clone, Default)]
pub struct Image {
    len: u64,
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Image {
    /// `len` bytes of zeros, nothing allocated.
    pub fn zeroed(len: u64) -> Image {
        Image {
            len,
            pages: BTreeMap::new(),
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pages allocated (memory use, in 4 KiB pages).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Visits the page pieces of `off..off + len`: (page index, offset in page, offset in
    /// range, length).
    fn pieces(off: u64, len: u64, mut f: impl FnMut(u64, usize, usize, usize)) {
        let mut pos = 0u64;
        while pos < len {
            let abs = off + pos;
            let (pg, within) = (abs / PAGE, (abs % PAGE) as usize);
            let n = ((PAGE as usize - within) as u64).min(len - pos) as usize;
            f(pg, within, pos as usize, n);
            pos += n as u64;
        }
    }

    pub fn read(&self, off: u64, buf: &mut [u8]) {
        Image::pieces(off, buf.len() as u64, |pg, w, p, n| {
            match self.pages.get(&pg) {
                Some(page) => buf[p..p + n].copy_from_slice(&page[w..w + n]),
                None => buf[p..p + n].fill(0),
            }
        });
    }

    pub fn write(&mut self, off: u64, data: &[u8]) {
        Image::pieces(off, data.len() as u64, |pg, w, p, n| {
            if n == PAGE as usize && data[p..p + n].iter().all(|&b| b == 0) {
                self.pages.remove(&pg);
                return;
            }
            let page = self
                .pages
                .entry(pg)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            page[w..w + n].copy_from_slice(&data[p..p + n]);
        });
    }

    /// Zeros `off..off + len` (whole pages are dropped).
    pub fn zero(&mut self, off: u64, len: u64) {
        let end = off + len;
        let (first_full, last_full) = (off.div_ceil(PAGE), end / PAGE);
        if first_full < last_full {
            let gone: Vec<u64> = self
                .pages
                .range(first_full..last_full)
                .map(|(&k, _)| k)
                .collect();
            gone.iter().for_each(|k| {
                self.pages.remove(k);
            });
            let head = (first_full * PAGE).min(end) - off;
            self.write(off, &vec![0u8; head as usize]);
            let tail = last_full * PAGE;
            self.write(tail, &vec![0u8; (end - tail) as usize]);
        } else {
            self.write(off, &vec![0u8; len as usize]);
        }
    }

    /// Flips the bytes of `off..off + len` (XOR 0x5a).
    pub fn flip(&mut self, off: u64, len: u64) {
        let mut buf = vec![0u8; len as usize];
        self.read(off, &mut buf);
        buf.iter_mut().for_each(|x| *x ^= 0x5a);
        self.write(off, &buf);
    }
}

impl From<Vec<u8>> for Image {
    fn from(v: Vec<u8>) -> Image {
        let mut img = Image::zeroed(v.len() as u64);
        img.write(0, &v);
        img
    }
}

/// An unflushed write: bytes, or zeros (a discard or write-zeroes, kept without its size).
enum Pending {
    Data(Vec<u8>),
    Zeros(u64),
}

impl Pending {
    fn len(&self) -> u64 {
        match self {
            Pending::Data(d) => d.len() as u64,
            Pending::Zeros(n) => *n,
        }
    }

    fn apply(&self, img: &mut Image, at: u64, range: std::ops::Range<u64>) {
        match self {
            Pending::Data(d) => img.write(
                at + range.start,
                &d[range.start as usize..range.end as usize],
            ),
            Pending::Zeros(_) => img.zero(at + range.start, range.end - range.start),
        }
    }
}

struct State {
    live: Image,
    durable: Image,
    /// Writes since the last flush, in order.
    pending: Vec<(u64, Pending)>,
    faults: Faults,
    /// Persistent rot not yet overwritten: byte ranges whose medium holds flipped bytes.
    rot: Vec<Range<u64>>,
    /// Reads that returned flipped bytes (transient rot): (offset, length).
    flipped: Vec<(u64, u64)>,
    /// The threads its I/O ran on (a simulation's every member I/O runs on an actor's or the
    /// runner's thread: one elsewhere is outside the scheduler).
    threads: Vec<std::thread::ThreadId>,
}

/// A simulated member.
pub struct SimMember {
    name: String,
    st: Mutex<State>,
    /// Shared by every member of a run: false once the power is cut (nothing reaches media).
    power: Arc<AtomicBool>,
}

impl SimMember {
    pub fn new(name: &str, image: impl Into<Image>, power: Arc<AtomicBool>) -> SimMember {
        let image = image.into();
        SimMember {
            name: name.to_string(),
            st: Mutex::new(State {
                durable: image.clone(),
                live: image,
                pending: Vec::new(),
                faults: Faults::default(),
                rot: Vec::new(),
                flipped: Vec::new(),
                threads: Vec::new(),
            }),
            power,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The yield point before an operation: a slow member sleeps (others run meanwhile).
    fn arrive(&self) {
        let latency = {
            let mut st = self.state();
            let me = std::thread::current().id();
            if !st.threads.contains(&me) {
                st.threads.push(me);
            }
            st.faults.latency
        };
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
    pub fn crash_image(&self, rng: &mut SplitMix64, keep_pct: u64) -> Image {
        let st = self.state();
        let mut img = st.durable.clone();
        for (off, data) in &st.pending {
            let (off, len) = (*off, data.len());
            if len > 1 << 20 {
                // A large discard (create's zeroing): kept or not as a whole.
                if rng.below(100) < keep_pct {
                    data.apply(&mut img, off, 0..len);
                }
                continue;
            }
            let mut pos = 0u64;
            while pos < len {
                let abs = off + pos;
                let end = ((abs / 4096 + 1) * 4096 - off).min(len);
                let kept = rng.below(100) < keep_pct;
                if let Some(d) = debug_offset() {
                    if d >= abs && d < off + end {
                        eprintln!(
                            "{} crash: unflushed write at {off} {}",
                            self.name,
                            if kept { "kept" } else { "lost" }
                        );
                    }
                }
                if kept {
                    data.apply(&mut img, off, pos..end);
                }
                pos = end;
            }
        }
        img
    }

    /// Damage on the medium (what a firmware bug or a stray write does): flips `len` bytes at
    /// `offset` in the live and durable images at once, and in unflushed writes over them (so
    /// a power cut cannot undo it). No scheduling point: runs that never damage replay as
    /// before.
    pub fn damage(&self, offset: u64, len: usize) {
        let mut st = self.state();
        let st = &mut *st;
        if offset + len as u64 > st.live.len() {
            return;
        }
        st.live.flip(offset, len as u64);
        st.durable.flip(offset, len as u64);
        let mut split = Vec::new();
        for (o, p) in &mut st.pending {
            let (a, b) = (offset.max(*o), (offset + len as u64).min(*o + p.len()));
            if a >= b {
                continue;
            }
            if let Pending::Zeros(n) = p {
                if *n > 1 << 20 {
                    // A large zeroing (create's, 1 GiB a piece on large members): split around
                    // the damage rather than hold it as bytes.
                    split.push((*o, *n, a, b));
                    continue;
                }
                *p = Pending::Data(vec![0u8; *n as usize]);
            }
            if let Pending::Data(data) = p {
                data[(a - *o) as usize..(b - *o) as usize]
                    .iter_mut()
                    .for_each(|x| *x ^= 0x5a);
            }
        }
        for (o, n, a, b) in split {
            let Some(i) = st
                .pending
                .iter()
                .position(|(x, p)| *x == o && matches!(p, Pending::Zeros(m) if *m == n))
            else {
                continue;
            };
            let mut d = vec![0u8; (b - a) as usize];
            d.iter_mut().for_each(|x| *x ^= 0x5a);
            let mut parts = Vec::new();
            if a > o {
                parts.push((o, Pending::Zeros(a - o)));
            }
            parts.push((a, Pending::Data(d)));
            if o + n > b {
                parts.push((b, Pending::Zeros(o + n - b)));
            }
            st.pending.splice(i..i + 1, parts);
        }
    }

    /// Persistent silent rot of data or parity: [`SimMember::damage`], remembered as outstanding
    /// until a write covers the bytes (see [`SimMember::rotten`]).
    pub fn rot(&self, offset: u64, len: usize) {
        self.damage(offset, len);
        self.state().rot.push(offset..offset + len as u64);
    }

    /// Outstanding persistent rot: ranges flipped by [`SimMember::rot`] that no write has
    /// covered since (a crash image keeps the list: conservative, the medium may still hold
    /// it).
    pub fn rotten(&self) -> Vec<Range<u64>> {
        self.state().rot.clone()
    }

    /// The threads this member's I/O ran on so far.
    pub fn io_threads(&self) -> Vec<std::thread::ThreadId> {
        self.state().threads.clone()
    }

    /// Reads that returned flipped bytes so far: (member offset, length).
    pub fn flipped(&self) -> Vec<(u64, u64)> {
        self.state().flipped.clone()
    }

    /// Carries outstanding rot over from the member this one replaces after a power cut.
    pub fn set_rotten(&self, rot: Vec<Range<u64>>) {
        self.state().rot = rot;
    }

    /// Bytes held in memory by the live image (sparse pages).
    pub fn resident_bytes(&self) -> u64 {
        self.state().live.pages() as u64 * PAGE
    }

    /// Reads `buf.len()` bytes of the live image at `offset` (no fault, no scheduling).
    pub fn peek_live(&self, offset: u64, buf: &mut [u8]) {
        self.state().live.read(offset, buf);
    }

    /// Reads the durable image (what a power cut now keeps, before unflushed writes) without
    /// faults, for the model.
    pub fn peek_durable(&self, offset: u64, buf: &mut [u8]) {
        self.state().durable.read(offset, buf);
    }

    /// A write (bytes or zeros) through the faults, the power and the remapping of bad sectors.
    fn write_pending(&self, p: Pending, offset: u64) -> Result<()> {
        self.arrive();
        let mut st = self.state();
        let len = p.len();
        if offset.checked_add(len).is_none_or(|e| e > st.live.len()) {
            return Err(Error::new(
                ErrorKind::Io,
                format!("write {} at offset {offset}: past the end", self.name),
            ));
        }
        if st.faults.dead {
            return Err(self.err("write", offset, libc::EIO));
        }
        if let Some(e) = st.faults.write_errno {
            return Err(self.err("write", offset, e));
        }
        if !self.power.load(Ordering::SeqCst) {
            return Ok(()); // the power is gone: nothing reaches the media
        }
        let end = offset + len;
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
        // Rot under the write is gone (the bytes are new).
        let mut rot = Vec::new();
        for r in std::mem::take(&mut st.rot) {
            if r.start < offset {
                rot.push(r.start..r.end.min(offset));
            }
            if r.end > end {
                rot.push(r.start.max(end)..r.end);
            }
        }
        st.rot = rot;
        if let Some(d) = debug_offset() {
            if d >= offset && d < end {
                eprintln!(
                    "{} {} write {} at {offset}: byte {d} = {:#04x}",
                    sched::debug_where(),
                    self.name,
                    len,
                    match &p {
                        Pending::Data(b) => b[(d - offset) as usize],
                        Pending::Zeros(_) => 0,
                    }
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
        p.apply(&mut st.live, offset, 0..len);
        st.pending.push((offset, p));
        Ok(())
    }

    fn err(&self, op: &str, offset: u64, errno: i32) -> Error {
        Error::io(io::Error::from_raw_os_error(errno), op, &self.name, offset)
    }

    fn check(&self, st: &State, op: &str, off: u64, len: usize) -> Result<()> {
        if off
            .checked_add(len as u64)
            .is_none_or(|e| e > st.live.len())
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
        self.state().live.len()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.arrive();
        let mut st = self.state();
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
        st.live.read(offset, buf);
        if let Some((from, left)) = st.faults.flip_reads {
            if offset >= from && left > 0 && !buf.is_empty() {
                let n = buf.len().min(8);
                buf[..n].iter_mut().for_each(|x| *x ^= 0x5a);
                // Kept at zero reads left: the run counts the member's tolerance as used until
                // its faults are reset (an operation that met one flip may still be going).
                st.faults.flip_reads = Some((from, left - 1));
                st.flipped.push((offset, buf.len() as u64));
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.write_pending(Pending::Data(buf.to_vec()), offset)
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
            if st.pending.iter().any(|(o, b)| d >= *o && d < *o + b.len()) {
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
        for (off, p) in pending.drain(..) {
            let len = p.len();
            p.apply(durable, off, 0..len);
        }
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.write_pending(Pending::Zeros(len), offset)
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        if len > 64 << 20 {
            // Create's zeroing of a large member: one step, nothing allocated.
            return self.write_pending(Pending::Zeros(len), offset);
        }
        // As the default does (1 MiB writes, one scheduling point each), so that runs on small
        // members replay as they did before the member was sparse.
        let mut pos = 0;
        while pos < len {
            let n = (len - pos).min(1 << 20);
            self.write_pending(Pending::Zeros(n), offset + pos)?;
            pos += n;
        }
        Ok(())
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
