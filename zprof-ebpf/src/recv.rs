//! `zfs recv`: dmu_recv_stream(drc, voffp) reads a send stream and writes
//! it into a dataset, in the receiving process's ioctl. Its time, and the
//! stream bytes it read (the stream offset *voffp, which it sets on its way
//! out, less the offset it started from: the begin record that zfs(8) read
//! itself is not counted), by the pool of the objset it receives into
//! (drc_os, which it clears before returning: read at entry). Once per
//! receive.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::HashMap,
    programs::{ProbeContext, RetProbeContext},
};
use zprof_common::{Stage, counter};

use crate::core::{
    config::CONFIG,
    memory::{arg, member_u64, read_or},
    programs::{entry_programs, return_programs},
    record::{record, stage_key},
    spans::thread_id,
    tracked::wanted,
};

entry_programs! {
    recv_stream_entry_k, recv_stream_entry_u => try_recv_entry;
}

return_programs! {
    recv_stream_return_k, recv_stream_return_u => try_recv_return;
}

/// A receive under way, by thread: [start ns, voffp, its offset at entry,
/// spa_t].
#[map]
static RECEIVING: HashMap<u64, [u64; 4]> = HashMap::with_max_entries(256, 0);

#[inline(always)]
fn try_recv_entry(ctx: &ProbeContext) -> Result<(), u32> {
    if !wanted(false) {
        return Ok(());
    }
    let (drc, voffp) = (arg(ctx, 0), arg(ctx, 1));
    let os = member_u64(drc, &CONFIG.offsets.dmu_recv_cookie_os);
    let spa = member_u64(os, &CONFIG.offsets.objset_spa);
    let started = [
        unsafe { bpf_ktime_get_ns() },
        voffp,
        read_or::<u64>(voffp, 0),
        spa,
    ];
    RECEIVING
        .insert(&thread_id(), &started, 0)
        .map_err(|_| counter::ENTRY_MAP_FULL)
}

#[inline(always)]
fn try_recv_return(_ctx: &RetProbeContext) -> Result<(), u32> {
    let thread = thread_id();
    let Some(&[start, voffp, offset, spa]) = (unsafe { RECEIVING.get(&thread) }) else {
        return Ok(());
    };
    let _ = RECEIVING.remove(&thread);
    let now = unsafe { bpf_ktime_get_ns() };
    let bytes = read_or::<u64>(voffp, offset).saturating_sub(offset);
    record(
        &stage_key(Stage::Recv, 0, spa, 0),
        now.saturating_sub(start),
        bytes,
        0,
    );
    Ok(())
}
