//! Crash-simulating member for tests: a live image that every write changes and a durable image
//! that only a flush advances. At a "power cut" the device keeps the durable image, or (second
//! mode) the durable image plus a random subset of the writes since the last flush, as real
//! devices with volatile caches do.

use std::sync::Mutex;

use super::Member;
use crate::error::{Error, ErrorKind, Result};

/// What survives a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Nothing that was not flushed.
    DropUnflushed,
    /// A random subset of the unflushed writes (applied in order), chosen by the seed.
    KeepSome(u64),
    /// Every write issued before the power cut, flushed or not.
    KeepAll,
}

struct State {
    live: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
}

/// A flush: every pending (unflushed) write reaches the durable image, in order.
pub(crate) fn make_durable(durable: &mut [u8], pending: &mut Vec<(u64, Vec<u8>)>) {
    for (off, data) in pending.drain(..) {
        durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
    }
}

/// A member with a live and a durable image.
pub struct CrashMember {
    state: Mutex<State>,
    name: String,
    /// Writes left before the power goes (shared by all members of an array); None: no cut.
    power: Option<std::sync::Arc<std::sync::atomic::AtomicI64>>,
}

impl CrashMember {
    pub fn new(len: u64, name: &str) -> CrashMember {
        CrashMember {
            state: Mutex::new(State {
                live: vec![0; len as usize],
                durable: vec![0; len as usize],
                pending: Vec::new(),
            }),
            name: name.to_string(),
            power: None,
        }
    }

    /// A member whose power goes after `budget` more writes across every member sharing it:
    /// later writes and flushes never happen.
    pub fn with_power(
        len: u64,
        name: &str,
        budget: std::sync::Arc<std::sync::atomic::AtomicI64>,
    ) -> CrashMember {
        CrashMember {
            power: Some(budget),
            ..CrashMember::new(len, name)
        }
    }

    fn powered(&self, spend: bool) -> bool {
        use std::sync::atomic::Ordering;
        match &self.power {
            None => true,
            Some(b) if spend => b.fetch_sub(1, Ordering::SeqCst) > 0,
            Some(b) => b.load(Ordering::SeqCst) > 0,
        }
    }

    /// The image the device holds after a power cut now.
    pub fn crash_image(&self, mode: CrashMode) -> Vec<u8> {
        let st = self.state.lock().expect("crash lock");
        let mut img = st.durable.clone();
        if mode == CrashMode::KeepAll {
            for (off, data) in &st.pending {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        if let CrashMode::KeepSome(seed) = mode {
            let mut x = seed;
            for (off, data) in &st.pending {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (x >> 33) % 2 == 0 {
                    img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
                }
            }
        }
        img
    }

    fn check(&self, off: u64, len: usize, op: &str) -> Result<()> {
        let size = self.state.lock().expect("crash lock").live.len() as u64;
        if off.checked_add(len as u64).is_none_or(|e| e > size) {
            return Err(Error::new(
                ErrorKind::Io,
                format!("{op} {} at offset {off}: past the end", self.name),
            ));
        }
        Ok(())
    }
}

impl Member for CrashMember {
    fn len(&self) -> u64 {
        self.state.lock().expect("crash lock").live.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check(offset, buf.len(), "read")?;
        let st = self.state.lock().expect("crash lock");
        buf.copy_from_slice(&st.live[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check(offset, buf.len(), "write")?;
        if !self.powered(true) {
            return Ok(());
        }
        let mut st = self.state.lock().expect("crash lock");
        st.live[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        st.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        if !self.powered(false) {
            return Ok(());
        }
        let mut st = self.state.lock().expect("crash lock");
        let State {
            durable, pending, ..
        } = &mut *st;
        make_durable(durable, pending);
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
}
