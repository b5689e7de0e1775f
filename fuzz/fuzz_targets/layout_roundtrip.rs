//! Layout mapping: for any accepted parameters, every logical chunk maps to distinct cells and
//! never onto its row's parity.
#![no_main]
use libfuzzer_sys::fuzz_target;
use raidcore::layout::{Layout, LayoutParams, Level, Redundancy};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let level = [
        Level::Raid0,
        Level::Raid1,
        Level::Raid5,
        Level::Raid6,
        Level::Raid10,
        Level::F1,
    ][data[0] as usize % 6];
    let n = 2 + data[1] as usize % 14;
    let mut p = LayoutParams::with_defaults(level, n, 4096);
    if level == Level::Raid10 {
        p.copies = 2 + data[2] as usize % 3;
    }
    if level == Level::F1 {
        p.weights = (0..n)
            .map(|i| *data.get(3 + i).unwrap_or(&1) as u32 % 9)
            .collect();
    }
    let Ok(l) = Layout::new(&p) else { return };
    let rows = 1 + data[2] as u64 % 37;
    let mut seen = std::collections::HashSet::new();
    for c in 0..l.logical_chunks(rows) {
        match l.redundancy() {
            Redundancy::Parity { parity } => {
                let (r, d) = l.parity_locate(c);
                let s = l.data_slot(r, d);
                assert!(seen.insert((s, r)));
                assert_ne!(s, l.p_slot(r));
                if parity == 2 {
                    assert_ne!(s, l.q_slot(r));
                }
            }
            Redundancy::Mirror { copies } => {
                for k in 0..copies {
                    assert!(seen.insert(l.mirror_cell(c, k)));
                }
            }
        }
    }
});
