//! `raidctl serve --nbd-device`: the export attached to the kernel's own nbd driver (no
//! nbd-client in the way). In the VM: an ext4 file system round trip on /dev/nbd0 over a
//! raidctl RAID5 of four virtio disks, a clean fsck, the daemon's hardening read back from
//! /proc, and SIGTERM detaching the device and leaving the array clean and consistent.

use super::{images, vd, Vm};

const MEMBERS: usize = 4;
const MEMBER_BYTES: u64 = 48 << 20;

/// Waits (at most 120 s: the VM runs under TCG on a shared host) for serve's ready line, which
/// names the device.
const WAIT_READY: &str = r#"i=0
until grep -q '^/dev/nbd0$' /tmp/serve.out 2>/dev/null; do
    if ! kill -0 $pid 2>/dev/null || [ $i -ge 1200 ]; then
        echo "serve did not come up:"; cat /tmp/serve.out /tmp/serve.err; exit 1
    fi
    sleep 0.1; i=$((i + 1))
done
"#;

#[test]
fn ext4_on_kernel_nbd_device_then_sigterm_leaves_the_array_clean() {
    let dir = crate::util::tempdir();
    let disks = images(dir.path(), "d", MEMBERS, MEMBER_BYTES);
    let members: Vec<String> = (0..MEMBERS).map(vd).collect();
    let m = members.join(" ");
    let scenario = format!(
        r#"raidctl create -l raid5 -c 64K {m} 2>&1
raidctl serve --nbd-device /dev/nbd0 /dev/vda > /tmp/serve.out 2> /tmp/serve.err &
pid=$!
{WAIT_READY}
report size=$(( $(cat /sys/block/nbd0/size) * 512 ))
report array_bytes=$(raidctl examine --json /dev/vda | sed -n 's/^  "array_bytes": \([0-9]*\),$/\1/p')
report served_pid=$(awk '/^Tgid:/ {{ print $2 }}' /proc/$(cat /sys/block/nbd0/pid)/status)
report our_pid=$pid
report oom_score_adj=$(cat /proc/$pid/oom_score_adj)
report vmlck_kb=$(awk '/^VmLck:/ {{ print $2 }}' /proc/$pid/status)
report vmrss_kb=$(awk '/^VmRSS:/ {{ print $2 }}' /proc/$pid/status)
raidctl status --json /dev/vda > /tmp/status.json || true
report io_flusher=$(grep -o '"io_flusher": *[a-z]*' /tmp/status.json | sed 's/.*: *//')
mkfs.ext4 -q -F /dev/nbd0
mkdir -p /mnt/a
mount -t ext4 /dev/nbd0 /mnt/a
dd if=/dev/urandom of=/tmp/data bs=1M count=20 2>/dev/null
cp /tmp/data /mnt/a/data
sync
umount /mnt/a
echo 3 > /proc/sys/vm/drop_caches
mount -t ext4 -o ro /dev/nbd0 /mnt/a
cmp /mnt/a/data /tmp/data && report readback=same
umount /mnt/a
e2fsck -f -n /dev/nbd0 > /tmp/fsck.out 2>&1 && report fsck=clean || {{ cat /tmp/fsck.out; report fsck=dirty; }}
kill -TERM $pid
rc=0; wait $pid || rc=$?
report serve_exit=$rc
cat /tmp/serve.err
[ -e /sys/block/nbd0/pid ] && report nbd_after=attached || report nbd_after=detached
report nbd_size_after=$(cat /sys/block/nbd0/size)
rc=0; raidctl status --json /dev/vda > /tmp/status.json || rc=$?
report status_exit=$rc
report clean=$(grep -o '"clean": *[a-z]*' /tmp/status.json | head -n 1 | sed 's/.*: *//')
rc=0; raidctl scrub /dev/vda > /tmp/scrub.out 2>&1 || rc=$?
cat /tmp/scrub.out
report scrub_exit=$rc
"#
    );
    let out = Vm::new("nbd_device_ext4", &scenario)
        .disks(&disks)
        .run(dir.path())
        .passed("nbd --nbd-device ext4");
    assert_eq!(
        out.get("size"),
        out.get("array_bytes"),
        "/dev/nbd0 has the array's size"
    );
    assert_eq!(
        out.get("served_pid"),
        out.get("our_pid"),
        "raidctl itself runs the device"
    );
    assert_eq!(out.get("oom_score_adj"), "-900");
    // VmLck counts every locked mapping, glibc's reserved (PROT_NONE, never resident) malloc
    // arenas included; VmRSS is what the lock pins. Both measured here: ~470 MiB and ~24 MiB.
    let locked = out.num("vmlck_kb");
    let resident = out.num("vmrss_kb");
    assert!(
        locked >= resident,
        "mlockall: {locked} kB locked, {resident} kB resident"
    );
    assert!(
        resident < 256 << 10,
        "the daemon pins {resident} kB: more than the documented bound"
    );
    assert_eq!(out.get("io_flusher"), "true");
    assert_eq!(out.get("readback"), "same");
    assert_eq!(out.get("fsck"), "clean", "{}", out.tail);
    assert_eq!(out.get("serve_exit"), "0", "{}", out.tail);
    assert_eq!(out.get("nbd_after"), "detached");
    assert_eq!(
        out.get("nbd_size_after"),
        "0",
        "the driver forgot the export"
    );
    assert_eq!(
        out.get("status_exit"),
        "0",
        "healthy after stop: {}",
        out.tail
    );
    assert_eq!(out.get("clean"), "true");
    assert_eq!(
        out.get("scrub_exit"),
        "0",
        "parity consistent: {}",
        out.tail
    );
}

/// A device another server holds is refused (EBUSY from NBD_SET_SOCK: exit 4), and a path
/// that is no nbd device is a usage error (exit 2); the refused server leaves its array
/// healthy and clean and removes its sockets, and the first server keeps serving.
#[test]
fn nbd_device_in_use_or_wrong_is_refused() {
    let dir = crate::util::tempdir();
    let disks = images(dir.path(), "d", 4, 16 << 20);
    let scenario = format!(
        r#"raidctl create -l raid1 -n a /dev/vda /dev/vdb 2>&1
raidctl create -l raid1 -n b --overprovision 50 /dev/vdc /dev/vdd 2>&1
raidctl serve --nbd-device /dev/nbd0 /dev/vda > /tmp/serve.out 2> /tmp/serve.err &
pid=$!
{WAIT_READY}
report size_before=$(cat /sys/block/nbd0/size)
rc=0; raidctl serve --nbd-device /dev/nbd0 /dev/vdc 2> /tmp/e1 || rc=$?
report busy_exit=$rc
report busy_msg="$(tail -n 1 /tmp/e1)"
report size_after=$(cat /sys/block/nbd0/size)
rc=0; raidctl serve --nbd-device /dev/null /dev/vdc 2> /tmp/e2 || rc=$?
report not_nbd_exit=$rc
report not_nbd_msg="$(tail -n 1 /tmp/e2)"
report sockets_left=$(ls /run/raidctl | grep -vc "$(raidctl examine --json /dev/vda | sed -n 's/^  "array_uuid": "\(.*\)",$/\1/p')" || true)
rc=0; raidctl status /dev/vdc > /dev/null || rc=$?
report b_status_exit=$rc
report b_clean=$(raidctl examine --json /dev/vdc | sed -n 's/^  "clean": \([a-z]*\),$/\1/p')
dd if=/dev/nbd0 of=/dev/null bs=1M count=1 2>/dev/null && report a_still_serves=yes
kill -TERM $pid; wait $pid || true
"#
    );
    let out = Vm::new("nbd_device_refused", &scenario)
        .disks(&disks)
        .run(dir.path())
        .passed("nbd device refused");
    assert_eq!(out.get("busy_exit"), "4", "{}", out.tail);
    assert!(
        out.get("busy_msg").contains("attached to another server"),
        "{}",
        out.tail
    );
    // Array b is half the size: a refused attach must not resize a's live device.
    assert_eq!(
        out.get("size_before"),
        out.get("size_after"),
        "the refused server changed the live device's size: {}",
        out.tail
    );
    assert_eq!(out.get("not_nbd_exit"), "2", "{}", out.tail);
    assert!(
        out.get("not_nbd_msg").contains("not an nbd device"),
        "{}",
        out.tail
    );
    assert_eq!(
        out.get("sockets_left"),
        "0",
        "the refused server removed its sockets"
    );
    assert_eq!(out.get("b_status_exit"), "0", "{}", out.tail);
    assert_eq!(out.get("b_clean"), "true", "{}", out.tail);
    assert_eq!(out.get("a_still_serves"), "yes");
}
