//! Scrub and resync: read rows, check parity (RAID5/F1/6) and mirror copies (RAID1/10), report
//! each problem with its row, slot and kind, and repair. Resync (after an unclean stop) trusts
//! the data and rewrites parity or later copies, as md does; scrub with repair locates a single
//! bad chunk of a RAID6 row from the syndromes, and takes the majority of three or more mirror
//! copies, and otherwise reports that the good copy cannot be decided. Only what differs is
//! written.

use std::ops::Range;
use std::time::Instant;

use serde::Serialize;

use super::RateLimit;
use crate::array::{Array, WriteKind};
use crate::error::Result;
use crate::layout::{Level, Redundancy};
use crate::parity::gf;

/// What to do with inconsistencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// After an unclean stop: data wins, parity and later copies are rewritten.
    Resync,
    /// Check; with `repair`, fix what can be decided.
    Scrub { repair: bool },
}

/// One inconsistency.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    pub row: u64,
    pub slot: usize,
    /// Logical byte offset of the chunk, for data chunks and mirror copies.
    pub logical_offset: Option<u64>,
    /// "parity", "q-parity", "data" or "mirror".
    pub kind: &'static str,
    pub repaired: bool,
    pub note: String,
}

/// What a scrub or resync found and did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScrubReport {
    pub rows_checked: u64,
    /// Rows that could not be checked because a member is unavailable.
    pub rows_skipped: u64,
    pub problems: Vec<Problem>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub seconds: f64,
}

impl ScrubReport {
    pub fn unrepaired(&self) -> usize {
        self.problems.iter().filter(|p| !p.repaired).count()
    }
}

/// Checks (and per `mode` repairs) every row in `ranges`. `progress(rows done, rows total)`.
pub fn run(
    array: &Array,
    ranges: &[Range<u64>],
    mode: Mode,
    max_rate: Option<u64>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ScrubReport> {
    let start = Instant::now();
    let mut rep = ScrubReport::default();
    let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let mut done = 0;
    let mut rate = RateLimit::new(max_rate);
    let layout = array.layout().clone();
    for range in ranges {
        for row in range.clone() {
            let before = rep.bytes_read;
            match layout.redundancy() {
                Redundancy::Parity { parity } => parity_row(array, row, parity, mode, &mut rep)?,
                Redundancy::Mirror { copies } if layout.level() != Level::Raid0 => {
                    mirror_row(array, row, copies, mode, &mut rep)?
                }
                Redundancy::Mirror { .. } => rep.rows_checked += 1, // RAID0: nothing to compare
            }
            done += 1;
            if done % 64 == 0 || done == total {
                progress(done, total);
            }
            rate.account(rep.bytes_read - before);
        }
    }
    rep.seconds = start.elapsed().as_secs_f64();
    Ok(rep)
}

fn parity_row(
    array: &Array,
    row: u64,
    parity: usize,
    mode: Mode,
    rep: &mut ScrubReport,
) -> Result<()> {
    let c = array.layout().chunk() as usize;
    let _g = array.lock_row(row);
    let slots = array.row_slots(row, parity);
    let d = slots.len() - parity;
    let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; c]; slots.len()];
    for (i, &s) in slots.iter().enumerate() {
        if array.source(s, row).is_none() || array.member_read(s, &mut bufs[i], row, 0).is_err() {
            rep.rows_skipped += 1;
            return Ok(());
        }
    }
    rep.bytes_read += (c * slots.len()) as u64;
    rep.rows_checked += 1;
    let mut p = vec![0u8; c];
    let mut q = vec![0u8; c];
    {
        let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &b[..]).collect();
        (array.kernel().gen_pq)(&data, &mut p, (parity == 2).then_some(&mut q[..]));
    }
    let p_bad = p != bufs[d];
    let q_bad = parity == 2 && q != bufs[d + 1];
    if !p_bad && !q_bad {
        return Ok(());
    }
    let repair = matches!(mode, Mode::Resync | Mode::Scrub { repair: true });
    // RAID6 scrub: the syndromes can name one bad chunk.
    if parity == 2 && mode != Mode::Resync && p_bad && q_bad {
        let pd: Vec<u8> = p.iter().zip(&bufs[d]).map(|(a, b)| a ^ b).collect();
        let qd: Vec<u8> = q.iter().zip(&bufs[d + 1]).map(|(a, b)| a ^ b).collect();
        if let Some(z) = locate(&pd, &qd).filter(|&z| z < d) {
            let fixed: Vec<u8> = bufs[z].iter().zip(&pd).map(|(a, b)| a ^ b).collect();
            if repair {
                array.member_write(slots[z], &fixed, row, 0, WriteKind::Data)?;
                rep.bytes_written += c as u64;
            }
            rep.problems.push(Problem {
                row,
                slot: slots[z],
                logical_offset: Some((row * d as u64 + z as u64) * c as u64),
                kind: "data",
                repaired: repair,
                note: "located from the P and Q syndromes".into(),
            });
            return Ok(());
        }
    }
    let decidable = mode == Mode::Resync || parity == 2 && (p_bad != q_bad);
    for (bad, idx, kind, fresh) in [(p_bad, d, "parity", &p), (q_bad, d + 1, "q-parity", &q)] {
        if !bad {
            continue;
        }
        let fix = repair && (decidable || parity == 1);
        if fix {
            array.member_write(slots[idx], fresh, row, 0, WriteKind::Parity)?;
            rep.bytes_written += c as u64;
        }
        rep.problems.push(Problem {
            row,
            slot: slots[idx],
            logical_offset: None,
            kind,
            repaired: fix,
            note: if mode == Mode::Resync {
                "parity recomputed from data after an unclean stop".into()
            } else if parity == 1 {
                "parity does not match the data; without checksums the data is taken as right"
                    .into()
            } else {
                "the other parity agrees with the data".into()
            },
        });
    }
    Ok(())
}

/// The data index z with Qd = g^z * Pd for every byte, if there is one.
fn locate(pd: &[u8], qd: &[u8]) -> Option<usize> {
    let mut z = None;
    for (&a, &b) in pd.iter().zip(qd) {
        match (a, b) {
            (0, 0) => {}
            (0, _) | (_, 0) => return None,
            _ => {
                let e = (gf::LOG[b as usize] as usize + 255 - gf::LOG[a as usize] as usize) % 255;
                if *z.get_or_insert(e) != e {
                    return None;
                }
            }
        }
    }
    z
}

fn mirror_row(
    array: &Array,
    row: u64,
    copies: usize,
    mode: Mode,
    rep: &mut ScrubReport,
) -> Result<()> {
    let l = array.layout().clone();
    let c = l.chunk() as usize;
    let n = l.members() as u64;
    let k = copies as u64;
    // Logical chunks whose first copy sits in this row (copy 0 of chunk c is at c*K).
    let first = (row * n).div_ceil(k);
    let last = ((row + 1) * n)
        .div_ceil(k)
        .min(l.logical_chunks(array.rows()));
    rep.rows_checked += 1;
    for chunk in first..last {
        let cells: Vec<(usize, u64)> = (0..copies).map(|i| l.mirror_cell(chunk, i)).collect();
        let _g = array.lock_row(chunk);
        let mut data = Vec::new();
        for &(s, r) in &cells {
            let mut b = vec![0u8; c];
            if array.source(s, r).is_some() && array.member_read(s, &mut b, r, 0).is_ok() {
                data.push((s, r, b));
            }
        }
        rep.bytes_read += (c * data.len()) as u64;
        if data.len() < 2 || data.iter().all(|x| x.2 == data[0].2) {
            continue;
        }
        let good: Option<Vec<u8>> = match mode {
            Mode::Resync => Some(data[0].2.clone()),
            Mode::Scrub { .. } => {
                // A strict majority decides; otherwise nobody can tell which copy is right.
                data.iter()
                    .map(|x| &x.2)
                    .find(|cand| data.iter().filter(|y| &&y.2 == cand).count() * 2 > data.len())
                    .cloned()
            }
        };
        let repair = matches!(mode, Mode::Resync | Mode::Scrub { repair: true });
        for (s, r, b) in &data {
            let differs = good.as_ref().map(|g| g != b).unwrap_or(true);
            if !differs || good.is_none() && *s == data[0].0 {
                continue;
            }
            let fix = repair && good.is_some();
            if fix {
                array.member_write(*s, good.as_ref().expect("decided"), *r, 0, WriteKind::Data)?;
                rep.bytes_written += c as u64;
            }
            rep.problems.push(Problem {
                row: *r,
                slot: *s,
                logical_offset: Some(chunk * c as u64),
                kind: "mirror",
                repaired: fix,
                note: match (&good, mode) {
                    (_, Mode::Resync) => "copied from the first copy after an unclean stop".into(),
                    (Some(_), _) => "differs from the majority of the copies".into(),
                    (None, _) => "copies differ and no majority says which is right".into(),
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_locate_one_bad_data_chunk() {
        // Corrupt data chunk 2 of 4 by e: Pd = e, Qd = g^2 * e.
        let e = [0x13u8, 0, 0xff, 7];
        let qd: Vec<u8> = e.iter().map(|&x| gf::mul(gf::pow2(2), x)).collect();
        assert_eq!(locate(&e, &qd), Some(2));
        assert_eq!(locate(&e, &[1, 0, 1, 1]), None);
    }
}
