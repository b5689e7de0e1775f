//! Engine tests over memory and fault-injecting members against a byte-array model.

use std::path::PathBuf;
use std::sync::Arc;

use super::*;
use crate::device::{FaultMember, MemMember};
use crate::layout::{f1_weights, LayoutParams, Level, Redundancy};
use crate::parity::SCALAR;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn params(level: Level, n: usize, chunk: u64) -> LayoutParams {
    let mut p = LayoutParams::with_defaults(level, n, chunk);
    if level == Level::F1 {
        p.weights = f1_weights(n, 1, 2);
    }
    p
}

fn make(p: &LayoutParams, member_bytes: u64) -> (Array, Vec<Arc<FaultMember>>) {
    let faults: Vec<Arc<FaultMember>> = (0..p.members)
        .map(|i| {
            Arc::new(FaultMember::new(Box::new(MemMember::named(
                member_bytes,
                &format!("m{i}"),
            ))))
        })
        .collect();
    let members = faults
        .iter()
        .enumerate()
        .map(|(i, f)| (PathBuf::from(format!("m{i}")), f.clone() as Arc<dyn Member>))
        .collect();
    let spec = CreateSpec {
        name: "t".into(),
        layout: p.clone(),
        overprovision_pct: 0.0,
        endurance_bytes: vec![],
    };
    (
        Array::create_on(members, &spec, &mut |_, _| {}).unwrap(),
        faults,
    )
}

/// Checks every row's parity (or every chunk's copies) against its data, reading members directly.
fn assert_consistent(a: &Array) {
    let l = a.layout();
    let c = l.chunk() as usize;
    let rows = a.superblock().data_rows;
    let read = |slot: usize, row: u64| -> Option<Vec<u8>> {
        let m = a.slots[slot].usable()?;
        let mut b = vec![0u8; c];
        m.read_at(&mut b, a.cell_offset(row, 0)).ok()?;
        Some(b)
    };
    match l.redundancy() {
        Redundancy::Parity { parity } => {
            for r in 0..rows {
                let slots = a.row_slots(r, parity);
                let bufs: Vec<Option<Vec<u8>>> = slots.iter().map(|&s| read(s, r)).collect();
                if bufs.iter().any(|b| b.is_none()) {
                    continue;
                }
                let bufs: Vec<Vec<u8>> = bufs.into_iter().map(|b| b.unwrap()).collect();
                let d = slots.len() - parity;
                let data: Vec<&[u8]> = bufs[..d].iter().map(|b| &b[..]).collect();
                let mut p = vec![0u8; c];
                let mut q = vec![0u8; c];
                (SCALAR.gen_pq)(&data, &mut p, Some(&mut q));
                assert_eq!(p, bufs[d], "row {r} P");
                if parity == 2 {
                    assert_eq!(q, bufs[d + 1], "row {r} Q");
                }
            }
        }
        Redundancy::Mirror { copies } => {
            for ch in 0..l.logical_chunks(rows) {
                let got: Vec<Vec<u8>> = (0..copies)
                    .filter_map(|k| {
                        let (s, r) = l.mirror_cell(ch, k);
                        read(s, r)
                    })
                    .collect();
                assert!(
                    got.windows(2).all(|w| w[0] == w[1]),
                    "chunk {ch} copies differ"
                );
            }
        }
    }
}

fn random_ops(a: &Array, model: &mut [u8], rng: &mut Rng, ops: usize) {
    let size = model.len() as u64;
    let c = a.layout().chunk();
    for _ in 0..ops {
        let len = match rng.below(4) {
            0 => rng.below(100) + 1,
            1 => rng.below(c * 3) + 1,
            2 => c * a.layout().data_per_row().max(1) as u64 * (1 + rng.below(2)),
            _ => rng.below(4 * c) + 1,
        }
        .min(size);
        let off = if rng.below(3) == 0 {
            rng.below(size / c) * c
        } else {
            rng.below(size - len + 1)
        };
        let len = len.min(size - off);
        if rng.below(3) == 0 {
            let mut got = vec![0u8; len as usize];
            a.read(&mut got, off).unwrap();
            assert_eq!(
                &got[..],
                &model[off as usize..(off + len) as usize],
                "read at {off}+{len}"
            );
        } else {
            let data = rng.bytes(len as usize);
            a.write(&data, off).unwrap();
            model[off as usize..(off + len) as usize].copy_from_slice(&data);
        }
    }
}

fn read_all(a: &Array) -> Vec<u8> {
    let mut out = vec![0u8; a.size() as usize];
    a.read(&mut out, 0).unwrap();
    out
}

const LEVELS: [(Level, usize); 8] = [
    (Level::Raid0, 3),
    (Level::Raid1, 3),
    (Level::Raid10, 4),
    (Level::Raid10, 3),
    (Level::Raid5, 4),
    (Level::F1, 5),
    (Level::Raid6, 4),
    (Level::Raid6, 6),
];

#[test]
fn random_io_matches_model_and_parity_stays_consistent() {
    for (i, (level, n)) in LEVELS.iter().enumerate() {
        for (k, kernel) in crate::parity::Kernel::all().into_iter().enumerate() {
            let (mut a, _) = make(&params(*level, *n, 4096), 3 << 20);
            a.set_kernel(kernel);
            let mut model = vec![0u8; a.size() as usize];
            let mut rng = Rng(i as u64 * 10 + k as u64);
            random_ops(&a, &mut model, &mut rng, 300);
            assert_eq!(read_all(&a), model, "{level:?} n={n}");
            assert_consistent(&a);
        }
    }
}

#[test]
fn degraded_reads_and_writes_up_to_tolerance() {
    for (i, (level, n)) in LEVELS.iter().enumerate() {
        let (a, faults) = make(&params(*level, *n, 8192), 3 << 20);
        let mut model = vec![0u8; a.size() as usize];
        let mut rng = Rng(100 + i as u64);
        random_ops(&a, &mut model, &mut rng, 150);
        let tol = a.layout().tolerance();
        // Fail members one at a time, from the highest slot, exercising I/O errors mid-operation.
        for t in 0..tol {
            let victim = n - 1 - t * 2 % n;
            faults[victim].fail_after(rng.below(20));
            random_ops(&a, &mut model, &mut rng, 150);
            assert_eq!(
                read_all(&a),
                model,
                "{level:?} n={n} after losing {} members",
                t + 1
            );
        }
        if tol > 0 {
            assert_ne!(a.state(), ArrayState::Clean);
        }
        // Let every remaining member see traffic, then fail one more member beyond tolerance.
        let victim = (0..*n).find(|&s| a.slots[s].usable().is_some()).unwrap();
        faults[victim].fail_after(0);
        let mut buf = vec![0u8; a.size() as usize];
        let r = a.read(&mut buf, 0);
        if matches!(a.layout().redundancy(), Redundancy::Parity { .. }) || *level == Level::Raid0 {
            assert!(r.is_err(), "{level:?}: read succeeded past tolerance");
            assert_eq!(a.state(), ArrayState::Failed);
        }
    }
}

#[test]
fn rcw_and_rmw_produce_the_same_result() {
    // Single small writes use RMW; wide partial writes use RCW. Both must keep parity right.
    for level in [Level::Raid5, Level::Raid6, Level::F1] {
        let (a, _) = make(&params(level, 6, 4096), 3 << 20);
        let mut model = vec![0u8; a.size() as usize];
        let mut rng = Rng(7);
        for _ in 0..200 {
            let off = rng.below(a.size() - 20_000);
            let len = if rng.below(2) == 0 {
                1 + rng.below(512)
            } else {
                8192 + rng.below(8192)
            };
            let data = rng.bytes(len as usize);
            a.write(&data, off).unwrap();
            model[off as usize..(off + len) as usize].copy_from_slice(&data);
        }
        assert_eq!(read_all(&a), model);
        assert_consistent(&a);
    }
}

#[test]
fn full_row_writes_read_nothing_and_count_parity() {
    let (a, faults) = make(&params(Level::Raid5, 4, 4096), 3 << 20);
    let before: Vec<u64> = faults.iter().map(|f| f.ops()).collect();
    let row = vec![0x5au8; 3 * 4096];
    a.write(&row, 0).unwrap();
    // 3 data + 1 parity writes, plus the dirty-flag superblock write on each member.
    let after: Vec<u64> = faults.iter().map(|f| f.ops()).collect();
    let ops: u64 = after.iter().zip(&before).map(|(a, b)| a - b).sum();
    assert_eq!(
        ops,
        4 + 4 * 2,
        "writes plus superblock write+flush per member, no reads"
    );
    let m = a.members();
    let data: u64 = m.iter().map(|x| x.wear.data_bytes).sum();
    let parity: u64 = m.iter().map(|x| x.wear.parity_bytes).sum();
    assert_eq!((data, parity), (3 * 4096, 4096));
}

#[test]
fn write_skew_follows_parity_weights() {
    // F1 with weights (4,1,1,1): single-chunk writes put most parity on slot 0.
    let mut p = LayoutParams::with_defaults(Level::F1, 4, 4096);
    p.weights = vec![4, 1, 1, 1];
    let (a, _) = make(&p, 3 << 20);
    let rows = a.superblock().data_rows;
    for r in 0..rows {
        for d in 0..3u64 {
            a.write(&[1u8; 4096], (r * 3 + d) * 4096).unwrap();
        }
    }
    let w: Vec<u64> = a.members().iter().map(|m| m.wear.parity_bytes).collect();
    assert!(w[0] > 3 * w[1], "parity bytes {w:?}");
    // Expected share: p_i/k + (1-p_i)/(N-1) with k = 1.
    let total: u64 = a
        .members()
        .iter()
        .map(|m| m.wear.data_bytes + m.wear.parity_bytes)
        .sum();
    let share0 = (w[0] + a.members()[0].wear.data_bytes) as f64 / total as f64;
    let expect = (4.0 / 7.0 + (3.0 / 7.0) / 3.0) / 2.0;
    assert!(
        (share0 - expect).abs() < 0.02,
        "slot 0 share {share0}, expected {expect}"
    );
}

#[test]
fn array_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Array>();
}

/// Many threads writing single chunks of the same rows at once (and reading) must leave every
/// row's parity consistent and every write in place: the row lock serialises read-modify-write.
#[test]
fn concurrent_writers_on_shared_rows_keep_parity_consistent() {
    for level in [Level::Raid5, Level::Raid6, Level::F1, Level::Raid10] {
        let (a, _) = make(&params(level, 5, 4096), 3 << 20);
        let a = Arc::new(a);
        let chunk = 4096u64;
        let chunks = 8;
        let threads = 4u64;
        std::thread::scope(|s| {
            for t in 0..threads {
                let a = a.clone();
                s.spawn(move || {
                    let mut rng = Rng(t);
                    for round in 0..300u64 {
                        // Thread t owns the chunks c with c % threads == t; neighbours share rows.
                        for c in (t..chunks).step_by(threads as usize) {
                            let fill = (t * 31 + round) as u8;
                            let off = c * chunk + rng.below(chunk - 100);
                            a.write(&[fill; 100], off).unwrap();
                            let mut back = [0u8; 100];
                            a.read(&mut back, off).unwrap();
                            assert_eq!(back, [fill; 100]);
                        }
                    }
                });
            }
        });
        assert_consistent(&a);
    }
}
