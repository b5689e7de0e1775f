//! Member devices: the [`Member`] trait (len, read_at, write_at, flush, discard) and its
//! backends: files and block devices ([`FileMember`], O_DIRECT when a request is aligned),
//! memory ([`MemMember`]), fault injection for tests ([`FaultMember`]) and for drills at run
//! time ([`inject`]), and crash simulation ([`CrashMember`]); plus device probing (size, signatures of file systems and other arrays,
//! mounts and other users). Knows nothing about RAID.

pub(crate) mod crash;
mod fault;
mod file;
pub mod inject;
mod memory;
pub mod probe;

pub use crash::{CrashMember, CrashMode};
pub use fault::FaultMember;
pub use file::{FileMember, OpenMode};
pub use memory::MemMember;

use crate::error::Result;

/// A device an array is built on. Offsets are absolute byte offsets on the device. Reads and
/// writes either transfer the whole buffer or fail.
pub trait Member: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> u64;
    /// True when the device has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Makes every completed write durable (fdatasync).
    fn flush(&self) -> Result<()>;
    /// Tells the device a range is unused (hole punch on files, BLKDISCARD on block devices).
    fn discard(&self, offset: u64, len: u64) -> Result<()>;
    /// Makes a range read back as zeros, as cheaply as the device allows (hole punch,
    /// BLKZEROOUT). The default writes zero buffers.
    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let zeros = crate::buf::AlignedBuf::zeroed(1 << 20);
        let mut pos = offset;
        while pos < offset + len {
            let n = (offset + len - pos).min(zeros.len() as u64) as usize;
            self.write_at(&zeros[..n], pos)?;
            pos += n as u64;
        }
        Ok(())
    }
    /// Unmaps a range so that it reads back as zeros, without writing (hole punch on files,
    /// unmap-with-guaranteed-zeros on block devices). Devices that cannot do that without
    /// writing return an error, so callers can leave the range as it is.
    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        let _ = (offset, len);
        Err(crate::Error::new(
            crate::ErrorKind::Unsupported,
            format!("{}: no unmap with zeroes", self.describe()),
        ))
    }
    /// The path or a name for messages.
    fn describe(&self) -> String;
    /// True when aligned I/O bypasses the page cache (O_DIRECT).
    fn direct_io(&self) -> bool {
        false
    }
    /// True when the member lives in memory (tmpfs, a RAM disk): its I/O is a copy on the
    /// caller's core, so driving several such members from threads gains nothing.
    fn memory_backed(&self) -> bool {
        false
    }
    /// The parts of `offset..offset + len` that may hold anything but zeros, in order; None
    /// when that cannot be told (all of it may). A sparse file's holes are left out (its
    /// `SEEK_DATA` and `SEEK_HOLE`): what reads metadata areas whole, such as a scrub's check
    /// of the checksum tables, skips what was never written.
    fn data_extents(&self, _offset: u64, _len: u64) -> Option<Vec<std::ops::Range<u64>>> {
        None
    }
}
