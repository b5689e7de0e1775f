//! VM tests: the kernel-facing paths (md as placement oracle, the kernel NBD driver, ublk) run
//! against a real Linux kernel. Each scenario boots Debian's kernel under QEMU (TCG: nested
//! KVM dies on this host) with an initramfs that holds busybox, mdadm, e2fsprogs, nbd-client
//! and the freshly built raidctl, and raw image files as virtio disks; a shell scenario runs
//! as part of /init and reports on the serial console, which this harness parses.
//!
//! This module owns the harness: building and caching the kernel and initramfs base
//! (tests/vm/build-base.sh, under target/tmp keyed by kernel version and script contents),
//! the per-run archive with raidctl and the scenario, booting with a time limit, and the
//! console capture. The scenarios are its submodules. The VMs run one at a time (TCG is
//! CPU-bound and the machine has two cores).

mod md_oracle;
mod nbd_device;
mod ublk;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::util::BIN;

/// The Debian kernel package version the VMs boot (the only Debian 12 kernel with ublk_drv).
pub const KERNEL: &str = "6.12.117+deb12-amd64";
/// Console lines kept for a failure message.
const TAIL_LINES: usize = 200;
/// Default time limit of one boot, scenario included.
pub const TIMEOUT: Duration = Duration::from_secs(240);

/// The cached kernel and initramfs layers.
struct Base {
    vmlinuz: PathBuf,
    base: PathBuf,
    fio: PathBuf,
}

/// One VM run at a time, in this process; the file lock in [`base`] covers other processes.
static ONE_VM: Mutex<()> = Mutex::new(());

fn base() -> &'static Base {
    static BASE: OnceLock<std::result::Result<Base, String>> = OnceLock::new();
    match BASE.get_or_init(build_base) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    }
}

fn build_base() -> std::result::Result<Base, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vm");
    if Command::new("qemu-system-x86_64")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Err(
            "VM tests need qemu-system-x86_64: apt-get install qemu-system-x86 busybox-static mdadm e2fsprogs nbd-client fio kmod cpio xz-utils (.ci/run does)".into(),
        );
    }
    let mut key = blake3::Hasher::new();
    for f in ["build-base.sh", "init"] {
        key.update(&std::fs::read(src.join(f)).map_err(|e| format!("read tests/vm/{f}: {e}"))?);
    }
    let hash = key.finalize().to_hex();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("vm")
        .join(format!("{KERNEL}-{}", &hash[..12]));
    std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let b = Base {
        vmlinuz: dir.join("vmlinuz"),
        base: dir.join("base.cpio.gz"),
        fio: dir.join("fio.cpio.gz"),
    };
    let lock = std::fs::File::create(dir.join(".lock")).map_err(|e| e.to_string())?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", dir.display()))?;
    if dir.join("version").exists() {
        return Ok(b);
    }
    let t = Instant::now();
    let out = Command::new("bash")
        .arg(src.join("build-base.sh"))
        .arg(&dir)
        .arg(KERNEL)
        .output()
        .map_err(|e| format!("run tests/vm/build-base.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tests/vm/build-base.sh failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    eprintln!(
        "vm: built kernel and initramfs base in {:.1} s ({})",
        t.elapsed().as_secs_f64(),
        dir.display()
    );
    // Older cache entries (another script version) are left for `cargo clean`: they are
    // about 60 MiB each and a concurrent run of an older checkout may still use them.
    Ok(b)
}

/// Appends one newc cpio entry (the initramfs format) to `out`.
fn cpio_entry(out: &mut impl Write, ino: u32, name: &str, mode: u32, data: &[u8]) {
    let namesize = name.len() + 1;
    let header = format!(
        "070701{ino:08x}{mode:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{namesize:08x}{:08x}",
        0,
        0,
        1,
        0,
        data.len(),
        0,
        0,
        0,
        0,
        0
    );
    out.write_all(header.as_bytes()).unwrap();
    out.write_all(name.as_bytes()).unwrap();
    out.write_all(&[0]).unwrap();
    let pad = |n: usize| (4 - n % 4) % 4;
    out.write_all(&[0; 3][..pad(110 + namesize)]).unwrap();
    out.write_all(data).unwrap();
    out.write_all(&[0; 3][..pad(data.len())]).unwrap();
}

/// What a scenario left on the console.
pub struct Outcome {
    /// The scenario's exit status (0: passed).
    pub exit: i32,
    /// `report key=value` lines, in order.
    pub reports: Vec<(String, String)>,
    /// Seconds from kernel start to the scenario (VMTEST-BOOTED).
    pub booted: f64,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// The last console lines, for failure messages.
    pub tail: String,
}

impl Outcome {
    /// The value of the last `report KEY=...`, or a panic showing the console.
    pub fn get(&self, key: &str) -> &str {
        self.reports
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("the scenario did not report {key}; console:\n{}", self.tail))
    }

    /// The last `report KEY=...` as a number, or a panic showing the console.
    pub fn num(&self, key: &str) -> u64 {
        let v = self.get(key);
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v:?} is not a number; console:\n{}", self.tail))
    }

    /// Panics with the console tail unless the scenario exited 0.
    pub fn passed(self, what: &str) -> Outcome {
        assert_eq!(
            self.exit, 0,
            "VM scenario {what} failed (exit {}); last console lines:\n{}",
            self.exit, self.tail
        );
        self
    }
}

/// A VM to boot: disks (raw image files, /dev/vda, vdb, ... in order) and a scenario.
pub struct Vm {
    name: String,
    disks: Vec<PathBuf>,
    scenario: String,
    fio: bool,
    timeout: Duration,
}

impl Vm {
    /// `scenario` is shell (busybox ash) run with `set -e`; `report k=v` prints a result line.
    pub fn new(name: &str, scenario: &str) -> Vm {
        Vm {
            name: name.to_string(),
            disks: Vec::new(),
            scenario: scenario.to_string(),
            fio: false,
            timeout: TIMEOUT,
        }
    }

    pub fn disk(mut self, path: &Path) -> Vm {
        self.disks.push(path.to_path_buf());
        self
    }

    pub fn disks(mut self, paths: &[PathBuf]) -> Vm {
        self.disks.extend(paths.iter().cloned());
        self
    }

    /// Adds the fio layer to the initramfs (about 36 MiB compressed, so only when used).
    pub fn with_fio(mut self) -> Vm {
        self.fio = true;
        self
    }

    /// Boots, runs the scenario and returns what it reported; panics on a time-out or when
    /// QEMU cannot run. `work` holds the per-run initramfs (deleted with it).
    pub fn run(self, work: &Path) -> Outcome {
        let b = base();
        let _one = ONE_VM.lock().unwrap_or_else(|e| e.into_inner());
        let initrd = work.join(format!("initrd-{}", self.name));
        {
            // The uncompressed archive goes first: the kernel takes a compressed one after an
            // uncompressed one (as early microcode does), not the other way round.
            let mut f = std::io::BufWriter::new(std::fs::File::create(&initrd).unwrap());
            let raidctl = std::fs::read(BIN).unwrap();
            let scenario = format!(
                "# {} (generated by tests/vm.rs)\nset -e\n{}\n",
                self.name, self.scenario
            );
            cpio_entry(&mut f, 1, "bin", 0o040755, &[]);
            cpio_entry(&mut f, 2, "bin/raidctl", 0o100755, &raidctl);
            cpio_entry(&mut f, 3, "scenario.sh", 0o100644, scenario.as_bytes());
            cpio_entry(&mut f, 0, "TRAILER!!!", 0, &[]);
            drop(raidctl);
            for layer in [Some(&b.base), self.fio.then_some(&b.fio)]
                .into_iter()
                .flatten()
            {
                std::io::copy(&mut std::fs::File::open(layer).unwrap(), &mut f).unwrap();
            }
            f.flush().unwrap();
        }
        // One boot; a kernel that dies before init reaches the scenario (TCG occasionally
        // faults in early boot: an int3 oops patching kernel text) is booted once more, since the
        // scenario never ran and its disks are untouched.
        let boot = || {
            let mut cmd = Command::new("qemu-system-x86_64");
            cmd.args(["-accel", "tcg,thread=multi", "-cpu", "max", "-m", "1536"])
                .args(["-smp", "2", "-display", "none", "-no-reboot", "-nodefaults"])
                .args(["-serial", "stdio", "-monitor", "none"])
                .arg("-kernel")
                .arg(&b.vmlinuz)
                .arg("-initrd")
                .arg(&initrd)
                .args(["-append", "console=ttyS0 panic=-1 quiet"]);
            for d in &self.disks {
                cmd.arg("-drive").arg(format!(
                    "file={},format=raw,if=virtio,cache=writeback",
                    d.display()
                ));
            }
            let start = Instant::now();
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("start qemu-system-x86_64: {e} (apt-get install qemu-system-x86)")
                });
            let tail = Arc::new(Mutex::new(VecDeque::<String>::new()));
            let reports = Arc::new(Mutex::new(Vec::<String>::new()));
            let mut readers = Vec::new();
            for stream in [
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                Box::new(child.stderr.take().unwrap()),
            ] {
                let (tail, reports) = (tail.clone(), reports.clone());
                readers.push(std::thread::spawn(move || {
                    let mut r = BufReader::new(stream);
                    let mut buf = Vec::new();
                    while r
                        .read_until(b'\n', &mut buf)
                        .map(|n| n > 0)
                        .unwrap_or(false)
                    {
                        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                        buf.clear();
                        if line.contains("VMTEST") {
                            reports.lock().unwrap().push(line.clone());
                        }
                        let mut t = tail.lock().unwrap();
                        if t.len() == TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }));
            }
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if start.elapsed() > self.timeout {
                    // Kill this QEMU by its PID (Child::kill), then reap it.
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            for r in readers {
                let _ = r.join();
            }
            let wall = start.elapsed();
            let tail = tail
                .lock()
                .unwrap()
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n");
            let Some(status) = status else {
                panic!(
                    "VM scenario {} timed out after {} s (qemu killed); last console lines:\n{tail}",
                    self.name,
                    self.timeout.as_secs()
                );
            };
            let lines = reports.lock().unwrap().clone();
            (status, tail, lines, wall)
        };
        let mut attempts = 0;
        let (status, tail, lines, wall) = loop {
            let r = boot();
            attempts += 1;
            let booted = r.2.iter().any(|l| l.contains("VMTEST-BOOTED"));
            if !booted && attempts < 2 && r.1.contains("Kernel panic") {
                eprintln!(
                    "vm: {}: the kernel died before the scenario started (an emulator fault, not the test): booting again",
                    self.name
                );
                continue;
            }
            break r;
        };
        let _ = std::fs::remove_file(&initrd);
        let mut exit = None;
        let mut booted = f64::NAN;
        let mut kv = Vec::new();
        for l in &lines {
            let l = &l[l.find("VMTEST").unwrap()..];
            if let Some(v) = l.strip_prefix("VMTEST-EXIT ") {
                exit = v.trim().parse::<i32>().ok();
            } else if let Some(v) = l.strip_prefix("VMTEST-BOOTED ") {
                booted = v.trim().parse().unwrap_or(f64::NAN);
            } else if let Some(v) = l.strip_prefix("VMTEST ") {
                if let Some((k, v)) = v.split_once('=') {
                    kv.push((k.to_string(), v.to_string()));
                }
            }
        }
        let Some(exit) = exit else {
            panic!(
                "VM scenario {} ended ({status}) without reporting its exit status; last console lines:\n{tail}",
                self.name
            );
        };
        if std::env::var_os("RAIDCTL_VM_CONSOLE").is_some() {
            eprintln!("vm: {}: last console lines:\n{tail}", self.name);
        }
        eprintln!(
            "vm: {}: scenario started {booted:.1} s after kernel start, {:.1} s in all",
            self.name,
            wall.as_secs_f64()
        );
        Outcome {
            exit,
            reports: kv,
            booted,
            wall,
            tail,
        }
    }
}

/// A raw image file of `bytes` (sparse, zero) at `path`.
pub fn image(path: &Path, bytes: u64) -> PathBuf {
    std::fs::File::create(path).unwrap().set_len(bytes).unwrap();
    path.to_path_buf()
}

/// `n` raw images `prefix0..` of `bytes` each in `dir`.
pub fn images(dir: &Path, prefix: &str, n: usize, bytes: u64) -> Vec<PathBuf> {
    (0..n)
        .map(|i| image(&dir.join(format!("{prefix}{i}")), bytes))
        .collect()
}

/// The virtio device name of the `i`-th disk (vda, vdb, ...).
pub fn vd(i: usize) -> String {
    format!("/dev/vd{}", (b'a' + i as u8) as char)
}

/// Reads `len` bytes of `path` at `offset`.
pub fn read_range(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut v = vec![0u8; len];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut v, offset)
        .unwrap();
    v
}

/// Boots an empty scenario: the harness itself works (kernel, modules, raidctl in the VM).
#[test]
fn boots_and_reports() {
    let dir = crate::util::tempdir();
    let d = image(&dir.path().join("d0"), 1 << 20);
    let out = Vm::new(
        "boots_and_reports",
        "report kernel=$(uname -r)\nreport raidctl=\"$(raidctl --version)\"\nreport personalities=\"$(grep Personalities /proc/mdstat)\"\n[ -b /dev/vda ] && [ -e /dev/nbd0 ]\nreport vda=$(cat /sys/block/vda/size)",
    )
    .disk(&d)
    .run(dir.path())
    .passed("boots_and_reports");
    assert_eq!(out.get("kernel"), KERNEL);
    assert!(out.get("raidctl").starts_with("raidctl "), "{}", out.tail);
    for p in ["raid0", "raid1", "raid10", "raid5", "raid6"] {
        assert!(
            out.get("personalities").contains(p),
            "md {p} missing: {}",
            out.tail
        );
    }
    assert_eq!(out.get("vda"), "2048", "1 MiB disk is 2048 sectors");
    assert!(out.booted > 0.0 && out.wall < TIMEOUT);
}

/// A scenario that fails is reported as failed, with its exit status (the harness can fail).
#[test]
fn failing_scenario_is_reported() {
    let dir = crate::util::tempdir();
    let out = Vm::new("failing_scenario", "report before=1\nfalse\nreport after=1").run(dir.path());
    assert_ne!(out.exit, 0, "{}", out.tail);
    assert_eq!(out.get("before"), "1");
    assert!(!out.reports.iter().any(|(k, _)| k == "after"));
}
