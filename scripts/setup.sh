#!/usr/bin/env bash
# Installs everything zprof needs on a fresh Debian 12 machine that has only the
# Rust toolchains. Idempotent: each step checks first and returns in well under a
# second when its work is already done. Called by `cargo xtask setup` (and so by
# the README's two commands); safe to run by hand.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }
trap 'log "failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR

if [[ $(id -u) -ne 0 ]]; then
    log "must run as root (apt-get, tracefs, eBPF); re-run with sudo"
    exit 2
fi

# 1. Debian packages. OpenZFS 2.1.11 lives in the `contrib` component.
# zfs-dkms only for its headers (/usr/src/zfs-*/include has sys/zfs_ioctl.h, which
# libzfslinux-dev lacks): zprof's offsets check compiles against them.
# prometheus (with promtool) for the tests of `zprof serve`, its own service not
# started (see below), and python3-prometheus-client, whose OpenMetrics parser
# checks serve's OpenMetrics; tmux drives `zprof top` in its test. man-db,
# systemd (systemd-analyze), zsh and fish check the package's man pages, unit
# and completions (tests/tests/package.rs). apache2-utils (htpasswd), openssl
# and curl make and use the bcrypt users and certificates of serve's web
# configuration (tests/tests/serve_web.rs); golang-go's `go tool pprof` reads
# the pprof profiles (tests/tests/flamegraph.rs).
APT_PACKAGES=(libzpool5linux libzfslinux-dev zfs-dkms zfs-test fio bpftrace gcc make pkg-config prometheus python3-prometheus-client tmux man-db systemd zsh fish apache2-utils openssl curl golang-go)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    src=/etc/apt/sources.list.d/debian.sources
    if [[ -f $src ]] && ! grep -qE '^Components:.*\bcontrib\b' "$src"; then
        log "adding the contrib component to $src (OpenZFS packages live there)"
        sed -i -E 's/^(Components:.*\bmain\b)(.*)$/\1 contrib\2/' "$src"
    elif [[ ! -f $src ]] && ! grep -rqsE '^deb .* contrib' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo 'deb http://deb.debian.org/debian bookworm main contrib' >/etc/apt/sources.list.d/zprof-contrib.list
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Packages' services (prometheus would listen on all addresses) are not
    # started: a policy-rc.d that denies them, only for this install, unless
    # the machine already has one.
    policy=/usr/sbin/policy-rc.d
    own_policy=
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
    fi
    # No recommends: zfsutils-linux would otherwise pull zfs-dkms and build modules.
    installed=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || installed=$?
    if [[ -n $own_policy ]]; then rm -f "$policy"; fi
    if ((installed)); then
        log "apt-get install failed ($installed)"
        exit 1
    fi
fi

# 2. Nightly's rust-src: the eBPF crate is built with -Z build-std=core.
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    log "adding rust-src to the nightly toolchain"
    rustup component add rust-src --toolchain nightly
fi

# 3. bpf-linker, built against the nightly toolchain's own libLLVM (no system LLVM 22).
if ! command -v bpf-linker >/dev/null 2>&1 && [[ ! -x $HOME/.cargo/bin/bpf-linker ]]; then
    sysroot=$(rustc +nightly --print sysroot)
    llvm=$(ls "$sysroot"/lib/libLLVM.so.* 2>/dev/null | head -n1 || true)
    [[ -n $llvm ]] || llvm=$(ls "$sysroot"/lib/libLLVM*.so 2>/dev/null | head -n1 || true)
    if [[ -z $llvm ]]; then
        log "no libLLVM in $sysroot/lib: cannot build bpf-linker"
        exit 1
    fi
    major=$(basename "$llvm" | grep -oE '[0-9]+' | head -n1)
    prefix=${CARGO_TARGET_DIR:-$HOME/.cache/zprof}/llvm-prefix
    mkdir -p "$prefix/lib"
    ln -sf "$llvm" "$prefix/lib/libLLVM.so"
    log "building bpf-linker 0.13.0 against $(basename "$llvm") (about a minute)"
    LLVM_PREFIX=$prefix cargo +nightly install --locked bpf-linker@0.13.0 \
        --no-default-features --features "llvm-$major" >/dev/null
fi

# 4. OpenZFS releases beside the system's 2.1.11 (scripts/openzfs-releases), unpacked
# into a cache, never installed: libzpool6linux Breaks libzpool5linux, and 2.4's
# libzpool7linux needs trixie's glibc. zprof-lab
# links one binary per release that loads here; zprof's offsets tables are
# checked against each release's headers.
ZPROF_CACHE=${ZPROF_CACHE:-$HOME/.cache/zprof}
fetch_openzfs() {
    local version=$1 suite=$2 pkgver=$3 dir=$ZPROF_CACHE/openzfs/$1
    [[ -f $dir/.complete ]] && return 0
    log "fetching OpenZFS $version's libzpool and headers from $suite into $dir"
    local apt=$ZPROF_CACHE/apt/$suite
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$dir/dl"
    # A private sources list: /etc/apt is left as it is. A backports suite
    # comes with its base suite and its security updates (a newer libc6).
    local base=${suite%-backports}
    {
        printf 'deb http://deb.debian.org/debian %s main contrib
' "$suite"
        printf 'deb-src http://deb.debian.org/debian %s main contrib
' "$suite"
        if [[ $base != "$suite" ]]; then
            printf 'deb http://deb.debian.org/debian %s main contrib
' "$base"
            printf 'deb http://deb.debian.org/debian-security %s-security main contrib
' "$base"
        fi
    } >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::Cache::Archives=$apt/archives"
        -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update -qq
    # libzpool's package is named after its soname (libzpool5linux, 6, 7):
    # zfsutils-linux of the same version depends on it. zfs-dkms for its
    # include/ (sys/zfs_ioctl.h, which libzfslinux-dev lacks).
    local libzpool
    # awk reads to the end: a reader that stops early (grep -m1, head) can kill
    # apt-cache with SIGPIPE, which pipefail turns into a silent exit.
    libzpool=$(apt-cache "${opts[@]}" show "zfsutils-linux=$pkgver" |
        awk '/^Depends:/ && !found { if (match($0, /libzpool[0-9]+linux/)) { print substr($0, RSTART, RLENGTH); found = 1 } }')
    [[ -n $libzpool ]] || { log "zfsutils-linux=$pkgver names no libzpool package"; exit 1; }
    local packages=("$libzpool=$pkgver" "libzfslinux-dev=$pkgver" "zfs-dkms=$pkgver")
    # A libzpool built for a newer glibc than Debian 12's runs with its own
    # suite's libc6 as the lab's loader, and its own libnvpair and libuutil.
    if [[ $base == trixie && $libzpool != libzpool6linux ]]; then
        packages+=("libnvpair3linux=$pkgver" "libuutil3linux=$pkgver" libc6)
    fi
    (cd "$dir/dl" && apt-get "${opts[@]}" download -qq "${packages[@]}")
    rm -rf "$dir/root" && mkdir -p "$dir/root"
    for deb in "$dir"/dl/*.deb; do dpkg -x "$deb" "$dir/root"; done
    # 2.3.2's libzfslinux-dev ships libzpool/abd_os.h, which the headers include as
    # <sys/abd_os.h> (2.3.9 moved it into libspl/sys/): give it the path they use.
    local zpool_inc=$dir/root/usr/include/libzpool
    if [[ -f $zpool_inc/abd_os.h && ! -e $zpool_inc/sys ]]; then
        mkdir -p "$zpool_inc/sys"
        for h in "$zpool_inc"/*.h; do ln -s "../$(basename "$h")" "$zpool_inc/sys/"; done
    fi
    rm -rf "$dir/dl"
    touch "$dir/.complete"
}
while read -r version suite pkgver _; do
    [[ -z $version || $version == \#* ]] && continue
    fetch_openzfs "$version" "$suite" "$pkgver"
done <"$(dirname "$0")/openzfs-releases"

# 5. tracefs, for uprobe/kprobe event files.
if [[ ! -d /sys/kernel/tracing/events ]]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi
if [[ ! -d /sys/fs/bpf ]] || ! mountpoint -q /sys/fs/bpf; then
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
fi
log "ready"
