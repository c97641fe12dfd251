//! `kbot-agent run JOBFILE`: one job on this machine without a server, its
//! metrics printed (to reproduce a report); `kbot-agent build`: one kernel.

use kbot_api::agent::{KconfigSpec, LeasedJob, RepoSpec};
use kbot_core::job::parse_job_file;

use crate::config::{AgentArgs, BackendArg, BuildArgs, RunArgs};
use crate::error::{AgentError, Result};
use crate::outcome::Outcome;
use crate::process::Cancel;

pub async fn run(args: &AgentArgs, run: &RunArgs) -> Result<()> {
    let jobs = leased_jobs(args, run)?;
    let runner = std::sync::Arc::new(crate::job_runner(args)?);
    let mut failed = 0;
    for job in jobs {
        let r = runner.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let on_state = |state: kbot_api::agent::JobState, detail: &str| {
                eprintln!("[{}] {detail}", state.as_str())
            };
            r.run(&job, &Cancel::new(), &on_state, None)
        })
        .await
        .map_err(|e| AgentError::Config(format!("job task: {e}")))??;
        match outcome {
            Outcome::Success(res) if run.json => {
                let text = serde_json::to_string_pretty(&res.metrics)
                    .map_err(|e| AgentError::parse("metrics", e.to_string()))?;
                println!("{text}");
            }
            Outcome::Success(res) => {
                for (k, v) in &res.metrics {
                    println!("{k} {v}");
                }
                for (k, v) in &res.tuning {
                    eprintln!("tuning {k}: {v}");
                }
            }
            Outcome::Failed(f) => {
                failed += 1;
                eprintln!("job failed ({:?}):\n{}", f.kind, f.detail);
            }
            Outcome::Rebooting => {
                eprintln!("rebooting into the built kernel; the agent daemon finishes the job")
            }
        }
    }
    if failed > 0 {
        return Err(AgentError::Command {
            command: "kbot-agent run".into(),
            detail: format!("{failed} job(s) failed"),
        });
    }
    Ok(())
}

/// Builds the kernel `args` names (or finds it in the build cache) and
/// prints the path of its image.
pub async fn build(agent: &AgentArgs, args: BuildArgs) -> Result<()> {
    let builder = crate::builder(agent)?;
    let kconfig = KconfigSpec::make_target(&args.kconfig);
    let key =
        crate::kernel_build::server_key(&args.commit, &kconfig, &args.compiler, builder.arch());
    let repo = RepoSpec {
        name: repo_name(&args.repo),
        url: args.repo,
        series_url: None,
    };
    let built = tokio::task::spawn_blocking(move || builder.kernel(&repo, &key, &Cancel::new()))
        .await
        .map_err(|e| AgentError::Config(format!("build task: {e}")))??;
    match built {
        Ok(kernel) => {
            println!("{}", kernel.image().display());
            Ok(())
        }
        Err(f) => Err(AgentError::Command {
            command: "kbot-agent build".into(),
            detail: f.detail,
        }),
    }
}

/// The jobs of a JOBFILE: a leased job (JSON) as is, or each atomic job of
/// a YAML job file resolved against this agent's machine.
fn leased_jobs(args: &AgentArgs, run: &RunArgs) -> Result<Vec<LeasedJob>> {
    let text = std::fs::read_to_string(&run.jobfile)
        .map_err(|e| AgentError::io(format!("reading {}", run.jobfile.display()), e))?;
    if let Ok(job) = serde_json::from_str::<LeasedJob>(&text) {
        return Ok(vec![job]);
    }
    let hw = crate::fingerprint(args)?;
    let needs_kernel = args.backend != BackendArg::Host;
    let (repo, commit) = match (&run.repo, &run.commit) {
        (Some(r), Some(c)) => (r.clone(), c.clone()),
        _ if needs_kernel => {
            return Err(AgentError::Config(
                "the qemu and kexec backends need --repo and --commit".into(),
            ))
        }
        _ => (String::new(), String::new()),
    };
    let fragment = match &run.kconfig_fragment {
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| AgentError::io(format!("reading {}", p.display()), e))?,
        None => String::new(),
    };
    let mut out = Vec::new();
    for (i, job) in parse_job_file(&text)?.into_iter().enumerate() {
        let resolved = job.resolve(&hw)?;
        let kconfig = KconfigSpec {
            name: job.kconfig.clone(),
            base: Some(if fragment.is_empty() {
                job.kconfig.clone()
            } else {
                run.kconfig_base.clone()
            }),
            fragment: fragment.clone(),
            full: None,
        };
        out.push(LeasedJob {
            job_id: i64::try_from(i).unwrap_or(0),
            submission_id: 0,
            attempt: 1,
            lease_expires_at: 0,
            heartbeat_interval_secs: 60,
            repo: RepoSpec {
                name: repo_name(&repo),
                url: repo.clone(),
                series_url: None,
            },
            commit: commit.clone(),
            run_index: 0,
            result_path: job.result_path(&commit),
            job,
            resolved,
            kconfig,
        });
    }
    Ok(out)
}

fn repo_name(url: &str) -> String {
    let last = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("repo");
    last.trim_end_matches(".git").to_string()
}
