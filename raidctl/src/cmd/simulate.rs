//! `raidctl simulate`: years of wear in seconds. The real layout and accounting measure each
//! slot's write share under the workload; the simulator plays it forward with replacements and
//! the reshuffle, next to plain RAID5 on the same workload; `--plot` draws an SVG.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use plotters::prelude::*;
use raidcore::layout::{f1_weights, LayoutParams, Level};
use raidcore::wear::sim::{self, SimResult, SimSpec, Workload};
use raidcore::{Error, ErrorKind, Result};
use serde_json::json;

use crate::units::parse_size;

/// Simulate member wear over years for a level, workload and write rate
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// RAID level: 0, 1, 5, 6, 10 or f1
    #[arg(long, value_parser = |s: &str| Level::parse(s).map_err(|e| e.to_string()))]
    pub level: Level,
    /// Number of members
    #[arg(long)]
    pub members: usize,
    /// Parity weights (f1)
    #[arg(long, value_delimiter = ',', value_name = "W0,W1,..")]
    pub skew: Option<Vec<u32>>,
    /// Rated endurance of each member in terabytes written
    #[arg(long, value_name = "TBW")]
    pub endurance: f64,
    /// Member capacity (a rebuild writes this much)
    #[arg(long, default_value = "1T", value_parser = parse_size)]
    pub capacity: u64,
    /// rand4k, seq, or mix:PCT (percent of bytes as random 4 KiB writes)
    #[arg(long, default_value = "rand4k", value_parser = |s: &str| Workload::parse(s).map_err(|e| e.to_string()))]
    pub workload: Workload,
    /// User writes per day in GB (10^9 bytes)
    #[arg(long, value_name = "GB/DAY")]
    pub rate: f64,
    /// Years to simulate
    #[arg(long, default_value_t = 10.0)]
    pub years: f64,
    /// Replace a member when it reaches this percent of its endurance
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

fn spec(a: &SimulateArgs, level: Level, weights: Option<Vec<u32>>) -> Result<SimSpec> {
    let mut params = LayoutParams::with_defaults(level, a.members, 65536);
    if let Some(w) = weights {
        params.weights = w;
    }
    Ok(SimSpec {
        params,
        workload: a.workload,
        endurance_bytes: a.endurance * 1e12,
        capacity_bytes: a.capacity as f64,
        user_bytes_per_day: a.rate * 1e9,
        years: a.years,
        replace_at_pct: a.replace_at,
        reshuffle: !a.keep_roles,
    })
}

fn plot(path: &std::path::Path, r: &SimResult, title: &str) -> Result<()> {
    let err = |e: String| Error::new(ErrorKind::Io, format!("plotting {}: {e}", path.display()));
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let max_day = r.series.iter().map(|p| p.0).fold(1.0, f64::max);
    let max_pct = r.series.iter().map(|p| p.2).fold(100.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
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
    let members: std::collections::BTreeSet<usize> = r.series.iter().map(|p| p.1).collect();
    for (i, m) in members.iter().enumerate() {
        let pts: Vec<(f64, f64)> = r
            .series
            .iter()
            .filter(|p| p.1 == *m)
            .map(|p| (p.0 / 365.25, p.2))
            .collect();
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| err(e.to_string()))?
            .label(format!("member {m}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(e.to_string()))?;
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

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    let weights = match (a.level, &a.skew) {
        (Level::F1, Some(w)) => Some(w.clone()),
        (Level::F1, None) => Some(f1_weights(a.members, 0, 1)),
        (_, Some(_)) => {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--skew applies to --level f1",
            ))
        }
        _ => None,
    };
    let main = sim::simulate(&spec(&a, a.level, weights)?)?;
    let baseline = if a.level == Level::Raid5 {
        None
    } else {
        Some(sim::simulate(&spec(&a, Level::Raid5, None)?)?)
    };
    if let Some(p) = &a.plot {
        plot(
            p,
            &main,
            &format!(
                "{} {:?}: member wear over {} years",
                main.level, main.weights, a.years
            ),
        )?;
    }
    if a.json {
        crate::output::print_json(
            &json!({"simulation": summary(&main), "raid5_baseline": baseline.as_ref().map(summary)}),
        );
        return Ok(ExitCode::SUCCESS);
    }
    for (name, r) in
        std::iter::once(("simulated", &main)).chain(baseline.iter().map(|b| ("raid5 baseline", b)))
    {
        println!("{name}: {} weights {:?}", r.level, r.weights);
        let shares: Vec<String> = r.shares.iter().map(|s| format!("{s:.3}")).collect();
        println!("  bytes to each slot per user byte: {}", shares.join(" "));
        for (m, d) in r.original_wearout_days.iter().enumerate() {
            match d {
                Some(d) => println!("  member {m}: wears out after {:.2} years", d / 365.25),
                None => println!("  member {m}: outlives the {} years", a.years),
            }
        }
        for e in r.events.iter().filter(|e| e.kind == "reshuffle") {
            println!("  year {:.2}: {}", e.day / 365.25, e.note);
        }
        match (r.first_gap_days, r.smallest_gap_days) {
            (Some(f), Some(s)) => println!("  gap between the first two wear-outs: {f:.0} days; smallest gap between two wear-outs: {s:.0} days"),
            _ => println!("  fewer than two wear-outs in {} years", a.years),
        }
    }
    Ok(ExitCode::SUCCESS)
}
