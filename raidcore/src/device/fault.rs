//! Fault-injecting member wrapper for tests: EIO after N operations, or at once, unreadable
//! ranges (bad sectors, healed when rewritten, as an SSD remaps them), bit flips on reads of
//! chosen offsets, and slow writes.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::Member;
use crate::error::{Error, Result};

/// Wraps a member and injects faults.
pub struct FaultMember {
    inner: Box<dyn Member>,
    ops: AtomicU64,
    fail_after: AtomicU64,
    flips: Mutex<Vec<u64>>,
    /// Unreadable 4 KiB blocks (byte offsets).
    bad_blocks: Mutex<Vec<u64>>,
    /// Writes at or past this byte offset take this long first.
    slow: Mutex<Option<(u64, std::time::Duration)>>,
    /// Flushes counted, and the count from which flushes fail with EIO.
    flushes: AtomicU64,
    failing_flush: AtomicU64,
}

impl FaultMember {
    pub fn new(inner: Box<dyn Member>) -> FaultMember {
        FaultMember {
            inner,
            ops: AtomicU64::new(0),
            fail_after: AtomicU64::new(u64::MAX),
            flips: Mutex::new(Vec::new()),
            bad_blocks: Mutex::new(Vec::new()),
            slow: Mutex::new(None),
            flushes: AtomicU64::new(0),
            failing_flush: AtomicU64::new(u64::MAX),
        }
    }

    /// The `n`th flush from now (1: the next) and every one after it fail with EIO.
    pub fn fail_flushes_from(&self, n: u64) {
        self.failing_flush.store(
            self.flushes.load(Ordering::SeqCst) + n.max(1) - 1,
            Ordering::SeqCst,
        );
    }

    /// Writes at or past byte `from` sleep `d` before they are done (a slow or stalling drive).
    pub fn slow_writes(&self, from: u64, d: std::time::Duration) {
        *self.slow.lock().expect("lock") = Some((from, d));
    }

    /// Every read, write and flush after the next `n` fails with EIO.
    pub fn fail_after(&self, n: u64) {
        self.fail_after
            .store(self.ops.load(Ordering::SeqCst) + n, Ordering::SeqCst);
    }

    /// Stops injecting I/O errors.
    pub fn heal(&self) {
        self.fail_after.store(u64::MAX, Ordering::SeqCst);
    }

    /// Reads touching the 4 KiB block at `offset` fail with EIO until the block is written.
    pub fn bad_block(&self, offset: u64) {
        self.bad_blocks
            .lock()
            .expect("lock")
            .push(offset / 4096 * 4096);
    }

    /// Unreadable blocks left (not yet rewritten).
    pub fn bad_blocks(&self) -> usize {
        self.bad_blocks.lock().expect("lock").len()
    }

    /// Reads covering byte `offset` return it with its lowest bit flipped.
    pub fn flip_on_read(&self, offset: u64) {
        self.flips.lock().expect("lock").push(offset);
    }

    /// Operations performed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    fn tick(&self, op: &str, offset: u64) -> Result<()> {
        let n = self.ops.fetch_add(1, Ordering::SeqCst);
        if n >= self.fail_after.load(Ordering::SeqCst) {
            return Err(Error::io(
                io::Error::from_raw_os_error(libc::EIO),
                op,
                &self.describe(),
                offset,
            ));
        }
        Ok(())
    }
}

impl Member for FaultMember {
    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.tick("read", offset)?;
        let end = offset + buf.len() as u64;
        if let Some(&b) = self
            .bad_blocks
            .lock()
            .expect("lock")
            .iter()
            .find(|&&b| b < end && offset < b + 4096)
        {
            return Err(Error::io(
                io::Error::from_raw_os_error(libc::EIO),
                "read",
                &self.describe(),
                b,
            ));
        }
        self.inner.read_at(buf, offset)?;
        for &f in self.flips.lock().expect("lock").iter() {
            if f >= offset && f < offset + buf.len() as u64 {
                buf[(f - offset) as usize] ^= 1;
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.tick("write", offset)?;
        let slow = *self.slow.lock().expect("lock");
        if let Some((_, d)) = slow.filter(|s| offset >= s.0) {
            std::thread::sleep(d);
        }
        self.inner.write_at(buf, offset)?;
        let end = offset + buf.len() as u64;
        self.bad_blocks
            .lock()
            .expect("lock")
            .retain(|&b| !(b >= offset && b + 4096 <= end));
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.tick("flush", 0)?;
        if self.flushes.fetch_add(1, Ordering::SeqCst) >= self.failing_flush.load(Ordering::SeqCst)
        {
            return Err(Error::io(
                io::Error::from_raw_os_error(libc::EIO),
                "flush",
                &self.describe(),
                0,
            ));
        }
        self.inner.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.tick("discard", offset)?;
        self.inner.discard(offset, len)
    }

    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.tick("unmap", offset)?;
        self.inner.unmap_zeroes(offset, len)
    }

    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemMember;

    #[test]
    fn fails_after_n_ops_and_flips_bits() {
        let f = FaultMember::new(Box::new(MemMember::new(8192)));
        f.write_at(&[7; 16], 0).unwrap();
        f.flip_on_read(3);
        let mut b = [0u8; 16];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!(b[3], 6);
        assert_eq!(b[2], 7);
        f.fail_after(1);
        f.read_at(&mut b, 0).unwrap();
        let e = f.read_at(&mut b, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        f.heal();
        f.read_at(&mut b, 0).unwrap();
    }
}
