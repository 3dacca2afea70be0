//! Kernel parameters of `kernels/rope_kv_append.cu`, mirrored field for field.
//!
//! The C struct `b12x::RopeKvAppendParams` asserts the same size and offsets with `static_assert`.

use crate::kv_append::KvAppendParams;
use crate::rope::RopeParams;
use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_rope_kv_append_*` entry point.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RopeKvAppendParams {
    /// attention.rope's parameters with `kv_heads = 0` (q only); K's rotation reads their rotary
    /// fields (positions, table or frequencies, scale, range).
    pub rope: RopeParams,
    /// attention.kv_append's parameters (k unrotated, v, caches, the batch).
    pub append: KvAppendParams,
    /// CTAs of the q part (the grid's first).
    pub q_blocks: i32,
    /// [`FLAG_EARLY`], [`FLAG_WARM_EVICT_LAST`], [`FLAG_WARM_PREFETCH`],
    /// [`FLAG_RELEASE_AT_ENTRY`] bits.
    pub flags: i32,
    /// CTAs of the warm part (the grid's last; 0: none).
    pub warm_blocks: i32,
    /// Zero.
    pub reserved: i32,
}

/// `flags` bit (`kRopeKvEarly`): every thread reads its position, its slot (the batch) and forms
/// cos / sin before it waits for the kernel before it (set for PDL plans).
pub const FLAG_EARLY: i32 = 1;
/// `flags` bit (`kRopeKvWarmEvictLast`): the warm part reads with an L2 evict-last policy.
pub const FLAG_WARM_EVICT_LAST: i32 = 2;
/// `flags` bit (`kRopeKvWarmPrefetch`): the warm part issues `prefetch.global.L2` per 128-byte
/// line instead of loads.
pub const FLAG_WARM_PREFETCH: i32 = 4;
/// `flags` bit (`kRopeKvReleaseAtEntry`): every CTA lets the next PDL kernel launch as it starts,
/// before its wait (`Plan::with_early_release`).
pub const FLAG_RELEASE_AT_ENTRY: i32 = 8;

impl Default for RopeKvAppendParams {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

const _: () = {
    assert!(size_of::<RopeKvAppendParams>() == 1256);
    assert!(offset_of!(RopeKvAppendParams, append) == 1112);
    assert!(offset_of!(RopeKvAppendParams, q_blocks) == 1240);
    assert!(offset_of!(RopeKvAppendParams, flags) == 1244);
    assert!(offset_of!(RopeKvAppendParams, warm_blocks) == 1248);
};
