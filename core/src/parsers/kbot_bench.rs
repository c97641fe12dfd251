//! `kbot-bench <subcommand> --json`: `{"tool": …, "metrics": {name: number}, …}`.
//!
//! The metrics are already LKP-named; this checks that every value is a
//! finite number.

use super::{fail, nonempty, Metrics};
use crate::{Error, Result};

const TOOL: &str = "kbot-bench --json";

pub fn parse(output: &str) -> Result<Metrics> {
    let doc: serde_json::Value =
        serde_json::from_str(output.trim()).map_err(|e| fail(TOOL, format!("not JSON: {e}")))?;
    let metrics = doc
        .get("metrics")
        .and_then(|m| m.as_object())
        .ok_or_else(|| fail(TOOL, "no \"metrics\" object"))?;
    let mut m = Metrics::new();
    for (name, value) in metrics {
        if !crate::metrics::is_storable_name(name) {
            return Err(fail(TOOL, format!("metric name {name:?} cannot be stored")));
        }
        let v = value
            .as_f64()
            .ok_or_else(|| fail(TOOL, format!("metric {name:?} is not a number: {value}")))?;
        if !v.is_finite() {
            return Err(Error::NonFiniteMetric { name: name.clone() });
        }
        m.insert(name.clone(), v);
    }
    nonempty(TOOL, m)
}
