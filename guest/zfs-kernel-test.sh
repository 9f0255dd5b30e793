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
        # --only=requests, --only=two-pools: the probes and that one part
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
    case $layout in raidz1) n=4 ;; mirror) n=2 ;; *) fail "layout $layout" ;; esac
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
