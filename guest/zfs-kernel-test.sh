#!/bin/sh
# The kernel-target test, run inside the guest by `cargo xtask guest test`.
# It only runs things and keeps what they said under /results; the host checks
# the figures (xtask/src/guest/check.rs). It fails by itself only when a step
# cannot run at all.
#
#   /results/zfs-functions.txt   every zfs.ko text symbol in /proc/kallsyms
#   /results/probes.json         zprof probes --target kernel --format json
#   /results/CONFIG/             one pool per CONFIG: rec.json (zprof; rz1-off with
#                                --off-cpu, and its offcpu.svg), fio.json,
#                                iostat-before.txt / iostat-after.txt (zpool iostat -wp,
#                                taken inside the recording by iostat-around.sh)
#   /results/requests/           two fio processes (fio-a, fio-b, in cgroups a and b)
#                                on two file systems and two zvols at once: rec.json,
#                                fio-a.json, fio-b.json, the report by each grouping
#   /results/two-pools/          fsync writers on tpa and async writers on tpb at once,
#                                one recording: rec.json, fio-tpa.json, fio-tpb.json,
#                                explain.json, explain-tpa.json (--pool tpa),
#                                report-tpb.json (--pool tpb), nosuchpool.rc/.err
#   /results/features/           2.3 and later (else features/absent says why):
#                                Direct I/O (dio.json, fio-dio.json; dio-read.json,
#                                fio-dio-read.json) and fast dedup (dedup.json,
#                                fio-dedup.json, ddt-before.txt / ddt-after.txt:
#                                the pool's ddt_stats kstats inside the recording),
#                                commits that fell back to a txg sync (fallback.json,
#                                fio-fallback.json, zil-before.txt / zil-after.txt)
#   /results/sigterm/            a recording stopped by SIGTERM
#   /results/detach.txt          kprobes registered after each zprof exit
#   /results/kprobe-multi/       rec-0.json, rec-1.json: no workload, perf-event
#                                kprobes and kprobe_multi links (their attach/detach)
#   /results/serve/              zprof serve's scrapes before and after an fsync job
#                                (before.prom, after.prom), fio.json, its exit status
set -u
RUNTIME=8
ONLY=
SECTIONS=all
for arg in "$@"; do
    case $arg in
        --runtime=*) RUNTIME=${arg#*=} ;;
        # --sections=variant: leave out what does not depend on where the
        # offsets come from (SIGTERM, kprobe_multi links, off-CPU, serve, two
        # of the four pool configurations), run once per kernel.
        # --sections=offsets: only one pool configuration as well (no lz4
        # mirror, no request layer): for offsets the host checks equal to the
        # BTF run's, member by member.
        --sections=*) SECTIONS=${arg#*=} ;;
        # --only=requests, --only=two-pools, --only=features: the probes and that one part
        # (while working on it).
        --only=*) ONLY=${arg#*=} ;;
        *) echo "zfs-kernel-test: unknown argument $arg"; exit 2 ;;
    esac
done
R=/results
V=/tmp/vdev
mkdir -p $R $V
echo "$SECTIONS" > $R/sections

fail() { echo "zfs-kernel-test: FAILED: $*"; exit 1; }
step() { echo "== $* ($(cut -d' ' -f1 /proc/uptime) s)"; }

# Probes registered: kprobe_events lists those made through tracefs,
# debugfs's kprobes/list every kprobe, including perf-made ones (aya's), and
# enabled_functions every function ftrace hooks, which is where kprobe_multi
# links (fprobe) show. The guest kernel registers none of its own.
kprobes_left() {
    echo "kprobe_events=$(grep -c . /sys/kernel/tracing/kprobe_events)" \
        "kprobes_list=$(grep -c . /sys/kernel/debug/kprobes/list)" \
        "ftrace_functions=$(grep -c . /sys/kernel/tracing/enabled_functions)"
}

# Loop devices (block devices: zfs.ko's vdev_disk path, where files take
# vdev_file's), with partition scanning for the label zpool writes.
LOOPS=0
if [ -e /payload/loop.ko ]; then
    insmod /payload/loop.ko max_part=15 || fail "insmod loop.ko"
fi

# make_pool NAME raidz1|mirror log|nolog COMPRESSION files|loop: sparse files
# in tmpfs, used as they are or through loop devices.
make_pool() {
    name=$1 layout=$2 log=$3 compression=$4 media=$5
    case $layout in raidz1) n=4 ;; raidz2) n=5 ;; mirror) n=2 ;; *) fail "layout $layout" ;; esac
    devs=""
    for i in $(seq 1 $n); do
        truncate -s 2G $V/$name-$i
        if [ "$media" = loop ]; then
            dev=/dev/loop$LOOPS
            LOOPS=$((LOOPS + 1))
            losetup $dev $V/$name-$i || fail "losetup $dev"
            echo $dev >> $V/$name.loops
            devs="$devs $dev"
        else
            devs="$devs $V/$name-$i"
        fi
    done
    if [ "$log" = log ]; then
        truncate -s 1G $V/$name-log
        devs="$devs log $V/$name-log"
    fi
    zpool create -f -o ashift=12 -o cachefile=none -O compression="$compression" \
        -O mountpoint=legacy "$name" $layout $devs || fail "zpool create $name"
    mkdir -p /mnt/$name
    mount -t zfs "$name" /mnt/$name || fail "mount $name"
}

destroy_pool() {
    umount /mnt/$1
    zpool destroy "$1" || fail "zpool destroy $1"
    if [ -e $V/$1.loops ]; then
        for dev in $(cat $V/$1.loops); do losetup -d $dev; done
        rm -f $V/$1.loops
    fi
    rm -f $V/$1-*
}

# The fio job: 4k random writes, an fsync after each (fsync=1).
job() {
    echo "--name=fsync --filename=/mnt/$1/fio.dat --rw=randwrite --bs=4k --size=64m" \
        "--ioengine=psync --fsync=1 --buffer_compress_percentage=50 --refill_buffers"
}

# run_config NAME LAYOUT LOG COMPRESSION MEDIA
run_config() {
    name=$1
    d=$R/$name
    mkdir -p $d
    step "$name: $2, $3, compression=$4, $5"
    make_pool "$@"
    echo "layout=$2 log=$3 compression=$4 media=$5 runtime=$RUNTIME" > $d/config
    zpool status "$name" > $d/zpool-status.txt
    # Lay the file out first, outside the recording, so every write and fsync
    # zprof sees is one fio counts.
    fio $(job $name) --create_only=1 > $d/fio-layout.txt 2>&1 || fail "fio layout on $name"
    zpool sync "$name"
    # $RECORD_EXTRA: options for this config's recording only (off-CPU time
    # costs a program run per context switch, which the other figures should not pay).
    zprof record --target kernel ${RECORD_EXTRA:-} -o $d/rec.json -- iostat-around.sh "$name" $d \
        fio $(job $name) --runtime=$RUNTIME --time_based --output-format=json --output=$d/fio.json \
        > $d/report.txt 2> $d/zprof.err
    rc=$?
    echo "$name: $(kprobes_left)" >> $R/detach.txt
    cat $d/report.txt
    [ $rc -eq 0 ] || fail "zprof record on $name exited with $rc: $(cat $d/zprof.err)"
    if [ -n "${RECORD_EXTRA:-}" ]; then
        zprof flamegraph --kind off-cpu -o $d/offcpu.svg $d/rec.json || fail "zprof flamegraph --kind off-cpu"
    fi
    destroy_pool "$name"
}

# The async writers of the two-pool run: 64k random writes, no fsync.
async_job() {
    echo "--name=async --filename=/mnt/$1/fio.dat --rw=randwrite --bs=64k --size=64m" \
        "--ioengine=psync --buffer_compress_percentage=50 --refill_buffers"
}

# Two pools recorded at once, as on a host with a boot pool beside its data
# pool: fsync writers on tpa, async writers on tpb. The host checks that each
# finding names its pool with that pool's figures and that --pool keeps one.
run_two_pools() {
    d=$R/two-pools
    mkdir -p $d
    step "two pools: fsync writes on tpa (raidz1), async writes on tpb (mirror), at once"
    make_pool tpa raidz1 nolog off files
    make_pool tpb mirror nolog lz4 files
    fio $(job tpa) --create_only=1 > $d/fio-layout.txt 2>&1 || fail "fio layout on tpa"
    fio $(async_job tpb) --create_only=1 >> $d/fio-layout.txt 2>&1 || fail "fio layout on tpb"
    zpool sync tpa tpb
    zprof record --target kernel -o $d/rec.json -- sh -c \
        "fio $(job tpa) --runtime=$RUNTIME --time_based --output-format=json --output=$d/fio-tpa.json &
         fio $(async_job tpb) --runtime=$RUNTIME --time_based --output-format=json --output=$d/fio-tpb.json &
         wait" > $d/report.txt 2> $d/zprof.err
    rc=$?
    echo "two-pools: $(kprobes_left)" >> $R/detach.txt
    [ $rc -eq 0 ] || fail "zprof record (two pools) exited with $rc: $(cat $d/zprof.err)"
    zprof explain --format json $d/rec.json > $d/explain.json 2> $d/explain.err \
        || fail "zprof explain (two pools): $(cat $d/explain.err)"
    zprof explain --pool tpa --format json $d/rec.json > $d/explain-tpa.json 2> $d/explain.err \
        || fail "zprof explain --pool tpa: $(cat $d/explain.err)"
    zprof report --pool tpb --format json $d/rec.json > $d/report-tpb.json 2> $d/explain.err \
        || fail "zprof report --pool tpb: $(cat $d/explain.err)"
    zprof explain --pool tpa $d/rec.json | head -12
    zprof explain --pool nosuchpool $d/rec.json > /dev/null 2> $d/nosuchpool.err
    echo $? > $d/nosuchpool.rc
    destroy_pool tpa
    destroy_pool tpb
}

# Async 64k writers under a 32 MiB zfs_dirty_data_max: the write throttle
# delays them from 60% of it on. The DMU's kstats around fio (iostat-around.sh)
# count the transactions marked for delay, for the host's check of the delays
# zprof saw and the dirty levels they came at.
run_throttle() {
    d=$R/throttle
    mkdir -p $d
    step "throttle: 64k async writes under a 32 MiB zfs_dirty_data_max"
    make_pool thr raidz1 nolog off files
    params=/sys/module/zfs/parameters
    old_max=$(cat $params/zfs_dirty_data_max)
    fio $(async_job thr) --create_only=1 > $d/fio-layout.txt 2>&1 || fail "fio layout on thr"
    zpool sync thr
    echo 33554432 > $params/zfs_dirty_data_max || fail "setting zfs_dirty_data_max"
    zprof record --target kernel -o $d/rec.json -- iostat-around.sh thr $d \
        fio $(async_job thr) --runtime=$RUNTIME --time_based --output-format=json --output=$d/fio.json \
        > $d/report.txt 2> $d/zprof.err
    rc=$?
    echo "$old_max" > $params/zfs_dirty_data_max
    echo "throttle: $(kprobes_left)" >> $R/detach.txt
    [ $rc -eq 0 ] || fail "zprof record (throttle) exited with $rc: $(cat $d/zprof.err)"
    zprof explain --format json $d/rec.json > $d/explain.json 2> $d/explain.err \
        || fail "zprof explain (throttle): $(cat $d/explain.err)"
    zprof explain $d/rec.json | head -30
    destroy_pool thr
}

# A special vdev of 64 MiB (the least ZFS takes) beside a 2 GiB data file,
# and 512-byte records of random data (zeros: indirect blocks that compress
# 27 times, 9 MiB for 400 MiB): the indirect blocks of a few hundred MiB fill the
# special class, and ZFS allocates the metadata that follows in the normal
# class (zio_stats' alloc_class_fallbacks counts them from 2.3 on).
run_special() {
    d=$R/special
    mkdir -p $d
    step "special: a 64 MiB special vdev filled by metadata"
    truncate -s 2G $V/sp-1
    truncate -s 64M $V/sp-special
    zpool create -f -o ashift=9 -o cachefile=none -O mountpoint=legacy -O recordsize=512 -O compression=off \
        sp $V/sp-1 special $V/sp-special || fail "zpool create sp"
    mkdir -p /mnt/sp
    mount -t zfs sp /mnt/sp || fail "mount sp"
    zprof record --target kernel -o $d/rec.json -- iostat-around.sh sp $d \
        dd if=/dev/urandom of=/mnt/sp/f bs=1M count=400 > $d/report.txt 2> $d/zprof.err \
        || fail "zprof record (special): $(cat $d/zprof.err)"
    echo "special: $(kprobes_left)" >> $R/detach.txt
    zpool list -Hpv sp > $d/zpool-list.txt
    zprof explain --format json $d/rec.json > $d/explain.json 2> $d/explain.err \
        || fail "zprof explain (special): $(cat $d/explain.err)"
    destroy_pool sp
}

# The real commands (zfs recv, a zvol stream, pgbench) run in the newest
# cell only, the one whose image has PostgreSQL: 6 minutes a cell.
run_benchmarks() {
    if ! ls -d /usr/lib/postgresql/*/bin > /dev/null 2>&1; then
        echo "the real benchmarks run in the newest cell (its image has PostgreSQL)" > $R/benchmarks-absent
        return 0
    fi
    run_recv
    run_zvol_stream
    run_pgbench
}

# zfs send | zfs recv: a dataset of 16 MiB of 60%-compressible data sent to
# a file once, then received under zprof run into a dataset per compression
# setting (small data: zstd-19 under emulation), each with its compressratio.
RECV_SETTINGS="off lz4 zstd-fast zstd-3 zstd-19"
run_recv() {
    d=$R/recv
    mkdir -p $d
    step "recv: zfs send to a file, zfs recv of it under each compression"
    make_pool sr raidz1 nolog off files
    zfs create -o mountpoint=legacy sr/src || fail "zfs create sr/src"
    mkdir -p /mnt/src
    mount -t zfs sr/src /mnt/src || fail "mount sr/src"
    fio --name=src --filename=/mnt/src/f --rw=write --bs=128k --size=16m --ioengine=psync \
        --buffer_compress_percentage=60 --refill_buffers > $d/fio.txt 2>&1 || fail "fio (recv source)"
    umount /mnt/src
    zfs snapshot sr/src@s || fail "zfs snapshot"
    zfs send sr/src@s > $V/stream || fail "zfs send"
    stat -c %s $V/stream > $d/stream-bytes.txt
    for c in $RECV_SETTINGS; do
        zprof run --target kernel -o $d/recv-$c.json -- \
            sh -c "zfs recv -o compression=$c sr/dst-$c < $V/stream" > $d/recv-$c-report.txt 2> $d/recv-$c.err \
            || fail "zprof run (zfs recv, $c): $(cat $d/recv-$c.err)"
        zfs get -Hp -o value compressratio sr/dst-$c > $d/ratio-$c.txt
        zprof explain --format json $d/recv-$c.json > $d/recv-$c-explain.json 2> $d/recv-$c-explain.err \
            || fail "zprof explain (zfs recv, $c): $(cat $d/recv-$c-explain.err)"
        for out in folded svg; do
            zprof flamegraph --kind workload -o $d/recv-$c.$out $d/recv-$c.json 2> $d/recv-$c-flamegraph.err \
                || fail "zprof flamegraph (zfs recv, $c): $(cat $d/recv-$c-flamegraph.err)"
        done
    done
    # One row per setting: time, bytes the leaves wrote, compression's CPU.
    zprof compare --format json $(for c in $RECV_SETTINGS; do echo $d/recv-$c.json; done) \
        > $d/settings.json 2> $d/settings.err || fail "zprof compare (zfs recv): $(cat $d/settings.err)"
    echo "recv: $(kprobes_left)" >> $R/detach.txt
    rm -f $V/stream
    destroy_pool sr
}

# A stream of 64 MiB of random data into a zvol of 8k and of 1M blocks on a
# raidz2 (dd in 1 MiB writes, flushed at the end), under zprof run.
run_zvol_stream() {
    d=$R/zvol-stream
    mkdir -p $d
    step "zvol stream: 64 MiB into zvols of 8k and 1M blocks on raidz2"
    make_pool zst raidz2 nolog off files
    dd if=/dev/urandom of=$V/random bs=1M count=64 2> /dev/null || fail "dd (random data)"
    for vbs in 8k 1M; do
        zfs create -V 256M -o volblocksize=$vbs -o compression=off zst/v$vbs || fail "zfs create zst/v$vbs"
        dev=$(zvol_device 524288)
        zprof run --target kernel -o $d/$vbs.json -- dd if=$V/random of=$dev bs=1M count=64 conv=fsync \
            > $d/$vbs-report.txt 2> $d/$vbs.err || fail "zprof run (zvol $vbs): $(cat $d/$vbs.err)"
        zprof explain --format json $d/$vbs.json > $d/$vbs-explain.json 2> $d/$vbs-explain.err \
            || fail "zprof explain (zvol $vbs): $(cat $d/$vbs-explain.err)"
        zfs destroy zst/v$vbs || fail "zfs destroy zst/v$vbs"
    done
    echo "zvol-stream: $(kprobes_left)" >> $R/detach.txt
    rm -f $V/random
    destroy_pool zst
}

# pgbench on PostgreSQL (the newest cell's image has it): TPC-B with 4
# clients on a dataset of recordsize 8k and of 128k, without and with a log
# vdev, the data vdevs slowed by zinject (5 ms an I/O) so that the pool
# behaves like disks and the log vdev like an SSD beside them. The server
# runs inside the recording (zprof follows the command's processes, and the
# backends are the server's): started, its WAL statistics reset, pgbench,
# the WAL syncs read, stopped (the shutdown checkpoint is in the server's
# log, with the files it synced).
run_pgbench() {
    d=$R/pgbench
    mkdir -p $d
    chmod 777 $d
    pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n1)
    if [ -z "$pgbin" ]; then
        echo "no PostgreSQL in this cell's image (the newest cell has it)" | tee $d/absent
        return 0
    fi
    for rs in 8k 128k; do
        for log in nolog log; do
            pgbench_case $pgbin $rs $log
        done
        # The SLOG what-if of the run without a log vdev, on the log vdev
        # of the run with one, against that run.
        zprof compare --format json $d/$rs-nolog-bench.json $d/$rs-log-bench.json \
            > $d/$rs-compare.json 2> $d/$rs-compare.err \
            || fail "zprof compare (pgbench $rs): $(cat $d/$rs-compare.err)"
    done
    echo "pgbench: $(kprobes_left)" >> $R/detach.txt
}

# as_postgres CMD...: CMD as the postgres user (the server refuses root),
# with PostgreSQL's programs on PATH. busybox su reads options after the
# user too, so the command goes in a script (its arguments single-quoted).
as_postgres() {
    script=$(mktemp /tmp/as-postgres.XXXXXX)
    {
        echo "export PATH=$pgbin:\$PATH TZ=UTC"
        printf 'exec'
        for arg in "$@"; do printf " '%s'" "$arg"; done
        echo
    } > $script
    chmod 755 $script
    su -s /bin/sh postgres -c "sh $script"
    rc=$?
    rm -f $script
    return $rc
}

# pgbench_case BIN RECORDSIZE LOG
pgbench_case() {
    pgbin=$1 rs=$2 log=$3 case=$2-$3
    step "pgbench: recordsize=$rs, $log"
    make_pool pg raidz1 $log off files
    zfs create -o mountpoint=legacy -o recordsize=$rs pg/db || fail "zfs create pg/db"
    mkdir -p /mnt/db
    mount -t zfs pg/db /mnt/db || fail "mount pg/db"
    chown 70:70 /mnt/db
    for i in 1 2 3 4; do
        zinject -d $V/pg-$i -D 5:1 pg > /dev/null || fail "zinject -d pg-$i"
    done
    data=/mnt/db/data
    # full_page_writes off, as on ZFS it usually is (copy-on-write never
    # tears a page): with full-page images a run's WAL per transaction
    # depends on how many pages it touches first, more for the slow run
    # without a log vdev (2.3 WAL writes per commit) than for the fast one
    # with it (1.8), a database effect no what-if of ZFS can know.
    opts="-k /tmp -c listen_addresses= -c log_checkpoints=on -c shared_buffers=32MB -c max_wal_size=256MB -c checkpoint_timeout=300s -c full_page_writes=off"
    as_postgres initdb -D $data --locale=C -E UTF8 -A trust -U postgres > $d/$case-initdb.txt 2>&1 \
        || fail "initdb ($case): $(tail -5 $d/$case-initdb.txt)"
    as_postgres pg_ctl -D $data -l $d/$case-setup.log -w -o "$opts" start > /dev/null \
        || fail "pg_ctl start ($case): $(tail -5 $d/$case-setup.log)"
    as_postgres pgbench -h /tmp -i -s 1 postgres > $d/$case-init.txt 2>&1 || fail "pgbench -i ($case)"
    as_postgres pg_ctl -D $data -m fast -w stop > /dev/null || fail "pg_ctl stop ($case)"
    # The server's own start and stop, recorded alone in the first case:
    # their syncs (the control file, the statistics file) are neither WAL
    # syncs nor a checkpoint's, and the check takes them off every case.
    runs="bench"
    [ $case != 8k-nolog ] || runs="idle bench"
    for run in $runs; do
        bench=""
        [ $run = idle ] || bench="pgbench -h /tmp -c 4 -T $RUNTIME postgres || exit 1"
        cat > $d/$case-$run.sh <<EOF_PG
export PATH=$pgbin:\$PATH TZ=UTC
pg_ctl -D $data -l $d/$case-$run-server.log -w -o "$opts" start > /dev/null || exit 1
psql -h /tmp -Atq -c "select pg_stat_reset_shared('wal')" postgres > /dev/null || exit 1
$bench
psql -h /tmp -Atq -c "select wal_sync from pg_stat_wal" postgres > $d/$case-$run-wal-sync.txt || exit 1
pg_ctl -D $data -m fast -w stop > /dev/null
EOF_PG
        zprof run --target kernel -o $d/$case-$run.json -- su -s /bin/sh postgres -c "sh $d/$case-$run.sh" \
            > $d/$case-$run-report.txt 2> $d/$case-$run.err \
            || fail "zprof run (pgbench $case, $run): $(cat $d/$case-$run.err) $(tail -5 $d/$case-$run-server.log)"
    done
    zprof explain --format json $d/$case-bench.json > $d/$case-explain.json 2> $d/$case-explain.err \
        || fail "zprof explain (pgbench $case): $(cat $d/$case-explain.err)"
    zinject -c all > /dev/null
    destroy_pool pg
}

# wait_tracing FILE: until zprof says it is tracing (it has attached by then).
wait_tracing() {
    for i in $(seq 1 120); do
        grep -q Tracing "$1" && return 0
        sleep 1
    done
    fail "zprof did not start tracing within 120 s: $(cat $1)"
}

# zvol_device SECTORS: the zd device of that size (no udev here to name it).
zvol_device() {
    for i in $(seq 1 60); do
        for size in /sys/block/zd*/size; do
            [ -e "$size" ] && [ "$(cat $size)" = "$1" ] && { echo /dev/$(basename $(dirname $size)); return 0; }
        done
        sleep 0.5
    done
    fail "no zvol device of $1 sectors appeared"
}

# run_zvol_rmw DIR: 4k writes on a zvol of 64k blocks whose data the ARC does
# not keep (primarycache=metadata): each write reads its block first. The ARC's
# kstats around fio (DIR/rmw-kstats) count those reads for the host's check of
# explain's figures, independently of zprof.
run_zvol_rmw() {
    zfs create -V 64M -o volblocksize=64k -o primarycache=metadata rq/v3 || fail "zfs create rq/v3"
    v3=$(zvol_device 131072)
    fio --name=fill --filename=$v3 --rw=write --bs=1M --size=32m --direct=1 >> $1/fio-layout.txt 2>&1 || fail "fio fill $v3"
    zpool sync rq
    mkdir -p $1/rmw-kstats
    zprof record --target kernel -o $1/rmw.json -- iostat-around.sh rq $1/rmw-kstats \
        fio --name=rmw --filename=$v3 --rw=randwrite --bs=4k --size=32m \
        --direct=1 --runtime=$RUNTIME --time_based --output-format=json --output=$1/fio-rmw.json \
        > $1/rmw-report.txt 2> $1/rmw.err || fail "zprof record (zvol rmw): $(cat $1/rmw.err)"
    echo "rmw: $(kprobes_left)" >> $R/detach.txt
    zprof explain $1/rmw.json > $1/rmw-explain.txt && zprof explain --format json $1/rmw.json > $1/rmw-explain.json \
        || fail "zprof explain (zvol rmw)"
    grep -A4 'read-modify-write' $1/rmw-explain.txt
}

# The request layer: fio-a (cgroup a) writes with fsync to a file system and a
# zvol; fio-b (cgroup b) writes O_SYNC and reads on another file system and
# writes and reads 64k blocks on another zvol; all at once.
run_requests() {
    d=$R/requests
    mkdir -p $d
    step "requests: two file systems and two zvols, two fio processes in two cgroups"
    make_pool rq raidz1 nolog off files
    for fs in fs1 fs2; do
        zfs create -o mountpoint=legacy rq/$fs || fail "zfs create rq/$fs"
        mkdir -p /mnt/$fs
        mount -t zfs rq/$fs /mnt/$fs || fail "mount rq/$fs"
    done
    zfs create -V 128M -o volblocksize=16k rq/v1 || fail "zfs create rq/v1"
    zfs create -V 256M -o volblocksize=64k rq/v2 || fail "zfs create rq/v2"
    v1=$(zvol_device 262144)
    v2=$(zvol_device 524288)
    echo "rq/v1=$v1 rq/v2=$v2" > $d/zvols
    mkdir -p /sys/fs/cgroup
    mount -t cgroup2 none /sys/fs/cgroup || fail "mount cgroup2"
    cp $(command -v fio) /tmp/fio-a
    cp $(command -v fio) /tmp/fio-b
    cat > $d/a.fio <<EOF_A
[global]
ioengine=psync
runtime=$RUNTIME
time_based
[a-fs-fsync]
filename=/mnt/fs1/a.dat
rw=randwrite
bs=4k
size=32m
fsync=1
[a-zvol-fsync]
filename=$v1
rw=randwrite
bs=4k
size=64m
direct=1
fsync=1
EOF_A
    cat > $d/b.fio <<EOF_B
[global]
ioengine=psync
runtime=$RUNTIME
time_based
[b-fs-osync]
filename=/mnt/fs2/b.dat
rw=randwrite
bs=4k
size=32m
sync=1
[b-fs-read]
filename=/mnt/fs2/r.dat
rw=randread
bs=4k
size=32m
[b-zvol-write]
filename=$v2
rw=randwrite
bs=64k
offset=128m
size=64m
direct=1
[b-zvol-read]
filename=$v2
rw=randread
bs=64k
size=64m
direct=1
EOF_B
    # Files laid out and the read region written, outside the recording.
    fio $d/a.fio --create_only=1 > $d/fio-layout.txt 2>&1 || fail "fio layout a"
    fio $d/b.fio --create_only=1 >> $d/fio-layout.txt 2>&1 || fail "fio layout b"
    fio --name=fill --filename=$v2 --rw=write --bs=1M --size=64m --direct=1 >> $d/fio-layout.txt 2>&1 || fail "fio fill $v2"
    zpool sync rq
    zprof record --target kernel --slower-than 20ms -o $d/rec.json -- sh -c \
        "in-cgroup.sh a /tmp/fio-a $d/a.fio --output-format=json --output=$d/fio-a.json &
         in-cgroup.sh b /tmp/fio-b $d/b.fio --output-format=json --output=$d/fio-b.json &
         wait" > $d/report.txt 2> $d/zprof.err
    rc=$?
    echo "requests: $(kprobes_left)" >> $R/detach.txt
    cat $d/report.txt
    [ $rc -eq 0 ] || fail "zprof record (requests) exited with $rc: $(cat $d/zprof.err)"
    for by in process cgroup; do
        zprof report --by $by $d/rec.json > $d/report-$by.txt || fail "zprof report --by $by"
    done
    head -12 $d/report-process.txt
    run_zvol_rmw $d
    umount /mnt/fs1 /mnt/fs2
    destroy_pool rq
}

# What 2.3 added, on a pool of its own (2.1 has neither: features/absent).
# - Direct I/O: whole-record O_DIRECT writes on a dataset with direct=always,
#   and O_DIRECT writes shorter than a record on one with direct=standard
#   (ZFS sends those through the ARC), in one recording; whole-record O_DIRECT
#   reads in another, whose ARC rows then see none of those blocks.
# - Fast dedup: unique data written once, sequentially, to a dataset with
#   dedup=on, and the pool synced (then 16 more txgs, written elsewhere, so
#   the log is swapped and flushed: zfs_dedup_log_txg_max is 8), inside the recording, with the pool's
#   ddt_stats kstats read just before and after: each lookup is one the
#   kstats count, and the log's entries grow by those appended less those
#   flushed (each block is a new key, appended once).
run_features() {
    d=$R/features
    mkdir -p $d
    step "features: Direct I/O and fast dedup"
    make_pool ft raidz1 nolog off files
    if ! zfs get -H -o value direct ft > /dev/null 2>&1; then
        echo "OpenZFS $(cat /sys/module/zfs/version) has no direct property: Direct I/O and fast dedup came in 2.3" | tee $d/absent
        destroy_pool ft
        return 0
    fi
    # primarycache=metadata: no block the layout wrote stays cached, so each
    # direct read goes to the disks (ZFS copies a block it still caches
    # instead: 2,410 of 14,149 reads on 2.3.2 with the default).
    zfs create -o mountpoint=legacy -o direct=always -o recordsize=16k -o primarycache=metadata ft/dio \
        || fail "zfs create ft/dio"
    zfs create -o mountpoint=legacy -o direct=standard ft/std || fail "zfs create ft/std"
    zfs create -o mountpoint=legacy -o dedup=on ft/dd || fail "zfs create ft/dd"
    for fs in dio std dd; do
        mkdir -p /mnt/$fs
        mount -t zfs ft/$fs /mnt/$fs || fail "mount ft/$fs"
    done
    cat > $d/dio.fio <<EOF_DIO
[global]
ioengine=psync
runtime=$RUNTIME
time_based
size=32m
direct=1
[dio-write]
filename=/mnt/dio/w.dat
rw=randwrite
bs=16k
[dio-short]
filename=/mnt/std/s.dat
rw=randwrite
bs=4k
size=4m
EOF_DIO
    cat > $d/dio-read.fio <<EOF_DIOR
[dio-read]
ioengine=psync
runtime=$RUNTIME
time_based
filename=/mnt/dio/r.dat
rw=randread
bs=16k
size=32m
direct=1
EOF_DIOR
    fio $d/dio.fio --create_only=1 > $d/fio-layout.txt 2>&1 || fail "fio layout (dio)"
    fio $d/dio-read.fio --create_only=1 >> $d/fio-layout.txt 2>&1 || fail "fio layout (dio-read)"
    zpool sync ft
    zprof record --target kernel -o $d/dio.json -- \
        fio $d/dio.fio --output-format=json --output=$d/fio-dio.json > $d/dio-report.txt 2> $d/dio.err \
        || fail "zprof record (Direct I/O): $(cat $d/dio.err)"
    echo "features-dio: $(kprobes_left)" >> $R/detach.txt
    zprof record --target kernel -o $d/dio-read.json -- \
        fio $d/dio-read.fio --output-format=json --output=$d/fio-dio-read.json > $d/dio-read-report.txt 2> $d/dio-read.err \
        || fail "zprof record (Direct I/O reads): $(cat $d/dio-read.err)"
    grep -B2 -A8 'requests' $d/dio-report.txt | head -20
    zprof record --target kernel -o $d/dedup.json -- sh -c \
        "cat /proc/spl/kstat/zfs/ft/ddt_stats_sha256 > $d/ddt-before.txt &&
         fio --name=dedup --filename=/mnt/dd/u.dat --rw=write --bs=128k --size=96m --ioengine=psync \
             --refill_buffers --output-format=json --output=$d/fio-dedup.json &&
         zpool sync ft && for i in \$(seq 1 16); do echo \$i > /mnt/std/t; zpool sync ft; done &&
         cat /proc/spl/kstat/zfs/ft/ddt_stats_sha256 > $d/ddt-after.txt" \
        > $d/dedup-report.txt 2> $d/dedup.err || fail "zprof record (dedup): $(cat $d/dedup.err)"
    echo "features-dedup: $(kprobes_left)" >> $R/detach.txt
    grep -A3 'dedup' $d/dedup-report.txt | head -12
    for fs in dio std dd; do umount /mnt/$fs; done
    destroy_pool ft
    run_fallback $d
    run_expansion $d
}

# mount_and_lay_out POOL FIO_ARGS: mounts POOL's root at /mnt/POOL and lays
# out the fio job's file there, on disk before what is recorded next.
mount_and_lay_out() {
    mkdir -p /mnt/$1
    mount -t zfs $1 /mnt/$1 || fail "mount $1"
    fio $2 --create_only=1 > /dev/null 2>&1 || fail "fio layout ($1)"
    zpool sync $1
}

# run_expansion DIR: RAIDZ expansion against a workload. A raidz1 of three
# files holds 256 MiB; a fourth is attached (zpool attach rx raidz1-0) and
# fio reads at random while ZFS reflows the data. The pool's allocated bytes
# just before the attach are what the reflow has to read; zpool status says
# what it copied once zpool wait returns.
run_expansion() {
    truncate -s 2G $V/rx-1 $V/rx-2 $V/rx-3 $V/rx-4
    zpool create -f -o ashift=12 -o cachefile=none -O mountpoint=legacy -O recordsize=16k \
        -O primarycache=metadata rx raidz1 $V/rx-1 $V/rx-2 $V/rx-3 || fail "zpool create rx"
    rx_job="--name=rx --filename=/mnt/rx/r.dat --rw=randread --bs=4k --size=256m --ioengine=psync"
    mount_and_lay_out rx "$rx_job"
    zprof record --target kernel -o $1/expansion.json -- sh -c \
        "zpool list -Hp -o allocated rx > $1/expansion-allocated.txt &&
         zpool attach rx raidz1-0 $V/rx-4 &&
         fio $rx_job --runtime=$RUNTIME --time_based --output-format=json --output=$1/fio-expansion.json &&
         zpool wait -t raidz_expand rx && zpool status rx > $1/expansion-status.txt" \
        > $1/expansion-report.txt 2> $1/expansion.err || fail "zprof record (expansion): $(cat $1/expansion.err)"
    echo "features-expansion: $(kprobes_left)" >> $R/detach.txt
    grep 'expand' $1/expansion-status.txt
    umount /mnt/rx
    zpool destroy rx
    rm -f $V/rx-1 $V/rx-2 $V/rx-3 $V/rx-4
}

# run_fallback DIR: ZIL commits that fall back to a txg sync, timed. On a pool
# of version 26 (before fast snapshots, 27) a snapshot suspends the ZIL, and an
# fsync meanwhile waits for a txg sync instead of writing a log block; fio's
# fsyncs run while snapshots are taken, the ZIL's kstats (2.3: the fallbacks
# by cause) read inside the recording.
run_fallback() {
    truncate -s 1G $V/fb-1 $V/fb-2
    zpool create -f -o ashift=12 -o cachefile=none -o version=26 -O mountpoint=legacy \
        fb mirror $V/fb-1 $V/fb-2 || fail "zpool create fb (version 26)"
    fb_job="--name=fb --filename=/mnt/fb/f.dat --rw=randwrite --bs=4k --size=16m --ioengine=psync --fsync=1"
    mount_and_lay_out fb "$fb_job"
    zprof record --target kernel -o $1/fallback.json -- sh -c \
        "cat /proc/spl/kstat/zfs/zil > $1/zil-before.txt &&
         (for i in \$(seq 1 20); do zfs snapshot fb@s\$i; sleep 0.1; done) &
         fio $fb_job --runtime=$RUNTIME --time_based --output-format=json --output=$1/fio-fallback.json;
         wait; cat /proc/spl/kstat/zfs/zil > $1/zil-after.txt" \
        > $1/fallback-report.txt 2> $1/fallback.err || fail "zprof record (fallback): $(cat $1/fallback.err)"
    echo "features-fallback: $(kprobes_left)" >> $R/detach.txt
    zfs list -t snapshot -H -o name -r fb | wc -l > $1/snapshots
    umount /mnt/fb
    zpool destroy fb || fail "zpool destroy fb"
    rm -f $V/fb-*
}

step "zfs $(cat /sys/module/zfs/version), module BTF: $(test -e /sys/kernel/btf/zfs && echo yes || echo no)"
awk '$4 == "[zfs]" && ($2 == "t" || $2 == "T") { print $3 }' /proc/kallsyms | sort -u > $R/zfs-functions.txt
echo "zfs.ko text symbols in kallsyms: $(wc -l < $R/zfs-functions.txt)"
echo "before zprof: $(kprobes_left)" > $R/detach.txt

step "zprof probes"
zprof probes --target kernel --format json > $R/probes.json 2> $R/probes.err || fail "zprof probes: $(cat $R/probes.err)"
echo "probes: $(kprobes_left)" >> $R/detach.txt
zprof probes --target kernel | tee $R/probes.txt

if [ "$ONLY" = requests ]; then
    run_requests
    step "done"
    exit 0
fi
if [ "$ONLY" = two-pools ]; then
    run_two_pools
    step "done"
    exit 0
fi
if [ "$ONLY" = features ]; then
    run_features
    step "done"
    exit 0
fi
if [ "$ONLY" = special ]; then
    run_special
    step "done"
    exit 0
fi
if [ "$ONLY" = benchmarks ]; then
    run_benchmarks
    step "done"
    exit 0
fi
if [ "$ONLY" = pgbench ]; then
    run_pgbench
    step "done"
    exit 0
fi

# The variant runs (other offset sources on the same kernel) take the two
# configurations that cover a log vdev, zstd, lz4 and loop devices; the
# other two (and off-CPU) run with BTF only, 45 s less per variant.
if [ "$SECTIONS" = all ]; then
    RECORD_EXTRA=--off-cpu
    run_config rz1-off raidz1 nolog off files
    RECORD_EXTRA=
fi
run_config rz1-log-zstd raidz1 log zstd files
if [ "$SECTIONS" != offsets ]; then
    run_config mir-lz4 mirror nolog lz4 loop
fi
if [ "$SECTIONS" = all ]; then
    run_config mir-log-off mirror log off files
fi
if [ "$SECTIONS" != offsets ]; then
    run_requests
fi
if [ "$SECTIONS" = all ]; then
run_two_pools
run_throttle
run_special
run_benchmarks
run_features

step "SIGTERM: zprof stops, detaches, reports and stops fio"
d=$R/sigterm
mkdir -p $d
make_pool term raidz1 nolog off files
fio $(job term) --create_only=1 > /dev/null 2>&1
zprof record --target kernel -o $d/rec.json -- \
    fio $(job term) --runtime=600 --time_based --output-format=json --output=$d/fio.json \
    > $d/report.txt 2> $d/zprof.err &
pid=$!
wait_tracing $d/zprof.err
sleep 2
echo "sigterm-during: $(kprobes_left)" >> $R/detach.txt
kill -TERM $pid
wait $pid
echo "zprof exit status after SIGTERM: $?" | tee $d/exit
echo "sigterm-after: $(kprobes_left)" >> $R/detach.txt
destroy_pool term
fi

step "SIGKILL: the kernel drops zprof's probes with its file descriptors"
zprof record --target kernel -- sleep 600 > /dev/null 2> $R/sigkill.err &
pid=$!
wait_tracing $R/sigkill.err
echo "sigkill-during: $(kprobes_left)" >> $R/detach.txt
kill -KILL $pid
wait $pid
sleep 1
echo "sigkill-after: $(kprobes_left)" >> $R/detach.txt

if [ "$SECTIONS" = all ]; then
step "kprobe_multi links: attach and detach beside perf-event kprobes"
# zprof uses perf-event kprobes unless ZPROF_KPROBE_MULTI=1 (faster here, see
# the README); both are recorded, with no workload, for their own costs.
d=$R/kprobe-multi
mkdir -p $d
ZPROF_KPROBE_MULTI=0 zprof record --target kernel -o $d/rec-0.json -- sleep 3 > /dev/null 2> $d/zprof-0.err \
    || fail "zprof with perf-event kprobes: $(cat $d/zprof-0.err)"
ZPROF_KPROBE_MULTI=1 zprof record --target kernel -o $d/rec-1.json -- sleep 3 > /dev/null 2> $d/zprof-1.err &
pid=$!
wait_tracing $d/zprof-1.err
echo "multi-during: $(kprobes_left)" >> $R/detach.txt
wait $pid || fail "zprof with ZPROF_KPROBE_MULTI=1: $(cat $d/zprof-1.err)"
echo "multi-after: $(kprobes_left)" >> $R/detach.txt
fi

if [ "$SECTIONS" = all ]; then
step "serve: scraped before and after an fsync job, then SIGTERM"
# The exporter as a fleet runs it: every process, on loopback; scraped with
# busybox's wget. The host checks the scrapes (xtask/src/guest/check.rs).
d=$R/serve
mkdir -p $d
ip link set lo up || fail "ip link set lo up"
make_pool srv raidz1 log off files
fio $(job srv) --create_only=1 > /dev/null 2>&1
zpool sync srv
zprof serve --target kernel --per-vdev --listen 127.0.0.1:9929 2> $d/serve.err &
pid=$!
for i in $(seq 1 120); do
    grep -q "serving http" $d/serve.err && break
    sleep 1
done
wget -q -O $d/before.prom http://127.0.0.1:9929/metrics || fail "scrape before: $(cat $d/serve.err)"
fio $(job srv) --runtime=4 --time_based --output-format=json --output=$d/fio.json > /dev/null 2>&1 || fail "fio on srv"
wget -q -O $d/after.prom http://127.0.0.1:9929/metrics || fail "scrape after: $(cat $d/serve.err)"
echo "serve-during: $(kprobes_left)" >> $R/detach.txt
kill -TERM $pid
wait $pid
echo $? > $d/exit
echo "serve-after: $(kprobes_left)" >> $R/detach.txt
destroy_pool srv
fi

cat $R/detach.txt
step "done"
