//! Building a kernel for a job: a git mirror per repository, a worktree at
//! the commit, the kconfig (make target + fragment, or a full .config) with
//! `olddefconfig`, the job's compiler through ccache, `make -j`, the log kept.
//!
//! Every `make` runs in the build sandbox ([`crate::sandbox`]); git runs
//! outside it, as the agent, on repositories the agent chose (it checks out
//! and reads objects, it runs nothing of the commit's). A commit of the
//! watched tree itself is trusted to write the shared object directory and
//! ccache that later builds of its kconfig reuse; any other commit (a
//! series kbot applied from a list, reachable only from `refs/kbot/`) builds
//! in a copy of the object directory, discarded after the build, and reads
//! the shared ccache without writing it: nothing it does reaches a later job.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kbot_api::agent::{FailureKind, RepoSpec};
use kbot_core::build_log;

use crate::build_cache::{free_bytes, BuildCache, BuildKey, BuiltKernel};
use crate::build_lock;
use crate::elf_notes;
use crate::error::{AgentError, Result};
use crate::guest_arch::GuestArch;
use crate::outcome::Failure;
use crate::process::{self, run_logged, tail_of_file, Cancel, Finished};
use crate::sandbox::{self, BuildIdentity, Placed, SandboxConfig, View};

mod kconfig;
mod site;
mod sources;

use kconfig::note_unmet_fragment;
pub use kconfig::{
    builtin_kconfig, compiler_command, effective_kconfig, merge_fragment, server_key,
    unmet_fragment_lines,
};
use site::{object_dir_name, private_work_dir, Ccache, ObjectDir, Site};
#[cfg(test)]
use sources::has_commit;
use sources::{on_watched_tree, Sources};

/// Build log lines kept in a `build_failed` report.
const LOG_TAIL_LINES: usize = 60;

/// Where a build sees its source tree, whatever repository it came from.
pub const SRC_INSIDE: &str = "/kbot/src";

/// Where a build sees its object directory.
pub const OBJ_INSIDE: &str = "/kbot/obj";

/// The end of the build log read for a failed build's report: the log
/// itself may be as large as the build's file size limit.
const LOG_TAIL_BYTES: u64 = 256 << 10;

/// `make kernelrelease`'s answer, at most (the rest is dropped).
const RELEASE_BYTES: u64 = 256;

/// Where and how kernels are built.
#[derive(Debug, Clone)]
pub struct BuildConfig {
    /// Mirrors, worktrees and object directories live here.
    pub work_dir: PathBuf,
    /// `make -j` this many jobs.
    pub jobs: u32,
    /// The kernel's ARCH and the image make target and path.
    pub arch: String,
    pub image_target: String,
    pub image_path: String,
    /// `CROSS_COMPILE=` (`aarch64-linux-gnu-`) when the kernel is for
    /// another architecture than the host's: the job's compiler becomes
    /// `<prefix><compiler>` (Debian's `aarch64-linux-gnu-gcc-12`), host
    /// programs keep the plain one.
    pub cross_compile: Option<String>,
    pub timeout: Duration,
    /// Use ccache (with its directory) when it is installed.
    pub ccache_dir: Option<PathBuf>,
    /// Who builds, within what limits.
    pub sandbox: SandboxConfig,
}

impl BuildConfig {
    pub fn x86_64(work_dir: &Path, jobs: u32) -> BuildConfig {
        BuildConfig::for_guest(GuestArch::X86_64, work_dir, jobs)
    }

    /// Kernels for `arch` guests, cross-compiled when the host is another arch.
    pub fn for_guest(arch: GuestArch, work_dir: &Path, jobs: u32) -> BuildConfig {
        let (image_target, image_path) = arch.image();
        BuildConfig {
            work_dir: work_dir.to_path_buf(),
            jobs,
            arch: arch.kernel_arch().into(),
            image_target: image_target.into(),
            image_path: image_path.into(),
            cross_compile: arch
                .cross_compile(std::env::consts::ARCH)
                .map(str::to_string),
            timeout: Duration::from_secs(3 * 3600),
            ccache_dir: Some(work_dir.join("ccache")),
            sandbox: SandboxConfig::default(),
        }
    }

    /// The start-up check of the build sandbox (bwrap, the build user and
    /// its way to the work and ccache directories); the work directory is
    /// made traversable, but not listable, by the build user, and the
    /// agent's own files in it private.
    pub fn check_sandbox(&self) -> Result<Option<BuildIdentity>> {
        let id = self.sandbox.identity()?;
        if id.is_some() {
            private_work_dir(&self.work_dir)?;
        }
        let mut dirs = vec![self.work_dir.as_path()];
        dirs.extend(self.ccache_dir.as_deref());
        sandbox::check(&self.sandbox, &dirs)
    }

    /// The C compiler for the kernel with the job's `compiler` (clang
    /// cross-compiles by itself: kbuild gives it `--target` from
    /// CROSS_COMPILE).
    pub fn kernel_cc(&self, compiler: &str) -> String {
        match &self.cross_compile {
            Some(prefix) if !compiler.starts_with("clang") => format!("{prefix}{compiler}"),
            _ => compiler.to_string(),
        }
    }
}

pub struct Builder {
    cfg: BuildConfig,
    cache: BuildCache,
}

impl Builder {
    pub fn new(cfg: BuildConfig, cache: BuildCache) -> Builder {
        Builder { cfg, cache }
    }

    pub fn cache(&self) -> &BuildCache {
        &self.cache
    }

    /// The kernel's `ARCH=` this builder builds for (part of each [`BuildKey`]).
    pub fn arch(&self) -> &str {
        &self.cfg.arch
    }

    /// The kernel for `key`: from the cache, or built now. A commit that
    /// failed before for this kconfig and compiler fails at once.
    pub fn kernel(
        &self,
        repo: &RepoSpec,
        key: &BuildKey,
        cancel: &Cancel,
    ) -> Result<std::result::Result<BuiltKernel, Failure>> {
        if let Some(k) = self.cache.get(key)? {
            tracing::info!(commit = %key.commit, "kernel found in the build cache");
            return Ok(Ok(k));
        }
        if let Some(u) = self.cache.unbuildable(key)? {
            return Ok(Err(Failure::new(
                FailureKind::BuildFailed,
                format!("known unbuildable:\n{}", u.log_tail),
            )));
        }
        let compiler = match compiler_command(&key.compiler)
            .and_then(|host| Ok((host, compiler_command(&self.cfg.kernel_cc(&key.compiler))?)))
        {
            Ok(c) => c,
            Err(why) => return Ok(Err(Failure::new(FailureKind::Infrastructure, why))),
        };
        let mirror = match self.mirror(repo, &key.commit) {
            Ok(m) => m,
            Err(e) => {
                return Ok(Err(Failure::new(
                    FailureKind::Infrastructure,
                    format!("fetching {}: {e}", repo.url),
                )))
            }
        };
        let trusted = on_watched_tree(&mirror, &key.commit);
        if !trusted {
            tracing::info!(commit = %key.commit,
                "not on the watched tree: building in a throw-away object directory");
        }
        let src = Sources {
            worktree: self.worktree(repo, &mirror, &key.commit)?,
            mirror,
            trusted,
        };
        self.build_making_room(&src, key, &compiler, cancel)
    }

    /// Builds; when the disk filled up under the build, evicts the cached
    /// kernels and builds once more. Every cached kernel goes: a build needs
    /// far more room than one kernel, and how much is unknown. A full disk
    /// is the agent's trouble, never the commit's: it is not recorded as
    /// unbuildable, and the job fails as `infrastructure`.
    fn build_making_room(
        &self,
        src: &Sources,
        key: &BuildKey,
        compiler: &(String, String),
        cancel: &Cancel,
    ) -> Result<std::result::Result<BuiltKernel, Failure>> {
        let why = match self.attempt(src, key, compiler, cancel)? {
            Attempt::Built(k) => return Ok(Ok(*k)),
            Attempt::Failed(f) => return Ok(Err(f)),
            Attempt::NoSpace(why) => why,
        };
        let evicted = self.cache.make_room(u64::MAX)?;
        tracing::warn!(commit = %key.commit, evicted = evicted.len(), error = %why,
            "the disk filled up during the build; building again after evicting cached kernels");
        Ok(match self.attempt(src, key, compiler, cancel)? {
            Attempt::Built(k) => Ok(*k),
            Attempt::Failed(f) => Err(f),
            Attempt::NoSpace(why) => Err(Failure::new(
                FailureKind::Infrastructure,
                format!(
                    "no space left on the agent's disk under {} to build {} (after evicting \
                     {} cached kernels): {why}",
                    self.cfg.work_dir.display(),
                    key.commit,
                    evicted.len()
                ),
            )),
        })
    }

    /// One build, with a full disk told apart from a commit that does not build.
    fn attempt(
        &self,
        src: &Sources,
        key: &BuildKey,
        compiler: &(String, String),
        cancel: &Cancel,
    ) -> Result<Attempt> {
        match self.build(src, key, compiler, cancel) {
            Err(e) if e.is_disk_full() => {
                let _ = fs::remove_dir_all(self.staging(key));
                Ok(Attempt::NoSpace(e.to_string()))
            }
            other => other,
        }
    }

    /// Where a kernel another agent built is downloaded before it enters
    /// the cache (beside the cache, so it moves in with a rename).
    pub fn download_dir(&self, key: &BuildKey) -> PathBuf {
        self.cfg
            .work_dir
            .join("staging")
            .join(format!("{}.download", key.id()))
    }

    fn staging(&self, key: &BuildKey) -> PathBuf {
        self.cfg.work_dir.join("staging").join(key.id())
    }

    /// Configures and builds in the object directory of this kconfig and
    /// compiler (shared by the watched tree's commits, a throw-away copy of
    /// it for any other commit); the result goes into the cache.
    fn build(
        &self,
        src: &Sources,
        key: &BuildKey,
        compiler: &(String, String),
        cancel: &Cancel,
    ) -> Result<Attempt> {
        let start = Instant::now();
        let identity = self.cfg.sandbox.identity()?;
        let shared = self.cfg.work_dir.join("objs").join(object_dir_name(key));
        let staged = self.staging(key);
        let _ = fs::remove_dir_all(&staged);
        for d in [&shared, &staged] {
            fs::create_dir_all(d)
                .map_err(|e| AgentError::io(format!("creating {}", d.display()), e))?;
        }
        sandbox::give_to(&shared, identity)?;
        // Held until the build returns; make's processes hold it too.
        let _lock = build_lock::lock(&shared, cancel)?;
        let objs = ObjectDir::for_build(&self.cfg.work_dir, &shared, key, src.trusted)?;
        let site = Site {
            src,
            obj: objs.path(),
            ccache: self.ccache(src.trusted, identity)?,
            identity,
        };
        let obj = site.obj;
        let log = staged.join("build.log");
        let make = |args: &[&str]| self.make(&site, compiler, args);
        let mut steps: Vec<Command> = Vec::new();
        match (&key.kconfig.full, &key.kconfig.base) {
            (Some(full), _) => fs::write(obj.join(".config"), full)
                .map_err(|e| AgentError::io("writing .config", e))?,
            (None, Some(base)) => steps.push(make(&[base])),
            (None, None) => steps.push(make(&["defconfig"])),
        }
        for mut step in steps {
            if let Some(f) = self.step(&mut step, &log, cancel)? {
                return self.failed(key, f);
            }
        }
        let config = match sandbox::inside(obj, ".config") {
            Ok(c) => c,
            Err(why) => return self.failed(key, why),
        };
        merge_fragment(&config, &key.kconfig.fragment)?;
        if let Some(f) = self.step(&mut make(&["olddefconfig"]), &log, cancel)? {
            return self.failed(key, f);
        }
        let jobs = format!("-j{}", self.cfg.jobs.max(1));
        if let Some(f) = self.step(&mut make(&[&jobs, &self.cfg.image_target]), &log, cancel)? {
            return self.failed(key, f);
        }
        let (image, config) = match (
            sandbox::inside(obj, &self.cfg.image_path),
            sandbox::inside(obj, ".config"),
        ) {
            (Ok(i), Ok(c)) => (i, c),
            (Err(why), _) | (_, Err(why)) => return self.failed(key, why),
        };
        note_unmet_fragment(&config, &key.kconfig.fragment, &log)?;
        let copy = |from: &Path, to: &str| {
            fs::copy(from, staged.join(to))
                .map_err(|e| AgentError::io(format!("copying {}", from.display()), e))
        };
        // Cached as `bzImage` whatever the arch (arm64's is `Image`).
        copy(&image, "bzImage")?;
        copy(&config, "config")?;
        let release =
            match self.kernelrelease(&mut make(&["-s", "kernelrelease"]), &staged, cancel)? {
                Ok(r) => r,
                Err(why) => return self.failed(key, why),
            };
        let build_id = sandbox::inside(obj, "vmlinux")
            .ok()
            .and_then(|v| elf_notes::build_id_of_file(&v).ok().flatten());
        let kernel = BuiltKernel {
            key: key.clone(),
            release,
            build_id,
            build_secs: start.elapsed().as_secs_f64(),
            size_bytes: 0,
            last_used_ms: 0,
            dir: PathBuf::new(),
        };
        Ok(Attempt::Built(Box::new(
            self.cache.insert(&staged, kernel)?,
        )))
    }

    /// The ccache the build uses, if any: the shared one, writable for a
    /// trusted build, read-only (hits only) for any other.
    fn ccache(&self, trusted: bool, identity: Option<BuildIdentity>) -> Result<Option<Ccache>> {
        let Some(dir) = self
            .cfg
            .ccache_dir
            .as_ref()
            .filter(|_| process::on_path("ccache"))
        else {
            return Ok(None);
        };
        fs::create_dir_all(dir)
            .map_err(|e| AgentError::io(format!("creating {}", dir.display()), e))?;
        sandbox::give_to(dir, identity)?;
        Ok(Some(Ccache {
            dir: dir.clone(),
            writable: trusted,
        }))
    }

    /// `make` in the object directory with (host compiler, kernel
    /// compiler), in the sandbox: the source read-only at [`SRC_INSIDE`],
    /// the object directory writable at [`OBJ_INSIDE`], the source's git
    /// read-only where it is (and a trusted build's ccache writable). The
    /// fixed paths make every repository's build of the same source the
    /// same compiler command lines, which ccache then finds.
    fn make(&self, site: &Site, compiler: &(String, String), args: &[&str]) -> Command {
        let mut argv = vec![
            "-C".to_string(),
            SRC_INSIDE.to_string(),
            format!("O={OBJ_INSIDE}"),
            format!("ARCH={}", self.cfg.arch),
        ];
        if let Some(prefix) = &self.cfg.cross_compile {
            argv.push(format!("CROSS_COMPILE={prefix}"));
        }
        // Fixed build identity: rebuilding a commit gives the same image,
        // here or in a reproduction script (`kbot_core::machine::BUILD_ENV`).
        let mut env: Vec<(String, String)> = kbot_core::machine::BUILD_ENV
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut view = View {
            read_only: vec![site.src.mirror.clone()],
            placed: vec![
                Placed {
                    host: site.src.worktree.clone(),
                    inside: SRC_INSIDE.into(),
                    writable: false,
                },
                Placed {
                    host: site.obj.to_path_buf(),
                    inside: OBJ_INSIDE.into(),
                    writable: true,
                },
            ],
            chdir: OBJ_INSIDE.into(),
            ..View::default()
        };
        let (host_cc, cc) = match &site.ccache {
            Some(c) => {
                env.extend(c.env());
                if c.writable {
                    view.writable.push(c.dir.clone());
                } else {
                    view.read_only.push(c.dir.clone());
                }
                (
                    format!("ccache {}", compiler.0),
                    format!("ccache {}", compiler.1),
                )
            }
            None => compiler.clone(),
        };
        argv.push(format!("CC={cc}"));
        argv.push(format!("HOSTCC={host_cc}"));
        argv.extend(args.iter().map(|a| a.to_string()));
        view.env = env;
        sandbox::command(&self.cfg.sandbox, site.identity, &view, "make", &argv)
    }

    /// Runs one build step with its output in the log; `Some` on failure.
    fn step(&self, cmd: &mut Command, log: &Path, cancel: &Cancel) -> Result<Option<String>> {
        let shown = sandbox::describe(cmd);
        append(log, &format!("$ {shown}\n"))?;
        Ok(self.why_failed(&shown, run_logged(cmd, log, self.cfg.timeout, cancel)?))
    }

    /// Why a step failed, if it did.
    fn why_failed(&self, shown: &str, end: Finished) -> Option<String> {
        match end {
            Finished::Exited(s) if s.success() => None,
            Finished::Exited(s) => Some(format!("{shown} ended with {s}")),
            Finished::TimedOut => Some(format!("{shown} ran past {:?}", self.cfg.timeout)),
        }
    }

    /// `make -s kernelrelease`'s first line, its stdout read from a file
    /// (the build decides how much it prints), its stderr in the build
    /// log: `Err` when the step fails.
    fn kernelrelease(
        &self,
        cmd: &mut Command,
        staged: &Path,
        cancel: &Cancel,
    ) -> Result<std::result::Result<String, String>> {
        let out = staged.join("kernelrelease");
        let open = |p: &Path| {
            fs::File::options()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| AgentError::io(format!("opening {}", p.display()), e))
        };
        cmd.stdin(std::process::Stdio::null())
            .stdout(open(&out)?)
            .stderr(open(&staged.join("build.log"))?);
        let shown = sandbox::describe(cmd);
        let end = process::supervise(process::spawn_tied(cmd)?, self.cfg.timeout, cancel)?;
        if let Some(why) = self.why_failed(&shown, end) {
            return Ok(Err(why));
        }
        let text = process::head_of_file(&out, RELEASE_BYTES);
        let _ = fs::remove_file(&out);
        Ok(Ok(text
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()))
    }

    /// A failed step: the commit does not build (remembered), or the disk
    /// filled up under it (not the commit's fault: nothing remembered).
    fn failed(&self, key: &BuildKey, why: String) -> Result<Attempt> {
        let log = self.staging(key).join("build.log");
        let text = tail_of_file(&log, LOG_TAIL_BYTES);
        let tail = process::tail(&text, LOG_TAIL_LINES);
        let errors = compiler_errors(&text);
        let detail = if errors.is_empty() || tail.contains(&errors) {
            format!("{why}\n--- build log tail ---\n{tail}")
        } else {
            format!("{why}\n--- compiler errors ---\n{errors}\n--- build log tail ---\n{tail}")
        };
        // The tool's message may itself be lost to the full disk the log is
        // on, so a disk left nearly full by the failed step counts too.
        if text.contains(NO_SPACE) || free_bytes(&self.cfg.work_dir) < NEARLY_FULL {
            let _ = fs::remove_dir_all(self.staging(key));
            return Ok(Attempt::NoSpace(detail));
        }
        self.cache.mark_unbuildable(key, &detail)?;
        let keep = self.cfg.work_dir.join("failed-builds").join(key.id());
        let _ = fs::remove_dir_all(&keep);
        if fs::create_dir_all(self.cfg.work_dir.join("failed-builds")).is_ok() {
            let _ = fs::rename(log.parent().unwrap_or(&log), &keep);
        }
        Ok(Attempt::Failed(Failure::new(
            FailureKind::BuildFailed,
            detail,
        )))
    }
}

/// Most lines of compiler errors a failure detail carries.
const ERROR_LINES: usize = 24;

/// The compiler's errors, from anywhere in `log`: under `make -j` the
/// error can stand far above the log's tail (a series' throw-away object
/// directory compiles its whole tree again, from ccache).
fn compiler_errors(log: &str) -> String {
    let mut errors = build_log::pick(log, build_log::Keep::Errors);
    errors.truncate(ERROR_LINES);
    errors.join("\n")
}

/// How one build attempt ended.
enum Attempt {
    Built(Box<BuiltKernel>),
    /// The commit does not build (a verdict on the kernel).
    Failed(Failure),
    /// The disk filled up; the detail says where.
    NoSpace(String),
}

/// strerror(ENOSPC), as the compiler, the linker and make's tools print it.
const NO_SPACE: &str = "No space left on device";

/// Free bytes under which a failed build step is taken for a full disk:
/// less than a compiler's or linker's output file.
const NEARLY_FULL: u64 = 1 << 20;

fn append(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    fs::File::options()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| AgentError::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests;
