//! The server's route table read from its source, so that a test that must
//! cover every route fails when a route is added without it.

use std::collections::BTreeSet;

const ROUTE_TABLE: &str = include_str!("../../server/src/routes.rs");

/// (method, path) of every `.route(...)` in server/src/routes.rs.
pub fn route_table() -> BTreeSet<(String, String)> {
    let code = ROUTE_TABLE
        .split("#[cfg(test)]")
        .next()
        .unwrap_or(ROUTE_TABLE);
    let mut out = BTreeSet::new();
    for call in code.split(".route(").skip(1) {
        let call = call.split("\n}").next().unwrap_or(call);
        let Some((before, rest)) = call.split_once('"') else {
            continue;
        };
        let Some((literal, after)) = rest.split_once('"') else {
            continue;
        };
        let path = if before.contains("api(") {
            format!("{}{literal}", kbot_api::API_PREFIX)
        } else {
            literal.to_string()
        };
        for method in ["get", "post", "put", "delete", "patch"] {
            if after.contains(&format!("{method}(")) {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}
