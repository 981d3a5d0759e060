#!/usr/bin/env bash
# Capture the sysfs/proc files that `ptb topology` reads into DEST, as a fixture tree that
# `ptb_topology::sysfs::read_machine(DEST)` reads like `/`.
#
#   scripts/capture-sysfs.sh crates/topology/tests/fixtures/my-machine
#
# Copies, for every NUMA node: cpulist, meminfo, distance; for every CPU: topology ids and the
# level/type/shared_cpu_list/size of each cache; plus cpu/{online,possible,present},
# node/{online,possible,has_cpu,has_memory}, /proc/meminfo and the host name.
# SRC (default /) can point at another tree, e.g. a mounted guest root.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: $0 DEST [SRC]   (copies the topology files under SRC, default /, into DEST)" >&2
    exit 2
fi
DEST=$1
SRC=${2:-/}
mkdir -p "$DEST"

copy() { # copy SRC-relative file $1 if it exists and is readable
    local rel=$1
    if [ -r "$SRC/$rel" ] && [ -f "$SRC/$rel" ]; then
        mkdir -p "$DEST/$(dirname "$rel")"
        cat "$SRC/$rel" >"$DEST/$rel"
    fi
}

node=sys/devices/system/node
cpu=sys/devices/system/cpu
for f in online possible has_cpu has_memory has_normal_memory; do copy "$node/$f"; done
for d in "$SRC/$node"/node[0-9]*; do
    [ -d "$d" ] || continue
    n=$(basename "$d")
    for f in cpulist meminfo distance; do copy "$node/$n/$f"; done
done
for f in online possible present; do copy "$cpu/$f"; done
for d in "$SRC/$cpu"/cpu[0-9]*; do
    [ -d "$d" ] || continue
    c=$(basename "$d")
    for f in physical_package_id die_id core_id cluster_id core_cpus_list die_cpus_list package_cpus_list; do
        copy "$cpu/$c/topology/$f"
    done
    for i in "$d"/cache/index[0-9]*; do
        [ -d "$i" ] || continue
        x=$(basename "$i")
        for f in level type shared_cpu_list size; do copy "$cpu/$c/cache/$x/$f"; done
    done
done
copy proc/meminfo
copy proc/sys/kernel/hostname
echo "captured $(find "$DEST" -type f | wc -l) files from $SRC into $DEST"
