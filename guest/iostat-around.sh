#!/bin/sh
# iostat-around.sh POOL DIR CMD...: runs CMD between two `zpool iostat -wp POOL`
# snapshots, DIR/iostat-before.txt and DIR/iostat-after.txt, and exits with
# CMD's status. zprof records this script, so its vdev histograms and the
# snapshots' difference cover the same I/Os (taken outside the recording, the
# snapshots would also catch a txg sync that zprof missed). The ZIL's kstats
# (DIR/zil-before.txt, zil-after.txt) count the log blocks written meanwhile,
# the ARC's (DIR/arc-before.txt, arc-after.txt) its hits and misses, the
# DMU's (DIR/dmu_tx-before.txt, dmu_tx-after.txt) the throttle's delays, the
# ZIO's (DIR/zio_stats-*.txt, 2.3 and later) the allocation class fallbacks. The
# pool is synced before the second snapshot (see below), and its txgs kstat
# kept (DIR/txgs.txt).
pool=$1 dir=$2
shift 2
zpool iostat -wp "$pool" > "$dir/iostat-before.txt" || exit 125
cat /proc/spl/kstat/zfs/zil > "$dir/zil-before.txt" || exit 125
cat /proc/spl/kstat/zfs/arcstats > "$dir/arc-before.txt" || exit 125
cat /proc/spl/kstat/zfs/dmu_tx > "$dir/dmu_tx-before.txt" || exit 125
# The allocation class fallbacks (2.3 and later).
zio_stats=/proc/spl/kstat/zfs/zio_stats
[ ! -e $zio_stats ] || cat $zio_stats > "$dir/zio_stats-before.txt" || exit 125
"$@"
rc=$?
# The txg the command left dirty is written inside the recording, so zprof
# detaches from an idle pool: under emulation, the kernel patching the code
# of probed functions that another vCPU is running has oopsed (zio_done
# calling address 0 at a detach on 6.1; three oopses in the 6.17 btf run of
# one CI, two of them about when a section's recording ended).
zpool sync "$pool" || exit 125
# ZFS's own history of the txgs, which zprof's txg rows are checked against.
cat /proc/spl/kstat/zfs/"$pool"/txgs > "$dir/txgs.txt" || exit 125
zpool iostat -wp "$pool" > "$dir/iostat-after.txt" || exit 125
cat /proc/spl/kstat/zfs/zil > "$dir/zil-after.txt" || exit 125
cat /proc/spl/kstat/zfs/arcstats > "$dir/arc-after.txt" || exit 125
cat /proc/spl/kstat/zfs/dmu_tx > "$dir/dmu_tx-after.txt" || exit 125
[ ! -e $zio_stats ] || cat $zio_stats > "$dir/zio_stats-after.txt" || exit 125
exit $rc
