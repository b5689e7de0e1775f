//! Random operation sequences (writes, reads, flushes, member faults) on a memory-backed array
//! checked against a byte model: every read that succeeds returns the model's bytes, and while
//! the faults stay within the level's tolerance nothing fails.
#![no_main]
use std::path::PathBuf;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use raidcore::array::csum::CsumAlgo;
use raidcore::array::{Array, CreateSpec};
use raidcore::device::{FaultMember, MemMember, Member};
use raidcore::layout::{LayoutParams, Level};

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (level, n) = [
        (Level::Raid5, 4),
        (Level::Raid6, 5),
        (Level::Raid1, 3),
        (Level::Raid10, 4),
        (Level::F1, 4),
    ][data[0] as usize % 5];
    let mut p = LayoutParams::with_defaults(level, n, 4096);
    if level == Level::F1 {
        p.weights = vec![3, 1, 1, 1];
    }
    let faults: Vec<Arc<FaultMember>> = (0..n)
        .map(|_| Arc::new(FaultMember::new(Box::new(MemMember::new(3 << 20)))))
        .collect();
    let members = faults
        .iter()
        .enumerate()
        .map(|(i, f)| (PathBuf::from(format!("m{i}")), f.clone() as Arc<dyn Member>))
        .collect();
    let spec = CreateSpec {
        name: "fuzz".into(),
        layout: p,
        overprovision_pct: 0.0,
        endurance_bytes: vec![],
        history_interval: 86_400,
        checksums: Some(if data[0] & 0x80 != 0 {
            CsumAlgo::Blake3
        } else {
            CsumAlgo::Xxh3
        }),
        bitmap_chunk: None,
    };
    let a = Array::create_on(members, &spec, &mut |_, _| {}).unwrap();
    let size = a.size();
    let mut model = vec![0u8; size as usize];
    let tolerance = a.layout().tolerance();
    let mut failed = 0;
    for op in data[1..].chunks(6) {
        if op.len() < 6 {
            break;
        }
        let off = u32::from_le_bytes([op[1], op[2], op[3], 0]) as u64 % size;
        let len = (u16::from_le_bytes([op[4], op[5]]) as u64 % 20_000 + 1).min(size - off);
        match op[0] % 8 {
            0..=3 => {
                let fill = op[0] | 1;
                a.write(&vec![fill; len as usize], off).unwrap();
                model[off as usize..(off + len) as usize].fill(fill);
            }
            4 | 5 => {
                let mut buf = vec![0u8; len as usize];
                a.read(&mut buf, off).unwrap();
                assert_eq!(buf, model[off as usize..(off + len) as usize]);
            }
            6 => a.flush().unwrap(),
            _ if failed < tolerance => {
                faults[op[1] as usize % n].fail_after(op[2] as u64 % 8);
                failed += 1;
            }
            _ => {}
        }
    }
    let mut all = vec![0u8; size as usize];
    a.read(&mut all, 0).unwrap();
    assert!(all == model);
});
