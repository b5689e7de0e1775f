//! The wear planner: what parity weights can and cannot do for an array's measured write mix,
//! and, when they cannot reach a target gap between wear-outs, a replacement schedule that
//! does. Pure maths over rates and remaining endurance (exact event times, no day steps); it
//! reads no array and the simulator replays its schedule independently.
//!
//! Model: with parity weights w (p_i = w_i / sum w) and k data bytes per parity byte written
//! (the measured mix), member i receives p_i/k + (1-p_i)/(N-1) bytes per user byte
//! (ARCHITECTURE.md, "expected write share"; the terms sum to 1 + 1/k). A member's rate is
//! that times the user write rate; its natural wear-out is remaining endurance / rate.

use serde::Serialize;

/// Gaps are exact differences of event times, up to floating point and the deadline repair's
/// convergence: a gap this much short of the target (under a tenth of a second) still holds.
pub const GAP_TOLERANCE_DAYS: f64 = 1e-6;

/// Everything the planner needs about the array, in bytes and days.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Parity weights per slot (all 1: RAID 5).
    pub weights: Vec<u32>,
    /// Data bytes per parity byte written (the measured mix).
    pub k: f64,
    /// User bytes written per day.
    pub user_bytes_per_day: f64,
    /// Endurance of the member in each slot now, bytes.
    pub endurance: Vec<f64>,
    /// Bytes of that endurance already used.
    pub used: Vec<f64>,
    /// Endurance of a replacement member, bytes.
    pub fresh_endurance: f64,
    /// What a rebuild writes to the new member (and a role move to the moved one), bytes.
    pub capacity: f64,
    /// Move the parity-heavy role to the most-worn survivor when its member is replaced.
    pub reshuffle: bool,
}

/// Member bytes per user byte for each slot (sums to 1 + 1/k).
pub fn slot_bytes_per_user_byte(weights: &[u32], k: f64) -> Vec<f64> {
    let n = weights.len() as f64;
    let l: f64 = weights.iter().map(|&w| w as f64).sum::<f64>().max(1.0);
    weights
        .iter()
        .map(|&w| {
            let p = w as f64 / l;
            p / k + (1.0 - p) / (n - 1.0)
        })
        .collect()
}

/// The slot holding the parity-heavy role: a unique largest weight above some other weight.
pub fn heavy_slot(weights: &[u32]) -> Option<usize> {
    let max = weights.iter().copied().max()?;
    (weights.iter().filter(|&&x| x == max).count() == 1 && weights.iter().any(|&x| x < max))
        .then(|| weights.iter().position(|&x| x == max).expect("max"))
}

impl Fleet {
    /// Bytes per day to each slot under weights `w`.
    pub fn rates(&self, w: &[u32]) -> Vec<f64> {
        slot_bytes_per_user_byte(w, self.k)
            .into_iter()
            .map(|x| x * self.user_bytes_per_day)
            .collect()
    }

    /// Days from now until each slot's member wears out under weights `w`, no replacements.
    pub fn natural_wearouts(&self, w: &[u32]) -> Vec<f64> {
        self.rates(w)
            .iter()
            .enumerate()
            .map(|(i, r)| (self.endurance[i] - self.used[i]).max(0.0) / r.max(1e-12))
            .collect()
    }

    /// Days between the two earliest natural wear-outs under weights `w`.
    pub fn first_gap(&self, w: &[u32]) -> f64 {
        let mut t = self.natural_wearouts(w);
        t.sort_by(f64::total_cmp);
        t.get(1).map_or(0.0, |b| b - t[0])
    }
}

/// What parity weights can do for this mix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WeightsAnalysis {
    /// Gap between the two earliest wear-outs with the current weights, days.
    pub current_gap_days: f64,
    /// The largest such gap any weights reach, days, and the weights (all parity on one slot).
    pub best_gap_days: f64,
    pub best_weights: Vec<u32>,
    /// The smallest weight on the earliest-wearing slot (others 1) that reaches the target.
    pub suggested_weights: Option<Vec<u32>>,
    pub suggested_gap_days: Option<f64>,
    /// Whether any weights reach the target.
    pub reachable: bool,
    /// The most a member can receive relative to each other member: (N-1)/k when it holds all
    /// the parity.
    pub max_write_ratio: f64,
    pub why: String,
}

/// What weights can achieve: the gap now, the best gap any weights give (the bound is all
/// parity on one member: its share is at most 1/k, every other's at least 1/(N-1)), and the
/// smallest F1-style weight that reaches `target_days`.
pub fn analyse_weights(f: &Fleet, target_days: f64) -> WeightsAnalysis {
    let n = f.weights.len();
    let current_gap_days = f.first_gap(&f.weights);
    let mut best = (f64::MIN, vec![1u32; n]);
    for slot in 0..n {
        let w: Vec<u32> = (0..n).map(|i| u32::from(i == slot)).collect();
        let g = f.first_gap(&w);
        if g > best.0 {
            best = (g, w);
        }
    }
    if current_gap_days > best.0 {
        best = (current_gap_days, f.weights.clone());
    }
    let first = {
        let t = f.natural_wearouts(&vec![1; n]);
        (0..n).min_by(|&a, &b| t[a].total_cmp(&t[b])).unwrap_or(0)
    };
    let mut suggested = None;
    for h in 1..=64u32 {
        let w: Vec<u32> = (0..n).map(|i| if i == first { h } else { 1 }).collect();
        let g = f.first_gap(&w);
        if g >= target_days {
            suggested = Some((w, g));
            break;
        }
    }
    let max_write_ratio = (n as f64 - 1.0) / f.k;
    let reachable = best.0 >= target_days;
    let why = if max_write_ratio <= 1.0 + 1e-9 {
        format!(
            "at {:.2} data bytes per parity byte the writes are whole rows: every member gets the same bytes whatever the weights",
            f.k
        )
    } else if reachable {
        format!(
            "a member holding all the parity gets up to {max_write_ratio:.2}x the writes of each other member at this mix ({:.2} data bytes per parity byte)",
            f.k
        )
    } else {
        format!(
            "at {:.2} data bytes per parity byte even a member holding all the parity gets only {max_write_ratio:.2}x the writes of each other member, which brings its wear-out {:.0} days ahead of the next at most; the weights only set where parity goes, and most bytes here are data in full rows, spread evenly",
            f.k, best.0
        )
    };
    WeightsAnalysis {
        current_gap_days,
        best_gap_days: best.0.max(0.0),
        best_weights: best.1,
        suggested_gap_days: suggested.as_ref().map(|s| s.1),
        suggested_weights: suggested.map(|s| s.0),
        reachable,
        max_write_ratio,
        why,
    }
}

/// The parity-heavy role moving with a replacement (Diff-RAID's age-driven reshuffle).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleMove {
    /// The most-worn survivor, which takes the heavy slot (and is rewritten: one capacity).
    pub member: usize,
    pub from_slot: usize,
    pub to_slot: usize,
}

/// One replacement in the schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replacement {
    /// Member number: 0..N are the members now in slots 0..N-1, replacements count on.
    pub member: usize,
    pub slot: usize,
    /// Days from now.
    pub day: f64,
    /// Percent of the member's endurance used when it is replaced.
    pub wear_pct: f64,
    /// Days before its natural wear-out (0: replaced when worn out).
    pub days_early: f64,
    /// The new member's number and slot (another slot when the heavy role moves).
    pub fresh_member: usize,
    pub fresh_slot: usize,
    pub role_move: Option<RoleMove>,
}

/// A replacement schedule over a horizon.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    pub target_gap_days: f64,
    pub horizon_days: f64,
    pub weights: Vec<u32>,
    pub replacements: Vec<Replacement>,
    /// Smallest gap between consecutive replacements in the horizon (None: fewer than two).
    pub min_gap_days: Option<f64>,
    /// Every consecutive gap reaches the target.
    pub holds: bool,
    /// Some replacement would have had to happen before today (it is scheduled now instead).
    pub needs_past: bool,
    /// The first natural wear-out after the horizon, days from now, and its gap to the last
    /// replacement.
    pub next_after_horizon: Option<(f64, f64)>,
    pub notes: Vec<String>,
}

/// Plans replacements under weights `w` for `horizon_days`: at each step every member's
/// natural wear-out within the horizon is known exactly; the latest is kept and each earlier
/// one is pulled to at most the next minus the gap; the earliest is carried out (not before
/// the previous replacement plus the gap when its member lasts that long, never after its
/// wear-out), a fresh member (one capacity written) takes the slot, and on F1 the heavy role
/// moves to the most-worn survivor. Repeats until the horizon.
///
/// A role move makes the moved member wear faster than the pass foresaw, so the pass can
/// leave a replacement forced (by a wear-out or a deadline) closer than the gap to the one
/// before; then the one before gets a deadline of that wear-out minus the gap and the schedule is made again,
/// until no forced gap is short (or the deadlines stop moving).
pub fn schedule(f: &Fleet, w: &[u32], target_days: f64, horizon_days: f64) -> Schedule {
    let mut deadlines: Vec<f64> = Vec::new();
    let mut s = schedule_once(f, w, target_days, horizon_days, &deadlines);
    for _ in 0..64 {
        let short = s
            .replacements
            .windows(2)
            .position(|p| p[1].day - p[0].day < target_days - GAP_TOLERANCE_DAYS);
        let Some(j) = short else { break };
        // A hair early, so that the moves this causes later stay within the tolerance.
        let want = s.replacements[j + 1].day - target_days - GAP_TOLERANCE_DAYS / 10.0;
        if deadlines.len() <= j {
            deadlines.resize(j + 1, f64::INFINITY);
        }
        if deadlines[j] - want < 1e-6 {
            break;
        }
        deadlines[j] = want;
        s = schedule_once(f, w, target_days, horizon_days, &deadlines);
    }
    s
}

fn schedule_once(
    f: &Fleet,
    w: &[u32],
    target_days: f64,
    horizon_days: f64,
    deadlines: &[f64],
) -> Schedule {
    let n = w.len();
    let rates = f.rates(w);
    let heavy = heavy_slot(w).filter(|_| f.reshuffle);
    let mut endurance: Vec<f64> = f.endurance.clone();
    let mut wear: Vec<f64> = f.used.clone();
    let mut slot_member: Vec<usize> = (0..n).collect();
    let mut t = 0.0f64;
    let mut last: Option<f64> = None;
    let mut out = Vec::new();
    let mut needs_past = false;
    let mut notes = Vec::new();
    let natural = |slot_member: &[usize], wear: &[f64], endurance: &[f64], t: f64| -> Vec<f64> {
        (0..n)
            .map(|s| {
                let m = slot_member[s];
                t + (endurance[m] - wear[m]).max(0.0) / rates[s].max(1e-12)
            })
            .collect()
    };
    let mut next_after = None;
    for _ in 0..10_000 {
        let nat = natural(&slot_member, &wear, &endurance, t);
        let mut order: Vec<usize> = (0..n)
            .filter(|&s| nat[s] <= horizon_days * (1.0 + 1e-9) + 1e-9)
            .collect();
        if order.is_empty() {
            let s = (0..n).min_by(|&a, &b| nat[a].total_cmp(&nat[b]));
            next_after = s.map(|s| (nat[s], last.map_or(f64::INFINITY, |l| nat[s] - l)));
            break;
        }
        order.sort_by(|&a, &b| nat[a].total_cmp(&nat[b]).then(a.cmp(&b)));
        // Backward pass: keep the latest, pull each earlier one to the next minus the gap.
        let mut when = nat[*order.last().expect("nonempty")];
        for &s in order.iter().rev().skip(1) {
            when = nat[s].min(when - target_days);
        }
        let slot = order[0];
        let mut day = when;
        if let Some(l) = last {
            // Not sooner than the gap after the previous one, unless the member dies first.
            day = day.max(l + target_days).min(nat[slot]);
        }
        if let Some(&d) = deadlines.get(out.len()) {
            day = day.min(d);
        }
        if day < t {
            if last.is_none() {
                needs_past = true;
                notes.push(format!(
                    "holding a {target_days:.0}-day gap would need slot {slot} replaced {:.0} days before today; it is scheduled today instead, so its gap to the next is short",
                    t - day
                ));
            }
            day = t;
        }
        // Advance every member to `day`, replace.
        for s in 0..n {
            wear[slot_member[s]] += rates[s] * (day - t);
        }
        t = day;
        let m = slot_member[slot];
        let fresh = endurance.len();
        endurance.push(f.fresh_endurance);
        wear.push(f.capacity);
        let mut fresh_slot = slot;
        let mut role_move = None;
        if heavy == Some(slot) {
            let pct = |s: usize| wear[slot_member[s]] / endurance[slot_member[s]];
            if let Some(s) = (0..n)
                .filter(|&s| s != slot)
                .max_by(|&a, &b| pct(a).total_cmp(&pct(b)).then(b.cmp(&a)))
            {
                let x = slot_member[s];
                wear[x] += f.capacity;
                slot_member[slot] = x;
                fresh_slot = s;
                role_move = Some(RoleMove {
                    member: x,
                    from_slot: s,
                    to_slot: slot,
                });
            }
        }
        slot_member[fresh_slot] = fresh;
        out.push(Replacement {
            member: m,
            slot,
            day,
            wear_pct: (wear[m] / endurance[m] * 100.0).min(100.0),
            days_early: (nat[slot] - day).max(0.0),
            fresh_member: fresh,
            fresh_slot,
            role_move,
        });
        last = Some(day);
    }
    let min_gap_days = out.windows(2).map(|p| p[1].day - p[0].day).reduce(f64::min);
    let holds = min_gap_days.is_none_or(|g| g >= target_days - GAP_TOLERANCE_DAYS) && !needs_past;
    if let Some((when, gap)) = next_after {
        if gap < target_days {
            notes.push(format!(
                "after the horizon the next wear-out (day {when:.0}) comes {gap:.0} days after the last replacement: {n} members that each last about {:.0} days need a replacement every {:.0} days on average, so a {target_days:.0}-day gap cannot be held for ever; plan again after these replacements",
                mean_life(f, &rates),
                mean_life(f, &rates) / n as f64
            ));
        }
    }
    Schedule {
        target_gap_days: target_days,
        horizon_days,
        weights: w.to_vec(),
        replacements: out,
        min_gap_days,
        holds,
        needs_past,
        next_after_horizon: next_after,
        notes,
    }
}

/// The days replacements happen when schedule `s` is followed by its dates while the user
/// writes `factor` times the rate it was planned for: each replacement on its day (with its
/// role move), unless its member wears out first (then it is replaced at its wear-out); a
/// member the schedule does not name that wears out within the horizon is replaced then too.
pub fn replay_days(f: &Fleet, s: &Schedule, factor: f64) -> Vec<f64> {
    let n = s.weights.len();
    let rates: Vec<f64> = f.rates(&s.weights).iter().map(|r| r * factor).collect();
    let mut endurance = f.endurance.clone();
    let mut wear = f.used.clone();
    let mut slot_member: Vec<usize> = (0..n).collect();
    let mut t = 0.0f64;
    let mut days = Vec::new();
    let mut next = 0;
    let fresh = |endurance: &mut Vec<f64>, wear: &mut Vec<f64>| {
        endurance.push(f.fresh_endurance);
        wear.push(f.capacity);
        endurance.len() - 1
    };
    for _ in 0..100_000 {
        // A planned replacement of a member already replaced at its wear-out is void.
        while s
            .replacements
            .get(next)
            .is_some_and(|r| !slot_member.contains(&r.member))
        {
            next += 1;
        }
        // The first member to wear out from now, and when.
        let (slot, out) = (0..n)
            .map(|x| {
                let m = slot_member[x];
                (
                    x,
                    t + (endurance[m] - wear[m]).max(0.0) / rates[x].max(1e-12),
                )
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("members");
        let planned = s.replacements.get(next);
        let day = match planned {
            Some(r) => r.day.min(out),
            None if out <= s.horizon_days => out,
            None => break,
        };
        for x in 0..n {
            wear[slot_member[x]] += rates[x] * (day - t);
        }
        t = day;
        let new = fresh(&mut endurance, &mut wear);
        match planned {
            Some(r) if r.day <= out || slot_member[slot] == r.member => {
                // The planned replacement, on its day or at its member's wear-out.
                let x = slot_member
                    .iter()
                    .position(|&m| m == r.member)
                    .expect("in a slot");
                match &r.role_move {
                    Some(mv) if mv.from_slot != x => {
                        let moved = slot_member[mv.from_slot];
                        wear[moved] += f.capacity;
                        slot_member[x] = moved;
                        slot_member[mv.from_slot] = new;
                    }
                    _ => slot_member[x] = new,
                }
                next += 1;
            }
            // Another member wore out before the plan's next replacement.
            _ => slot_member[slot] = new,
        }
        days.push(day);
    }
    days
}

/// The share of `draws` replays (the rate drawn as `1 + rel_se x N(0, 1)` times the planned
/// one, fixed seed) in which every gap between consecutive replacements keeps `s`'s target.
pub fn holds_probability(f: &Fleet, s: &Schedule, rel_se: f64, draws: usize) -> f64 {
    let mut rng = crate::rng::SplitMix64(0x5ced_0001);
    let mut ok = 0;
    for _ in 0..draws {
        let factor = (1.0 + rel_se * super::normal(&mut rng)).max(0.01);
        let d = replay_days(f, s, factor);
        ok += usize::from(
            d.windows(2)
                .all(|w| w[1] - w[0] >= s.target_gap_days - GAP_TOLERANCE_DAYS),
        );
    }
    ok as f64 / draws.max(1) as f64
}

/// A schedule with margin: planned for the measured user rate raised by `z` standard errors
/// (its relative error `rel_se`), for the smallest `z` of a ladder whose schedule holds its
/// gap in at least [`super::CONFIDENCE`] of 2,000 replays with the rate drawn from the
/// measurement. A member replaced on its planned day is then still short of worn out unless
/// writes ran faster than planned, which the plain schedule (`z` = 0, replacing the last member
/// at exactly 100 %) assumed they never would. Returns the schedule, `z`, the planned rate
/// and the probability; the largest `z` tried when none reaches it.
pub fn schedule_with_margin(
    f: &Fleet,
    w: &[u32],
    target_days: f64,
    horizon_days: f64,
    rel_se: f64,
) -> (Schedule, f64, f64, f64) {
    let mut best = None;
    for z in [0.0, 0.5, 1.0, 1.28, 1.645, 2.0, 2.5, 3.0] {
        let planned = Fleet {
            user_bytes_per_day: f.user_bytes_per_day * (1.0 + z * rel_se),
            ..f.clone()
        };
        let s = schedule(&planned, w, target_days, horizon_days);
        // Replayed against the measured rate: the factor is relative to it.
        let p = holds_probability(f, &s, rel_se, 2000);
        let done = p >= super::CONFIDENCE || rel_se <= 0.0;
        best = Some((s, z, planned.user_bytes_per_day, p));
        if done {
            break;
        }
    }
    best.expect("a ladder")
}

/// A fresh member's mean life over the slots, days.
fn mean_life(f: &Fleet, rates: &[f64]) -> f64 {
    let inv: f64 = rates
        .iter()
        .map(|r| r / (f.fresh_endurance - f.capacity).max(1.0))
        .sum::<f64>();
    rates.len() as f64 / inv.max(1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(n: usize, used_pct: &[f64], k: f64, weights: Vec<u32>) -> Fleet {
        Fleet {
            weights,
            k,
            user_bytes_per_day: 1e9,
            endurance: vec![1e12; n],
            used: used_pct.iter().map(|p| p / 100.0 * 1e12).collect(),
            fresh_endurance: 1e12,
            capacity: 0.0,
            reshuffle: false,
        }
    }

    #[test]
    fn equal_members_are_staggered_from_the_latest_back() {
        // RAID 5, 4 members, single-chunk writes (k = 1): each slot gets 0.5 bytes per user
        // byte, 0.5 GB/day, 2000 days of life. Gap 300: 1100, 1400, 1700, 2000.
        let f = fleet(4, &[0.0; 4], 1.0, vec![1; 4]);
        let s = schedule(&f, &f.weights, 300.0, 2000.0);
        let days: Vec<f64> = s.replacements.iter().map(|r| r.day).collect();
        assert_eq!(days.len(), 4, "{s:?}");
        for (d, want) in days.iter().zip([1100.0, 1400.0, 1700.0, 2000.0]) {
            assert!((d - want).abs() < 1e-6, "{days:?}");
        }
        assert!((s.replacements[0].wear_pct - 55.0).abs() < 1e-9);
        assert!((s.replacements[3].wear_pct - 100.0).abs() < 1e-9);
        assert_eq!(s.replacements[3].days_early, 0.0);
        assert!(s.holds && !s.needs_past);
        assert!((s.min_gap_days.unwrap() - 300.0).abs() < 1e-6);
        // Weights do nothing for RAID 5's equal members... and F1 weights cannot help under
        // whole-row writes (k = N-1).
        assert_eq!(f.first_gap(&f.weights), 0.0);
        let full = fleet(4, &[0.0; 4], 3.0, vec![2, 1, 1, 1]);
        let a = analyse_weights(&full, 10.0);
        assert!(!a.reachable && a.best_gap_days < 1e-6, "{a:?}");
        assert!(a.why.contains("whole rows"), "{}", a.why);
    }

    #[test]
    fn an_already_worn_member_goes_first_and_keeps_its_life() {
        // Slot 2 is half worn: natural 1000; the others 2000. Backward: 2000, 1700, 1400,
        // min(1000, 1100) = 1000: slot 2 is replaced at its wear-out, not early.
        let f = fleet(4, &[0.0, 0.0, 50.0, 0.0], 1.0, vec![1; 4]);
        let s = schedule(&f, &f.weights, 300.0, 2000.0);
        let r = &s.replacements;
        assert_eq!(r[0].slot, 2);
        assert!((r[0].day - 1000.0).abs() < 1e-6 && r[0].days_early < 1e-6);
        assert!((r[1].day - 1400.0).abs() < 1e-6, "{r:?}");
        assert!((s.min_gap_days.unwrap() - 300.0).abs() < 1e-6);
        assert!(s.holds);
        // Weights: all parity on the worn slot brings it earlier still, a larger first gap.
        let a = analyse_weights(&f, 900.0);
        assert_eq!(a.best_weights, vec![0, 0, 1, 0]);
        // Exact: slot 2 at 1/k = 1 byte per user byte, 500 GB left -> 500 days; others 1/3
        // -> 3000 days.
        assert!((a.best_gap_days - 2500.0).abs() < 1e-6, "{a:?}");
        assert!(a.reachable && a.suggested_weights.is_some());
    }

    #[test]
    fn an_infeasible_target_says_it_needs_the_past() {
        // 2000 days of life, 4 members, 800-day gap: the first would be due at -400.
        let f = fleet(4, &[0.0; 4], 1.0, vec![1; 4]);
        let s = schedule(&f, &f.weights, 800.0, 2000.0);
        assert!(s.needs_past && !s.holds, "{s:?}");
        assert_eq!(s.replacements[0].day, 0.0);
        assert!(s.notes[0].contains("before today"), "{:?}", s.notes);
        // And a target the weights cannot reach is said so, with the bound.
        let mix = fleet(4, &[0.0; 4], 2.3, vec![2, 1, 1, 1]);
        let a = analyse_weights(&mix, 5000.0);
        assert!(!a.reachable);
        // All parity on one: 1/k vs 1/3 bytes per user byte: 2300 vs 3000 days.
        assert!((a.best_gap_days - 700.0).abs() < 1e-6, "{a:?}");
        assert!((a.max_write_ratio - 3.0 / 2.3).abs() < 1e-12);
        assert!(a.current_gap_days < a.best_gap_days);
    }

    #[test]
    fn the_heavy_role_moves_to_the_most_worn_survivor() {
        let mut f = fleet(4, &[0.0, 10.0, 30.0, 20.0], 1.0, vec![4, 1, 1, 1]);
        f.reshuffle = true;
        f.capacity = 1e10;
        let s = schedule(&f, &f.weights, 100.0, 5000.0);
        let heavy = s.replacements.iter().find(|r| r.slot == 0).unwrap();
        let mv = heavy.role_move.as_ref().expect("a role move");
        assert_eq!(mv.to_slot, 0);
        assert_eq!(heavy.fresh_slot, mv.from_slot);
        assert!(s.holds, "{s:?}");
        // Gaps between consecutive replacements are the target or more.
        for p in s.replacements.windows(2) {
            assert!(p[1].day - p[0].day >= 100.0 - 1e-6, "{s:?}");
        }
    }

    /// Issue 28, item 3: the plain schedule replaces the last member at exactly 100 % wear,
    /// so when writes run a little faster than measured, members wear out before their dates
    /// and the gaps collapse (replayed against the measured rate's error: about half the
    /// time). Planned with margin, the gaps hold in at least 90 % of replays.
    #[test]
    fn a_schedule_with_margin_keeps_its_gap_when_the_rate_is_uncertain() {
        let f = fleet(4, &[0.0, 5.0, 10.0, 15.0], 1.0, vec![1; 4]);
        let plain = schedule(&f, &f.weights, 150.0, 2500.0);
        assert!(plain.holds, "{plain:?}");
        // Replayed at exactly the planned rate the plan is its own replay.
        let days: Vec<f64> = plain.replacements.iter().map(|r| r.day).collect();
        let again = replay_days(&f, &plain, 1.0);
        assert_eq!(again.len(), days.len(), "{again:?} {days:?}");
        for (a, b) in again.iter().zip(&days) {
            assert!((a - b).abs() < 1e-6, "{again:?} {days:?}");
        }
        let p_plain = holds_probability(&f, &plain, 0.1, 2000);
        assert!(p_plain < 0.7, "{p_plain}");
        let (s, z, rate, p) = schedule_with_margin(&f, &f.weights, 150.0, 2500.0, 0.1);
        assert!(
            p >= 0.9 && z > 0.0 && rate > f.user_bytes_per_day,
            "{p} {z} {rate}"
        );
        assert!(s.holds, "{s:?}");
        // The margin is paid in life: the last member goes earlier than its measured wear-out.
        let last = |x: &Schedule| x.replacements.last().map(|r| r.day).unwrap();
        assert!(last(&s) < last(&plain) - 10.0, "{s:?}");
        // No error, no margin.
        let (_, z0, _, p0) = schedule_with_margin(&f, &f.weights, 150.0, 2500.0, 0.0);
        assert_eq!((z0, p0), (0.0, 1.0));
    }
}
