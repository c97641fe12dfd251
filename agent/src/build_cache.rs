//! Built kernels kept by (commit, kconfig, compiler, arch), evicted least recently
//! used first when the cache outgrows its size bound; and the record of
//! commits that do not build for a kconfig and compiler.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use kbot_api::agent::KconfigSpec;

use crate::error::{AgentError, Result};
use crate::outcome::now_ms;

/// The identity of a build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildKey {
    pub commit: String,
    pub kconfig: KconfigSpec,
    pub compiler: String,
    /// The kernel's `ARCH=` (`x86_64`, `arm64`): one commit, kconfig name
    /// and compiler build different kernels for different guests. Entries
    /// written before the arch was recorded are x86_64 builds.
    #[serde(default = "default_arch")]
    pub arch: String,
}

/// The arch of the builds kbot made before it built for other guests.
pub const DEFAULT_ARCH: &str = "x86_64";

fn default_arch() -> String {
    DEFAULT_ARCH.to_string()
}

impl BuildKey {
    /// A short stable hash naming the cache entry (and the object
    /// directory of its kconfig, compiler and arch). The arch is hashed
    /// unless it is x86_64, so x86_64 kernels cached before arches were
    /// told apart keep their ids.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.commit.as_bytes());
        h.update([0]);
        h.update(config_identity(&self.kconfig).as_bytes());
        h.update([0]);
        h.update(self.compiler.as_bytes());
        if self.arch != DEFAULT_ARCH {
            h.update([0]);
            h.update(b"arch=");
            h.update(self.arch.as_bytes());
        }
        hex::encode(&h.finalize()[..12])
    }
}

/// The kconfig's content (not just its name): two specs with one name but
/// different fragments are different builds.
pub fn config_identity(k: &KconfigSpec) -> String {
    format!("{}\0{:?}\0{}\0{:?}", k.name, k.base, k.fragment, k.full)
}

/// What the cache keeps about one built kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuiltKernel {
    pub key: BuildKey,
    /// `make kernelrelease`.
    pub release: String,
    /// The GNU build id of vmlinux, hex (checked after a kexec).
    pub build_id: Option<String>,
    pub build_secs: f64,
    pub size_bytes: u64,
    pub last_used_ms: i64,
    #[serde(skip)]
    pub dir: PathBuf,
}

impl BuiltKernel {
    pub fn image(&self) -> PathBuf {
        self.dir.join("bzImage")
    }

    pub fn config(&self) -> PathBuf {
        self.dir.join("config")
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join("build.log")
    }
}

/// A commit that failed to build for one kconfig and compiler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unbuildable {
    pub key: BuildKey,
    pub log_tail: String,
}

pub struct BuildCache {
    root: PathBuf,
    max_bytes: u64,
}

impl BuildCache {
    pub fn open(root: &Path, max_bytes: u64) -> Result<BuildCache> {
        for sub in ["kernels", "unbuildable"] {
            fs::create_dir_all(root.join(sub))
                .map_err(|e| AgentError::io(format!("creating {}", root.display()), e))?;
        }
        Ok(BuildCache {
            root: root.to_path_buf(),
            max_bytes,
        })
    }

    fn entry_dir(&self, key: &BuildKey) -> PathBuf {
        self.root.join("kernels").join(key.id())
    }

    /// The cached kernel for `key`, marked as just used.
    pub fn get(&self, key: &BuildKey) -> Result<Option<BuiltKernel>> {
        let dir = self.entry_dir(key);
        let Some(mut k) = read_meta(&dir)? else {
            return Ok(None);
        };
        if k.key != *key || !k.image().is_file() {
            return Ok(None);
        }
        if read_digest(&dir) != Some(digest(&dir)?) {
            tracing::warn!(build = %key.id(), commit = %key.commit,
                "the cached kernel is not what was stored (its digest differs); building it again");
            fs::remove_dir_all(&dir)
                .map_err(|e| AgentError::io(format!("removing {}", dir.display()), e))?;
            return Ok(None);
        }
        k.last_used_ms = now_ms();
        write_json(&dir.join("meta.json"), &k)?;
        Ok(Some(k))
    }

    /// Moves a finished build (a directory with bzImage, config and
    /// build.log) into the cache, then evicts down to the size bound.
    pub fn insert(&self, staged: &Path, mut kernel: BuiltKernel) -> Result<BuiltKernel> {
        let dir = self.entry_dir(&kernel.key);
        let _ = fs::remove_dir_all(&dir);
        fs::rename(staged, &dir)
            .map_err(|e| AgentError::io(format!("moving the build into {}", dir.display()), e))?;
        kernel.size_bytes = dir_size(&dir);
        kernel.last_used_ms = now_ms();
        kernel.dir = dir.clone();
        let sum = digest(&dir)?;
        fs::write(dir.join(DIGEST_FILE), sum)
            .map_err(|e| AgentError::io(format!("writing {}", dir.display()), e))?;
        write_json(&dir.join("meta.json"), &kernel)?;
        self.evict(&kernel.key.id())?;
        Ok(kernel)
    }

    /// Makes room on the cache's disk for a write that failed for want of
    /// space: removes least recently used kernels until `want` bytes are
    /// free there (or no kernel is left) and returns the evicted ids. The
    /// build cache is what the agent can always rebuild, so it goes first.
    pub fn make_room(&self, want: u64) -> Result<Vec<String>> {
        let mut entries = self.entries()?;
        entries.sort_by_key(|k| k.last_used_ms);
        let mut evicted = Vec::new();
        for k in entries {
            if free_bytes(&self.root) >= want {
                break;
            }
            fs::remove_dir_all(&k.dir)
                .map_err(|e| AgentError::io(format!("evicting {}", k.dir.display()), e))?;
            let id = k.key.id();
            tracing::warn!(build = %id, commit = %k.key.commit, "evicted from the build cache: the disk is full");
            evicted.push(id);
        }
        Ok(evicted)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes least recently used kernels until the cache fits, keeping `keep`.
    pub fn evict(&self, keep: &str) -> Result<Vec<String>> {
        let mut entries = self.entries()?;
        entries.sort_by_key(|k| k.last_used_ms);
        let mut total: u64 = entries.iter().map(|k| k.size_bytes).sum();
        let mut evicted = Vec::new();
        for k in entries {
            if total <= self.max_bytes {
                break;
            }
            let id = k.key.id();
            if id == keep {
                continue;
            }
            fs::remove_dir_all(&k.dir)
                .map_err(|e| AgentError::io(format!("evicting {}", k.dir.display()), e))?;
            total = total.saturating_sub(k.size_bytes);
            tracing::info!(build = %id, commit = %k.key.commit, "evicted from the build cache");
            evicted.push(id);
        }
        Ok(evicted)
    }

    pub fn entries(&self) -> Result<Vec<BuiltKernel>> {
        let dir = self.root.join("kernels");
        let list = fs::read_dir(&dir)
            .map_err(|e| AgentError::io(format!("listing {}", dir.display()), e))?;
        let mut out = Vec::new();
        for entry in list.flatten() {
            if let Some(k) = read_meta(&entry.path())? {
                out.push(k);
            }
        }
        Ok(out)
    }

    pub fn mark_unbuildable(&self, key: &BuildKey, log_tail: &str) -> Result<()> {
        let u = Unbuildable {
            key: key.clone(),
            log_tail: log_tail.to_string(),
        };
        write_json(
            &self
                .root
                .join("unbuildable")
                .join(format!("{}.json", key.id())),
            &u,
        )
    }

    pub fn unbuildable(&self, key: &BuildKey) -> Result<Option<Unbuildable>> {
        let path = self
            .root
            .join("unbuildable")
            .join(format!("{}.json", key.id()));
        Ok(read_json::<Unbuildable>(&path)?.filter(|u| u.key == *key))
    }
}

/// The file of a cache entry holding the digest of what was stored.
const DIGEST_FILE: &str = "sha256";

/// The SHA-256 of an entry's image and config, hex: written when the entry
/// is stored, compared when it is used, so a kernel changed in the cache
/// (by anything: a disk error, a process that should not write there) is
/// never booted as the build of its key.
fn digest(dir: &Path) -> Result<String> {
    let mut h = Sha256::new();
    for name in ["bzImage", "config"] {
        let path = dir.join(name);
        match fs::File::open(&path) {
            Ok(mut f) => {
                std::io::copy(&mut f, &mut h)
                    .map_err(|e| AgentError::io(format!("reading {}", path.display()), e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(AgentError::io(format!("reading {}", path.display()), e)),
        }
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

fn read_digest(dir: &Path) -> Option<String> {
    fs::read_to_string(dir.join(DIGEST_FILE)).ok()
}

fn read_meta(dir: &Path) -> Result<Option<BuiltKernel>> {
    Ok(
        read_json::<BuiltKernel>(&dir.join("meta.json"))?.map(|mut k| {
            k.dir = dir.to_path_buf();
            k
        }),
    )
}

pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| AgentError::Json {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AgentError::io(format!("reading {}", path.display()), e)),
    }
}

/// Writes JSON atomically (temp file + rename), so a crash never leaves half a file.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| AgentError::io(format!("creating {}", dir.display()), e))?;
    }
    let tmp = path.with_extension("tmp");
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| AgentError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    if let Err(e) = fs::write(&tmp, bytes) {
        // A half-written temporary (a full disk) must not take more room.
        let _ = fs::remove_file(&tmp);
        return Err(AgentError::io(format!("writing {}", tmp.display()), e));
    }
    fs::rename(&tmp, path).map_err(|e| AgentError::io(format!("renaming {}", tmp.display()), e))
}

/// Bytes an unprivileged writer may still use on the filesystem of `path`
/// (0 when that cannot be read: then every kernel is fair game).
pub fn free_bytes(path: &Path) -> u64 {
    nix::sys::statvfs::statvfs(path)
        .map(|s| s.blocks_available().saturating_mul(s.fragment_size()))
        .unwrap_or(0)
}

fn dir_size(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|l| {
            l.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(commit: &str) -> BuildKey {
        BuildKey {
            commit: commit.to_string(),
            kconfig: KconfigSpec {
                name: "tiny".into(),
                base: Some("tinyconfig".into()),
                fragment: "CONFIG_SMP=y\n".into(),
                full: None,
            },
            compiler: "gcc-12".into(),
            arch: DEFAULT_ARCH.into(),
        }
    }

    fn stage(root: &Path, name: &str, bytes: usize) -> Result<PathBuf> {
        let d = root.join(name);
        fs::create_dir_all(&d).map_err(|e| AgentError::io("mkdir", e))?;
        fs::write(d.join("bzImage"), vec![0u8; bytes]).map_err(|e| AgentError::io("write", e))?;
        Ok(d)
    }

    fn kernel(k: BuildKey) -> BuiltKernel {
        BuiltKernel {
            key: k,
            release: "6.1.0".into(),
            build_id: None,
            build_secs: 1.0,
            size_bytes: 0,
            last_used_ms: 0,
            dir: PathBuf::new(),
        }
    }

    #[test]
    fn the_key_covers_config_content_and_compiler() {
        let a = key("a");
        let mut b = key("a");
        b.kconfig.fragment.push_str("CONFIG_NUMA=y\n");
        let mut c = key("a");
        c.compiler = "gcc-13".into();
        assert_ne!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        assert_eq!(a.id(), key("a").id());
    }

    /// One commit, kconfig and compiler built for x86_64 and for arm64 are
    /// two cache entries: each arch gets its own kernel back, and an arm64
    /// build marked unbuildable says nothing about the x86_64 one.
    #[test]
    fn kernels_of_two_arches_are_kept_apart() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let cache = BuildCache::open(&tmp.path().join("cache"), 1 << 30)?;
        let x86 = key("c1");
        let mut arm = key("c1");
        arm.arch = "arm64".into();
        assert_ne!(x86.id(), arm.id());
        let x86_dir = stage(tmp.path(), "s-x86", 100)?;
        fs::write(x86_dir.join("bzImage"), b"x86 bzImage").map_err(|e| AgentError::io("w", e))?;
        cache.insert(&x86_dir, kernel(x86.clone()))?;
        assert!(
            cache.get(&arm)?.is_none(),
            "an x86_64 kernel is no arm64 kernel"
        );
        let arm_dir = stage(tmp.path(), "s-arm", 100)?;
        fs::write(arm_dir.join("bzImage"), b"arm64 Image").map_err(|e| AgentError::io("w", e))?;
        cache.insert(&arm_dir, kernel(arm.clone()))?;
        let read = |k: &BuildKey| -> Result<Vec<u8>> {
            let got = cache
                .get(k)?
                .ok_or_else(|| AgentError::Config("missing".into()))?;
            assert_eq!(got.key.arch, k.arch);
            fs::read(got.image()).map_err(|e| AgentError::io("read", e))
        };
        assert_eq!(read(&x86)?, b"x86 bzImage");
        assert_eq!(read(&arm)?, b"arm64 Image");
        assert_eq!(cache.entries()?.len(), 2);
        cache.mark_unbuildable(&arm, "arm64 only")?;
        assert!(cache.unbuildable(&x86)?.is_none());
        // A meta.json from before the arch was recorded is an x86_64 build
        // under the same id as before.
        let old: BuildKey = serde_json::from_str(
            r#"{"commit":"c1","kconfig":{"name":"tiny","base":"tinyconfig","fragment":"CONFIG_SMP=y\n","full":null},"compiler":"gcc-12"}"#,
        )
        .map_err(|e| AgentError::parse("key", e.to_string()))?;
        assert_eq!(old, x86);
        // sha256("c1\0" + config_identity + "\0gcc-12"), as before arches.
        assert_eq!(x86.id(), "0d7da82da8e30e613652f951");
        Ok(())
    }

    #[test]
    fn least_recently_used_kernels_are_evicted_past_the_bound() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let cache = BuildCache::open(&tmp.path().join("cache"), 2500)?;
        cache.insert(&stage(tmp.path(), "s1", 1000)?, kernel(key("c1")))?;
        std::thread::sleep(std::time::Duration::from_millis(5));
        cache.insert(&stage(tmp.path(), "s2", 1000)?, kernel(key("c2")))?;
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(
            cache.get(&key("c1"))?.is_some(),
            "c1 is now the most recent"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
        cache.insert(&stage(tmp.path(), "s3", 1000)?, kernel(key("c3")))?;
        assert!(
            cache.get(&key("c2"))?.is_none(),
            "c2 was least recently used"
        );
        assert!(cache.get(&key("c1"))?.is_some());
        assert!(cache.get(&key("c3"))?.is_some());
        Ok(())
    }

    /// A cached image changed after it was stored is not used: the entry
    /// goes, and the caller builds the kernel again.
    #[test]
    fn a_changed_cached_kernel_is_not_used() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let cache = BuildCache::open(&tmp.path().join("cache"), 1 << 20)?;
        let stored = cache.insert(&stage(tmp.path(), "s", 100)?, kernel(key("c1")))?;
        assert!(cache.get(&key("c1"))?.is_some(), "intact");
        let mut image = fs::OpenOptions::new()
            .append(true)
            .open(stored.image())
            .map_err(|e| AgentError::io("open", e))?;
        std::io::Write::write_all(&mut image, b"planted")
            .map_err(|e| AgentError::io("write", e))?;
        assert!(cache.get(&key("c1"))?.is_none(), "changed: built again");
        assert!(!stored.dir.exists(), "the changed entry is gone");
        Ok(())
    }

    #[test]
    fn unbuildable_commits_are_remembered_per_key() -> Result<()> {
        let tmp = tempfile::tempdir().map_err(|e| AgentError::io("tempdir", e))?;
        let cache = BuildCache::open(tmp.path(), 1 << 30)?;
        cache.mark_unbuildable(&key("bad"), "error: expected ';'")?;
        assert_eq!(
            cache.unbuildable(&key("bad"))?.map(|u| u.log_tail),
            Some("error: expected ';'".into())
        );
        let mut other = key("bad");
        other.compiler = "clang".into();
        assert!(cache.unbuildable(&other)?.is_none());
        Ok(())
    }
}
