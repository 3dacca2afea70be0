//! Kernel parameters of `kernels/route_topk.cu`, mirrored field for field.
//!
//! The C struct `b12x::RouteTopkParams` asserts the same size and offsets with `static_assert`.

use std::mem::{offset_of, size_of};

/// The one `__grid_constant__` argument of every `b12x_route_topk_*` entry point.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RouteTopkParams {
    /// `[T, E]` f32, row stride `logits_stride`.
    pub logits: u64,
    /// `[E]` f32 ([`FLAG_BIAS`]) or 0.
    pub bias: u64,
    /// `[T]` i32 ([`FLAG_HASH`]) or 0.
    pub token_ids: u64,
    /// `[vocab, k]` i32 ([`FLAG_HASH`]) or 0.
    pub tid2eid: u64,
    /// `[T, k]` i32, row stride `ids_stride`.
    pub ids: u64,
    /// `[T, k]` f32, row stride `weights_stride`.
    pub weights: u64,
    /// `[1]` u32 fault bits.
    pub error: u64,
    pub logits_stride: i64,
    pub ids_stride: i64,
    pub weights_stride: i64,
    pub tokens: i32,
    pub experts: i32,
    pub top_k: i32,
    /// Rows of `tid2eid` ([`FLAG_HASH`]).
    pub vocab: i32,
    pub route_scale: f32,
    /// [`FLAG_RENORMALIZE`], [`FLAG_HASH`], [`FLAG_BIAS`] bits.
    pub flags: i32,
}

/// `flags` bit (`kRouteRenormalize`): divide the k weights by their sum.
pub const FLAG_RENORMALIZE: i32 = 1;
/// `flags` bit (`kRouteHash`): ids from `tid2eid[token_ids[t]]`.
pub const FLAG_HASH: i32 = 2;
/// `flags` bit (`kRouteBias`): keys are `scores + bias`.
pub const FLAG_BIAS: i32 = 4;

const _: () = {
    assert!(size_of::<RouteTopkParams>() == 104);
    assert!(offset_of!(RouteTopkParams, logits_stride) == 56);
    assert!(offset_of!(RouteTopkParams, tokens) == 80);
    assert!(offset_of!(RouteTopkParams, route_scale) == 96);
};
