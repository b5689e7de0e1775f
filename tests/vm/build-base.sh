#!/usr/bin/env bash
# Builds what the VM tests boot (tests/vm.rs calls this; it is cached under target/):
#   OUT/vmlinuz            Debian's kernel, from the linux-image package (apt-get download)
#   OUT/base.cpio.gz       initramfs base: busybox, mdadm, e2fsprogs, nbd-client, their
#                          libraries, the kernel modules the scenarios use, and /init
#   OUT/fio.cpio.gz        fio and its (many, ~80 MiB) libraries: appended only by scenarios
#                          that run fio, so the others boot a small initramfs
# The raidctl binary and the scenario script are not here: the test appends them as a third
# archive on every run, so a rebuilt raidctl never needs this script again.
# Usage: build-base.sh OUT KERNEL_VERSION
# Exit 3 with "missing: ..." naming the Debian packages to install when a tool is absent.
set -euo pipefail
OUT=$1
V=$2
HERE=$(cd "$(dirname "$0")" && pwd)

missing=()
need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 || [ -x "$1" ] || missing+=("$2 (for $1)")
}
need qemu-system-x86_64 qemu-system-x86
need /bin/busybox busybox-static
need mdadm mdadm
need mkfs.ext4 e2fsprogs
need nbd-client nbd-client
need fio fio
need depmod kmod
need modprobe kmod
need apt-get apt
need dpkg-deb dpkg
need cpio cpio
need xz xz-utils
need ldd libc-bin
if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]}; install with: apt-get install qemu-system-x86 busybox-static mdadm e2fsprogs nbd-client fio kmod cpio xz-utils" >&2
    exit 3
fi
if ! (ldd /bin/busybox 2>&1 || true) | grep -q 'not a dynamic'; then
    echo "missing: a static /bin/busybox (package busybox-static, not busybox)" >&2
    exit 3
fi

mkdir -p "$OUT"
work=$(mktemp -d "$OUT/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The kernel and its modules, from Debian's package.
pkg=linux-image-$V
(cd "$work" && apt-get download "$pkg" >/dev/null 2>"$work/apt.err") || {
    echo "missing: cannot download $pkg: $(tail -n 2 "$work/apt.err" | tr '\n' ' ')(run apt-get update; the package must be in the configured Debian archive)" >&2
    exit 3
}
mkdir "$work/k"
dpkg-deb -x "$work"/linux-image-*.deb "$work/k"
rm -f "$work"/linux-image-*.deb
depmod -b "$work/k" "$V"

root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,proc,sys,dev,tmp,run,mnt,etc,var/tmp}
cp /bin/busybox "$root/bin/busybox"
: > "$root/etc/mdadm.conf"
echo "root:x:0:0:root:/:/bin/sh" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"

# copy_bin PATH... : each binary and every library ldd names, at the same paths.
copy_bin() {
    local dest=$1; shift
    for b in "$@"; do
        local p
        p=$(command -v "$b")
        mkdir -p "$dest$(dirname "$p")"
        cp -L "$p" "$dest$p"
        ldd "$p" | awk '/=>/ { if ($3 ~ /^\//) print $3; next } /^[ \t]*\// { print $1 }' | while read -r lib; do
            mkdir -p "$dest$(dirname "$lib")"
            [ -e "$dest$lib" ] || cp -L "$lib" "$dest$lib"
        done
    done
}
copy_bin "$root" mdadm mke2fs mkfs.ext4 e2fsck fsck.ext4 dumpe2fs nbd-client
# raidctl (appended per run) links libgcc_s, libm and libc: make sure they are here.
for lib in /lib/x86_64-linux-gnu/libgcc_s.so.1 /lib/x86_64-linux-gnu/libm.so.6; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done

# Modules, decompressed (busybox insmod does not read .ko.xz), loaded in dependency order.
mods="virtio_blk nbd md-mod raid0 raid1 raid10 raid456 ext4 loop ublk_drv"
: > "$root/etc/modules.order"
for m in $mods; do
    modprobe -C /dev/null -d "$work/k" -S "$V" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#"$work/k"}
    mkdir -p "$root$(dirname "$rel")"
    case $ko in
        *.xz) xz -dc "$ko" > "$root${rel%.xz}"; echo "${rel%.xz}" >> "$root/etc/modules.order" ;;
        *) cp "$ko" "$root$rel"; echo "$rel" >> "$root/etc/modules.order" ;;
    esac
done
install -m 0755 "$HERE/init" "$root/init"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$work/base.cpio.gz"

# fio, as its own layer.
fio_root=$work/fio
copy_bin "$fio_root" fio
(cd "$fio_root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$work/fio.cpio.gz"

cp "$work/k/boot/vmlinuz-$V" "$work/vmlinuz"
mv "$work/base.cpio.gz" "$work/fio.cpio.gz" "$work/vmlinuz" "$OUT/"
echo "$V" > "$OUT/version"
