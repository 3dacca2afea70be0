//! `b12x-attention`: attention for LLM inference over paged KV caches and packed sequences.
//!
//! | op | module | what |
//! |---|---|---|
//! | `attention.kv_append` | [`kv_append`] | writes the new tokens' K and V into their cache pages (BF16/FP16, or E4M3 with per-request, per-KV-head scales) |
//! | `attention.paged` | [`paged`] | decode / extend attention of new tokens against their paged context (GQA, sinks, sliding window, BF16/FP16/E4M3 KV) |
//! | `attention.rope` | [`rope`] | rotary position embedding in place on Q and K (NeoX / GPT-J pairs, partial rotary, YaRN; cos/sin computed or from a planned table) |
//! | `attention.rope_kv_append` | [`rope_kv_append`] | `attention.rope` on Q and `attention.kv_append` of the rotated K and V in one launch (a decode step's pair, bitwise the two ops' result) |
//! | `attention.rope_paged` | [`rope_paged`] | `attention.rope`, `attention.kv_append` and `attention.paged` of a decode step in one launch (bitwise `rope_kv_append` then `paged`; 8-row decode tiles) |
//! | `attention.varlen` | [`varlen`] | prefill attention over packed variable-length sequences (causal or not, GQA, sinks, sliding window, BF16/FP16) |
//!
//! Every op of this crate shares one description of a batch ([`paging`]): a paged cache
//! `[num_pages, P, Hkv, D]`, a page table `[B, max_pages] i32`, context lengths
//! `seq_lens [B] i32` (including the new tokens) and `cu_seqlens_q [B+1] i32` (the new tokens
//! of request b are rows `cu[b]..cu[b+1]` of the packed `[total_q, …]` tensors, the last
//! `q_len_b` positions of its context). The index tensors live on the device and are
//! **untrusted**: a bad page id or length never reads or writes out of bounds; the rows it
//! affects are masked and a bit is set in a caller-visible error word ([`paging::ErrorWord`],
//! [`paging::Faults`]).

mod checks;
pub mod kv_append;
pub mod paged;
pub mod paging;
pub mod rope;
pub mod rope_kv_append;
pub mod rope_paged;
pub mod varlen;

// Fatbins, content hashes and the ptxas resource manifest of `kernels/*.cu`, from `b12x-build`.
include!(concat!(env!("OUT_DIR"), "/b12x_kernels.rs"));

/// The embedded `kernels/kv_append.cu`, loaded once per device.
pub static KV_APPEND_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-attention/kv_append", fatbin: KV_APPEND_FATBIN, hash: KV_APPEND_HASH };

/// The embedded `kernels/paged.cu`, loaded once per device.
pub static PAGED_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-attention/paged", fatbin: PAGED_FATBIN, hash: PAGED_HASH };

/// The embedded `kernels/varlen.cu`, loaded once per device.
pub static VARLEN_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-attention/varlen", fatbin: VARLEN_FATBIN, hash: VARLEN_HASH };

/// The embedded `kernels/rope.cu`, loaded once per device.
pub static ROPE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-attention/rope", fatbin: ROPE_FATBIN, hash: ROPE_HASH };

/// The embedded `kernels/rope_kv_append.cu`, loaded once per device.
pub static ROPE_KV_APPEND_MODULE: b12x_core::KernelModule = b12x_core::KernelModule {
    name: "b12x-attention/rope_kv_append",
    fatbin: ROPE_KV_APPEND_FATBIN,
    hash: ROPE_KV_APPEND_HASH,
};

/// The embedded `kernels/paged_rope.cu` (`attention.rope_paged`), loaded once per device.
pub static PAGED_ROPE_MODULE: b12x_core::KernelModule =
    b12x_core::KernelModule { name: "b12x-attention/paged_rope", fatbin: PAGED_ROPE_FATBIN, hash: PAGED_ROPE_HASH };
