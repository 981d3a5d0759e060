#!/usr/bin/env bash
# tests/vm/run.sh -- real-kernel tests of ptb's Linux runtime in a QEMU guest with emulated
# NUMA nodes (4 nodes with one CPU each + 1 CPU-less memory node).
#
# 1. installs what it needs (qemu-system-x86, busybox-static, cpio) with apt-get;
# 2. fetches Debian's kernel package (not installed on the host; unpacked with dpkg -x);
# 3. builds static `ptb` and `ptb-testapp` (separate target dir target/vm);
# 4. packs them with busybox and tests/vm/guest-tests.sh into an initramfs and boots it
#    (TCG when KVM cannot run the guest; ~20 s per boot);
# 5. passes when the guest prints VMTEST-RESULT=0.
#
# Env: PTB_SKIP_VM=1 skips; VM_WORK (cache dir, default target/vm/work); TIMEOUT (s, 420);
# NODES (4); MEMONLY (1); NODE_MEM (256M); ACCEL (auto|kvm|tcg).
# Based on a QEMU NUMA guest recipe (initramfs-only busybox guest, serial console).
set -euo pipefail
if [ "${PTB_SKIP_VM:-0}" = 1 ]; then echo "tests/vm: skipped (PTB_SKIP_VM=1)"; exit 0; fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
W=${VM_WORK:-$REPO/target/vm/work}
ACCEL=${ACCEL:-auto}; TIMEOUT=${TIMEOUT:-420}; BOOT_TIMEOUT=${BOOT_TIMEOUT:-120}
NODES=${NODES:-4}; MEMONLY=${MEMONLY:-1}; NODE_MEM=${NODE_MEM:-256M}
mkdir -p "$W"
log() { echo "[tests/vm $(date +%T)] $*" >&2; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
T0=$(ms)

# ---- 1. host packages -------------------------------------------------------
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi
! ldd /bin/busybox >/dev/null 2>&1 || { echo "tests/vm: need a static busybox (busybox-static)" >&2; exit 2; }

# ---- 2. guest kernel from Debian's package ------------------------------------
KD=$W/kernel
if [ ! -f "$KD/vmlinuz" ]; then
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$pkg" ] || { apt-get update >/dev/null; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); }
  log "fetching kernel package $pkg"
  rm -rf "$KD" "$W/kdl" && mkdir -p "$KD" "$W/kdl"
  (cd "$W/kdl" && apt-get download "$pkg" >/dev/null 2>&1)
  dpkg -x "$W/kdl/$pkg"_*.deb "$W/kdl/x"
  cp "$W"/kdl/x/boot/vmlinuz-* "$KD/vmlinuz"; cp "$W"/kdl/x/boot/config-* "$KD/config"
  rm -rf "$W/kdl"
fi
# An uncompressed vmlinux with a PVH entry boots without the slow (TCG) decompression.
if [ ! -f "$KD/vmlinux" ] && grep -q '^CONFIG_PVH=y' "$KD/config" && grep -q '^CONFIG_KERNEL_XZ=y' "$KD/config" \
   && command -v python3 >/dev/null; then
  KD=$KD python3 - <<'PYEOF' || rm -f "$KD/vmlinux"
import lzma, os
kd = os.environ["KD"]
d = open(kd + "/vmlinuz", "rb").read()
i = d.find(b"\xfd7zXZ\x00")
assert i > 0, "no xz stream"
open(kd + "/vmlinux", "wb").write(lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(d[i:]))
PYEOF
fi
KIMG=$KD/vmlinuz; [ -s "$KD/vmlinux" ] && KIMG=$KD/vmlinux
for o in NUMA MIGRATION ACPI_NUMA PERF_EVENTS SERIAL_8250_CONSOLE BLK_DEV_INITRD; do
  grep -q "^CONFIG_$o=y" "$KD/config" || { echo "tests/vm: guest kernel lacks CONFIG_$o" >&2; exit 2; }
done

# ---- 3. static ptb + test program --------------------------------------------
log "building static ptb and ptb-testapp (release, target/vm)"
(cd "$REPO" && RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release \
   --target x86_64-unknown-linux-gnu --target-dir target/vm -p ptb -p ptb-linux --bin ptb --bin ptb-testapp)
BIN=$REPO/target/vm/x86_64-unknown-linux-gnu/release
for b in ptb ptb-testapp; do ! ldd "$BIN/$b" 2>&1 | grep -q '=>' || { echo "tests/vm: $b is not static" >&2; exit 2; }; done
log "built in $(( ($(ms) - T0) / 1000 )) s"

# ---- 4. initramfs -------------------------------------------------------------
R=$W/root
rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,tmp,run}
cp /bin/busybox "$R/bin/"
for b in ptb ptb-testapp; do strip -o "$R/bin/$b" "$BIN/$b" 2>/dev/null || cp "$BIN/$b" "$R/bin/"; done
for a in $(/bin/busybox --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
install -m 755 "$REPO/tests/vm/guest-tests.sh" "$R/bin/guest-tests"
cat > "$R/init" <<'IEOF'
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
( sleep "${GUEST_WD:-400}"; echo "GUEST-WATCHDOG fired"; poweroff -f ) &
echo "GUEST-UP uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r) cpus=$(nproc)"
rc=0
/bin/guest-tests || rc=1
echo "VMTEST-RESULT=$rc"
poweroff -f
IEOF
chmod 755 "$R/init"
mknod -m 600 "$R/dev/console" c 5 1 2>/dev/null || true
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$W/initrd.gz")

# ---- 5. NUMA topology and boot --------------------------------------------------
numa=()
TOTAL=$((NODES + MEMONLY))
for ((i = 0; i < TOTAL; i++)); do
  numa+=(-object "memory-backend-ram,size=$NODE_MEM,id=m$i" -numa "node,memdev=m$i,nodeid=$i")
  [ $i -lt $NODES ] && numa[${#numa[@]}-1]+=",cpus=$i"
done
for ((i = 0; i < TOTAL; i++)); do for ((j = i + 1; j < TOTAL; j++)); do
  numa+=(-numa "dist,src=$i,dst=$j,val=$((10 + 10 * (j - i)))")
done; done
mem_mb=$(( TOTAL * $(numfmt --from=iec "$NODE_MEM") / 1048576 ))
bios=(); [ -f /usr/share/qemu/qboot.rom ] && bios=(-bios /usr/share/qemu/qboot.rom)
acc=$ACCEL
if [ "$acc" = auto ]; then
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; then acc=kvm; else acc=tcg; fi
fi
boot() {
  local a=$1 logf=$W/guest-$1.log t0 qpid up=0
  if [ "$a" = kvm ]; then cpu=(-accel kvm -cpu host); else cpu=(-accel tcg,thread=multi -cpu max); fi
  : > "$logf"; t0=$(ms)
  log "booting ($a, $NODES nodes + $MEMONLY memory-only, $NODE_MEM each); console: $logf"
  timeout -k 5 "$TIMEOUT" qemu-system-x86_64 "${cpu[@]}" -machine q35 -smp "$NODES,sockets=$NODES,cores=1,threads=1" \
    -m "${mem_mb}M" "${numa[@]}" -nodefaults -no-user-config -display none -serial "file:$logf" -monitor none \
    -no-reboot "${bios[@]}" -kernel "$KIMG" -initrd "$W/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet mitigations=off lpj=10000000 GUEST_WD=$((TIMEOUT - 10))" &
  qpid=$!
  ( tail -n +1 -f --pid=$qpid "$logf" 2>/dev/null | sed -u 's/\r$//' | grep --line-buffered -E 'VMTEST|GUEST|TESTAPP (pages|done)|ptb bench|pages/s|ratio|check-plans' ) &
  while kill -0 $qpid 2>/dev/null; do
    if [ $up = 0 ] && grep -q GUEST-UP "$logf"; then up=1; log "guest up after $(( $(ms) - t0 )) ms"; fi
    if [ $up = 0 ] && [ $(( $(ms) - t0 )) -gt $(( BOOT_TIMEOUT * 1000 )) ]; then log "no GUEST-UP in ${BOOT_TIMEOUT}s"; kill $qpid; break; fi
    sleep 0.5
  done
  wait $qpid 2>/dev/null || true
  sleep 0.3
  log "guest finished after $(( $(ms) - t0 )) ms"
  grep -q '^VMTEST-RESULT=0' "$logf"
}
if boot "$acc"; then log "PASS ($(( ($(ms) - T0) / 1000 )) s in all)"; exit 0; fi
if [ "$acc" = kvm ] && ! grep -q GUEST-UP "$W/guest-kvm.log"; then
  log "kvm could not run the guest; retrying with tcg"
  if boot tcg; then log "PASS ($(( ($(ms) - T0) / 1000 )) s in all)"; exit 0; fi
fi
log "FAIL: see $W/guest-$acc.log"; grep -E 'VMTEST FAIL' "$W/guest-$acc.log" >&2 || true
exit 1
