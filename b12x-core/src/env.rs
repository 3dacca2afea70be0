//! Environment variables b12x reads (read once per process).
//!
//! | variable | effect |
//! |---|---|
//! | `B12X_CACHE_DIR` | selection-cache directory (default `$XDG_CACHE_HOME/b12x` or `~/.cache/b12x`) |
//! | `B12X_AUTOTUNE` | `0` disables races: pinned > cached > default |
//! | `B12X_PRINT_COMPILE_PROGRESS` | `1` prints one line per module load and per selection, with key and duration (and a raced selection's six fastest candidates) |
//! | `B12X_TIMING` | `1` times every launch with events and prints it (synchronizes: debugging only) |
//! | `B12X_CUDA_ARCHS` | build time: targets, e.g. `sm_90a` (see `b12x-build`) |

use std::path::PathBuf;
use std::sync::OnceLock;

fn flag(name: &str, default: bool) -> bool {
    match std::env::var(name) {
        Ok(v) => !matches!(v.trim(), "0" | "" | "false" | "off"),
        Err(_) => default,
    }
}

pub fn print_compile_progress() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| flag("B12X_PRINT_COMPILE_PROGRESS", false))
}

pub fn timing() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| flag("B12X_TIMING", false))
}

/// Whether autotune races are enabled (default on).
pub fn autotune() -> bool {
    flag("B12X_AUTOTUNE", true)
}

/// The selection-cache directory.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("B12X_CACHE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("b12x");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".cache/b12x"),
        None => std::env::temp_dir().join("b12x-cache"),
    }
}
