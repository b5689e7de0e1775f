//! `serve --nbd-device /dev/nbdN`: attaching an export to the kernel's own nbd driver, no
//! nbd-client needed. A socketpair: one end goes to the driver with the classic ioctls
//! (NBD_SET_BLKSIZE, NBD_SET_SIZE_BLOCKS, NBD_SET_FLAGS, NBD_SET_SOCK, then NBD_DO_IT in a
//! thread of its own, which returns when the device is disconnected), the other is served
//! by nbd.rs's transmission phase (the handshake is what these ioctls replace). Detach is
//! NBD_DISCONNECT (the driver sends NBD_CMD_DISC and closes), then NBD_CLEAR_SOCK.
//! This module owns those ioctls and nothing of the NBD protocol.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use raidcore::{Error, ErrorKind, Result};

// From <linux/nbd.h>: _IO(0xab, nr), no size or direction bits.
const NBD_SET_SOCK: libc::c_ulong = 0xab00;
const NBD_SET_BLKSIZE: libc::c_ulong = 0xab01;
const NBD_DO_IT: libc::c_ulong = 0xab03;
const NBD_CLEAR_SOCK: libc::c_ulong = 0xab04;
const NBD_CLEAR_QUE: libc::c_ulong = 0xab05;
const NBD_SET_SIZE_BLOCKS: libc::c_ulong = 0xab07;
const NBD_DISCONNECT: libc::c_ulong = 0xab08;
const NBD_SET_FLAGS: libc::c_ulong = 0xab0a;

/// The block size given to the driver: the export's I/O granularity (every array size is a
/// multiple of it, chunks being at least 4 KiB).
pub const BLOCK: u64 = 4096;
/// The nbd driver's block major.
const NBD_MAJOR: u32 = 43;
/// How long attach waits for the driver to start the device, and detach for it to let go.
const WAIT: Duration = Duration::from_secs(30);

fn ioctl(f: &File, dev: &Path, name: &str, req: libc::c_ulong, arg: libc::c_ulong) -> Result<()> {
    // SAFETY: every request used here takes an integer argument (a size, a count, flags or a
    // file descriptor we own), never a pointer, so no memory is read or written through it.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), req, arg) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        let kind = if e.raw_os_error() == Some(libc::EBUSY) {
            ErrorKind::Busy
        } else {
            ErrorKind::Io
        };
        return Err(Error::new(
            kind,
            format!("{name} on {}: {e}", dev.display()),
        ));
    }
    Ok(())
}

/// A kernel nbd device bound to an export; [`KernelNbd::detach`] lets it go.
pub struct KernelNbd {
    path: PathBuf,
    dev: File,
    /// Ends (with NBD_DO_IT's result) when the driver lets go of the socket.
    done: mpsc::Receiver<std::io::Result<()>>,
}

impl KernelNbd {
    /// Binds `path` (a /dev/nbdN) to an export of `size` bytes with transmission `flags`;
    /// returns the device and the socket end to serve (transmission phase only). Returns once
    /// the driver runs the device.
    pub fn attach(path: &Path, size: u64, flags: u16) -> Result<(KernelNbd, UnixStream)> {
        let p = path.display().to_string();
        let md = std::fs::metadata(path).map_err(|e| Error::io(e, "stat", &p, 0))?;
        let rdev = std::os::unix::fs::MetadataExt::rdev(&md);
        if !md.file_type().is_block_device() || libc::major(rdev) != NBD_MAJOR {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("{p} is not an nbd device (modprobe nbd creates /dev/nbd0..)"),
            ));
        }
        if !size.is_multiple_of(BLOCK) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("the array size {size} is not a multiple of {BLOCK}"),
            ));
        }
        // Nothing is sent to a device another server holds (its size would change under it)
        // or that something still has open exclusively (a file system left mounted on it after
        // its server died would write into this array).
        let name = path
            .canonicalize()
            .ok()
            .and_then(|c| c.file_name().map(|n| n.to_string_lossy().to_string()))
            .unwrap_or_default();
        if let Ok(pid) = std::fs::read_to_string(format!("/sys/block/{name}/pid")) {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "{p} is attached to another server (pid {}); refusing to touch it",
                    pid.trim()
                ),
            ));
        }
        {
            use std::os::unix::fs::OpenOptionsExt;
            if let Err(e) = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_EXCL)
                .open(path)
            {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "{p} is in use ({e}): a file system still mounted on it? Unmount it first"
                    ),
                ));
            }
        }
        let dev = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(e, "open", &p, 0))?;
        let (ours, theirs) = UnixStream::pair().map_err(|e| Error::io(e, "socketpair", &p, 0))?;
        ioctl(&dev, path, "NBD_SET_BLKSIZE", NBD_SET_BLKSIZE, BLOCK as _)?;
        ioctl(
            &dev,
            path,
            "NBD_SET_SIZE_BLOCKS",
            NBD_SET_SIZE_BLOCKS,
            (size / BLOCK) as _,
        )?;
        ioctl(&dev, path, "NBD_SET_FLAGS", NBD_SET_FLAGS, flags as _)?;
        // EBUSY here: another server (nbd-client, an earlier raidctl) holds the device.
        ioctl(
            &dev,
            path,
            "NBD_SET_SOCK",
            NBD_SET_SOCK,
            theirs.as_raw_fd() as _,
        )
        .map_err(|e| {
            Error::new(
                e.kind(),
                format!("{e} (is the device attached to another server? nbd-client -c {p})"),
            )
        })?;
        let (tx, done) = mpsc::channel();
        let runner = dev.try_clone().map_err(|e| Error::io(e, "dup", &p, 0))?;
        let rpath = path.to_path_buf();
        std::thread::Builder::new()
            .name("nbd-do-it".into())
            .spawn(move || {
                // NBD_DO_IT waits interruptibly: a signal taken by this thread would tear the
                // device down with requests in flight. SIGTERM and SIGINT go to the others.
                crate::daemon::block_stop_signals();
                let r = ioctl(&runner, &rpath, "NBD_DO_IT", NBD_DO_IT, 0)
                    .map_err(|e| std::io::Error::other(e.to_string()));
                drop(theirs);
                let _ = tx.send(r);
            })
            .map_err(|e| Error::io(e, "spawn", &p, 0))?;
        let nbd = KernelNbd {
            path: path.to_path_buf(),
            dev,
            done,
        };
        // The driver creates /sys/block/nbdN/pid once it runs the device, and sets the
        // device's capacity only after that: ready is both (a VM test under load read a size
        // of 0 just after the pid appeared).
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let pid = Path::new("/sys/block").join(&name).join("pid");
        let size = Path::new("/sys/block").join(&name).join("size");
        let sized = || {
            std::fs::read_to_string(&size)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .is_some_and(|n| n > 0)
        };
        let t = Instant::now();
        while !pid.exists() || !sized() {
            if let Ok(r) = nbd.done.try_recv() {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "{p}: the nbd driver did not start the device: {}",
                        r.err().map(|e| e.to_string()).unwrap_or_default()
                    ),
                ));
            }
            if t.elapsed() > WAIT {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("{p}: the nbd driver did not start the device within 30 s"),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok((nbd, ours))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Disconnects the device (the driver sends NBD_CMD_DISC after what it has queued) and
    /// waits for the driver to let go of the socket.
    pub fn detach(self) -> Result<()> {
        ioctl(&self.dev, &self.path, "NBD_DISCONNECT", NBD_DISCONNECT, 0)?;
        let r = self.done.recv_timeout(WAIT);
        // Ask the driver to drop anything left and forget the socket, whatever happened.
        let _ = ioctl(&self.dev, &self.path, "NBD_CLEAR_QUE", NBD_CLEAR_QUE, 0);
        let _ = ioctl(&self.dev, &self.path, "NBD_CLEAR_SOCK", NBD_CLEAR_SOCK, 0);
        match r {
            Ok(_) => Ok(()),
            Err(_) => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "{}: the nbd driver did not let go within 30 s of NBD_DISCONNECT",
                    self.path.display()
                ),
            )),
        }
    }
}
