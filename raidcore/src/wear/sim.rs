//! Lifetime simulator: measures each slot's share of member writes by running a sampled
//! workload through the real array engine (layout, write paths and accounting) over memory
//! members, then plays those shares forward day by day at the given write rate: members wear
//! out, are replaced (and rebuilt, which costs a full member write), and in skewed layouts the
//! parity-heavy role moves to the most-worn survivor (Diff-RAID's age-driven reshuffle).

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::array::{Array, CreateSpec};
use crate::device::{MemMember, Member};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{Layout, LayoutParams, Level};

/// The write pattern to sample.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Workload {
    /// Random 4 KiB writes.
    Rand4k,
    /// Sequential 1 MiB writes.
    Seq,
    /// This fraction of the bytes as random 4 KiB writes, the rest sequential.
    Mix(f64),
    /// A measured mix given as data bytes per parity byte (an array's, from `wear plan`):
    /// the shares follow from the layout's formula, no engine run.
    DataPerParity(f64),
}

impl Workload {
    /// "rand4k", "seq", "mix:PCT" (percent random) or "k:K" (data bytes per parity byte).
    pub fn parse(s: &str) -> Result<Workload> {
        match s {
            "rand4k" => Ok(Workload::Rand4k),
            "seq" => Ok(Workload::Seq),
            _ if s.starts_with("k:") => s[2..]
                .parse::<f64>()
                .ok()
                .filter(|k| *k > 0.0 && k.is_finite())
                .map(Workload::DataPerParity)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidInput,
                        format!("{s:?}: k:K takes data bytes per parity byte, above 0"),
                    )
                }),
            _ => {
                let pct = s
                    .strip_prefix("mix:")
                    .and_then(|p| p.parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p));
                pct.map(|p| Workload::Mix(p / 100.0)).ok_or_else(|| {
                    Error::new(ErrorKind::InvalidInput, format!("unknown workload {s:?}: use rand4k, seq, mix:PCT (percent random 4K) or k:K (data bytes per parity byte)"))
                })
            }
        }
    }

    /// What the workload is, in words.
    pub fn describe(&self) -> String {
        match self {
            Workload::Rand4k => "rand4k: every byte as random 4 KiB writes (F1's best case)".into(),
            Workload::Seq => "seq: sequential 1 MiB writes".into(),
            Workload::Mix(f) => format!(
                "mix:{}: {}% of bytes as random 4 KiB writes, the rest sequential 1 MiB",
                f * 100.0,
                f * 100.0
            ),
            Workload::DataPerParity(k) => {
                format!("k:{k}: a measured mix of {k:.3} data bytes per parity byte")
            }
        }
    }
}

/// Bytes written to each slot's member per user byte: the total and the data/parity mix
/// measured through the real engine, split over the members as the layout does exactly.
pub fn measure_shares(params: &LayoutParams, workload: Workload) -> Result<Vec<f64>> {
    let layout = Layout::new(params)?;
    if let Workload::DataPerParity(k) = workload {
        if layout.parity_count() != 1 {
            bail!(
                InvalidInput,
                "k:K describes single-parity levels (raid5, f1), not {}",
                layout.level().name()
            );
        }
        return Ok(super::plan::slot_bytes_per_user_byte(layout.weights(), k));
    }
    let member_bytes = 48u64 << 20;
    let members: Vec<(PathBuf, Arc<dyn Member>)> = (0..params.members)
        .map(|i| {
            (
                PathBuf::from(format!("sim{i}")),
                Arc::new(MemMember::new(member_bytes)) as Arc<dyn Member>,
            )
        })
        .collect();
    let spec = CreateSpec {
        name: "sim".into(),
        layout: params.clone(),
        overprovision_pct: 0.0,
        endurance_bytes: vec![],
        history_interval: crate::format::DEFAULT_HISTORY_INTERVAL,
        checksums: None,
        bitmap_chunk: None,
    };
    let array = Array::create_on(members, &spec, &mut |_, _| {})?;
    let before: Vec<u64> = array
        .members()
        .iter()
        .map(|m| m.wear.data_bytes + m.wear.parity_bytes)
        .collect();
    let size = array.size();
    let random_fraction = match workload {
        Workload::Rand4k => 1.0,
        Workload::Seq => 0.0,
        Workload::Mix(f) => f,
        Workload::DataPerParity(_) => unreachable!("handled above"),
    };
    let total: u64 = 96 << 20;
    let small = vec![0x5au8; 4096];
    let big = vec![0xa5u8; 1 << 20];
    let mut rng = crate::rng::SplitMix64(42);
    let (mut rand_bytes, mut seq_bytes, mut seq_pos) = (0u64, 0u64, 0u64);
    while rand_bytes + seq_bytes < total {
        let want_random =
            (rand_bytes as f64) < random_fraction * (rand_bytes + seq_bytes + 1) as f64;
        if want_random && random_fraction > 0.0 || random_fraction >= 1.0 {
            let off = rng.below(size / 4096) * 4096;
            array.write(&small, off)?;
            rand_bytes += 4096;
        } else {
            if seq_pos + big.len() as u64 > size {
                seq_pos = 0;
            }
            array.write(&big, seq_pos)?;
            seq_pos += big.len() as u64;
            seq_bytes += big.len() as u64;
        }
    }
    let user = (rand_bytes + seq_bytes) as f64;
    // What the engine wrote in all (member bytes per user byte) and its mix (data bytes per
    // parity byte) are measured; how that splits over the members follows from the layout
    // exactly (the expected shares, which match the observed ones within a point). Sampled
    // shares carried the noise of where the random writes happened to land: RAID 5's equal
    // members wore out days apart instead of the same day.
    let ms = array.members();
    let data: u64 = ms.iter().map(|m| m.wear.data_bytes).sum();
    let parity: u64 = ms.iter().map(|m| m.wear.parity_bytes).sum();
    let total = (data + parity - before.iter().sum::<u64>()) as f64 / user;
    let n = params.members;
    Ok(if layout.parity_count() == 1 && parity > 0 {
        super::expected_shares(layout.weights(), data as f64 / parity as f64)
            .into_iter()
            .map(|x| x * total)
            .collect()
    } else {
        // Every other level spreads its writes evenly over the members.
        vec![total / n as f64; n]
    })
}

/// Where a member starts: its endurance and the bytes of it already used.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MemberStart {
    pub endurance_bytes: f64,
    pub used_bytes: f64,
}

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimSpec {
    pub params: LayoutParams,
    pub workload: Workload,
    /// Rated endurance of every member (and every replacement), bytes.
    pub endurance_bytes: f64,
    /// Member capacity: a rebuild or reshuffle writes this much to a member.
    pub capacity_bytes: f64,
    /// User writes per day, bytes.
    pub user_bytes_per_day: f64,
    pub years: f64,
    /// Members are replaced at this percent of endurance (unless the schedule says otherwise).
    pub replace_at_pct: f64,
    /// Move the parity-heavy role to the most-worn survivor on replacement (skewed layouts).
    pub reshuffle: bool,
    /// The members in slots 0..N at the start (empty: all new, `endurance_bytes` each).
    pub start: Vec<MemberStart>,
    /// Replace member m when it reaches this percent of its endurance (a plan's schedule).
    pub schedule: Vec<(usize, f64)>,
}

/// Something that happened in the simulation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimEvent {
    pub day: f64,
    pub slot: usize,
    /// Member number (0..N are the originals; replacements count on).
    pub member: usize,
    /// "wear-out" (replaced at --replace-at), "replacement" (early, as scheduled) or
    /// "reshuffle" (the parity-heavy role moved).
    pub kind: &'static str,
    /// Percent of its endurance the member had used.
    pub wear_pct: f64,
    pub note: String,
}

/// The simulation's result.
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    pub level: &'static str,
    pub weights: Vec<u32>,
    /// Bytes written to each slot's member per user byte (measured).
    pub shares: Vec<f64>,
    pub events: Vec<SimEvent>,
    /// Days from the start to each of the original members' wear-out or replacement (None:
    /// outlived the run).
    pub original_wearout_days: Vec<Option<f64>>,
    /// Days between the first two wear-outs or replacements of the run.
    pub first_gap_days: Option<f64>,
    /// Smallest gap between two consecutive wear-outs or replacements.
    pub smallest_gap_days: Option<f64>,
    /// (day, member, percent used) at the start, at every event and at the end: wear grows
    /// linearly in between, so these points draw it exactly.
    pub series: Vec<(f64, usize, f64)>,
}

/// One slot's member and when its wear was last anchored (wear is linear between events).
#[derive(Clone, Copy, Debug)]
struct Anchor {
    member: usize,
    day: f64,
    wear: f64,
}

/// Runs the simulation: event to event, each wear-out time computed from the rates exactly
/// (no day steps, so equal members wear out at the same instant and gaps carry no noise).
/// The smallest gap, in days, between consecutive wear-outs or replacements among the first
/// `count` of them (reshuffles are not wear-outs); None with fewer than two.
pub fn smallest_gap_of_first(r: &SimResult, count: usize) -> Option<f64> {
    let outs: Vec<f64> = r
        .events
        .iter()
        .filter(|e| e.kind != "reshuffle")
        .take(count)
        .map(|e| e.day)
        .collect();
    outs.windows(2).map(|w| w[1] - w[0]).reduce(f64::min)
}

/// `spec` replayed `draws` times with its write rate drawn from the measurement's error (a
/// normal factor of relative standard deviation `rel_se`, fixed seed): each replay's
/// [`smallest_gap_of_first`] `count`. This is how a plan is checked against the model rather
/// than against its own rate (issue 28: replaying the plan's own rate could not show a gap
/// that collapses when writes run faster).
pub fn replays_with_rate_error(
    spec: &SimSpec,
    rel_se: f64,
    draws: usize,
    count: usize,
) -> Result<Vec<Option<f64>>> {
    let mut rng = crate::rng::SplitMix64(0x5e1a_2028);
    let mut s = spec.clone();
    // Checked, and the shares measured (an engine run for most workloads), once.
    simulate(spec)?;
    let layout = Layout::new(&spec.params)?;
    let shares = measure_shares(&spec.params, spec.workload)?;
    let mut out = Vec::with_capacity(draws);
    for _ in 0..draws {
        let factor = (1.0 + rel_se * super::normal(&mut rng)).max(0.01);
        s.user_bytes_per_day = spec.user_bytes_per_day * factor;
        out.push(smallest_gap_of_first(
            &simulate_shares(&s, &layout, &shares),
            count,
        ));
    }
    Ok(out)
}

pub fn simulate(spec: &SimSpec) -> Result<SimResult> {
    // Written so that NaN fails too (a NaN endurance drew 80 MB of "NaN%").
    let positive = |x: f64| x > 0.0 && x.is_finite();
    let fine = positive(spec.endurance_bytes)
        && positive(spec.user_bytes_per_day)
        && positive(spec.capacity_bytes)
        && positive(spec.years)
        && spec.years <= 100.0;
    if !fine {
        bail!(
            InvalidInput,
            "endurance ({}), write rate ({} bytes a day), capacity ({}) and years ({}, at most 100) must be positive numbers",
            spec.endurance_bytes,
            spec.user_bytes_per_day,
            spec.capacity_bytes,
            spec.years
        );
    }
    match spec.workload {
        Workload::DataPerParity(k) if !positive(k) => {
            bail!(
                InvalidInput,
                "data bytes per parity byte {k} must be above 0"
            )
        }
        Workload::Mix(f) if !(0.0..=1.0).contains(&f) => {
            bail!(InvalidInput, "a mix of {f} is not a fraction from 0 to 1")
        }
        _ => {}
    }
    for (i, m) in spec.start.iter().enumerate() {
        if !(positive(m.endurance_bytes) && m.used_bytes >= 0.0 && m.used_bytes.is_finite()) {
            bail!(
                InvalidInput,
                "starting member {i}: endurance {} and used bytes {} must be positive numbers",
                m.endurance_bytes,
                m.used_bytes
            );
        }
    }
    if !(1.0..=100.0).contains(&spec.replace_at_pct) {
        bail!(
            InvalidInput,
            "--replace-at {} is not a percentage between 1 and 100",
            spec.replace_at_pct
        );
    }
    let layout = Layout::new(&spec.params)?;
    let n = layout.members();
    if !spec.start.is_empty() && spec.start.len() != n {
        bail!(
            InvalidInput,
            "{} starting members for {n} slots",
            spec.start.len()
        );
    }
    // (Members are numbered on through replacements: a number past them never comes up.)
    for &(m, pct) in &spec.schedule {
        if !(0.0..=100.0).contains(&pct) {
            bail!(
                InvalidInput,
                "scheduled replacement of member {m} at {pct}%: not a percentage from 0 to 100"
            );
        }
    }
    let shares = measure_shares(&spec.params, spec.workload)?;
    Ok(simulate_shares(spec, &layout, &shares))
}

/// The simulation proper, with `spec` checked and its shares measured.
fn simulate_shares(spec: &SimSpec, layout: &Layout, shares: &[f64]) -> SimResult {
    let n = layout.members();
    let heavy = (layout.level() == Level::F1)
        .then(|| super::plan::heavy_slot(layout.weights()))
        .flatten();
    let rate: Vec<f64> = shares.iter().map(|s| s * spec.user_bytes_per_day).collect();
    let mut endurance: Vec<f64> = (0..n)
        .map(|i| {
            spec.start
                .get(i)
                .map_or(spec.endurance_bytes, |s| s.endurance_bytes)
        })
        .collect();
    let mut slots: Vec<Anchor> = (0..n)
        .map(|i| Anchor {
            member: i,
            day: 0.0,
            wear: spec.start.get(i).map_or(0.0, |s| s.used_bytes),
        })
        .collect();
    let trigger_pct = |m: usize| {
        spec.schedule
            .iter()
            .find(|e| e.0 == m)
            .map_or(spec.replace_at_pct, |e| e.1)
    };
    let scheduled = |m: usize| spec.schedule.iter().any(|e| e.0 == m);
    let end = spec.years * 365.25;
    let mut events = Vec::new();
    let mut series = Vec::new();
    let mut original: Vec<Option<f64>> = vec![None; n];
    let pct_at = |a: &Anchor, s: usize, d: f64, endurance: &[f64]| {
        (a.wear + rate[s] * (d - a.day)) * 100.0 / endurance[a.member]
    };
    for (s, a) in slots.iter().enumerate() {
        series.push((0.0, a.member, pct_at(a, s, 0.0, &endurance)));
    }
    for _ in 0..100_000 {
        // Each slot's due time, from its anchor alone: ties between equal members are exact.
        let due: Vec<f64> = slots
            .iter()
            .enumerate()
            .map(|(s, a)| {
                let trig = endurance[a.member] * trigger_pct(a.member) / 100.0;
                a.day + (trig - a.wear).max(0.0) / rate[s].max(1e-12)
            })
            .collect();
        let slot = (0..n)
            .min_by(|&a, &b| due[a].total_cmp(&due[b]).then(a.cmp(&b)))
            .expect("members");
        let d = due[slot];
        if d > end {
            break;
        }
        for (s, a) in slots.iter().enumerate() {
            series.push((d, a.member, pct_at(a, s, d, &endurance)));
        }
        let m = slots[slot].member;
        let pct = pct_at(&slots[slot], slot, d, &endurance);
        let early = scheduled(m);
        events.push(SimEvent {
            day: d,
            slot,
            member: m,
            kind: if early { "replacement" } else { "wear-out" },
            wear_pct: pct,
            note: if early {
                format!("member {m} replaced as scheduled at {pct:.1}% in slot {slot}")
            } else {
                format!("member {m} reached {pct:.0}% in slot {slot}")
            },
        });
        if m < n {
            original[m] = Some(d);
        }
        let fresh = endurance.len();
        endurance.push(spec.endurance_bytes);
        let mut fresh_slot = slot;
        if spec.reshuffle && heavy == Some(slot) {
            let survivor = (0..n).filter(|&s| s != slot).max_by(|&a, &b| {
                pct_at(&slots[a], a, d, &endurance)
                    .total_cmp(&pct_at(&slots[b], b, d, &endurance))
                    .then(b.cmp(&a))
            });
            if let Some(s) = survivor {
                let x = slots[s].member;
                let before = pct_at(&slots[s], s, d, &endurance);
                // The survivor is rewritten as the heavy slot: one capacity.
                let wear = slots[s].wear + rate[s] * (d - slots[s].day) + spec.capacity_bytes;
                slots[slot] = Anchor {
                    member: x,
                    day: d,
                    wear,
                };
                series.push((d, x, wear * 100.0 / endurance[x]));
                fresh_slot = s;
                events.push(SimEvent {
                    day: d,
                    slot,
                    member: x,
                    kind: "reshuffle",
                    wear_pct: before,
                    note: format!("most-worn member {x} ({before:.1}%) takes the parity-heavy slot {slot}; new member {fresh} takes slot {s}"),
                });
            }
        }
        // The rebuild writes the whole new member.
        slots[fresh_slot] = Anchor {
            member: fresh,
            day: d,
            wear: spec.capacity_bytes,
        };
        series.push((d, fresh, spec.capacity_bytes * 100.0 / spec.endurance_bytes));
    }
    for (s, a) in slots.iter().enumerate() {
        series.push((end, a.member, pct_at(a, s, end, &endurance)));
    }
    let outs: Vec<f64> = events
        .iter()
        .filter(|e| e.kind != "reshuffle")
        .map(|e| e.day)
        .collect();
    let first_gap_days = (outs.len() >= 2).then(|| outs[1] - outs[0]);
    let smallest_gap_days = outs.windows(2).map(|w| w[1] - w[0]).reduce(f64::min);
    SimResult {
        level: layout.level().name(),
        weights: layout.weights().to_vec(),
        shares: shares.to_vec(),
        events,
        original_wearout_days: original,
        first_gap_days,
        smallest_gap_days,
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(level: Level, weights: Vec<u32>) -> SimSpec {
        let mut params = LayoutParams::with_defaults(level, 4, 65536);
        params.weights = weights;
        SimSpec {
            params,
            workload: Workload::Rand4k,
            endurance_bytes: 600e12,
            capacity_bytes: 1e12,
            user_bytes_per_day: 400e9,
            years: 15.0,
            replace_at_pct: 100.0,
            reshuffle: true,
            start: vec![],
            schedule: vec![],
        }
    }

    #[test]
    fn f1_separates_wear_outs_that_raid5_bunches() {
        let r5 = simulate(&spec(Level::Raid5, vec![1; 4])).unwrap();
        let f1 = simulate(&spec(Level::F1, vec![4, 1, 1, 1])).unwrap();
        // RAID5 spreads writes evenly: the four originals wear out within days of each other.
        let r5_days: Vec<f64> = r5
            .original_wearout_days
            .iter()
            .map(|d| d.unwrap())
            .collect();
        let spread = r5_days.iter().cloned().fold(f64::MIN, f64::max)
            - r5_days.iter().cloned().fold(f64::MAX, f64::min);
        assert!(spread < 60.0, "raid5 spread {spread}");
        assert!(
            f1.first_gap_days.unwrap() > 10.0 * r5.first_gap_days.unwrap().max(1.0),
            "f1 {:?} r5 {:?}",
            f1.first_gap_days,
            r5.first_gap_days
        );
        assert!(f1.events.iter().any(|e| e.kind == "reshuffle"));
        // Shares measured through the engine follow the blueprint's formula.
        let expect = super::super::expected_shares(&[4, 1, 1, 1], 1.0);
        let sum: f64 = f1.shares.iter().sum();
        for i in 0..4 {
            assert!(
                (f1.shares[i] / sum - expect[i]).abs() < 0.02,
                "{:?} vs {expect:?}",
                f1.shares
            );
        }
    }

    #[test]
    fn a_plan_replayed_on_its_own_mix_lands_on_its_days() {
        // The planner's schedule for an F1 fleet with one worn member, replayed by wear percent
        // with the same mix (k:K, no engine run): the same replacements on the same days.
        use super::super::plan::{schedule, Fleet};
        let k = 2.3;
        let f = Fleet {
            weights: vec![2, 1, 1, 1],
            k,
            user_bytes_per_day: 2.5e9,
            endurance: vec![1e12; 4],
            used: vec![0.0, 1e11, 0.0, 0.0],
            fresh_endurance: 1e12,
            capacity: 16e6,
            reshuffle: true,
        };
        let plan = schedule(&f, &f.weights, 250.0, 2000.0);
        assert!(plan.holds && plan.replacements.len() >= 4, "{plan:?}");
        let mut s = spec(Level::F1, vec![2, 1, 1, 1]);
        s.workload = Workload::DataPerParity(k);
        s.endurance_bytes = 1e12;
        s.capacity_bytes = 16e6;
        s.user_bytes_per_day = 2.5e9;
        s.years = 2000.0 / 365.25;
        s.start = (0..4)
            .map(|i| MemberStart {
                endurance_bytes: 1e12,
                used_bytes: f.used[i],
            })
            .collect();
        s.schedule = plan
            .replacements
            .iter()
            .filter(|r| r.days_early > 0.0)
            .map(|r| (r.member, r.wear_pct))
            .collect();
        let r = simulate(&s).unwrap();
        let days: Vec<(usize, f64)> = r
            .events
            .iter()
            .filter(|e| e.kind != "reshuffle")
            .map(|e| (e.member, e.day))
            .collect();
        assert!(days.len() >= plan.replacements.len(), "{days:?}");
        for (p, (m, d)) in plan.replacements.iter().zip(&days) {
            assert_eq!(p.member, *m, "{days:?} vs {plan:?}");
            assert!((p.day - d).abs() < 1e-6, "{days:?} vs {plan:?}");
        }
    }

    #[test]
    fn workloads_parse() {
        assert_eq!(Workload::parse("mix:30").unwrap(), Workload::Mix(0.3));
        assert!(Workload::parse("mix:300").is_err());
        assert!(Workload::parse("bursty").is_err());
        assert_eq!(
            Workload::parse("k:2.5").unwrap(),
            Workload::DataPerParity(2.5)
        );
        assert!(Workload::parse("k:0").is_err());
    }
}
