//! Loop-device helpers for simulations: attach backing files (LOOP_CTL_GET_FREE +
//! LOOP_CONFIGURE) and detach devices (LOOP_CLR_FD). One of the few places with `unsafe`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use raidcore::{Error, ErrorKind, Result};

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LO_NAME_SIZE: usize = 64;

/// `struct loop_info64` from <linux/loop.h>.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; LO_NAME_SIZE],
    lo_crypt_name: [u8; LO_NAME_SIZE],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config` from <linux/loop.h>.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

fn os_err(op: &str, what: &Path) -> Error {
    Error::io(
        std::io::Error::last_os_error(),
        op,
        &what.display().to_string(),
        0,
    )
}

/// Attaches `file` to a free loop device and returns the device path.
pub fn attach(file: &Path) -> Result<PathBuf> {
    let backing = OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .map_err(|e| Error::io(e, "open", &file.display().to_string(), 0))?;
    let ctl_path = Path::new("/dev/loop-control");
    let ctl = File::open(ctl_path).map_err(|e| Error::io(e, "open", "/dev/loop-control", 0))?;
    for _ in 0..32 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number or -1.
        let n = unsafe { libc::ioctl(ctl.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if n < 0 {
            return Err(os_err("LOOP_CTL_GET_FREE", ctl_path));
        }
        let dev = PathBuf::from(format!("/dev/loop{n}"));
        let Ok(d) = OpenOptions::new().read(true).write(true).open(&dev) else {
            continue;
        };
        let mut cfg = LoopConfig {
            fd: backing.as_raw_fd() as u32,
            block_size: 0,
            // SAFETY: LoopInfo64 is plain integers and byte arrays, for which all-zero is valid.
            info: unsafe { std::mem::zeroed() },
            reserved: [0; 8],
        };
        let name = file.display().to_string();
        let len = name.len().min(LO_NAME_SIZE - 1);
        cfg.info.lo_file_name[..len].copy_from_slice(&name.as_bytes()[..len]);
        // SAFETY: LOOP_CONFIGURE reads a struct loop_config through the pointer, valid for the call.
        let r = unsafe { libc::ioctl(d.as_raw_fd(), LOOP_CONFIGURE, &cfg as *const LoopConfig) };
        if r == 0 {
            return Ok(dev);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) {
            return Err(Error::io(
                e,
                "LOOP_CONFIGURE",
                &dev.display().to_string(),
                0,
            ));
        }
        // Somebody took this device between GET_FREE and CONFIGURE: try the next one.
    }
    Err(Error::new(
        ErrorKind::Busy,
        "no free loop device after 32 attempts",
    ))
}

/// Detaches a loop device (the kernel defers it while the device is still open).
pub fn detach(dev: &Path) -> Result<()> {
    let d = File::open(dev).map_err(|e| Error::io(e, "open", &dev.display().to_string(), 0))?;
    // SAFETY: LOOP_CLR_FD takes no argument.
    let r = unsafe { libc::ioctl(d.as_raw_fd(), LOOP_CLR_FD) };
    if r != 0 {
        return Err(os_err("LOOP_CLR_FD", dev));
    }
    Ok(())
}

/// Loop devices whose backing file lies in `dir`.
pub fn devices_backed_in(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            let b = PathBuf::from(b.trim_end().trim_end_matches(" (deleted)"));
            if b.parent() == Some(dir.as_path()) {
                out.push((PathBuf::from(format!("/dev/{name}")), b));
            }
        }
    }
    out.sort();
    out
}
