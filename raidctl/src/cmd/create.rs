//! `raidctl create`: validate every flag and member, create or extend member files, write the
//! first superblocks.

use std::fs::OpenOptions;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use raidcore::array::csum::CsumAlgo;
use raidcore::array::preflight;
use raidcore::layout::f1_weights;
use raidcore::{Array, CreateSpec, Error, ErrorKind, LayoutParams, Level, Result};

use crate::units::parse_size;

/// `--checksum`: one of the hashes raidcore knows, by name.
fn hash_parser() -> impl clap::builder::TypedValueParser<Value = CsumAlgo> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(CsumAlgo::ALL.map(CsumAlgo::name))
        .map(|s| s.parse::<CsumAlgo>().expect("a listed hash"))
}

/// Create an array over MEMBERs (files or block devices)
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  raidctl create --level f1 --size 256M /srv/raid/m0 /srv/raid/m1 /srv/raid/m2 /srv/raid/m3\n  raidctl create --level 6 --chunk 128K /dev/loop0 /dev/loop1 /dev/loop2 /dev/loop3"
)]
pub struct CreateArgs {
    /// RAID level: 0, 1, 5, 6, 10 or f1 (RAID 5 with parity skewed onto one member)
    #[arg(long, short = 'l', value_parser = parse_level)]
    pub level: Level,
    /// Chunk size (power of two, 4K to 16M)
    #[arg(long, short = 'c', default_value = "64K", value_parser = parse_size)]
    pub chunk: u64,
    /// Array name
    #[arg(long, short = 'n', default_value = "raid")]
    pub name: String,
    /// Parity weights, one per member, with --level f1 (e.g. 16,1,1,1,1: slot 0 holds 16 of
    /// every 20 parity chunks); refused with any other level
    #[arg(long, value_delimiter = ',', value_name = "W0,W1,..")]
    pub skew: Option<Vec<u32>>,
    /// F1: the slot that takes the extra parity
    #[arg(long, value_name = "SLOT")]
    pub parity_heavy: Option<usize>,
    /// RAID10: copies of each chunk (near layout)
    #[arg(long, value_name = "K")]
    pub copies: Option<usize>,
    /// Create missing member files, or extend smaller ones, to this size
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// Percent of each member left unused at the tail and discarded (SSD overprovisioning),
    /// or auto: each member's recommendation from its saved `raidctl profile`
    #[arg(long, value_name = "PCT|auto", default_value = "0", value_parser = parse_overprovision)]
    pub overprovision: Overprovision,
    /// Rated endurance in terabytes written, one value for all members or one per member
    #[arg(long, value_delimiter = ',', value_name = "TBW[,TBW..]")]
    pub endurance: Vec<f64>,
    /// Time between wear history samples (e.g. 1d, 12h, 3600)
    #[arg(long, default_value = "1d", value_parser = crate::units::parse_duration, value_name = "DURATION")]
    pub history_interval: u64,
    /// Hash of the per-block checksums: xxh3 (xxh3-128, fast, made to catch accidental
    /// corruption) or blake3 (cryptographic, five to eight times the CPU per block)
    #[arg(long, value_name = "HASH", default_value = "xxh3", value_parser = hash_parser())]
    pub checksum: CsumAlgo,
    /// Do not keep per-block checksums (reads and scrub then rely on parity and copies alone,
    /// and RAID0 corruption goes undetected)
    #[arg(long, conflicts_with = "checksum")]
    pub no_checksums: bool,
    /// Member data per write-intent bitmap bit (power of two, at least the chunk; default 64M,
    /// coarser where the bitmap would pass 64 KiB). Smaller bounds what an unclean stop puts at
    /// risk more tightly (the resync covers the regions marked at the crash; without checksums
    /// so does what a member lost in a power cut costs) and costs more bitmap writes: the first
    /// write into each clean region writes and flushes the bitmap
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    pub bitmap_chunk: Option<u64>,
    /// Overwrite members that hold a file system or another array (never a mounted or busy one)
    #[arg(long, short = 'f')]
    pub force: bool,
    /// Print the new array's status as JSON
    #[arg(long)]
    pub json: bool,
    /// Member paths, in slot order
    #[arg(required = true, value_name = "MEMBER")]
    pub members: Vec<PathBuf>,
}

/// `--overprovision`: a percentage, or the members' saved profiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Overprovision {
    Pct(f64),
    Auto,
}

fn parse_overprovision(s: &str) -> std::result::Result<Overprovision, String> {
    if s == "auto" {
        return Ok(Overprovision::Auto);
    }
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=90.0).contains(&p) => Ok(Overprovision::Pct(p)),
        _ => Err(format!(
            "{s:?} is neither a percentage between 0 and 90 nor auto"
        )),
    }
}

/// `--overprovision auto`: each member's saved profile gives the share of it to leave unused;
/// members share one geometry, so the array reserves on every member at least its own share
/// (more where another member's share, or a smaller member, asks for it). Returns the
/// percentage of the smallest member that gives that geometry.
fn auto_overprovision(a: &CreateArgs) -> Result<f64> {
    let mut usable = Vec::new();
    let mut lens = Vec::new();
    for m in &a.members {
        if !m.exists() {
            return Err(invalid(format!(
                "--overprovision auto needs a saved profile of every member, and {} does not exist yet",
                m.display()
            )));
        }
        let id = crate::profile::identity(m)?;
        let Some((path, doc)) = crate::profile::find(&id) else {
            return Err(invalid(format!(
                "--overprovision auto: no saved profile of {} ({}); run `raidctl profile {}` first, or give --overprovision PCT",
                m.display(),
                id.key,
                m.display()
            )));
        };
        if doc["complete"].as_bool() != Some(true) {
            return Err(invalid(format!(
                "--overprovision auto: the profile of {} ({}) was interrupted; run `raidctl profile` again",
                m.display(),
                path.display()
            )));
        }
        if doc["recommendation"].is_null() {
            return Err(invalid(format!(
                "--overprovision auto: the profile of {} ({}) recommends nothing ({}); give --overprovision PCT",
                m.display(),
                path.display(),
                doc["notes"]
                    .as_array()
                    .and_then(|n| n.last())
                    .and_then(|n| n.as_str())
                    .unwrap_or("no level was measured")
            )));
        }
        let Some(pct) = doc["recommendation"]["overprovision_pct"]
            .as_f64()
            .filter(|p| (0.0..=90.0).contains(p))
        else {
            return Err(Error::new(
                ErrorKind::Corrupt,
                format!(
                    "--overprovision auto: {} holds no recommendation between 0 and 90 %",
                    path.display()
                ),
            ));
        };
        let info = raidcore::device::probe::inspect(m)
            .map_err(|e| Error::io(e, "stat", &m.display().to_string(), 0))?;
        let profiled = doc["size_bytes"].as_u64().unwrap_or(0);
        if profiled != info.size_bytes / 4096 * 4096 {
            return Err(invalid(format!(
                "--overprovision auto: {} is {} bytes now, but its saved profile ({}) measured {profiled}: profile it again",
                m.display(),
                info.size_bytes,
                path.display()
            )));
        }
        if doc["recommendation_steady"] == false {
            eprintln!(
                "raidctl: warning: {}: the level its profile recommends never reached steady state (a longer profile tells)",
                m.display()
            );
        }
        let len = match a.size {
            Some(s) if !info.kind.starts_with("block") => info.size_bytes.max(s),
            _ => info.size_bytes,
        };
        eprintln!(
            "raidctl: {}: profile of {} recommends {pct} % over-provisioning ({})",
            m.display(),
            doc["date_text"].as_str().unwrap_or("?"),
            doc["recommendation"]["basis"].as_str().unwrap_or("?")
        );
        usable.push(len as f64 * (1.0 - pct / 100.0));
        lens.push(len);
    }
    let smallest = *lens.iter().min().expect("members") as f64;
    let keep = usable.iter().copied().fold(f64::INFINITY, f64::min);
    let pct = ((1.0 - keep / smallest) * 100.0).clamp(0.0, 90.0);
    for (m, &len) in a.members.iter().zip(&lens) {
        eprintln!(
            "raidctl: {}: {:.1} % of it left unused",
            m.display(),
            (1.0 - keep / len as f64) * 100.0
        );
    }
    Ok(pct)
}

fn parse_level(s: &str) -> std::result::Result<Level, String> {
    Level::parse(s).map_err(|e| e.to_string())
}

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::InvalidInput, msg)
}

/// Resolves the flags into layout parameters; every check happens before anything is touched.
fn layout_params(a: &CreateArgs) -> Result<LayoutParams> {
    let n = a.members.len();
    let mut p = LayoutParams::with_defaults(a.level, n, a.chunk);
    if let Some(k) = a.copies {
        if a.level != Level::Raid10 {
            return Err(invalid(format!(
                "--copies applies to raid10, not {}",
                a.level.name()
            )));
        }
        p.copies = k;
    }
    match (a.level, &a.skew, a.parity_heavy) {
        (Level::F1, Some(_), Some(_)) => {
            return Err(invalid(
                "give either --skew or --parity-heavy, not both".into(),
            ));
        }
        (Level::F1, Some(w), None) => p.weights = w.clone(),
        (Level::F1, None, Some(slot)) => {
            if slot >= n {
                return Err(invalid(format!(
                    "--parity-heavy {slot} is not a slot of {n} members (0..{})",
                    n - 1
                )));
            }
            p.weights = f1_weights(n, slot, 1);
        }
        (Level::F1, None, None) => {}
        (level, Some(_), _) | (level, _, Some(_)) => {
            return Err(invalid(format!(
                "--skew and --parity-heavy apply to --level f1, not {} (use --level f1 for skewed parity)",
                level.name()
            )));
        }
        _ => {}
    }
    raidcore::Layout::new(&p)?;
    Ok(p)
}

fn endurance(a: &CreateArgs) -> Result<Vec<Option<u64>>> {
    let n = a.members.len();
    if a.endurance.iter().any(|&t| !(t > 0.0 && t < 1e6)) {
        return Err(invalid(
            "--endurance values are terabytes written, greater than 0".into(),
        ));
    }
    let tb = |t: f64| Some((t * 1e12) as u64);
    Ok(match a.endurance.len() {
        0 => Vec::new(),
        1 => vec![tb(a.endurance[0]); n],
        k if k == n => a.endurance.iter().map(|&t| tb(t)).collect(),
        k => {
            return Err(invalid(format!(
                "--endurance has {k} values for {n} members: give one, or one per member"
            )))
        }
    })
}

/// Warns (does not refuse) about members that suit an SSD array badly.
fn warn_about_devices(members: &[PathBuf]) {
    let infos: Vec<_> = members
        .iter()
        .filter_map(|m| raidcore::device::probe::inspect(m).ok())
        .collect();
    // One warning per rotational disk, not per member. A loop device's own flag says nothing
    // about the disk under its backing file, so loop devices are left out.
    let mut rotational: Vec<(String, Vec<&str>)> = Vec::new();
    for i in infos.iter().filter(|i| i.rotational == Some(true)) {
        let disk = i.queue.clone().unwrap_or_default();
        if disk.starts_with("loop") {
            continue;
        }
        match rotational.iter_mut().find(|(d, _)| *d == disk) {
            Some((_, v)) => v.push(&i.path),
            None => rotational.push((disk, vec![&i.path])),
        }
    }
    for (disk, paths) in &rotational {
        eprintln!(
            "raidctl: warning: {} on the rotational disk {disk}; raidctl is tuned for SSDs",
            if paths.len() == 1 {
                format!("{} is", paths[0])
            } else {
                format!("{} members ({}) are", paths.len(), paths.join(", "))
            }
        );
    }
    for i in &infos {
        if i.is_smr() {
            eprintln!(
                "raidctl: warning: {} is zoned ({}): shingled (SMR) disks rebuild very slowly",
                i.path,
                i.zoned.as_deref().unwrap_or("")
            );
        }
    }
    let sizes: Vec<u64> = infos
        .iter()
        .map(|i| i.size_bytes)
        .filter(|&s| s > 0)
        .collect();
    if let (Some(&min), Some(&max)) = (sizes.iter().min(), sizes.iter().max()) {
        if max as f64 > min as f64 * 1.01 {
            eprintln!(
                "raidctl: warning: member sizes differ by more than 1% ({} to {}); every member is used only up to the smallest",
                crate::units::human(min),
                crate::units::human(max)
            );
        }
    }
}

pub fn run(a: CreateArgs) -> Result<ExitCode> {
    let params = layout_params(&a)?;
    let endurance_bytes = endurance(&a)?;
    if let Some(b) = a.bitmap_chunk {
        if !b.is_power_of_two() || b < a.chunk {
            return Err(invalid(format!(
                "--bitmap-chunk {b} bytes: it must be a power of two and at least --chunk ({} bytes)",
                a.chunk
            )));
        }
        if a.level == Level::Raid0 && a.no_checksums {
            return Err(invalid(
                "--bitmap-chunk with --level 0 --no-checksums: such an array keeps no write-intent bitmap (a resync would have nothing to do)".into(),
            ));
        }
    }
    // Duplicates by absolute path (members may not exist yet).
    let mut seen = std::collections::HashSet::new();
    for m in &a.members {
        let abs = std::fs::canonicalize(m)
            .unwrap_or_else(|_| std::path::absolute(m).unwrap_or_else(|_| m.clone()));
        if !seen.insert(abs) {
            return Err(invalid(format!(
                "{} is given twice (duplicate member)",
                m.display()
            )));
        }
    }
    // Members that exist are checked before any file is created or extended.
    let existing: Vec<PathBuf> = a.members.iter().filter(|m| m.exists()).cloned().collect();
    for m in &a.members {
        if !m.exists() && a.size.is_none() {
            return Err(invalid(format!(
                "{} does not exist (use --size to create member files)",
                m.display()
            )));
        }
    }
    for m in &a.members {
        use raidcore::device::probe::{holder, Holder};
        let file = std::fs::metadata(m).map_or(true, |md| md.is_file());
        match holder(m) {
            Holder::Devtmpfs if file => {
                return Err(invalid(format!(
                    "{} would be a regular file on devtmpfs (/dev): a mistyped device name? Name an existing block device",
                    m.display()
                )));
            }
            Holder::Memory if file => eprintln!(
                "raidctl: warning: {} is on tmpfs or ramfs: its data is gone at reboot",
                m.display()
            ),
            _ => {}
        }
    }
    preflight(&existing, a.force)?;
    let overprovision = match a.overprovision {
        Overprovision::Pct(p) => p,
        Overprovision::Auto => auto_overprovision(&a)?,
    };
    // Member files this run creates or extends are put back as they were if it fails.
    let mut undo = Undo::default();
    let r = create_members(&a, &mut undo);
    let r = r.and_then(|()| build(&a, params, endurance_bytes, overprovision));
    if r.is_err() {
        undo.run();
    }
    r
}

/// Files created (removed on failure) and files extended (truncated back) by `create`.
#[derive(Default)]
struct Undo {
    created: Vec<PathBuf>,
    extended: Vec<(PathBuf, u64)>,
}

impl Undo {
    fn run(&self) {
        for p in &self.created {
            let _ = std::fs::remove_file(p);
        }
        for (p, len) in &self.extended {
            if let Ok(f) = OpenOptions::new().write(true).open(p) {
                let _ = f.set_len(*len);
            }
        }
    }
}

fn create_members(a: &CreateArgs, undo: &mut Undo) -> Result<()> {
    let Some(size) = a.size else {
        return Ok(());
    };
    for m in &a.members {
        let meta = std::fs::metadata(m).ok();
        if meta.as_ref().is_some_and(|md| !md.is_file()) {
            continue; // block devices keep their size
        }
        if meta.as_ref().is_none_or(|md| md.len() < size) {
            let f = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(m)
                .map_err(|e| Error::io(e, "create", &m.display().to_string(), 0))?;
            match &meta {
                None => undo.created.push(m.clone()),
                Some(md) => undo.extended.push((m.clone(), md.len())),
            }
            f.set_len(size)
                .map_err(|e| Error::io(e, "extend", &m.display().to_string(), size))?;
        }
    }
    Ok(())
}

fn build(
    a: &CreateArgs,
    params: LayoutParams,
    endurance_bytes: Vec<Option<u64>>,
    overprovision_pct: f64,
) -> Result<ExitCode> {
    let spec = CreateSpec {
        name: a.name.clone(),
        layout: params,
        overprovision_pct,
        endurance_bytes,
        history_interval: a.history_interval,
        checksums: (!a.no_checksums).then_some(a.checksum),
        bitmap_chunk: a.bitmap_chunk,
    };
    warn_about_devices(&a.members);
    // Progress on a terminal only: --json here means the final report, not progress lines.
    let mut progress = crate::progress::Progress::new("create", false);
    let array = Array::create(&a.members, &spec, a.force, &mut |d, t| {
        progress.update(d, t, None)
    })?;
    progress.finish();
    let report = super::status::report(&array);
    array.close()?;
    if a.json {
        crate::output::print_json(&report);
    } else {
        eprintln!(
            "raidctl: created {} array \"{}\" of {} over {} members",
            spec.layout.level.name(),
            spec.name,
            crate::units::human(report["size_bytes"].as_u64().unwrap_or(0)),
            a.members.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
