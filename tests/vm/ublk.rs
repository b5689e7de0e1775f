//! `raidctl serve --ublk`: the export as /dev/ublkbN through the kernel's ublk driver. In the
//! VM: an ext4 round trip under fio with crc32c verification while a member fails and is
//! rebuilt online, a clean fsck and a clean stop; and kill -9 of the daemon under fio, a
//! restart with --ublk-id that takes the device over (user recovery), the mount surviving
//! and fio's verification passing.

use super::{images, vd, Vm};

const MEMBER_BYTES: u64 = 48 << 20;

/// Starts `raidctl serve --ublk ARGS` in the background as $pid (output in /tmp/serve.N) and
/// waits (at most 120 s: the VM runs under TCG, and a loaded host made a restart after
/// kill -9 take over 30 s to come up, a CI failure that passed alone in 55 s) for its ready line naming /dev/ublkb0.
fn start_serve(n: u32, args: &str) -> String {
    format!(
        r#"raidctl serve --ublk {args} /dev/vda > /tmp/serve.{n} 2> /tmp/serve.{n}.err &
pid=$!
i=0
until grep -q '^/dev/ublkb0$' /tmp/serve.{n} 2>/dev/null; do
    if ! kill -0 $pid 2>/dev/null || [ $i -ge 1200 ]; then
        echo "serve did not come up:"; cat /tmp/serve.{n} /tmp/serve.{n}.err; exit 1
    fi
    sleep 0.1; i=$((i + 1))
done
"#
    )
}

/// fio writing a 16 MiB file in 4 KiB random direct writes, then verifying every block's
/// crc32c; exits non-zero on any verification failure.
const FIO: &str = "fio --name=verify --filename=/mnt/a/fio.dat --size=16M --rw=randwrite --bs=4k \
    --direct=1 --ioengine=psync --verify=crc32c --verify_fatal=1 --do_verify=1 \
    --eta=never --output=/tmp/fio.out";

#[test]
fn ext4_on_ublk_with_fio_verify_and_an_online_rebuild() {
    let dir = crate::util::tempdir();
    let disks = images(dir.path(), "d", 5, MEMBER_BYTES);
    let members: Vec<String> = (0..4).map(vd).collect();
    let scenario = format!(
        r#"raidctl create -l raid5 -c 64K {m} 2>&1
{serve}
report size=$(( $(cat /sys/block/ublkb0/size) * 512 ))
report array_bytes=$(raidctl examine --json /dev/vda | sed -n 's/^  "array_bytes": \([0-9]*\),$/\1/p')
report queues=$(ls /sys/block/ublkb0/mq | wc -l)
report discard=$(cat /sys/block/ublkb0/queue/discard_max_bytes)
mkfs.ext4 -q -F /dev/ublkb0
mkdir -p /mnt/a
mount -t ext4 /dev/ublkb0 /mnt/a
{fio} &
fpid=$!
sleep 2
raidctl fail /dev/vda /dev/vdb 2>&1
report degraded=$(raidctl status --json /dev/vda | grep -o '"state": *"[a-z]*"' | tail -n 1 | sed 's/.*"\([a-z]*\)"$/\1/')
raidctl add /dev/vda /dev/vde 2>&1
rc=0; wait $fpid || rc=$?
report fio_exit=$rc
grep -E 'err=|verify' /tmp/fio.out | head -n 5
i=0; rc=1
while [ $i -lt 600 ]; do
    rc=0; raidctl status /dev/vda > /dev/null 2>&1 || rc=$?
    [ $rc -eq 0 ] && break
    sleep 0.1; i=$((i + 1))
done
report healthy_exit=$rc
umount /mnt/a
e2fsck -f -n /dev/ublkb0 > /tmp/fsck.out 2>&1 && report fsck=clean || {{ cat /tmp/fsck.out; report fsck=dirty; }}
kill -TERM $pid
rc=0; wait $pid || rc=$?
report serve_exit=$rc
cat /tmp/serve.1.err
[ -e /sys/block/ublkb0 ] && report ublk_after=present || report ublk_after=removed
report clean=$(raidctl examine --json /dev/vda | sed -n 's/^  "clean": \([a-z]*\),$/\1/p')
rc=0; raidctl scrub /dev/vda > /tmp/scrub.out 2>&1 || rc=$?
cat /tmp/scrub.out
report scrub_exit=$rc
"#,
        m = members.join(" "),
        serve = start_serve(1, "--queues 2 --queue-depth 32"),
        fio = FIO,
    );
    let out = Vm::new("ublk_ext4_fio_rebuild", &scenario)
        .disks(&disks)
        .with_fio()
        .run(dir.path())
        .passed("ublk ext4 fio rebuild");
    assert_eq!(out.get("size"), out.get("array_bytes"), "{}", out.tail);
    assert_eq!(out.get("queues"), "2", "--queues 2");
    assert!(out.num("discard") > 0, "discard advertised");
    assert_eq!(out.get("degraded"), "degraded", "{}", out.tail);
    assert_eq!(out.get("fio_exit"), "0", "fio verify failed: {}", out.tail);
    assert_eq!(
        out.get("healthy_exit"),
        "0",
        "rebuild did not finish: {}",
        out.tail
    );
    assert_eq!(out.get("fsck"), "clean", "{}", out.tail);
    assert_eq!(out.get("serve_exit"), "0", "{}", out.tail);
    assert_eq!(out.get("ublk_after"), "removed", "{}", out.tail);
    assert_eq!(out.get("clean"), "true", "{}", out.tail);
    assert_eq!(out.get("scrub_exit"), "0", "{}", out.tail);
}

#[test]
fn ublk_daemon_killed_under_fio_is_recovered_and_the_mount_survives() {
    let dir = crate::util::tempdir();
    let disks = images(dir.path(), "d", 4, MEMBER_BYTES);
    let members: Vec<String> = (0..4).map(vd).collect();
    let scenario = format!(
        r#"raidctl create -l raid5 -c 64K {m} 2>&1
{serve1}
mkfs.ext4 -q -F /dev/ublkb0
mkdir -p /mnt/a
mount -t ext4 /dev/ublkb0 /mnt/a
dd if=/dev/urandom of=/tmp/before bs=1M count=4 2>/dev/null
cp /tmp/before /mnt/a/before
sync
{fio} &
fpid=$!
sleep 3
kill -0 $fpid && report fio_running_at_kill=yes
kill -9 $pid
wait $pid || true
report killed=1
report state_after_kill=$(cat /sys/block/ublkb0/size)
sleep 1
{serve2}
report recovered=$(raidctl status --json /dev/vda | grep -o '"recovered": *[a-z]*' | sed 's/.*: *//')
rc=0; wait $fpid || rc=$?
report fio_exit=$rc
grep -E 'err=|verify' /tmp/fio.out | head -n 5
echo 3 > /proc/sys/vm/drop_caches; cmp /mnt/a/before /tmp/before && report before=same
umount /mnt/a
e2fsck -f -n /dev/ublkb0 > /tmp/fsck.out 2>&1 && report fsck=clean || {{ cat /tmp/fsck.out; report fsck=dirty; }}
kill -TERM $pid
rc=0; wait $pid || rc=$?
report serve_exit=$rc
cat /tmp/serve.2.err
[ -e /sys/block/ublkb0 ] && report ublk_after=present || report ublk_after=removed
rc=0; raidctl scrub /dev/vda > /tmp/scrub.out 2>&1 || rc=$?
cat /tmp/scrub.out
report scrub_exit=$rc
"#,
        m = members.join(" "),
        serve1 = start_serve(1, "--ublk-id 0"),
        serve2 = start_serve(2, "--ublk-id 0"),
        fio = FIO,
    );
    let out = Vm::new("ublk_kill9_recovery", &scenario)
        .disks(&disks)
        .with_fio()
        .run(dir.path())
        .passed("ublk kill -9 recovery");
    assert_eq!(out.get("fio_running_at_kill"), "yes", "{}", out.tail);
    assert_eq!(out.get("recovered"), "true", "{}", out.tail);
    assert_eq!(out.get("fio_exit"), "0", "fio verify failed: {}", out.tail);
    assert_eq!(out.get("before"), "same", "{}", out.tail);
    assert_eq!(out.get("fsck"), "clean", "{}", out.tail);
    assert_eq!(out.get("serve_exit"), "0", "{}", out.tail);
    assert_eq!(out.get("ublk_after"), "removed", "{}", out.tail);
    assert_eq!(out.get("scrub_exit"), "0", "{}", out.tail);
}
