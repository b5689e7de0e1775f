//! In-memory member for tests and simulations.

use std::sync::RwLock;

use super::Member;
use crate::error::{Error, ErrorKind, Result};

/// A member held in memory.
pub struct MemMember {
    data: RwLock<Vec<u8>>,
    name: String,
}

impl MemMember {
    pub fn new(len: u64) -> MemMember {
        MemMember::named(len, "mem")
    }

    pub fn named(len: u64, name: &str) -> MemMember {
        MemMember {
            data: RwLock::new(vec![0; len as usize]),
            name: name.to_string(),
        }
    }

    /// A copy of the whole image.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().expect("lock").clone()
    }

    fn range(&self, offset: u64, len: usize, op: &str) -> Result<std::ops::Range<usize>> {
        let size = self.data.read().expect("lock").len() as u64;
        match offset.checked_add(len as u64) {
            Some(end) if end <= size => Ok(offset as usize..end as usize),
            _ => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{op} {} at offset {offset}: {len} bytes past the end ({size})",
                    self.name
                ),
            )),
        }
    }
}

impl Member for MemMember {
    fn len(&self) -> u64 {
        self.data.read().expect("lock").len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let r = self.range(offset, buf.len(), "read")?;
        buf.copy_from_slice(&self.data.read().expect("lock")[r]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let r = self.range(offset, buf.len(), "write")?;
        self.data.write().expect("lock")[r].copy_from_slice(buf);
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let r = self.range(offset, len as usize, "discard")?;
        self.data.write().expect("lock")[r].fill(0);
        Ok(())
    }

    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.discard(offset, len)
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}
