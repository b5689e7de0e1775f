//! `raidctl profile`: measures what over-provisioning buys one SSD. Preconditions the device
//! (TRIM, two sequential fills), then for each level TRIMs the reserved share and runs 4 KiB
//! random writes at a queue depth over the rest, in rounds, until the SNIA steady state or a time
//! limit; prints the curve, plots it and saves it where `create --overprovision auto` finds it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use plotters::prelude::*;
use raidcore::buf::AlignedBuf;
use raidcore::device::{FileMember, Member, OpenMode};
use raidcore::rng::SplitMix64;
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::profile::{self, Recommendation};
use crate::units::{human, human_duration};

/// Measure sustained random-write IOPS against over-provisioning on one SSD (destructive)
#[derive(Args, Debug)]
#[command(after_help = "Destroys all data on DEVICE. Examples:\n  \
    raidctl profile /dev/sdb --target-iops 30000 --plot sdb.svg\n  \
    raidctl profile /dev/nvme1n1 --levels 0,10,25,50 --time-per-level 20m --json")]
pub struct ProfileArgs {
    /// The device to profile (its contents are destroyed)
    #[arg(value_name = "DEVICE")]
    pub device: PathBuf,
    /// Over-provisioning levels to measure, percent of the device, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,7,10,20,30,50",
        value_name = "PCT,.."
    )]
    pub levels: Vec<f64>,
    /// Recommend the smallest level that sustains this many 4 KiB random-write IOPS
    /// (without it: the knee of the curve)
    #[arg(long, value_name = "N")]
    pub target_iops: Option<f64>,
    /// Longest time spent on one level when it does not reach steady state
    #[arg(long, default_value = "30m", value_parser = crate::units::parse_duration, value_name = "DURATION")]
    pub time_per_level: u64,
    /// Length of one measurement round (SNIA: one minute)
    #[arg(long, default_value = "60", value_parser = crate::units::parse_duration, value_name = "DURATION")]
    pub round: u64,
    /// Most rounds on one level (SNIA: 25)
    #[arg(long, default_value_t = 25, value_name = "N")]
    pub max_rounds: usize,
    /// Writes in flight (one thread each, O_DIRECT)
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub queue_depth: usize,
    /// Skip the two sequential fills (only when the device was filled just before)
    #[arg(long)]
    pub no_precondition: bool,
    /// Write the curve as an SVG plot
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Do not save the result for `create --overprovision auto`
    #[arg(long)]
    pub no_save: bool,
    /// Profile a device that holds a file system, a partition table or an array member
    /// (never a mounted or busy one)
    #[arg(long, short = 'f')]
    pub force: bool,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

const BLOCK: u64 = 4096;
const FILL_IO: usize = 1 << 20;

fn invalid(msg: String) -> Error {
    Error::new(ErrorKind::InvalidInput, msg)
}

/// Validates the flags; returns the levels sorted ascending (each level TRIMs a superset of
/// the previous one's reserve, so the active area is always written and the reserve never).
fn levels(a: &ProfileArgs) -> Result<Vec<f64>> {
    let mut l = a.levels.clone();
    if l.is_empty() {
        return Err(invalid("--levels needs at least one level".into()));
    }
    if let Some(bad) = l.iter().find(|p| !(0.0..=90.0).contains(*p)) {
        return Err(invalid(format!(
            "--levels {bad} is not a percentage between 0 and 90"
        )));
    }
    l.sort_by(f64::total_cmp);
    l.dedup();
    if a.target_iops.is_some_and(|t| !(t > 0.0 && t.is_finite())) {
        return Err(invalid("--target-iops must be a positive number".into()));
    }
    if !(1..=256).contains(&a.queue_depth) {
        return Err(invalid(format!(
            "--queue-depth {} is not between 1 and 256",
            a.queue_depth
        )));
    }
    if a.max_rounds < profile::WINDOW {
        return Err(invalid(format!(
            "--max-rounds {} is below the {} rounds of a steady-state window",
            a.max_rounds,
            profile::WINDOW
        )));
    }
    if a.time_per_level < a.round * profile::WINDOW as u64 {
        return Err(invalid(format!(
            "--time-per-level ({} s) is shorter than the {} rounds of --round ({} s) a steady-state window needs",
            a.time_per_level,
            profile::WINDOW,
            a.round
        )));
    }
    Ok(l)
}

/// Why there is no flash translation layer to measure, if there is none.
fn no_ftl(dev: &FileMember, info: &raidcore::device::probe::DeviceInfo) -> Option<String> {
    let what = if !dev.is_block_device() {
        "a file"
    } else if info.queue.as_deref().is_some_and(|q| q.starts_with("loop")) {
        "a loop device (its writes go to a file)"
    } else if dev.memory_backed() {
        "a memory-backed device"
    } else if info.rotational == Some(true) {
        "a rotational disk"
    } else {
        return None;
    };
    Some(format!(
        "{} is {what}: there is no flash translation layer to measure; the curve shows the file system and page cache, not what over-provisioning buys an SSD",
        dev.path().display()
    ))
}

/// Latencies in a log-linear histogram: 32 buckets per power of two (within about 3 %).
#[derive(Clone)]
struct Histogram {
    counts: Vec<u64>,
    max_ns: u64,
}

impl Histogram {
    const SUB: u32 = 5;

    fn new() -> Histogram {
        Histogram {
            counts: vec![0; 64 << Self::SUB],
            max_ns: 0,
        }
    }

    fn bucket(ns: u64) -> usize {
        let lim = 1u64 << (Self::SUB + 1);
        if ns < lim {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros(); // >= SUB + 1
        let shift = e - Self::SUB;
        ((shift as usize) << Self::SUB) + (ns >> shift) as usize
    }

    /// The smallest latency of a bucket.
    fn floor(b: usize) -> u64 {
        let lim = 1usize << (Self::SUB + 1);
        if b < lim {
            return b as u64;
        }
        let shift = (b >> Self::SUB) as u32 - 1;
        let mant = (b & ((1 << Self::SUB) - 1)) as u64 | (1 << Self::SUB);
        mant << shift
    }

    fn record(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    fn percentile_us(&self, q: f64) -> f64 {
        let total: u64 = self.counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let want = ((total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::floor(b) as f64 / 1000.0;
            }
        }
        self.max_ns as f64 / 1000.0
    }
}

/// One round of 4 KiB random writes over the first `blocks` blocks.
struct Round {
    iops: f64,
    hist: Histogram,
}

fn round(
    dev: &Arc<FileMember>,
    blocks: u64,
    qd: usize,
    length: Duration,
    seed: u64,
    stop: &AtomicBool,
) -> Result<Round> {
    let start = Instant::now();
    let deadline = start + length;
    let results: Vec<Result<(u64, Histogram)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..qd)
            .map(|t| {
                let dev = Arc::clone(dev);
                s.spawn(move || -> Result<(u64, Histogram)> {
                    let mut rng = SplitMix64(seed ^ (t as u64).wrapping_mul(0x9e37_79b9));
                    let mut buf = AlignedBuf::zeroed(BLOCK as usize);
                    rng.fill(&mut buf);
                    let mut hist = Histogram::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) && !crate::daemon::stop_requested() {
                        // New bytes in every write, so a compressing or deduplicating
                        // controller cannot shortcut it.
                        buf[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                        let off = rng.below(blocks) * BLOCK;
                        let t0 = Instant::now();
                        if let Err(e) = dev.write_at(&buf, off) {
                            // The others stop too: the device is failing.
                            stop.store(true, Ordering::Relaxed);
                            return Err(e.context("profile: random 4 KiB write"));
                        }
                        let now = Instant::now();
                        hist.record(now.duration_since(t0).as_nanos() as u64);
                        n += 1;
                        if now >= deadline {
                            break;
                        }
                    }
                    Ok((n, hist))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("profile writer panicked"))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64().max(1e-6);
    let mut hist = Histogram::new();
    let mut n = 0;
    for r in results {
        let (k, h) = r?;
        n += k;
        hist.merge(&h);
    }
    Ok(Round {
        iops: n as f64 / secs,
        hist,
    })
}

/// TRIM the whole device, then fill it sequentially twice (SNIA's workload-independent
/// preconditioning). False when interrupted.
fn precondition(dev: &FileMember, trimmed: &mut bool) -> Result<bool> {
    *trimmed &= trim(dev, 0, dev.len())?;
    let len = dev.len() / BLOCK * BLOCK;
    let mut buf = AlignedBuf::zeroed(FILL_IO);
    let mut rng = SplitMix64(0x5eed);
    rng.fill(&mut buf);
    let mut progress = crate::progress::Progress::new("precondition", false);
    for pass in 0..2u64 {
        let phase = format!("fill {}/2", pass + 1);
        let mut pos = 0;
        while pos < len {
            if crate::daemon::stop_requested() {
                progress.finish();
                return Ok(false);
            }
            let n = (len - pos).min(FILL_IO as u64) as usize;
            // New bytes in every 4 KiB block, so no controller can deduplicate the fill.
            for b in buf.chunks_mut(BLOCK as usize) {
                b[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
            }
            dev.write_at(&buf[..n], pos)
                .map_err(|e| e.context(format!("profile: sequential fill, pass {}", pass + 1)))?;
            pos += n as u64;
            progress.update(pass * len + pos, 2 * len, Some(&phase));
        }
    }
    dev.flush()?;
    progress.finish();
    Ok(true)
}

/// TRIMs a range: false when the device does not take TRIM; any other failure is an error.
fn trim(dev: &FileMember, off: u64, len: u64) -> Result<bool> {
    if len == 0 {
        return Ok(true);
    }
    match dev.discard(off, len) {
        Ok(()) => Ok(true),
        Err(e)
            if e.kind() == ErrorKind::Unsupported
                || matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL)
                ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.context(format!("profile: TRIM of {len} bytes"))),
    }
}

/// One level's measurement.
struct Level {
    pct: f64,
    rounds: Vec<(f64, f64, f64, f64, f64)>, // iops, p50, p99, p99.9, max (µs)
    steady_at: Option<usize>,
    window: Option<profile::Window>,
    hist: Histogram,
}

impl Level {
    fn iops(&self) -> f64 {
        profile::level_figure(&self.rounds.iter().map(|r| r.0).collect::<Vec<_>>())
    }

    fn json(&self) -> Value {
        json!({
            "overprovision_pct": self.pct,
            "iops": self.iops(),
            "bandwidth_bytes_per_sec": self.iops() * BLOCK as f64,
            "steady": self.steady_at.is_some(),
            "steady_at_round": self.steady_at,
            "window": self.window,
            "latency_us": {
                "p50": self.hist.percentile_us(0.50),
                "p99": self.hist.percentile_us(0.99),
                "p99_9": self.hist.percentile_us(0.999),
                "max": self.hist.max_ns as f64 / 1000.0,
            },
            "rounds": self.rounds.iter().map(|r| json!({
                "iops": r.0, "bandwidth_bytes_per_sec": r.0 * BLOCK as f64,
                "latency_us": {"p50": r.1, "p99": r.2, "p99_9": r.3, "max": r.4},
            })).collect::<Vec<_>>(),
        })
    }
}

/// A bar over the rounds of every level (an upper bound: a level that is steady early skips
/// the rest of its share), on a terminal only.
fn rounds_bar(total: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new(total);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} rounds, at most {eta} left",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    Some(b)
}

pub fn run(a: ProfileArgs) -> Result<ExitCode> {
    let levels = levels(&a)?;
    raidcore::array::preflight(std::slice::from_ref(&a.device), a.force)
        .map_err(|e| e.context("profile"))?;
    let identity = match profile::identity(&a.device) {
        Ok(i) => i,
        Err(_) if a.no_save => profile::Identity {
            key: format!("path:{}", a.device.display()),
            model: None,
            serial: None,
            source: "device path (no serial; not saved)".into(),
        },
        Err(e) => return Err(e),
    };
    let dev = Arc::new(
        FileMember::open(&a.device, OpenMode::Write).map_err(|e| match e.kind() {
            ErrorKind::Busy | ErrorKind::InUse => Error::new(
                e.kind(),
                match raidcore::device::probe::lock_holder(&a.device) {
                    Some((pid, cmd)) => format!(
                        "{} is held by pid {pid} ({cmd}); profile needs the device to itself: stop that process first",
                        a.device.display()
                    ),
                    None => format!(
                        "{} is in use ({e}); profile needs the device to itself",
                        a.device.display()
                    ),
                },
            ),
            _ => e,
        })?,
    );
    let size = dev.len() / BLOCK * BLOCK;
    let info = raidcore::device::probe::inspect(&a.device).unwrap_or_default();
    let smallest = size as f64 * (1.0 - levels[levels.len() - 1] / 100.0);
    if smallest < (256 * BLOCK) as f64 {
        return Err(invalid(format!(
            "{} ({}) is too small to profile at {} % over-provisioning",
            a.device.display(),
            human(size),
            levels[levels.len() - 1]
        )));
    }
    let mut notes = Vec::new();
    let ftl = no_ftl(&dev, &info);
    if let Some(n) = &ftl {
        notes.push(n.clone());
    }
    if !dev.has_direct_io() {
        notes.push(format!(
            "{} takes no O_DIRECT: writes went through the page cache",
            a.device.display()
        ));
    }
    if !a.json {
        for n in &notes {
            eprintln!("raidctl: note: {n}");
        }
    }
    let notes_shown = notes.len();
    crate::daemon::install_signals();
    let started = Instant::now();
    let date = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut trimmed = true;
    let mut failure: Option<Error> = None;
    let mut complete = if a.no_precondition {
        true
    } else {
        match precondition(&dev, &mut trimmed) {
            Ok(done) => done,
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    };
    let precondition_secs = started.elapsed().as_secs_f64();
    let mut measured: Vec<Level> = Vec::new();
    let max_rounds = a
        .max_rounds
        .min((a.time_per_level / a.round).max(1) as usize);
    let bar = rounds_bar((levels.len() * max_rounds) as u64);
    let stop = AtomicBool::new(false);
    let mut interrupted_at = None;
    'levels: for (li, &pct) in levels.iter().enumerate() {
        if !complete {
            break;
        }
        let active = ((size as f64 * (1.0 - pct / 100.0)) as u64 / BLOCK).max(1);
        match trim(&dev, active * BLOCK, size - active * BLOCK) {
            Ok(t) => trimmed &= t,
            Err(e) => {
                failure = Some(e);
                complete = false;
                break;
            }
        }
        let level_start = Instant::now();
        let mut lv = Level {
            pct,
            rounds: Vec::new(),
            steady_at: None,
            window: None,
            hist: Histogram::new(),
        };
        while lv.rounds.len() < max_rounds
            && level_start.elapsed() < Duration::from_secs(a.time_per_level)
        {
            let seed = (li as u64) << 32 | lv.rounds.len() as u64;
            let r = match round(
                &dev,
                active,
                a.queue_depth,
                Duration::from_secs(a.round),
                seed,
                &stop,
            ) {
                Ok(r) => r,
                Err(e) => {
                    failure = Some(e);
                    interrupted_at = Some((pct, lv.rounds.len() + 1));
                    complete = false;
                    measured.push(lv);
                    break 'levels;
                }
            };
            if crate::daemon::stop_requested() {
                interrupted_at = Some((pct, lv.rounds.len() + 1));
                complete = false;
                measured.push(lv);
                break 'levels;
            }
            lv.rounds.push((
                r.iops,
                r.hist.percentile_us(0.50),
                r.hist.percentile_us(0.99),
                r.hist.percentile_us(0.999),
                r.hist.max_ns as f64 / 1000.0,
            ));
            lv.hist.merge(&r.hist);
            lv.window = profile::window(&lv.rounds.iter().map(|r| r.0).collect::<Vec<_>>());
            if let Some(b) = &bar {
                b.set_message(format!(
                    "{pct:>4} % round {} {:.0} IOPS",
                    lv.rounds.len(),
                    r.iops
                ));
                b.inc(1);
            }
            if lv.window.as_ref().is_some_and(|w| w.steady) {
                lv.steady_at = Some(lv.rounds.len());
                break;
            }
        }
        if let Some(b) = &bar {
            b.set_position(((li + 1) * max_rounds) as u64);
        }
        measured.push(lv);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // Levels with at least one round count; an interrupted level's partial rounds are shown
    // but not used for the recommendation.
    let usable: Vec<&Level> = measured
        .iter()
        .filter(|l| !l.rounds.is_empty())
        .filter(|l| interrupted_at.is_none_or(|(p, _)| p != l.pct))
        .collect();
    let points: Vec<(f64, f64)> = usable.iter().map(|l| (l.pct, l.iops())).collect();
    if !trimmed {
        notes.push(format!(
            "{} took no TRIM: after the fills its reserve was not free to the drive, so the curve does not measure over-provisioning, and nothing is recommended",
            a.device.display()
        ));
    }
    let rec = if !trimmed {
        None
    } else if ftl.is_some() {
        if a.target_iops.is_some() {
            notes.push("--target-iops is not used: over-provisioning cannot help a device without a flash translation layer".into());
        }
        profile::no_flash(&points)
    } else {
        profile::recommend(&points, a.target_iops)
    };
    // Whether the level recommended reached steady state (its figure may still be falling).
    let rec_steady = rec.as_ref().and_then(|r| {
        usable
            .iter()
            .find(|l| l.pct == r.overprovision_pct)
            .map(|l| l.steady_at.is_some())
    });
    if rec_steady == Some(false) {
        notes.push("the level recommended did not reach steady state within --time-per-level: its figure may still have been falling; a longer profile tells".into());
    }
    let doc = json!({
        "version": 1,
        "device": a.device.display().to_string(),
        "identity": identity,
        "size_bytes": size,
        "date": date,
        "date_text": crate::output::time(date),
        "flash_translation_layer": ftl.is_none(),
        "complete": complete,
        "error": failure.as_ref().map(|e| e.to_string()),
        "trim": trimmed,
        "recommendation_steady": rec_steady,
        "interrupted_at": interrupted_at.map(|(p, r)| json!({"overprovision_pct": p, "round": r})),
        "settings": {
            "levels_pct": levels,
            "target_iops": a.target_iops,
            "round_secs": a.round,
            "time_per_level_secs": a.time_per_level,
            "max_rounds": max_rounds,
            "queue_depth": a.queue_depth,
            "block_bytes": BLOCK,
            "preconditioned": !a.no_precondition,
            "direct_io": dev.has_direct_io(),
        },
        "precondition_secs": precondition_secs,
        "elapsed_secs": started.elapsed().as_secs_f64(),
        "levels": measured.iter().map(Level::json).collect::<Vec<_>>(),
        "recommendation": rec,
        "notes": notes,
    });
    drop(dev);
    if let Some(p) = &a.plot {
        let name = a.device.display().to_string();
        let steady: Vec<bool> = usable.iter().map(|l| l.steady_at.is_some()).collect();
        plot(
            p,
            &points,
            &steady,
            a.target_iops,
            &name,
            rec.as_ref(),
            ftl.is_some(),
        )?;
    }
    let saved = if a.no_save || measured.iter().all(|l| l.rounds.is_empty()) {
        None
    } else {
        Some(profile::save(&doc)?)
    };
    if a.json {
        crate::output::print_json(&doc);
    } else {
        print_table(
            &a,
            &identity,
            size,
            &measured,
            rec.as_ref(),
            saved.as_deref(),
        );
        for n in &doc["notes"].as_array().cloned().unwrap_or_default()[notes_shown..] {
            eprintln!("raidctl: note: {}", n.as_str().unwrap_or(""));
        }
    }
    if !complete {
        let how_far = match interrupted_at {
            Some((p, r)) => format!("during round {r} of the {p} % level"),
            None if measured.is_empty() && !a.no_precondition => "while preconditioning".into(),
            None => "between levels".into(),
        };
        let what = if failure.is_some() {
            "failed"
        } else {
            "interrupted"
        };
        let done: Vec<String> = usable.iter().map(|l| format!("{} %", l.pct)).collect();
        eprintln!(
            "raidctl: profile {what} {how_far} after {}; levels measured: {}{}",
            human_duration(started.elapsed().as_secs_f64()),
            if done.is_empty() {
                "none".into()
            } else {
                done.join(", ")
            },
            if saved.is_some() {
                " (saved as incomplete: create --overprovision auto will not use it)"
            } else {
                ""
            }
        );
        if let Some(e) = failure {
            return Err(e);
        }
        return Ok(ExitCode::from(crate::exit::FAILURE));
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(
    a: &ProfileArgs,
    id: &profile::Identity,
    size: u64,
    measured: &[Level],
    rec: Option<&Recommendation>,
    saved: Option<&std::path::Path>,
) {
    let who = match (&id.model, &id.serial) {
        (Some(m), Some(s)) => format!("{m}, serial {s}"),
        _ => id.key.clone(),
    };
    println!("profile of {} ({who}), {}", a.device.display(), human(size));
    println!(
        "4 KiB random writes, queue depth {}, rounds of {} s",
        a.queue_depth, a.round
    );
    println!(
        "{:>6} {:>10} {:>9} {:>9} {:>9} {:>10} {:>7}  steady",
        "OP", "IOPS", "MB/s", "p50 µs", "p99 µs", "p99.9 µs", "rounds"
    );
    for l in measured.iter().filter(|l| !l.rounds.is_empty()) {
        println!(
            "{:>5}% {:>10.0} {:>9.1} {:>9.0} {:>9.0} {:>10.0} {:>7}  {}",
            l.pct,
            l.iops(),
            l.iops() * BLOCK as f64 / 1e6,
            l.hist.percentile_us(0.5),
            l.hist.percentile_us(0.99),
            l.hist.percentile_us(0.999),
            l.rounds.len(),
            match l.steady_at {
                Some(r) => format!("yes, at round {r}"),
                None => "no (time limit)".into(),
            }
        );
    }
    match rec {
        Some(r) => println!(
            "recommended: {} % over-provisioning{}: {}",
            r.overprovision_pct,
            r.iops
                .map(|i| format!(" ({i:.0} IOPS)"))
                .unwrap_or_default(),
            r.reason
        ),
        None => println!("recommended: nothing (no level was measured)"),
    }
    if let Some(p) = saved {
        println!(
            "saved: {} (raidctl create --overprovision auto applies it)",
            p.display()
        );
    }
}

fn plot(
    path: &std::path::Path,
    points: &[(f64, f64)],
    steady: &[bool],
    target: Option<f64>,
    device: &str,
    rec: Option<&Recommendation>,
    no_ftl: bool,
) -> Result<()> {
    let err = |e: String| Error::new(ErrorKind::Io, format!("plotting {}: {e}", path.display()));
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let x_max = points.iter().map(|p| p.0).fold(10.0, f64::max) * 1.05;
    let y_max = points.iter().map(|p| p.1).chain(target).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{device}: sustained 4 KiB random writes against over-provisioning{}",
                if no_ftl {
                    " (no flash translation layer)"
                } else {
                    ""
                }
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("over-provisioning (% of the device)")
        .y_desc("IOPS (mean of the last 5 rounds)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let blue = RGBColor(31, 119, 180);
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            blue.stroke_width(2),
        ))
        .map_err(|e| err(e.to_string()))?
        .label("measured")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], blue));
    chart
        .draw_series(
            points
                .iter()
                .zip(steady)
                .filter(|(_, &s)| s)
                .map(|(&p, _)| Circle::new(p, 4, blue.filled())),
        )
        .map_err(|e| err(e.to_string()))?
        .label("steady state")
        .legend(move |(x, y)| Circle::new((x + 8, y), 4, blue.filled()));
    chart
        .draw_series(
            points
                .iter()
                .zip(steady)
                .filter(|(_, &s)| !s)
                .map(|(&p, _)| Circle::new(p, 4, blue.stroke_width(1))),
        )
        .map_err(|e| err(e.to_string()))?
        .label("not steady (time limit)")
        .legend(move |(x, y)| Circle::new((x + 8, y), 4, blue.stroke_width(1)));
    if let Some(t) = target {
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, t), (x_max, t)],
                RED.stroke_width(1),
            ))
            .map_err(|e| err(e.to_string()))?
            .label(format!("target {t:.0} IOPS"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
    }
    if let Some((r, iops)) = rec.and_then(|r| Some((r, r.iops?))) {
        let green = RGBColor(44, 160, 44);
        chart
            .draw_series(std::iter::once(Circle::new(
                (r.overprovision_pct, iops),
                8,
                green.stroke_width(2),
            )))
            .map_err(|e| err(e.to_string()))?
            .label(format!("recommended: {} %", r.overprovision_pct))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, green.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn histogram_percentiles_are_within_a_few_percent() {
        let mut h = Histogram::new();
        for us in 1..=10_000u64 {
            h.record(us * 1000);
        }
        for (q, want) in [(0.5, 5000.0), (0.99, 9900.0), (0.999, 9990.0)] {
            let got = h.percentile_us(q);
            assert!(got <= want && got >= want * 0.96, "p{q}: {got} for {want}");
        }
        for ns in [0u64, 1, 63, 64, 65, 1000, 123_456_789, u64::MAX / 4] {
            let b = Histogram::bucket(ns);
            assert!(Histogram::floor(b) <= ns, "{ns}");
            assert!(ns - Histogram::floor(b) <= ns / 32, "{ns}");
        }
    }
}
