//! `raidctl wear` and `raidctl wear plan`: per-member wear, projected wear-out dates, skew
//! (expected next to observed), the collision window, monitoring outputs (--check,
//! --prometheus), and the planner: what parity weights can do for the measured write mix and a
//! replacement schedule when they cannot.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use clap::{Args, Subcommand};
use raidcore::array::MemberState;
use raidcore::wear::{self, plan, smart, MemberWearInput, Projection};
use raidcore::{Array, AssembleOptions, Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::output::time;
use crate::units::{human, parse_size};

/// Per-member wear, projected wear-out dates, skew and the collision window
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true,
    after_long_help = "With --check the exit status is 0 (ok), 1 (warning), 2 (critical) or 3 (unknown: the wear could not be assessed, any error), as monitoring systems (Nagios, Icinga) read it."
)]
pub struct WearArgs {
    #[command(subcommand)]
    pub sub: Option<WearSub>,
    /// Path of any member of the array
    #[arg(value_name = "ARRAY")]
    pub array: Option<PathBuf>,
    #[command(flatten)]
    pub opts: WearOpts,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Print node_exporter textfile metrics (Prometheus text format)
    #[arg(long, conflicts_with = "json")]
    pub prometheus: bool,
    /// Exit 0 ok / 1 warning / 2 critical / 3 unknown (any error), with the reasons on stderr
    #[arg(long)]
    pub check: bool,
    /// Also record a history sample now (with the SMART values read); opens the array for writing
    #[arg(long)]
    pub record: bool,
    /// Draw each member's wear history and forecast (range band, wear-outs, rebuild window) to
    /// this SVG file
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Warn when the two earliest wear-outs are closer than this many days
    /// (default: max(30, 3 x estimated rebuild time))
    #[arg(long, value_name = "DAYS")]
    pub collision_days: Option<f64>,
}

/// Options shared by the report and the planner.
#[derive(Args, Debug, Clone)]
pub struct WearOpts {
    /// Also look for members here (repeatable)
    #[arg(long, value_name = "DIR")]
    pub scan: Vec<PathBuf>,
    /// SMART source: auto (run smartctl -j on member devices), none, or one smartctl -j file per
    /// member in slot order
    #[arg(long, num_args = 1.., value_name = "auto|none|FILE")]
    pub smart: Vec<String>,
    /// Days of history the write rate is fitted over
    #[arg(long, default_value_t = 30.0, value_name = "DAYS")]
    pub window: f64,
    /// Rebuild rate assumed for the collision threshold
    #[arg(long, default_value = "200M", value_parser = parse_size, value_name = "BYTES/S")]
    pub rebuild_rate: u64,
    /// Days ahead the wear-out collision risk is counted over
    #[arg(long, default_value_t = 1826.0, value_name = "DAYS")]
    pub horizon: f64,
    /// Drive-to-drive spread of the life left, in percent (a coefficient of variation), in the
    /// collision risk
    #[arg(long, default_value_t = raidcore::wear::ENDURANCE_SPREAD * 100.0, value_name = "PCT")]
    pub endurance_spread: f64,
}

impl WearOpts {
    /// The command line's defaults, with SMART read from the members' devices (a drill's
    /// wear look).
    pub fn smart_auto() -> WearOpts {
        WearOpts {
            scan: Vec::new(),
            smart: vec!["auto".into()],
            window: 30.0,
            rebuild_rate: 200 << 20,
            horizon: 1826.0,
            endurance_spread: raidcore::wear::ENDURANCE_SPREAD * 100.0,
        }
    }

    /// Refuses numbers the model cannot use, naming the option.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, v: f64| {
            Err(Error::new(
                ErrorKind::InvalidInput,
                format!("{what} {v} is out of range"),
            ))
        };
        if !(self.window > 0.0 && self.window.is_finite()) {
            return bad("--window must be a positive number of days:", self.window);
        }
        if !(self.horizon > 0.0 && self.horizon.is_finite()) {
            return bad("--horizon must be a positive number of days:", self.horizon);
        }
        if self.rebuild_rate == 0 {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--rebuild-rate must be above 0 bytes per second",
            ));
        }
        if !(0.0..=100.0).contains(&self.endurance_spread) {
            return bad(
                "--endurance-spread must be a percentage from 0 to 100:",
                self.endurance_spread,
            );
        }
        Ok(())
    }

    /// The options as sent over the control socket. SMART files are read by the daemon: they
    /// are named from its point of view (absolute paths).
    pub fn to_request(&self, collision_days: Option<f64>) -> crate::protocol::WearRequest {
        crate::protocol::WearRequest {
            smart: self
                .smart
                .iter()
                .map(|s| match s.as_str() {
                    "auto" | "none" => s.clone(),
                    f => crate::control::absolute(std::path::Path::new(f))
                        .display()
                        .to_string(),
                })
                .collect(),
            window: self.window,
            rebuild_rate: self.rebuild_rate,
            horizon: self.horizon,
            endurance_spread: self.endurance_spread,
            collision_days,
        }
    }

    pub fn from_request(r: &crate::protocol::WearRequest) -> WearOpts {
        WearOpts {
            scan: Vec::new(),
            smart: r.smart.clone(),
            window: r.window,
            rebuild_rate: r.rebuild_rate,
            horizon: r.horizon,
            endurance_spread: r.endurance_spread,
        }
    }
}

/// The wear report of an open array as JSON (what `wear --json` prints).
pub fn report_json(array: &Array, opts: &WearOpts, collision_days: Option<f64>) -> Result<Value> {
    Ok(analyse(array, opts, collision_days)?.0.json)
}

/// The report, from the serving daemon when one owns the array, else computed here.
fn report_for(
    path: &std::path::Path,
    opts: &WearOpts,
    collision_days: Option<f64>,
) -> Result<Value> {
    if let Some(c) = crate::control::daemon_for(path)? {
        return crate::control::call(
            c,
            &crate::protocol::Request::Wear(opts.to_request(collision_days)),
        );
    }
    let array = open(path, &opts.scan, false)?;
    report_json(&array, opts, collision_days)
}

#[derive(Subcommand, Debug)]
pub enum WearSub {
    /// Say what parity weights can do for the measured write mix, and plan replacements that
    /// keep wear-outs DAYS apart
    Plan(PlanArgs),
}

#[derive(Args, Debug)]
#[command(
    after_long_help = "Exit status: 0 when the weights or the replacement schedule reach the target gap, 1 when neither does.\n\n`raidctl simulate --plan FILE` replays the JSON this prints (--json)."
)]
pub struct PlanArgs {
    /// Path of any member of the array
    #[arg(value_name = "ARRAY")]
    pub array: PathBuf,
    /// The gap wanted between consecutive wear-outs or replacements, in days
    #[arg(long, value_name = "DAYS")]
    pub target_gap: f64,
    /// User writes per day (K/M/G/T suffixes); default: the rate measured from the history
    #[arg(long, value_parser = parse_size, value_name = "BYTES/DAY")]
    pub rate: Option<u64>,
    /// Plan replacements as if the array had these parity weights (default: its own)
    #[arg(long, value_delimiter = ',', value_name = "W0,W1,..")]
    pub skew: Option<Vec<u32>>,
    /// Years to plan replacements for (default: until every member now in the array is replaced)
    #[arg(long, value_name = "YEARS")]
    pub years: Option<f64>,
    /// Do not move the parity-heavy role to the most-worn survivor when its member is replaced
    #[arg(long)]
    pub keep_roles: bool,
    #[command(flatten)]
    pub opts: WearOpts,
    /// Print JSON (the input of `raidctl simulate --plan`)
    #[arg(long)]
    pub json: bool,
}

/// Reads SMART for every member: by running smartctl, from files, or not at all.
fn read_smart(
    spec: &[String],
    paths: &[Option<PathBuf>],
) -> Result<(Vec<Option<smart::SmartWear>>, Vec<String>)> {
    let mut notes = Vec::new();
    let none = vec![None; paths.len()];
    match spec
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["none"] => Ok((none, notes)),
        ["auto"] => {
            let mut out = Vec::new();
            for p in paths {
                let Some(p) = p else {
                    out.push(None);
                    continue;
                };
                let is_dev = std::fs::metadata(p)
                    .map(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
                    .unwrap_or(false);
                if !is_dev {
                    notes.push(format!("{}: not a device, no SMART", p.display()));
                    out.push(None);
                    continue;
                }
                match Command::new("smartctl").args(["-j", "-a"]).arg(p).output() {
                    Ok(o) => match smart::parse(&String::from_utf8_lossy(&o.stdout)) {
                        Ok(w) => out.push(Some(w)),
                        Err(e) => {
                            notes.push(format!("{}: {e}", p.display()));
                            out.push(None);
                        }
                    },
                    Err(_) => {
                        notes.push("smartctl is not installed (apt install smartmontools)".into());
                        return Ok((none, notes));
                    }
                }
            }
            Ok((out, notes))
        }
        files => {
            if files.len() != paths.len() {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("--smart has {} files for {} members: give one smartctl -j file per member, in slot order", files.len(), paths.len()),
                ));
            }
            let mut out = Vec::new();
            for f in files {
                // smartctl -j writes tens of kilobytes; a file far larger is not one.
                let len = std::fs::metadata(f)
                    .map_err(|e| Error::io(e, "stat", f, 0))?
                    .len();
                if len > MAX_SMART_FILE {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!("{f}: {len} bytes is not a smartctl -j report (at most {MAX_SMART_FILE} bytes read)"),
                    ));
                }
                let text = std::fs::read_to_string(f).map_err(|e| Error::io(e, "read", f, 0))?;
                out.push(Some(
                    smart::parse(&text).map_err(|e| e.context(f.to_string()))?,
                ));
            }
            Ok((out, notes))
        }
    }
}

const STATUS_NAMES: [&str; 3] = ["ok", "warning", "critical"];

/// 9999-12-31T23:59:59Z: the last moment RFC 3339 can write.
const LAST_DATE: u64 = 253_402_300_799;

/// A wear-out date for JSON: RFC 3339, or null past year 9999 (a rate near zero puts the date
/// hundreds of thousands of years out; the `_beyond_9999` field says so).
fn date(t: u64) -> Option<String> {
    (t <= LAST_DATE).then(|| time(t))
}

/// Everything the report shows, computed once.
struct Report {
    json: Value,
    status: u8,
    reasons: Vec<String>,
}

fn analyse(
    array: &Array,
    opts: &WearOpts,
    collision_days: Option<f64>,
) -> Result<(Report, Vec<Option<smart::SmartWear>>)> {
    opts.validate()?;
    let sb = array.superblock();
    let layout = array.layout();
    let members: Vec<_> = array
        .members()
        .into_iter()
        .filter(|m| m.slot.is_some() && m.state != MemberState::Replacing)
        .collect();
    let paths: Vec<Option<PathBuf>> = members.iter().map(|m| m.path.clone()).collect();
    let (smarts, mut notes) = read_smart(&opts.smart, &paths)?;
    let now = raidcore::array::now_secs();
    let mut projections: Vec<Projection> = Vec::new();
    for (m, s) in members.iter().zip(&smarts) {
        let input = MemberWearInput {
            array_bytes: m.wear.total(),
            user_bytes: m.wear.data_bytes + m.wear.parity_bytes,
            history: m.wear.history.clone(),
            rated_endurance: m.wear.endurance_bytes,
            smart_pct: s.as_ref().and_then(|s| s.percent_used),
            smart_host_bytes: s.as_ref().and_then(|s| s.host_bytes_written),
            smart_power_on_hours: s.as_ref().and_then(|s| s.power_on_hours),
        };
        projections.push(wear::project(now, &input, opts.window));
    }
    let mix = array.write_mix();
    let k = mix.chunks_per_row_write();
    // Observed shares over the time every member has been here (a member that joined later,
    // or was rebuilt, is compared from that moment on).
    let (observed, shares_since, share_bytes) = wear::shares_since_all_joined(
        &members
            .iter()
            .map(|m| {
                (
                    m.wear.history.as_slice(),
                    m.wear.data_bytes + m.wear.parity_bytes,
                )
            })
            .collect::<Vec<_>>(),
    );
    // The expected byte shares come from the measured byte mix: data bytes per parity byte
    // the array wrote (k_bytes). The chunks-per-row-write figure (k) counts a 4 KiB write and
    // a 64 KiB one alike, so it mispredicted byte shares by up to 6 points for mixed sizes.
    let data_total: u64 = members.iter().map(|m| m.wear.data_bytes).sum();
    let parity_total: u64 = members.iter().map(|m| m.wear.parity_bytes).sum();
    let k_bytes = (parity_total > 0).then(|| data_total as f64 / parity_total as f64);
    let expected = (layout.parity_count() == 1)
        .then_some(())
        .and(k_bytes)
        .map(|k| wear::expected_shares(layout.weights(), k));
    let wearouts: Vec<Option<u64>> = projections.iter().map(|p| p.wearout_time).collect();
    let collision = wear::collision_window_days(&wearouts);
    let member_bytes = sb.data_rows * layout.chunk();
    let rebuild_days = member_bytes as f64 / opts.rebuild_rate.max(1) as f64 / wear::DAY;
    let threshold = collision_days.unwrap_or((3.0 * rebuild_days).max(30.0));
    // The chance that two members wear out within the threshold of each other (one model:
    // a shared workload rate, each member's own share error, drive spread; wear::collision_risk);
    // and the same members under RAID 5 (every member at the mean rate: the same member bytes,
    // spread evenly), to show what the weights buy.
    let spread = opts.endurance_spread / 100.0;
    let lives: Vec<wear::LifeInput> = projections.iter().filter_map(wear::LifeInput::of).collect();
    let risk = wear::collision_risk(&lives, threshold, opts.horizon, spread);
    let mean_rate = lives.iter().map(|l| l.rate_per_day).sum::<f64>() / lives.len().max(1) as f64;
    let even_lives: Vec<wear::LifeInput> = lives
        .iter()
        .map(|l| wear::LifeInput {
            rate_per_day: mean_rate,
            rate_se: l.rate_se / l.rate_per_day * mean_rate,
            ..*l
        })
        .collect();
    let risk_even = wear::collision_risk(&even_lives, threshold, opts.horizon, spread);
    // The separation the weights buy: the first two wear-outs' gap, against the same members
    // at an even rate.
    let even_outs: Vec<Option<u64>> = projections
        .iter()
        .map(|p| {
            let f = p.rate_bytes_per_day? / mean_rate.max(1e-9);
            p.wearout_time
                .map(|t| now + (t.saturating_sub(now) as f64 * f) as u64)
        })
        .collect();
    let even_gap = wear::collision_window_days(&even_outs);

    let mut status = 0u8;
    let mut reasons = Vec::new();
    let mut flag = |level: u8, why: String| {
        status = status.max(level);
        reasons.push(why);
    };
    for (m, (p, s)) in members.iter().zip(projections.iter().zip(&smarts)) {
        let slot = m.slot.unwrap_or(0);
        if let Some(w) = p.wear_pct {
            if w >= 95.0 {
                flag(2, format!("slot {slot}: {w:.0}% of endurance used"));
            } else if w >= 80.0 {
                flag(1, format!("slot {slot}: {w:.0}% of endurance used"));
            }
        }
        if let Some(t) = p.wearout_time {
            let days = (t as f64 - now as f64) / wear::DAY;
            if days < 30.0 {
                flag(
                    2,
                    format!("slot {slot}: projected to wear out in {days:.0} days"),
                );
            } else if days < 180.0 {
                flag(
                    1,
                    format!("slot {slot}: projected to wear out in {days:.0} days"),
                );
            }
        }
        if let Some(s) = s {
            if let (Some(a), Some(t)) = (s.available_spare_pct, s.available_spare_threshold_pct) {
                if a <= t {
                    flag(
                        2,
                        format!("slot {slot}: available spare {a}% at or below its threshold {t}%"),
                    );
                }
            }
            if s.smart_passed == Some(false) {
                flag(2, format!("slot {slot}: SMART overall health failed"));
            }
            if s.media_errors.unwrap_or(0) > 0 {
                flag(
                    1,
                    format!("slot {slot}: {} media errors", s.media_errors.unwrap_or(0)),
                );
            }
        }
        if matches!(m.state, MemberState::Faulty | MemberState::Missing) {
            flag(2, format!("slot {slot}: member {}", m.state.name()));
        }
    }
    // A member taking a share of the writes far from what the weights and the mix predict:
    // the forecasts assume the expected shares, so the difference is worth a look (a member
    // written by something else, a layout the report misreads). Sampling noise allowed for:
    // see wear::share_deviations (4 KiB, the smallest write, taken as the unit).
    if let Some(e) = &expected {
        let writes = share_bytes.iter().sum::<u64>() / 4096;
        for i in wear::share_deviations(&observed, e, writes) {
            flag(
                1,
                format!(
                    "slot {}: takes {:.1}% of data and parity writes, {:.1}% expected from the weights and the write mix",
                    members[i].slot.unwrap_or(0),
                    observed[i] * 100.0,
                    e[i] * 100.0
                ),
            );
        }
    }
    // Only wear-outs within the horizon are warned of: a "collision" centuries away is none.
    let first_out = wearouts.iter().flatten().min().copied();
    let within_horizon =
        first_out.is_some_and(|t| (t as f64) <= now as f64 + opts.horizon * wear::DAY);
    if let (Some(c), true) = (collision, within_horizon) {
        if c < threshold {
            flag(1, format!("the two earliest wear-outs are {c:.1} days apart, below the {threshold:.1}-day threshold"));
        }
    }
    // Any later pair too: one early member must not hide three that wear out together.
    let mut outs: Vec<(u64, usize)> = members
        .iter()
        .zip(&wearouts)
        .filter_map(|(m, t)| Some(((*t)?, m.slot.unwrap_or(0))))
        .filter(|&(t, _)| (t as f64) <= now as f64 + opts.horizon * wear::DAY)
        .collect();
    outs.sort_unstable();
    // (The first pair is the collision window, above.)
    for w in outs.windows(2).skip(1) {
        let gap = (w[1].0 - w[0].0) as f64 / wear::DAY;
        if gap < threshold {
            flag(1, format!("slots {} and {} are projected to wear out {gap:.1} days apart, below the {threshold:.1}-day threshold", w[0].1, w[1].1));
        }
    }
    if risk >= COLLISION_RISK_WARN {
        flag(1, format!("collision risk {:.0}%: two members likely wear out within {threshold:.0} days of each other in the next {:.0} days", risk * 100.0, opts.horizon));
    }
    // A history that stopped (no `wear --record`, array not opened) leaves forecasts without
    // a rate: said, rather than a quiet "ok".
    let newest_sample = members
        .iter()
        .filter_map(|m| m.wear.history.last().map(|s| s.time))
        .max();
    let sample_age_days = newest_sample.map(|t| now.saturating_sub(t) as f64 / wear::DAY);
    if let Some(age) = sample_age_days.filter(|&a| a > opts.window) {
        notes.push(format!(
            "the newest history sample is {age:.0} days old, older than the {:.0}-day window: rates and dates need samples within it (run `raidctl wear --record` daily; contrib/raidctl-wear-record@.timer)",
            opts.window
        ));
    }
    let mix_note = match k {
        None => "no writes recorded yet".to_string(),
        Some(k) if layout.parity_count() == 1 && (k - layout.data_per_row() as f64).abs() < 0.05 => format!(
            "{k:.2} data chunks per row write: full-row writes, which spread wear evenly whatever the parity weights"
        ),
        Some(k) if layout.parity_count() == 1 => format!(
            "{k:.2} data chunks per row write: partial-row writes, so parity weights skew wear as expected below"
        ),
        Some(k) => format!("{k:.2} data chunks per row write"),
    };
    // What the weights buy under this mix: the heaviest member's expected excess over the
    // average. Under full-row writes parity weights change almost nothing, and F1 users
    // should hear it plainly rather than count on a separation that will not come.
    let skewed = layout.weights().iter().any(|&w| w != layout.weights()[0]);
    let excess = expected.as_ref().map(|e| {
        let mean = 1.0 / e.len() as f64;
        e.iter().fold(0.0f64, |a, &x| a.max(x)) / mean - 1.0
    });
    if let (true, Some(x)) = (skewed, excess) {
        if x < 0.02 {
            notes.push(format!(
                "parity weights separate almost nothing under this write mix: the parity-heavy member is expected to take only {:.1}% more writes than the average ({:.2} data bytes per parity byte; full-row writes such as file copies and large files spread wear evenly whatever the weights). Plan replacements by wear instead of counting on F1 to stagger them",
                x * 100.0,
                k_bytes.unwrap_or(0.0)
            ));
        }
    }
    // No writes in the window: no shares to compare (not 0 %).
    let wrote = share_bytes.iter().any(|&b| b > 0);
    let max_diff = expected.as_ref().filter(|_| wrote).map(|e| {
        e.iter()
            .zip(&observed)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    });
    let json_members: Vec<Value> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let p = &projections[i];
            json!({
                "slot": m.slot,
                "path": m.path.as_ref().map(|p| p.display().to_string()),
                "uuid": crate::output::uuid(&m.uuid),
                "state": m.state.name(),
                "bytes_written": {
                    "data": m.wear.data_bytes, "parity": m.wear.parity_bytes,
                    "metadata": m.wear.metadata_bytes, "rebuild": m.wear.rebuild_bytes, "total": m.wear.total(),
                },
                "history_samples": m.wear.history.len(),
                "rate_bytes_per_day": p.rate_bytes_per_day,
                "rate_range_bytes_per_day": p.rate_range,
                "rate_se_bytes_per_day": p.rate_se,
                "metadata_per_data_byte_in_window": p.metadata_share,
                "endurance_bytes": p.endurance_bytes,
                "endurance_range_bytes": p.endurance_range,
                "remaining_bytes": p.remaining_bytes,
                "one_off_bytes_in_window": p.one_off_bytes,
                "endurance_source": p.endurance_source,
                "wear_percent": p.wear_pct,
                "wear_at_least_percent": p.wear_at_least_pct,
                "history_wear_percent": history_wear(m, p),
                "wear_source": p.wear_source,
                "smart_recorded": p.smart_recorded.and_then(date),
                "projected_wearout": p.wearout_time.and_then(date),
                "projected_wearout_unix": p.wearout_time.filter(|&t| t <= LAST_DATE),
                "projected_wearout_beyond_9999": p.wearout_time.is_some_and(|t| t > LAST_DATE),
                "projected_wearout_range": p.wearout_range.map(|(a, b)| [date(a), date(b)]),
                "projected_wearout_range_unix": p.wearout_range.map(|(a, b)| {
                    [a, b].map(|t| (t <= LAST_DATE).then_some(t))
                }),
                "projection_method": p.method,
                "observed_share": wrote.then(|| observed[i]),
                "share_bytes": share_bytes[i],
                "expected_share": expected.as_ref().map(|e| e[i]),
                "smart": smarts[i],
            })
        })
        .collect();
    let json = json!({
        "name": sb.name,
        "uuid": crate::output::uuid(&sb.array_uuid),
        "level": layout.level().name(),
        "parity_weights": layout.weights(),
        "generated": date(now),
        "generated_unix": now,
        "newest_sample_age_days": sample_age_days,
        "window_days": opts.window,
        "members": json_members,
        "write_mix": {
            "row_writes": mix.row_writes,
            "data_chunk_writes": mix.data_chunk_writes,
            "full_row_writes": mix.full_row_writes,
            "chunks_per_row_write": k,
            "data_bytes": data_total,
            "parity_bytes": parity_total,
            "data_bytes_per_parity_byte": k_bytes,
            "note": mix_note,
        },
        "skew": {
            "formula": "expected share of member i = (p_i/k + (1-p_i)/(N-1)), normalised, where p_i = w_i/sum(w) and k = data bytes per parity byte written (write_mix.data_bytes_per_parity_byte)",
            "expected_shares": expected,
            "observed_shares": wrote.then_some(&observed),
            "observed_since": shares_since.and_then(date),
            "observed_since_unix": shares_since,
            "observed_since_creation": shares_since == members.iter().filter_map(|m| m.wear.history.first().map(|s| s.time)).min(),
            "max_abs_difference": max_diff,
            "heaviest_expected_excess": excess,
        },
        "collision_window_days": collision,
        "collision_threshold_days": threshold,
        "separation": {
            "days": collision,
            "raid5_days": even_gap,
            "bought_days": collision.zip(even_gap).map(|(a, b)| a - b),
        },
        "collision_risk": {
            "probability": risk,
            "raid5_probability": risk_even,
            "window_days": threshold,
            "horizon_days": opts.horizon,
            "members_counted": lives.len(),
            "rate_errors_measured": projections.iter().filter(|p| p.rate_bytes_per_day.is_some()).all(|p| p.rate_se.is_some()),
            "confidence": wear::CONFIDENCE,
            "endurance_spread": spread,
            "inputs": lives,
            "model": "Monte Carlo, 20,000 draws: the probability that, within the horizon, any two members wear out within the window (collision_threshold_days) of each other. Each draw takes one shared workload-rate error for all members (the smallest relative rate error of any member), each member's own remaining rate error, its life left between the least and most its SMART figures allow, and a drive-to-drive spread of endurance_spread (a coefficient of variation). raid5_probability: the same members with every one at the mean write rate",
        },
        "status": STATUS_NAMES[status as usize],
        "reasons": reasons,
        "notes": notes,
    });
    Ok((
        Report {
            json,
            status,
            reasons,
        },
        smarts,
    ))
}

/// Wear at each history sample, [[unix, percent], ...]: SMART's figure where the sample has
/// one, else wear now less the bytes written since over the endurance. Empty when wear now or
/// the endurance is unknown.
fn history_wear(m: &raidcore::array::MemberInfo, p: &Projection) -> Vec<(u64, f64)> {
    let (Some(now), Some(e)) = (p.wear_pct, p.endurance_bytes.filter(|&e| e > 0)) else {
        return Vec::new();
    };
    let total = m.wear.total() as f64;
    m.wear
        .history
        .iter()
        .map(|s| {
            let at = (s.data_bytes + s.parity_bytes + s.other_bytes) as f64;
            let pct = s
                .smart_used_pct
                .map(f64::from)
                .unwrap_or(now - (total - at).max(0.0) * 100.0 / e as f64);
            (s.time, pct.max(0.0))
        })
        .collect()
}

fn prometheus(r: &Value) -> String {
    let mut out = String::new();
    let arr = r["name"].as_str().unwrap_or("");
    let uuid = r["uuid"].as_str().unwrap_or("");
    // Labels from identities (array and member uuids, slot), never from how a path was typed.
    let lbl = |m: &Value| {
        format!(
            "array=\"{}\",uuid=\"{uuid}\",slot=\"{}\",member_uuid=\"{}\"",
            crate::prom::escape(arr),
            m["slot"],
            m["uuid"].as_str().unwrap_or("")
        )
    };
    // The bytes written per member and kind are `status --prometheus`'s
    // (raidctl_member_bytes_written_total): the two outputs go into one textfile together, where
    // a family given twice is an error (promtool: "second HELP line").
    let members = r["members"].as_array().cloned().unwrap_or_default();
    // Prometheus base units: seconds, bytes per second (`scale` converts from the report's).
    let gauge = |out: &mut String, name: &str, help: &str, field: &str, scale: f64| {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for m in &members {
            if let Some(v) = m[field].as_f64() {
                out.push_str(&format!("{name}{{{}}} {}\n", lbl(m), v * scale));
            }
        }
    };
    gauge(
        &mut out,
        "raidctl_member_wear_percent",
        "Percent of rated endurance used.",
        "wear_percent",
        1.0,
    );
    gauge(
        &mut out,
        "raidctl_member_write_rate_bytes_per_second",
        "Write rate fitted over the history window.",
        "rate_bytes_per_day",
        1.0 / wear::DAY,
    );
    gauge(
        &mut out,
        "raidctl_member_projected_wearout_timestamp_seconds",
        "Projected wear-out time.",
        "projected_wearout_unix",
        1.0,
    );
    gauge(
        &mut out,
        "raidctl_member_write_share",
        "Observed share of data and parity writes.",
        "observed_share",
        1.0,
    );
    out.push_str("# HELP raidctl_array_collision_window_seconds Time between the two earliest projected wear-outs.\n# TYPE raidctl_array_collision_window_seconds gauge\n");
    if let Some(c) = r["collision_window_days"].as_f64() {
        out.push_str(&format!(
            "raidctl_array_collision_window_seconds{{array=\"{arr}\",uuid=\"{uuid}\"}} {}\n",
            c * wear::DAY
        ));
    }
    let array_gauge = |out: &mut String, name: &str, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{array=\"{arr}\",uuid=\"{uuid}\"}} {v}\n"
            ));
        }
    };
    array_gauge(
        &mut out,
        "raidctl_array_collision_risk",
        "Probability that two members wear out within the collision threshold of each other within the horizon.",
        r["collision_risk"]["probability"].as_f64(),
    );
    array_gauge(
        &mut out,
        "raidctl_array_wear_sample_age_seconds",
        "Age of the newest wear history sample.",
        r["newest_sample_age_days"].as_f64().map(|d| d * wear::DAY),
    );
    out.push_str("# HELP raidctl_array_wear_status 0 ok, 1 warning, 2 critical.\n# TYPE raidctl_array_wear_status gauge\n");
    let st = match r["status"].as_str() {
        Some("critical") => 2,
        Some("warning") => 1,
        _ => 0,
    };
    out.push_str(&format!(
        "raidctl_array_wear_status{{array=\"{arr}\",uuid=\"{uuid}\"}} {st}\n"
    ));
    out
}

fn open(array: &std::path::Path, scan: &[PathBuf], writable: bool) -> Result<Array> {
    let opts = AssembleOptions {
        writable,
        scan: scan.to_vec(),
        allow_failed: !writable,
        force: false,
        // A report answers while an offline job holds the members.
        unlocked: !writable,
    };
    let a =
        Array::open(array, &opts).map_err(|e| e.context(format!("array {}", array.display())))?;
    if writable {
        // A record is a write: after a crash the array is resynced first, as by every writable
        // command (the record's clean close would otherwise mark torn rows clean).
        crate::cmd::after_writable_open(&a)?;
    }
    Ok(a)
}

pub fn run(a: WearArgs) -> Result<ExitCode> {
    if let Some(WearSub::Plan(p)) = a.sub {
        return plan(p);
    }
    // For a monitoring system (--check) every failure is "unknown" (3, as Nagios has it),
    // never a wear status: a missing array must not read as a warning.
    let check = a.check;
    match report(a) {
        Err(e) if check => {
            eprintln!("raidctl: wear unknown: {e}");
            Ok(ExitCode::from(CHECK_UNKNOWN))
        }
        r => r,
    }
}

/// The largest --smart file read (smartctl -j writes tens of kilobytes).
const MAX_SMART_FILE: u64 = 4 << 20;

/// A collision risk at or above this is a warning (whatever the point estimates say).
pub const COLLISION_RISK_WARN: f64 = 0.5;

/// `wear --check`'s status when the wear could not be assessed (an error of any kind).
pub const CHECK_UNKNOWN: u8 = 3;

fn report(a: WearArgs) -> Result<ExitCode> {
    let Some(path) = a.array.clone() else {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "wear needs ARRAY (the path of a member)",
        ));
    };
    if let Some(c) = a.collision_days {
        if !(c >= 0.0 && c.is_finite()) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "--collision-days must be a number of days, 0 or more: {c} is out of range"
                ),
            ));
        }
    }
    // The plot file is opened before anything is recorded: a bad path fails first.
    if let Some(f) = &a.plot {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(f)
            .map_err(|e| Error::new(ErrorKind::Io, format!("--plot {}: {e}", f.display())))?;
    }
    let (r, status, reasons) = if a.record {
        record(&path, &a)?
    } else {
        let r = report_for(&path, &a.opts, a.collision_days)?;
        let status = match r["status"].as_str() {
            Some("critical") => 2,
            Some("warning") => 1,
            _ => 0,
        };
        let reasons = r["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect();
        (r, status, reasons)
    };
    let r = &r;
    if let Some(f) = &a.plot {
        let note = super::wear_plot::plot(f, r)?;
        eprintln!("raidctl: wrote {}", f.display());
        if let Some(n) = note {
            eprintln!("raidctl: {n}");
        }
    }
    if a.prometheus {
        print!("{}", prometheus(r));
    } else if a.json {
        crate::output::print_json(r);
    } else {
        print_human(r);
    }
    if a.check {
        for why in &reasons {
            eprintln!(
                "raidctl: wear {}: {why}",
                r["status"].as_str().unwrap_or("")
            );
        }
        return Ok(ExitCode::from(status));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--record`: adds a history sample with the SMART values read, through the serving daemon
/// when one owns the array (it owns the superblocks), else on the array opened for writing.
fn record(path: &std::path::Path, a: &WearArgs) -> Result<(Value, u8, Vec<String>)> {
    if let Some(c) = crate::control::daemon_for(path)? {
        let r = crate::control::call(
            c,
            &crate::protocol::Request::WearRecord(a.opts.to_request(a.collision_days)),
        )?;
        let status = STATUS_NAMES
            .iter()
            .position(|n| r["status"] == *n)
            .unwrap_or(0) as u8;
        let reasons = r["reasons"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect();
        return Ok((r, status, reasons));
    }
    let array = open(path, &a.opts.scan, true)?;
    let report = record_on(&array, &a.opts, a.collision_days)?;
    array.close()?;
    Ok((report.json, report.status, report.reasons))
}

/// Adds a history sample to every member of an array open for writing (the daemon's, or one
/// opened for `--record`), with the SMART values read; returns the report computed before it.
fn record_on(array: &Array, opts: &WearOpts, collision_days: Option<f64>) -> Result<Report> {
    let (report, smarts) = analyse(array, opts, collision_days)?;
    let mut map = HashMap::new();
    for (m, s) in array
        .members()
        .iter()
        .filter(|m| m.slot.is_some() && m.state != MemberState::Replacing)
        .zip(&smarts)
    {
        if let Some(s) = s {
            map.insert(
                m.uuid,
                (s.percent_used.map(|p| p as f32), s.host_bytes_written),
            );
        }
    }
    array.sample_wear(&map, true)?;
    // The daily record is where wear crossing a threshold is noticed: an event for
    // `raidctl monitor`.
    if report.status > 0 {
        array.raise(
            if report.status >= 2 {
                "wear-critical"
            } else {
                "wear-warning"
            },
            None,
            report.reasons.join("; "),
        );
    }
    Ok(report)
}

/// `wear --record` through the daemon: what the control socket runs.
pub fn record_json(array: &Array, opts: &WearOpts, collision_days: Option<f64>) -> Result<Value> {
    let r = record_on(array, opts, collision_days)?;
    Ok(r.json)
}

fn pct(v: &Value) -> String {
    v.as_f64()
        .map(|x| format!("{x:.1}%"))
        .unwrap_or_else(|| "unknown".into())
}

fn print_human(r: &Value) {
    println!(
        "array {} ({}), parity weights {}",
        r["name"].as_str().unwrap_or(""),
        r["level"].as_str().unwrap_or(""),
        r["parity_weights"]
    );
    println!(
        "write mix: {}",
        r["write_mix"]["note"].as_str().unwrap_or("")
    );
    println!();
    println!(
        "{:>4}  {:>10} {:>10} {:>12} {:>9} {:>8} {:>8}  {:<22} path",
        "slot", "written", "parity", "rate/day", "wear", "share", "expect", "wear-out"
    );
    for m in r["members"].as_array().into_iter().flatten() {
        let rate = m["rate_bytes_per_day"]
            .as_f64()
            .map(|x| human(x as u64))
            .unwrap_or_else(|| "-".into());
        let out = match m["projected_wearout"].as_str() {
            Some(s) => s.split('T').next().unwrap_or(s).to_string(),
            None if m["projected_wearout_beyond_9999"].as_bool() == Some(true) => {
                "beyond 9999".into()
            }
            None => "-".into(),
        };
        // As strings: a JSON value ignores the width of a format.
        let slot = m["slot"]
            .as_u64()
            .map(|x| x.to_string())
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>4}  {:>10} {:>10} {:>12} {:>9} {:>8} {:>8}  {:<22} {}",
            slot,
            human(m["bytes_written"]["total"].as_u64().unwrap_or(0)),
            human(m["bytes_written"]["parity"].as_u64().unwrap_or(0)),
            rate,
            pct(&m["wear_percent"]),
            m["observed_share"]
                .as_f64()
                .map(|x| format!("{:.1}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            m["expected_share"]
                .as_f64()
                .map(|x| format!("{:.1}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            out,
            m["path"].as_str().unwrap_or("-"),
        );
    }
    if r["skew"]["observed_since_creation"] == false {
        if let Some(d) = r["skew"]["observed_since"].as_str() {
            println!(
                "share: writes since {}, when the newest member joined",
                d.split('T').next().unwrap_or(d)
            );
        }
    }
    println!();
    for m in r["members"].as_array().into_iter().flatten() {
        let range = m["projected_wearout_range"]
            .as_array()
            .filter(|a| a.len() == 2)
            .map(|a| {
                let d = |v: &Value| match v.as_str() {
                    Some(s) => s.split('T').next().unwrap_or(s).to_string(),
                    None => "beyond 9999".into(),
                };
                format!("; wear-out between {} and {}", d(&a[0]), d(&a[1]))
            })
            .unwrap_or_default();
        println!(
            "slot {}: {}; endurance {}{range}",
            m["slot"],
            m["projection_method"].as_str().unwrap_or(""),
            m["endurance_source"].as_str().unwrap_or("")
        );
    }
    if let (Some(d), Some(e)) = (
        r["separation"]["days"].as_f64(),
        r["separation"]["raid5_days"].as_f64(),
    ) {
        println!(
            "separation: the first two wear-outs are {d:.0} days apart; at an even (RAID 5) rate the same members would be {e:.0} days apart: the weights buy {:.0} days",
            d - e
        );
    }
    let cr = &r["collision_risk"];
    if cr["members_counted"].as_u64().unwrap_or(0) >= 2 {
        println!(
            "collision risk: {:.1}% (RAID 5 with the same members: {:.1}%) that two members wear out within {:.0} days of each other, in the next {:.0} days",
            cr["probability"].as_f64().unwrap_or(0.0) * 100.0,
            cr["raid5_probability"].as_f64().unwrap_or(0.0) * 100.0,
            cr["window_days"].as_f64().unwrap_or(0.0),
            cr["horizon_days"].as_f64().unwrap_or(0.0)
        );
        if cr["rate_errors_measured"] == false {
            println!("  (the write rates' errors are not measured yet: the history holds one interval of a day or more, so only the endurance spread is counted)");
        }
    } else {
        println!("collision risk: unknown (needs two members with a projected wear-out)");
    }
    match r["collision_window_days"].as_f64() {
        Some(c) => println!(
            "collision window: {c:.0} days between the two earliest wear-outs (threshold {:.0})",
            r["collision_threshold_days"].as_f64().unwrap_or(0.0)
        ),
        None => println!("collision window: unknown (needs two projected wear-out dates)"),
    }
    println!("status: {}", r["status"].as_str().unwrap_or(""));
    for why in r["reasons"].as_array().into_iter().flatten() {
        println!("  - {}", why.as_str().unwrap_or(""));
    }
    for n in r["notes"].as_array().into_iter().flatten() {
        println!("note: {}", n.as_str().unwrap_or(""));
    }
}

fn plan(p: PlanArgs) -> Result<ExitCode> {
    if !(p.target_gap > 0.0 && p.target_gap.is_finite()) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--target-gap must be a positive number of days",
        ));
    }
    if p.years.is_some_and(|y| !(y > 0.0 && y <= 100.0)) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--years must be above 0 and at most 100",
        ));
    }
    let array = open(&p.array, &p.opts.scan, false)?;
    let layout = array.layout().clone();
    if layout.parity_count() != 1 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "parity weights apply to raid5/f1 arrays, not {}",
                layout.level().name()
            ),
        ));
    }
    let n = layout.members();
    let weights = match &p.skew {
        Some(w) if w.len() != n || w.iter().all(|&x| x == 0) => {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("--skew needs {n} weights, not all 0"),
            ))
        }
        Some(w) => w.clone(),
        None => layout.weights().to_vec(),
    };
    let (report, _) = analyse(&array, &p.opts, None)?;
    let r = &report.json;
    let members = r["members"].as_array().cloned().unwrap_or_default();
    let (mut endurance, mut used) = (Vec::new(), Vec::new());
    let mut measured = 0.0;
    // The shared relative error of the members' rates (the workload's), for the margin.
    let mut rel_se = f64::INFINITY;
    let mut shares = Vec::new();
    for m in &members {
        if let (Some(r), Some(se)) = (
            m["rate_bytes_per_day"].as_f64(),
            m["rate_se_bytes_per_day"].as_f64(),
        ) {
            if r > 0.0 {
                rel_se = rel_se.min(se / r);
            }
        }
        shares.extend(m["metadata_per_data_byte_in_window"].as_f64());
        let (Some(e), Some(w)) = (m["endurance_bytes"].as_f64(), m["wear_percent"].as_f64()) else {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("slot {}: endurance unknown; give --endurance at create or add, or SMART data with --smart", m["slot"]),
            ));
        };
        endurance.push(e);
        used.push(e * (w / 100.0).clamp(0.0, 1.0));
        measured += m["rate_bytes_per_day"].as_f64().unwrap_or(0.0);
    }
    // The mix: data bytes per parity byte the array wrote (the figure the expected shares
    // use). Chunks per row write counted a 4 KiB and a 64 KiB write alike and mispredicted.
    let Some(k) = r["write_mix"]["data_bytes_per_parity_byte"].as_f64() else {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "no data or parity writes recorded yet: the planner models the array's measured write mix; write to the array first",
        ));
    };
    // Member bytes per user byte are 1 + 1/k for single-parity levels.
    // Metadata (bitmap, checksum log, superblocks) rides on every member's writes: a fitted
    // rate counts it already; a --rate of user bytes does not, so the share measured over the
    // history window is added (none without history).
    let meta_ratio = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    let (user_rate, rate_source) = match p.rate {
        Some(r) if r > 0 => (
            r as f64 * (1.0 + meta_ratio),
            if shares.is_empty() {
                "--rate (no history to measure this array's metadata share: none added)".to_string()
            } else {
                format!(
                    "--rate, plus {:.1} % metadata (measured over the last {:.0} days)",
                    meta_ratio * 100.0,
                    p.opts.window
                )
            },
        ),
        Some(_) => {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--rate must be above 0",
            ))
        }
        None if measured > 0.0 => (
            measured / (1.0 + 1.0 / k),
            format!(
                "measured: members' fitted rates over {:.0} days / (1 + 1/k)",
                p.opts.window
            ),
        ),
        None => return Err(Error::new(
            ErrorKind::InvalidInput,
            "no write rate measured yet (the history spans less than a day): give --rate BYTES/DAY",
        )),
    };
    let capacity = (array.superblock().data_rows * layout.chunk()) as f64;
    let fresh = endurance.iter().copied().fold(0.0, f64::max);
    let fleet = plan::Fleet {
        weights: weights.clone(),
        k,
        user_bytes_per_day: user_rate,
        endurance: endurance.clone(),
        used: used.clone(),
        fresh_endurance: fresh,
        capacity,
        reshuffle: !p.keep_roles && layout.level() == raidcore::layout::Level::F1,
    };
    let mut analysis = plan::analyse_weights(&fleet, p.target_gap);
    // The gap with the array's own weights, even when --skew plans with others.
    analysis.current_gap_days = fleet.first_gap(layout.weights());
    let natural = fleet.natural_wearouts(&weights);
    let horizon = p
        .years
        .map(|y| y * 365.25)
        .unwrap_or_else(|| natural.iter().copied().fold(0.0, f64::max));
    // A given --rate is taken as exact; a measured one has an error the schedule keeps a
    // margin against (wear::plan::schedule_with_margin).
    let rel_se = if p.rate.is_some() || !rel_se.is_finite() {
        0.0
    } else {
        rel_se
    };
    let (sched, z, planned_rate, p_holds) =
        plan::schedule_with_margin(&fleet, &weights, p.target_gap, horizon, rel_se);
    let now = raidcore::array::now_secs();
    // RFC 3339 up to year 9999; past it "beyond 9999" (a rate near zero puts dates there).
    let date = |day: f64| {
        let t = now as f64 + day * wear::DAY;
        (t.is_finite() && t <= LAST_DATE as f64).then(|| time(t.round() as u64))
    };
    let rates = fleet.rates(&weights);
    let json_members: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "slot": i,
                "endurance_bytes": endurance[i],
                "used_bytes": used[i],
                "wear_percent": used[i] * 100.0 / endurance[i],
                "bytes_per_day": rates[i],
                "natural_wearout_days": natural[i],
                "natural_wearout": date(natural[i]),
            })
        })
        .collect();
    let replacements: Vec<Value> = sched
        .replacements
        .iter()
        .map(|x| {
            let mut v = serde_json::to_value(x).expect("serialise");
            v["date"] = json!(date(x.day));
            v
        })
        .collect();
    // Weights separate the first wear-out from the rest; the others (equal shares) still go
    // together, which only the schedule's early replacements and role moves stagger.
    let rest_gap = analysis
        .suggested_weights
        .as_ref()
        .unwrap_or(&analysis.best_weights)
        .as_slice();
    let mut outs = fleet.natural_wearouts(rest_gap);
    outs.sort_by(f64::total_cmp);
    let later_gap = outs
        .windows(2)
        .skip(1)
        .map(|w| w[1] - w[0])
        .reduce(f64::min);
    let message = if analysis.reachable {
        format!(
            "parity weights can reach a {:.0}-day gap between the first two wear-outs{}: {}",
            p.target_gap,
            match later_gap {
                Some(g) if g < p.target_gap => format!(
                    " only (with them the later members still wear out {g:.0} days apart: the schedule's early replacements keep every gap)"
                ),
                _ => String::new(),
            },
            analysis
                .suggested_weights
                .as_ref()
                .map(|w| format!(
                    "--skew {} gives {:.0} days",
                    join(w),
                    analysis.suggested_gap_days.unwrap_or(0.0)
                ))
                .unwrap_or_else(|| format!(
                    "all parity on one slot ({}) gives {:.0} days",
                    join(&analysis.best_weights),
                    analysis.best_gap_days
                ))
        )
    } else {
        format!(
            "no parity weights reach a {:.0}-day gap: the current weights give {:.0} days between the first two wear-outs and the best any weights give is {:.0} (all parity on one slot, {}); {}",
            p.target_gap,
            analysis.current_gap_days,
            analysis.best_gap_days,
            join(&analysis.best_weights),
            analysis.why
        )
    };
    let sched_msg = match (sched.holds, sched.min_gap_days) {
        (true, Some(g)) => format!(
            "the replacement schedule keeps consecutive replacements at least {g:.0} days apart (target {:.0}) over {:.0} days",
            p.target_gap, horizon
        ),
        (true, None) => format!("fewer than two replacements in {horizon:.0} days"),
        (false, g) => format!(
            "no schedule holds a {:.0}-day gap over {horizon:.0} days: the smallest gap in this one is {:.0} days",
            p.target_gap,
            g.unwrap_or(0.0)
        ),
    };
    // Every consecutive gap, not the first only: the schedule's verdict.
    let holds = sched.holds;
    let v = json!({
        "target_gap_days": p.target_gap,
        "now": date(0.0),
        "now_unix": now,
        "level": layout.level().name(),
        "members": n,
        "chunk_bytes": layout.chunk(),
        "current_weights": layout.weights(),
        "weights": weights,
        "write_mix": {
            "data_bytes_per_parity_byte": k,
            "note": r["write_mix"]["note"],
        },
        "user_bytes_per_day": user_rate,
        "rate_source": rate_source,
        "capacity_bytes": capacity,
        "fresh_endurance_bytes": fresh,
        "reshuffle": fleet.reshuffle,
        "model": "member i writes (p_i/k + (1-p_i)/(N-1)) bytes per user byte, p_i = w_i/sum(w), k = data bytes per parity byte; wear-out = remaining endurance / rate, exact",
        "slots": json_members,
        "weights_analysis": analysis,
        "suggested_weights": analysis.suggested_weights,
        "schedule": {
            "margin": {
                "rate_relative_error": rel_se,
                "standard_errors": z,
                "planned_user_bytes_per_day": planned_rate,
                "holds_probability": p_holds,
                "confidence": wear::CONFIDENCE,
                "note": if rel_se > 0.0 {
                    format!("planned for {:.0} % above the measured rate ({z} standard errors), so that the gaps hold in {:.0} % of 2,000 replays with the rate drawn from its measured error; replacements come that much earlier than the measured rate alone would need", z * rel_se * 100.0, p_holds * 100.0)
                } else if p.rate.is_some() {
                    "--rate is taken as exact: no margin (a measured rate gets one from its error)".to_string()
                } else {
                    "the rate's error is unknown (fewer than two intervals of a day): no margin".to_string()
                },
            },
            "weights": sched.weights,
            "horizon_days": sched.horizon_days,
            "replacements": replacements,
            "min_gap_days": sched.min_gap_days,
            "holds": sched.holds,
            "needs_replacement_before_today": sched.needs_past,
            "next_after_horizon_days": sched.next_after_horizon.map(|x| x.0),
            "notes": sched.notes,
            "message": sched_msg,
        },
        "holds": holds,
        "message": message,
    });
    if p.json {
        crate::output::print_json(&v);
    } else {
        print_plan(&v, &sched, &|d| {
            date(d).unwrap_or_else(|| "beyond 9999".into())
        });
    }
    Ok(if holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn join(w: &[u32]) -> String {
    w.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn print_plan(v: &Value, s: &plan::Schedule, date: &dyn Fn(f64) -> String) {
    println!(
        "write mix: {:.3} data bytes per parity byte (measured); user writes {}/day ({})",
        v["write_mix"]["data_bytes_per_parity_byte"]
            .as_f64()
            .unwrap_or(0.0),
        human(v["user_bytes_per_day"].as_f64().unwrap_or(0.0) as u64),
        v["rate_source"].as_str().unwrap_or("")
    );
    println!("{}", v["message"].as_str().unwrap_or(""));
    println!(
        "margin: {}",
        v["schedule"]["margin"]["note"].as_str().unwrap_or("")
    );
    println!();
    println!(
        "replacement schedule with weights {}{} over {:.0} days:",
        join(&s.weights),
        if v["reshuffle"].as_bool() == Some(true) {
            ", the parity-heavy role moving to the most-worn survivor"
        } else {
            ""
        },
        s.horizon_days
    );
    println!(
        "{:>7}  {:<10}  {:>4}  {:>6}  {:>8}  {:>10}  then",
        "day", "date", "slot", "member", "at wear", "early by"
    );
    for x in &s.replacements {
        let d = date(x.day);
        let then = match &x.role_move {
            Some(m) => format!(
                "member {} moves from slot {} to the heavy slot {}; new member {} in slot {}",
                m.member, m.from_slot, m.to_slot, x.fresh_member, x.fresh_slot
            ),
            None => format!("new member {} in slot {}", x.fresh_member, x.fresh_slot),
        };
        println!(
            "{:>7.0}  {:<10}  {:>4}  {:>6}  {:>7.1}%  {:>10}  {then}",
            x.day,
            d.split('T').next().unwrap_or(&d),
            x.slot,
            x.member,
            x.wear_pct,
            format!("{:.0} days", x.days_early)
        );
    }
    println!("{}", v["schedule"]["message"].as_str().unwrap_or(""));
    for n in &s.notes {
        println!("note: {n}");
    }
}
