//! Test helpers: run the binary, fresh directories, deterministic data, loop devices.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_raidctl");

/// Runs `raidctl status ...`: its exit code says the health (0 healthy, 1 degraded or
/// rebuilding, 5 failed); any other code is a failure of the command.
pub fn status_run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let r = raidctl(args);
    assert!(
        [0, 1, 5].contains(&r.code),
        "raidctl status failed (exit {}): {}",
        r.code,
        r.stderr
    );
    r
}

/// Result of one raidctl run.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Run {
        assert_eq!(self.code, 0, "raidctl failed: {}", self.stderr);
        self
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.stdout)
            .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", self.stdout_str()))
    }

    /// Asserts a failure with `code` whose message contains every one of `needles`.
    pub fn fails(self, code: i32, needles: &[&str]) -> Run {
        assert_eq!(
            self.code, code,
            "expected exit {code}, got {}: {}",
            self.code, self.stderr
        );
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr lacks {n:?}: {}",
                self.stderr
            );
        }
        self
    }
}

fn from_output(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: o.stdout,
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs raidctl with `args`.
pub fn raidctl<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    from_output(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run raidctl"),
    )
}

/// Runs raidctl with `args` in directory `dir` (members named relative to it).
pub fn raidctl_in(dir: &Path, args: &[&str]) -> Run {
    from_output(
        Command::new(BIN)
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .expect("run raidctl"),
    )
}

/// A raidctl run with its own state and run directories (events, monitor position, sockets,
/// saved profiles).
pub fn raidctl_env(env: &[(&str, &Path)], args: &[&str]) -> Run {
    let mut c = Command::new(BIN);
    c.args(args).stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    from_output(c.output().expect("run raidctl"))
}

/// Runs a program (an NBD client, mkfs), asserting that it succeeds.
pub fn cmd(prog: &str, args: &[&str]) -> Output {
    let o = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{prog}: {e}"));
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Deterministic bytes from a seed (blake3 in XOF mode).
pub fn pattern(seed: &str, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(seed.as_bytes())
        .finalize_xof()
        .fill(&mut out);
    out
}

/// A fresh temporary directory, removed on drop.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("raidctl-test-")
        .tempdir()
        .expect("tempdir")
}

/// Member paths m0..m{n-1} in `dir`.
pub fn members(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n).map(|i| dir.join(format!("m{i}"))).collect()
}

/// Creates (or truncates) `path` as an empty file as large as `like`: a new member.
pub fn sized_like(path: &Path, like: &Path) {
    std::fs::File::create(path)
        .unwrap()
        .set_len(std::fs::metadata(like).unwrap().len())
        .unwrap();
}

pub fn strs(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// blake3 of every file (or device) content, to prove nothing was written.
pub fn hashes(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            let data = std::fs::read(p).unwrap_or_default();
            blake3::hash(&data).to_hex().to_string()
        })
        .collect()
}

/// Writes `data` into the array at `offset` through `raidctl write --input`.
pub fn write_at(array: &Path, offset: u64, data: &[u8], dir: &Path) {
    let input = dir.join(format!("input-{offset}"));
    std::fs::write(&input, data).unwrap();
    raidctl([
        "write".as_ref(),
        array.as_os_str(),
        "--offset".as_ref(),
        offset.to_string().as_ref(),
        "--input".as_ref(),
        input.as_os_str(),
    ])
    .ok();
    std::fs::remove_file(input).unwrap();
}

/// Reads `len` bytes at `offset` through `raidctl read`.
pub fn read_at(array: &Path, offset: u64, len: usize) -> Run {
    raidctl([
        "read".as_ref(),
        array.as_os_str(),
        "--offset".as_ref(),
        offset.to_string().as_ref(),
        "--length".as_ref(),
        len.to_string().as_ref(),
    ])
}

/// A loop device attached to a backing file; detached on drop.
pub struct LoopDev {
    pub dev: PathBuf,
    attached: bool,
}

impl LoopDev {
    pub fn attach(file: &Path) -> LoopDev {
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file)
            .output()
            .expect("run losetup");
        assert!(
            o.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        LoopDev {
            dev: PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
            attached: true,
        }
    }

    pub fn detach(&mut self) {
        if self.attached {
            let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
            self.attached = false;
        }
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Creates a sparse file of `size` bytes.
pub fn sparse_file(path: &Path, size: u64) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(size).unwrap();
}

/// A running `raidctl serve`, stopped with SIGTERM on drop.
pub struct Server {
    pub child: Option<Child>,
    pub socket: PathBuf,
}

impl Server {
    pub fn start(member: &str, socket: &Path) -> Server {
        Server::start_with(member, socket, &[])
    }

    pub fn start_with(member: &str, socket: &Path, extra: &[&str]) -> Server {
        Server::start_in(None, member, socket, extra)
    }

    /// As [`Server::start_with`], run from directory `cwd` (a member named relative to it).
    pub fn start_in(cwd: Option<&Path>, member: &str, socket: &Path, extra: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        if let Some(d) = cwd {
            cmd.current_dir(d);
        }
        let mut child = cmd
            .args([
                "serve",
                "--foreground",
                "--socket",
                &socket.display().to_string(),
            ])
            .args(extra)
            .arg(member)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // The first line on stdout is printed once the sockets listen.
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("nbd+unix://"), "serve said {line:?}");
        Server {
            child: Some(child),
            socket: socket.to_path_buf(),
        }
    }

    pub fn uri(&self) -> String {
        format!("nbd+unix:///raid?socket={}", self.socket.display())
    }

    /// SIGTERM, then the exit status.
    /// kill -9 of the server (a crash), reaped.
    pub fn kill_9(&mut self) {
        let mut c = self.child.take().unwrap();
        let _ = c.kill();
        let _ = c.wait();
    }

    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop();
        }
    }
}

/// Creates an array of `level` over `n` member files m0.. in `dir` at `size`: their paths.
pub fn members_created(dir: &Path, level: &str, n: usize, size: &str) -> Vec<String> {
    members_created_with(dir, level, n, size, &[])
}

/// As [`members_created`], with more `create` flags.
pub fn members_created_with(
    dir: &Path,
    level: &str,
    n: usize,
    size: &str,
    extra: &[&str],
) -> Vec<String> {
    let m: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("m{i}"))).collect();
    let ms = strs(&m);
    let mut args = vec!["create", "--level", level, "--size", size];
    args.extend(extra);
    args.extend(ms.iter().map(|s| s.as_str()));
    raidctl(&args).ok();
    ms
}

/// Writes a pattern over the whole array of `member`: every data-map region then holds data,
/// so rebuilds and scrubs read every row (what tests of long or interrupted jobs need; on an
/// array holding nothing they finish at once).
pub fn fill(member: &str, dir: &Path) {
    let size = status_run(["status", "--json", member]).json()["size_bytes"]
        .as_u64()
        .unwrap();
    write_at(Path::new(member), 0, &pattern("fill", size as usize), dir);
}

/// Starts `raidctl write MEMBER --offset OFFSET --input INPUT` (its errors discarded), for a
/// test that kills it mid-way.
pub fn spawn_write(member: &str, offset: u64, input: &Path) -> Child {
    Command::new(BIN)
        .args([
            "write",
            member,
            "--offset",
            &offset.to_string(),
            "--input",
            &input.display().to_string(),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Bad data blocks over every member, from `status --json`.
pub fn listed_bad_blocks(status: &serde_json::Value) -> u64 {
    status["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["bad_blocks"].as_u64().unwrap_or(0))
        .sum()
}

/// Flips (XOR 0x5a) 16 bytes of the member file `member` at byte `off`, synced: silent rot.
pub fn rot_bytes(member: &str, off: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(member)
        .unwrap();
    let mut b = [0u8; 16];
    f.read_exact_at(&mut b, off).unwrap();
    for x in &mut b {
        *x ^= 0x5a;
    }
    f.write_all_at(&b, off).unwrap();
    f.sync_all().unwrap();
}
