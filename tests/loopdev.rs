//! Every level over real loop devices; a member is removed by detaching its loop device.

use crate::levels::scenario;
use crate::util::*;

fn over_loops(level_args: &[&str], n: usize) {
    let dir = tempdir();
    let mut loops: Vec<LoopDev> = (0..n)
        .map(|i| {
            let f = dir.path().join(format!("backing{i}"));
            sparse_file(&f, 24 << 20);
            LoopDev::attach(&f)
        })
        .collect();
    let devs: Vec<_> = loops.iter().map(|l| l.dev.clone()).collect();
    let mut remove = |slot: usize| loops[slot].detach();
    scenario(level_args, &devs, &mut remove, dir.path());
}

macro_rules! loop_tests {
    ($($name:ident: $n:expr, [$($arg:expr),*];)*) => {
        $(#[test] fn $name() { over_loops(&[$($arg),*], $n); })*
    };
}

loop_tests! {
    raid0_loop: 2, ["--level", "0"];
    raid1_loop: 2, ["--level", "1"];
    raid10_loop: 4, ["--level", "10"];
    raid5_loop: 3, ["--level", "5"];
    f1_loop: 4, ["--level", "f1"];
    raid6_loop: 4, ["--level", "6"];
}
