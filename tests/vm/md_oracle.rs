//! Linux md as the placement oracle: the same data written through md (in the VM) and
//! through raidctl (on the host, over member files) must land byte-identical in every
//! member's data area, for RAID0, RAID1, RAID5 (left-symmetric), RAID6 and RAID10 (near 2)
//! with the same chunk size and member count; and md, created over copies of a raidctl
//! array's members (`--assume-clean` at raidctl's data offset), reads raidctl's data, finds
//! its parity consistent (`check`, mismatch_cnt 0) and reconstructs from it.

use std::path::{Path, PathBuf};

use super::{image, images, read_range, vd, Vm};
use crate::util::{pattern, raidctl, strs};

const MEMBERS: usize = 5;
const CHUNK_KIB: u64 = 64;
/// Each member: raidctl puts its data area at 3 MiB here (after the bitmap, journal and
/// checksum areas), leaving 37 MiB of data.
const MEMBER_BYTES: u64 = 40 << 20;
/// Not a whole number of rows or chunks, so partial rows (read-modify-write in both) count.
const PAYLOAD: usize = (4 << 20) + (20 << 10);

/// What `raidctl examine --json` says of one member.
struct RcMember {
    path: PathBuf,
    slot: usize,
    data_offset: u64,
    data_bytes: u64,
}

fn examine(path: &Path) -> RcMember {
    let j = raidctl(["examine", "--json", &path.display().to_string()])
        .ok()
        .json();
    RcMember {
        path: path.to_path_buf(),
        slot: j["slot"].as_u64().expect("slot") as usize,
        data_offset: j["data_offset"].as_u64().expect("data_offset"),
        data_bytes: j["data_bytes"].as_u64().expect("data_bytes"),
    }
}

/// A raidctl array of `level` over MEMBERS files in `dir`, with `payload` written at 0;
/// its members by slot.
fn raidctl_array(dir: &Path, level: &str, payload: &Path) -> Vec<RcMember> {
    let m = images(dir, "rc", MEMBERS, MEMBER_BYTES);
    let mut args = vec!["create".to_string()];
    args.extend(match level {
        // RAID4 with parity on slot 0: all parity weight on slot 0.
        "raid4" => vec![
            "-l".to_string(),
            "f1".into(),
            "--skew".into(),
            "1,0,0,0,0".into(),
        ],
        _ => vec!["-l".to_string(), level.into()],
    });
    args.extend(["-c".into(), format!("{CHUNK_KIB}K")]);
    args.extend(strs(&m));
    raidctl(&args).ok();
    raidctl([
        "write",
        "-i",
        &payload.display().to_string(),
        &m[0].display().to_string(),
    ])
    .ok();
    let mut by_slot: Vec<RcMember> = m.iter().map(|p| examine(p)).collect();
    by_slot.sort_by_key(|r| r.slot);
    assert!(by_slot.iter().enumerate().all(|(i, r)| r.slot == i));
    by_slot
}

/// mdadm's name and options for a level, the layout spelled out (they are md's defaults).
fn md_level(level: &str) -> &'static str {
    match level {
        "raid0" => "--level=0",
        "raid1" => "--level=1",
        "raid5" => "--level=5 --layout=left-symmetric",
        "raid6" => "--level=6 --layout=left-symmetric",
        "raid10" => "--level=10 --layout=n2",
        // md's RAID5 layout with parity on the first device in every row (ALGORITHM_PARITY_0);
        // md's own level 4 puts parity on the last device instead.
        "raid4" => "--level=5 --layout=parity-first",
        _ => unreachable!(),
    }
}

/// The shell that creates md over the first MEMBERS disks, data at `data_offset`.
fn md_create(level: &str, data_offset: u64) -> String {
    let devs: Vec<String> = (0..MEMBERS).map(vd).collect();
    format!(
        "mdadm --create /dev/md0 --run --assume-clean --metadata=1.2 {} --raid-devices={MEMBERS} \
         {}{}--data-offset={}K {} 2>&1\n",
        md_level(level),
        // A mirror has no chunks (md refuses --chunk for RAID1).
        if level == "raid1" {
            String::new()
        } else {
            format!("--chunk={CHUNK_KIB} ")
        },
        // No write-intent bitmap where md has one (RAID0 has none to turn off).
        if level == "raid0" {
            ""
        } else {
            "--bitmap=none "
        },
        data_offset / 1024,
        devs.join(" ")
    )
}

/// Reports each md member's data offset (bytes) and role (slot) as `off<i>`, `role<i>`.
fn md_report() -> String {
    let mut s = String::new();
    for i in 0..MEMBERS {
        let d = vd(i);
        s += &format!(
            "report off{i}=$(( $(mdadm --examine {d} | sed -n 's/.*Data Offset : \\([0-9]*\\) sectors.*/\\1/p') * 512 ))\n\
             report role{i}=$(mdadm --examine {d} | sed -n 's/.*Device Role : Active device \\([0-9]*\\).*/\\1/p')\n"
        );
    }
    s
}

/// Writes the same payload through md and raidctl and compares every member's data area.
fn same_placement_as_md(level: &str) {
    let dir = crate::util::tempdir();
    let data = pattern(&format!("md-oracle-{level}"), PAYLOAD);
    let payload = dir.path().join("payload");
    std::fs::write(&payload, &data).unwrap();
    let rc = raidctl_array(dir.path(), level, &payload);
    let off = rc[0].data_offset;
    assert!(rc.iter().all(|r| r.data_offset == off));

    let md = images(dir.path(), "md", MEMBERS, MEMBER_BYTES);
    let scenario = format!(
        "{}dd if={} of=/dev/md0 bs=4096 2>/dev/null\nsync\n{}mdadm --stop /dev/md0\n",
        md_create(level, off),
        vd(MEMBERS),
        md_report()
    );
    let out = Vm::new(&format!("md_oracle_{level}"), &scenario)
        .disks(&md)
        .disk(&payload)
        .run(dir.path())
        .passed(&format!("md {level}"));
    for (i, path) in md.iter().enumerate() {
        let md_off: u64 = out.get(&format!("off{i}")).parse().unwrap();
        let role: usize = out.get(&format!("role{i}")).parse().unwrap();
        assert_eq!(md_off, off, "md took the data offset given");
        assert_eq!(role, i, "md put disk {i} in slot {i}");
        let r = &rc[role];
        let len = r.data_bytes as usize;
        let ours = read_range(&r.path, r.data_offset, len);
        let theirs = read_range(path, md_off, len);
        assert!(
            ours.iter().any(|&b| b != 0),
            "{level}: slot {role} holds nothing (the comparison would be vacuous)"
        );
        if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
            let chunk = CHUNK_KIB << 10;
            panic!(
                "{level}: slot {role} differs from md at data-area byte {at} (row {}, byte {} of the chunk): raidctl {:#04x}, md {:#04x}",
                at as u64 / chunk,
                at as u64 % chunk,
                ours[at],
                theirs[at]
            );
        }
    }
}

#[test]
fn raid0_places_like_md() {
    same_placement_as_md("raid0");
}

#[test]
fn raid1_places_like_md() {
    same_placement_as_md("raid1");
}

#[test]
fn raid5_places_like_md_left_symmetric() {
    same_placement_as_md("raid5");
}

#[test]
fn raid6_places_like_md() {
    same_placement_as_md("raid6");
}

#[test]
fn raid10_places_like_md_near2() {
    same_placement_as_md("raid10");
}

/// `--skew 1,0,0,0,0` (RAID4, parity on slot 0) against md's RAID5 `parity-first` layout.
#[test]
fn raid4_skew_places_like_md_parity_first() {
    same_placement_as_md("raid4");
}

/// md over copies of a raidctl RAID6 array's members: it reads raidctl's data, `check` finds
/// every row's P and Q consistent, and with two members failed it still reads the data back
/// (reconstructed from raidctl's P and Q).
#[test]
fn md_reads_a_raidctl_raid6_array() {
    let dir = crate::util::tempdir();
    let data = pattern("md-reads-raidctl", PAYLOAD);
    let payload = dir.path().join("payload");
    std::fs::write(&payload, &data).unwrap();
    let rc = raidctl_array(dir.path(), "raid6", &payload);
    let off = rc[0].data_offset;
    // Copy each member's data area into a fresh image at the same offset: md's superblock
    // then goes where raidctl's was, and raidctl's own metadata is not shown to md.
    let copies: Vec<PathBuf> = rc
        .iter()
        .map(|r| {
            let p = image(&dir.path().join(format!("copy{}", r.slot)), MEMBER_BYTES);
            let area = read_range(&r.path, r.data_offset, r.data_bytes as usize);
            std::os::unix::fs::FileExt::write_all_at(
                &std::fs::OpenOptions::new().write(true).open(&p).unwrap(),
                &area,
                off,
            )
            .unwrap();
            p
        })
        .collect();
    let n = PAYLOAD / 4096;
    let pay = vd(MEMBERS);
    let cmp = format!("dd if=/dev/md0 bs=4096 count={n} 2>/dev/null | cmp - {pay}");
    let scenario = format!(
        "{create}\
         echo check > /sys/block/md0/md/sync_action\n\
         mdadm --wait /dev/md0 || true\n\
         report check=$(cat /sys/block/md0/md/last_sync_action)\n\
         report mismatch=$(cat /sys/block/md0/md/mismatch_cnt)\n\
         {cmp} && report read=same\n\
         mdadm /dev/md0 --fail {a} --fail {b} 2>&1\n\
         echo 3 > /proc/sys/vm/drop_caches\n\
         report degraded=$(cat /sys/block/md0/md/degraded)\n\
         {cmp} && report degraded_read=same\n\
         mdadm --stop /dev/md0\n",
        create = md_create("raid6", off),
        a = vd(0),
        b = vd(3),
    );
    let out = Vm::new("md_reads_raidctl_raid6", &scenario)
        .disks(&copies)
        .disk(&payload)
        .run(dir.path())
        .passed("md reads raidctl raid6");
    assert_eq!(out.get("check"), "check", "md ran a check");
    assert_eq!(out.get("mismatch"), "0", "md found P or Q inconsistent");
    assert_eq!(out.get("read"), "same");
    assert_eq!(out.get("degraded"), "2");
    assert_eq!(out.get("degraded_read"), "same");
}
