//! Runs the deterministic simulator: `sim SEED` replays one seed and prints its events;
//! `sim --from A --count N` runs N seeds; `sim --from A --seconds S` runs new seeds until S
//! seconds have passed (what scripts/soak.sh calls). Failing seeds are printed, one a line
//! starting with "FAIL seed", and the exit code is 1 when any failed.

use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut from = 0u64;
    let mut count: Option<u64> = None;
    let mut seconds: Option<u64> = None;
    let mut one: Option<u64> = None;
    let mut i = 0;
    let num = |s: Option<&String>, what: &str| -> u64 {
        s.and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("sim: {what} needs a number");
            std::process::exit(2)
        })
    };
    while i < args.len() {
        match args[i].as_str() {
            "--from" => {
                from = num(args.get(i + 1), "--from");
                i += 1;
            }
            "--count" => {
                count = Some(num(args.get(i + 1), "--count"));
                i += 1;
            }
            "--seconds" => {
                seconds = Some(num(args.get(i + 1), "--seconds"));
                i += 1;
            }
            s => one = Some(num(Some(&s.to_string()), "a seed")),
        }
        i += 1;
    }
    if let Some(seed) = one {
        match raidcore::sim::run(seed) {
            Ok(r) => {
                println!(
                    "seed {seed} ({}): ok, {} steps, {} power cuts, digest {:016x}",
                    r.spec, r.steps, r.power_cuts, r.digest
                );
            }
            Err(f) => {
                println!("FAIL {f}");
                std::process::exit(1);
            }
        }
        return;
    }
    let start = Instant::now();
    let deadline = seconds.map(|s| start + Duration::from_secs(s));
    let end = count.map(|c| from + c);
    let (mut ran, mut failed) = (0u64, 0u64);
    let mut seed = from;
    loop {
        if end.is_some_and(|e| seed >= e) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if end.is_none() && deadline.is_none() && ran >= 100 {
            break;
        }
        match raidcore::sim::run(seed) {
            Ok(_) => {}
            Err(f) => {
                failed += 1;
                println!("FAIL seed {seed} ({}): {}", f.spec, f.what);
            }
        }
        ran += 1;
        seed += 1;
    }
    println!(
        "{} passed, {failed} failed (seeds {from}..{seed}, {:.0} s)",
        ran - failed,
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
