//! `raidctl serve`: export an array over NBD and own it until SIGTERM or SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::{Error, ErrorKind, Result};

use crate::cli::ArrayArgs;
use crate::daemon::{self, ServeConfig};
use crate::units::parse_size;

/// Export an array as an NBD block device (Unix socket by default; TCP with --listen)
#[derive(Args, Debug)]
#[command(
    after_long_help = format!(
        "{}\n\n{}\n  With --nbd-device: 4 when another server holds the device (NBD_SET_SOCK: busy), 2 when the path is not an nbd device.\n  With --ublk: 4 when /dev/ublkbN (--ublk-id) is live under another daemon, 2 when ublk_drv is not loaded.",
        "Attach with any NBD client, e.g.:\n  nbdinfo 'nbd+unix:///raid?socket=/run/raidctl/UUID.sock'\n  nbd-client -unix /run/raidctl/UUID.sock -N raid /dev/nbd0\nor let raidctl attach the kernel's nbd driver itself: raidctl serve --nbd-device /dev/nbd0 ARRAY\nWhile serving, status, fail, remove, add, replace, rebuild and wear act on the live array through the control socket /run/raidctl/UUID.ctl.",
        crate::exit::EXIT_STATUS
    )
)]
pub struct ServeArgs {
    #[command(flatten)]
    pub array: ArrayArgs,
    #[command(flatten)]
    pub drill: crate::inject::InjectArgs,
    /// Unix socket to listen on (default /run/raidctl/UUID.sock, mode 0600)
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Also listen on TCP (only where you name it, e.g. 127.0.0.1:10809)
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Export name
    #[arg(long, default_value = "raid")]
    pub export: String,
    /// Export read-only
    #[arg(long)]
    pub readonly: bool,
    /// Accepted for compatibility and ignored: serve always runs in the foreground until
    /// SIGTERM or SIGINT (run it under systemd, contrib/raidctl-serve@.service, or with &)
    #[arg(long, hide_short_help = true)]
    pub foreground: bool,
    /// Background rebuilds write at most this many bytes per second, leaving room for clients
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub max_rate: Option<u64>,
    /// Background rebuilds and scrubs run at this many bytes per second while clients'
    /// requests are served (full speed, or --max-rate, when clients are idle; 0: never yield).
    /// Default 32M
    #[arg(long, value_name = "BYTES/S", value_parser = parse_size)]
    pub min_rate: Option<u64>,
    /// Skewed arrays: do not move the parity-heavy role when members are replaced
    #[arg(long)]
    pub keep_roles: bool,
    /// Wait up to this many seconds for members not found yet (a disk slow to appear at
    /// boot) before serving without them: a member that arrives late joins at once instead
    /// of coming back stale (0: do not wait; at most a week)
    #[arg(long, value_name = "SECONDS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=604_800))]
    pub wait_for_members: u64,
    /// Memory for partial-row writes held until their row is complete (parity levels; 0
    /// turns the stripe cache off)
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = parse_size)]
    pub stripe_cache: u64,
    /// Also attach the export to this kernel's nbd driver as DEVICE (e.g. /dev/nbd0, after
    /// modprobe nbd): a block device to mkfs and mount, no nbd-client needed. Detached on
    /// SIGTERM or SIGINT (unmount first). Implies --harden
    #[arg(long, value_name = "DEVICE")]
    pub nbd_device: Option<PathBuf>,
    /// Also serve the array as a ublk block device, /dev/ublkbN (Linux 6.0+, modprobe
    /// ublk_drv): no NBD in the way. If the daemon dies, the device and what is mounted on it
    /// wait (I/O is queued); start serve again with --ublk-id N to take it over. Removed on
    /// SIGTERM or SIGINT (unmount first). Writes through (no --stripe-cache: what a
    /// dying daemon acknowledged must already be in the kernel). Implies --harden
    #[arg(long)]
    pub ublk: bool,
    /// ublk device number to create, or to take over when its daemon died (default: the
    /// first free one)
    #[arg(long, value_name = "N", requires = "ublk")]
    pub ublk_id: Option<u32>,
    /// ublk hardware queues, each served by its own thread
    #[arg(long, value_name = "N", default_value_t = 1, requires = "ublk", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: u16,
    /// Requests in flight per ublk queue
    #[arg(long, value_name = "N", default_value_t = 64, requires = "ublk", value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub queue_depth: u16,
    /// Harden the daemon for serving file systems this host depends on: PR_SET_IO_FLUSHER,
    /// all of its memory locked (mlockall), OOM score adjustment -900; each one a warning when
    /// refused (they need root)
    #[arg(long)]
    pub harden: bool,
}

/// `--wait-for-members`: until every member of the array is found (a read-only look, no
/// lock taken) or `seconds` pass. A member found stale or failed is not waited for; nothing is
/// written meanwhile.
fn wait_for_members(args: &crate::cli::ArrayArgs, seconds: u64) {
    use raidcore::array::MemberState;
    if seconds == 0 {
        return;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    let mut said = false;
    loop {
        let missing = raidcore::array::Array::open_from(
            &raidcore::array::Files,
            &args.array,
            &raidcore::array::AssembleOptions {
                writable: false,
                scan: args.scan.clone(),
                allow_failed: true,
                force: false,
                unlocked: true,
            },
        )
        .map(|a| {
            a.members()
                .iter()
                .filter(|m| m.state == MemberState::Missing)
                .count()
        })
        .unwrap_or(0);
        if missing == 0 || std::time::Instant::now() >= deadline {
            if said && missing > 0 {
                eprintln!("raidctl serve: {missing} member(s) still missing after {seconds} s; serving without them");
            }
            return;
        }
        if !said {
            eprintln!("raidctl serve: waiting up to {seconds} s for {missing} missing member(s)");
            said = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

pub fn run(a: ServeArgs) -> Result<ExitCode> {
    // A panic in any thread ends the daemon: a ublk queue or an NBD worker that unwound
    // alone would leave the process holding the device, its I/O queued, and no restart (the
    // kernel recovers a ublk device only once its daemon is gone).
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    if let Some(addr) = &a.listen {
        addr.parse::<std::net::SocketAddr>().map_err(|_| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("--listen {addr} is not ADDR:PORT"),
            )
        })?;
    }
    // Before anything starts a thread: threads inherit PR_SET_IO_FLUSHER.
    let hardening = (a.harden || a.nbd_device.is_some() || a.ublk).then(|| {
        for w in crate::harden::apply() {
            eprintln!("raidctl serve: warning: {w}");
        }
        let (io_flusher, memory_locked, oom_score_adj) = crate::harden::state();
        serde_json::json!({
            "io_flusher": io_flusher,
            "memory_locked": memory_locked,
            "oom_score_adj": oom_score_adj,
        })
    });
    wait_for_members(&a.array, a.wait_for_members);
    let (drill, array) = a.drill.assemble(&a.array, true)?;
    // A ublk daemon can die and be replaced while the kernel and its mounted file systems go
    // on: every write it acknowledges must already be in the kernel (member page cache or
    // device), not in this process's stripe cache, so --ublk writes through.
    let stripe_cache = if a.ublk { 0 } else { a.stripe_cache };
    array.set_stripe_cache(stripe_cache as usize)?;
    let config = ServeConfig {
        socket: a.socket.clone(),
        listen: a.listen.clone(),
        export: a.export.clone(),
        readonly: a.readonly,
        rebuild_rate: a.max_rate,
        rebuild_min_rate: a.min_rate,
        keep_roles: a.keep_roles,
        drill,
        nbd_device: a.nbd_device.clone(),
        ublk: a.ublk.then_some(crate::ublk::UblkOptions {
            id: a.ublk_id,
            queues: a.queues,
            depth: a.queue_depth,
        }),
        hardening,
    };
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    daemon::serve(array, config, |urls| {
        for u in urls {
            println!("{u}");
        }
        let _ = std::io::Write::flush(&mut std::io::stdout());
        crate::notify::notify(&format!("READY=1\nSTATUS=serving {}", urls.join(", ")));
        if on_terminal {
            eprintln!("raidctl: serving until Ctrl-C or SIGTERM (it stays in the foreground: use systemd or & to run it in the background)");
        }
    })?;
    eprintln!("raidctl: stopped; the array is flushed and clean");
    Ok(ExitCode::SUCCESS)
}
