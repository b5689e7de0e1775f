//! systemd readiness notification (sd_notify, without libsystemd): when NOTIFY_SOCKET is set,
//! `serve` sends READY=1 once its sockets and devices serve, and STOPPING=1 when it begins to
//! stop, so a Type=notify unit orders the mounts that use the device after it is ready.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (newline-separated KEY=VALUE assignments) to the service manager; nothing
/// when not run under one. Best effort: a failure is printed, never fatal.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let r = UnixDatagram::unbound().and_then(|sock| {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_bytes();
        match bytes.strip_prefix(b"@") {
            // An abstract socket (Linux): the name after '@'.
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(state.as_bytes(), &addr)
            }
            None => sock.send_to(state.as_bytes(), &path),
        }
    });
    if let Err(e) = r {
        eprintln!(
            "raidctl: warning: sd_notify to {}: {e}",
            path.to_string_lossy()
        );
    }
}
