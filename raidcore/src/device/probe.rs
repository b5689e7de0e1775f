//! Device probing before we write: signatures of file systems, partition tables and other
//! arrays, and whether a device is mounted or used by something else.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Member;

/// Known signatures: (name, byte offset, magic bytes).
const SIGNATURES: &[(&str, u64, &[u8])] = &[
    ("ext2/3/4 file system", 1080, &[0x53, 0xef]),
    ("XFS file system", 0, b"XFSB"),
    ("btrfs file system", 65600, b"_BHRfS_M"),
    ("LUKS volume", 0, b"LUKS\xba\xbe"),
    ("LVM2 physical volume", 536, b"LVM2 001"),
    ("GPT partition table", 512, b"EFI PART"),
    ("Linux md superblock (1.1)", 0, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("Linux md superblock (1.2)", 4096, &[0xfc, 0x4e, 0x2b, 0xa9]),
    ("swap space", 4086, b"SWAPSPACE2"),
    ("ISO 9660 file system", 32769, b"CD001"),
    ("FAT file system", 82, b"FAT32   "),
    ("FAT file system", 54, b"FAT16   "),
    ("FAT file system", 54, b"FAT12   "),
    ("NTFS file system", 3, b"NTFS    "),
    (
        "bcache device",
        4120,
        &[0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca],
    ),
];

/// Names of the foreign signatures found on a member (not raidctl's own superblock).
/// Uses the built-in table and, when installed, `blkid -p` for everything else it knows.
pub fn foreign_signatures(member: &dyn Member, path: Option<&Path>) -> Vec<String> {
    let mut found = Vec::new();
    let head_len = member.len().min(70_000) as usize;
    let mut head = vec![0u8; head_len];
    if member.read_at(&mut head, 0).is_ok() {
        for (name, off, magic) in SIGNATURES {
            let (o, e) = (*off as usize, *off as usize + magic.len());
            if e <= head.len() && &head[o..e] == *magic && !found.iter().any(|f| f == name) {
                found.push(name.to_string());
            }
        }
        if head.len() >= 512 && head[510] == 0x55 && head[511] == 0xaa && found.is_empty() {
            found.push("DOS/MBR boot sector or partition table".to_string());
        }
    }
    if let Some(p) = path {
        if let Some(t) = blkid_type(p) {
            if t != "raidctl"
                && !found
                    .iter()
                    .any(|f| f.to_lowercase().contains(&t.to_lowercase()))
            {
                found.push(format!("{t} (blkid)"));
            }
        }
    }
    found
}

fn blkid_type(path: &Path) -> Option<String> {
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(path)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("TYPE=")
                .or_else(|| l.strip_prefix("PTTYPE="))
        })
        .map(|s| s.to_string())
}

/// Why a device cannot be used at all (mounted, attached to a loop device, held by another
/// device), or None. Such a device is refused even with --force.
pub fn in_use(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.file_type().is_block_device() {
        let rdev = meta.rdev();
        let (maj, min) = (libc::major(rdev), libc::minor(rdev));
        if let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") {
            for line in info.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 4 && f[2] == format!("{maj}:{min}") {
                    return Some(format!("{} is mounted on {}", path.display(), f[4]));
                }
            }
        }
        if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
            let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if swaps
                .lines()
                .skip(1)
                .any(|l| l.split_whitespace().next() == Some(&canon.display().to_string()))
            {
                return Some(format!("{} is in use as swap", path.display()));
            }
        }
        let holders = PathBuf::from(format!("/sys/dev/block/{maj}:{min}/holders"));
        if let Ok(mut d) = std::fs::read_dir(&holders) {
            if let Some(Ok(h)) = d.next() {
                return Some(format!(
                    "{} is held by {}",
                    path.display(),
                    h.file_name().to_string_lossy()
                ));
            }
        }
    } else if meta.file_type().is_file() {
        if let Some(dev) = loop_device_backed_by(path) {
            return Some(format!("{} is attached to {dev}", path.display()));
        }
    }
    None
}

/// The backing file of loop device `dev` (e.g. /dev/loop3), if it is one and has one.
pub fn loop_backing_file(dev: &Path) -> Option<PathBuf> {
    let canon = std::fs::canonicalize(dev).ok()?;
    let name = canon.file_name()?.to_str()?;
    if !name.starts_with("loop") {
        return None;
    }
    let b = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let b = b.trim_end();
    Some(PathBuf::from(b.strip_suffix(" (deleted)").unwrap_or(b)))
}

/// The loop device whose backing file is `path`, if any.
pub fn loop_device_backed_by(path: &Path) -> Option<String> {
    let canon = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&canon).ok()?;
    for entry in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        let backing = entry.path().join("loop/backing_file");
        if let Ok(b) = std::fs::read_to_string(&backing) {
            let b = b.trim_end();
            let b = b.strip_suffix(" (deleted)").unwrap_or(b);
            if let Ok(bm) = std::fs::metadata(b) {
                if bm.ino() == meta.ino() && bm.dev() == meta.dev() {
                    return Some(format!("/dev/{name}"));
                }
            }
        }
    }
    None
}

/// Facts about the block device behind a member path (the device itself, or for a regular
/// file the device of its file system).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DeviceInfo {
    pub path: String,
    /// "block device" or "file on <device>".
    pub kind: String,
    pub size_bytes: u64,
    /// The kernel name of the queue inspected (e.g. "nvme0n1", "loop3").
    pub queue: Option<String>,
    pub rotational: Option<bool>,
    /// "none", "host-aware" or "host-managed".
    pub zoned: Option<String>,
    pub discard_granularity: Option<u64>,
    pub discard_max_bytes: Option<u64>,
    pub logical_block_size: Option<u64>,
    pub physical_block_size: Option<u64>,
    pub optimal_io_size: Option<u64>,
}

impl DeviceInfo {
    pub fn supports_discard(&self) -> Option<bool> {
        self.discard_max_bytes.map(|m| m > 0)
    }

    /// Shingled (SMR) drives report a zoned model other than "none".
    pub fn is_smr(&self) -> bool {
        self.zoned.as_deref().is_some_and(|z| z != "none")
    }
}

/// The sysfs directory of the whole disk holding device `maj:min` (a partition's parent).
pub(crate) fn queue_dir(maj: u32, min: u32) -> Option<(String, PathBuf)> {
    let dev = std::fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    let disk = if dev.join("partition").exists() {
        dev.parent()?.to_path_buf()
    } else {
        dev
    };
    let name = disk.file_name()?.to_string_lossy().to_string();
    disk.join("queue")
        .is_dir()
        .then_some((name, disk.join("queue")))
}

fn read_num(p: PathBuf) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Inspects a member path.
pub fn inspect(path: &Path) -> std::io::Result<DeviceInfo> {
    let meta = std::fs::metadata(path)?;
    let (maj, min, kind) = if meta.file_type().is_block_device() {
        (
            libc::major(meta.rdev()),
            libc::minor(meta.rdev()),
            "block device".to_string(),
        )
    } else {
        (
            libc::major(meta.dev()),
            libc::minor(meta.dev()),
            String::new(),
        )
    };
    let mut info = DeviceInfo {
        path: path.display().to_string(),
        kind,
        ..Default::default()
    };
    info.size_bytes = if meta.file_type().is_block_device() {
        std::fs::File::open(path)
            .ok()
            .and_then(|f| super::file::file_size(&f, path).ok())
            .unwrap_or(0)
    } else {
        meta.len()
    };
    if let Some((name, q)) = queue_dir(maj, min) {
        if info.size_bytes == 0 && meta.file_type().is_block_device() {
            // A device this process may not open (a mounted system disk under a sandbox):
            // sysfs gives its size (a partition's own) in 512-byte sectors.
            if let Some(sectors) =
                read_num(PathBuf::from(format!("/sys/dev/block/{maj}:{min}/size")))
            {
                info.size_bytes = sectors * 512;
            }
        }
        if info.kind.is_empty() {
            info.kind = format!("file on {name}");
        }
        info.rotational = read_num(q.join("rotational")).map(|r| r == 1);
        info.zoned = std::fs::read_to_string(q.join("zoned"))
            .ok()
            .map(|z| z.trim().to_string());
        info.discard_granularity = read_num(q.join("discard_granularity"));
        info.discard_max_bytes = read_num(q.join("discard_max_bytes"));
        info.logical_block_size = read_num(q.join("logical_block_size"));
        info.physical_block_size = read_num(q.join("physical_block_size"));
        info.optimal_io_size = read_num(q.join("optimal_io_size"));
        info.queue = Some(name);
    } else if info.kind.is_empty() {
        info.kind =
            format!("file on device {maj}:{min} (no block queue: tmpfs, overlay or network)");
    }
    Ok(info)
}

/// What kind of file system holds a path (the file itself, or the directory it would be
/// created in), as far as member placement cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// devtmpfs: /dev. A regular file there is a typo of a device name, never a member.
    Devtmpfs,
    /// tmpfs or ramfs: memory; the data is gone at reboot.
    Memory,
    Other,
}

/// The file system holding `path` (or its parent directory when it does not exist yet).
pub fn holder(path: &Path) -> Holder {
    use nix::sys::statfs::{statfs, FsType, TMPFS_MAGIC};
    let probe = if path.exists() {
        path.to_path_buf()
    } else {
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    };
    // DEVTMPFS has no magic of its own: it is a tmpfs mounted by the kernel at /dev.
    let Ok(s) = statfs(&probe) else {
        return Holder::Other;
    };
    let ramfs = FsType(0x8584_58f6_u32 as _);
    let t = s.filesystem_type();
    if t == TMPFS_MAGIC || t == ramfs {
        let canon = std::fs::canonicalize(&probe).unwrap_or(probe);
        if canon.starts_with("/dev") && !canon.starts_with("/dev/shm") {
            return Holder::Devtmpfs;
        }
        return Holder::Memory;
    }
    Holder::Other
}

/// A name of block device `dev` that survives reboots and renumbering: its /dev/disk/by-id,
/// by-partuuid or by-uuid link (the first that exists, in that order). None for files and for
/// devices without one (loop devices).
pub fn stable_name(dev: &Path) -> Option<PathBuf> {
    let m = std::fs::metadata(dev).ok()?;
    if !m.file_type().is_block_device() {
        return None;
    }
    let canon = std::fs::canonicalize(dev).ok()?;
    for dir in [
        "/dev/disk/by-id",
        "/dev/disk/by-partuuid",
        "/dev/disk/by-uuid",
    ] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| std::fs::canonicalize(p).is_ok_and(|c| c == canon))
            .collect();
        names.sort();
        if let Some(n) = names.into_iter().next() {
            return Some(n);
        }
    }
    None
}

/// The process holding an exclusive `flock` on `path` (a raidctl writer: a daemon, or an
/// offline write, scrub or rebuild), from /proc/locks: its pid and command line. For a loop
/// device the backing file is looked at too (raidctl locks both).
pub fn lock_holder(path: &Path) -> Option<(u32, String)> {
    lock_holder_of(&[path])
}

/// As [`lock_holder`], for the first of several paths that is held: /proc/locks is read once.
pub fn lock_holder_of(paths: &[&Path]) -> Option<(u32, String)> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let mut all = Vec::new();
    for p in paths {
        all.push(p.to_path_buf());
        all.extend(loop_backing_file(p));
    }
    for p in all {
        let Ok(m) = std::fs::metadata(&p) else {
            continue;
        };
        let (maj, min) = (libc::major(m.dev()), libc::minor(m.dev()));
        let key = format!("{maj:02x}:{min:02x}:{}", m.ino());
        for line in locks.lines() {
            // "1: FLOCK  ADVISORY  WRITE 29461 fe:00:10010645 0 EOF"
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == key {
                let Ok(pid) = f[4].parse::<u32>() else {
                    continue;
                };
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|b| {
                        b.split(|&c| c == 0)
                            .filter(|a| !a.is_empty())
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                return Some((pid, cmd));
            }
        }
    }
    None
}
