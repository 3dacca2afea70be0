//! GPU validation of `quantization.swizzle_scales` against `layout::to_swizzled` /
//! `from_swizzled`, byte for byte (outputs poisoned first, so unwritten padding shows), on the
//! scale shapes of the quantizers: MX (K/32) and NVFP4 (K/16) for K ∈ {1536, 4096, 7168, 18432}
//! and awkward row / column counts.

use b12x_core::testing::{alloc_poisoned, run_gpu_trials, GpuTrial};
use b12x_core::{Device, PreparationSession, Scratch, TensorMut, TensorRef};
use b12x_quant::layout::{from_swizzled, swizzled_len, to_swizzled};
use b12x_quant::swizzle::{self, Args, Direction, Query, Side};
use std::sync::Arc;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn check(dev: &Arc<Device>, rows: usize, cols: usize) -> Result<(), String> {
    let stream = dev.stream();
    let rm_h: Vec<u8> = (0..rows * cols).map(|i| (i * 7 % 251) as u8 + 1).collect();
    let sw_h = to_swizzled(&rm_h, rows, cols);
    let len = swizzled_len(rows, cols);
    // Row-major -> swizzled.
    let q = Query { direction: Direction::ToSwizzled, cols, max_rows: rows };
    let plan = swizzle::plan(&q, dev).map_err(err)?;
    let mut session = PreparationSession::new(dev).map_err(err)?.with_autotune(false);
    session.prepare(&[&plan]).map_err(err)?;
    let rm = stream.clone_htod(&rm_h).map_err(err)?;
    let mut sw = alloc_poisoned::<u8>(stream, len).map_err(err)?;
    let args = Args {
        row_major: Side::In(TensorRef::from_slice(&rm, &[rows, cols]).map_err(err)?),
        swizzled: Side::Out(TensorMut::from_slice(&mut sw, &[len]).map_err(err)?),
    };
    swizzle::run(&plan, args, Scratch::none(), stream).map_err(err)?;
    if stream.clone_dtoh(&sw).map_err(err)? != sw_h {
        return Err(format!("to_swizzled [{rows}, {cols}] differs"));
    }
    // Swizzled -> row-major.
    let q = Query { direction: Direction::FromSwizzled, cols, max_rows: rows };
    let plan = swizzle::plan(&q, dev).map_err(err)?;
    session.prepare(&[&plan]).map_err(err)?;
    let mut back = alloc_poisoned::<u8>(stream, rows * cols).map_err(err)?;
    let args = Args {
        row_major: Side::Out(TensorMut::from_slice(&mut back, &[rows, cols]).map_err(err)?),
        swizzled: Side::In(TensorRef::from_slice(&sw, &[len]).map_err(err)?),
    };
    swizzle::run(&plan, args, Scratch::none(), stream).map_err(err)?;
    if stream.clone_dtoh(&back).map_err(err)? != from_swizzled(&sw_h, rows, cols) {
        return Err(format!("from_swizzled [{rows}, {cols}] differs"));
    }
    session.close();
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for k in [1536usize, 4096, 7168, 18432] {
        for (name, block) in [("mx", 32usize), ("nvfp4", 16)] {
            for rows in [1usize, 7, 128, 4096] {
                let cols = k / block;
                trials.push(GpuTrial::new(format!("{name}_k{k}_rows{rows}"), move |d| check(d, rows, cols)));
            }
        }
    }
    for (rows, cols) in [(129usize, 3usize), (300, 9), (1, 1)] {
        trials.push(GpuTrial::new(format!("awkward_{rows}x{cols}"), move |d| check(d, rows, cols)));
    }
    run_gpu_trials(trials)
}
