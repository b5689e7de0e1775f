//! Hardening of a daemon that serves a block device this host's own file systems may sit on
//! (`serve --nbd-device`, or `serve --harden`): the kernel must not wait on this process for
//! memory that only this process can free. Owns three process settings, each one best effort
//! (a warning when refused, e.g. without root):
//!
//! - `prctl(PR_SET_IO_FLUSHER)`: allocations of this process never recurse into I/O or file
//!   system reclaim (PF_MEMALLOC_NOIO), and it is not throttled as a dirtier of its own device
//!   (PF_LOCAL_THROTTLE). Set before any thread starts: threads inherit it.
//! - `mlockall(MCL_CURRENT | MCL_FUTURE)`: no page of the daemon is ever swapped or dropped,
//!   so serving a request never faults on I/O (which could be I/O to its own device). The
//!   bound is what the daemon maps: its binary, the stripe cache (--stripe-cache), per NBD
//!   connection at most 64 MiB of request payload, with --ublk queues x depth buffers of
//!   crate::ublk::IO_BUF_BYTES, and a 2 MiB stack for each of its threads.
//! - `/proc/self/oom_score_adj` = -900: the OOM killer picks nearly anything else first
//!   (not -1000: a daemon leaking memory can still be stopped).

/// PR_SET_IO_FLUSHER from <linux/prctl.h> (Linux 5.6), not in the libc crate.
const PR_SET_IO_FLUSHER: libc::c_int = 57;
/// The OOM score adjustment applied.
pub const OOM_SCORE_ADJ: i32 = -900;

/// Applies the three settings; returns a warning for each one the kernel refused.
pub fn apply() -> Vec<String> {
    let mut warnings = Vec::new();
    // SAFETY: prctl with integer arguments only; PR_SET_IO_FLUSHER reads no memory.
    if unsafe { libc::prctl(PR_SET_IO_FLUSHER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        warnings.push(format!(
            "prctl(PR_SET_IO_FLUSHER): {} (needs CAP_SYS_RESOURCE and Linux 5.6)",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: mlockall takes flags only and changes no memory contents.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        warnings.push(format!(
            "mlockall: {} (needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK)",
            std::io::Error::last_os_error()
        ));
    }
    if let Err(e) = std::fs::write("/proc/self/oom_score_adj", OOM_SCORE_ADJ.to_string()) {
        warnings.push(format!(
            "/proc/self/oom_score_adj = {OOM_SCORE_ADJ}: {e} (needs CAP_SYS_RESOURCE)"
        ));
    }
    warnings
}

/// What is in force now, read back from the kernel: (io_flusher, memory locked, oom_score_adj).
pub fn state() -> (bool, bool, Option<i32>) {
    const PR_GET_IO_FLUSHER: libc::c_int = 58;
    // SAFETY: prctl with no pointer arguments; returns the flag or -1.
    let flusher = unsafe { libc::prctl(PR_GET_IO_FLUSHER, 0, 0, 0, 0) } == 1;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let locked = status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .is_some_and(|kb| kb > 0);
    let oom = std::fs::read_to_string("/proc/self/oom_score_adj")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    (flusher, locked, oom)
}
