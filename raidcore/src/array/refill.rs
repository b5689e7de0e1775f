//! Rebuild and replace of row batches, the engine side: reconstructs a batch of the target
//! slots' rows from the survivors (each survivor block verified against its checksum, or
//! checked by the redundancy left; what nothing verifies is marked, never vouched for),
//! writes it to the targets with the entries it earned, lists what could not be rebuilt, and
//! copies a replace batch from the old member with its unverified blocks rebuilt from the
//! rest of the row. The drivers in `jobs/rebuild.rs` (passes, checkpoints, pacing, events)
//! call it through the job API (`job.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::csum::{Digest, Expect, LOST_ENTRY, UNKNOWN_ENTRY};
use super::{Array, KeptAsIs, Target, TargetKind, Verified, WriteKind};
use crate::buf::AlignedBuf;
use crate::error::Result;
use crate::layout::Redundancy;
use crate::plan::{self, Cell, CopyChoice, Recovered};

/// A checksummed block: the unit a mirror rebuild falls back to when no copy reads whole.
const BLK: usize = super::csum::BLOCK as usize;

/// What a batch found wrong on the survivors.
#[derive(Default)]
pub(crate) struct Damage {
    /// Survivor blocks repaired.
    repaired: u64,
    /// (target index, byte offset in the batch) of target blocks rebuilt from data nothing
    /// vouched for (unchecked survivor blocks where no redundancy was left to check them):
    /// their entries are set unknown, so they never vouch for what they hold.
    unverified: Vec<(usize, usize)>,
    /// (target index, byte offset in the batch) of target blocks that could not be rebuilt.
    poisoned: Vec<(usize, usize)>,
    /// (slot, byte offset in the batch) of survivor blocks lost with them (unreadable or
    /// failing their checksums where parity no longer covers the column).
    lost: Vec<(usize, usize)>,
    /// The bytes of those of them that fail their entries or have none, as read (slot, byte
    /// offset in the batch, bytes): once the list holds them, durably, their entries are made
    /// to match them, so that a later change of the placeholder (rot) is seen (row.rs
    /// `judge_blocks`).
    relisted: Vec<(usize, usize, Vec<u8>)>,
    /// Byte offsets in the batch of the columns among them whose placeholders (the targets'
    /// blocks and the survivors' as read) agree with every parity of the row: only there are
    /// the listed blocks' entries made to match them. Elsewhere (RAID6 with a survivor
    /// rotten: the target rebuilt from P disagrees with Q) a placeholder that verified would
    /// feed a reconstruction through the other parity (simulator seed 38000292).
    consistent: Vec<usize>,
}

impl Damage {
    /// Per target, the entries its write gives the blocks nothing verified (unknown) and the
    /// ones it could not rebuild (matching nothing): noted and recorded with the write itself,
    /// never the digests of what the blocks hold. (Recorded after the write, as before, a
    /// crash between left the noted digest to the next open, which took it for a completed
    /// write and vouched for the block.)
    pub(crate) fn marks(&self, targets: usize) -> Vec<Vec<(usize, Digest)>> {
        let mut marks = vec![Vec::new(); targets];
        for &(ti, at) in &self.unverified {
            marks[ti].push((at, UNKNOWN_ENTRY));
        }
        for &(ti, at) in &self.poisoned {
            marks[ti].push((at, LOST_ENTRY));
        }
        marks
    }

    /// Survivor blocks the batch repaired.
    pub(crate) fn repaired(&self) -> u64 {
        self.repaired
    }

    /// Target blocks the batch could not rebuild (listed bad).
    pub(crate) fn unrecoverable(&self) -> u64 {
        self.poisoned.len() as u64
    }
}

/// Fills `outs` (one buffer per target) with the target slots' contents for rows [r0, r1).
/// Survivors' blocks are checked against their checksums: a bad one is treated as missing
/// (and repaired) when parity covers it, and otherwise the target block is marked so that it
/// reads as an error.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill_batch(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    r0: u64,
    r1: u64,
    ins: &mut [AlignedBuf],
    scratch: &mut [AlignedBuf],
    outs: &mut [AlignedBuf],
) -> Result<Damage> {
    let mut damage = Damage::default();
    let layout = array.layout();
    let n = layout.members();
    let c = layout.chunk() as usize;
    let rows = array.rows();
    let per_row = c / BLK;
    let b = (r1 - r0) as usize;
    array.check_alive()?;
    let lost = array.lost();
    match layout.redundancy() {
        Redundancy::Parity { parity } => {
            // One sequential read per survivor for the whole batch, all survivors at once.
            // Per survivor, the blocks (indices in the batch) that are not plainly good; None
            // when the member is gone.
            let read_one = |slot: usize, buf: &mut AlignedBuf| -> Option<Survivor> {
                let mut unreadable = Vec::new();
                if array.member_read(slot, &mut buf[..b * c], r0, 0).is_err() {
                    // A few bad sectors must not cost the member: read block by block and
                    // treat the unreadable ones like blocks failing their checksums (rebuilt
                    // from the others where parity allows, and rewritten).
                    for blk in 0..b * per_row {
                        let (row, within) = (r0 + (blk / per_row) as u64, (blk % per_row) * BLK);
                        // None when failed now (dead, or past its error limit).
                        array.source(slot, row)?;
                        let dst = &mut buf[blk * BLK..(blk + 1) * BLK];
                        if array.member_read(slot, dst, row, within as u64).is_err() {
                            dst.fill(0);
                            unreadable.push(blk);
                        }
                    }
                }
                let d = array.source(slot, r0)?;
                let (mut bad, mut unknown) =
                    array.csum_blocks(&d, r0, array.cell_offset(r0, 0), &buf[..b * c]);
                // Blocks on the bad-block list are judged by their entries, as reads judge them
                // (row.rs `judge_blocks`): every listing makes a placeholder's entry match it
                // where the row agrees with it, so one failing it rotted since, and rebuilt
                // from, it would carry the rot into the target.
                bad.retain(|x| unreadable.binary_search(x).is_err());
                unknown.retain(|x| unreadable.binary_search(x).is_err());
                Some(Survivor {
                    bad,
                    unreadable,
                    unknown,
                })
            };
            let read: Vec<Option<Survivor>> = if crate::sim::sched::in_simulation() {
                // In the simulator, on the calling thread (an actor's or the runner's).
                ins.iter_mut()
                    .zip(&lost)
                    .enumerate()
                    .map(|(slot, (buf, &gone))| if gone { None } else { read_one(slot, buf) })
                    .collect()
            } else {
                std::thread::scope(|scope| {
                    let read_one = &read_one;
                    let handles: Vec<_> = ins
                        .iter_mut()
                        .zip(&lost)
                        .enumerate()
                        .map(|(slot, (buf, &gone))| {
                            (!gone).then(|| scope.spawn(move || read_one(slot, buf)))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.and_then(|h| h.join().expect("reader thread")))
                        .collect()
                })
            };
            if read.iter().filter(|x| x.is_none()).count() > parity {
                array.check_alive()?;
                crate::bail!(
                    ArrayFailed,
                    "rows {r0}..{r1}: too many members unreadable to rebuild"
                );
            }
            // Blocks failing their checksums count as checksum errors on their members.
            for (slot, x) in read.iter().enumerate() {
                let Some(x) = x else { continue };
                if let Some(&blk) = x.bad.first() {
                    let row = r0 + (blk / per_row) as u64;
                    if let Some(d) = array.source(slot, row) {
                        d.csum_error(
                            x.bad.len() as u64,
                            array.cell_offset(row, 0) + ((blk % per_row) * BLK) as u64,
                        );
                    }
                }
            }
            let target_of: Vec<Option<usize>> = (0..n)
                .map(|slot| targets.iter().position(|(s, _)| *s == slot))
                .collect();
            let state = |slot: usize, blk: usize| -> Cell {
                match &read[slot] {
                    None => Cell::Absent,
                    Some(x) if x.unreadable.binary_search(&blk).is_ok() => Cell::Unreadable,
                    Some(x) if x.bad.binary_search(&blk).is_ok() => Cell::Bad,
                    Some(x) if x.unknown.binary_search(&blk).is_ok() => Cell::Unchecked,
                    Some(_) => Cell::Good,
                }
            };
            // Block columns (indices in the batch) where some survivor's block is not plainly
            // good: recovered block by block below, after the whole-chunk pass.
            let mut damaged: Vec<usize> = read
                .iter()
                .flatten()
                .flat_map(|x| x.bad.iter().chain(&x.unreadable).chain(&x.unknown))
                .copied()
                .collect();
            damaged.sort_unstable();
            damaged.dedup();
            for r in r0..r1 {
                let k = (r - r0) as usize;
                let cell = k * c..(k + 1) * c;
                // Reconstruct in place: survivors' slices are read, targets' slices receive
                // their chunk, any other missing chunk lands in scratch.
                let mut per_slot: Vec<Option<&mut [u8]>> = (0..n).map(|_| None).collect();
                let mut outs_it: Vec<Option<&mut [u8]>> = outs
                    .iter_mut()
                    .map(|o| Some(&mut o[cell.clone()]))
                    .collect();
                let mut scratch_it = scratch.iter_mut();
                for (slot, buf) in ins.iter_mut().enumerate() {
                    per_slot[slot] = if read[slot].is_some() {
                        Some(&mut buf[cell.clone()])
                    } else {
                        match target_of[slot] {
                            Some(ti) => outs_it[ti].take(),
                            None => scratch_it.next().map(|s| &mut s[..]),
                        }
                    };
                }
                let order = array.row_slots(r, parity);
                let cells: Vec<Cell> = order
                    .iter()
                    .map(|&slot| {
                        if read[slot].is_some() {
                            Cell::Good
                        } else {
                            Cell::Absent
                        }
                    })
                    .collect();
                let mut refs: Vec<&mut [u8]> = order
                    .iter()
                    .map(|&slot| per_slot[slot].take().expect("every slot has a buffer"))
                    .collect();
                // Columns with damage are redone below; here every survivor counts as good.
                plan::recover(array.kernel(), &mut refs, &cells, parity, false, |_, _| {
                    Vec::new()
                });
            }
            for blk in damaged {
                recover_block(
                    array,
                    (r0, blk),
                    parity,
                    &state,
                    &target_of,
                    ins,
                    outs,
                    &mut damage,
                )?;
            }
        }
        Redundancy::Mirror { copies } => {
            for (ti, (slot, _)) in targets.iter().enumerate() {
                for r in r0..r1 {
                    let k = (r - r0) as usize;
                    let Some((chunk, copy)) = layout.mirror_chunk_at(rows, *slot, r) else {
                        outs[ti][k * c..(k + 1) * c].fill(0); // a cell no chunk uses
                        continue;
                    };
                    let others: Vec<(usize, u64)> = (0..copies)
                        .filter(|&o| o != copy)
                        .map(|o| layout.mirror_cell(chunk, o))
                        .filter(|&(s2, _)| !lost[s2])
                        .collect();
                    if others.is_empty() {
                        array.check_alive()?;
                        crate::bail!(
                            ArrayFailed,
                            "logical chunk {chunk}: no copy left to rebuild slot {slot} from"
                        );
                    }
                    // The common case: the first other copy reads whole and vouches for every
                    // block.
                    let out = &mut outs[ti][k * c..(k + 1) * c];
                    let (s2, row2) = others[0];
                    let whole = array.member_read(s2, out, row2, 0).is_ok();
                    if whole
                        && array.source(s2, row2).is_some_and(|d| {
                            let (bad, unknown) =
                                array.csum_blocks(&d, row2, array.cell_offset(row2, 0), out);
                            bad.is_empty() && unknown.is_empty()
                        })
                    {
                        continue;
                    }
                    mirror_blocks(array, chunk, &others, whole, out, (ti, k * c), &mut damage)?;
                }
            }
        }
    }
    Ok(damage)
}

/// A survivor's blocks in a rebuild batch that are not plainly good (indices in the batch,
/// ascending).
struct Survivor {
    /// Failing their checksums.
    bad: Vec<usize>,
    /// Unreadable (zeros in the buffer).
    unreadable: Vec<usize>,
    /// Entries unknown (a damaged table page).
    unknown: Vec<usize>,
}

/// Recovers block `blk` (index in the batch from row `r0`) of every cell of its row with
/// [`plan::recover`], from each survivor's state there: targets get the block, survivors
/// whose block was bad, unreadable or unchecked are rewritten; where the row's redundancy
/// cannot settle it, the targets' blocks are poisoned and the survivors' damaged blocks lost.
#[allow(clippy::too_many_arguments)]
fn recover_block(
    array: &Array,
    (r0, blk): (u64, usize),
    parity: usize,
    state: &dyn Fn(usize, usize) -> Cell,
    target_of: &[Option<usize>],
    ins: &[AlignedBuf],
    outs: &mut [AlignedBuf],
    damage: &mut Damage,
) -> Result<()> {
    let c = array.layout().chunk() as usize;
    let per_row = c / BLK;
    let (k, j) = (blk / per_row, blk % per_row);
    let r = r0 + k as u64;
    let at = k * c + j * BLK;
    let order = array.row_slots(r, parity);
    let cells: Vec<Cell> = order.iter().map(|&s| state(s, blk)).collect();
    let mut blocks: Vec<Vec<u8>> = order
        .iter()
        .zip(&cells)
        .map(|(&s, cell)| {
            if cell.present() {
                ins[s][at..at + BLK].to_vec()
            } else {
                vec![0u8; BLK]
            }
        })
        .collect();
    let off = array.cell_offset(r, (j * BLK) as u64);
    let outcome = {
        let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|x| &mut x[..]).collect();
        plan::recover(
            array.kernel(),
            &mut refs,
            &cells,
            parity,
            array.checksum_algo().is_some(),
            |pos, bytes| {
                array
                    .source(order[pos], r)
                    .map(|d| array.csum_mismatches(&d, r, off, bytes))
                    .unwrap_or_default()
            },
        )
    };
    // Cells nothing could verify (entries unknown, no redundancy left to check them): a
    // target rebuilt from them would agree with them, rot included, and then vouch for them
    // (simulator seed 1322). Settled as a row the recovery could not settle (they are listed
    // with it, below).
    let unverifiable: Vec<usize> = match &outcome {
        Recovered::Rebuilt { unchecked, .. } => unchecked.clone(),
        _ => Vec::new(),
    };
    let outcome = if unverifiable.is_empty() {
        outcome
    } else {
        Recovered::Inconsistent {
            unchecked: unverifiable.clone(),
        }
    };
    match outcome {
        Recovered::Intact => {}
        Recovered::Rebuilt {
            rewrite, vouched, ..
        } => {
            if !vouched && array.checksum_algo().is_some() {
                damage
                    .unverified
                    .extend(target_of.iter().flatten().map(|&ti| (ti, at)));
            }
            let d_count = order.len() - parity;
            for (pos, &s) in order.iter().enumerate() {
                if let Some(ti) = target_of[s] {
                    outs[ti][at..at + BLK].copy_from_slice(&blocks[pos]);
                } else if rewrite.contains(&pos) {
                    // Vouched: rebuilt from cells that matched their entries; otherwise the
                    // row agreed with its parity as read (plan::recover accepts nothing else).
                    let cell = if vouched {
                        array.judged_good(&blocks[pos])
                    } else {
                        Verified::agreed(&blocks[pos])
                    };
                    array.repair_write(
                        s,
                        cell,
                        r,
                        (j * BLK) as u64,
                        WriteKind::of_cell(pos, d_count),
                    )?;
                    if cells[pos] != Cell::Unchecked {
                        damage.repaired += 1;
                    }
                }
            }
        }
        Recovered::Lost { .. }
        | Recovered::Contradicted { .. }
        | Recovered::Inconsistent { .. } => {
            for ti in target_of.iter().flatten() {
                damage.poisoned.push((*ti, at));
            }
            // The survivors' blocks nothing verified go with them: the targets' blocks, kept
            // as placeholders consistent with the row, were computed from them and would
            // confirm them to every later check (an outside attack: RAID5, one survivor
            // rotten with its entry unknown, another failing its entry; the rot then read back
            // as data with the array whole).
            // So do the missing members' data blocks of the column that no target takes now:
            // anything rebuilt for them later rests on the same cells (a second outside attack:
            // RAID6 with two members out, the second rebuild rebuilt the other missing block
            // from the listed one, and it read back wrong). Only data blocks that verify
            // themselves stay readable. (Parity blocks are never listed.)
            damage.lost.extend(
                order
                    .iter()
                    .zip(&cells)
                    .filter(|(&s, cell)| {
                        matches!(cell, Cell::Bad | Cell::Unreadable | Cell::Unchecked)
                            || (**cell == Cell::Absent && target_of[s].is_none())
                    })
                    .map(|(&s, _)| (s, at)),
            );
            damage.relisted.extend(
                order
                    .iter()
                    .zip(&cells)
                    .filter(|(_, cell)| matches!(cell, Cell::Bad | Cell::Unchecked))
                    .map(|(&s, _)| (s, at, ins[s][at..at + BLK].to_vec())),
            );
            let column: Option<Vec<&[u8]>> = order
                .iter()
                .zip(&cells)
                .map(|(&s, cell)| match target_of[s] {
                    Some(ti) => Some(&outs[ti][at..at + BLK]),
                    None if cell.present() => Some(&ins[s][at..at + BLK]),
                    None => None,
                })
                .collect();
            if column.is_some_and(|col| parity_agrees(array, &col, parity)) {
                damage.consistent.push(at);
            }
        }
    }
    Ok(())
}

/// Rebuilds one mirror chunk into `out` block by block, when its first other copy did not read
/// whole or does not vouch for every block: every other copy (`others`: slot, row) is read,
/// and plan::choose_copy picks each block's source, as reads do. The first copy's whole read
/// is not repeated: `first_whole` says whether it succeeded (its bytes are then in `out`);
/// after a failed one its blocks are read one by one, so a bad sector counts one error per
/// read that hit it, as before. Copies found bad or
/// unreadable are rewritten from the chosen one; a block no copy settles is poisoned on the
/// target (`at`: target index, byte offset in the batch), so it reads as an error. Without
/// checksums a lost block cannot be marked on a mirror: the rebuild stops instead.
#[allow(clippy::too_many_arguments)]
fn mirror_blocks(
    array: &Array,
    chunk: u64,
    others: &[(usize, u64)],
    first_whole: bool,
    out: &mut [u8],
    (ti, at): (usize, usize),
    damage: &mut Damage,
) -> Result<()> {
    let c = out.len();
    // Per other copy: its bytes, and the state of each of its blocks.
    let mut bytes: Vec<AlignedBuf> = others.iter().map(|_| AlignedBuf::zeroed(c)).collect();
    let mut states: Vec<Vec<Cell>> = Vec::with_capacity(others.len());
    for (o, &(s2, row2)) in others.iter().enumerate() {
        let buf = &mut bytes[o];
        let mut st = vec![Cell::Good; c / BLK];
        let whole = if o == 0 {
            if first_whole {
                buf.copy_from_slice(out);
            }
            first_whole
        } else {
            array.member_read(s2, buf, row2, 0).is_ok()
        };
        if !whole {
            for (b, cell) in st.iter_mut().enumerate() {
                let blk = &mut buf[b * BLK..(b + 1) * BLK];
                if array.source(s2, row2).is_none() {
                    *cell = Cell::Absent;
                } else if array.member_read(s2, blk, row2, (b * BLK) as u64).is_err() {
                    *cell = Cell::Unreadable;
                }
            }
        }
        if let Some(d) = array.source(s2, row2) {
            let (mut bad, mut unknown) =
                array.csum_blocks(&d, row2, array.cell_offset(row2, 0), buf);
            // Unreadable blocks (zeros here) are read errors already, not checksum errors.
            bad.retain(|&i| st[i] == Cell::Good);
            unknown.retain(|&i| st[i] == Cell::Good);
            if let Some(&i) = bad.first() {
                d.csum_error(
                    bad.len() as u64,
                    array.cell_offset(row2, 0) + (i * BLK) as u64,
                );
            }
            for i in bad {
                st[i] = Cell::Bad;
            }
            for i in unknown {
                st[i] = Cell::Unchecked;
            }
        } else {
            st.iter_mut().for_each(|x| *x = Cell::Absent);
        }
        states.push(st);
    }
    for b in 0..c / BLK {
        let blk = b * BLK..(b + 1) * BLK;
        let mut cells: Vec<Cell> = states.iter().map(|st| st[b]).collect();
        // Copies hold the same data: the known entry of a copy failing it vouches for an
        // unchecked copy (its own entry unknown, a damaged or unreadable table page) that
        // matches it, as in the resync.
        if cells.contains(&Cell::Bad) && cells.contains(&Cell::Unchecked) {
            let wanted: Vec<Digest> = (0..others.len())
                .filter(|&o| cells[o] == Cell::Bad)
                .filter_map(|o| {
                    let (s2, row2) = others[o];
                    match array.old_entry(s2, row2, blk.start as u64) {
                        Expect::Known(d) => Some(d),
                        Expect::Unknown => None,
                    }
                })
                .collect();
            for o in 0..others.len() {
                if cells[o] == Cell::Unchecked
                    && wanted.contains(&array.csum_digest(&bytes[o][blk.clone()]))
                {
                    cells[o] = Cell::Good;
                }
            }
        }
        let redundant = array.layout().copies() >= 2;
        let choice = plan::choose_copy(&cells, redundant, |i, j| {
            bytes[i][blk.clone()] == bytes[j][blk.clone()]
        });
        let from = match choice {
            CopyChoice::Use { copy, rewrite } => {
                for o in rewrite {
                    let (s2, row2) = others[o];
                    let good = bytes[copy][blk.clone()].to_vec();
                    let good = array.judged_good(&good);
                    array.repair_write(s2, good, row2, blk.start as u64, WriteKind::Data)?;
                    if cells[o] != Cell::Unchecked {
                        damage.repaired += 1;
                    }
                }
                Some(copy)
            }
            // Unchecked copies that agree (two or more: independent redundancy) are copied
            // with the target's entry unknown.
            CopyChoice::Unverified { copy } => {
                damage.unverified.push((ti, at + b * BLK));
                Some(copy)
            }
            // A lone unchecked copy is no majority: copied, the target would agree with it and
            // the two would read as confirmed by each other, rot included (simulator seed
            // 30000869: a re-add resumed after a power cut copied a rotten block whose table
            // page was damaged, and it read back with no error). The target is poisoned, so
            // the block reads as an error until it is written, as it did before the rebuild.
            // (Poisoning was tried before and dropped on seed 15001394, when the target's
            // entries were recorded after its write and a cut could keep one without the
            // other; the lost entry is now recorded with the write itself.)
            CopyChoice::Unconfirmed { .. }
            | CopyChoice::Disagree { .. }
            | CopyChoice::Corrupt { .. }
            | CopyChoice::Unavailable => None,
        };
        match from {
            Some(o) => out[blk.clone()].copy_from_slice(&bytes[o][blk]),
            None if array.checksum_algo().is_none() => {
                array.check_alive()?;
                crate::bail!(
                    ArrayFailed,
                    "logical chunk {chunk}: no readable copy of block {b} to rebuild from"
                );
            }
            None => {
                // Lost: poisoned on the target (its checksum entry can match nothing), so it
                // reads as an error, never as zeros, until it is written again.
                out[blk].fill(0);
                damage.poisoned.push((ti, at + b * BLK));
            }
        }
    }
    Ok(())
}

/// Lists target blocks that could not be rebuilt, and the survivor blocks lost with them, so
/// they read as errors: on the bad-block list (parity levels, with or without checksums).
/// The targets' write gave them entries that can never match any content, or unknown ones
/// ([`Damage::marks`]). Once the list holding them is durable, every listed block's entry is
/// made to match its placeholder (the bytes the target's write put there, `written`, one
/// buffer per target; the survivors' as read), so that rot of a placeholder is seen and never
/// feeds the reconstruction of another block (row.rs `judge_blocks`; an outside attack: a
/// poisoned target block rotted and a neighbour rebuilt from it read back wrong).
pub(crate) fn poison(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    r0: u64,
    damage: &Damage,
    written: Option<&[AlignedBuf]>,
) -> Result<()> {
    let c = array.layout().chunk();
    for &(ti, at) in &damage.poisoned {
        array.mark_lost_block(targets[ti].0, r0 * c + at as u64);
    }
    for &(slot, at) in &damage.lost {
        array.mark_lost_block(slot, r0 * c + at as u64);
    }
    let listed = |slot: usize, at: usize| array.is_lost_block(slot, r0 * c + at as u64);
    let target_listed: Vec<(usize, usize)> = match written {
        Some(_) if array.has_checksums() => damage
            .poisoned
            .iter()
            .chain(&damage.unverified)
            .copied()
            .filter(|&(ti, at)| listed(targets[ti].0, at) && damage.consistent.contains(&at))
            .collect(),
        _ => Vec::new(),
    };
    if !damage.relisted.is_empty() || !target_listed.is_empty() {
        // The list holding them durably first: a crash between the two must not leave an
        // unlisted block whose entry matches its rot.
        array.persist()?;
        for (ti, at) in target_listed {
            let bufs = written.expect("written");
            let (row, within) = (r0 + (at as u64) / c, (at as u64) % c);
            array.csum_record(
                &targets[ti].1.dev,
                array.cell_offset(row, within),
                Verified::listed(&bufs[ti][at..at + BLK]),
            );
        }
        // (Data blocks only: a parity block is never listed, and is judged by its entry.)
        for (slot, at, bytes) in &damage.relisted {
            let (row, within) = (r0 + (*at as u64) / c, (*at as u64) % c);
            if !listed(*slot, *at) || !damage.consistent.contains(at) {
                continue;
            }
            if let Some(dev) = array.source(*slot, row) {
                array.csum_record(
                    &dev,
                    array.cell_offset(row, within),
                    Verified::listed(bytes),
                );
            }
        }
    }
    if !damage.poisoned.is_empty() {
        array.event(
            "bad-blocks",
            targets.first().map(|t| t.0),
            format!(
                "{} blocks could not be rebuilt in rows from {r0} (unreadable or corrupt on a survivor where no redundancy was left): they read as errors until written again",
                damage.poisoned.len()
            ),
        );
    }
    Ok(())
}

/// The entries a replace batch's target write gives the blocks the read could neither verify
/// nor recover (byte offset in the batch, entry): the entry they had on the old member (a
/// fresh digest would vouch for them), or, for the ones it could not read at all, an entry
/// matching nothing. Noted and recorded with the write itself ([`Damage::marks`]).
fn kept_marks(kept: &[KeptAsIs]) -> Vec<(usize, Digest)> {
    kept.iter()
        .map(|k| {
            let entry = match k.entry {
                Some(Expect::Known(d)) => d,
                Some(Expect::Unknown) => UNKNOWN_ENTRY,
                None => LOST_ENTRY,
            };
            (k.at, entry)
        })
        .collect()
}

/// After a replace batch from row `r0` was written to the target `dev` with [`kept_marks`]
/// (`written`: the batch's bytes): lists the blocks the read could not read at all as lost,
/// and says what was kept. Once the list holding them is durable, their entries on the target
/// are made to match the placeholders written there (as [`poison`] does). Returns how many
/// were lost.
fn list_kept(
    array: &Array,
    (slot, dev): (usize, &crate::array::Dev),
    r0: u64,
    kept: &[KeptAsIs],
    written: &[u8],
) -> Result<u64> {
    if kept.is_empty() {
        return Ok(0);
    }
    let c = array.layout().chunk();
    let mut lost = 0;
    let mut listed = Vec::new();
    for k in kept.iter().filter(|k| k.entry.is_none()) {
        lost += 1;
        if array.mark_lost_block(slot, r0 * c + k.at as u64)
            || array.is_lost_block(slot, r0 * c + k.at as u64)
        {
            listed.push(k.at);
        }
    }
    // Only a placeholder its row's redundancy agrees with gets an entry matching it: one that
    // is not (the old member's block unreadable and nothing able to compute what the row
    // assumes there, so zeros were written) keeps the entry that matches nothing. With a
    // matching entry it would count as good data and feed the reconstruction of its
    // neighbours (simulator seed 45002276, RAID6: a rebuild with another member missing took
    // the zeros for data and the missing member's block read back as older data, exit 0).
    listed.retain(|&at| {
        let (row, within) = (r0 + at as u64 / c, at as u64 % c);
        column_agrees(array, slot, row, within, &written[at..at + BLK])
    });
    if !listed.is_empty() && array.has_checksums() {
        array.persist()?;
        for at in listed {
            let (row, within) = (r0 + at as u64 / c, at as u64 % c);
            array.csum_record(
                dev,
                array.cell_offset(row, within),
                Verified::listed(&written[at..at + BLK]),
            );
        }
    }
    array.event(
        "bad-blocks",
        Some(slot),
        format!(
            "replace from row {r0}: {} blocks could be neither verified nor rebuilt and were copied as they are, keeping the old member's checksum entries (they read as before: an error, or checked by redundancy), {lost} of them unreadable and listed bad",
            kept.len()
        ),
    );
    Ok(lost)
}

/// Whether the 4 KiB column at `within` of parity row `row` agrees with its parity when slot
/// `slot` holds `block` there: every other cell of the column read, and P (and Q) computed
/// over the data equal to the parity read. False where a cell cannot be read, and on mirror
/// levels (a placeholder there is never taken for a copy).
fn column_agrees(array: &Array, slot: usize, row: u64, within: u64, block: &[u8]) -> bool {
    let Redundancy::Parity { parity } = array.layout().redundancy() else {
        return false;
    };
    let order = array.row_slots(row, parity);
    let mut col: Vec<AlignedBuf> = Vec::with_capacity(order.len());
    for &s in &order {
        let mut b = AlignedBuf::zeroed(BLK);
        if s == slot {
            b.copy_from_slice(block);
        } else if array.member_read(s, &mut b, row, within).is_err() {
            return false;
        }
        col.push(b);
    }
    let col: Vec<&[u8]> = col.iter().map(|b| &b[..]).collect();
    parity_agrees(array, &col, parity)
}

/// Whether a 4 KiB column (data blocks in row order, then P, then Q) agrees with its parity.
fn parity_agrees(array: &Array, col: &[&[u8]], parity: usize) -> bool {
    let d = col.len() - parity;
    let mut pq = [vec![0u8; BLK], vec![0u8; BLK]];
    {
        let [p, q] = &mut pq;
        (array.kernel().gen_pq)(&col[..d], p, (parity == 2).then_some(&mut q[..]));
    }
    (d..col.len()).all(|i| pq[i - d] == col[i])
}

/// After a resync of `ranges` (an unclean stop): rows a replace target already holds may be
/// torn between the slot's member and the target. Copies them from the (resynced) member
/// again, batch by batch under the rows' locks. Called with the job slot held.
pub(crate) fn refresh_replace_targets(
    array: &Array,
    ranges: &[std::ops::Range<u64>],
) -> Result<()> {
    let c = array.layout().chunk();
    let step = super::pace::batch_rows(c, super::pace::MAX_BATCH_BYTES);
    let locks = array.row_locks();
    let owner = locks.job_owner();
    let mut buf = AlignedBuf::zeroed((step * c) as usize);
    for slot in 0..array.layout().members() {
        let Some(t) = array.slot_target(slot) else {
            continue;
        };
        if t.kind == TargetKind::Rebuild {
            continue;
        }
        for r in ranges {
            let mut r0 = r.start;
            while r0 < r.end.min(t.checkpoint.load(Ordering::Acquire)) {
                let r1 = (r0 + step).min(r.end);
                let _g = locks.batch(r0..r1, owner);
                let r1 = r1.min(t.checkpoint.load(Ordering::Acquire)).max(r0);
                let len = ((r1 - r0) * c) as usize;
                if len > 0 {
                    // From the slot's member, or from redundancy where it cannot be read: the
                    // member being replaced may have died since (the resync before this
                    // settled the rows, so they can be rebuilt).
                    let (kept, end) =
                        array.read_rows_verified(slot, &mut buf[..len], r0..r1, None)?;
                    let read = ReplaceRead {
                        kept,
                        end,
                        agreed: false,
                    };
                    write_replace_batch(array, slot, &t, r0, &read, &buf[..len])?;
                }
                r0 = r1.max(r0 + 1);
            }
        }
    }
    Ok(())
}

/// Writes a rebuilt batch (`bufs[ti][..len]` for target `ti`, rows from `r0`) to the targets,
/// with the entries `marks` ([`Damage::marks`]) gives the blocks nothing verified. Returns the
/// bytes written (a target that failed meanwhile is skipped; the pass notices).
pub(crate) fn write_rebuilt(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    r0: u64,
    bufs: &[AlignedBuf],
    len: usize,
    marks: &[Vec<(usize, Digest)>],
) -> Result<u64> {
    let mut written = 0;
    for (ti, (slot, t)) in targets.iter().enumerate() {
        if array.target_write(
            *slot,
            &t.dev,
            Verified::rebuilt_batch(&bufs[ti][..len]),
            r0,
            &marks[ti],
        )? {
            written += len as u64;
        }
    }
    Ok(written)
}

/// Reads rows `r0..r1` of slot `slot` for its replace target into `buf`, each block verified or
/// rebuilt from the rest of its row (and rewritten on the member); `slow` bounds how long the
/// read may take the slow path before it stops early; without checksums, RAID6 checks the
/// blocks by both parities ([`check_by_syndromes`]). Returns what it read; None when the
/// slot's member failed (the replace becomes a rebuild: [`Array::replace_source_lost`], with
/// the batch's rows unlocked).
pub(crate) fn read_for_replace(
    array: &Array,
    slot: usize,
    buf: &mut [u8],
    r0: u64,
    r1: u64,
    slow: Option<std::time::Duration>,
) -> Result<Option<ReplaceRead>> {
    let read = if array.slot_usable(slot) {
        // Unreadable blocks on the source are rebuilt from redundancy (and rewritten).
        array.read_rows_verified(slot, buf, r0..r1, slow)
    } else {
        Err(crate::Error::new(
            crate::ErrorKind::Io,
            "source member failed",
        ))
    };
    if read.is_err() && !array.slot_usable(slot) {
        return Ok(None);
    }
    // The array failed: the replace stops with the error.
    let (kept, end) =
        read.map_err(|e| e.context(format!("replacing slot {slot}, rows {r0}..{r1}")))?;
    let mut agreed = false;
    if !array.has_checksums() {
        let c = array.layout().chunk() as usize;
        let len = (end - r0) as usize * c;
        let cells = &mut buf[..len];
        agreed =
            check_by_syndromes(array, slot, cells, r0) || check_by_majority(array, slot, cells, r0);
    }
    Ok(Some(ReplaceRead { kept, end, agreed }))
}

/// What [`read_for_replace`] read.
pub(crate) struct ReplaceRead {
    /// The blocks nothing could verify or rebuild, copied as they are with their old entries.
    pub(crate) kept: Vec<KeptAsIs>,
    /// The row the read reached (it stops early after a slow row).
    pub(crate) end: u64,
    /// Without checksums: every block was checked against both parities of its row (RAID6,
    /// no member missing), so the copy is verified by agreement, not merely as read.
    agreed: bool,
}

/// Without checksums nothing vouches for the old member's bytes a replace copies. RAID6 checks
/// each 4 KiB block read (`buf`, slot `slot`'s cells of the rows from `r0`) against both
/// parities of its row, as scrub does: where the syndromes name this slot's data block, or
/// the one parity that disagrees is this slot's, the block is rebuilt from the rest of the row
/// (P and Q agree on it: independent redundancy) in `buf`, and the rotten bytes never reach
/// the target. Before, a replace copied what it read (a failing member's rot, or a read that
/// came back rotten). Rows with another member missing, and RAID5 and F1 (one parity: nothing
/// tells which block of a disagreeing row is wrong), are copied as read, as md does and as
/// scrub takes their data as right. Mirrors: [`check_by_majority`]. Returns whether every row
/// was checked.
fn check_by_syndromes(array: &Array, slot: usize, buf: &mut [u8], r0: u64) -> bool {
    thread_local! {
        /// The other members' cells of a batch, and a row's P and Q: kept between batches
        /// (fresh multi-MiB buffers per batch cost more in page faults than the check).
        static SCRATCH: std::cell::RefCell<(Vec<AlignedBuf>, AlignedBuf, AlignedBuf)> =
            std::cell::RefCell::new((Vec::new(), AlignedBuf::zeroed(0), AlignedBuf::zeroed(0)));
    }
    let layout = array.layout();
    if layout.redundancy() != (Redundancy::Parity { parity: 2 }) {
        return false;
    }
    let c = layout.chunk() as usize;
    let n = layout.members();
    SCRATCH.with(|scratch| {
        let (whole, p, q) = &mut *scratch.borrow_mut();
        if whole.len() != n || whole[0].len() != buf.len() {
            *whole = (0..n).map(|_| AlignedBuf::zeroed(buf.len())).collect();
        }
        if p.len() != c {
            *p = AlignedBuf::zeroed(c);
            *q = AlignedBuf::zeroed(c);
        }
        // The other members' cells of the batch's rows, one sequential read each (a member
        // whose batch read fails is read row by row).
        let batch_read: Vec<bool> = (0..n)
            .map(|s| s != slot && array.member_read(s, &mut whole[s], r0, 0).is_ok())
            .collect();
        let (mut checked, mut fixed) = (true, 0);
        for (k, cell) in buf.chunks_mut(c).enumerate() {
            let row = r0 + k as u64;
            let at = k * c..(k + 1) * c;
            let slots = array.row_slots(row, 2);
            let Some(pos) = slots.iter().position(|&s| s == slot) else {
                continue;
            };
            let mut readable = true;
            for &s in slots.iter().filter(|&&s| s != slot) {
                if array.source(s, row).is_none() {
                    readable = false; // degraded: one parity equation left
                } else if !batch_read[s]
                    && array
                        .member_read(s, &mut whole[s][at.clone()], row, 0)
                        .is_err()
                {
                    readable = false; // another member's cell cannot be read
                }
            }
            if !readable {
                checked = false; // as read, as md does
                continue;
            }
            for s in slots.iter().filter(|&&s| s == slot) {
                whole[*s][at.clone()].copy_from_slice(cell);
            }
            let row_cells: Vec<&[u8]> = slots.iter().map(|&s| &whole[s][at.clone()]).collect();
            fixed += check_row_by_syndromes(array, &row_cells, pos, p, q, cell, &mut checked);
        }
        if fixed > 0 {
            array.event(
                "member-errors",
                Some(slot),
                format!(
                    "replace from row {r0}: {fixed} blocks read from the old member disagreed with both parities of their rows, which named them: copied as rebuilt from the rest of the row"
                ),
            );
        }
        checked
    })
}

/// One RAID6 row of [`check_by_syndromes`]: `cells` in row order (data, P, Q), the old
/// member's at `pos` (also in `cell`, which is fixed in place). The whole row is checked at
/// once; only a row that disagrees is looked at block by block. Returns the blocks fixed;
/// clears `checked` where a disagreement names no block.
fn check_row_by_syndromes(
    array: &Array,
    cells: &[&[u8]],
    pos: usize,
    p: &mut [u8],
    q: &mut [u8],
    cell: &mut [u8],
    checked: &mut bool,
) -> u64 {
    const B: usize = BLK;
    let d = cells.len() - 2;
    (array.kernel().gen_pq)(&cells[..d], p, Some(&mut *q));
    if p[..] == *cells[d] && q[..] == *cells[d + 1] {
        return 0;
    }
    let mut fixed = 0;
    for b in (0..cell.len() / B).map(|b| b * B..(b + 1) * B) {
        let syndrome = |ours: &[u8], theirs: &[u8]| -> Vec<u8> {
            ours.iter().zip(theirs).map(|(a, b)| a ^ b).collect()
        };
        let pd = syndrome(&p[b.clone()], &cells[d][b.clone()]);
        let qd = syndrome(&q[b.clone()], &cells[d + 1][b.clone()]);
        let (p_bad, q_bad) = (pd.iter().any(|&x| x != 0), qd.iter().any(|&x| x != 0));
        let right: Option<Vec<u8>> = match (p_bad, q_bad) {
            (false, false) => continue,
            // Both disagree: the syndromes name the one data block that is wrong.
            (true, true) => plan::locate(&pd, &qd)
                .filter(|&z| z == pos && z < d)
                .map(|_| syndrome(&cells[pos][b.clone()], &pd)),
            // One parity disagrees and the other agrees with the data: that parity.
            (true, false) => (pos == d).then(|| p[b.clone()].to_vec()),
            (false, true) => (pos == d + 1).then(|| q[b.clone()].to_vec()),
        };
        match right {
            Some(right) => {
                cell[b].copy_from_slice(&right);
                fixed += 1;
            }
            None => *checked = false, // nothing located: as read
        }
    }
    fixed
}

/// Writes a replace batch read by [`read_for_replace`] (`buf`, rows from `r0`) to slot
/// `slot`'s target `t`, keeping the old entries of the blocks it kept as they are and listing
/// the ones it could not read at all. Returns (bytes written, blocks lost): nothing is written when the
/// target failed meanwhile.
pub(crate) fn write_replace_batch(
    array: &Array,
    slot: usize,
    t: &Target,
    r0: u64,
    read: &ReplaceRead,
    buf: &[u8],
) -> Result<(u64, u64)> {
    let kept = &read.kept[..];
    let good = if read.agreed {
        Verified::agreed(buf)
    } else {
        array.judged_good(buf)
    };
    if !array.target_write(slot, &t.dev, good, r0, &kept_marks(kept))? {
        return Ok((0, 0));
    }
    let lost = list_kept(array, (slot, &t.dev), r0, kept, buf)?;
    Ok((buf.len() as u64, lost))
}

/// Fills rows `rows` of every target with zeros (rows the data map shows empty: zeros on every
/// member). A target that fails here is failed; the pass notices at its next batch.
pub(crate) fn zero_targets(
    array: &Array,
    targets: &[(usize, Arc<Target>)],
    rows: std::ops::Range<u64>,
) -> Result<()> {
    for (slot, t) in targets {
        array.target_zero(*slot, t, rows.clone())?;
    }
    Ok(())
}

/// Makes every target's in-memory checkpoint durable: its checksum records go to its log, then
/// it is flushed, and only then does its durable checkpoint (what the superblocks record at
/// the next persist) move. A target whose flush fails is failed.
pub(crate) fn make_targets_durable(array: &Array, targets: &[(usize, Arc<Target>)]) -> Result<()> {
    for (slot, t) in targets {
        // The target's checksum records go to its log before the flush that makes the
        // checkpoint durable.
        if let Err(e) = array
            .csum_sync_dev(&t.dev)
            .and_then(|()| t.dev.member.flush())
        {
            array.fail_target(*slot, &format!("flush failed: {e}"))?;
            continue;
        }
        t.durable
            .store(t.checkpoint.load(Ordering::Acquire), Ordering::Release);
    }
    Ok(())
}

/// [`check_by_syndromes`] for mirrors of three or more copies without checksums: each 4 KiB
/// block read from the old member is checked against the chunk's other copies. A block a strict
/// majority of the copies read agrees with is copied; where two or more of the others agree on
/// other bytes and make a strict majority, those are copied instead (rot on the old member, or a
/// read that came back rotten); otherwise it is copied as read, as md does. Two copies cannot
/// outvote each other: copied as read. Returns whether every block was decided by a majority.
fn check_by_majority(array: &Array, slot: usize, buf: &mut [u8], r0: u64) -> bool {
    const B: usize = BLK;
    let layout = array.layout();
    let Redundancy::Mirror { copies } = layout.redundancy() else {
        return false;
    };
    if copies < 3 {
        return false;
    }
    let c = layout.chunk() as usize;
    let mut others: Vec<AlignedBuf> = (0..copies).map(|_| AlignedBuf::zeroed(c)).collect();
    let (mut checked, mut fixed) = (true, 0);
    for (k, cell) in buf.chunks_mut(c).enumerate() {
        let row = r0 + k as u64;
        let Some((chunk, me)) = layout.mirror_chunk_at(array.data_rows, slot, row) else {
            continue; // a cell no chunk uses
        };
        let read: Vec<usize> = (0..copies)
            .filter(|&i| i != me)
            .filter(|&i| {
                let (s, r) = layout.mirror_cell(chunk, i);
                array.source(s, r).is_some() && array.member_read(s, &mut others[i], r, 0).is_ok()
            })
            .collect();
        if read.len() < 2 {
            checked = false;
            continue; // fewer than three copies to vote
        }
        for b in 0..c / B {
            let at = b * B..(b + 1) * B;
            let mut votes: Vec<&[u8]> = vec![&cell[at.clone()]];
            votes.extend(read.iter().map(|&i| &others[i][at.clone()]));
            // As reads and scrub decide among unchecked copies: all agree, or a strict
            // majority of two or more.
            let unchecked = vec![Cell::Unchecked; votes.len()];
            let right = match plan::choose_copy(&unchecked, true, |i, j| votes[i] == votes[j]) {
                CopyChoice::Unverified { copy } => votes[copy],
                _ => {
                    checked = false; // no majority: as read
                    continue;
                }
            };
            if right == votes[0] {
                continue;
            }
            let right = right.to_vec();
            cell[at].copy_from_slice(&right);
            fixed += 1;
        }
    }
    if fixed > 0 {
        array.event(
            "member-errors",
            Some(slot),
            format!(
                "replace from row {r0}: {fixed} blocks read from the old member differed from a majority of their chunks' other copies: copied from those"
            ),
        );
    }
    checked
}
