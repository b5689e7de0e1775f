//! Members backed by regular files or block devices (loop devices included). Aligned requests
//! go through a second O_DIRECT descriptor where the file system supports it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use super::Member;
use crate::buf::ALIGN;
use crate::error::{Error, ErrorKind, Result};

nix::ioctl_read!(blkgetsize64, 0x12, 114, u64);
nix::ioctl_write_ptr_bad!(blkdiscard, nix::request_code_none!(0x12, 119), [u64; 2]);
nix::ioctl_write_ptr_bad!(blkzeroout, nix::request_code_none!(0x12, 127), [u64; 2]);

/// How a member is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only, shared advisory lock.
    Read,
    /// Read and write, exclusive advisory lock; block devices also O_EXCL.
    Write,
    /// Read only and no lock: for looking at superblocks while scanning for members, so that
    /// probing a device never disturbs the process that owns it.
    Peek,
}

/// A file or block device member.
pub struct FileMember {
    path: PathBuf,
    file: Lock,
    direct: Option<File>,
    len: u64,
    block_device: bool,
    /// Backed by memory (tmpfs, ramfs, a RAM disk, zram, pmem): I/O is a copy on the
    /// caller's core, with no device to wait on.
    memory: bool,
    /// For a loop device, the same lock on its backing file: a member is locked by what it
    /// is, so the file and a loop device over it cannot be opened for writing at once.
    _backing: Option<Flock<File>>,
}

/// The buffered descriptor, holding the advisory lock unless opened to peek.
enum Lock {
    Held(Flock<File>),
    None(File),
}

impl std::ops::Deref for Lock {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            Lock::Held(f) => f,
            Lock::None(f) => f,
        }
    }
}

/// Size of an open file or block device.
pub fn file_size(file: &File, path: &Path) -> Result<u64> {
    let meta = file
        .metadata()
        .map_err(|e| Error::io(e, "stat", &path.display().to_string(), 0))?;
    if meta.file_type().is_block_device() {
        let mut size = 0u64;
        // SAFETY: BLKGETSIZE64 writes one u64 through the pointer, which is valid for the call.
        unsafe { blkgetsize64(file.as_raw_fd(), &mut size) }.map_err(|e| {
            Error::io(
                io::Error::from_raw_os_error(e as i32),
                "BLKGETSIZE64",
                &path.display().to_string(),
                0,
            )
        })?;
        Ok(size)
    } else {
        Ok(meta.len())
    }
}

impl FileMember {
    /// Opens `path` (a regular file or a block device) and takes its advisory lock.
    pub fn open(path: &Path, mode: OpenMode) -> Result<FileMember> {
        let name = path.display().to_string();
        let meta = std::fs::metadata(path).map_err(|e| Error::io(e, "stat", &name, 0))?;
        let ft = meta.file_type();
        let block_device = ft.is_block_device();
        if !block_device && !ft.is_file() {
            bail!(
                InvalidInput,
                "{name} is neither a regular file nor a block device"
            );
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(mode == OpenMode::Write);
        let excl = if block_device && mode == OpenMode::Write {
            libc::O_EXCL
        } else {
            0
        };
        opts.custom_flags(libc::O_CLOEXEC | excl);
        let file = opts.open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::EBUSY) {
                Error::new(
                    ErrorKind::Busy,
                    format!(
                        "{name} is in use (mounted, or held open exclusively by another program)"
                    ),
                )
            } else {
                Error::io(e, "open", &name, 0)
            }
        })?;
        let lock = if mode == OpenMode::Write {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        let file = if mode == OpenMode::Peek {
            Lock::None(file)
        } else {
            Lock::Held(Flock::lock(file, lock).map_err(|(_, errno)| {
                if errno == nix::errno::Errno::EWOULDBLOCK {
                    Error::new(
                        ErrorKind::Busy,
                        match super::probe::lock_holder(path) {
                            Some((pid, cmd)) if cmd.contains(" serve") => format!(
                                "{name} is held by `raidctl serve` (pid {pid}); run the command while it serves (it is sent to the daemon) or stop the server"
                            ),
                            Some((pid, cmd)) => format!(
                                "{name} is locked by another raidctl process (pid {pid}: {cmd})"
                            ),
                            None => format!("{name} is locked by another raidctl process"),
                        },
                    )
                } else {
                    Error::io(
                        io::Error::from_raw_os_error(errno as i32),
                        "flock",
                        &name,
                        0,
                    )
                }
            })?)
        };
        let backing = match (mode, block_device) {
            (OpenMode::Peek, _) | (_, false) => None,
            (_, true) => match super::probe::loop_backing_file(path) {
                None => None,
                Some(b) => {
                    let f = File::open(&b)
                        .map_err(|e| Error::io(e, "open the backing file of", &name, 0))?;
                    Some(Flock::lock(f, lock).map_err(|(_, errno)| {
                        if errno == nix::errno::Errno::EWOULDBLOCK {
                            Error::new(
                                ErrorKind::Busy,
                                format!(
                                    "{name} is a loop device over {}, which another raidctl process holds",
                                    b.display()
                                ),
                            )
                        } else {
                            Error::io(io::Error::from_raw_os_error(errno as i32), "flock", &b.display().to_string(), 0)
                        }
                    })?)
                }
            },
        };
        let len = file_size(&file, path)?;
        // O_DIRECT is refused by some file systems (tmpfs): fall back to buffered I/O there.
        let direct = OpenOptions::new()
            .read(true)
            .write(mode == OpenMode::Write)
            .custom_flags(libc::O_CLOEXEC | libc::O_DIRECT)
            .open(path)
            .ok();
        let memory = if block_device {
            use std::os::unix::fs::MetadataExt;
            memory_disk(meta.rdev())
        } else {
            use nix::sys::statfs::{fstatfs, FsType, TMPFS_MAGIC};
            // RAMFS_MAGIC of linux/magic.h (neither libc nor nix names it).
            let ramfs = FsType(0x8584_58f6_u32 as _);
            fstatfs(&*file).is_ok_and(|s| [TMPFS_MAGIC, ramfs].contains(&s.filesystem_type()))
        };
        Ok(FileMember {
            path: path.to_path_buf(),
            file,
            direct,
            len,
            block_device,
            memory,
            _backing: backing,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_block_device(&self) -> bool {
        self.block_device
    }

    /// Whether reads and writes bypass the page cache when aligned.
    pub fn has_direct_io(&self) -> bool {
        self.direct.is_some()
    }

    fn pick(&self, ptr: *const u8, len: usize, offset: u64) -> &File {
        match &self.direct {
            Some(d)
                if (ptr as usize).is_multiple_of(ALIGN)
                    && len.is_multiple_of(ALIGN)
                    && offset.is_multiple_of(ALIGN as u64) =>
            {
                d
            }
            _ => &self.file,
        }
    }

    /// fallocate(PUNCH_HOLE | KEEP_SIZE): a hole on files; on block devices an unmap that
    /// guarantees zeros, or an error where the device cannot.
    fn punch_hole(&self, offset: u64, len: u64) -> std::result::Result<(), nix::errno::Errno> {
        nix::fcntl::fallocate(
            &*self.file,
            nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
                | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    }

    fn errno(&self, e: nix::errno::Errno, op: &str, offset: u64) -> Error {
        Error::io(
            io::Error::from_raw_os_error(e as i32),
            op,
            &self.path.display().to_string(),
            offset,
        )
    }

    fn check_range(&self, op: &str, offset: u64, len: usize) -> Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{op} {} at offset {offset}: {len} bytes past the end of the device ({} bytes)",
                    self.path.display(),
                    self.len
                ),
            )),
        }
    }
}

impl Member for FileMember {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.check_range("read", offset, buf.len())?;
        let f = self.pick(buf.as_ptr(), buf.len(), offset);
        f.read_exact_at(buf, offset)
            .map_err(|e| Error::io(e, "read", &self.path.display().to_string(), offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_range("write", offset, buf.len())?;
        let f = self.pick(buf.as_ptr(), buf.len(), offset);
        f.write_all_at(buf, offset)
            .map_err(|e| Error::io(e, "write", &self.path.display().to_string(), offset))
    }

    fn flush(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io(e, "fdatasync", &self.path.display().to_string(), 0))
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.check_range("discard", offset, len as usize)?;
        let name = self.path.display().to_string();
        if self.block_device {
            let range = [offset, len];
            // SAFETY: BLKDISCARD reads two u64 (start, length) through the pointer, valid for the call.
            unsafe { blkdiscard(self.file.as_raw_fd(), &range) }
                .map(|_| ())
                .map_err(|e| {
                    Error::io(
                        io::Error::from_raw_os_error(e as i32),
                        "BLKDISCARD",
                        &name,
                        offset,
                    )
                })
        } else {
            self.punch_hole(offset, len)
                .map_err(|e| self.errno(e, "punch hole", offset))
        }
    }

    fn unmap_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.check_range("unmap", offset, len as usize)?;
        self.punch_hole(offset, len)
            .map_err(|e| self.errno(e, "unmap", offset))
    }

    fn write_zeroes(&self, offset: u64, len: u64) -> Result<()> {
        self.check_range("zero", offset, len as usize)?;
        // On files a punched hole reads back as zeros and costs no writes. On block devices the
        // same call zeroes by unmapping where the device guarantees zeros after it; where it
        // cannot, BLKZEROOUT writes zeros (the device's write-zeroes, or plain writes).
        match self.punch_hole(offset, len) {
            Ok(()) => Ok(()),
            Err(e)
                if self.block_device
                    && matches!(e, nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EINVAL) =>
            {
                let range = [offset, len];
                // SAFETY: BLKZEROOUT reads two u64 (start, length) through the pointer, valid for the call.
                unsafe { blkzeroout(self.file.as_raw_fd(), &range) }
                    .map(|_| ())
                    .map_err(|e| self.errno(e, "BLKZEROOUT", offset))
            }
            Err(e) => Err(self.errno(e, "zero range", offset)),
        }
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn direct_io(&self) -> bool {
        self.has_direct_io()
    }

    fn memory_backed(&self) -> bool {
        self.memory
    }

    fn data_extents(&self, offset: u64, len: u64) -> Option<Vec<std::ops::Range<u64>>> {
        use nix::unistd::{lseek, Whence};
        if self.block_device {
            return None;
        }
        // Positioned I/O only (pread, pwrite): moving the file offset disturbs nothing.
        let f: &File = &self.file;
        let end = offset.checked_add(len)?.min(self.len);
        let mut out = Vec::new();
        let mut pos = offset;
        while pos < end {
            let data = match lseek(f, pos as i64, Whence::SeekData) {
                Ok(d) => d as u64,
                // No data past `pos`.
                Err(nix::errno::Errno::ENXIO) => break,
                Err(_) => return None,
            };
            if data >= end {
                break;
            }
            let hole = lseek(f, data as i64, Whence::SeekHole).ok()? as u64;
            out.push(data..hole.min(end));
            pos = hole.max(data + 1);
        }
        Some(out)
    }
}

/// Whether block device `rdev` is (a partition of) a disk in memory: a RAM disk (brd), zram
/// or pmem.
fn memory_disk(rdev: u64) -> bool {
    super::probe::queue_dir(libc::major(rdev), libc::minor(rdev))
        .is_some_and(|(disk, _)| ["ram", "zram", "pmem"].iter().any(|k| disk.starts_with(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file member in /dev/shm (tmpfs) is memory-backed, one on the build tree's file system
    /// (a disk here) is not; the engine drives only the latter from threads.
    #[test]
    fn members_on_tmpfs_are_memory_backed_and_on_a_disk_are_not() {
        let on = |dir: &Path| {
            let p = dir.join(format!("raidctl-memtest-{}", std::process::id()));
            std::fs::write(&p, vec![0u8; 1 << 16]).unwrap();
            let m = FileMember::open(&p, OpenMode::Read)
                .unwrap()
                .memory_backed();
            std::fs::remove_file(&p).unwrap();
            m
        };
        assert!(on(Path::new("/dev/shm")), "/dev/shm is tmpfs");
        // target/ of this workspace: a disk file system on the machines that run the tests.
        let disk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
        assert!(!on(&disk), "{} is not in memory", disk.display());
    }
}
