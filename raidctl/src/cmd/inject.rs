//! `raidctl inject`: make a member of a served array misbehave as failing SSDs do (read or write
//! errors, latency, hangs, bit rot, vanishing, a full device), switched on and off at run
//! time through the control socket; never persisted.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::device::inject::{Faults, Where};
use raidcore::{Error, ErrorKind, Result};

use crate::inject::{parse_latency, parse_rot, parse_where};

/// Failure drill on a served array: inject faults into one member, or clear them
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    raidctl inject /srv/raid/m0 /srv/raid/m2 --read-errors 8M+64K  # bad sectors (healed when rewritten)\n  \
    raidctl inject /srv/raid/m0 2 --latency 20ms,10ms               # a slow member (slot 2)\n  \
    raidctl inject /srv/raid/m0 2 --timeout-after 0                 # it stops answering: failed after --member-timeout\n  \
    raidctl inject /srv/raid/m0 /srv/raid/m1 --vanish               # then --return: back, stale, rebuilt\n  \
    raidctl inject /srv/raid/m0 --clear                             # every member back to normal\n\
Faults apply from the next request on, add to the member's other faults, show in `raidctl status`, and are never persisted: stopping `raidctl serve` clears them. For offline commands use --inject MEMBER:KIND[=VALUE] on read, write, scrub and rebuild.")]
pub struct InjectArgs {
    /// Path of any member of the served array
    #[arg(value_name = "ARRAY")]
    pub array: PathBuf,
    /// The member to inject into: its path or slot (all members with --clear alone)
    #[arg(value_name = "MEMBER")]
    pub member: Option<String>,
    /// Reads fail with EIO: over a byte range of the member (START-END or START+LEN; each block
    /// heals when rewritten, as an SSD remaps a bad sector) or on a share of requests (PCT%)
    #[arg(long, value_name = "RANGE|PCT%", value_parser = parse_where)]
    pub read_errors: Option<Where>,
    /// Writes fail with EIO, over a byte range or on a share of requests
    #[arg(long, value_name = "RANGE|PCT%", value_parser = parse_where)]
    pub write_errors: Option<Where>,
    /// Every request waits this long, plus a random share of JITTER (e.g. 20ms,10ms)
    #[arg(long, value_name = "DUR[,JITTER]", value_parser = parse_latency)]
    pub latency: Option<(u64, u64)>,
    /// After N more requests every request hangs, as a dying drive's do, until --clear, or
    /// until the member timeout of `raidctl serve` fails the member
    #[arg(long, value_name = "N")]
    pub timeout_after: Option<u64>,
    /// This share of the member's 4 KiB blocks (of a byte range with @START-END) has rotted:
    /// one bit flips on every read until the block is rewritten (the checksums must catch it)
    #[arg(long, value_name = "PCT[@RANGE]", value_parser = parse_rot)]
    pub corrupt_on_read: Option<(f64, Option<(u64, u64)>)>,
    /// The device disappears: every request fails (ENXIO)
    #[arg(long, conflicts_with = "return_")]
    pub vanish: bool,
    /// A vanished device comes back; if the array failed it meanwhile, it is added back as
    /// stale and rebuilt
    #[arg(long = "return")]
    pub return_: bool,
    /// Writes fail with ENOSPC (a thin-provisioned or full device)
    #[arg(long)]
    pub full: bool,
    /// Remove every fault of MEMBER (of every member without MEMBER), and forget rotten blocks
    #[arg(long, conflicts_with_all = ["read_errors", "write_errors", "latency", "timeout_after", "corrupt_on_read", "vanish", "return_", "full"])]
    pub clear: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: InjectArgs) -> Result<ExitCode> {
    let f = Faults {
        read_errors: a.read_errors,
        write_errors: a.write_errors,
        latency_us: a.latency.map(|l| l.0),
        latency_jitter_us: a.latency.map_or(0, |l| l.1),
        hang_after: a.timeout_after,
        corrupt_on_read: a.corrupt_on_read.map(|c| c.0),
        corrupt_in: a.corrupt_on_read.and_then(|c| c.1),
        vanished: a.vanish,
        full: a.full,
    };
    if f.is_none() && !a.clear && !a.return_ {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "give a fault to inject (--read-errors, --write-errors, --latency, --timeout-after, --corrupt-on-read, --vanish, --return, --full) or --clear",
        ));
    }
    if a.member.is_none() && !a.clear {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "name the member to inject into (its path or slot)",
        ));
    }
    let Some(c) = crate::control::daemon_for(&a.array)? else {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{} is not served by `raidctl serve`: inject faults offline with --inject MEMBER:KIND[=VALUE] on read, write, scrub or rebuild",
                a.array.display()
            ),
        ));
    };
    let member = a.member.as_deref().map(crate::control::member_arg);
    let r = crate::control::call(
        c,
        &crate::protocol::Request::Inject {
            member,
            faults: f,
            clear: a.clear,
            return_: a.return_,
        },
    )?;
    if a.json {
        crate::output::print_json(&r);
        return Ok(ExitCode::SUCCESS);
    }
    for n in r["notes"].as_array().into_iter().flatten() {
        eprintln!("raidctl: warning: {}", n.as_str().unwrap_or(""));
    }
    if a.clear {
        eprintln!(
            "raidctl: faults cleared on {}",
            r["cleared"].as_str().unwrap_or("every member")
        );
    } else {
        eprintln!(
            "raidctl: {} now has: {}{}",
            r["member"].as_str().unwrap_or(""),
            crate::inject::describe(&r["faults"]),
            match r["re_added_slot"].as_u64() {
                Some(s) =>
                    format!("; it had been failed, and is added back to slot {s} (stale: rebuilt)"),
                None => String::new(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
