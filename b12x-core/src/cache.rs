//! The on-disk tuning-selection cache: one small JSON file per selection key.
//!
//! Keys hold the op id, contract version, query, bucket, device identity and the kernels'
//! build hash, so a new build or another GPU never reuses a stale choice. Writes go to a
//! unique temporary file that is renamed into place (atomic on POSIX), so concurrent processes
//! sharing the directory see either the old or the new file, never a torn one. A file that does
//! not parse, or holds another key (hash collision), is ignored with a warning and rewritten.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub key: String,
    pub config: String,
    /// Race scores (µs) per config, for the record.
    #[serde(default)]
    pub scores_us: Vec<(String, f64)>,
}

#[derive(Clone, Debug)]
pub struct SelectionCache {
    dir: PathBuf,
}

impl SelectionCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    fn path(&self, key: &str) -> PathBuf {
        let h: String = Sha256::digest(key.as_bytes()).iter().take(16).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{h}.json"))
    }
    /// The cached config for `key`, if a valid entry exists.
    pub fn get(&self, key: &str) -> Option<CacheEntry> {
        let path = self.path(key);
        let text = std::fs::read_to_string(&path).ok()?;
        match serde_json::from_str::<CacheEntry>(&text) {
            Ok(e) if e.key == key => Some(e),
            Ok(_) => {
                eprintln!("b12x: warning: selection cache file {} holds another key; ignoring it", path.display());
                None
            }
            Err(err) => {
                eprintln!(
                    "b12x: warning: corrupt selection cache file {} ({err}); ignoring and rewriting it",
                    path.display()
                );
                None
            }
        }
    }
    /// Atomically writes `entry` (tmp file + rename).
    pub fn put(&self, entry: &CacheEntry) -> Result<()> {
        let io = |path: &Path, source| Error::Io { path: path.display().to_string(), source };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let path = self.path(&entry.key);
        // Unique per process (pid) and per write within it (counter): two writers never share a
        // temporary file, so a rename always publishes one complete write.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("x");
        let tmp = self.dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(entry).unwrap_or_default();
        std::fs::write(&tmp, text).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(&path, e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("b12x-cache-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tmpdir("rt");
        let c = SelectionCache::new(&dir);
        assert!(c.get("k1").is_none());
        let e = CacheEntry { key: "k1".into(), config: "v2".into(), scores_us: vec![("v2".into(), 3.5)] };
        c.put(&e).unwrap();
        assert_eq!(c.get("k1"), Some(e.clone()));
        assert!(c.get("k2").is_none());
        // Corrupt file: ignored, then rewritten.
        std::fs::write(c.path("k1"), b"{not json").unwrap();
        assert!(c.get("k1").is_none());
        c.put(&e).unwrap();
        assert_eq!(c.get("k1").unwrap().config, "v2");
        // A file that holds another key is ignored.
        std::fs::write(c.path("k1"), serde_json::to_string(&CacheEntry { key: "other".into(), ..e }).unwrap()).unwrap();
        assert!(c.get("k1").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_writers_never_tear() {
        let dir = tmpdir("conc");
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let c = SelectionCache::new(dir);
                    for i in 0..50 {
                        let config = format!("cfg{t}_{i}_{}", "x".repeat(200 * (i % 3)));
                        c.put(&CacheEntry { key: "shared".into(), config, scores_us: vec![] }).unwrap();
                        if let Some(e) = c.get("shared") {
                            assert!(e.config.starts_with("cfg"));
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(SelectionCache::new(&dir).get("shared").is_some());
        let leftovers = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(leftovers, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
