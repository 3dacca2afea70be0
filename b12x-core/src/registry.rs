//! The op registry: every linked op crate submits one [`OpInfo`] per op.

/// Validation status of an op on an architecture family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Validation {
    /// GPU tests pass on this hardware (and under compute-sanitizer).
    Validated,
    /// Compiled and ptxas-checked only; no hardware to run on.
    CompiledOnly,
}

/// Static description of one op, for `list_ops()` and `cargo xtask ops`.
#[derive(Debug, serde::Serialize)]
pub struct OpInfo {
    /// `<group>.<op>`.
    pub name: &'static str,
    pub group: &'static str,
    /// Public entry points, e.g. `["plan", "run"]`.
    pub entry_points: &'static [&'static str],
    /// Supported dtype combinations, human readable.
    pub dtypes: &'static [&'static str],
    /// (arch, status) pairs, e.g. `("sm_90a", Validated)`.
    pub archs: &'static [(&'static str, Validation)],
    /// The crate that provides it.
    pub krate: &'static str,
    pub summary: &'static str,
}

inventory::collect!(OpInfo);

/// Every op linked into this binary, sorted by name.
pub fn list_ops() -> Vec<&'static OpInfo> {
    let mut v: Vec<&'static OpInfo> = inventory::iter::<OpInfo>.into_iter().collect();
    v.sort_by_key(|o| o.name);
    v
}
