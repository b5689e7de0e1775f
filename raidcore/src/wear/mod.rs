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
    /// Of those, data and parity bytes. Zero means "not given": all of `array_bytes` counts as
    /// data and parity.
    pub user_bytes: u64,
    pub history: Vec<WearSample>,
    /// Rated endurance in bytes, when given at create or add.
    pub rated_endurance: Option<u64>,
    /// SMART percent used now, when known (a whole number on every drive seen so far).
    pub smart_pct: Option<f64>,
    /// SMART host bytes written over the drive's life, when known.
    pub smart_host_bytes: Option<u64>,
}

/// One member's projection. Every figure of remaining life comes from this one model, shared
/// by `wear`, `wear --check` and `wear plan`: wear now (SMART's own percentage first, else
/// bytes over endurance), remaining bytes = endurance x (1 - wear), wear-out = remaining bytes
/// over the write rate; with a range where the inputs are uncertain.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Projection {
    /// Write rate from the history window, bytes per day, one-off bytes left out.
    pub rate_bytes_per_day: Option<f64>,
    /// Bytes in the window taken for one-offs (rebuilds) and left out of the rate.
    pub one_off_bytes: u64,
    /// The rate within two standard errors of its least-squares fit (three samples or more).
    pub rate_range: Option<(f64, f64)>,
    pub endurance_bytes: Option<u64>,
    /// Endurance inferred from a SMART percentage is known only as well as that whole
    /// percentage: host bytes / (pct +- 0.5 %).
    pub endurance_range: Option<(u64, u64)>,
    /// "rated", "inferred from SMART ...", or "unknown".
    pub endurance_source: String,
    /// Percent of endurance used now.
    pub wear_pct: Option<f64>,
    pub wear_source: String,
    /// Endurance bytes left, as the model counts them.
    pub remaining_bytes: Option<f64>,
    /// Projected wear-out time (Unix seconds).
    pub wearout_time: Option<u64>,
    /// Earliest and latest wear-out the uncertain inputs allow.
    pub wearout_range: Option<(u64, u64)>,
    /// How the date was obtained, or why there is none ("insufficient history").
    pub method: String,
}

/// Least-squares slope of points and its standard error (None below three points).
fn slope_and_error(points: &[(f64, f64)]) -> Option<(f64, Option<f64>)> {
    let b = slope(points)?;
    if points.len() < 3 {
        return Some((b, None));
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let a = my - b * mx;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let rss: f64 = points.iter().map(|p| (p.1 - a - b * p.0).powi(2)).sum();
    Some((b, Some((rss / (n - 2.0) / sxx).sqrt())))
}

/// Cumulative bytes with one-off writes taken out: metadata and rebuild bytes come as one
/// counter in the history, and a rebuild writes a whole member at once. An interval's
/// metadata-and-rebuild increment above the (lower) median of all intervals' is a one-off: its
/// excess is left out of every later point. Returns the points and the bytes left out.
fn without_one_offs(raw: &[(f64, f64, f64)]) -> (Vec<(f64, f64)>, f64) {
    let Some(first) = raw.first() else {
        return (Vec::new(), 0.0);
    };
    let mut incs: Vec<f64> = raw.windows(2).map(|w| (w[1].2 - w[0].2).max(0.0)).collect();
    incs.sort_by(f64::total_cmp);
    let allowance = incs
        .get(incs.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0.0);
    let mut out = vec![(first.0, first.1 + first.2)];
    let mut acc = first.1 + first.2;
    let mut dropped = 0.0;
    for w in raw.windows(2) {
        let d_user = (w[1].1 - w[0].1).max(0.0);
        let d_other = (w[1].2 - w[0].2).max(0.0);
        let kept = d_other.min(allowance);
        dropped += d_other - kept;
        acc += d_user + kept;
        out.push((w[1].0, acc));
    }
    (out, dropped)
}

/// Projects when a member wears out: write rate by least squares over the bytes of the history
/// within `window_days` (plus the current counters), one-offs such as rebuilds left out;
/// remaining endurance over the rate. Endurance is the rated figure, else inferred from SMART (host bytes /
/// percent used); without either, a SMART percent-used trend is extrapolated to 100 %.
pub fn project(now: u64, m: &MemberWearInput, window_days: f64) -> Projection {
    let mut p = Projection::default();
    let since = now as f64 - window_days * DAY;
    let user_now = if m.user_bytes > 0 {
        m.user_bytes
    } else {
        m.array_bytes
    };
    // (time, data + parity, metadata + rebuild) within the window, then now.
    let mut raw: Vec<(f64, f64, f64)> = m
        .history
        .iter()
        .filter(|s| s.time as f64 >= since && s.time <= now)
        .map(|s| {
            (
                s.time as f64,
                (s.data_bytes + s.parity_bytes) as f64,
                s.other_bytes as f64,
            )
        })
        .collect();
    if raw.last().is_none_or(|l| l.0 < now as f64) {
        raw.push((
            now as f64,
            user_now as f64,
            m.array_bytes.saturating_sub(user_now) as f64,
        ));
    }
    let (pts, one_off) = without_one_offs(&raw);
    p.one_off_bytes = one_off as u64;
    let span = pts.last().map(|l| l.0).unwrap_or(0.0) - pts.first().map(|f| f.0).unwrap_or(0.0);
    if span >= DAY {
        if let Some((b, se)) = slope_and_error(&pts) {
            let r = (b * DAY).max(0.0);
            p.rate_bytes_per_day = Some(r);
            p.rate_range = se.map(|se| ((r - 2.0 * se * DAY).max(0.0), r + 2.0 * se * DAY));
        }
    }
    // Endurance.
    match (m.rated_endurance, m.smart_host_bytes, m.smart_pct) {
        (Some(e), _, _) => {
            p.endurance_bytes = Some(e);
            p.endurance_source = "rated".into();
        }
        (None, Some(h), Some(pct)) if pct >= 1.0 => {
            p.endurance_bytes = Some((h as f64 / (pct / 100.0)) as u64);
            let lo = (h as f64 / ((pct + 0.5) / 100.0)) as u64;
            let hi = (h as f64 / ((pct - 0.5) / 100.0)) as u64;
            p.endurance_range = Some((lo, hi));
            p.endurance_source = format!(
                "inferred from SMART: {h} host bytes at {pct}% used (between {lo} and {hi}: a whole percentage is +-0.5)"
            );
        }
        _ => p.endurance_source = "unknown".into(),
    }
    // Wear now: SMART's own figure first, else our bytes (or SMART host bytes) over endurance.
    let used_bytes = m.smart_host_bytes.unwrap_or(m.array_bytes);
    // Remaining share of endurance, with its range.
    let mut left: Option<(f64, f64, f64)> = None;
    match (m.smart_pct, p.endurance_bytes) {
        (Some(pct), _) => {
            p.wear_pct = Some(pct);
            p.wear_source = "SMART".into();
            let f = |x: f64| (1.0 - x / 100.0).max(0.0);
            left = Some((f(pct + 0.5), f(pct), f((pct - 0.5).max(0.0))));
        }
        (None, Some(e)) if e > 0 => {
            let w = used_bytes as f64 * 100.0 / e as f64;
            p.wear_pct = Some(w);
            p.wear_source = if m.smart_host_bytes.is_some() {
                "SMART host bytes / endurance"
            } else {
                "array bytes / endurance"
            }
            .into();
            let f = (1.0 - w / 100.0).max(0.0);
            left = Some((f, f, f));
        }
        _ => p.wear_source = "unknown".into(),
    }
    let samples = pts.len();
    match (p.rate_bytes_per_day, p.endurance_bytes, left) {
        (None, _, _) => {
            p.method = "insufficient history (need samples spanning at least a day)".into()
        }
        (Some(r), Some(e), Some((f_lo, f, f_hi))) if r > 0.0 => {
            let (e_lo, e_hi) = p.endurance_range.unwrap_or((e, e));
            let remaining = e as f64 * f;
            p.remaining_bytes = Some(remaining);
            let at = |bytes: f64, rate: f64| now + (bytes / rate.max(1e-9) * DAY).round() as u64;
            p.wearout_time = Some(at(remaining, r));
            let (r_lo, r_hi) = p.rate_range.unwrap_or((r, r));
            // With a rate range reaching zero the latest wear-out is unbounded: cap it at a
            // century rather than print a meaningless date.
            let latest = if r_lo > 0.0 {
                at(e_hi as f64 * f_hi, r_lo)
            } else {
                now + (36_525.0 * DAY) as u64
            };
            p.wearout_range = Some((at(e_lo as f64 * f_lo, r_hi), latest));
            p.method = format!(
                "least squares over {samples} samples in {:.0} days{}, {} endurance, wear {}",
                span / DAY,
                if p.one_off_bytes > 0 {
                    format!(
                        " ({} one-off bytes, such as a rebuild, left out)",
                        p.one_off_bytes
                    )
                } else {
                    String::new()
                },
                p.endurance_source,
                p.wear_source
            );
        }
        (Some(_), Some(_), _) => p.method = "no writes in the window".into(),
        (Some(_), None, _) => {
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

/// The probability that, within `horizon_days` of `now`, a second member wears out within
/// `window_days` of the first: each member's wear-out drawn uniformly from its range (the
/// projections give a range, not a distribution; uniform is the plainest reading of one),
/// 20,000 draws from a fixed seed. Members without a range do not count; fewer than two: 0.
pub fn collision_risk(now: u64, ranges: &[(u64, u64)], window_days: f64, horizon_days: f64) -> f64 {
    if ranges.len() < 2 {
        return 0.0;
    }
    const DRAWS: usize = 20_000;
    let mut rng = crate::rng::SplitMix64(0x00c0_111d);
    let horizon = now as f64 + horizon_days * DAY;
    let window = window_days * DAY;
    let mut hits = 0usize;
    let mut t = vec![0.0f64; ranges.len()];
    for _ in 0..DRAWS {
        for (x, &(lo, hi)) in t.iter_mut().zip(ranges) {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            *x = lo as f64 + u * (hi.max(lo) - lo) as f64;
        }
        t.sort_by(f64::total_cmp);
        if t[0] <= horizon && t[1] - t[0] <= window {
            hits += 1;
        }
    }
    hits as f64 / DRAWS as f64
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
            ..Default::default()
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
    fn one_model_gives_wear_remaining_life_and_date_alike() {
        // A P4510-like drive: 73 % used by SMART, rated 1920 TB, host bytes above the rating
        // (drives exceed their rating). Remaining life follows SMART's own figure, not the
        // host bytes: 27 % of 1920 TB at 1 TB a day is 518 days, never "0 days".
        let history: Vec<WearSample> = (0..=10).map(|d| sample(d, d * 1_000_000_000_000)).collect();
        let m = MemberWearInput {
            array_bytes: 10_000_000_000_000,
            history,
            rated_endurance: Some(1_920_000_000_000_000),
            smart_pct: Some(73.0),
            smart_host_bytes: Some(2_000_000_000_000_000),
            ..Default::default()
        };
        let p = project(10 * 86_400, &m, 30.0);
        assert_eq!(p.wear_pct, Some(73.0));
        let rem = p.remaining_bytes.unwrap();
        assert!((rem - 0.27 * 1.92e15).abs() < 1e6, "{rem}");
        let days = (p.wearout_time.unwrap() - 10 * 86_400) as f64 / 86_400.0;
        assert!((days - 518.4).abs() < 0.5, "{days}");
        let (lo, hi) = p.wearout_range.unwrap();
        assert!(
            lo < p.wearout_time.unwrap() && p.wearout_time.unwrap() < hi,
            "{p:?}"
        );
    }

    #[test]
    fn endurance_from_a_small_smart_percentage_is_a_wide_range() {
        let m = MemberWearInput {
            array_bytes: 5,
            smart_pct: Some(2.0),
            smart_host_bytes: Some(20_000_000_000_000),
            ..Default::default()
        };
        let p = project(1_000_000, &m, 30.0);
        let (lo, hi) = p.endurance_range.unwrap();
        // 20 TB at 1.5-2.5 %: 800 TB to 1333 TB around 1000 TB.
        assert_eq!(p.endurance_bytes, Some(1_000_000_000_000_000));
        assert_eq!((lo, hi), (800_000_000_000_000, 1_333_333_333_333_333));
        assert!(
            p.endurance_source.contains("+-0.5"),
            "{}",
            p.endurance_source
        );
    }

    #[test]
    fn a_rebuild_does_not_raise_the_fitted_rate() {
        // 10 GB/day of data for 30 days; on day 15 a rebuild writes 1 TB to this member.
        let history: Vec<WearSample> = (0..=30)
            .map(|d| WearSample {
                other_bytes: if d >= 15 { 1_000_000_000_000 } else { 0 },
                ..sample(d, d * 10_000_000_000)
            })
            .collect();
        let m = MemberWearInput {
            array_bytes: 300_000_000_000 + 1_000_000_000_000,
            user_bytes: 300_000_000_000,
            history,
            rated_endurance: Some(3_000_000_000_000_000),
            ..Default::default()
        };
        let p = project(30 * 86_400, &m, 30.0);
        let r = p.rate_bytes_per_day.unwrap();
        assert!((r - 1e10).abs() < 1e6, "{r}");
        assert_eq!(p.one_off_bytes, 1_000_000_000_000);
        assert!(p.method.contains("one-off"), "{}", p.method);
        let (lo, hi) = p.rate_range.unwrap();
        assert!(
            lo <= r && r <= hi && hi - lo < 1e6,
            "an exact line has no spread: {lo} {hi}"
        );
    }

    #[test]
    fn collision_risk_is_zero_alone_and_rises_as_projections_converge() {
        let d = 86_400u64;
        assert_eq!(collision_risk(0, &[(100 * d, 200 * d)], 30.0, 3650.0), 0.0);
        assert_eq!(collision_risk(0, &[], 30.0, 3650.0), 0.0);
        let mut last = -1.0;
        for apart in [1000u64, 400, 200, 100, 50, 0] {
            let r = collision_risk(
                0,
                &[(500 * d, 700 * d), ((500 + apart) * d, (700 + apart) * d)],
                30.0,
                3650.0,
            );
            assert!(r >= last, "{apart} days apart: {r} after {last}");
            last = r;
        }
        assert!(
            last > 0.2,
            "identical ranges of 200 days, 30-day window: {last}"
        );
        // Far beyond the horizon: no risk within it.
        assert_eq!(
            collision_risk(
                0,
                &[(5000 * d, 5001 * d), (5000 * d, 5001 * d)],
                30.0,
                365.0
            ),
            0.0
        );
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
