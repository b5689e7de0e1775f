//! `wear --plot FILE`: an SVG of a real array's wear, drawn from the report `wear --json`
//! prints: each member's recorded history (wear at every sample), its forecast to 100 % with
//! the range band the model states, wear-out markers, and the rebuild window after the first
//! wear-out (the collision threshold); members whose lines coincide are told apart and named.

use plotters::prelude::*;
use raidcore::wear::DAY;
use raidcore::{Error, ErrorKind, Result};
use serde_json::Value;

use crate::plot::{self, Mark};

/// One member's lines in days from now.
struct Lines {
    slot: u64,
    history: Vec<(f64, f64)>,
    forecast: Option<Forecast>,
}

/// A member's forecast, when its wear and wear-out are known.
#[derive(Clone, Copy)]
struct Forecast {
    /// Wear now, percent.
    now: f64,
    /// The projected wear-out, days from now (infinite past 9999).
    out: f64,
    /// Its range, earliest and latest, when the model states one.
    range: Option<(f64, f64)>,
}

fn member_lines(m: &Value, now: f64) -> Lines {
    let days = |t: f64| (t - now) / DAY;
    let history = m["history_wear_percent"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((days(p[0].as_f64()?), p[1].as_f64()?)))
        .collect();
    let range = m["projected_wearout_range_unix"]
        .as_array()
        .filter(|a| a.len() == 2)
        .map(|a| {
            let d = |v: &Value| v.as_f64().map_or(f64::INFINITY, days);
            (d(&a[0]), d(&a[1]))
        });
    let forecast = match (
        m["wear_percent"].as_f64(),
        m["projected_wearout_unix"].as_f64(),
    ) {
        (Some(w), Some(t)) => Some(Forecast {
            now: w,
            out: days(t),
            range,
        }),
        (Some(w), None) if m["projected_wearout_beyond_9999"] == true => Some(Forecast {
            now: w,
            out: f64::INFINITY,
            range,
        }),
        _ => None,
    };
    Lines {
        slot: m["slot"].as_u64().unwrap_or(0),
        history,
        forecast,
    }
}

/// Wear on the straight line from `w0` now to 100 % at day `out`, at day `x`.
fn wear_at(w0: f64, out: f64, x: f64) -> f64 {
    if out.is_finite() && out > 0.0 {
        w0 + (100.0 - w0) * x / out
    } else {
        w0
    }
}

/// Draws the report `r` (what `wear --json` prints) to `path`. Returns the note on coinciding
/// members, if any.
pub fn plot(path: &std::path::Path, r: &Value) -> Result<Option<String>> {
    let err = |e: String| Error::new(ErrorKind::Io, format!("plotting {}: {e}", path.display()));
    let now = r["generated_unix"].as_f64().unwrap_or(0.0);
    let horizon = r["collision_risk"]["horizon_days"]
        .as_f64()
        .unwrap_or(1826.0);
    let window = r["collision_threshold_days"].as_f64().unwrap_or(30.0);
    let members: Vec<Lines> = r["members"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| member_lines(m, now))
        .collect();
    if members
        .iter()
        .all(|m| m.history.is_empty() && m.forecast.is_none())
    {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "nothing to plot: no member has a known wear (give --endurance at create or add, or SMART data with --smart)",
        ));
    }
    // Days shown: the history, and ahead to the latest wear-out within the horizon.
    let x_min = members
        .iter()
        .flat_map(|m| m.history.iter().map(|p| p.0))
        .fold(-1.0f64, f64::min);
    let latest = members
        .iter()
        .filter_map(|m| m.forecast.map(|f| f.range.map_or(f.out, |r| r.1)))
        .filter(|d| d.is_finite())
        .fold(30.0f64, f64::max);
    let x_max = latest.min(horizon) * 1.05;
    let first_out = members
        .iter()
        .filter_map(|m| m.forecast.map(|f| f.out))
        .fold(f64::INFINITY, f64::min);
    // Each member's line: history, then the forecast clipped at the edge.
    let lines: Vec<(usize, Vec<(f64, f64)>)> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let mut pts = m.history.clone();
            if let Some(Forecast { now: w0, out, .. }) = m.forecast {
                // Sampled along its length, so that the staggered markers spread along it.
                let end = out.min(x_max);
                pts.extend((0..=48).map(|k| {
                    let x = end * k as f64 / 48.0;
                    (x, wear_at(w0, out, x))
                }));
            }
            (i, pts)
        })
        .collect();
    let y_max = lines
        .iter()
        .flat_map(|l| l.1.iter().map(|p| p.1))
        .fold(100.0f64, f64::max)
        * 1.05;
    let entries = members.len() + 3;
    let root = SVGBackend::new(path, (960, 540 + plot::legend_height(entries))).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (upper, lower) = root.split_vertically(540);
    let title = format!(
        "{} ({}): wear history and forecast",
        r["name"].as_str().unwrap_or(""),
        r["level"].as_str().unwrap_or("")
    );
    let mut chart = ChartBuilder::on(&upper)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x_min..x_max, 0f64..y_max)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("days from now")
        .y_desc("% of endurance used")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    let grey = RGBColor(120, 120, 120).to_rgba();
    let mut legend: Vec<(String, RGBAColor, Mark)> = Vec::new();
    if first_out < x_max {
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(first_out, 0.0), ((first_out + window).min(x_max), y_max)],
                grey.mix(0.15).filled(),
            )))
            .map_err(|e| err(e.to_string()))?;
        legend.push((
            format!("rebuild window ({window:.0} d)"),
            grey.mix(0.3),
            Mark::Band,
        ));
    }
    // Range bands first, lines over them.
    for (i, m) in members.iter().enumerate() {
        let Some(Forecast {
            now: w0,
            range: Some((lo, hi)),
            ..
        }) = m.forecast
        else {
            continue;
        };
        let (lo_end, hi_end) = (lo.min(x_max), hi.min(x_max));
        // Between the earliest line (capped at 100 %) and the latest, to the edge.
        let band = vec![
            (0.0, w0),
            (lo_end, wear_at(w0, lo, lo_end)),
            (hi_end, wear_at(w0, lo, hi_end).min(100.0)),
            (hi_end, wear_at(w0, hi, hi_end)),
        ];
        chart
            .draw_series(std::iter::once(Polygon::new(
                band,
                plot::color(i).mix(0.12).filled(),
            )))
            .map_err(|e| err(e.to_string()))?;
    }
    let n = lines.len();
    for (i, pts) in &lines {
        plot::member_line(&mut chart, pts, *i, n).map_err(err)?;
        legend.push((
            format!("slot {}", members[*i].slot),
            plot::color(*i),
            Mark::Member(*i),
        ));
    }
    let red = RED.to_rgba();
    chart
        .draw_series(
            members
                .iter()
                .filter_map(|m| m.forecast)
                .filter(|f| f.out <= x_max)
                .map(|f| Cross::new((f.out, 100.0), 6, red.stroke_width(2))),
        )
        .map_err(|e| err(e.to_string()))?;
    legend.push(("projected wear-out".into(), red, Mark::Cross));
    legend.push(("90 % range (shaded)".into(), grey.mix(0.3), Mark::Band));
    // Named by slot (a missing member leaves a gap in the slots).
    let by_slot: Vec<(usize, Vec<(f64, f64)>)> = lines
        .iter()
        .map(|(i, pts)| (members[*i].slot as usize, pts.clone()))
        .collect();
    let note = plot::coincide_note(&plot::coinciding(&by_slot, 0.5), 0.5);
    if let Some(note) = &note {
        upper
            .draw(&Text::new(
                note.clone(),
                (70, 40),
                ("sans-serif", 13).into_font(),
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    plot::legend(&lower, &legend).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(note)
}
