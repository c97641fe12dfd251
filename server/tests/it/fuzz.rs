//! Hostile result uploads: the body as the server reads it (JSON into
//! `ResultUpload`, then `jobs::results::validate`). No panic, no hang; what
//! validation accepts can be stored and compared. `cargo test` runs a few
//! cases; `scripts/fuzz SECS` runs it for SECS seconds.

use kbot_api::agent::ResultUpload;
use kbot_core::metrics::is_storable_name;
use kbot_fuzz::{hostile_text, run};
use kbot_server::jobs::results::validate;
use proptest::prelude::*;

/// A number as JSON text, including literals that parse to infinity.
fn number_literal() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<f64>()
            .prop_filter("finite", |v| v.is_finite())
            .prop_map(|v| format!("{v:e}")),
        any::<i64>().prop_map(|v| v.to_string()),
        prop::sample::select(vec![
            "1e999",
            "-1e999",
            "1e-999",
            "-0",
            "0.0",
            "18446744073709551616",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "4.9e-324",
        ])
        .prop_map(str::to_string),
    ]
}

fn metric_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9._/-]{1,40}",
        Just(String::new()),
        "[a-z]{300,600}",
        hostile_text(60),
    ]
}

/// An upload body written as JSON text, so the number literals are exact.
fn body() -> impl Strategy<Value = String> {
    let metrics = prop::collection::vec((metric_name(), number_literal()), 0..12);
    let text = prop_oneof![hostile_text(200), Just(String::new())];
    (metrics, text.clone(), text, any::<i64>(), any::<i64>()).prop_map(
        |(metrics, raw, kernel, started, finished)| {
            let metrics: Vec<String> = metrics
                .iter()
                .map(|(n, v)| format!("{}:{v}", serde_json::Value::String(n.clone())))
                .collect();
            format!(
                r#"{{"metrics":{{{}}},"raw_output":{},"console":null,"kconfig":null,"kernel_release":{},"tuning":{{}},"started_at":{started},"finished_at":{finished}}}"#,
                metrics.join(","),
                serde_json::Value::String(raw),
                serde_json::Value::String(kernel),
            )
        },
    )
}

fn check(text: &str) -> Result<(), proptest::test_runner::TestCaseError> {
    let Ok(upload) = serde_json::from_str::<ResultUpload>(text) else {
        return Ok(());
    };
    if validate(&upload).is_ok() {
        for (name, value) in &upload.metrics {
            prop_assert!(is_storable_name(name), "{name:?} accepted");
            prop_assert!(value.is_finite(), "{name} = {value} accepted");
        }
        prop_assert!(upload.finished_at >= upload.started_at);
    }
    Ok(())
}

#[test]
fn upload_validation_survives_hostile_bodies() {
    run("upload_body", body(), |text| check(&text));
}

#[test]
fn upload_validation_survives_any_text() {
    run("upload_text", hostile_text(2048), |text| check(&text));
}
