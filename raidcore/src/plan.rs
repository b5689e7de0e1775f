//! The engine's pure planner for parity rows: how a write updates a row (full row,
//! read-modify-write, reconstruct-write, or reconstructed first) and how a row's missing or
//! damaged cells are recovered, decided from the row's shape and what each cell's read said.
//! No I/O and no locks: the array executes these plans under its row locks (array/io.rs for
//! reads and writes, array/refill.rs and array/check.rs for the jobs), and the tests below check
//! every plan against a model row.
//!
//! [`recover`] is the one row-recovery routine: the read path, reconstruct-writes, rebuild,
//! replace and scrub all decide with it which cells of a row to rebuild from the others,
//! whether that is possible, which members to rewrite, and whether a reconstruction that
//! disagrees with a cell's checksum entry is to be trusted.

use std::ops::Range;

use crate::parity::Kernel;

/// Bytes per checksummed block.
const BLOCK: usize = 4096;

/// What a read said about one cell of a row (a chunk, or the same span or block of every
/// chunk), in row order: data 0..D, then P, then Q.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// Read, and every block matched its checksum entry (or the array keeps no checksums).
    Good,
    /// Read, no block contradicted its entry, but some entries are unknown (a damaged table
    /// page): nothing vouches for the bytes.
    Unchecked,
    /// Read, and some block failed its checksum entry.
    Bad,
    /// No bytes to go by: the member could not read it (or the caller already found it
    /// failing and did not read it again).
    Unreadable,
    /// No member holds it (failed, missing, or a rebuild target not there yet).
    Absent,
}

impl Cell {
    /// Whether the cell must be rebuilt from the rest of its row.
    pub fn lost(self) -> bool {
        matches!(self, Cell::Bad | Cell::Unreadable | Cell::Absent)
    }

    /// Whether a member holds the cell (so a rebuilt copy can be written back to it).
    pub fn present(self) -> bool {
        self != Cell::Absent
    }
}

/// What to do about one row, from its cells' states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Every cell can be used as read.
    Intact,
    /// Rebuild `rebuild` (row positions, ascending) from the other cells.
    Rebuild {
        rebuild: Vec<usize>,
        /// The rebuilt cells a member holds: written back on a writable array (an SSD remaps a
        /// bad sector on write, and the write records their checksum entries again).
        rewrite: Vec<usize>,
        /// Every cell the reconstruction uses vouched for itself (checksums on, all Good):
        /// then a rebuilt cell that disagrees with its own entries is right, and the entries
        /// are what is wrong (a damaged table page that still passes its own hash).
        vouched: bool,
    },
    /// More cells are lost than parity covers.
    Lost {
        /// Row positions lost, ascending.
        lost: Vec<usize>,
        /// Some lost cell was read but failed its checksum or could not be read (the error is
        /// about the data, not only about missing members).
        damaged: bool,
    },
}

/// Decides how to recover a row of `cells` protected by `parity` parity cells.
///
/// Rules:
/// - Bad, Unreadable and Absent cells are lost and rebuilt from the rest when at most
///   `parity` are lost; more than that and the row is [`Recovery::Lost`].
/// - Unchecked cells are rebuilt (and rewritten) too when the row has the redundancy left to
///   check them: their bytes are then whatever the vouched rest says. Otherwise they are used
///   as read, the best there is, as on an array without checksums, and the reconstruction is
///   not vouched for.
pub fn plan_recovery(cells: &[Cell], parity: usize, checksums: bool) -> Recovery {
    let lost: Vec<usize> = (0..cells.len()).filter(|&i| cells[i].lost()).collect();
    if lost.len() > parity {
        let damaged = lost.iter().any(|&i| cells[i] != Cell::Absent);
        return Recovery::Lost { lost, damaged };
    }
    let unchecked: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i] == Cell::Unchecked)
        .collect();
    let mut rebuild = lost;
    let vouched = if rebuild.len() + unchecked.len() <= parity {
        rebuild.extend(&unchecked);
        rebuild.sort_unstable();
        checksums
    } else {
        checksums && unchecked.is_empty()
    };
    if rebuild.is_empty() {
        return Recovery::Intact;
    }
    let rewrite = rebuild
        .iter()
        .copied()
        .filter(|&i| cells[i].present())
        .collect();
    Recovery::Rebuild {
        rebuild,
        rewrite,
        vouched,
    }
}

/// The outcome of [`recover`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// Nothing needed rebuilding: the buffers are the cells as read.
    Intact,
    /// The buffers hold the row, `rebuilt` cells reconstructed; `rewrite` are to be written
    /// back to their members.
    Rebuilt {
        rebuilt: Vec<usize>,
        rewrite: Vec<usize>,
        /// Every cell the reconstruction used vouched for itself. When not, the rebuilt
        /// bytes are the best there is but nothing confirms them: a copy written elsewhere
        /// must not get checksum entries that vouch for it.
        vouched: bool,
        /// Cells whose entries are unknown that the reconstruction used as read with no
        /// parity left over to check them (a row degraded to no redundancy): nothing verified
        /// them or what was rebuilt from them. Reads refuse such a row; a rebuild may copy it
        /// with unknown entries, which keep refusing reads until redundancy checks them.
        unchecked: Vec<usize>,
    },
    /// More cells lost than parity covers; the lost cells' buffers are undefined.
    Lost { lost: Vec<usize>, damaged: bool },
    /// The reconstruction of cell `cell` matches neither the bytes read (where there are any)
    /// nor its checksum entries, and the reconstruction itself rests on cells nothing vouches
    /// for: which is right cannot be told. Block `block` (4 KiB, within the buffers) is the first that
    /// differs.
    Contradicted { cell: usize, block: usize },
    /// More cells are unchecked (entries unknown) than the row can rebuild, and the row's
    /// parity disagrees with them without naming a single one of them: some unchecked cell is
    /// wrong and which cannot be told. Nothing in the buffers is to be trusted.
    Inconsistent { unchecked: Vec<usize> },
}

/// The one row-recovery routine: rebuilds what [`plan_recovery`] says in `bufs` (one
/// buffer per cell, equal lengths, in row order), then checks every rebuilt cell a member
/// holds against its checksum entries through `mismatches(cell, bytes)` (the 4 KiB blocks of
/// `bytes` that differ from the cell's entries; empty without checksums). When the
/// reconstruction is not vouched for, a rebuilt block that differs from its entries is
/// accepted only where it equals what was read (the row was consistent as read, so the
/// entries are what is wrong); otherwise the row is [`Recovered::Contradicted`].
pub fn recover(
    kernel: &Kernel,
    bufs: &mut [&mut [u8]],
    cells: &[Cell],
    parity: usize,
    checksums: bool,
    mismatches: impl Fn(usize, &[u8]) -> Vec<usize>,
) -> Recovered {
    debug_assert_eq!(bufs.len(), cells.len());
    match plan_recovery(cells, parity, checksums) {
        Recovery::Intact if cells.contains(&Cell::Unchecked) => {
            check_unchecked(kernel, bufs, cells, parity, &[])
        }
        Recovery::Intact => Recovered::Intact,
        Recovery::Lost { lost, damaged } => Recovered::Lost { lost, damaged },
        Recovery::Rebuild {
            rebuild,
            rewrite,
            vouched,
        } => {
            // Unvouched: what was read of the damaged cells, to tell a reconstruction that
            // agrees with the bytes (then only the entries are wrong) from one that agrees
            // with nothing.
            let as_read: Vec<(usize, Vec<u8>)> = if vouched || !checksums {
                Vec::new()
            } else {
                rewrite
                    .iter()
                    .filter(|&&i| matches!(cells[i], Cell::Bad | Cell::Unchecked))
                    .map(|&i| (i, bufs[i].to_vec()))
                    .collect()
            };
            kernel
                .recover(bufs, parity, &rebuild)
                .expect("the plan rebuilds at most `parity` cells of a valid row");
            // Unchecked cells used as read (too many to rebuild): only the parity the rebuild
            // left over can vouch for them.
            if rebuild.len() < parity
                && (0..cells.len()).any(|i| cells[i] == Cell::Unchecked && !rebuild.contains(&i))
            {
                match check_unchecked(kernel, bufs, cells, parity, &rebuild) {
                    Recovered::Intact => {}
                    other => return other,
                }
            }
            if !vouched {
                for &i in &rewrite {
                    let read = as_read.iter().find(|(j, _)| *j == i).map(|(_, b)| b);
                    let disagree = mismatches(i, &bufs[i][..]).into_iter().find(|&b| {
                        read.is_none_or(|r| {
                            let blk = b * BLOCK..((b + 1) * BLOCK).min(r.len());
                            r[blk.clone()] != bufs[i][blk]
                        })
                    });
                    if let Some(block) = disagree {
                        return Recovered::Contradicted { cell: i, block };
                    }
                }
            }
            // With no parity left over, only a rebuilt cell whose own entry is known and now
            // matches (one that failed it as read) confirms the cells the rebuild rested on.
            let confirmed = || {
                rewrite
                    .iter()
                    .any(|&i| cells[i] == Cell::Bad && mismatches(i, &bufs[i][..]).is_empty())
            };
            let unchecked = if rebuild.len() < parity || !checksums || confirmed() {
                Vec::new()
            } else {
                (0..cells.len())
                    .filter(|&i| cells[i] == Cell::Unchecked && !rebuild.contains(&i))
                    .collect()
            };
            Recovered::Rebuilt {
                rebuilt: rebuild,
                rewrite,
                vouched,
                unchecked,
            }
        }
    }
}

/// Checks a row whose unchecked cells are used as read (more of them than the row can rebuild;
/// `rebuilt`: cells already rebuilt in `bufs`, fewer than `parity`) against its parity, which
/// is the only thing left to vouch for them. A consistent row is [`Recovered::Intact`]. An
/// inconsistent RAID6 row with nothing rebuilt whose syndromes name one cell that is unchecked
/// has that cell rebuilt from the rest (which both parities then agree with); otherwise the
/// row is [`Recovered::Inconsistent`].
fn check_unchecked(
    kernel: &Kernel,
    bufs: &mut [&mut [u8]],
    cells: &[Cell],
    parity: usize,
    rebuilt: &[usize],
) -> Recovered {
    let d = cells.len() - parity;
    let len = bufs[0].len();
    let mut pd = vec![0u8; len];
    let mut qd = vec![0u8; if parity == 2 { len } else { 0 }];
    {
        let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &**b).collect();
        (kernel.gen_pq)(&data, &mut pd, (parity == 2).then_some(&mut qd[..]));
    }
    (kernel.xor_into)(&mut pd, &bufs[d][..]);
    if parity == 2 {
        (kernel.xor_into)(&mut qd, &bufs[d + 1][..]);
    }
    let p_ok = pd.iter().all(|&x| x == 0);
    let q_ok = qd.iter().all(|&x| x == 0);
    if p_ok && q_ok {
        return Recovered::Intact;
    }
    let unchecked: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i] == Cell::Unchecked)
        .collect();
    if parity == 2 && rebuilt.is_empty() {
        let z = if p_ok {
            Some(d + 1)
        } else if q_ok {
            Some(d)
        } else {
            locate(&pd, &qd).filter(|&z| z < d)
        };
        if let Some(z) = z.filter(|&z| cells[z] == Cell::Unchecked) {
            kernel
                .recover(bufs, parity, &[z])
                .expect("one cell of a valid row");
            return Recovered::Rebuilt {
                rebuilt: vec![z],
                rewrite: vec![z],
                vouched: false,
                unchecked: Vec::new(),
            };
        }
    }
    Recovered::Inconsistent { unchecked }
}

/// The data index z with Qd = g^z * Pd for every byte (`pd`, `qd`: the P and Q syndromes of a
/// RAID6 row, the XOR of the parity as stored and as computed from the data), if there is one:
/// the one data cell whose error explains both.
pub fn locate(pd: &[u8], qd: &[u8]) -> Option<usize> {
    use crate::parity::gf;
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

/// What to do with the copies of a mirror chunk (or one block of it), from each copy's read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyChoice {
    /// Copy `copy` vouches for itself: use it, and rewrite `rewrite` from it (the copies a
    /// member holds that failed their checksums, could not be read, or are unchecked).
    Use { copy: usize, rewrite: Vec<usize> },
    /// No copy vouches for itself, but the unchecked copies agree (or a strict majority of two
    /// or more of them does): `copy` is the best there is, as on an array without checksums.
    Unverified { copy: usize },
    /// A chunk the layout keeps two or more copies of has one unchecked copy left and no
    /// other that vouches for itself: nothing can tell its rot from its data (no redundancy
    /// is left to check it), so it is not used, as a parity row with no redundancy left does
    /// not use unchecked cells ([`Recovered::Rebuilt::unchecked`]).
    Unconfirmed { copy: usize },
    /// No copy vouches for itself and the unchecked copies differ: which is right cannot be
    /// told, and a guess could be old data.
    Disagree { copies: Vec<usize> },
    /// Every copy read fails its checksum (`copies`), and none is unchecked.
    Corrupt { copies: Vec<usize> },
    /// No copy could be read.
    Unavailable,
}

/// Chooses among the copies of a mirror chunk: the first that vouches for itself; else the
/// unchecked ones when they agree (`same(i, j)`: copies i and j hold the same bytes), or a
/// strict majority of two or more of them when they do not, and,
/// where the layout keeps two or more copies (`redundant`), when there are two of them to
/// agree; a copy failing its checksum is never used. (`cells` may leave out copies known to
/// be gone, as a rebuild leaves out its targets and failed members.)
pub fn choose_copy(
    cells: &[Cell],
    redundant: bool,
    same: impl Fn(usize, usize) -> bool,
) -> CopyChoice {
    if let Some(copy) = cells.iter().position(|&c| c == Cell::Good) {
        let rewrite = (0..cells.len())
            .filter(|&i| {
                i != copy && matches!(cells[i], Cell::Bad | Cell::Unreadable | Cell::Unchecked)
            })
            .collect();
        return CopyChoice::Use { copy, rewrite };
    }
    let unchecked: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i] == Cell::Unchecked)
        .collect();
    if let Some(&first) = unchecked.first() {
        // Unchecked copies that differ: a strict majority of two or more of them decides, as
        // in the scrub (copies fail independently, and two rotten alike are no likelier than
        // a forged checksum). Before, a three-copy layout with one copy read rotten failed
        // reads and writes there while the two others agreed (simulator seed 31003164).
        let majority = || {
            unchecked.iter().copied().find(|&i| {
                let n = unchecked.iter().filter(|&&j| same(i, j)).count();
                n >= 2 && n * 2 > unchecked.len()
            })
        };
        return if !unchecked.iter().all(|&i| same(first, i)) {
            match majority() {
                Some(copy) => CopyChoice::Unverified { copy },
                None => CopyChoice::Disagree { copies: unchecked },
            }
        } else if redundant && unchecked.len() == 1 {
            CopyChoice::Unconfirmed { copy: first }
        } else {
            CopyChoice::Unverified { copy: first }
        };
    }
    let bad: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i] == Cell::Bad)
        .collect();
    if bad.is_empty() {
        CopyChoice::Unavailable
    } else {
        CopyChoice::Corrupt { copies: bad }
    }
}

/// How a write updates a row's parity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The write covers every data cell: parity from the new data alone, no reads.
    FullRow,
    /// Read the old data of the touched cells and the old parity over the span; new parity =
    /// old parity plus the change.
    ReadModifyWrite,
    /// Read the untouched data over the span; new parity from the merged data.
    ReconstructWrite,
    /// Recover the whole span first (a cell is missing or was found damaged), merge, and
    /// generate parity from the recovered row.
    Reconstruct,
}

/// A row's write, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritePlan {
    pub method: Method,
    /// The data cells the write touches and the range of each (chunk-relative), ascending.
    pub touched: Vec<(usize, Range<u64>)>,
    /// The chunk-relative span parity is updated over (the union of the touched ranges; the
    /// whole chunk for a full row).
    pub span: Range<u64>,
    /// Member reads the method needs: (row position, chunk-relative range); for
    /// [`Method::ReadModifyWrite`] the parity cells come first. Empty for
    /// [`Method::Reconstruct`], whose reads [`recover`] decides.
    pub reads: Vec<(usize, Range<u64>)>,
}

impl WritePlan {
    /// Bytes the plan reads from members.
    pub fn read_bytes(&self) -> u64 {
        self.reads.iter().map(|(_, r)| r.end - r.start).sum()
    }
}

/// The shape of a parity row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowShape {
    /// Data cells per row.
    pub data: usize,
    /// Parity cells per row (1 or 2).
    pub parity: usize,
    /// Bytes per cell.
    pub chunk: u64,
}

impl RowShape {
    /// The part of row-relative `range` that falls in data cell `d`, chunk-relative.
    pub fn cell_range(&self, range: &Range<u64>, d: usize) -> Option<Range<u64>> {
        let lo = range.start.max(d as u64 * self.chunk);
        let hi = range.end.min((d as u64 + 1) * self.chunk);
        (lo < hi).then(|| lo - d as u64 * self.chunk..hi - d as u64 * self.chunk)
    }
}

/// Plans a write of row-relative bytes `range` (non-empty, within the row's data).
/// `reconstruct`: the row is degraded, or an earlier attempt read a cell that failed its
/// checksum, so the span is recovered and checked first.
///
/// A partial write reads whichever of read-modify-write and reconstruct-write reads fewer
/// bytes (ties go to reconstruct-write, which leaves no old parity in the result).
pub fn plan_write(shape: RowShape, range: &Range<u64>, reconstruct: bool) -> WritePlan {
    let touched: Vec<(usize, Range<u64>)> = (0..shape.data)
        .filter_map(|d| shape.cell_range(range, d).map(|r| (d, r)))
        .collect();
    assert!(!touched.is_empty(), "a write touches some data cell");
    let full = touched.len() == shape.data && touched.iter().all(|(_, r)| *r == (0..shape.chunk));
    let span = if full {
        0..shape.chunk
    } else {
        touched
            .iter()
            .map(|(_, r)| r.start)
            .min()
            .expect("non-empty")
            ..touched.iter().map(|(_, r)| r.end).max().expect("non-empty")
    };
    if reconstruct {
        return WritePlan {
            method: Method::Reconstruct,
            touched,
            span,
            reads: Vec::new(),
        };
    }
    if full {
        return WritePlan {
            method: Method::FullRow,
            touched,
            span,
            reads: Vec::new(),
        };
    }
    // Read-modify-write reads the parity over the span and each touched range;
    // reconstruct-write every data cell over the span except those the write covers over all
    // of it.
    let span_len = span.end - span.start;
    let rmw_bytes =
        touched.iter().map(|(_, r)| r.end - r.start).sum::<u64>() + shape.parity as u64 * span_len;
    let whole = |d: usize| touched.iter().any(|(td, r)| *td == d && *r == span);
    let rcw_bytes = (0..shape.data).filter(|&d| !whole(d)).count() as u64 * span_len;
    let (method, reads) = if rmw_bytes < rcw_bytes {
        // Parity first, so the old data's change can be added in as each cell is read.
        let reads = (0..shape.parity)
            .map(|i| (shape.data + i, span.clone()))
            .chain(touched.iter().cloned())
            .collect();
        (Method::ReadModifyWrite, reads)
    } else {
        let reads = (0..shape.data)
            .filter(|&d| !whole(d))
            .map(|d| (d, span.clone()))
            .collect();
        (Method::ReconstructWrite, reads)
    };
    WritePlan {
        method,
        touched,
        span,
        reads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parity::SCALAR;
    use proptest::prelude::*;

    const B: usize = 4096;

    /// A model row: data cells of `blocks` 4 KiB blocks each and their parity, from the
    /// reference kernel.
    fn model_row(data: &[Vec<u8>], parity: usize) -> Vec<Vec<u8>> {
        let len = data[0].len();
        let mut p = vec![0u8; len];
        let mut q = vec![0u8; if parity == 2 { len } else { 0 }];
        let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        (SCALAR.gen_pq)(&refs, &mut p, (parity == 2).then_some(&mut q[..]));
        let mut row = data.to_vec();
        row.push(p);
        if parity == 2 {
            row.push(q);
        }
        row
    }

    /// What happened to one cell in the model, and so what its read says.
    #[derive(Clone, Copy, Debug)]
    enum Fate {
        Fine,
        /// Read fine, entries unknown; `true`: its bytes were also corrupted.
        Unchecked(bool),
        /// Bytes corrupted; its entries know the right bytes.
        Corrupt,
        Unreadable,
        Absent,
        /// Bytes right, entries wrong (a zeroed table page that passes its own hash).
        WrongEntries,
    }

    fn fates() -> impl Strategy<Value = Fate> {
        prop_oneof![
            6 => Just(Fate::Fine),
            1 => any::<bool>().prop_map(Fate::Unchecked),
            1 => Just(Fate::Corrupt),
            1 => Just(Fate::Unreadable),
            1 => Just(Fate::Absent),
            1 => Just(Fate::WrongEntries),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever happened to a row's cells, recovery never yields wrong bytes for a cell it
        /// claims to have rebuilt or left intact, except where only an unchecked, corrupted
        /// cell could tell and no redundancy was left to check it (the documented limit of an
        /// array whose table page is damaged); and it always recovers a row whose damage
        /// parity covers.
        #[test]
        fn recovery_never_returns_wrong_bytes_and_recovers_what_parity_covers(
            parity in 1usize..3,
            data in 2usize..6,
            blocks in 1usize..3,
            seed in any::<u64>(),
            fates in proptest::collection::vec(fates(), 8),
            checksums in any::<bool>(),
        ) {
            let n = data + parity;
            let fates: Vec<Fate> = fates[..n]
                .iter()
                .map(|&f| match f {
                    // Without checksums nothing is Unchecked, Bad or has entries.
                    Fate::Unchecked(_) | Fate::WrongEntries | Fate::Corrupt if !checksums => Fate::Fine,
                    f => f,
                })
                .collect();
            let mut rng = crate::rng::SplitMix64(seed);
            let cells_data: Vec<Vec<u8>> = (0..data)
                .map(|_| (0..blocks * B).map(|_| rng.next_u64() as u8).collect())
                .collect();
            let truth = model_row(&cells_data, parity);
            // What the reads return and what they say.
            let mut read: Vec<Vec<u8>> = truth.clone();
            let mut cells = vec![Cell::Good; n];
            for i in 0..n {
                match fates[i] {
                    Fate::Fine => {}
                    Fate::Unchecked(corrupt) => {
                        cells[i] = Cell::Unchecked;
                        if corrupt {
                            read[i][7] ^= 0x5a;
                        }
                    }
                    Fate::Corrupt => {
                        cells[i] = Cell::Bad;
                        read[i][B * (blocks - 1) + 3] ^= 0x11;
                    }
                    Fate::Unreadable => {
                        cells[i] = Cell::Unreadable;
                        read[i].fill(0);
                    }
                    Fate::Absent => {
                        cells[i] = Cell::Absent;
                        read[i].fill(0);
                    }
                    // Its entries say some other bytes: the read fails its checksum.
                    Fate::WrongEntries => cells[i] = Cell::Bad,
                }
            }
            let mismatches = |i: usize, bytes: &[u8]| -> Vec<usize> {
                let wanted: Option<&[u8]> = match fates[i] {
                    Fate::Unchecked(_) | Fate::Absent => None,
                    Fate::WrongEntries => return (0..blocks).collect(),
                    _ if !checksums => None,
                    _ => Some(&truth[i]),
                };
                let Some(w) = wanted else { return Vec::new() };
                (0..blocks).filter(|&b| bytes[b * B..(b + 1) * B] != w[b * B..(b + 1) * B]).collect()
            };
            let mut bufs = read.clone();
            let out = {
                let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
                recover(&SCALAR, &mut refs, &cells, parity, checksums, mismatches)
            };
            let lost = fates.iter().filter(|f| matches!(f, Fate::Corrupt | Fate::Unreadable | Fate::Absent | Fate::WrongEntries)).count();
            let unchecked = fates.iter().filter(|f| matches!(f, Fate::Unchecked(_))).count();
            let corrupt_unchecked = fates.iter().any(|f| matches!(f, Fate::Unchecked(true)));
            let corrupt_count = fates.iter().filter(|f| matches!(f, Fate::Unchecked(true))).count();
            // Unchecked cells used as read are checked by the parity the rebuild leaves
            // over: one corrupt cell is always caught (and RAID6 with both parities left
            // locates it); two can cancel out or pass for one elsewhere.
            let left = parity.saturating_sub(lost);
            let excused = corrupt_unchecked
                && lost + unchecked > parity
                && (left == 0 || corrupt_count >= 2);
            match &out {
                Recovered::Intact => {
                    prop_assert_eq!(lost, 0);
                    if !excused {
                        prop_assert_eq!(&bufs, &truth);
                    }
                }
                Recovered::Rebuilt { rebuilt, rewrite, .. } => {
                    prop_assert!(rebuilt.len() <= parity);
                    // Every rebuilt cell a member holds is rewritten, and nothing else.
                    let want: Vec<usize> = rebuilt.iter().copied().filter(|&i| cells[i].present()).collect();
                    prop_assert_eq!(rewrite, &want);
                    // Every lost cell is rebuilt.
                    for (i, cell) in cells.iter().enumerate() {
                        if cell.lost() { prop_assert!(rebuilt.contains(&i), "{} lost, not rebuilt", i); }
                    }
                    if !excused {
                        prop_assert_eq!(&bufs, &truth, "cells {:?} fates {:?}", cells, fates);
                    }
                    // Even then, a rebuilt cell whose entries (or whose bytes as read) can
                    // check it is never wrong.
                    for &i in rebuilt {
                        let checkable = checksums
                            && matches!(fates[i], Fate::Corrupt | Fate::Unreadable | Fate::WrongEntries);
                        if checkable {
                            prop_assert_eq!(&bufs[i], &truth[i], "cell {} of {:?}", i, fates);
                        }
                    }
                }
                Recovered::Lost { lost: l, .. } => prop_assert!(l.len() > parity && lost > parity),
                Recovered::Inconsistent { unchecked: u } => {
                    // Only when an unchecked cell is corrupt and parity was left to see it.
                    prop_assert!(corrupt_unchecked && left > 0, "inconsistent: {:?}", fates);
                    prop_assert!(u.iter().all(|&i| cells[i] == Cell::Unchecked));
                }
                Recovered::Contradicted { cell, block } => {
                    // Only when something unchecked fed the reconstruction, and only at a
                    // damaged cell's block.
                    prop_assert!(unchecked > 0, "contradicted at {} with nothing unchecked: {:?}", cell, fates);
                    prop_assert!(*block < blocks && cells[*cell].present() && cells[*cell] != Cell::Good);
                }
            }
            // Liveness: damage parity covers, with every unchecked cell sound, is recovered.
            if lost <= parity && !corrupt_unchecked {
                prop_assert!(matches!(out, Recovered::Intact | Recovered::Rebuilt { .. }), "{:?} for {:?}", out, fates);
            }
        }

        /// Every write plan, executed on a model row, leaves parity consistent with the new
        /// data, reads only what its method needs, and reads no more than the other method.
        #[test]
        fn write_plans_leave_parity_consistent_and_read_the_least(
            parity in 1usize..3,
            data in 2usize..6,
            chunk_blocks in 1u64..4,
            a in any::<u64>(),
            b in any::<u64>(),
            seed in any::<u64>(),
        ) {
            let chunk = chunk_blocks * 512;
            let shape = RowShape { data, parity, chunk };
            let row_len = chunk * data as u64;
            let (x, y) = (a % row_len, b % row_len);
            let range = x.min(y)..x.max(y) + 1;
            let plan = plan_write(shape, &range, false);
            let mut rng = crate::rng::SplitMix64(seed);
            let old: Vec<Vec<u8>> = (0..data)
                .map(|_| (0..chunk).map(|_| rng.next_u64() as u8).collect())
                .collect();
            let old_row = model_row(&old, parity);
            let new_bytes: Vec<u8> = (range.start..range.end).map(|_| rng.next_u64() as u8).collect();
            let mut new = old.clone();
            for (d, r) in &plan.touched {
                let lo = (*d as u64 * chunk + r.start - range.start) as usize;
                new[*d][r.start as usize..r.end as usize]
                    .copy_from_slice(&new_bytes[lo..lo + (r.end - r.start) as usize]);
            }
            let want = model_row(&new, parity);
            // Touched ranges partition the write.
            let covered: u64 = plan.touched.iter().map(|(_, r)| r.end - r.start).sum();
            prop_assert_eq!(covered, range.end - range.start);
            let s = plan.span.clone();
            let su = s.start as usize..s.end as usize;
            // Execute the plan from its reads only: unread bytes are garbage.
            let read = |pos: usize, r: &Range<u64>| -> Vec<u8> {
                assert!(
                    plan.reads.iter().any(|(p, rr)| *p == pos && rr.start <= r.start && r.end <= rr.end),
                    "read of {pos} {r:?} not planned"
                );
                old_row[pos][r.start as usize..r.end as usize].to_vec()
            };
            let got: Vec<Vec<u8>> = match plan.method {
                Method::FullRow => {
                    prop_assert!(plan.reads.is_empty());
                    prop_assert_eq!(&plan.span, &(0..chunk));
                    want[data..].to_vec()
                }
                Method::ReadModifyWrite => {
                    let mut par: Vec<Vec<u8>> = (0..parity).map(|i| read(data + i, &s)).collect();
                    for (d, r) in &plan.touched {
                        let mut delta = read(*d, r);
                        (SCALAR.xor_into)(&mut delta, &new[*d][r.start as usize..r.end as usize]);
                        let o = (r.start - s.start) as usize;
                        (SCALAR.xor_into)(&mut par[0][o..o + delta.len()], &delta);
                        if parity == 2 {
                            (SCALAR.mul_xor)(&mut par[1][o..o + delta.len()], &delta, crate::parity::gf::pow2(*d));
                        }
                    }
                    par
                }
                Method::ReconstructWrite => {
                    let merged: Vec<Vec<u8>> = (0..data)
                        .map(|d| match plan.touched.iter().find(|(td, r)| *td == d && *r == s) {
                            Some(_) => new[d][su.clone()].to_vec(),
                            None => {
                                let mut b = read(d, &s);
                                if let Some((_, r)) = plan.touched.iter().find(|(td, _)| *td == d) {
                                    let o = (r.start - s.start) as usize;
                                    b[o..o + (r.end - r.start) as usize]
                                        .copy_from_slice(&new[d][r.start as usize..r.end as usize]);
                                }
                                b
                            }
                        })
                        .collect();
                    model_row(&merged, parity)[data..].to_vec()
                }
                Method::Reconstruct => unreachable!("not asked for"),
            };
            for i in 0..parity {
                let want_span = if plan.method == Method::FullRow { &want[data + i][..] } else { &want[data + i][su.clone()] };
                prop_assert_eq!(&got[i][..], want_span, "{:?}", plan.method);
            }
            // The other method would not have read less.
            let other = match plan.method {
                Method::ReadModifyWrite => Some(Method::ReconstructWrite),
                Method::ReconstructWrite => Some(Method::ReadModifyWrite),
                _ => None,
            };
            if let Some(other) = other {
                let rmw = plan.touched.iter().map(|(_, r)| r.end - r.start).sum::<u64>() + parity as u64 * (s.end - s.start);
                let rcw = (0..data).filter(|&d| !plan.touched.iter().any(|(td, r)| *td == d && *r == s)).count() as u64 * (s.end - s.start);
                let other_bytes = if other == Method::ReadModifyWrite { rmw } else { rcw };
                prop_assert!(plan.read_bytes() <= other_bytes);
                prop_assert!(plan.reads.iter().all(|(p, _)| *p < data + parity));
            }
            // Asked to reconstruct, it does, over the same span.
            let rec = plan_write(shape, &range, true);
            prop_assert_eq!(rec.method, Method::Reconstruct);
            prop_assert_eq!(rec.span, plan.span);
        }
    }

    /// Simulator seed 31003164 (RAID10, three copies, every table page damaged, one copy read
    /// rotten): the two copies that agreed were outvoted by nothing, and reads and writes of
    /// the block failed. A strict majority of two or more unchecked copies decides; a tie
    /// does not.
    #[test]
    fn a_strict_majority_of_unchecked_copies_decides() {
        let u = [Cell::Unchecked; 3];
        let bytes = [7, 9, 7];
        let same = |i: usize, j: usize| bytes[i] == bytes[j];
        assert_eq!(
            choose_copy(&u, true, same),
            CopyChoice::Unverified { copy: 0 }
        );
        let bytes = [9, 7, 7];
        let same = |i: usize, j: usize| bytes[i] == bytes[j];
        assert_eq!(
            choose_copy(&u, true, same),
            CopyChoice::Unverified { copy: 1 }
        );
        // Two against two is no majority.
        let four = [Cell::Unchecked; 4];
        let bytes = [7, 7, 9, 9];
        let same = |i: usize, j: usize| bytes[i] == bytes[j];
        assert_eq!(
            choose_copy(&four, true, same),
            CopyChoice::Disagree {
                copies: vec![0, 1, 2, 3]
            }
        );
        // Three of five is.
        let five = [Cell::Unchecked; 5];
        let bytes = [9, 7, 9, 7, 7];
        let same = |i: usize, j: usize| bytes[i] == bytes[j];
        assert_eq!(
            choose_copy(&five, true, same),
            CopyChoice::Unverified { copy: 1 }
        );
        let tie = [Cell::Unchecked, Cell::Unchecked, Cell::Bad];
        let bytes = [7, 9, 7];
        let same = |i: usize, j: usize| bytes[i] == bytes[j];
        assert_eq!(
            choose_copy(&tie, true, same),
            CopyChoice::Disagree { copies: vec![0, 1] }
        );
    }

    proptest! {
        /// Whatever happened to a chunk's copies, the choice never uses a copy that fails its
        /// checksum or differs from the truth while a sound copy vouches for itself, and uses
        /// unchecked copies only when they agree.
        #[test]
        fn a_mirror_choice_never_uses_a_wrong_copy_when_a_sound_one_vouches(
            fates in proptest::collection::vec(0u8..6, 1..5),
            redundant in proptest::bool::ANY,
        ) {
            // 0 good, 1 unchecked sound, 2 unchecked corrupt, 3 bad, 4 unreadable, 5 absent
            let cells: Vec<Cell> = fates.iter().map(|&f| match f {
                0 => Cell::Good, 1 | 2 => Cell::Unchecked, 3 => Cell::Bad, 4 => Cell::Unreadable, _ => Cell::Absent,
            }).collect();
            // Bytes: truth is 0; a corrupt copy holds its own index + 1.
            let bytes = |i: usize| if matches!(fates[i], 2 | 3) { i + 1 } else { 0 };
            let choice = choose_copy(&cells, redundant, |i, j| bytes(i) == bytes(j));
            let any_good = fates.contains(&0);
            let unchecked: Vec<usize> = (0..cells.len()).filter(|&i| cells[i] == Cell::Unchecked).collect();
            match &choice {
                CopyChoice::Use { copy, rewrite } => {
                    prop_assert_eq!(cells[*copy], Cell::Good);
                    prop_assert_eq!(bytes(*copy), 0);
                    for &i in rewrite { prop_assert!(cells[i].present() && i != *copy); }
                    for (i, f) in fates.iter().enumerate() {
                        if (2..=4).contains(f) { prop_assert!(rewrite.contains(&i)); }
                    }
                }
                CopyChoice::Unverified { copy } => {
                    prop_assert!(!any_good);
                    prop_assert_eq!(cells[*copy], Cell::Unchecked);
                    // Wrong only when every unchecked copy is the same corruption (one copy),
                    // and then only where the layout keeps no second copy (RAID0).
                    prop_assert!(bytes(*copy) == 0 || unchecked.len() == 1);
                    prop_assert!(!redundant || unchecked.len() >= 2);
                }
                CopyChoice::Unconfirmed { copy } => {
                    prop_assert!(!any_good && redundant && unchecked == vec![*copy]);
                }
                CopyChoice::Disagree { copies } => {
                    prop_assert!(!any_good && copies.len() >= 2);
                }
                CopyChoice::Corrupt { copies } => {
                    prop_assert!(!any_good && !fates.iter().any(|&f| f == 1 || f == 2));
                    prop_assert!(copies.iter().all(|&i| cells[i] == Cell::Bad));
                }
                CopyChoice::Unavailable => {
                    prop_assert!(fates.iter().all(|&f| f == 4 || f == 5));
                }
            }
        }
    }

    #[test]
    fn unchecked_cells_are_rebuilt_only_while_redundancy_is_left_to_check_them() {
        use Cell::*;
        assert_eq!(
            plan_recovery(&[Good, Unchecked, Good], 1, true),
            Recovery::Rebuild {
                rebuild: vec![1],
                rewrite: vec![1],
                vouched: true
            }
        );
        assert_eq!(
            plan_recovery(&[Absent, Unchecked, Good], 1, true),
            Recovery::Rebuild {
                rebuild: vec![0],
                rewrite: vec![],
                vouched: false
            }
        );
        assert_eq!(
            plan_recovery(&[Absent, Bad, Good], 1, true),
            Recovery::Lost {
                lost: vec![0, 1],
                damaged: true
            }
        );
        assert_eq!(
            plan_recovery(&[Absent, Absent, Good, Good], 1, false),
            Recovery::Lost {
                lost: vec![0, 1],
                damaged: false
            }
        );
        assert_eq!(plan_recovery(&[Good; 4], 2, true), Recovery::Intact);
        // Without checksums nothing vouches.
        assert_eq!(
            plan_recovery(&[Unreadable, Good, Good], 1, false),
            Recovery::Rebuild {
                rebuild: vec![0],
                rewrite: vec![0],
                vouched: false
            }
        );
    }
}
