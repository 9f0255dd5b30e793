#!/bin/sh
# in-cgroup.sh NAME CMD...: run CMD in the cgroup v2 group NAME (created if
# needed), so zprof's requests section can name it.
set -e
mkdir -p /sys/fs/cgroup/$1
echo $$ > /sys/fs/cgroup/$1/cgroup.procs
shift
exec "$@"
