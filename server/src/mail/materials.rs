//! The reproduction link of a report (`/archive/<YYYYMMDD>/<message-id>`):
//! the job file, the atomic job, the kernel config, the command that reruns
//! the comparison, and where the raw results are, as one plain-text page.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::error::Error;
use crate::state::AppState;

/// What a report's materials are made of.
#[derive(sqlx::FromRow)]
struct Materials {
    id: i64,
    atomic_job_id: Option<i64>,
    job_file: String,
    name: String,
    url: String,
    base_sha: String,
    head_sha: String,
    spec: Option<String>,
    kconfig: Option<String>,
}

/// `GET /archive/{day}/{message_id}`
pub async fn materials(
    State(state): State<AppState>,
    Path((_day, message_id)): Path<(String, String)>,
) -> Result<Response, Error> {
    let row = sqlx::query_as::<_, Materials>(
        "SELECT s.id, o.atomic_job_id, s.job_file, r.name, r.url, bc.sha AS base_sha, hc.sha AS head_sha, \
             aj.spec, aj.kconfig \
         FROM report_outbox o JOIN submissions s ON s.id = o.submission_id \
         JOIN repos r ON r.id = s.repo_id \
         JOIN commits bc ON bc.id = s.base_commit_id JOIN commits hc ON hc.id = s.head_commit_id \
         LEFT JOIN atomic_jobs aj ON aj.id = o.atomic_job_id WHERE o.message_id = $1",
    )
    .bind(message_id.trim_matches(['<', '>']))
    .fetch_optional(state.db.read())
    .await?
    .ok_or_else(|| Error::NotFound {
        what: "report materials",
        key: message_id.clone(),
    })?;
    let submission_id = row.id;
    let kconfig_name = row.kconfig;
    let kconfig = match &kconfig_name {
        Some(name) => kconfig_text(&state, name).await?,
        None => "(unknown)".to_owned(),
    };
    let public = state
        .config
        .mail
        .report
        .materials_url
        .trim_end_matches("/archive")
        .to_owned();
    let text = format!(
        "Materials to reproduce report <{message_id}>\n\n\
         == Repository\n{repo} {url}\nbase {base}\nhead {head}\n\n\
         == Job file (job.yaml)\n{job_file}\n\n\
         == Atomic job compared\n{spec}\n\n\
         == Kernel config {kname}\n{kconfig}\n\n\
         == Rerun the comparison on a kbot server\n\
         kbot-server submit --repo {repo} --job job.yaml --base {base} --head {head}\n\n\
         == Reproduce one run with one script\n{repro}\n\
         == Raw results (per run: metrics, kernel release, tuning; raw output and console as artifacts)\n\
         {public}/api/v1/submissions/{submission_id}/results\n{public}/submissions/{submission_id}\n",
        repro = repro_lines(&state, row.atomic_job_id, &public).await?,
        repo = row.name,
        url = crate::repos::public_tree(&state.config.mail, &row.name, &row.url),
        base = row.base_sha,
        head = row.head_sha,
        job_file = row.job_file.trim_end(),
        spec = row.spec.unwrap_or_default().trim_end(),
        kname = kconfig_name.as_deref().unwrap_or(""),
    );
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// The script of the first reproducible run of each side of the compared
/// job ([`crate::jobs::repro`]), or why there is none.
async fn repro_lines(
    state: &AppState,
    atomic_job_id: Option<i64>,
    public: &str,
) -> Result<String, Error> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT j.id, j.side, r.tuning FROM jobs j JOIN results r ON r.job_id = j.id \
         WHERE j.atomic_job_id = $1 ORDER BY j.run_index",
    )
    .bind(atomic_job_id)
    .fetch_all(state.db.read())
    .await?;
    let mut lines = String::new();
    for side in ["head", "base"] {
        let run = rows
            .iter()
            .find(|(_, s, tuning)| s == side && crate::jobs::repro::reproducible(tuning));
        if let Some((job, _, _)) = run {
            lines.push_str(&format!(
                "{side} (job {job}): curl -fsS {public}/api/v1/jobs/{job}/repro > repro-{job}.sh && sh repro-{job}.sh\n"
            ));
        }
    }
    if lines.is_empty() {
        lines.push_str(
            "(none: these runs were not made in QEMU guests whose initramfs the server keeps)\n",
        );
    }
    Ok(lines)
}

/// A stored kernel config as text: the make target and fragment, or a note
/// that it is a plain make target.
async fn kconfig_text(state: &AppState, name: &str) -> Result<String, Error> {
    let row: Option<(Option<String>, String)> =
        sqlx::query_as("SELECT base, fragment FROM kconfigs WHERE name = $1")
            .bind(name)
            .fetch_optional(state.db.read())
            .await?;
    Ok(match row {
        Some((base, fragment)) => format!(
            "make {}\nthen merged on top:\n{}",
            base.unwrap_or_else(|| "(full .config)".into()),
            fragment
        ),
        None => format!("make {name}"),
    })
}
