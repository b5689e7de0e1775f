//! Wear: SMART ingestion, write-rate and wear-out projection, expected versus observed skew,
//! the collision window, the parity-weight planner and the lifetime simulator. Pure analysis
//! over counters and histories; it never runs smartctl itself (the CLI does, tests use fixtures).

pub mod plan;
pub mod sim;
pub mod smart;

use serde::Serialize;

use crate::format::WearSample;

pub const DAY: f64 = 86_400.0;

/// Least-squares slope (y per x) of points; None with fewer than two distinct x.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    Some(sxy / sxx)
}

/// Inputs for one member's projection.
#[derive(Clone, Debug, Default)]
pub struct MemberWearInput {
    /// Bytes the array has written to the member (all kinds).
    pub array_bytes: u64,
    pub history: Vec<WearSample>,
    /// Rated endurance in bytes, when given at create or add.
    pub rated_endurance: Option<u64>,
    /// SMART percent used now, when known.
    pub smart_pct: Option<f64>,
    /// SMART host bytes written over the drive's life, when known.
    pub smart_host_bytes: Option<u64>,
}

/// One member's projection.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Projection {
    /// Write rate from the history window, bytes per day.
    pub rate_bytes_per_day: Option<f64>,
    pub endurance_bytes: Option<u64>,
    /// "rated", "inferred from SMART ...", or "unknown".
    pub endurance_source: String,
    /// Percent of endurance used now.
    pub wear_pct: Option<f64>,
    pub wear_source: String,
    /// Projected wear-out time (Unix seconds).
    pub wearout_time: Option<u64>,
    /// How the date was obtained, or why there is none ("insufficient history").
    pub method: String,
}

/// Projects when a member wears out: write rate by least squares over the history within
/// `window_days` (plus the current counters), remaining endurance / rate. Endurance is the
/// rated figure, else inferred from SMART (host bytes / percent used); without either, a
/// SMART percent-used trend is extrapolated to 100 %.
pub fn project(now: u64, m: &MemberWearInput, window_days: f64) -> Projection {
    let mut p = Projection::default();
    let since = now as f64 - window_days * DAY;
    let mut pts: Vec<(f64, f64)> = m
        .history
        .iter()
        .filter(|s| s.time as f64 >= since && s.time <= now)
        .map(|s| (s.time as f64, s.total() as f64))
        .collect();
    if pts.last().is_none_or(|l| l.0 < now as f64) {
        pts.push((now as f64, m.array_bytes as f64));
    }
    let span = pts.last().map(|l| l.0).unwrap_or(0.0) - pts.first().map(|f| f.0).unwrap_or(0.0);
    if span >= DAY {
        p.rate_bytes_per_day = slope(&pts).map(|s| (s * DAY).max(0.0));
    }
    // Endurance.
    match (m.rated_endurance, m.smart_host_bytes, m.smart_pct) {
        (Some(e), _, _) => {
            p.endurance_bytes = Some(e);
            p.endurance_source = "rated".into();
        }
        (None, Some(h), Some(pct)) if pct >= 1.0 => {
            p.endurance_bytes = Some((h as f64 / (pct / 100.0)) as u64);
            p.endurance_source = format!("inferred from SMART: {h} host bytes at {pct}% used");
        }
        _ => p.endurance_source = "unknown".into(),
    }
    // Wear now: SMART's own figure first, else our bytes (or SMART host bytes) over endurance.
    let used_bytes = m.smart_host_bytes.unwrap_or(m.array_bytes);
    match (m.smart_pct, p.endurance_bytes) {
        (Some(pct), _) => {
            p.wear_pct = Some(pct);
            p.wear_source = "SMART".into();
        }
        (None, Some(e)) if e > 0 => {
            p.wear_pct = Some(used_bytes as f64 * 100.0 / e as f64);
            p.wear_source = if m.smart_host_bytes.is_some() {
                "SMART host bytes / endurance"
            } else {
                "array bytes / endurance"
            }
            .into();
        }
        _ => p.wear_source = "unknown".into(),
    }
    let samples = pts.len();
    match (p.rate_bytes_per_day, p.endurance_bytes) {
        (None, _) => {
            p.method = "insufficient history (need samples spanning at least a day)".into()
        }
        (Some(r), Some(e)) if r > 0.0 => {
            let remaining = (e as f64 - used_bytes as f64).max(0.0);
            let days = remaining / r;
            p.wearout_time = Some(now + (days * DAY).round() as u64);
            p.method = format!(
                "least squares over {samples} samples in {:.0} days, {} endurance",
                span / DAY,
                p.endurance_source
            );
        }
        (Some(_), Some(_)) => p.method = "no writes in the window".into(),
        (Some(_), None) => {
            // SMART percent-used trend, when the history has it.
            let pct: Vec<(f64, f64)> = m
                .history
                .iter()
                .filter(|s| s.time as f64 >= since)
                .filter_map(|s| s.smart_used_pct.map(|v| (s.time as f64, v as f64)))
                .collect();
            match (slope(&pct), m.smart_pct.or(pct.last().map(|l| l.1))) {
                (Some(sl), Some(now_pct)) if sl > 0.0 => {
                    let days = (100.0 - now_pct).max(0.0) / (sl * DAY);
                    p.wearout_time = Some(now + (days * DAY).round() as u64);
                    p.method = format!("SMART percent-used trend over {} samples", pct.len());
                }
                _ => {
                    p.method =
                        "endurance unknown (give --endurance at create/add, or SMART data)".into()
                }
            }
        }
    }
    p
}

/// Expected share of chunk writes per member for parity weights `w` when a row write touches
/// `k` data chunks on average (ARCHITECTURE.md: member i receives p_i/k + (1-p_i)/(N-1) chunk
/// writes per user chunk), normalised to sum to 1.
pub fn expected_shares(weights: &[u32], k: f64) -> Vec<f64> {
    let n = weights.len() as f64;
    let l: f64 = weights.iter().map(|&w| w as f64).sum();
    let raw: Vec<f64> = weights
        .iter()
        .map(|&w| {
            let p = w as f64 / l;
            p / k + (1.0 - p) / (n - 1.0)
        })
        .collect();
    let sum: f64 = raw.iter().sum();
    raw.into_iter().map(|x| x / sum).collect()
}

/// Observed shares from per-member (data + parity) bytes.
pub fn observed_shares(bytes: &[u64]) -> Vec<f64> {
    let sum: u64 = bytes.iter().sum();
    bytes
        .iter()
        .map(|&b| if sum == 0 { 0.0 } else { b as f64 / sum as f64 })
        .collect()
}

/// Days between the two earliest projected wear-out times, if two are known.
pub fn collision_window_days(wearouts: &[Option<u64>]) -> Option<f64> {
    let mut t: Vec<u64> = wearouts.iter().flatten().copied().collect();
    t.sort_unstable();
    (t.len() >= 2).then(|| (t[1] - t[0]) as f64 / DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(day: u64, bytes: u64) -> WearSample {
        WearSample {
            time: day * 86_400,
            data_bytes: bytes,
            parity_bytes: 0,
            other_bytes: 0,
            smart_used_pct: None,
            smart_host_bytes: None,
        }
    }

    #[test]
    fn projection_matches_hand_computation() {
        // 10 GB/day for 10 days, 100 GB written, rated 1 TB: 900 GB left = 90 days after day 10.
        let history: Vec<WearSample> = (0..=10).map(|d| sample(d, d * 10_000_000_000)).collect();
        let m = MemberWearInput {
            array_bytes: 100_000_000_000,
            history,
            rated_endurance: Some(1_000_000_000_000),
            ..Default::default()
        };
        let p = project(10 * 86_400, &m, 30.0);
        assert!((p.rate_bytes_per_day.unwrap() - 1e10).abs() < 1.0);
        assert_eq!(p.wearout_time, Some(100 * 86_400));
        assert!((p.wear_pct.unwrap() - 10.0).abs() < 1e-9);
        // The window limits the fit: an old burst outside it does not count.
        let mut h2: Vec<WearSample> = vec![sample(0, 0), sample(1, 500_000_000_000)];
        h2.extend((40..=50).map(|d| sample(d, 500_000_000_000 + (d - 40) * 1_000_000_000)));
        let m2 = MemberWearInput {
            array_bytes: 510_000_000_000,
            history: h2,
            rated_endurance: Some(1_000_000_000_000),
            ..Default::default()
        };
        let p2 = project(50 * 86_400, &m2, 20.0);
        // 1 GB/day, 490 GB left: 490 days after day 50.
        assert_eq!(p2.wearout_time, Some(540 * 86_400));
    }

    #[test]
    fn smart_inference_and_insufficient_history() {
        let m = MemberWearInput {
            array_bytes: 5,
            history: vec![],
            rated_endurance: None,
            smart_pct: Some(20.0),
            smart_host_bytes: Some(60_000_000_000_000),
        };
        let p = project(1_000_000, &m, 30.0);
        assert_eq!(p.endurance_bytes, Some(300_000_000_000_000));
        assert_eq!(p.wear_pct, Some(20.0));
        assert!(p.method.starts_with("insufficient history"));
        assert_eq!(p.wearout_time, None);
        // SMART percent trend: 1 % per 10 days, at 40 % now -> 600 days.
        let history: Vec<WearSample> = (0..=4)
            .map(|i| WearSample {
                smart_used_pct: Some(36.0 + i as f32),
                ..sample(i * 10, i * 1000)
            })
            .collect();
        let m = MemberWearInput {
            array_bytes: 4000,
            history,
            smart_pct: Some(40.0),
            ..Default::default()
        };
        let p = project(40 * 86_400, &m, 100.0);
        assert_eq!(p.wearout_time, Some((40 + 600) * 86_400));
    }

    #[test]
    fn expected_shares_follow_the_blueprint() {
        // F1 (2,1,1,1), single-chunk writes: p = (.4,.2,.2,.2); raw = p + (1-p)/3.
        let s = expected_shares(&[2, 1, 1, 1], 1.0);
        let raw = [
            0.4 + 0.6 / 3.0,
            0.2 + 0.8 / 3.0,
            0.2 + 0.8 / 3.0,
            0.2 + 0.8 / 3.0,
        ];
        let sum: f64 = raw.iter().sum();
        for i in 0..4 {
            assert!((s[i] - raw[i] / sum).abs() < 1e-12);
        }
        // Full-row writes (k = N-1) are even whatever the weights.
        for x in expected_shares(&[16, 1, 1, 1, 1], 4.0) {
            assert!((x - 0.2).abs() < 1e-12);
        }
        assert_eq!(
            collision_window_days(&[Some(86_400 * 10), None, Some(86_400 * 3)]),
            Some(7.0)
        );
    }
}
