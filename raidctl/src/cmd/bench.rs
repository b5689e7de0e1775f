//! `raidctl bench`: with `--parity`, single-core throughput of every parity kernel this CPU can
//! run, like `snapraid -T`: xor (P), pq-gen (P+Q), rec1 (one lost data chunk from P), rec2 (two
//! lost data chunks from P and Q), in GB/s of data processed, on several chunk sizes; with
//! `--hash`, single-core throughput of every checksum hash over 4 KiB blocks (the table entry
//! the engine computes per block read or written); with an array, the CrystalDiskMark profiles
//! through the engine (see `bench_array`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use raidcore::array::csum::{CsumAlgo, BLOCK};
use raidcore::buf::AlignedBuf;
use raidcore::parity::Kernel;
use raidcore::{Error, ErrorKind, Result};
use serde_json::json;

/// Benchmark an array (CrystalDiskMark profiles through the engine) or the parity kernels
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Path of any member of the array to benchmark
    #[arg(value_name = "ARRAY", conflicts_with_all = ["parity", "hash"])]
    pub array: Option<std::path::PathBuf>,
    /// Parity kernel throughput, single core, no array needed
    #[arg(long, conflicts_with = "hash")]
    pub parity: bool,
    /// Checksum hash throughput over 4 KiB blocks, single core, no array needed
    #[arg(long)]
    pub hash: bool,
    /// Benchmark profile: cdm (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1; read and write)
    #[arg(long, default_value = "cdm", value_parser = ["cdm"])]
    pub profile: String,
    /// Only these tests of the profile, comma-separated (e.g. rnd4k-q32t1-write)
    #[arg(long, value_delimiter = ',', value_name = "TEST")]
    pub tests: Vec<String>,
    /// Size of the test region at the start of the array
    #[arg(long, default_value = "1G", value_parser = crate::units::parse_size)]
    pub size: u64,
    /// Time per test
    #[arg(long, default_value = "5", value_parser = crate::units::parse_duration, value_name = "DURATION")]
    pub duration: u64,
    /// Pace each test to at most this many requests per second (to see the write
    /// amplification of a lightly loaded array)
    #[arg(long, value_name = "IOPS")]
    pub iops_limit: Option<u64>,
    /// The test region may be overwritten: do not save and restore it
    #[arg(long)]
    pub destructive: bool,
    /// Memory for partial-row writes held until their row is complete (parity levels; 0
    /// turns the stripe cache off)
    #[arg(long, value_name = "SIZE", default_value = "16M", value_parser = crate::units::parse_size)]
    pub stripe_cache: u64,
    /// Data chunks per row
    #[arg(long, default_value_t = 8)]
    pub data: usize,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Runs `f` repeatedly for at least `min`, returning operations per second.
fn rate(min: Duration, mut f: impl FnMut()) -> f64 {
    f(); // warm up
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < min {
        for _ in 0..8 {
            f();
        }
        n += 8;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn run_array(a: &BenchArgs, path: &std::path::Path) -> Result<ExitCode> {
    use super::bench_array::{self, CDM};
    let tests: Vec<bench_array::Test> = if a.tests.is_empty() {
        CDM.to_vec()
    } else {
        let mut v = Vec::new();
        for name in &a.tests {
            match CDM.iter().find(|t| bench_array::short_name(t) == *name) {
                Some(t) => v.push(*t),
                None => {
                    return Err(Error::new(
                        ErrorKind::InvalidInput,
                        format!(
                            "unknown test {name:?}; the cdm profile has {}",
                            CDM.iter()
                                .map(bench_array::short_name)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ))
                }
            }
        }
        v
    };
    if a.duration == 0 {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--duration must be at least 1 second",
        ));
    }
    if crate::control::daemon_for(path)?.is_some() {
        return Err(Error::new(
            ErrorKind::Busy,
            "the array is being served; stop `raidctl serve` to benchmark it",
        ));
    }
    let args = crate::cli::ArrayArgs {
        array: path.to_path_buf(),
        scan: Vec::new(),
        force_assemble: false,
    };
    let array = super::assemble(&args, true)?;
    array.set_stripe_cache(a.stripe_cache as usize)?;
    let v = bench_array::bench(
        &array,
        &bench_array::Options {
            size: a.size,
            iops_limit: a.iops_limit.filter(|&x| x > 0),
            duration: Duration::from_secs(a.duration),
            destructive: a.destructive,
            tests,
        },
        a.json,
    )?;
    array.close()?;
    if a.json {
        crate::output::print_json(&v);
    } else {
        bench_array::print_human(&v);
    }
    Ok(ExitCode::SUCCESS)
}

/// Working sets of the hash benchmark: one block (in L1, as a block just copied is), the
/// blocks of one 1 MiB request, and 64 MiB (from memory).
const HASH_SETS: [usize; 3] = [4096, 1 << 20, 64 << 20];

/// Single-core GB/s of every checksum hash, computing the table entry of each 4 KiB block of a
/// working set in turn (measured here, not taken from the hash's documentation).
fn run_hash(json_out: bool) -> Result<ExitCode> {
    let min = Duration::from_millis(300);
    let block = BLOCK as usize;
    let mut rows = Vec::new();
    for set in HASH_SETS {
        let mut buf = AlignedBuf::zeroed(set);
        raidcore::rng::SplitMix64(11).fill(&mut buf);
        for algo in CsumAlgo::ALL {
            let mut pos = 0;
            let per_call = 16; // blocks hashed per timed call
            let calls = rate(min, || {
                for _ in 0..per_call {
                    std::hint::black_box(algo.digest(std::hint::black_box(&buf[pos..pos + block])));
                    pos = (pos + block) % set;
                }
            });
            let gbps = calls * (per_call * block) as f64 / 1e9;
            rows.push(json!({"hash": algo.name(), "block_bytes": block,
                "working_set_bytes": set, "gbps": gbps}));
        }
    }
    if json_out {
        crate::output::print_json(&json!({"default": CsumAlgo::default().name(), "results": rows}));
    } else {
        println!(
            "checksum hashes, 4 KiB blocks, single core, GB/s (default: {})",
            CsumAlgo::default().name()
        );
        println!("{:<8} {:>12} {:>8}", "hash", "working set", "GB/s");
        for r in &rows {
            println!(
                "{:<8} {:>12} {:>8.2}",
                r["hash"].as_str().unwrap_or(""),
                crate::units::human(r["working_set_bytes"].as_u64().unwrap_or(0)),
                r["gbps"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: BenchArgs) -> Result<ExitCode> {
    if let Some(path) = &a.array {
        return run_array(&a, path);
    }
    if a.hash {
        return run_hash(a.json);
    }
    if !a.parity {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "say what to benchmark: an array (raidctl bench ARRAY), --parity or --hash",
        ));
    }
    if !(2..=64).contains(&a.data) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--data must be between 2 and 64",
        ));
    }
    let d = a.data;
    let min = Duration::from_millis(200);
    let mut rows = Vec::new();
    for len in [4096usize, 65536, 262144] {
        let mut bufs: Vec<AlignedBuf> = (0..d + 2).map(|_| AlignedBuf::zeroed(len)).collect();
        let mut x: u64 = 7;
        for b in bufs.iter_mut() {
            for v in b.iter_mut() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                *v = (x >> 56) as u8;
            }
        }
        for k in Kernel::all()
            .into_iter()
            .filter(|k| k.name != "scalar" || len == 4096)
        {
            let gb = |ops: f64| ops * (d * len) as f64 / 1e9;
            let (data, par) = bufs.split_at_mut(d);
            let refs: Vec<&[u8]> = data.iter().map(|b| &b[..]).collect();
            let (p, q) = par.split_at_mut(1);
            let xor = gb(rate(min, || (k.gen_pq)(&refs, &mut p[0], None)));
            let pq = gb(rate(min, || (k.gen_pq)(&refs, &mut p[0], Some(&mut q[0]))));
            let mut work: Vec<AlignedBuf> = bufs.to_vec();
            let rec1 = gb(rate(min, || {
                let mut r: Vec<&mut [u8]> = work[..d + 1].iter_mut().map(|b| &mut b[..]).collect();
                k.recover(&mut r, 1, &[1]).expect("recover");
            }));
            let rec2 = gb(rate(min, || {
                let mut r: Vec<&mut [u8]> = work.iter_mut().map(|b| &mut b[..]).collect();
                k.recover(&mut r, 2, &[1, 3]).expect("recover");
            }));
            rows.push(
                json!({"kernel": k.name, "chunk_bytes": len, "data_chunks": d,
                "xor_gbps": xor, "pq_gen_gbps": pq, "rec1_gbps": rec1, "rec2_gbps": rec2}),
            );
        }
    }
    if a.json {
        crate::output::print_json(&json!({"best": Kernel::best().name, "results": rows}));
    } else {
        println!(
            "parity kernels, {d} data chunks, single core, GB/s of data processed (best: {})",
            Kernel::best().name
        );
        println!(
            "{:<12} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "kernel", "chunk", "xor", "pq-gen", "rec1", "rec2"
        );
        for r in &rows {
            println!(
                "{:<12} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
                r["kernel"].as_str().unwrap_or(""),
                crate::units::human(r["chunk_bytes"].as_u64().unwrap_or(0)),
                r["xor_gbps"].as_f64().unwrap_or(0.0),
                r["pq_gen_gbps"].as_f64().unwrap_or(0.0),
                r["rec1_gbps"].as_f64().unwrap_or(0.0),
                r["rec2_gbps"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
