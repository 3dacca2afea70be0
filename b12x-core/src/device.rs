//! The device: context, stream, and the properties plans and the session key on.

use crate::kernel::LoadedModule;
use crate::{Error, Result};
use cudarc::driver::sys::{CUdevice_attribute as Attr, CUstreamCaptureStatus};
use cudarc::driver::{CudaContext, CudaStream};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The architecture family a device belongs to, as far as kernel selection cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Hopper (H100/H200): our validation hardware.
    Sm90,
    /// Blackwell consumer: RTX 5090, RTX PRO 6000.
    Sm120,
    /// DGX Spark (GB10).
    Sm121,
    /// Anything else; runs through the portable PTX where the driver can JIT it.
    Other(u32, u32),
}

impl Arch {
    pub fn from_cc(major: u32, minor: u32) -> Self {
        match (major, minor) {
            (9, 0) => Arch::Sm90,
            (12, 0) => Arch::Sm120,
            (12, 1) => Arch::Sm121,
            (a, b) => Arch::Other(a, b),
        }
    }
}

/// A CUDA device with the context and stream b12x uses on it.
///
/// Creating one disables the context's event tracking (cudarc's default per-buffer events make
/// CUDA-graph capture fail with `STREAM_CAPTURE_ISOLATION`): create the `Device` *before*
/// allocating buffers that captured work will touch.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    cc: (u32, u32),
    sm_count: u32,
    smem_optin: u32,
    l2_bytes: u32,
    name: String,
    pub(crate) modules: Mutex<HashMap<&'static str, Arc<LoadedModule>>>,
    pub(crate) frozen: AtomicUsize,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({} #{} sm_{}{}, {} SMs)", self.name, self.ordinal, self.cc.0, self.cc.1, self.sm_count)
    }
}

/// True when a CUDA driver library can be loaded and reports at least one device.
/// Never panics (cudarc panics on the first driver call when libcuda is absent).
pub fn cuda_available() -> bool {
    // SAFETY: only tries to dlopen the driver library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return false;
    }
    CudaContext::device_count().map(|n| n > 0).unwrap_or(false)
}

impl Device {
    /// Opens device `ordinal` (its primary context) with a new non-blocking stream.
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        if !cuda_available() {
            return Err(Error::NoDevice("no CUDA driver (libcuda) or no device present".into()));
        }
        let n = CudaContext::device_count()? as usize;
        if ordinal >= n {
            return Err(Error::NoDevice(format!("device {ordinal} requested, {n} present")));
        }
        let ctx = CudaContext::new(ordinal)?;
        let stream = ctx.new_stream()?;
        // SAFETY: a fresh context and stream of our own; see `from_parts` for the contract.
        unsafe { Self::from_parts(ctx, stream) }
    }

    /// Wraps an engine's own context and stream (candle, mistral.rs, ...).
    ///
    /// # Safety
    /// This disables cudarc's event tracking on `ctx` (CUDA-graph capture fails with it on), for
    /// every buffer of that context, the engine's own included: from then on cudarc no longer
    /// makes one stream wait for another's writes, and the engine must order its streams itself
    /// (or use one stream). Buffers allocated before this call keep the events they have.
    pub unsafe fn from_parts(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Arc<Self>> {
        // SAFETY: the caller accepted the contract above.
        unsafe { ctx.disable_event_tracking() };
        let attr = |a: Attr| ctx.attribute(a).map(|v| v as u32);
        let cc = (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        Ok(Arc::new(Device {
            ordinal: ctx.ordinal(),
            cc,
            sm_count: attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            smem_optin: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            name: ctx.name()?,
            ctx,
            stream,
            modules: Mutex::new(HashMap::new()),
            frozen: AtomicUsize::new(0),
        }))
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The device's b12x stream (non-blocking, capturable).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// [`Error::WrongDevice`] unless `stream` belongs to this device (every op's `run` checks it
    /// before launching).
    pub fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        let actual = stream.context().ordinal();
        if actual != self.ordinal {
            return Err(Error::WrongDevice { expected: self.ordinal, actual });
        }
        Ok(())
    }
    /// Compute capability (major, minor).
    pub fn cc(&self) -> (u32, u32) {
        self.cc
    }
    pub fn arch(&self) -> Arch {
        Arch::from_cc(self.cc.0, self.cc.1)
    }
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// Opt-in shared memory per block, bytes (99 KB on SM120, 227 KB on SM90).
    pub fn smem_optin(&self) -> u32 {
        self.smem_optin
    }
    pub fn l2_bytes(&self) -> u32 {
        self.l2_bytes
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Identity used in selection-cache keys: CC, SM count and name.
    pub fn identity(&self) -> String {
        format!("sm_{}{}-{}sm-{}", self.cc.0, self.cc.1, self.sm_count, self.name)
    }
    /// Free device memory in bytes (used by tests to assert that `run` allocates nothing).
    pub fn mem_free(&self) -> Result<usize> {
        Ok(self.ctx.mem_get_info()?.0)
    }
    /// True once any session on this device has been frozen.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::Acquire) > 0
    }
}

/// True while `stream` is capturing a CUDA graph.
pub fn is_capturing(stream: &CudaStream) -> Result<bool> {
    Ok(stream.capture_status()? != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}
