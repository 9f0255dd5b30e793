#!/usr/bin/env bash
# Installs everything zprof needs on a fresh Debian 12 machine that has only the
# Rust toolchains. Idempotent: each step checks first and returns in well under a
# second when its work is already done. Called by `cargo xtask setup` (and so by
# the README's two commands); safe to run by hand.
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    log "must run as root (apt-get, tracefs, eBPF); re-run with sudo"
    exit 2
fi

# 1. Debian packages. OpenZFS 2.1.11 lives in the `contrib` component.
# zfs-dkms only for its headers (/usr/src/zfs-*/include has sys/zfs_ioctl.h, which
# libzfslinux-dev lacks): zprof's offsets check compiles against them.
APT_PACKAGES=(libzpool5linux libzfslinux-dev zfs-dkms zfs-test fio bpftrace gcc make pkg-config)
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
    # No recommends: zfsutils-linux would otherwise pull zfs-dkms and build modules.
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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

# 4. tracefs, for uprobe/kprobe event files.
if [[ ! -d /sys/kernel/tracing/events ]]; then
    mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi
if [[ ! -d /sys/fs/bpf ]] || ! mountpoint -q /sys/fs/bpf; then
    mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
fi
log "ready"
