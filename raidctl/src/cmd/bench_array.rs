//! `raidctl bench ARRAY`: CrystalDiskMark-style profiles (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1,
//! RND4K Q1T1; read and write) through the array engine, with the members' aligned I/O going
//! around the page cache (O_DIRECT, reported per member). Queue depth Q is Q requests in flight,
//! each issued by its own thread. Writes flush the array every second, as a file system would,
//! and the report gives the bytes the members received by kind, so the write amplification of
//! parity and of the checksum metadata is measured, not estimated, and so are the process's CPU
//! seconds per test (user and system, all threads: on a shared machine CPU per byte moves less
//! than the rate does). The test region is saved and restored afterwards unless `--destructive`.

use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use raidcore::buf::AlignedBuf;
use raidcore::rng::SplitMix64;
use raidcore::{Array, Error, ErrorKind, Result};
use serde_json::{json, Value};

/// One benchmark of a profile.
#[derive(Clone, Copy, Debug)]
pub struct Test {
    pub name: &'static str,
    pub block: usize,
    pub queue: usize,
    pub sequential: bool,
    pub write: bool,
}

/// The CrystalDiskMark default set, reads first as CDM shows them.
pub const CDM: [Test; 8] = [
    Test {
        name: "SEQ1M Q8T1 read",
        block: 1 << 20,
        queue: 8,
        sequential: true,
        write: false,
    },
    Test {
        name: "SEQ1M Q1T1 read",
        block: 1 << 20,
        queue: 1,
        sequential: true,
        write: false,
    },
    Test {
        name: "RND4K Q32T1 read",
        block: 4096,
        queue: 32,
        sequential: false,
        write: false,
    },
    Test {
        name: "RND4K Q1T1 read",
        block: 4096,
        queue: 1,
        sequential: false,
        write: false,
    },
    Test {
        name: "SEQ1M Q8T1 write",
        block: 1 << 20,
        queue: 8,
        sequential: true,
        write: true,
    },
    Test {
        name: "SEQ1M Q1T1 write",
        block: 1 << 20,
        queue: 1,
        sequential: true,
        write: true,
    },
    Test {
        name: "RND4K Q32T1 write",
        block: 4096,
        queue: 32,
        sequential: false,
        write: true,
    },
    Test {
        name: "RND4K Q1T1 write",
        block: 4096,
        queue: 1,
        sequential: false,
        write: true,
    },
];

/// A test's short name for `--tests`: "seq1m-q8t1-read" and so on.
pub fn short_name(t: &Test) -> String {
    t.name.to_lowercase().replace(' ', "-")
}

/// Bytes the members received, by kind: data, parity, metadata, rebuild.
fn member_bytes(a: &Array) -> [u64; 4] {
    let mut v = [0u64; 4];
    for m in a.members() {
        v[0] += m.wear.data_bytes;
        v[1] += m.wear.parity_bytes;
        v[2] += m.wear.metadata_bytes;
        v[3] += m.wear.rebuild_bytes;
    }
    v
}

/// User and system CPU seconds of this process so far (all threads).
fn cpu_seconds() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    getrusage(UsageWho::RUSAGE_SELF)
        .map(|u| (secs(u.user_time()), secs(u.system_time())))
        .unwrap_or((0.0, 0.0))
}

fn run_test(
    a: &Array,
    t: &Test,
    region: u64,
    duration: Duration,
    iops_limit: Option<u64>,
) -> Result<Value> {
    let stop = AtomicBool::new(false);
    let next = AtomicU64::new(0);
    let ops = AtomicU64::new(0);
    let flushes = AtomicU64::new(0);
    let first_err: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    let before = member_bytes(a);
    let blocks = region / t.block as u64;
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    std::thread::scope(|sc| {
        for w in 0..t.queue {
            let (stop, next, ops, first_err) = (&stop, &next, &ops, &first_err);
            sc.spawn(move || {
                let mut buf = AlignedBuf::zeroed(t.block);
                let mut rng = SplitMix64(0x5eed ^ (w as u64) << 32 ^ t.block as u64);
                rng.fill(&mut buf);
                while !stop.load(Ordering::Relaxed) {
                    let i = if t.sequential {
                        next.fetch_add(1, Ordering::Relaxed) % blocks
                    } else {
                        rng.below(blocks)
                    };
                    let off = i * t.block as u64;
                    let r = if t.write {
                        a.write(&buf, off)
                    } else {
                        a.read(&mut buf, off)
                    };
                    if let Err(e) = r {
                        first_err.lock().expect("err lock").get_or_insert(e);
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    let done = ops.fetch_add(1, Ordering::Relaxed) + 1;
                    if let Some(limit) = iops_limit {
                        // Paced: request n is due n / limit seconds after the start.
                        let due = Duration::from_secs_f64(done as f64 / limit as f64);
                        if let Some(wait) = due.checked_sub(start.elapsed()) {
                            std::thread::sleep(wait);
                        }
                    }
                }
            });
        }
        if t.write {
            let (stop, flushes, first_err) = (&stop, &flushes, &first_err);
            sc.spawn(move || {
                let mut last = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    if last.elapsed() >= Duration::from_secs(1) {
                        last = Instant::now();
                        if let Err(e) = a.flush() {
                            first_err.lock().expect("err lock").get_or_insert(e);
                            stop.store(true, Ordering::Relaxed);
                        }
                        flushes.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
    });
    let secs = start.elapsed().as_secs_f64();
    if let Some(e) = first_err.into_inner().expect("err lock") {
        return Err(e.context(format!("benchmark {}", t.name)));
    }
    if t.write {
        a.flush()?;
    }
    let cpu1 = cpu_seconds();
    let (user_cpu, sys_cpu) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let after = member_bytes(a);
    let n = ops.load(Ordering::Relaxed);
    let user = n * t.block as u64;
    let d: Vec<u64> = (0..4).map(|i| after[i] - before[i]).collect();
    let member_total: u64 = d.iter().sum();
    Ok(json!({
        "test": t.name,
        "name": short_name(t),
        "block_bytes": t.block,
        "queue_depth": t.queue,
        "write": t.write,
        "seconds": secs,
        "ops": n,
        "mb_per_s": user as f64 / secs / 1e6,
        "iops": n as f64 / secs,
        "flushes": flushes.load(Ordering::Relaxed) + t.write as u64,
        "cpu_seconds": {"user": user_cpu, "system": sys_cpu, "total": user_cpu + sys_cpu},
        "cpu_seconds_per_gib": if user > 0 { Some((user_cpu + sys_cpu) * (1u64 << 30) as f64 / user as f64) } else { None },
        "user_bytes": user,
        "member_bytes": {"data": d[0], "parity": d[1], "metadata": d[2], "total": member_total},
        "write_amplification": if t.write && user > 0 { Some(member_total as f64 / user as f64) } else { None },
        "metadata_share": if t.write && d[0] + d[1] > 0 { Some(d[2] as f64 / (d[0] + d[1]) as f64) } else { None },
    }))
}

/// Copies `len` bytes of the array from `offset` into `f` (or back with `restore`).
fn copy_region(a: &Array, f: &mut std::fs::File, len: u64, restore: bool) -> Result<()> {
    let step = 8u64 << 20;
    let mut buf = AlignedBuf::zeroed(step as usize);
    f.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(e, "seek", "backup", 0))?;
    let mut pos = 0;
    while pos < len {
        let n = step.min(len - pos) as usize;
        if restore {
            f.read_exact(&mut buf[..n])
                .map_err(|e| Error::io(e, "read", "backup", pos))?;
            a.write(&buf[..n], pos)?;
        } else {
            a.read(&mut buf[..n], pos)?;
            f.write_all(&buf[..n])
                .map_err(|e| Error::io(e, "write", "backup", pos))?;
        }
        pos += n as u64;
    }
    if restore {
        a.flush()?;
    }
    Ok(())
}

/// Options of an array benchmark.
pub struct Options {
    pub size: u64,
    /// Requests per second across the queue, at most (None: as fast as possible).
    pub iops_limit: Option<u64>,
    pub duration: Duration,
    pub destructive: bool,
    pub tests: Vec<Test>,
}

/// Runs the chosen tests on the first `size` bytes of the array.
pub fn bench(a: &Array, o: &Options, quiet: bool) -> Result<Value> {
    let region = o.size.min(a.size()) / (1 << 20) * (1 << 20);
    if region < 1 << 20 {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "the test region must be at least 1 MiB",
        ));
    }
    let mut backup = None;
    if !o.destructive {
        // Kept until restored: if this process dies, `raidctl write ARRAY --input FILE` puts
        // the region back.
        let path = std::env::temp_dir().join(format!("raidctl-bench-{}.img", std::process::id()));
        let name = path.display().to_string();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(e, "create", &name, 0))?;
        if !quiet {
            eprintln!(
                "raidctl: saving the first {} of the array to {name} (restored and removed afterwards; --destructive skips this)",
                crate::units::human(region)
            );
        }
        copy_region(a, &mut f, region, false)?;
        backup = Some((f, path));
    }
    // Fill the region once, so reads read real data.
    let mut fill = AlignedBuf::zeroed(1 << 20);
    SplitMix64(42).fill(&mut fill);
    for off in (0..region).step_by(1 << 20) {
        a.write(&fill, off)?;
    }
    a.flush()?;
    let mut results = Vec::new();
    let mut failed = None;
    for t in &o.tests {
        if !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprint!("raidctl: {:<18}\r", t.name);
        }
        match run_test(a, t, region, o.duration, o.iops_limit) {
            Ok(v) => results.push(v),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    if let Some((mut f, path)) = backup {
        copy_region(a, &mut f, region, true)?;
        let _ = std::fs::remove_file(path);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let direct: Vec<Value> = a
        .direct_io()
        .into_iter()
        .map(|(slot, d, m)| json!({"slot": slot, "o_direct": d, "in_memory": m}))
        .collect();
    Ok(json!({
        "level": a.layout().level().name(),
        "members": a.layout().members(),
        "chunk_bytes": a.layout().chunk(),
        "checksums": a.has_checksums(),
        "checksum_hash": a.checksum_algo().map(|h| h.name()),
        "stripe_cache_rows": a.stripe_cache_rows(),
        "region_bytes": region,
        "seconds_per_test": o.duration.as_secs_f64(),
        "iops_limit": o.iops_limit,
        "restored": !o.destructive,
        "page_cache": "bypassed on members with o_direct true; members on file systems without O_DIRECT use buffered I/O; members in memory (tmpfs, RAM disks) are driven one after the other, others from threads",
        "direct_io": direct,
        "results": results,
    }))
}

pub fn print_human(v: &Value) {
    let direct = v["direct_io"]
        .as_array()
        .map(|a| a.iter().filter(|x| x["o_direct"] == true).count())
        .unwrap_or(0);
    println!(
        "{} over {} members, chunk {}, checksums {}, stripe cache {} rows, test region {}, {} s per test; O_DIRECT on {} of {} members",
        v["level"].as_str().unwrap_or(""),
        v["members"],
        crate::units::human(v["chunk_bytes"].as_u64().unwrap_or(0)),
        v["checksum_hash"].as_str().unwrap_or("off"),
        v["stripe_cache_rows"],
        crate::units::human(v["region_bytes"].as_u64().unwrap_or(0)),
        v["seconds_per_test"],
        direct,
        v["members"]
    );
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>9} {:>9}",
        "test", "MB/s", "IOPS", "amplif.", "metadata", "CPU s/GiB"
    );
    for r in v["results"].as_array().into_iter().flatten() {
        println!(
            "{:<18} {:>10.1} {:>10.0} {:>8} {:>9} {:>9}",
            r["test"].as_str().unwrap_or(""),
            r["mb_per_s"].as_f64().unwrap_or(0.0),
            r["iops"].as_f64().unwrap_or(0.0),
            r["write_amplification"]
                .as_f64()
                .map(|x| format!("{x:.2}x"))
                .unwrap_or_else(|| "-".into()),
            r["metadata_share"]
                .as_f64()
                .map(|x| format!("{:.1}%", x * 100.0))
                .unwrap_or_else(|| "-".into()),
            r["cpu_seconds_per_gib"]
                .as_f64()
                .map(|x| format!("{x:.3}"))
                .unwrap_or_else(|| "-".into()),
        );
    }
    println!("amplif.: bytes written to members per byte written; metadata: checksum log and table, bitmap and superblock bytes over data + parity bytes; CPU s/GiB: user + system seconds of this process per GiB read or written");
}
