//! A submission's neighbours, for its page: the series, watch or bisection
//! that queued it, the bisections it started, the regressions filed from it
//! and the reports mailed about it. These live in the tables of features
//! above `submissions`, which only the dashboard reads; the submission page
//! itself just shows the links ([`crate::submissions::pages::submission`]).

use axum::extract::{Path, State};

use crate::access::Reader;
use crate::db::Db;
use crate::error::Result;
use crate::mail::outbox;
use crate::state::AppState;
use crate::submissions::pages as s;
use crate::web::{Link, PageResult};

/// `GET /submissions/{id}`: the submission's page with its neighbours.
pub async fn submission_page(
    State(state): State<AppState>,
    reader: Reader,
    Path(id): Path<i64>,
) -> PageResult {
    let links = of_submission(&state.db, id, reader).await?;
    s::submission(&state, id, links).await
}

/// Every neighbour of submission `id` that `reader` may see, in the order
/// a reader follows them: where it came from, then what came of it.
pub async fn of_submission(db: &Db, id: i64, reader: Reader) -> Result<Vec<Link>> {
    let mut links = origins(db, id).await?;
    links.extend(bisections(db, id).await?);
    links.extend(regressions(db, id).await?);
    links.extend(reports(db, id, reader).await?);
    Ok(links)
}

/// The series (whole or a build probe's prefix) or watch that queued it,
/// or queued the pair whose bisection it serves.
async fn origins(db: &Db, id: i64) -> Result<Vec<Link>> {
    let series: Vec<(i64, i64, String, String, i64)> = sqlx::query_as(
        "SELECT se.id, se.version, se.title, se.state, 0 FROM series se \
         WHERE se.submission_id = $1 OR se.submission_id IN \
             (SELECT origin_submission_id FROM bisections \
              WHERE probe_submission_id = $2 OR verify_submission_id = $3) \
         UNION ALL \
         SELECT se.id, se.version, se.title, se.state, p.part_index FROM series_build_probes p \
         JOIN series se ON se.id = p.series_id WHERE p.submission_id = $4 \
         ORDER BY 1",
    )
    .bind(id)
    .bind(id)
    .bind(id)
    .bind(id)
    .fetch_all(db.read())
    .await?;
    let mut links: Vec<Link> = series
        .into_iter()
        .map(|(series, version, title, state, part)| Link {
            rel: if part == 0 {
                "series"
            } else {
                "build probe of"
            },
            text: match part {
                0 => format!("series {series} v{version}: {title}"),
                n => format!("series {series} v{version} up to patch {n}: {title}"),
            },
            href: format!("/series/{series}"),
            state,
        })
        .collect();
    let watch: Option<(i64, String, String)> = sqlx::query_as(
        "SELECT w.id, w.branch, w.state FROM submissions s \
         JOIN watches w ON w.id = s.watch_id WHERE s.id = $1",
    )
    .bind(id)
    .fetch_optional(db.read())
    .await?;
    links.extend(watch.map(|(watch, branch, state)| Link {
        rel: "watch",
        text: format!("watch {watch} of {branch}"),
        href: String::from("/watches"),
        state,
    }));
    Ok(links)
}

/// Bisections it started, carries the probes of, or verifies; for the
/// last two, also the pair the bisection started from.
async fn bisections(db: &Db, id: i64) -> Result<Vec<Link>> {
    let rows: Vec<(i64, String, String, i64)> = sqlx::query_as(
        "SELECT id, metric, state, origin_submission_id FROM bisections \
         WHERE origin_submission_id = $1 OR probe_submission_id = $2 \
            OR verify_submission_id = $3 \
         ORDER BY id",
    )
    .bind(id)
    .bind(id)
    .bind(id)
    .fetch_all(db.read())
    .await?;
    let mut links = Vec::new();
    for (bisection, metric, state, origin) in rows {
        let serves = origin != id;
        links.push(Link {
            rel: if serves { "serves" } else { "bisection" },
            text: format!("bisection {bisection} of {metric}"),
            href: format!("/bisections/{bisection}"),
            state,
        });
        if serves {
            links.push(Link {
                rel: "which bisects",
                text: format!("submission {origin}"),
                href: format!("/submissions/{origin}"),
                state: String::new(),
            });
        }
    }
    Ok(links)
}

/// Regressions filed from its comparison.
async fn regressions(db: &Db, id: i64) -> Result<Vec<Link>> {
    let rows: Vec<(i64, String, String, Option<f64>)> = sqlx::query_as(
        "SELECT id, metric, state, change_pct FROM regressions \
         WHERE submission_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(db.read())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(regression, metric, state, change)| Link {
            rel: "regression",
            text: match change.filter(|c| c.is_finite()) {
                Some(c) => format!(
                    "regression {regression}: {metric} {}",
                    crate::comparisons::kpi_result::signed_pct(c)
                ),
                None => format!("regression {regression}: {metric}"),
            },
            href: format!("/regressions/{regression}"),
            state,
        })
        .collect())
}

/// Reports about it or about a bisection it started, where `reader` may see
/// them (a report not yet public is named to signed-in users only).
async fn reports(db: &Db, id: i64, reader: Reader) -> Result<Vec<Link>> {
    let rows: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT id, subject, state FROM report_outbox \
         WHERE submission_id = $1 \
            OR bisection_id IN (SELECT id FROM bisections WHERE origin_submission_id = $2) \
         ORDER BY id",
    )
    .bind(id)
    .bind(id)
    .fetch_all(db.read())
    .await?;
    Ok(rows
        .into_iter()
        .filter(|(_, _, state)| outbox::readable_text(reader, state))
        .map(|(report, subject, state)| Link {
            rel: "report",
            text: subject,
            // The id finds it as its Message-ID does, with nothing to escape.
            href: format!("/reports/{report}"),
            state,
        })
        .collect())
}
