//! `raidctl simulate`: years of wear in seconds. The real layout and accounting measure each
//! slot's write share under the workload; the simulator plays it forward event to event with
//! replacements and the reshuffle, next to plain RAID 5 on the same workload, or replays a
//! `wear plan --json` (its members' wear, weights, rate and replacement schedule) and says how
//! close the replayed gap comes to the promised one; `--plot` draws an SVG.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use plotters::prelude::*;
use raidcore::layout::{f1_weights, LayoutParams, Level};
use raidcore::wear::sim::{self, MemberStart, SimResult, SimSpec, Workload};
use raidcore::{Error, ErrorKind, Result};
use serde_json::{json, Value};

use crate::units::parse_size;

/// Simulate member wear over years for a level, workload and write rate, or replay a wear plan
#[derive(Args, Debug)]
#[command(
    after_long_help = "Without --plan, --level, --members, --endurance and --rate are required and the workload defaults to rand4k (every byte as a random 4 KiB write: F1's best case; real file traffic is mostly full-row writes, see mix:PCT).\n\nWith --plan FILE (the output of `raidctl wear plan --json`) the members, their wear, the weights, the write rate and the replacement schedule come from the plan, and the workload defaults to the array's measured mix (k:K)."
)]
pub struct SimulateArgs {
    /// Replay this plan (`raidctl wear plan --json` output)
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// RAID level: 0, 1, 5, 6, 10 or f1
    #[arg(long, required_unless_present = "plan", conflicts_with = "plan", value_parser = |s: &str| Level::parse(s).map_err(|e| e.to_string()))]
    pub level: Option<Level>,
    /// Number of members
    #[arg(long, required_unless_present = "plan", conflicts_with = "plan")]
    pub members: Option<usize>,
    /// Parity weights (f1)
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "W0,W1,..",
        conflicts_with = "plan"
    )]
    pub skew: Option<Vec<u32>>,
    /// Rated endurance of each member in terabytes written
    #[arg(
        long,
        value_name = "TBW",
        required_unless_present = "plan",
        conflicts_with = "plan"
    )]
    pub endurance: Option<f64>,
    /// Member capacity (a rebuild writes this much)
    #[arg(long, default_value = "1T", value_parser = parse_size, conflicts_with = "plan")]
    pub capacity: u64,
    /// rand4k, seq, mix:PCT (percent of bytes as random 4 KiB writes) or k:K (data bytes per
    /// parity byte); default rand4k, or the plan's measured mix
    #[arg(long, value_parser = |s: &str| Workload::parse(s).map_err(|e| e.to_string()))]
    pub workload: Option<Workload>,
    /// Take the workload from an array's measured write mix (its data bytes per parity byte)
    #[arg(long, value_name = "ARRAY", conflicts_with = "workload")]
    pub mix_of: Option<PathBuf>,
    /// User writes per day in GB (10^9 bytes)
    #[arg(
        long,
        value_name = "GB/DAY",
        required_unless_present = "plan",
        conflicts_with = "plan"
    )]
    pub rate: Option<f64>,
    /// Years to simulate (default 10, or the plan's horizon and one target gap more)
    #[arg(long)]
    pub years: Option<f64>,
    /// Replace a member when it reaches this percent of its endurance (unless scheduled)
    #[arg(long, default_value_t = 100.0, value_name = "PCT")]
    pub replace_at: f64,
    /// Do not move the parity-heavy role on replacement
    #[arg(long)]
    pub keep_roles: bool,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Draw per-member wear over time to this SVG file
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// What a plan file says, as the simulator needs it.
struct PlanInput {
    params: LayoutParams,
    k: f64,
    start: Vec<MemberStart>,
    fresh_endurance: f64,
    capacity: f64,
    user_bytes_per_day: f64,
    horizon_days: f64,
    target_gap_days: f64,
    reshuffle: bool,
    /// (member, wear percent) of the early replacements.
    schedule: Vec<(usize, f64)>,
    /// How many replacements the plan made, and the smallest gap it promised.
    count: usize,
    promised_gap_days: Option<f64>,
    /// The rate the schedule was planned for (the measured one raised by its margin).
    planned_user_bytes_per_day: f64,
    /// The measured rate's relative standard error (0: taken as exact).
    rate_rel_se: f64,
}

/// Replays of a plan with the write rate drawn from its measured error.
const MODEL_REPLAYS: usize = 500;

fn read_plan(path: &std::path::Path) -> Result<PlanInput> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(e, "read", &path.display().to_string(), 0))?;
    let bad = |what: &str| {
        Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: not a `raidctl wear plan --json` output ({what})",
                path.display()
            ),
        )
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let f = |key: &str| v[key].as_f64().ok_or_else(|| bad(key));
    let level = Level::parse(v["level"].as_str().ok_or_else(|| bad("level"))?)?;
    let n = v["members"].as_u64().ok_or_else(|| bad("members"))? as usize;
    let chunk = v["chunk_bytes"]
        .as_u64()
        .ok_or_else(|| bad("chunk_bytes"))?;
    let weights: Vec<u32> = v["weights"]
        .as_array()
        .ok_or_else(|| bad("weights"))?
        .iter()
        .map(|x| x.as_u64().map(|x| x as u32).ok_or_else(|| bad("weights")))
        .collect::<Result<_>>()?;
    let mut params = LayoutParams::with_defaults(level, n, chunk);
    params.weights = weights;
    let start = v["slots"]
        .as_array()
        .ok_or_else(|| bad("slots"))?
        .iter()
        .map(|m| {
            Ok(MemberStart {
                endurance_bytes: m["endurance_bytes"].as_f64().ok_or_else(|| bad("slots"))?,
                used_bytes: m["used_bytes"].as_f64().ok_or_else(|| bad("slots"))?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let reps = v["schedule"]["replacements"]
        .as_array()
        .ok_or_else(|| bad("schedule"))?;
    let schedule = reps
        .iter()
        .filter(|r| r["days_early"].as_f64().unwrap_or(0.0) > 0.0)
        .map(|r| {
            Ok((
                r["member"].as_u64().ok_or_else(|| bad("schedule"))? as usize,
                r["wear_pct"].as_f64().ok_or_else(|| bad("schedule"))?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PlanInput {
        params,
        k: v["write_mix"]["data_bytes_per_parity_byte"]
            .as_f64()
            .ok_or_else(|| bad("write_mix"))?,
        start,
        fresh_endurance: f("fresh_endurance_bytes")?,
        capacity: f("capacity_bytes")?,
        user_bytes_per_day: f("user_bytes_per_day")?,
        horizon_days: v["schedule"]["horizon_days"]
            .as_f64()
            .ok_or_else(|| bad("schedule"))?,
        target_gap_days: f("target_gap_days")?,
        reshuffle: v["reshuffle"].as_bool().unwrap_or(false),
        schedule,
        count: reps.len(),
        promised_gap_days: v["schedule"]["min_gap_days"].as_f64(),
        planned_user_bytes_per_day: v["schedule"]["margin"]["planned_user_bytes_per_day"]
            .as_f64()
            .unwrap_or(f("user_bytes_per_day")?),
        rate_rel_se: v["schedule"]["margin"]["rate_relative_error"]
            .as_f64()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .unwrap_or(0.0),
    })
}

fn plot(
    path: &std::path::Path,
    r: &SimResult,
    base: Option<&SimResult>,
    title: &str,
) -> Result<()> {
    let err = |e: String| Error::new(ErrorKind::Io, format!("plotting {}: {e}", path.display()));
    let members: std::collections::BTreeSet<usize> = r.series.iter().map(|p| p.1).collect();
    // The legend goes below the plot, never over it: one row per 5 entries.
    let entries = members.len() + usize::from(base.is_some()) + 3;
    let legend_h = crate::plot::legend_height(entries);
    let root = SVGBackend::new(path, (960, 540 + legend_h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (upper, lower) = root.split_vertically(540);
    let all = r
        .series
        .iter()
        .chain(base.into_iter().flat_map(|b| &b.series));
    let (max_day, max_pct) = all.fold((1.0f64, 100.0f64), |a, p| (a.0.max(p.0), a.1.max(p.2)));
    let mut chart = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..max_day / 365.25, 0f64..max_pct * 1.05)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("years")
        .y_desc("% of endurance used")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let line = |res: &SimResult, m: usize| -> Vec<(f64, f64)> {
        res.series
            .iter()
            .filter(|p| p.1 == m)
            .map(|p| (p.0 / 365.25, p.2))
            .collect()
    };
    let grey = RGBColor(150, 150, 150);
    if let Some(b) = base {
        let bm: std::collections::BTreeSet<usize> = b.series.iter().map(|p| p.1).collect();
        for m in bm {
            chart
                .draw_series(DashedLineSeries::new(
                    line(b, m),
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(|e| err(e.to_string()))?;
        }
    }
    use crate::plot::Mark;
    let mut legend: Vec<(String, RGBAColor, Mark)> = Vec::new();
    let lines: Vec<(usize, Vec<(f64, f64)>)> = members.iter().map(|&m| (m, line(r, m))).collect();
    for (i, (m, pts)) in lines.iter().enumerate() {
        crate::plot::member_line(&mut chart, pts, i, lines.len()).map_err(err)?;
        legend.push((
            format!("member {m}"),
            crate::plot::color(i),
            Mark::Member(i),
        ));
    }
    if base.is_some() {
        legend.push(("RAID 5 (dashed)".into(), grey.to_rgba(), Mark::Dash));
    }
    // Markers: x for a wear-out, o for a scheduled replacement, triangle for a role move.
    let at = |e: &sim::SimEvent| (e.day / 365.25, e.wear_pct);
    let red = RED.to_rgba();
    let blue = BLUE.to_rgba();
    let green = RGBColor(0, 140, 0).to_rgba();
    chart
        .draw_series(
            r.events
                .iter()
                .filter(|e| e.kind == "wear-out")
                .map(|e| Cross::new(at(e), 6, red.stroke_width(2))),
        )
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(
            r.events
                .iter()
                .filter(|e| e.kind == "replacement")
                .map(|e| Circle::new(at(e), 5, blue.stroke_width(2))),
        )
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(
            r.events
                .iter()
                .filter(|e| e.kind == "reshuffle")
                .map(|e| TriangleMarker::new(at(e), 6, green.filled())),
        )
        .map_err(|e| err(e.to_string()))?;
    legend.push(("wear-out (replaced)".into(), red, Mark::Cross));
    legend.push(("scheduled replacement".into(), blue, Mark::Circle));
    legend.push(("parity-heavy role moves".into(), green, Mark::Triangle));
    if let Some(note) = crate::plot::coincide_note(&crate::plot::coinciding(&lines, 0.5), 0.5) {
        upper
            .draw(&Text::new(note, (70, 40), ("sans-serif", 13).into_font()))
            .map_err(|e| err(e.to_string()))?;
    }
    crate::plot::legend(&lower, &legend).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

fn summary(r: &SimResult) -> serde_json::Value {
    json!({
        "level": r.level,
        "weights": r.weights,
        "write_shares_per_user_byte": r.shares,
        "original_member_wearout_years": r.original_wearout_days.iter().map(|d| d.map(|d| d / 365.25)).collect::<Vec<_>>(),
        "first_gap_days": r.first_gap_days,
        "smallest_gap_days": r.smallest_gap_days,
        "events": r.events,
    })
}

/// Data bytes per parity byte an array has written (its measured mix), read without locks.
fn measured_mix(path: &std::path::Path) -> Result<f64> {
    let args = crate::cli::ArrayArgs {
        array: path.to_path_buf(),
        scan: Vec::new(),
        force_assemble: false,
    };
    let array = super::assemble_with(&args, false, true)?;
    let ms = array.members();
    let data: u64 = ms.iter().map(|m| m.wear.data_bytes).sum();
    let parity: u64 = ms.iter().map(|m| m.wear.parity_bytes).sum();
    if parity == 0 {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{} has written no parity yet (or is not a parity level): no mix to measure",
                path.display()
            ),
        ));
    }
    Ok(data as f64 / parity as f64)
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    let plan = a.plan.as_deref().map(read_plan).transpose()?;
    let measured = a.mix_of.as_deref().map(measured_mix).transpose()?;
    let workload = match (a.workload, measured, &plan) {
        (Some(w), _, _) => w,
        (None, Some(k), _) => Workload::DataPerParity(k),
        (None, None, Some(p)) => Workload::DataPerParity(p.k),
        (None, None, None) => Workload::Rand4k,
    };
    let workload_note = format!(
        "{}{}",
        workload.describe(),
        match (a.workload, measured, &plan) {
            (Some(_), _, _) => String::new(),
            (None, Some(_), _) => format!(
                " (measured on {})",
                a.mix_of
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""))
                    .display()
            ),
            (None, None, Some(_)) => " (default with --plan: the array's measured mix)".into(),
            (None, None, None) =>
                " (the default; give --workload or --mix-of for your traffic)".into(),
        }
    );
    let years = a.years.unwrap_or_else(|| {
        plan.as_ref().map_or(10.0, |p| {
            (p.horizon_days + p.target_gap_days).max(1.0) / 365.25
        })
    });
    let base_spec = match &plan {
        Some(p) => SimSpec {
            params: p.params.clone(),
            workload,
            endurance_bytes: p.fresh_endurance,
            capacity_bytes: p.capacity,
            // At the rate the schedule was planned for, the replay reproduces the plan; the
            // model's replays below draw the measured rate instead.
            user_bytes_per_day: p.planned_user_bytes_per_day,
            years,
            replace_at_pct: a.replace_at,
            reshuffle: p.reshuffle && !a.keep_roles,
            start: p.start.clone(),
            schedule: p.schedule.clone(),
        },
        None => {
            let (level, members) = (a.level.expect("clap"), a.members.expect("clap"));
            let weights = match (level, &a.skew) {
                (Level::F1, Some(w)) => Some(w.clone()),
                (Level::F1, None) => Some(f1_weights(members, 0, 1)),
                (_, Some(_)) => {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        "--skew applies to --level f1",
                    ))
                }
                _ => None,
            };
            let mut params = LayoutParams::with_defaults(level, members, 65536);
            if let Some(w) = weights {
                params.weights = w;
            }
            SimSpec {
                params,
                workload,
                endurance_bytes: a.endurance.expect("clap") * 1e12,
                capacity_bytes: a.capacity as f64,
                user_bytes_per_day: a.rate.expect("clap") * 1e9,
                years,
                replace_at_pct: a.replace_at,
                reshuffle: !a.keep_roles,
                start: vec![],
                schedule: vec![],
            }
        }
    };
    let main = sim::simulate(&base_spec)?;
    let baseline = if base_spec.params.level == Level::Raid5 && plan.is_none() {
        None
    } else {
        let mut b = base_spec.clone();
        b.params = LayoutParams::with_defaults(
            Level::Raid5,
            base_spec.params.members,
            base_spec.params.chunk_bytes,
        );
        b.schedule = vec![];
        Some(sim::simulate(&b)?)
    };
    let replay = match &plan {
        None => None,
        Some(p) => {
            let got = sim::smallest_gap_of_first(&main, p.count);
            let diff = match (got, p.promised_gap_days) {
                (Some(g), Some(w)) if w > 0.0 => Some((g - w) / w * 100.0),
                _ => None,
            };
            // The model's replays: the measured rate with its error drawn, the schedule kept
            // (replacements at their planned wear).
            let model = if p.rate_rel_se > 0.0 {
                let measured = SimSpec {
                    user_bytes_per_day: p.user_bytes_per_day,
                    ..base_spec.clone()
                };
                let gaps =
                    sim::replays_with_rate_error(&measured, p.rate_rel_se, MODEL_REPLAYS, p.count)?;
                let mut g: Vec<f64> = gaps.iter().map(|x| x.unwrap_or(0.0)).collect();
                g.sort_by(f64::total_cmp);
                let q = |f: f64| g[((g.len() - 1) as f64 * f).round() as usize];
                let holds = g
                    .iter()
                    .filter(|&&x| x >= p.target_gap_days - raidcore::wear::plan::GAP_TOLERANCE_DAYS)
                    .count() as f64
                    / g.len() as f64;
                json!({
                    "replays": MODEL_REPLAYS,
                    "rate_relative_error": p.rate_rel_se,
                    "target_gap_days": p.target_gap_days,
                    "holds_fraction": holds,
                    "min_gap_days_p5": q(0.05),
                    "min_gap_days_p50": q(0.5),
                    "min_gap_days_p95": q(0.95),
                })
            } else {
                json!({"note": "the plan's rate is taken as exact (a --rate, or a history too short for its error): no replays with a drawn rate"})
            };
            Some(json!({
                "replacements_compared": p.count,
                "planned_user_bytes_per_day": p.planned_user_bytes_per_day,
                "promised_min_gap_days": p.promised_gap_days,
                "replayed_min_gap_days": got,
                "difference_percent": diff,
                "within_10_percent": diff.map(|d| d.abs() <= 10.0),
                "model": model,
            }))
        }
    };
    // Without the reshuffle, the members that are not parity-heavy take equal shares and, if
    // they start equal, wear out at the same instant: the gap between them is 0 by design.
    let keep_roles_note = (a.keep_roles && main.level == "f1").then(|| {
        "--keep-roles: the parity-heavy role stays in its slot, so every other member keeps an equal share and equal members wear out together (gap 0); the reshuffle moves the heavy role to the most-worn survivor to stagger them".to_string()
    });
    if let Some(p) = &a.plot {
        plot(
            p,
            &main,
            baseline.as_ref(),
            &format!(
                "{} {:?}: member wear over {:.1} years",
                main.level, main.weights, years
            ),
        )?;
    }
    if a.json {
        crate::output::print_json(&json!({
            "workload": workload_note,
            "simulation": summary(&main),
            "raid5_baseline": baseline.as_ref().map(summary),
            "replay": replay,
            "notes": keep_roles_note.iter().collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    println!("workload: {workload_note}");
    for (name, r) in
        std::iter::once(("simulated", &main)).chain(baseline.iter().map(|b| ("raid5 baseline", b)))
    {
        println!("{name}: {} weights {:?}", r.level, r.weights);
        let shares: Vec<String> = r.shares.iter().map(|s| format!("{s:.3}")).collect();
        println!("  bytes to each slot per user byte: {}", shares.join(" "));
        for (m, d) in r.original_wearout_days.iter().enumerate() {
            match d {
                Some(d) => println!(
                    "  member {m}: worn out or replaced after {:.2} years",
                    d / 365.25
                ),
                None => println!("  member {m}: outlives the {years:.1} years"),
            }
        }
        for e in r.events.iter().filter(|e| e.kind != "wear-out") {
            println!("  year {:.2}: {}", e.day / 365.25, e.note);
        }
        match (r.first_gap_days, r.smallest_gap_days) {
            (Some(f), Some(s)) => println!("  gap between the first two wear-outs or replacements: {f:.1} days; smallest gap between two: {s:.1} days"),
            _ => println!("  fewer than two wear-outs in {years:.1} years"),
        }
    }
    if let Some(r) = &replay {
        println!(
            "replay of the plan: smallest gap over its {} replacements {} days, promised {} ({})",
            r["replacements_compared"],
            r["replayed_min_gap_days"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.1}")),
            r["promised_min_gap_days"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.1}")),
            r["difference_percent"]
                .as_f64()
                .map_or("no comparison".into(), |x| format!("{x:+.1}%"))
        );
        let m = &r["model"];
        match m["holds_fraction"].as_f64() {
            Some(h) => println!(
                "replayed {} times with the rate drawn from its measured error ({:.1} %): the {:.0}-day gap holds in {:.1} % of them; smallest gap 5th/50th/95th percentile {:.0} / {:.0} / {:.0} days",
                m["replays"],
                m["rate_relative_error"].as_f64().unwrap_or(0.0) * 100.0,
                m["target_gap_days"].as_f64().unwrap_or(0.0),
                h * 100.0,
                m["min_gap_days_p5"].as_f64().unwrap_or(0.0),
                m["min_gap_days_p50"].as_f64().unwrap_or(0.0),
                m["min_gap_days_p95"].as_f64().unwrap_or(0.0),
            ),
            None => println!("note: {}", m["note"].as_str().unwrap_or("")),
        }
    }
    if let Some(n) = keep_roles_note {
        println!("note: {n}");
    }
    Ok(ExitCode::SUCCESS)
}
