//! Checksum entries of member writes in progress, kept outside the members: each member write
//! first notes the entries of the blocks it is about to write here (in a file under the run
//! directory, tmpfs: no device write, no sync), so a process crash (kill -9, a panic, the OOM
//! killer) cannot leave a block newer than every entry the next open knows. The checksum log
//! gets a block's new entry only after its data was written and is written itself at the next
//! flush (or when enough records wait); before this store, a killed write could leave two blocks
//! of a row newer than their entries next to parity that disagrees, and the resync could not
//! tell a completed write from rot (issue 31).
//!
//! At the next writable open (same boot: the file records the kernel's boot id), the noted
//! entries of a block in a region the write-intent bitmap marks are its candidates, those noted
//! after the last one equal to the entry the checksums hold (all of them when none is): writes
//! the checksum log had not caught up with. The block is read, and when its contents match one
//! of them, that entry is recorded (the bytes are what the engine wrote from a verified cell,
//! [`super::Verified`]; cells written unverified are not noted). A block that matches none
//! keeps its entry, and the resync judges it as before. An older version of the block (a
//! write the device lost, a rollback) matches only entries noted before the one the checksums
//! hold, and is never accepted by them (found by an outside attack: any noted version was
//! accepted, so a rolled-back block passed as valid).
//!
//! A power cut takes the file with it (tmpfs; a different boot id when it does not): what is
//! unflushed at a power cut is decided by the resync alone, as before.
//!
//! Layout: a 4 KiB header (magic, array uuid, boot id, capacity, session nonce, its own
//! check), then a ring of `capacity` 64-byte records (device uuid, block, sequence number,
//! entry, check). The
//! ring wraps: a record is needed only until its entry is in the member's checksum log, and the
//! log is written whenever [`super::csum`]'s pending records pass their high mark, far below
//! the capacity. The check of a record mixes in the session nonce, so a record of an earlier
//! session (or of before a clean close) is never read as current.
//!
//! No lock: a writer reserves its records with one atomic add and stores them into a shared
//! mapping of the file (no system call: the stores are in the page cache, which a killed
//! process leaves behind). The file's pages are allocated at open (`posix_fallocate`), so a
//! full tmpfs cannot fault a store later; where that or the mapping fails, notes fall back to
//! one positioned write each.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::csum::Digest;
use super::Array;
use crate::error::{Error, ErrorKind, Result};

/// (Version 2: the word-wise check; a file of version 1 is no store of this one.)
const MAGIC: &[u8; 8] = b"RPENDIN2";
const HEADER: u64 = 4096;
const RECORD: usize = 64;
/// Records in the ring: 4 MiB of tmpfs per open array (allocated at open).
pub const CAPACITY: u64 = 65536;

/// Where the records live: a file (written through a shared mapping of it, or with positioned
/// writes where it could not be mapped), or (the simulator) memory that outlives a simulated
/// process crash.
#[derive(Clone)]
pub enum Backing {
    File(Arc<File>),
    Mapped(Arc<Mapping>),
    Memory(Arc<std::sync::Mutex<Vec<u8>>>),
}

/// A shared, writable mapping of a whole store file, its pages allocated. Accessed only as
/// 8-byte atomic words, so writers of distinct records (and a record the ring reuses while an
/// old writer is still storing it) never race in the language's sense.
pub struct Mapping {
    file: Arc<File>,
    words: std::ptr::NonNull<AtomicU64>,
    len: usize,
}

// SAFETY: the mapping is process memory that lives until Drop; every access goes through
// `AtomicU64`, so sharing it between threads is as safe as sharing a slice of atomics.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: only atomic loads and stores touch the mapped words.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Sizes `file` to `len` bytes (a multiple of the page size), allocates its pages and maps
    /// it shared and writable.
    fn new(file: Arc<File>, len: usize) -> std::io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        // Allocated now: a store into a hole of a full tmpfs would raise SIGBUS, not an error.
        nix::fcntl::posix_fallocate(&*file, 0, len as libc::off_t).map_err(std::io::Error::from)?;
        // SAFETY: a fresh mapping chosen by the kernel (no address given), of a file opened
        // read-write and at least `len` bytes long (allocated above); the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let words = std::ptr::NonNull::new(p.cast::<AtomicU64>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Mapping { file, words, len })
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `words` points at `len` mapped bytes, page-aligned (so 8-aligned), valid until
        // Drop unmaps them; AtomicU64 has u64's size and alignment and any bit pattern is valid.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr(), self.len / 8) }
    }

    fn store(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        let off = off as usize;
        if !off.is_multiple_of(8) || !buf.len().is_multiple_of(8) || off + buf.len() > self.len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("store of {} bytes at {off} outside the mapping", buf.len()),
            ));
        }
        let words = &self.words()[off / 8..(off + buf.len()) / 8];
        for (w, c) in words.iter().zip(buf.chunks_exact(8)) {
            w.store(
                u64::from_ne_bytes(c.try_into().expect("8 bytes")),
                Ordering::Relaxed,
            );
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no reference into it outlives self.
        unsafe { libc::munmap(self.words.as_ptr().cast(), self.len) };
    }
}

impl Backing {
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        match self {
            Backing::File(f) => f.write_all_at(buf, off),
            Backing::Mapped(m) => m.store(buf, off),
            Backing::Memory(m) => {
                let mut v = m.lock().unwrap_or_else(|e| e.into_inner());
                let end = off as usize + buf.len();
                if v.len() < end {
                    v.resize(end, 0);
                }
                v[off as usize..end].copy_from_slice(buf);
                Ok(())
            }
        }
    }

    fn read_all(&self) -> std::io::Result<Vec<u8>> {
        match self {
            Backing::File(f) => {
                let len = f.metadata()?.len().min(HEADER + CAPACITY * RECORD as u64);
                let mut v = vec![0u8; len as usize];
                f.read_exact_at(&mut v, 0)?;
                Ok(v)
            }
            Backing::Mapped(m) => Backing::File(m.file.clone()).read_all(),
            Backing::Memory(m) => Ok(m.lock().unwrap_or_else(|e| e.into_inner()).clone()),
        }
    }

    /// Empties the store for a new session. A file is never shortened: another process may
    /// map it (two assemblies of the same array from disjoint members, a misuse), and its next
    /// store past the new end would raise SIGBUS there. The new session's nonce in the header
    /// invalidates the records left in it instead.
    fn truncate(&self) -> std::io::Result<()> {
        match self {
            Backing::File(_) | Backing::Mapped(_) => Ok(()),
            Backing::Memory(m) => {
                m.lock().unwrap_or_else(|e| e.into_inner()).clear();
                Ok(())
            }
        }
    }
}

/// The kernel's boot id (16 bytes; zeros when it cannot be read).
fn boot_id() -> [u8; 16] {
    let mut out = [0u8; 16];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = s.trim().bytes().filter(|b| b.is_ascii_hexdigit()).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            if let Ok(b) = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("0"), 16) {
                out[i] = b;
            }
        }
    }
    out
}

/// A seeded 64-bit check of headers and records, a word at a time (FNV-1a's multiply over
/// 8-byte words, each step followed by a shift that folds the high bits down): it catches a
/// torn or stale record, not an attacker (the file is root's, in root's run directory). Every
/// step is a bijection of the state, so two inputs differing in one word never agree.
fn check(seed: u64, bytes: &[u8]) -> u64 {
    debug_assert!(bytes.len().is_multiple_of(8));
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for w in bytes.chunks_exact(8) {
        h = (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes"))).wrapping_mul(0x0100_0000_01b3);
        h ^= h >> 32;
    }
    h
}

/// One noted entry: the device it was written to, its block (in the data area), when (the
/// session's sequence number: later notes of a block are newer writes), the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    pub dev: [u8; 16],
    pub block: u64,
    pub seq: u64,
    pub entry: Digest,
}

/// The open store of one array.
pub struct PendingStore {
    backing: Backing,
    path: Option<PathBuf>,
    array: [u8; 16],
    boot: [u8; 16],
    nonce: AtomicU64,
    next: AtomicU64,
    /// An earlier session of this array in this boot left the store: the last stop was not a
    /// power cut, so its candidates cover every write it had in flight.
    earlier: bool,
}

impl PendingStore {
    /// The store's file for the array `uuid` in `dir`.
    pub fn path_in(dir: &Path, uuid: &[u8; 16]) -> PathBuf {
        dir.join(format!(
            "{}.pending",
            uuid::Uuid::from_bytes(*uuid).hyphenated()
        ))
    }

    /// Opens (creating) the file of array `uuid` in `dir`: returns the candidates an earlier
    /// session of this boot left, and the store, emptied, for this session.
    pub fn open_file(dir: &Path, uuid: &[u8; 16]) -> std::io::Result<(Vec<Candidate>, Self)> {
        std::fs::create_dir_all(dir)?;
        let path = Self::path_in(dir, uuid);
        // Not through a symbolic link (root would write wherever it points), and readable by
        // root only, as the control socket beside it.
        let f = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)?
        };
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        // A hard link would have the store written into whatever file it shares (found by an
        // outside attack: a linked file got the header and grew to the ring's size).
        {
            use std::os::unix::fs::MetadataExt;
            if meta.nlink() > 1 {
                return Err(std::io::Error::other(format!(
                    "{} has {} hard links: the store is never written through a link",
                    path.display(),
                    meta.nlink()
                )));
            }
        }
        let f = Arc::new(f);
        let (found, mut store) = match Self::open(Backing::File(f.clone()), uuid, boot_id()) {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        // Notes through a mapping from here on (the header is written); positioned writes
        // where the pages cannot be allocated or mapped.
        if let Ok(m) = Mapping::new(f, (HEADER + CAPACITY * RECORD as u64) as usize) {
            store.backing = Backing::Mapped(Arc::new(m));
        }
        store.path = Some(path);
        Ok((found, store))
    }

    /// As [`PendingStore::open_file`] over any backing, with the boot id given.
    pub fn open(
        backing: Backing,
        uuid: &[u8; 16],
        boot: [u8; 16],
    ) -> std::io::Result<(Vec<Candidate>, Self)> {
        let (earlier, found) = read_candidates(&backing.read_all()?, uuid, &boot);
        backing.truncate()?;
        let store = PendingStore {
            backing,
            path: None,
            array: *uuid,
            boot,
            nonce: AtomicU64::new(0),
            next: AtomicU64::new(0),
            earlier,
        };
        store.restart()?;
        Ok((found, store))
    }

    /// Starts a new session in the file: a fresh nonce in the header invalidates every record
    /// written before. Called with no write in flight (open, and a clean mark).
    pub fn restart(&self) -> std::io::Result<()> {
        let nonce = fresh_nonce(self.nonce.load(Ordering::Relaxed));
        let mut h = vec![0u8; HEADER as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..24].copy_from_slice(&self.array);
        h[24..40].copy_from_slice(&self.boot);
        h[40..48].copy_from_slice(&CAPACITY.to_le_bytes());
        h[48..56].copy_from_slice(&nonce.to_le_bytes());
        let c = check(0, &h[..56]);
        h[56..64].copy_from_slice(&c.to_le_bytes());
        self.backing.write_at(&h, 0)?;
        self.nonce.store(nonce, Ordering::Release);
        self.next.store(0, Ordering::Release);
        Ok(())
    }

    /// Notes the entries of blocks `first..` of device `dev`, about to be written. An error
    /// (tmpfs full) only weakens what the next open can decide: it is not the write's error.
    pub fn note(&self, dev: &[u8; 16], first: u64, entries: &[Digest]) {
        if entries.is_empty() {
            return;
        }
        let nonce = self.nonce.load(Ordering::Acquire);
        let n = entries.len() as u64;
        let start = self.next.fetch_add(n, Ordering::AcqRel);
        let mut buf = Vec::with_capacity(entries.len() * RECORD);
        let mut at = start % CAPACITY;
        for (i, e) in entries.iter().enumerate() {
            let slot = (start + i as u64) % CAPACITY;
            if slot == 0 && !buf.is_empty() {
                // The ring wraps inside this run: write what precedes the wrap first.
                let _ = self.backing.write_at(&buf, HEADER + at * RECORD as u64);
                buf.clear();
                at = 0;
            }
            let mut r = [0u8; RECORD];
            r[..16].copy_from_slice(dev);
            r[16..24].copy_from_slice(&(first + i as u64).to_le_bytes());
            r[24..32].copy_from_slice(&(start + i as u64).to_le_bytes());
            r[32..48].copy_from_slice(e);
            let c = check(nonce, &r[..48]);
            r[48..56].copy_from_slice(&c.to_le_bytes());
            buf.extend_from_slice(&r);
        }
        let _ = self.backing.write_at(&buf, HEADER + at * RECORD as u64);
    }

    /// Removes the file (the array was closed clean: nothing is pending).
    pub fn remove(&self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn fresh_nonce(old: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = check(t ^ (std::process::id() as u64) << 32, &old.to_le_bytes());
    if n == old {
        n.wrapping_add(1)
    } else {
        n
    }
}

/// The valid records of a store's bytes, when its header is this array's, of this boot.
fn read_candidates(bytes: &[u8], uuid: &[u8; 16], boot: &[u8; 16]) -> (bool, Vec<Candidate>) {
    if bytes.len() < HEADER as usize {
        return (false, Vec::new());
    }
    let h = &bytes[..HEADER as usize];
    let word = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    if &h[..8] != MAGIC
        || &h[8..24] != uuid
        || &h[24..40] != boot
        || word(40) != CAPACITY
        || word(56) != check(0, &h[..56])
    {
        return (false, Vec::new());
    }
    let nonce = word(48);
    let mut out: Vec<Candidate> = bytes[HEADER as usize..]
        .chunks_exact(RECORD)
        .filter(|r| {
            u64::from_le_bytes(r[48..56].try_into().expect("8 bytes")) == check(nonce, &r[..48])
        })
        .map(|r| Candidate {
            dev: r[..16].try_into().expect("16 bytes"),
            block: u64::from_le_bytes(r[16..24].try_into().expect("8 bytes")),
            seq: u64::from_le_bytes(r[24..32].try_into().expect("8 bytes")),
            entry: r[32..48].try_into().expect("16 bytes"),
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    (true, out)
}

/// What [`Array::keep_pending_entries`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PendingReport {
    /// Candidates an earlier session of this boot left, in regions the bitmap marks.
    pub candidates: u64,
    /// Blocks found holding one of their candidates whose entry said otherwise: the entry is
    /// now the candidate.
    pub restored: u64,
}

impl Array {
    /// Keeps the entries of member writes in progress in `dir` (the run directory) from now
    /// on; first restores the entries an earlier session of this boot noted for writes that a
    /// crash cut off (before the resync, which then judges every block by them). Writable
    /// opens only; call it before any write.
    pub fn keep_pending_entries(&self, dir: &Path) -> Result<PendingReport> {
        if !self.is_writable() || !self.has_checksums() {
            return Ok(PendingReport::default());
        }
        let uuid = self.superblock().array_uuid;
        let (found, store) = PendingStore::open_file(dir, &uuid).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "pending checksum entries in {}: {e}",
                    PendingStore::path_in(dir, &uuid).display()
                ),
            )
        })?;
        self.adopt_pending(found, store)
    }

    /// As [`Array::keep_pending_entries`] over a store already opened (the simulator keeps one
    /// in memory across a simulated process crash).
    pub fn adopt_pending(
        &self,
        found: Vec<Candidate>,
        store: PendingStore,
    ) -> Result<PendingReport> {
        let rep = self.restore_candidates(&found);
        if rep.restored > 0 {
            // Logged before the store forgets them (a second crash must not lose them).
            self.sync_devices(false)?;
        }
        self.entries_current
            .store(store.earlier, std::sync::atomic::Ordering::Release);
        let _ = self.pending.set(store);
        Ok(rep)
    }

    /// Records, for each block with candidates in a region the bitmap marks, the candidate its
    /// contents match, when the checksums hold an older entry (see the module's text).
    fn restore_candidates(&self, found: &[Candidate]) -> PendingReport {
        let mut rep = PendingReport::default();
        let block_bytes = super::csum::BLOCK;
        let chunk = self.layout().chunk();
        let devs = self.live_devs();
        let mut i = 0;
        while i < found.len() {
            let (dev, block) = (found[i].dev, found[i].block);
            let mut j = i;
            while j < found.len() && found[j].dev == dev && found[j].block == block {
                j += 1;
            }
            let cands = &found[i..j];
            i = j;
            let row = block * block_bytes / chunk;
            if row >= self.rows() || self.bitmap.as_ref().is_some_and(|b| !b.row_dirty(row)) {
                continue; // no write was in flight there at the crash
            }
            rep.candidates += cands.len() as u64;
            let Some(d) = devs.iter().find(|d| d.uuid == dev) else {
                continue;
            };
            let Some(s) = self.csum_of(d) else { continue };
            let off = self.data_offset + block * block_bytes;
            let mut buf = crate::buf::AlignedBuf::zeroed(block_bytes as usize);
            if d.member.read_at(&mut buf, off).is_err() {
                continue;
            }
            let got = self.csum_digest(&buf);
            let held = match s.expected(d.member.as_ref(), block, 1).first() {
                Some(super::csum::Expect::Known(e)) => Some(*e),
                _ => None,
            };
            if held == Some(got) {
                continue; // the checksums already hold what the block holds
            }
            // Only writes noted after the newest one the checksums hold (cands are in
            // sequence order): an older version of the block is a lost write or a rollback.
            let newer = match cands.iter().rposition(|c| Some(c.entry) == held) {
                Some(k) => &cands[k + 1..],
                None => cands,
            };
            if newer.iter().any(|c| c.entry == got) {
                s.record_restored(block, got);
                rep.restored += 1;
            }
        }
        rep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> Backing {
        Backing::Memory(Arc::new(std::sync::Mutex::new(Vec::new())))
    }

    /// A fresh directory for a store file (removed by the test at its end).
    fn fresh_dir(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("raidcore-pending-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The resync trusts that no entry lags a completed write only after a stop that was not
    /// a power cut: when a session of the same array and boot left the store.
    #[test]
    fn only_a_store_an_earlier_session_of_this_boot_left_says_the_entries_are_current() {
        let b = mem();
        let (_, s) = PendingStore::open(b.clone(), &[1; 16], [7; 16]).unwrap();
        assert!(!s.earlier, "a fresh store (a power cut took the last one)");
        drop(s);
        let copy = Backing::Memory(Arc::new(std::sync::Mutex::new(b.read_all().unwrap())));
        assert!(
            !PendingStore::open(copy, &[1; 16], [6; 16])
                .unwrap()
                .1
                .earlier
        );
        assert!(PendingStore::open(b, &[1; 16], [7; 16]).unwrap().1.earlier);
    }

    #[test]
    fn noted_entries_come_back_at_the_next_open_of_the_same_array_and_boot_only() {
        let b = mem();
        let (found, s) = PendingStore::open(b.clone(), &[1; 16], [7; 16]).unwrap();
        assert!(found.is_empty());
        s.note(&[9; 16], 100, &[[1; 16], [2; 16]]);
        s.note(&[8; 16], 5, &[[3; 16]]);
        drop(s);
        // Another boot, or another array: nothing.
        let copy = Backing::Memory(Arc::new(std::sync::Mutex::new(b.read_all().unwrap())));
        assert!(PendingStore::open(copy.clone(), &[1; 16], [6; 16])
            .unwrap()
            .0
            .is_empty());
        let copy = Backing::Memory(Arc::new(std::sync::Mutex::new(b.read_all().unwrap())));
        assert!(PendingStore::open(copy, &[2; 16], [7; 16])
            .unwrap()
            .0
            .is_empty());
        let (found, s) = PendingStore::open(b.clone(), &[1; 16], [7; 16]).unwrap();
        assert_eq!(
            found,
            vec![
                Candidate {
                    dev: [8; 16],
                    block: 5,
                    seq: 2,
                    entry: [3; 16]
                },
                Candidate {
                    dev: [9; 16],
                    block: 100,
                    seq: 0,
                    entry: [1; 16]
                },
                Candidate {
                    dev: [9; 16],
                    block: 101,
                    seq: 1,
                    entry: [2; 16]
                },
            ]
        );
        // The open started a new session: the old records are gone.
        drop(s);
        assert!(PendingStore::open(b, &[1; 16], [7; 16])
            .unwrap()
            .0
            .is_empty());
    }

    /// Notes go through a shared mapping of the file, with no system call: a note must be in
    /// the file (the page cache a killed process leaves behind) the moment `note` returns, with
    /// no unmap, sync or close after it, and wrap around the ring in the file as it does in
    /// memory.
    #[test]
    fn notes_through_the_mapping_are_in_the_file_the_moment_they_are_made() {
        let dir = fresh_dir("map");
        let uuid = [4; 16];
        let (_, s) = PendingStore::open_file(&dir, &uuid).unwrap();
        assert!(
            matches!(s.backing, Backing::Mapped(_)),
            "the store maps its file"
        );
        // The last record of the ring, then two that wrap to its start.
        s.next.store(CAPACITY - 1, Ordering::Release);
        s.note(&[9; 16], 7, &[[1; 16], [2; 16], [3; 16]]);
        // Read through another descriptor while the store still maps the file.
        let bytes = std::fs::read(PendingStore::path_in(&dir, &uuid)).unwrap();
        let copy = Backing::Memory(Arc::new(std::sync::Mutex::new(bytes)));
        let (found, _) = PendingStore::open(copy, &uuid, boot_id()).unwrap();
        let got: Vec<(u64, u64, Digest)> =
            found.iter().map(|c| (c.block, c.seq, c.entry)).collect();
        assert_eq!(
            got,
            vec![
                (7, CAPACITY - 1, [1; 16]),
                (8, CAPACITY, [2; 16]),
                (9, CAPACITY + 1, [3; 16])
            ]
        );
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Another process may map the file (two assemblies of one array from disjoint members):
    /// an open must never shorten it, or that process's next note past the new end raises
    /// SIGBUS. The old records are invalidated by the new session's nonce instead.
    #[test]
    fn an_open_never_shortens_a_store_file_another_process_may_map() {
        let dir = fresh_dir("len");
        let uuid = [5; 16];
        let (_, a) = PendingStore::open_file(&dir, &uuid).unwrap();
        a.note(&[9; 16], 7, &[[1; 16]]);
        let path = PendingStore::path_in(&dir, &uuid);
        let full = HEADER + CAPACITY * RECORD as u64;
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full);
        // The second open, through positioned writes as a fallback would use.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let (found, b) = PendingStore::open(Backing::File(Arc::new(f)), &uuid, boot_id()).unwrap();
        assert_eq!(found.len(), 1, "the first session's note");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            full,
            "the file kept its length"
        );
        a.note(&[9; 16], 8, &[[2; 16]]);
        // The first session's records are not the second's.
        b.note(&[9; 16], 9, &[[3; 16]]);
        let bytes = std::fs::read(&path).unwrap();
        let copy = Backing::Memory(Arc::new(std::sync::Mutex::new(bytes)));
        let (found, _) = PendingStore::open(copy, &uuid, boot_id()).unwrap();
        assert_eq!(found.iter().map(|c| c.block).collect::<Vec<_>>(), vec![9]);
        drop((a, b));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Found by an outside attack: a hard link at the store's path had the header and the ring
    /// written into the file it shares. Refused as a symbolic link is; the file is untouched.
    #[test]
    fn a_store_path_hard_linked_to_another_file_is_refused_and_the_file_left_untouched() {
        let dir = fresh_dir("link");
        std::fs::create_dir_all(&dir).unwrap();
        let uuid = [6; 16];
        let other = dir.join("precious");
        std::fs::write(&other, b"precious\n").unwrap();
        std::fs::hard_link(&other, PendingStore::path_in(&dir, &uuid)).unwrap();
        let e = PendingStore::open_file(&dir, &uuid).err().expect("refused");
        assert!(e.to_string().contains("hard links"), "{e}");
        assert_eq!(std::fs::read(&other).unwrap(), b"precious\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_restart_invalidates_the_records_before_it_and_a_torn_record_is_ignored() {
        let b = mem();
        let (_, s) = PendingStore::open(b.clone(), &[1; 16], [7; 16]).unwrap();
        s.note(&[9; 16], 1, &[[1; 16]]);
        s.restart().unwrap();
        s.note(&[9; 16], 2, &[[2; 16], [3; 16]]);
        // Tear the second record of the new session.
        {
            let Backing::Memory(m) = &b else {
                unreachable!()
            };
            m.lock().unwrap()[HEADER as usize + RECORD + 30] ^= 1;
        }
        let (found, _) = PendingStore::open(b, &[1; 16], [7; 16]).unwrap();
        assert_eq!(
            found,
            vec![Candidate {
                dev: [9; 16],
                block: 2,
                seq: 0,
                entry: [2; 16]
            }]
        );
    }

    #[test]
    fn the_ring_wraps_keeping_the_newest_records() {
        let b = mem();
        let (_, s) = PendingStore::open(b.clone(), &[1; 16], [7; 16]).unwrap();
        let run: Vec<Digest> = (0..1000u32).map(|i| [(i % 251) as u8; 16]).collect();
        let mut block = 0;
        while block < CAPACITY + 500 {
            s.note(&[9; 16], block, &run);
            block += run.len() as u64;
        }
        let (found, _) = PendingStore::open(b, &[1; 16], [7; 16]).unwrap();
        assert_eq!(found.len() as u64, CAPACITY);
        assert_eq!(found.last().unwrap().block, block - 1);
        assert_eq!(found[0].block, block - CAPACITY);
    }
}
