//! `raidctl serve` with real NBD clients (nbdinfo, nbdcopy, qemu-img, qemu-io, nbdfuse),
//! online member changes through the control socket, malformed protocol input, and SIGTERM.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

#[test]
fn nbd_clients_read_and_write_the_array() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 4, "48M");
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let info: serde_json::Value =
        serde_json::from_slice(&cmd("nbdinfo", &["--json", &srv.uri()]).stdout).unwrap();
    let size = status_run(["status", "--json", &ms[1]]).json()["size_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(info["exports"][0]["export-size"].as_u64(), Some(size));
    // qemu-img convert to and from the export.
    let data = pattern("qemu", 20 << 20);
    let src = dir.path().join("src.img");
    std::fs::write(&src, &data).unwrap();
    cmd(
        "qemu-img",
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            &src.display().to_string(),
            &srv.uri(),
        ],
    );
    let back = dir.path().join("back.img");
    cmd(
        "qemu-img",
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "raw",
            &srv.uri(),
            &back.display().to_string(),
        ],
    );
    let got = std::fs::read(&back).unwrap();
    assert_eq!(got.len() as u64, size);
    assert!(got[..data.len()] == data[..], "qemu-img round trip differs");
    // qemu-io patterns at unaligned offsets, verified on read.
    let o = cmd(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "write -P 0xa7 123457 70001",
            "-c",
            "read -P 0xa7 123457 70001",
            "-c",
            "write -z 3000001 5000",
            "-c",
            "read -P 0 3000001 5000",
            "-c",
            "flush",
            &srv.uri(),
        ],
    );
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        !text.contains("failed") && !text.contains("error"),
        "{text}"
    );
    // The same bytes through raidctl itself, once the server is stopped.
    assert!(srv.stop().success());
    let mid = read_at(Path::new(&ms[2]), 123457, 70001).ok().stdout;
    assert!(mid.iter().all(|&b| b == 0xa7));
    assert_eq!(
        status_run(["status", "--json", &ms[0]]).json()["clean"],
        true
    );
}

/// Members in memory (tmpfs): with at least as many connections as cores a connection's extra
/// threads stand aside, and come back when connections close. Data must round-trip through
/// four connections at once, then through one, and the server must stop cleanly (a thread
/// left waiting would hold its connection open).
#[test]
fn many_connections_to_an_array_in_memory_round_trip() {
    let dir = tempfile::Builder::new()
        .prefix("raidctl-test-")
        .tempdir_in("/dev/shm")
        .expect("tempdir in /dev/shm");
    let ms = members_created(dir.path(), "5", 4, "24M");
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let data = pattern("many-conns", 40 << 20);
    let src = dir.path().join("src.img");
    std::fs::write(&src, &data).unwrap();
    let back = dir.path().join("back.img");
    let (s, b) = (src.display().to_string(), back.display().to_string());
    let uri = srv.uri();
    cmd("nbdcopy", &["--connections=4", "--requests=16", &s, &uri]);
    cmd("nbdcopy", &["--connections=4", "--requests=16", &uri, &b]);
    let got = std::fs::read(&back).unwrap();
    assert!(
        got[..data.len()] == data[..],
        "four connections: data differs"
    );
    // One connection afterwards: its helpers serve again.
    cmd("nbdcopy", &["--connections=1", &uri, &b]);
    assert!(std::fs::read(&back).unwrap()[..data.len()] == data[..]);
    assert!(srv.stop().success());
    assert_eq!(
        status_run(["status", "--json", &ms[0]]).json()["clean"],
        true
    );
}

#[test]
fn a_read_of_a_corrupted_block_returns_good_data_counts_and_heals() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 4, "24M");
    let data = pattern("heal", 1 << 20);
    write_at(Path::new(&ms[0]), 0, &data, dir.path());
    // RAID5 row 0: parity on slot 3, data chunk 0 (logical offset 0) on slot 0.
    let ex = raidctl(["examine", "--json", &ms[0]]).ok().json();
    let data_off = ex["areas"]["data"]["offset"].as_u64().unwrap();
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&ms[0])
            .unwrap();
        f.write_all_at(&[0xeeu8; 100], data_off + 4096 + 10)
            .unwrap();
    }
    let srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let out = dir.path().join("out.img");
    cmd("nbdcopy", &[&srv.uri(), &out.display().to_string()]);
    let got = std::fs::read(&out).unwrap();
    assert!(
        got[..data.len()] == data[..],
        "the corrupted block read back wrong"
    );
    let st = status_run(["status", "--json", &ms[1]]).json();
    assert!(
        st["members"][0]["checksum_errors"].as_u64().unwrap() >= 1,
        "slot 0 counts the checksum error: {st}"
    );
    assert_eq!(st["members"][1]["checksum_errors"], 0);
    drop(srv);
    // Healed on read: a scrub finds nothing, and the counter survived the restart.
    let r = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert!(r["problems"].as_array().unwrap().is_empty(), "{r}");
    let st = status_run(["status", "--json", &ms[1]]).json();
    assert!(
        st["members"][0]["checksum_errors"].as_u64().unwrap() >= 1,
        "{st}"
    );
}

/// Raw NBD client pieces for malformed-input tests.
pub(crate) fn hello(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut greet = [0u8; 18];
    s.read_exact(&mut greet).unwrap();
    assert_eq!(&greet[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
    s
}

pub(crate) fn option(s: &mut UnixStream, opt: u32, data: &[u8]) {
    s.write_all(&0x4948_4156_454f_5054u64.to_be_bytes())
        .unwrap();
    s.write_all(&opt.to_be_bytes()).unwrap();
    s.write_all(&(data.len() as u32).to_be_bytes()).unwrap();
    s.write_all(data).unwrap();
}

/// Reads option replies until ACK or an error reply; returns the last reply type.
pub(crate) fn option_replies(s: &mut UnixStream) -> u32 {
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).unwrap();
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).unwrap();
        if kind == 1 || kind >= 1 << 31 {
            return kind;
        }
    }
}

pub(crate) fn go(sock: &Path) -> UnixStream {
    let mut s = hello(sock);
    let mut d = 0u32.to_be_bytes().to_vec();
    d.extend_from_slice(&0u16.to_be_bytes());
    option(&mut s, 7, &d);
    assert_eq!(option_replies(&mut s), 1, "GO acknowledged");
    s
}

fn request(s: &mut UnixStream, kind: u16, cookie: u64, offset: u64, len: u32) {
    s.write_all(&0x2560_9513u32.to_be_bytes()).unwrap();
    s.write_all(&0u16.to_be_bytes()).unwrap();
    s.write_all(&kind.to_be_bytes()).unwrap();
    s.write_all(&cookie.to_be_bytes()).unwrap();
    s.write_all(&offset.to_be_bytes()).unwrap();
    s.write_all(&len.to_be_bytes()).unwrap();
}

fn simple_reply(s: &mut UnixStream) -> (u32, u64) {
    let mut h = [0u8; 16];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), 0x6744_6698);
    (
        u32::from_be_bytes(h[4..8].try_into().unwrap()),
        u64::from_be_bytes(h[8..16].try_into().unwrap()),
    )
}

fn closed(s: &mut UnixStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

#[test]
fn malformed_protocol_input_never_kills_the_server() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "6", 4, "32M");
    let srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let sock = srv.socket.clone();
    // A well-behaved client stays connected through all of it.
    let mut good = go(&sock);
    // Bad option magic: the server hangs up on that client.
    let mut s = hello(&sock);
    s.write_all(&[0xde; 16]).unwrap();
    assert!(closed(&mut s));
    // Unknown option: ERR_UNSUP, and the handshake goes on.
    let mut s = hello(&sock);
    option(&mut s, 99, b"junk");
    assert_eq!(option_replies(&mut s), (1 << 31) + 1);
    option(&mut s, 2, &[]); // ABORT
    assert_eq!(option_replies(&mut s), 1);
    // A malformed GO: ERR_INVALID.
    let mut s = hello(&sock);
    option(&mut s, 7, &[0, 0, 0, 9, b'x']);
    assert_eq!(option_replies(&mut s), (1 << 31) + 3);
    // Truncated packet: half a request header, then hang up.
    let mut s = go(&sock);
    s.write_all(&[0x25, 0x60, 0x95, 0x13, 0, 0]).unwrap();
    drop(s);
    // Out-of-range and oversize requests get EINVAL; the connection stays usable.
    let mut s = go(&sock);
    request(&mut s, 0, 1, 1 << 40, 4096);
    assert_eq!(simple_reply(&mut s), (22, 1));
    request(&mut s, 0, 2, 0, 64 << 20);
    assert_eq!(simple_reply(&mut s), (22, 2));
    request(&mut s, 42, 3, 0, 0);
    assert_eq!(simple_reply(&mut s), (22, 3));
    request(&mut s, 0, 4, 4096, 512);
    assert_eq!(simple_reply(&mut s), (0, 4));
    let mut buf = [0u8; 512];
    s.read_exact(&mut buf).unwrap();
    // A write whose payload is too large to take in: the server replies and hangs up.
    request(&mut s, 1, 5, 0, 64 << 20);
    assert_eq!(simple_reply(&mut s), (22, 5));
    assert!(closed(&mut s));
    // A write past the end is refused (payload consumed) and nothing is written.
    let mut s = go(&sock);
    request(&mut s, 1, 6, (1 << 30) - 100, 200);
    s.write_all(&[7u8; 200]).unwrap();
    assert_eq!(simple_reply(&mut s), (28, 6));
    // The first client and new clients are still served.
    request(&mut good, 0, 7, 0, 4096);
    assert_eq!(simple_reply(&mut good), (0, 7));
    let mut b = vec![0u8; 4096];
    good.read_exact(&mut b).unwrap();
    cmd("nbdinfo", &["--size", &srv.uri()]);
}

#[test]
fn sigterm_under_load_leaves_flushed_data_and_a_clean_array() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "f1", 4, "64M");
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    // Acknowledged and flushed before the load starts.
    let o = cmd(
        "qemu-io",
        &[
            "-f",
            "raw",
            "-c",
            "write -P 0x5c 1000 1048576",
            "-c",
            "flush",
            &srv.uri(),
        ],
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote"));
    // A long copy into the rest of the export, stopped part-way by SIGTERM to the server.
    let big = dir.path().join("big");
    std::fs::write(&big, pattern("load", 96 << 20)).unwrap();
    let mut load = Command::new("qemu-img")
        .args([
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            "--target-image-opts",
        ])
        .arg(&big)
        .arg(format!(
            "driver=raw,offset=4194304,file.driver=nbd,file.path={},file.export=raid",
            srv.socket.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let st = srv.stop();
    let _ = load.wait();
    assert!(st.success(), "serve exit {st:?}");
    let s = status_run(["status", "--json", &ms[1]]).json();
    assert_eq!(s["clean"], true, "{s}");
    assert_eq!(s["state"], "clean");
    let first = read_at(Path::new(&ms[2]), 1000, 1 << 20).ok().stdout;
    assert!(first.iter().all(|&b| b == 0x5c), "flushed write lost");
}

#[test]
fn file_system_on_nbdfuse_survives_online_fail_and_rebuild() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 4, "80M");
    let spare = dir.path().join("spare");
    sparse_file(&spare, 80 << 20);
    let srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let fuse_dir = dir.path().join("fuse");
    std::fs::create_dir(&fuse_dir).unwrap();
    struct Unfuse(PathBuf);
    impl Drop for Unfuse {
        fn drop(&mut self) {
            let _ = Command::new("fusermount3").arg("-u").arg(&self.0).status();
        }
    }
    // nbdfuse stays in the foreground; the file appears once the FUSE mount is up.
    let mut fuse = Command::new("nbdfuse")
        .arg(fuse_dir.join("disk"))
        .arg(srv.uri())
        .spawn()
        .unwrap();
    let _unfuse = Unfuse(fuse_dir.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !fuse_dir.join("disk").exists() {
        assert!(Instant::now() < deadline, "nbdfuse did not mount");
        assert!(fuse.try_wait().unwrap().is_none(), "nbdfuse exited");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut lo = LoopDev::attach(&fuse_dir.join("disk"));
    let dev = lo.dev.display().to_string();
    cmd("mkfs.ext4", &["-q", "-F", &dev]);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    cmd("mount", &[&dev, &mnt.display().to_string()]);
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let um = Unmount(mnt.clone());
    let files: Vec<(PathBuf, Vec<u8>)> = (0..8)
        .map(|i| {
            (
                mnt.join(format!("f{i}")),
                pattern(&format!("fs{i}"), 3 << 20),
            )
        })
        .collect();
    for (i, (p, d)) in files.iter().enumerate() {
        std::fs::write(p, d).unwrap();
        if i == 3 {
            // A member fails through the control socket in the middle of the copy.
            let r = raidctl(["fail", &ms[1], &ms[2]]);
            assert_eq!(r.code, 0, "{}", r.stderr);
        }
    }
    cmd("sync", &[]);
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    for (p, d) in &files {
        assert!(
            std::fs::read(p).unwrap() == *d,
            "{} differs after the failure",
            p.display()
        );
    }
    assert_eq!(
        status_run(["status", "--json", &ms[0]]).json()["state"],
        "degraded"
    );
    // A replacement rebuilds online while the file system stays mounted.
    raidctl(["add", &ms[0], &spare.display().to_string()]).ok();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status_run(["status", "--json", &ms[0]]).json();
        if s["state"] == "clean" {
            assert_eq!(
                s["members"][2]["path"],
                spare.display().to_string().as_str()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "online rebuild did not finish: {s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    for (p, d) in &files {
        assert!(
            std::fs::read(p).unwrap() == *d,
            "{} differs after the rebuild",
            p.display()
        );
    }
    drop(um);
    let fsck = Command::new("fsck.ext4")
        .args(["-n", "-f", &dev])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "fsck: {}",
        String::from_utf8_lossy(&fsck.stdout)
    );
    lo.detach();
    drop(_unfuse);
    let _ = fuse.wait();
}

/// Issue bugs 4 and 5 through the real binary: with 4 KiB chunks a rebuild batch used to
/// cover every lock slot, and the rate limiter slept holding two batches of rows, so a 4 KiB
/// read waited seconds (9.8 s at --chunk 4K, 80 s at --max-rate 200K); a scrub started during
/// a background rebuild could deadlock with it. Now a request waits for at most one small batch
/// (the pause between batches holds nothing) and the scrub waits its turn, then finishes.
#[test]
fn reads_during_a_rate_limited_rebuild_are_answered_and_a_scrub_waits_its_turn() {
    let dir = tempdir();
    let ms = members_created_with(dir.path(), "5", 4, "16M", &["--chunk", "4K"]);
    fill(&ms[0], dir.path());
    let spare = dir.path().join("spare");
    sparse_file(&spare, 16 << 20);
    let spare = spare.display().to_string();
    // 1 MB/s: the rebuild of a 16 MiB member takes about 16 s.
    let mut srv = Server::start_with(&ms[0], &dir.path().join("nbd.sock"), &["--max-rate", "1M"]);
    raidctl(["fail", &ms[0], "1"]).ok();
    raidctl(["add", &ms[0], &spare]).ok();
    std::thread::sleep(Duration::from_millis(500));
    let st = status_run(["status", "--json", &ms[2]]).json();
    assert_eq!(st["state"], "rebuilding", "{st}");
    let mut s = go(&srv.socket);
    let mut worst = Duration::ZERO;
    for i in 0..8u64 {
        let t = Instant::now();
        request(&mut s, 0, i, i * (1 << 20) + 4096 * i, 4096);
        let (err, cookie) = simple_reply(&mut s);
        let mut data = vec![0u8; 4096];
        s.read_exact(&mut data).unwrap();
        assert_eq!((err, cookie), (0, i));
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(200));
    }
    // Well under the seconds a batch took before (a functional bound, not a benchmark).
    assert!(
        worst < Duration::from_secs(2),
        "a 4 KiB read took {worst:?}"
    );
    // A scrub through the daemon while the rebuild runs: it waits for the rebuild and finishes.
    let rep = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert_eq!(
        rep["problems"].as_array().map(|p| p.len()),
        Some(0),
        "{rep}"
    );
    let st = status_run(["status", "--json", &ms[2]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    drop(s);
    assert!(srv.stop().success());
}

/// Issue bug 1 through the real binary: on RAID10 a write landing while a mirror copy was
/// being rebuilt could miss the rebuilt copy (requests locked logical chunks, the rebuild
/// member rows). An NBD client rewrites the whole export while slot 1 is rebuilt; then the
/// members holding the other copies are failed, so slot 1's copies alone must hold every byte.
#[test]
fn raid10_rebuild_under_nbd_writes_then_the_other_copies_fail() {
    for (copies, others) in [("2", vec!["0"]), ("3", vec!["0", "2"])] {
        let dir = tempdir();
        let ms = members_created_with(dir.path(), "10", 4, "32M", &["--copies", copies]);
        let spare = dir.path().join("spare");
        sparse_file(&spare, 32 << 20);
        let spare = spare.display().to_string();
        let mut srv =
            Server::start_with(&ms[0], &dir.path().join("nbd.sock"), &["--max-rate", "8M"]);
        let size = status_run(["status", "--json", &ms[1]]).json()["size_bytes"]
            .as_u64()
            .unwrap();
        let data = pattern(&format!("raid10-{copies}"), size as usize);
        let img = dir.path().join("img");
        std::fs::write(&img, &data).unwrap();
        raidctl(["fail", &ms[0], "1"]).ok();
        raidctl(["add", &ms[0], &spare]).ok();
        // The whole export rewritten while the rebuild (about 4 s at 8 MB/s) runs.
        cmd("nbdcopy", &[&img.display().to_string(), &srv.uri()]);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let st = status_run(["status", "--json", &ms[2]]).json();
            if st["state"] == "clean" {
                break;
            }
            assert!(Instant::now() < deadline, "rebuild did not finish: {st}");
            std::thread::sleep(Duration::from_millis(200));
        }
        for o in &others {
            raidctl(["fail", &ms[2], o]).ok();
        }
        let back = dir.path().join("back");
        cmd("nbdcopy", &[&srv.uri(), &back.display().to_string()]);
        assert!(
            std::fs::read(&back).unwrap() == data,
            "K={copies}: the rebuilt copies do not hold the last writes"
        );
        assert!(srv.stop().success());
    }
}

/// Sends an NBD WRITE with FUA; Ok when the server acknowledged it, Err when the connection
/// broke first (the write may or may not have reached the array).
pub(crate) fn write_fua(
    s: &mut UnixStream,
    cookie: u64,
    offset: u64,
    data: &[u8],
) -> std::io::Result<()> {
    write_nbd(s, cookie, offset, data, true)
}

/// Sends an NBD WRITE, with FUA or without; as [`write_fua`].
pub(crate) fn write_nbd(
    s: &mut UnixStream,
    cookie: u64,
    offset: u64,
    data: &[u8],
    fua: bool,
) -> std::io::Result<()> {
    let mut h = Vec::with_capacity(28 + data.len());
    h.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    h.extend_from_slice(&u16::from(fua).to_be_bytes()); // FUA
    h.extend_from_slice(&1u16.to_be_bytes()); // WRITE
    h.extend_from_slice(&cookie.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h.extend_from_slice(&(data.len() as u32).to_be_bytes());
    h.extend_from_slice(data);
    s.write_all(&h)?;
    let mut r = [0u8; 16];
    s.read_exact(&mut r)?;
    let err = u32::from_be_bytes(r[4..8].try_into().unwrap());
    if err != 0 {
        return Err(std::io::Error::other(format!("NBD error {err}")));
    }
    Ok(())
}

/// Issue bug 2 through the real binary: kill -9 of `raidctl serve` while FUA writes land near
/// a RAID5 rebuild's checkpoint, many times. After each restart (resync, resumed rebuild) every
/// acknowledged byte reads back, and at the end the rebuild finishes and scrub finds nothing.
#[test]
fn kill_9_of_serve_during_a_rebuild_keeps_every_acknowledged_write() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 4, "32M");
    let size = status_run(["status", "--json", &ms[1]]).json()["size_bytes"]
        .as_u64()
        .unwrap() as usize;
    let sock = dir.path().join("nbd.sock");
    let mut want = vec![0u8; size];
    let mut seed = 0x5eed_u64;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut spares = 0;
    for trial in 0..10u64 {
        let mut srv = Server::start_with(&ms[0], &sock, &["--max-rate", "16M"]);
        let st = status_run(["status", "--json", &ms[0]]).json();
        if st["state"] == "clean" {
            // Start a rebuild of a fresh member (about 2 s at 16 MB/s).
            let slot = (1 + trial % 3).to_string();
            raidctl(["fail", &ms[0], &slot]).ok();
            let spare = dir.path().join(format!("spare{spares}"));
            spares += 1;
            sparse_file(&spare, 32 << 20);
            raidctl(["add", &ms[0], &spare.display().to_string()]).ok();
        }
        // Every byte acknowledged so far reads back.
        let back = dir.path().join("back");
        cmd("nbdcopy", &[&srv.uri(), &back.display().to_string()]);
        assert!(
            std::fs::read(&back).unwrap() == want,
            "trial {trial}: acknowledged data lost after the restart"
        );
        // FUA writes until a kill -9 at a random moment.
        let pid = srv.child.as_ref().unwrap().id() as i32;
        let delay = Duration::from_millis(100 + next(600));
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            // SAFETY: plain kill(2) of our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let mut s = go(&sock);
        for cookie in 0.. {
            let len = 4096 * (1 + next(16) as usize);
            let off = next((size - len) as u64 / 4096) as usize * 4096;
            let data = pattern(&format!("{trial}-{cookie}"), len);
            match write_fua(&mut s, cookie, off as u64, &data) {
                Ok(()) => want[off..off + len].copy_from_slice(&data),
                Err(_) => {
                    // Not acknowledged: the bytes may be old or new; learn them after restart.
                    let mut srv2 = {
                        killer.join().unwrap();
                        let _ = srv.child.take().unwrap().wait();
                        Server::start_with(&ms[0], &sock, &["--max-rate", "16M"])
                    };
                    let got = {
                        cmd("nbdcopy", &[&srv2.uri(), &back.display().to_string()]);
                        std::fs::read(&back).unwrap()
                    };
                    want[off..off + len].copy_from_slice(&got[off..off + len]);
                    assert!(srv2.stop().success());
                    break;
                }
            }
        }
        drop(srv);
    }
    // The rebuild finishes; scrub is clean; the data is intact.
    let mut srv = Server::start(&ms[0], &sock);
    let deadline = Instant::now() + Duration::from_secs(120);
    while status_run(["status", "--json", &ms[0]]).json()["state"] != "clean" {
        assert!(Instant::now() < deadline, "rebuild did not finish");
        std::thread::sleep(Duration::from_millis(200));
    }
    let rep = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert_eq!(
        rep["problems"].as_array().map(|p| p.len()),
        Some(0),
        "{rep}"
    );
    let back = dir.path().join("back");
    cmd("nbdcopy", &[&srv.uri(), &back.display().to_string()]);
    assert!(
        std::fs::read(&back).unwrap() == want,
        "data lost at the end"
    );
    assert!(srv.stop().success());
}

/// Issue 15 bug 8: `serve --socket PATH` deleted whatever regular file was at PATH (here a
/// member of the array itself) and put its socket there. Only a stale socket is replaced.
#[test]
fn serve_socket_over_a_member_is_refused_and_the_member_untouched() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    let before = hashes(&[PathBuf::from(&m[2])]);
    // Bounded: before the fix the server took the path and ran.
    let r = Command::new("timeout")
        .args(["10", BIN, "serve", &m[0], "--socket", &m[2]])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(
        hashes(&[PathBuf::from(&m[2])]),
        before,
        "the member changed"
    );
    status_run(["status", &m[0]]);
}

/// Issue 15 bug 12: a user who may not use the control socket of a served array was told its
/// members are "locked by another raidctl process"; the cause is permission denied, and the
/// message says so.
#[test]
fn status_without_permission_for_the_daemon_says_permission_denied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let m = members_created(dir.path(), "5", 3, "16M");
    let mut srv = Server::start(&m[0], &dir.path().join("sock"));
    let out = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            BIN,
            "status",
        ])
        .arg(&m[0])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert!(!stderr.contains("locked by another"), "{stderr}");
    assert!(srv.stop().success());
}

/// Issue 15 bug 11: SIGTERM while one client stalls (sends reads, never takes the replies): the
/// server waited 30 s and exited with the array dirty, and another client's acknowledged write,
/// still held in the stripe cache, was gone after the restart. Now the stalled client is left
/// behind and the array closes clean with every acknowledged write.
#[test]
fn sigterm_with_a_stalled_client_keeps_acknowledged_writes_and_closes_clean() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 4, "64M");
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    // Client A: one write at a row start (the stripe cache holds it), acknowledged, no flush.
    let data = pattern("held", 65536);
    let mut a = go(&srv.socket);
    request(&mut a, 1, 7, 0, data.len() as u32);
    a.write_all(&data).unwrap();
    assert_eq!(simple_reply(&mut a), (0, 7));
    // Client B: reads it never takes the replies of.
    let mut b = go(&srv.socket);
    for i in 0..8u64 {
        request(&mut b, 0, 100 + i, i << 20, 1 << 20);
    }
    std::thread::sleep(Duration::from_millis(300));
    let st = srv.stop();
    assert!(st.success(), "serve exit {st:?}");
    drop((a, b));
    let s = status_run(["status", "--json", &ms[1]]).json();
    assert_eq!(s["clean"], true, "{s}");
    let got = read_at(Path::new(&ms[2]), 0, data.len()).ok().stdout;
    assert!(got == data, "acknowledged write lost");
}

/// Issue 15 bug 3, the control socket: it is named by the array uuid, which a copy of the
/// member files shares, so `raidctl fail COPY/m0 1` failed a member of the served original.
/// Commands now check that the daemon serves the member they name.
#[test]
fn a_command_on_a_copy_never_acts_on_the_served_original() {
    let root = tempdir();
    let a_dir = root.path().join("A");
    std::fs::create_dir(&a_dir).unwrap();
    let a = members_created(&a_dir, "5", 3, "16M");
    let mut srv = Server::start(&a[0], &root.path().join("sock"));
    let b_dir = root.path().join("B");
    assert!(Command::new("cp")
        .arg("-r")
        .arg(&a_dir)
        .arg(&b_dir)
        .status()
        .unwrap()
        .success());
    let b0 = b_dir.join(Path::new(&a[0]).file_name().unwrap());
    let r = raidctl(["fail", &b0.display().to_string(), "1"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("is not in service in the array") && r.stderr.contains("a copy"),
        "{}",
        r.stderr
    );
    let st = status_run(["status", "--json", &a[0]]).json();
    assert_eq!(
        st["state"], "clean",
        "the served original was changed: {st}"
    );
    assert!(srv.stop().success());
}

/// Issue 15 bug 4: while an array was served, `raidctl write /dev/loopN` (a loop device over
/// one member file) got past the lock (it locked the device node, not the file), marked the
/// served member faulty and wrote one side only. Members are locked by what they are: a loop
/// device takes the lock of its backing file too.
#[test]
fn a_loop_device_over_a_served_member_is_refused() {
    let dir = tempdir();
    let m = members_created(dir.path(), "5", 3, "16M");
    let mut srv = Server::start(&m[0], &dir.path().join("sock"));
    let mut lo = LoopDev::attach(Path::new(&m[1]));
    let dev = lo.dev.display().to_string();
    let before = hashes(&[PathBuf::from(&m[1])]);
    let input = dir.path().join("in");
    std::fs::write(&input, pattern("alias", 8192)).unwrap();
    let r = raidctl(["write", &dev, "--input", &input.display().to_string()]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("loop device over"), "{}", r.stderr);
    assert_eq!(
        hashes(&[PathBuf::from(&m[1])]),
        before,
        "the member changed"
    );
    let st = status_run(["status", "--json", &m[0]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    lo.detach();
    assert!(srv.stop().success());
}

/// Under systemd (Type=notify) serve says READY=1 on $NOTIFY_SOCKET once it serves, and
/// STOPPING=1 when SIGTERM begins the stop; without NOTIFY_SOCKET it sends nothing.
#[test]
fn serve_notifies_systemd_ready_and_stopping() {
    let dir = tempdir();
    let m = members_created(dir.path(), "raid1", 2, "8M");
    let notify_path = dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let sock = dir.path().join("s.sock");
    let mut child = Command::new(BIN)
        .args(["serve", "--socket", &sock.display().to_string(), &m[0]])
        .env("NOTIFY_SOCKET", &notify_path)
        .env("RAIDCTL_RUN_DIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = notify.recv(&mut buf).expect("no READY=1 within 30 s");
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.starts_with("READY=1\n"), "{msg:?}");
    assert!(msg.contains("STATUS=serving nbd+unix://"), "{msg:?}");
    // Ready means serving: the socket answers now.
    UnixStream::connect(&sock).expect("READY=1 came before the socket listened");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let n = notify.recv(&mut buf).expect("no STOPPING=1 within 30 s");
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(child.wait().unwrap().success());
}

/// Found by an outside review (issue 31): `raidctl replace --max-rate 4M` of a served array
/// copied 14 MiB in 0.9 s: the flag was not sent to the daemon, which ran the job at its own
/// `serve --max-rate` (none). A lower bound only: a slow machine makes the copy slower still.
#[test]
fn replace_max_rate_reaches_the_serving_daemon() {
    let dir = tempdir();
    let ms = members_created(dir.path(), "5", 3, "16M");
    fill(&ms[0], dir.path());
    let sock = dir.path().join("nbd.sock");
    let mut srv = Server::start(&ms[0], &sock);
    let new = dir.path().join("new");
    sized_like(&new, Path::new(&ms[1]));
    let t = Instant::now();
    raidctl([
        "replace",
        &ms[0],
        &ms[1],
        &new.display().to_string(),
        "--max-rate",
        "4M",
    ])
    .ok();
    let deadline = Instant::now() + Duration::from_secs(120);
    while status_run(["status", "--json", &ms[0]]).json()["state"] != "clean" {
        assert!(Instant::now() < deadline, "the replace did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    // At most 4 MB/s over a 16 MiB member's data area (about 15 MiB): at least 3 s.
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "replace at --max-rate 4M took {:?}",
        t.elapsed()
    );
    assert!(srv.stop().success());
}

/// A client's discard (what `fstrim` sends) of a whole 64 MiB data-map region returns it to
/// empty: after a flush `status` counts one region fewer holding data, and a rebuild gives the
/// new member nothing there. A discard of part of a region keeps it.
#[test]
fn a_discard_of_a_whole_region_makes_the_rebuild_skip_it() {
    let dir = tempdir();
    let ms: Vec<String> = (0..5)
        .map(|i| {
            let p = dir.path().join(format!("m{i}"));
            sparse_file(&p, 1 << 30);
            p.display().to_string()
        })
        .collect();
    raidctl(["create", "--level", "5", &ms[0], &ms[1], &ms[2], &ms[3]]).ok();
    let holding = || {
        status_run(["status", "--json", &ms[0]]).json()["data_map"]["bytes_holding_data"]
            .as_u64()
            .unwrap()
    };
    // 4 members, 64 KiB chunks: a region is 1024 rows of 3 data chunks, 192 MiB of the array.
    let region = 192u64 << 20;
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let io = |cmds: &[String]| {
        let mut args = vec!["-f".to_string(), "raw".into()];
        for c in cmds {
            args.push("-c".into());
            args.push(c.clone());
        }
        args.push(srv.uri());
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = cmd("qemu-io", &args);
        let text =
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(
            !text.contains("failed") && !text.contains("error"),
            "{text}"
        );
    };
    io(&[
        format!("write -P 0x11 {} 1M", 4096),
        format!("write -P 0x22 {} 1M", region + 65536),
        format!("write -P 0x33 {} 1M", 2 * region + 65536),
        "flush".into(),
    ]);
    io(&[
        format!("discard {region} {region}"),
        format!("discard {} {}", 2 * region, region / 2),
        "flush".into(),
    ]);
    srv.stop();
    assert_eq!(
        holding(),
        2 * region,
        "regions 0 and 2 hold data, region 1 is empty"
    );
    raidctl(["fail", &ms[0], &ms[1]]).ok();
    let r = raidctl(["add", &ms[0], &ms[4]]).ok();
    assert!(
        r.stderr.contains("never written since create"),
        "{}",
        r.stderr
    );
    let allocated = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&ms[4]).unwrap().blocks() * 512
    };
    // Regions 0 and 2 of the member (64 MiB each) and its metadata.
    assert!(
        allocated <= (2 * 64 + 40) << 20,
        "{allocated} bytes allocated"
    );
    let a = Path::new(&ms[0]);
    assert!(read_at(a, 4096, 1 << 20)
        .ok()
        .stdout
        .iter()
        .all(|&b| b == 0x11));
    assert!(read_at(a, region + 65536, 1 << 20)
        .ok()
        .stdout
        .iter()
        .all(|&b| b == 0));
    assert!(read_at(a, 2 * region + 65536, 1 << 20)
        .ok()
        .stdout
        .iter()
        .all(|&b| b == 0));
    let rep = raidctl(["scrub", "--json", &ms[0]]).ok().json();
    assert_eq!(rep["problems"].as_array().unwrap().len(), 0, "{rep}");
}

/// Issue 29, item 3, served: a member absent when `serve` started comes back and `raidctl add`
/// through the daemon re-adds it, copying only the region written while it was away (counted
/// in its rebuild bytes), and every byte reads right through it afterwards.
#[test]
fn a_member_absent_when_serve_started_is_re_added_through_the_daemon() {
    let dir = tempdir();
    let gone = tempdir();
    let ms = members_created(dir.path(), "5", 4, "1G");
    let m0 = PathBuf::from(&ms[0]);
    // 1 MiB at the start of six of the sixteen regions (192 MiB of the array each).
    let region = 192u64 << 20;
    let mut want: Vec<(u64, Vec<u8>)> = (0..6u64)
        .map(|r| (r * 2 * region, pattern(&format!("r{r}"), 1 << 20)))
        .collect();
    for (off, data) in &want {
        write_at(&m0, *off, data, dir.path());
    }
    std::fs::rename(&ms[2], gone.path().join("m2")).unwrap();
    let sock = dir.path().join("readd.sock");
    let mut server = Server::start(&ms[0], &sock);
    let mut s = go(&sock);
    want[4].1 = pattern("served", 1 << 20);
    write_nbd(&mut s, 1, want[4].0, &want[4].1, true).unwrap();
    drop(s);
    std::fs::rename(gone.path().join("m2"), &ms[2]).unwrap();
    let out = raidctl(["add", &ms[0], &ms[2]]).ok();
    assert!(
        out.stderr
            .contains("re-added to slot 2 of the served array"),
        "{}",
        out.stderr
    );
    let t0 = Instant::now();
    let st = loop {
        let st = status_run(["status", "--json", &ms[0]]).json();
        if st["state"] == "clean" {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "re-add unfinished: {st}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let copied = st["members"][2]["bytes_written_by_kind"]["rebuild"]
        .as_u64()
        .unwrap();
    assert!(
        copied > 0 && copied <= 64 << 20,
        "{copied} bytes copied to the re-added member; one region is 64 MiB: {st}"
    );
    assert!(server.stop().success());
    raidctl(["scrub", &ms[0]]).ok();
    raidctl(["fail", &ms[1], &ms[0]]).ok();
    for (off, data) in &want {
        assert!(
            read_at(Path::new(&ms[1]), *off, data.len()).ok().stdout == *data,
            "offset {off} through m2"
        );
    }
}

/// Issue 29, item 3: a disk slow to appear at boot came back stale. `serve
/// --wait-for-members` waits for it: a member that arrives within the wait joins the array as
/// it was, with nothing to copy.
#[test]
fn serve_waits_for_a_member_that_arrives_late() {
    let dir = tempdir();
    let gone = tempdir();
    let ms = members_created(dir.path(), "5", 3, "32M");
    write_at(Path::new(&ms[0]), 0, &pattern("late", 1 << 20), dir.path());
    let away = gone.path().join("m2");
    std::fs::rename(&ms[2], &away).unwrap();
    let back = PathBuf::from(&ms[2]);
    let mover = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        std::fs::rename(&away, &back).unwrap();
    });
    let sock = dir.path().join("late.sock");
    let mut server = Server::start_with(&ms[0], &sock, &["--wait-for-members", "30"]);
    mover.join().unwrap();
    let st = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(st["state"], "clean", "{st}");
    assert!(server.stop().success());
    assert!(read_at(Path::new(&ms[2]), 0, 1 << 20).ok().stdout == pattern("late", 1 << 20));
}

/// `create --bitmap-chunk` (md's bitmap chunk): one write-intent bit per 64 KiB of each member
/// instead of one for the whole of a small array. A served write marks only its own region, on
/// every member; status and examine give the size; after kill -9 the write reads back. Sizes
/// that are no power of two, below the chunk, or that would need more than 64 KiB of bitmap are
/// refused, as is a bitmap for RAID0 without checksums (it keeps none), and nothing is left
/// behind.
#[test]
fn a_bitmap_chunk_marks_only_the_region_a_write_lands_in() {
    let dir = tempdir();
    let ms = members_created_with(
        dir.path(),
        "5",
        3,
        "16M",
        &["--chunk", "16K", "--bitmap-chunk", "64K"],
    );
    let st = status_run(["status", "--json", &ms[0]]).json();
    assert_eq!(st["bitmap_chunk_bytes"], 65536, "{st}");
    let ex = raidctl(["examine", "--json", &ms[1]]).ok().json();
    let bm = &ex["areas"]["bitmap"];
    assert_eq!(bm["rows_per_region"], 4, "{ex}");
    assert_eq!(bm["chunk_bytes"], 65536, "{ex}");
    let ex = raidctl(["examine", &ms[1]]).ok().stdout;
    let ex = String::from_utf8_lossy(&ex);
    assert!(
        ex.lines()
            .any(|l| l.starts_with("bitmap") && l.ends_with("chunk 64.0 KiB")),
        "{ex}"
    );
    let text = status_run(["status", &ms[0]]).ok().stdout;
    assert!(
        String::from_utf8_lossy(&text).contains("one bit per 64.0 KiB of each member"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    // Two data chunks of 16 KiB per row, four rows per region: 128 KiB of the array.
    let (region, at) = (128u64 << 10, 5 * (128u64 << 10) + 8192);
    let data = pattern("bitmap-chunk", 4096);
    let mut srv = Server::start(&ms[0], &dir.path().join("nbd.sock"));
    let mut s = go(&srv.socket);
    write_fua(&mut s, 1, at, &data).unwrap();
    let (off, bytes) = (
        bm["offset"].as_u64().unwrap(),
        bm["bytes"].as_u64().unwrap(),
    );
    for m in &ms {
        let mut bits = vec![0u8; bytes as usize];
        std::os::unix::fs::FileExt::read_exact_at(&std::fs::File::open(m).unwrap(), &mut bits, off)
            .unwrap();
        let set: Vec<usize> = (0..bits.len() * 8)
            .filter(|i| bits[i / 8] & (1 << (i % 8)) != 0)
            .collect();
        assert_eq!(set, vec![(at / region) as usize], "bits set on {m}");
    }
    drop(s);
    srv.kill_9();
    assert_eq!(read_at(Path::new(&ms[0]), at, 4096).ok().stdout, data);

    let fresh = |name: &str| -> Vec<String> {
        (0..3)
            .map(|i| dir.path().join(format!("{name}{i}")).display().to_string())
            .collect()
    };
    let refused = |extra: &[&str], level: &str, names: &[String], needle: &str| {
        let mut args = vec!["create", "--level", level, "--size", "64M"];
        args.extend(extra);
        args.extend(names.iter().map(|s| s.as_str()));
        raidctl(&args).fails(2, &[needle]);
        for n in names {
            assert!(
                !Path::new(n).exists(),
                "{n} left behind by a refused create"
            );
        }
    };
    let f = fresh("a");
    refused(
        &["--bitmap-chunk", "48K"],
        "5",
        &f,
        "must be a power of two",
    );
    refused(
        &["--chunk", "64K", "--bitmap-chunk", "16K"],
        "5",
        &f,
        "at least --chunk (65536 bytes)",
    );
    refused(
        &["--no-checksums", "--bitmap-chunk", "64M"],
        "0",
        &f,
        "keeps no write-intent bitmap",
    );
    // An outside attack: 2^63 was taken (one region, and a product that overflows).
    refused(
        &["--bitmap-chunk", "8388608T"],
        "5",
        &f,
        "larger than a member's data area",
    );
    // 4 GiB members of 4 KiB rows: a bit per row would take 128 KiB of bitmap.
    let big = fresh("b");
    let mut args = vec!["create", "--level", "5", "--size", "4G", "--chunk", "4K"];
    args.extend(["--bitmap-chunk", "4K"]);
    args.extend(big.iter().map(|s| s.as_str()));
    raidctl(&args).fails(2, &["more than the 65536 it may take: use at least 8K"]);
    for n in &big {
        assert!(
            !Path::new(n).exists(),
            "{n} left behind by a refused create"
        );
    }
}
