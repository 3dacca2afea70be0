//! Host-side argument checks the attention ops share (query fields and per-call tensors); each
//! returns the workspace's typed error and launches nothing.

use b12x_core::{require_disjoint, DType, Error, Result, TensorMut, TensorRef};

/// `scale` finite and > 0, `window_left ≥ −1`.
pub(crate) fn scale_and_window(op: &'static str, scale: f32, window_left: i32) -> Result<()> {
    if !(scale.is_finite() && scale > 0.0) {
        let reason = format!("must be finite and > 0, got {scale}");
        return Err(Error::InvalidQuery { op, field: "scale", reason });
    }
    if window_left < -1 {
        let reason = format!("must be ≥ 0, or −1 for no window, got {window_left}");
        return Err(Error::InvalidQuery { op, field: "window_left", reason });
    }
    Ok(())
}

/// Every capacity in `1..=i32::MAX` (the kernels index with 32-bit integers).
pub(crate) fn capacities(op: &'static str, fields: &[(&'static str, usize)]) -> Result<()> {
    let max = i32::MAX as usize;
    for &(field, v) in fields {
        if v == 0 || v > max {
            return Err(Error::InvalidQuery { op, field, reason: format!("must be in 1..={max}, got {v}") });
        }
    }
    Ok(())
}

/// `sinks [H]` f32 contiguous exactly when the plan has sinks.
pub(crate) fn sinks(sinks: &Option<TensorRef<'_>>, on: bool, heads: usize) -> Result<()> {
    match (sinks, on) {
        (Some(s), true) => {
            s.expect("sinks", "[H]", DType::F32, &[heads])?;
            crate::paging::require_contiguous("sinks", s)
        }
        (None, false) => Ok(()),
        (s, on) => {
            let expected = if on { format!("[H] = [{heads}] (the plan has sinks)") } else { "none (no sinks)".into() };
            Err(Error::Shape { tensor: "sinks", expected, actual: s.map(|s| s.shape().to_vec()).unwrap_or_default() })
        }
    }
}

/// The row stride of a `[rows, heads, D]` tensor whose heads are contiguous within a row
/// (strides `[s, D, 1]`, `s ≥ heads · D`).
pub(crate) fn heads_row_stride(name: &'static str, s: &[isize], rows: usize, heads: usize, d: usize) -> Result<i64> {
    if s[2] != 1 || s[1] != d as isize || (rows > 1 && s[0] < (heads * d) as isize) {
        let reason = format!("heads must be contiguous within a row ([s, D, 1], s ≥ {heads}·D)");
        return Err(Error::Stride { tensor: name, strides: s.to_vec(), reason });
    }
    Ok(s[0] as i64)
}

/// The row stride of an optional `lse [rows, H]` f32 (strides `[s, 1]`, `s ≥ H`); 0 when absent.
pub(crate) fn lse_row_stride(lse: &Option<TensorMut<'_>>, rows: usize, heads: usize) -> Result<i64> {
    let Some(l) = lse else { return Ok(0) };
    l.expect("lse", "[total_q, H]", DType::F32, &[rows, heads])?;
    if l.strides()[1] != 1 || (rows > 1 && l.strides()[0] < heads as isize) {
        let reason = "expected [s, 1] with s ≥ H".into();
        return Err(Error::Stride { tensor: "lse", strides: l.strides().to_vec(), reason });
    }
    Ok(l.strides()[0] as i64)
}

/// Outputs must not overlap any input or each other (spans as `TensorRef::byte_span` gives
/// them; an absent tensor is the empty span `(0, 0)`, which overlaps nothing).
pub(crate) fn outputs_disjoint(
    inputs: &[(&'static str, (u64, u64))],
    outputs: &[(&'static str, (u64, u64))],
) -> Result<()> {
    for (i, out) in outputs.iter().enumerate() {
        for input in inputs {
            require_disjoint(*out, *input)?;
        }
        for other in &outputs[i + 1..] {
            require_disjoint(*out, *other)?;
        }
    }
    Ok(())
}
