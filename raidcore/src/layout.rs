//! Layout: where every logical chunk, mirror copy and parity chunk lives. Pure geometry: no I/O,
//! no allocation on the lookup paths (the skew sequence is computed once at construction).
//!
//! Terms (see ARCHITECTURE.md): N members in slots 0..N-1, chunk size C, logical chunk c,
//! row r. Parity levels (RAID5, F1/skewed, RAID6) place D data chunks and 1 or 2 parity chunks
//! in each row; mirror levels (RAID0, RAID1, RAID10) place every logical chunk in one or more
//! (slot, row) cells and have no parity.

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};

/// Largest member count we accept (superblock space bounds it).
pub const MAX_MEMBERS: usize = 64;
/// Longest skew cycle (sum of parity weights).
pub const MAX_SKEW_CYCLE: u32 = 4096;
/// Smallest chunk size.
pub const MIN_CHUNK: u64 = 4096;
/// Largest chunk size.
pub const MAX_CHUNK: u64 = 16 << 20;

/// The RAID level as users name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Level {
    Raid0,
    Raid1,
    Raid5,
    Raid6,
    Raid10,
    /// RAID5 with skewed parity weights (F1 or any `--skew`).
    F1,
}

impl Level {
    /// The name used in JSON and on the command line ("raid5", "f1").
    pub fn name(self) -> &'static str {
        match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
            Level::Raid10 => "raid10",
            Level::F1 => "f1",
        }
    }

    /// Parses "0", "raid0", ..., "f1".
    pub fn parse(s: &str) -> Result<Level> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("raid").unwrap_or(&t);
        Ok(match t {
            "0" => Level::Raid0,
            "1" => Level::Raid1,
            "5" => Level::Raid5,
            "6" => Level::Raid6,
            "10" => Level::Raid10,
            "f1" => Level::F1,
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("unknown RAID level {s:?}: expected one of 0, 1, 5, 6, 10, f1"),
                ))
            }
        })
    }

    /// Fewest members the level accepts.
    pub fn min_members(self) -> usize {
        match self {
            Level::Raid0 | Level::Raid1 | Level::Raid10 => 2,
            Level::Raid5 | Level::F1 => 3,
            Level::Raid6 => 4,
        }
    }
}

/// How a level protects data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redundancy {
    /// Every logical chunk lives in `copies` cells (RAID0: 1, RAID1: N, RAID10: K).
    Mirror { copies: usize },
    /// Rows of D data chunks plus `parity` (1 or 2) parity chunks.
    Parity { parity: usize },
}

/// A validated layout. Construct with [`Layout::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    level: Level,
    n: usize,
    chunk: u64,
    copies: usize,
    weights: Vec<u32>,
    /// Parity slot of row r is `seq[r % seq.len()]` (parity levels only).
    seq: Vec<u16>,
}

/// Parameters as given by a user or a superblock, before validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutParams {
    pub level: Level,
    pub members: usize,
    pub chunk_bytes: u64,
    /// RAID10 copies K (1 for other levels except RAID1, where it is N).
    pub copies: usize,
    /// Parity weights for RAID5 / F1 (empty otherwise).
    pub weights: Vec<u32>,
}

impl LayoutParams {
    /// Parameters for a level with its defaults: RAID10 K = 2, RAID5 all weights 1,
    /// F1 weight 2 on slot 0.
    pub fn with_defaults(level: Level, members: usize, chunk_bytes: u64) -> LayoutParams {
        let copies = match level {
            Level::Raid1 => members,
            Level::Raid10 => 2,
            _ => 1,
        };
        let weights = match level {
            Level::Raid5 => vec![1; members],
            Level::F1 => f1_weights(members, 0, 1),
            _ => Vec::new(),
        };
        LayoutParams {
            level,
            members,
            chunk_bytes,
            copies,
            weights,
        }
    }
}

/// F1 weights: `1 + extra` on the parity-heavy slot, 1 on the others.
pub fn f1_weights(members: usize, heavy_slot: usize, extra: u32) -> Vec<u32> {
    (0..members)
        .map(|i| if i == heavy_slot { 1 + extra } else { 1 })
        .collect()
}

/// The parity slot sequence of one skew cycle, by smooth weighted round-robin: each row adds
/// every weight to its slot's counter, picks the largest counter (ties to the highest slot)
/// and subtracts the cycle length from it.
pub fn skew_sequence(weights: &[u32]) -> Vec<u16> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut cur = vec![0i64; weights.len()];
    let mut seq = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut pick = 0;
        for i in 0..weights.len() {
            cur[i] += i64::from(weights[i]);
            if cur[i] >= cur[pick] {
                pick = i;
            }
        }
        cur[pick] -= total;
        seq.push(pick as u16);
    }
    seq
}

impl Layout {
    /// Validates the parameters (member counts, chunk size, weights, copies) and builds the layout.
    pub fn new(p: &LayoutParams) -> Result<Layout> {
        let n = p.members;
        let level = p.level;
        let invalid = |msg: String| Err(Error::new(ErrorKind::InvalidInput, msg));
        if n < level.min_members() {
            return invalid(format!(
                "{} needs at least {} members, got {n}",
                level.name(),
                level.min_members()
            ));
        }
        if n > MAX_MEMBERS {
            return invalid(format!(
                "at most {MAX_MEMBERS} members are supported, got {n}"
            ));
        }
        let c = p.chunk_bytes;
        if !c.is_power_of_two() || !(MIN_CHUNK..=MAX_CHUNK).contains(&c) {
            return invalid(format!(
                "chunk size {c} is not a power of two between {MIN_CHUNK} and {MAX_CHUNK} bytes"
            ));
        }
        let copies = match level {
            Level::Raid1 => {
                if p.copies != n {
                    return invalid(format!(
                        "raid1 keeps one copy per member ({n}), not {}",
                        p.copies
                    ));
                }
                n
            }
            Level::Raid10 => {
                if p.copies < 2 || p.copies > n {
                    return invalid(format!(
                        "raid10 copies must be between 2 and the member count {n}, got {}",
                        p.copies
                    ));
                }
                p.copies
            }
            _ => {
                if p.copies != 1 {
                    return invalid(format!(
                        "--copies applies to raid10 only (level {})",
                        level.name()
                    ));
                }
                1
            }
        };
        let (weights, seq) = match level {
            Level::Raid5 | Level::F1 => {
                if p.weights.len() != n {
                    return invalid(format!(
                        "{} parity weights given for {n} members: give exactly one weight per member",
                        p.weights.len()
                    ));
                }
                let total: u64 = p.weights.iter().map(|&w| u64::from(w)).sum();
                if total == 0 {
                    return invalid(
                        "parity weights sum to 0: at least one member must hold parity".into(),
                    );
                }
                if total > u64::from(MAX_SKEW_CYCLE) {
                    return invalid(format!(
                        "parity weights sum to {total}; the largest supported cycle is {MAX_SKEW_CYCLE}"
                    ));
                }
                if level == Level::Raid5 && p.weights.iter().any(|&w| w != 1) {
                    return invalid(
                        "raid5 has equal parity weights; use --level f1 for skewed parity".into(),
                    );
                }
                (p.weights.clone(), skew_sequence(&p.weights))
            }
            _ => {
                if !p.weights.is_empty() {
                    return invalid(format!(
                        "parity weights apply to raid5/f1 only (level {})",
                        level.name()
                    ));
                }
                let seq = if level == Level::Raid6 {
                    // RAID6 rotates P like left-symmetric RAID5.
                    (0..n).map(|r| (n - 1 - r) as u16).collect()
                } else {
                    Vec::new()
                };
                (Vec::new(), seq)
            }
        };
        Ok(Layout {
            level,
            n,
            chunk: c,
            copies,
            weights,
            seq,
        })
    }

    pub fn params(&self) -> LayoutParams {
        LayoutParams {
            level: self.level,
            members: self.n,
            chunk_bytes: self.chunk,
            copies: self.copies,
            weights: self.weights.clone(),
        }
    }

    pub fn level(&self) -> Level {
        self.level
    }
    pub fn members(&self) -> usize {
        self.n
    }
    pub fn chunk(&self) -> u64 {
        self.chunk
    }
    /// For mirror levels: which (logical chunk, copy) the cell (slot, row) of an array with
    /// `rows` rows holds, if any.
    pub fn mirror_chunk_at(&self, rows: u64, slot: usize, row: u64) -> Option<(u64, usize)> {
        let (c, k) = match self.level() {
            Level::Raid1 => (row, slot),
            Level::Raid10 => {
                let x = row * self.members() as u64 + slot as u64;
                (
                    x / self.copies() as u64,
                    (x % self.copies() as u64) as usize,
                )
            }
            _ => return None,
        };
        (c < self.logical_chunks(rows)).then_some((c, k))
    }

    pub fn copies(&self) -> usize {
        self.copies
    }
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    pub fn redundancy(&self) -> Redundancy {
        match self.level {
            Level::Raid0 => Redundancy::Mirror { copies: 1 },
            Level::Raid1 | Level::Raid10 => Redundancy::Mirror {
                copies: self.copies,
            },
            Level::Raid5 | Level::F1 => Redundancy::Parity { parity: 1 },
            Level::Raid6 => Redundancy::Parity { parity: 2 },
        }
    }

    /// Number of parity chunks per row (0 for mirror levels).
    pub fn parity_count(&self) -> usize {
        match self.redundancy() {
            Redundancy::Parity { parity } => parity,
            Redundancy::Mirror { .. } => 0,
        }
    }

    /// Data chunks per row for parity levels (D); for mirror levels the number of distinct
    /// logical chunks per row of cells (N / copies, possibly fractional for RAID10, so unused).
    pub fn data_per_row(&self) -> usize {
        match self.redundancy() {
            Redundancy::Parity { parity } => self.n - parity,
            Redundancy::Mirror { copies } => self.n / copies,
        }
    }

    /// Members that can be lost with no data lost, whatever members they are.
    pub fn tolerance(&self) -> usize {
        match self.redundancy() {
            Redundancy::Parity { parity } => parity,
            Redundancy::Mirror { copies } => copies - 1,
        }
    }

    /// Logical chunks that fit when every member holds `rows` chunk rows.
    pub fn logical_chunks(&self, rows: u64) -> u64 {
        match self.redundancy() {
            Redundancy::Parity { parity } => rows * (self.n - parity) as u64,
            Redundancy::Mirror { copies } => rows * self.n as u64 / copies as u64,
        }
    }

    /// Parity slot of row `r` (parity levels).
    #[inline]
    pub fn p_slot(&self, row: u64) -> usize {
        debug_assert!(!self.seq.is_empty());
        self.seq[(row % self.seq.len() as u64) as usize] as usize
    }

    /// Q slot of row `r` (RAID6).
    #[inline]
    pub fn q_slot(&self, row: u64) -> usize {
        debug_assert_eq!(self.level, Level::Raid6);
        (self.p_slot(row) + 1) % self.n
    }

    /// Slot of data chunk `d` (0..D) of row `r` (parity levels).
    #[inline]
    pub fn data_slot(&self, row: u64, d: usize) -> usize {
        let p = self.p_slot(row);
        let first = if self.level == Level::Raid6 { 2 } else { 1 };
        (p + first + d) % self.n
    }

    /// For parity levels: (row, index in row) of logical chunk `c`.
    #[inline]
    pub fn parity_locate(&self, c: u64) -> (u64, usize) {
        let d = self.data_per_row() as u64;
        (c / d, (c % d) as usize)
    }

    /// For mirror levels: the (slot, row) cell of copy `k` of logical chunk `c`.
    #[inline]
    pub fn mirror_cell(&self, c: u64, k: usize) -> (usize, u64) {
        debug_assert!(k < self.copies);
        match self.level {
            Level::Raid0 => ((c % self.n as u64) as usize, c / self.n as u64),
            Level::Raid1 => (k, c),
            Level::Raid10 => {
                let x = c * self.copies as u64 + k as u64;
                ((x % self.n as u64) as usize, x / self.n as u64)
            }
            _ => unreachable!("mirror_cell on a parity level"),
        }
    }

    /// Whether the array keeps every byte readable with the slots in `lost` unavailable.
    pub fn survives(&self, lost: &[bool]) -> bool {
        debug_assert_eq!(lost.len(), self.n);
        let missing = lost.iter().filter(|&&l| l).count();
        match self.redundancy() {
            Redundancy::Parity { parity } => missing <= parity,
            Redundancy::Mirror { copies } => {
                if missing == 0 {
                    return true;
                }
                // The slot pattern of chunk copies repeats every N chunks.
                (0..self.n as u64).all(|c| (0..copies).any(|k| !lost[self.mirror_cell(c, k).0]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn layouts() -> impl Strategy<Value = Layout> {
        (
            0usize..6,
            2usize..12,
            0u32..4,
            0usize..12,
            2usize..5,
            proptest::collection::vec(0u32..6, 12),
        )
            .prop_filter_map("valid layout", |(lv, n, extra, heavy, k, ws)| {
                let level = [
                    Level::Raid0,
                    Level::Raid1,
                    Level::Raid5,
                    Level::Raid6,
                    Level::Raid10,
                    Level::F1,
                ][lv];
                let mut p = LayoutParams::with_defaults(level, n, 4096);
                match level {
                    Level::F1 if extra == 0 => p.weights = ws[..n].to_vec(),
                    Level::F1 => p.weights = f1_weights(n, heavy % n, extra),
                    Level::Raid10 => p.copies = k,
                    _ => {}
                }
                Layout::new(&p).ok()
            })
    }

    #[test]
    fn f1_example_sequence_from_blueprint() {
        assert_eq!(skew_sequence(&[2, 1, 1, 1]), vec![0, 3, 2, 1, 0]);
    }

    #[test]
    fn raid4_weights_put_all_parity_on_slot0() {
        assert_eq!(skew_sequence(&[1, 0, 0, 0]), vec![0]);
    }

    #[test]
    fn raid5_matches_md_left_symmetric() {
        let l = Layout::new(&LayoutParams::with_defaults(Level::Raid5, 4, 4096)).unwrap();
        // md left-symmetric, 4 disks: row0 P on 3, data 0,1,2 on 0,1,2; row1 P on 2, data on 3,0,1.
        assert_eq!(l.p_slot(0), 3);
        assert_eq!(
            (0..3).map(|d| l.data_slot(0, d)).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(l.p_slot(1), 2);
        assert_eq!(
            (0..3).map(|d| l.data_slot(1, d)).collect::<Vec<_>>(),
            vec![3, 0, 1]
        );
    }

    #[test]
    fn raid6_matches_md() {
        let l = Layout::new(&LayoutParams::with_defaults(Level::Raid6, 5, 4096)).unwrap();
        assert_eq!((l.p_slot(0), l.q_slot(0)), (4, 0));
        assert_eq!(
            (0..3).map(|d| l.data_slot(0, d)).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!((l.p_slot(1), l.q_slot(1)), (3, 4));
        assert_eq!(
            (0..3).map(|d| l.data_slot(1, d)).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn raid10_near2_matches_md_n2() {
        let l = Layout::new(&LayoutParams::with_defaults(Level::Raid10, 3, 4096)).unwrap();
        // md n2 over 3 disks: row0 = A A B, row1 = B C C.
        assert_eq!(l.mirror_cell(0, 0), (0, 0));
        assert_eq!(l.mirror_cell(0, 1), (1, 0));
        assert_eq!(l.mirror_cell(1, 0), (2, 0));
        assert_eq!(l.mirror_cell(1, 1), (0, 1));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = LayoutParams::with_defaults(Level::Raid6, 3, 4096);
        assert!(Layout::new(&p).is_err());
        p = LayoutParams::with_defaults(Level::Raid5, 4, 3000);
        assert!(Layout::new(&p).is_err());
        p = LayoutParams::with_defaults(Level::F1, 4, 4096);
        p.weights = vec![1, 1, 1];
        assert!(Layout::new(&p)
            .unwrap_err()
            .to_string()
            .contains("3 parity weights"));
        p.weights = vec![0, 0, 0, 0];
        assert!(Layout::new(&p).is_err());
        p = LayoutParams::with_defaults(Level::Raid10, 2, 4096);
        p.copies = 3;
        assert!(Layout::new(&p).is_err());
        assert!(Level::parse("raid7").is_err());
    }

    proptest! {
        #[test]
        fn skew_sequence_holds_each_slot_weight_times(ws in proptest::collection::vec(0u32..9, 2..12)) {
            prop_assume!(ws.iter().sum::<u32>() > 0);
            let seq = skew_sequence(&ws);
            for (i, &w) in ws.iter().enumerate() {
                prop_assert_eq!(seq.iter().filter(|&&s| s as usize == i).count(), w as usize);
            }
        }

        #[test]
        fn raid5_equals_f1_with_unit_weights(n in 3usize..16, row in 0u64..10_000) {
            let r5 = Layout::new(&LayoutParams::with_defaults(Level::Raid5, n, 4096)).unwrap();
            let mut p = LayoutParams::with_defaults(Level::F1, n, 4096);
            p.weights = vec![1; n];
            let f1 = Layout::new(&p).unwrap();
            prop_assert_eq!(r5.p_slot(row), f1.p_slot(row));
            prop_assert_eq!(r5.p_slot(row), n - 1 - (row as usize % n));
            for d in 0..n - 1 {
                prop_assert_eq!(r5.data_slot(row, d), f1.data_slot(row, d));
            }
        }

        #[test]
        fn layout_is_a_bijection_and_parity_never_meets_data(l in layouts(), rows in 1u64..40) {
            let n = l.members();
            let mut owner: Vec<Option<(u64, usize)>> = vec![None; n * rows as usize];
            let chunks = l.logical_chunks(rows);
            for c in 0..chunks {
                match l.redundancy() {
                    Redundancy::Parity { parity } => {
                        let (r, d) = l.parity_locate(c);
                        prop_assert!(r < rows);
                        let s = l.data_slot(r, d);
                        let cell = r as usize * n + s;
                        prop_assert!(owner[cell].is_none(), "cell reused");
                        owner[cell] = Some((c, 0));
                        prop_assert_ne!(s, l.p_slot(r));
                        if parity == 2 { prop_assert_ne!(s, l.q_slot(r)); }
                    }
                    Redundancy::Mirror { copies } => {
                        let mut slots = HashSet::new();
                        for k in 0..copies {
                            let (s, r) = l.mirror_cell(c, k);
                            prop_assert!(r < rows);
                            prop_assert!(slots.insert(s), "two copies on one slot");
                            let cell = r as usize * n + s;
                            prop_assert!(owner[cell].is_none(), "cell reused");
                            owner[cell] = Some((c, k));
                        }
                    }
                }
            }
            // Every cell is data of exactly one chunk, parity, or (RAID10 tail) unused.
            if let Redundancy::Parity { parity } = l.redundancy() {
                for r in 0..rows {
                    let used = (0..n).filter(|&s| owner[r as usize * n + s].is_some()).count();
                    prop_assert_eq!(used, n - parity);
                }
            } else {
                let unused = owner.iter().filter(|o| o.is_none()).count();
                prop_assert!(unused < l.copies());
            }
        }
    }
}
