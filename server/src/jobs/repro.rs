//! One run, reproduced anywhere: `GET /api/v1/jobs/{id}/repro` writes a
//! shell script that fetches the run's commit, builds its kernel with the
//! run's own `.config`, downloads the initramfs the run booted
//! ([`super::initramfs`]), boots it with the run's QEMU command line, and
//! sends the guest's results channel to `POST /api/v1/jobs/{id}/repro/check`,
//! which reads it as the agent did ([`kbot_core::guest`]) and sets each metric
//! beside the run's. On an icount clock the two agree to the last digit.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use kbot_api::submissions::Side;
use kbot_core::conditions;
use kbot_core::job::AtomicJob;
use kbot_core::machine::{kernel_image, KernelImage};
use kbot_core::text::sh_quote;

use crate::error::{Error, Result};
use crate::state::AppState;

/// What the script and the check need of one finished run.
#[derive(sqlx::FromRow)]
struct RunRow {
    job_id: i64,
    submission_id: i64,
    #[sqlx(try_from = "String")]
    side: Side,
    run_index: i64,
    sha: String,
    repo_name: String,
    repo_url: String,
    spec: String,
    kconfig: String,
    compiler: String,
    tuning: String,
    metrics: String,
    kconfig_path: Option<String>,
    kernel_release: String,
    agent_id: Option<i64>,
}

async fn load(state: &AppState, job_id: i64) -> Result<RunRow> {
    sqlx::query_as(
        "SELECT j.id AS job_id, j.submission_id, j.side, j.run_index, c.sha, \
             r.name AS repo_name, r.url AS repo_url, a.spec, a.kconfig, a.compiler, \
             res.tuning, res.metrics, res.kconfig_path, res.kernel_release, res.agent_id \
         FROM jobs j JOIN atomic_jobs a ON a.id = j.atomic_job_id \
         JOIN submissions s ON s.id = j.submission_id JOIN repos r ON r.id = s.repo_id \
         JOIN commits c ON c.id = j.commit_id JOIN results res ON res.job_id = j.id \
         WHERE j.id = $1",
    )
    .bind(job_id)
    .fetch_optional(state.db.read())
    .await?
    .ok_or_else(|| Error::not_found("finished run", job_id))
}

/// Whether a run with this stored tuning map has a script: it records the
/// QEMU line and the initramfs it booted.
pub fn reproducible(tuning: &str) -> bool {
    serde_json::from_str::<BTreeMap<String, String>>(tuning).is_ok_and(|t| {
        t.contains_key(conditions::QEMU_ARGV) && t.contains_key(conditions::INITRAMFS_SHA256)
    })
}

/// A run as its script reproduces it.
#[derive(Debug, Clone)]
pub struct Repro {
    pub job_id: i64,
    pub submission_id: i64,
    pub side: Side,
    pub run_index: i64,
    pub commit: String,
    pub testcase: String,
    pub kconfig: String,
    pub compiler: String,
    /// The `.config` the run's kernel was built with.
    pub config: String,
    /// `uname -m` of the guest.
    pub guest_arch: String,
    pub image: KernelImage,
    /// QEMU's arguments with the placeholders of [`conditions::QEMU_ARGV`].
    pub qemu_argv: Vec<String>,
    pub initramfs_sha256: String,
    pub clock: String,
    /// Where the script fetches the commit.
    pub git_url: String,
    /// The server's public URL.
    pub server: String,
}

impl Repro {
    /// The run `row` as a [`Repro`], or why it cannot be reproduced.
    fn of(row: RunRow, config: Option<String>, git_url: String, server: String) -> Result<Repro> {
        let tuning: BTreeMap<String, String> = serde_json::from_str(&row.tuning)
            .map_err(|e| Error::Conflict(format!("the run's tuning is unreadable: {e}")))?;
        let job: AtomicJob = serde_json::from_str(&row.spec)
            .map_err(|e| Error::Conflict(format!("the stored atomic job is unreadable: {e}")))?;
        let not = |what: &str| {
            Error::Conflict(format!(
                "run {} cannot be reproduced by a script: {what} (only runs in QEMU guests of \
                 agents that share their initramfs can)",
                row.job_id
            ))
        };
        let argv_json = tuning
            .get(conditions::QEMU_ARGV)
            .ok_or_else(|| not("it records no QEMU command line"))?;
        let qemu_argv: Vec<String> = serde_json::from_str(argv_json)
            .map_err(|_| not("its QEMU command line is unreadable"))?;
        let initramfs_sha256 = tuning
            .get(conditions::INITRAMFS_SHA256)
            .filter(|s| super::initramfs::is_sha256(s))
            .ok_or_else(|| not("its initramfs was not stored with the server"))?
            .clone();
        let config = config.ok_or_else(|| not("it kept no kernel .config"))?;
        let guest_arch = tuning
            .get(conditions::GUEST_ARCH)
            .cloned()
            .unwrap_or_default();
        let image = kernel_image(&guest_arch).ok_or_else(|| {
            not(&format!(
                "its guest arch {guest_arch:?} is not one kbot boots"
            ))
        })?;
        Ok(Repro {
            job_id: row.job_id,
            submission_id: row.submission_id,
            side: row.side,
            run_index: row.run_index,
            commit: row.sha,
            testcase: job.testcase,
            kconfig: row.kconfig,
            compiler: row.compiler,
            config,
            guest_arch,
            image,
            qemu_argv,
            initramfs_sha256,
            clock: tuning
                .get(conditions::QEMU_CLOCK)
                .cloned()
                .unwrap_or_default(),
            git_url,
            server,
        })
    }
}

/// `GET /api/v1/jobs/{id}/repro`: the script that reproduces a finished run.
#[utoipa::path(
    get,
    operation_id = "job_repro_script",
    path = "/api/v1/jobs/{id}/repro",
    tag = "runs",
    params(("id" = i64, Path, description = "The job id of a finished run")),
    responses(
        (status = 200, description = "A POSIX shell script", content_type = "text/x-shellscript"),
        (status = 409, description = "The run cannot be reproduced by a script (why)", body = kbot_api::ErrorBody),
        crate::error::QueryErrors,
    ),
)]
pub async fn script(
    State(state): State<AppState>,
    Path(job_id): Path<i64>,
) -> Result<impl IntoResponse> {
    let row = load(&state, job_id).await?;
    let config = match &row.kconfig_path {
        Some(path) => Some(state.artifacts.get(path).await?),
        None => None,
    };
    let mail = &state.config.mail;
    let git_url = crate::repos::public_tree(mail, &row.repo_name, &row.repo_url);
    let repro = Repro::of(row, config, git_url, mail.public_url.clone())?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/x-shellscript; charset=utf-8".to_owned(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("inline; filename=\"kbot-repro-{job_id}.sh\""),
            ),
        ],
        render(&repro),
    ))
}

/// `POST /api/v1/jobs/{id}/repro/check`: a reproduction's results channel,
/// read as the agent read the run's, each metric beside the run's.
#[utoipa::path(
    post,
    operation_id = "job_repro_check",
    path = "/api/v1/jobs/{id}/repro/check",
    tag = "runs",
    params(("id" = i64, Path, description = "The job id of the reproduced run")),
    request_body(content = String, content_type = "text/plain", description = "The guest's results channel"),
    responses(
        (status = 200, description = "The comparison, one metric a line, then `reproduced: yes|no|...`", content_type = "text/plain"),
        crate::error::QueryErrors,
    ),
)]
pub async fn check(
    State(state): State<AppState>,
    Path(job_id): Path<i64>,
    channel: String,
) -> Result<impl IntoResponse> {
    let row = load(&state, job_id).await?;
    let agent_id = row
        .agent_id
        .ok_or_else(|| Error::Conflict("the run's agent is gone: its CPUs are unknown".into()))?;
    let agent = crate::agents::load(state.db.read(), agent_id).await?;
    let stored: BTreeMap<String, f64> = serde_json::from_str(&row.metrics)
        .map_err(|e| Error::Conflict(format!("the run's metrics are unreadable: {e}")))?;
    let tuning: BTreeMap<String, String> = serde_json::from_str(&row.tuning).unwrap_or_default();
    let mut job: AtomicJob = serde_json::from_str(&row.spec)
        .map_err(|e| Error::Conflict(format!("the stored atomic job is unreadable: {e}")))?;
    job.tbox_group = Some(agent.tbox_group.clone());
    let resolved = job.resolve(&agent.hardware)?;
    let plan = kbot_core::programs::guest_invocations(&job, &resolved)?;
    let clock = tuning
        .get(conditions::QEMU_CLOCK)
        .cloned()
        .unwrap_or_default();
    let sections = kbot_core::guest::sections(&channel);
    let uname = kbot_core::guest::body(&sections, "uname");
    let kernel = format!(
        "kernel: {} (the run's: {})\n",
        uname.trim(),
        row.kernel_release
    );
    let text = match kbot_core::guest::executions(&sections) {
        Ok(runs) => compare(&kbot_core::guest::metrics(&plan, &runs)?, &stored, &clock),
        Err(why) => format!("the guest's output cannot be read: {why}\nreproduced: no\n"),
    };
    let text = kernel + &text;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}

/// The reproduction's metrics beside the run's, and the verdict line: on an
/// icount clock every metric must be equal; on a wall clock the numbers
/// vary from boot to boot and are only shown.
pub fn compare(got: &BTreeMap<String, f64>, run: &BTreeMap<String, f64>, clock: &str) -> String {
    let width = got.keys().map(String::len).max().unwrap_or(6).max(6);
    let mut out = format!(
        "{:width$}  {:>20}  {:>20}\n",
        "metric", "reproduced", "the run"
    );
    let mut differ = 0;
    for (name, value) in got {
        let (theirs, note) = match run.get(name) {
            Some(r) if r.to_bits() == value.to_bits() => (r.to_string(), "same"),
            Some(r) => {
                differ += 1;
                (r.to_string(), "differs")
            }
            None => ("-".to_string(), "not in the run"),
        };
        out.push_str(&format!(
            "{name:width$}  {value:>20}  {theirs:>20}  {note}\n"
        ));
    }
    let exact = clock.starts_with("icount");
    out.push_str(&match (exact, differ) {
        (_, _) if got.is_empty() => "reproduced: no (the workload gave no metrics)\n".to_string(),
        (true, 0) => {
            format!("reproduced: yes ({clock}: every metric equals the run's to the last digit)\n")
        }
        (true, n) => format!("reproduced: no ({clock}: {n} metric(s) differ from the run's)\n"),
        (false, _) => format!(
            "reproduced: compare by eye ({}: a wall clock varies from boot to boot)\n",
            if clock.is_empty() {
                "no clock recorded"
            } else {
                clock
            }
        ),
    });
    out
}

/// A QEMU argument for the script: quoted, the run's files replaced by the
/// script's variables.
fn qemu_word(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    let vars = [
        (conditions::QEMU_KERNEL, "\"$kernel\""),
        (conditions::QEMU_INITRD, "\"$initrd\""),
        (conditions::QEMU_RESULTS, "\"$results\""),
    ];
    while !rest.is_empty() {
        let next = vars
            .iter()
            .filter_map(|(p, v)| rest.find(p).map(|i| (i, *p, *v)))
            .min_by_key(|(i, _, _)| *i);
        match next {
            Some((i, placeholder, var)) => {
                if i > 0 {
                    out.push_str(&sh_quote(&rest[..i]));
                }
                out.push_str(var);
                rest = &rest[i + placeholder.len()..];
            }
            None => {
                out.push_str(&sh_quote(rest));
                rest = "";
            }
        }
    }
    out
}

/// The script of [`Repro`]: POSIX sh, every value it was made from quoted.
pub fn render(r: &Repro) -> String {
    let qemu = r.qemu_argv.first().map(String::as_str).unwrap_or("qemu");
    let qemu_args: Vec<String> = r.qemu_argv.iter().skip(1).map(|w| qemu_word(w)).collect();
    let config_end = "END_OF_KERNEL_CONFIG";
    format!(
        r#"#!/bin/sh
# kbot: reproduces run {run} of the {side} of submission {sid} (job {job}):
# {testcase} on commit {commit}, kconfig {kconfig}, {compiler}, an {arch} guest
# ({clock}).
#
# It fetches the commit, builds the kernel with the run's own .config,
# downloads the initramfs the run booted (static kbot-bench, busybox, /init,
# checked by SHA-256), boots it with the run's QEMU command line, and sends
# the guest's results to the server, which reads them as the agent read the
# run's and prints each metric beside the run's. On an icount clock they
# agree to the last digit, and only then does the script exit 0.
#
# Needs: git, make, {compiler}, flex, bison, bc, curl, sha256sum, {qemu_name}.
# Usage: sh kbot-repro-{job}.sh [DIR]     (default DIR: kbot-repro-{job})
# Env:   KBOT_REPRO_GIT     where to fetch the commit (a URL or a local
#                           repository; default the tree the run came from)
#        KBOT_REPRO_JOBS    make -j (default: nproc)
#        KBOT_REPRO_QEMU    the QEMU binary (default {qemu_q})
#        KBOT_TOKEN         a user token, for a server whose pages need one
set -eu
server={server}
job={job}
commit={commit}
git_url=${{KBOT_REPRO_GIT:-{git}}}
dir=${{1:-kbot-repro-{job}}}
say() {{ printf 'kbot-repro: %s\n' "$*" >&2; }}
# A server whose pages need signing in takes a user token.
get() {{
  if [ -n "${{KBOT_TOKEN:-}}" ]; then
    curl -fsS -H "Authorization: Bearer $KBOT_TOKEN" "$@"
  else
    curl -fsS "$@"
  fi
}}

mkdir -p "$dir/obj"
cd "$dir"

say "fetching $commit from $git_url"
if [ ! -d src ]; then
  if [ -d "$git_url" ]; then
    git clone -q --shared --no-checkout "$git_url" src
  else
    git init -q src
  fi
fi
if ! git -C src cat-file -e "$commit^{{commit}}" 2>/dev/null; then
  git -C src fetch -q --depth=1 "$git_url" "$commit" 2>/dev/null ||
    git -C src fetch -q "$git_url" "$commit"
fi
git -C src -c advice.detachedHead=false checkout -q --detach "$commit"

say "building the kernel with the run's .config ({kconfig})"
cat > obj/.config <<'{config_end}'
{config}{config_end}
cross=
[ "$(uname -m)" = {arch} ] || cross={cross}
cc={compiler}
case $cc in clang*) ;; *) cc="$cross$cc" ;; esac
hostcc={compiler}
mk() {{
  make -s -C src O="$PWD/obj" ARCH={make_arch} ${{cross:+CROSS_COMPILE=$cross}} \
    CC="$cc" HOSTCC="$hostcc" {build_env} "$@"
}}
mk olddefconfig
mk -j"${{KBOT_REPRO_JOBS:-$(nproc)}}" {target}
kernel=$PWD/obj/{image}

say "downloading the initramfs the run booted"
initrd=$PWD/initramfs.cpio
get -o "$initrd" "$server/api/v1/initramfs/{sha}"
echo "{sha}  $initrd" | sha256sum -c --quiet -

say "booting the kernel in QEMU (console in $PWD/console.log)"
results=$PWD/results.txt
rm -f "$results"
qemu=${{KBOT_REPRO_QEMU:-{qemu_q}}}
"$qemu" {args} </dev/null >console.log 2>&1 || {{
  say "QEMU failed; the console's end:"
  tail -n 30 console.log >&2
  exit 1
}}

say "the guest's results, read by $server"
answer=$(get -H 'Content-Type: text/plain' --data-binary @"$results" \
  "$server/api/v1/jobs/$job/repro/check")
printf '%s\n' "$answer"
case $answer in
  *"reproduced: yes"* | *"reproduced: compare by eye"*) exit 0 ;;
  *) exit 1 ;;
esac
"#,
        run = r.run_index,
        side = r.side,
        sid = r.submission_id,
        job = r.job_id,
        testcase = r.testcase,
        commit = r.commit,
        kconfig = r.kconfig,
        compiler = r.compiler,
        arch = r.guest_arch,
        clock = if r.clock.is_empty() {
            "no clock recorded"
        } else {
            &r.clock
        },
        qemu_name = qemu.rsplit('/').next().unwrap_or(qemu),
        qemu_q = sh_quote(qemu),
        server = sh_quote(&r.server),
        git = sh_quote(&r.git_url),
        config = ensure_newline(&r.config),
        cross = sh_quote(r.image.cross_compile),
        make_arch = r.image.make_arch,
        target = r.image.target,
        image = r.image.path,
        sha = r.initramfs_sha256,
        args = qemu_args.join(" "),
        build_env = kbot_core::machine::BUILD_ENV
            .iter()
            .map(|(k, v)| format!("{k}={}", sh_quote(v)))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn ensure_newline(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repro() -> Repro {
        Repro {
            job_id: 42,
            submission_id: 7,
            side: Side::Head,
            run_index: 0,
            commit: "a".repeat(40),
            testcase: "perf-bench-sched-pipe".into(),
            kconfig: "qemu-x86_64-ci".into(),
            compiler: "gcc-12".into(),
            config: "CONFIG_64BIT=y\n# a comment with 'quotes' and $vars\n".into(),
            guest_arch: "x86_64".into(),
            image: kernel_image("x86_64").expect("x86_64"),
            qemu_argv: vec![
                "qemu-system-x86_64".into(),
                "-kernel".into(),
                "@KERNEL@".into(),
                "-initrd".into(),
                "@INITRD@".into(),
                "-append".into(),
                "console=ttyS0 panic=-1".into(),
                "-serial".into(),
                "file:@RESULTS@".into(),
            ],
            initramfs_sha256: "b".repeat(64),
            clock: "icount shift=3,sleep=off".into(),
            git_url: "https://example.org/linux.git".into(),
            server: "http://127.0.0.1:8080".into(),
        }
    }

    #[test]
    fn qemu_words_keep_the_runs_files_as_variables() {
        assert_eq!(qemu_word("@KERNEL@"), "\"$kernel\"");
        assert_eq!(qemu_word("file:@RESULTS@"), "'file:'\"$results\"");
        assert_eq!(qemu_word("it's"), "'it'\\''s'");
        assert_eq!(
            qemu_word("path=@RESULTS@,x=@INITRD@"),
            "'path='\"$results\"',x='\"$initrd\""
        );
    }

    #[test]
    fn the_script_builds_boots_and_checks_the_run() {
        let s = render(&repro());
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains(&format!("commit={}\n", "a".repeat(40))));
        assert!(s.contains("git_url=${KBOT_REPRO_GIT:-'https://example.org/linux.git'}"));
        // The .config is a quoted here-document: `$vars` stay as written.
        assert!(s.contains(
            "cat > obj/.config <<'END_OF_KERNEL_CONFIG'\nCONFIG_64BIT=y\n# a comment with 'quotes' and $vars\nEND_OF_KERNEL_CONFIG\n"
        ));
        assert!(s.contains("ARCH=x86_64"));
        assert!(s.contains("mk -j\"${KBOT_REPRO_JOBS:-$(nproc)}\" bzImage"));
        assert!(s.contains("kernel=$PWD/obj/arch/x86/boot/bzImage"));
        assert!(s.contains(&format!("/api/v1/initramfs/{}\"", "b".repeat(64))));
        assert!(s.contains(
            "qemu=${KBOT_REPRO_QEMU:-'qemu-system-x86_64'}\n\"$qemu\" '-kernel' \"$kernel\" '-initrd' \"$initrd\" \
             '-append' 'console=ttyS0 panic=-1' '-serial' 'file:'\"$results\" </dev/null"
        ));
        assert!(s.contains("/api/v1/jobs/$job/repro/check"));
    }

    #[test]
    fn the_script_is_valid_sh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("repro.sh");
        std::fs::write(&path, render(&repro())).expect("write");
        let out = std::process::Command::new("sh")
            .arg("-n")
            .arg(&path)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn icount_runs_must_agree_to_the_last_digit() {
        let run: BTreeMap<String, f64> = [("a.ops".to_string(), 81234.5678901)].into();
        let same = compare(&run, &run, "icount shift=3,sleep=off");
        assert!(same.contains("reproduced: yes"), "{same}");
        assert!(same.contains("81234.5678901"), "{same}");
        let off: BTreeMap<String, f64> = [("a.ops".to_string(), 81234.5678902)].into();
        let differs = compare(&off, &run, "icount shift=3,sleep=off");
        assert!(
            differs.contains("differs") && differs.contains("reproduced: no"),
            "{differs}"
        );
        let wall = compare(&off, &run, "wall");
        assert!(wall.contains("reproduced: compare by eye"), "{wall}");
        assert!(compare(&BTreeMap::new(), &run, "icount").contains("reproduced: no"));
    }
}
