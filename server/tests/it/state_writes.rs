//! One writer of the lifecycle state: no product code outside
//! `jobs/lifecycle.rs` changes `jobs.state`, `submissions.state` or
//! `in_flight`, or an atomic job's pins (`tbox_group`,
//! `preferred_agent_id`) or settlement (`settled_at`). The test reads every
//! `UPDATE` of those tables in `server/src` (comments and `#[cfg(test)]`
//! modules left out, as the layering test reads imports) and fails naming
//! the file and the column.

use std::path::Path;

use crate::layering::product_sql;

/// (table, columns only `jobs::lifecycle` writes).
const OWNED: &[(&str, &[&str])] = &[
    ("jobs", &["state"]),
    ("submissions", &["state", "in_flight"]),
    (
        "atomic_jobs",
        &["tbox_group", "preferred_agent_id", "settled_at"],
    ),
];

const WRITER: &str = "jobs/lifecycle.rs";

/// The columns the `SET` clause right after each `UPDATE table SET` names.
fn set_columns<'a>(code: &'a str, table: &str) -> Vec<&'a str> {
    let needle = format!("UPDATE {table} SET ");
    let mut out = Vec::new();
    for (at, _) in code.match_indices(&needle) {
        let rest = &code[at + needle.len()..];
        let end = [" WHERE ", " RETURNING ", "\""]
            .iter()
            .filter_map(|stop| rest.find(stop))
            .min()
            .unwrap_or(rest.len());
        for assignment in top_level(&rest[..end]) {
            let column = assignment.split('=').next().unwrap_or_default();
            let column = column.trim().trim_start_matches('\\').trim();
            if !column.is_empty() {
                out.push(column);
            }
        }
    }
    out
}

/// `text` split at the commas outside parentheses.
fn top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[test]
fn only_the_lifecycle_writes_job_submission_and_pin_state() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    let mut seen = 0;
    for file in kbot_testkit::files_under(&src, Some("rs")) {
        let rel = file.strip_prefix(&src).expect("under src");
        let rel = rel.to_string_lossy().replace('\\', "/");
        let code = product_sql(&file);
        for (table, columns) in OWNED {
            for column in set_columns(&code, table) {
                if !columns.contains(&column) {
                    continue;
                }
                seen += usize::from(rel == WRITER);
                if rel != WRITER {
                    broken.push(format!("{rel}: UPDATE {table} SET {column}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "written outside {WRITER}: {broken:#?}");
    // The scan finds the writer's own updates, or it reads nothing.
    assert!(seen >= 10, "only {seen} lifecycle writes found in {WRITER}");
}

#[test]
fn set_clauses_are_read_column_by_column() {
    let code = "\"UPDATE jobs SET state = 'failed', failure = $1 WHERE id = $2\" \
                \"UPDATE atomic_jobs SET tbox_group = COALESCE(tbox_group, $1) WHERE id = $3\"";
    assert_eq!(set_columns(code, "jobs"), ["state", "failure"]);
    assert_eq!(set_columns(code, "atomic_jobs"), ["tbox_group"]);
}
