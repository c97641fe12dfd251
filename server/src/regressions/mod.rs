//! Regressions: what the robot found and what people decided about it.
//!
//! A regression is a KPI that kbot called `different` in the bad direction
//! on a user or watch pair ([`crate::bisect::regressed_kpi`]). It is
//! recorded in the transaction that records the pair's verdict, with the
//! bisection it starts (a range) or the report it writes (adjacent commits,
//! or bisection off); a bisection's report is linked when the bisection
//! writes it. Its triage state (`new` until someone changes it, `duplicate`
//! when the bisection finds the patch reported before) and every change,
//! with who and when, are kept (migration 0010).

use kbot_api::regressions::RegressionRow;

use crate::access::Reader;
use crate::error::{Error, Result};
use crate::mail::outbox;

pub mod pages;
pub mod routes;
mod store;

pub use store::{
    bisection_moved, change_in, duplicate_refusal, find_target, get, history, link_report, list,
    lock_duplicates, mark_by_robot, mark_duplicate, record, robot_duplicate_of, set_state, Filter,
    HistoryRow, NewRegression, TriageState,
};

/// The triage states: stored value and what the dashboard calls it.
pub const STATES: [(&str, &str); 7] = [
    (TriageState::New.as_str(), "new"),
    (TriageState::Confirmed.as_str(), "confirmed"),
    (TriageState::Reported.as_str(), "reported"),
    (TriageState::Fixed.as_str(), "fixed"),
    (TriageState::Invalid.as_str(), "invalid"),
    (TriageState::WontFix.as_str(), "won't fix"),
    (TriageState::Duplicate.as_str(), "duplicate"),
];

/// The dashboard's name of a stored state.
pub fn state_label(state: &str) -> &str {
    STATES
        .iter()
        .find(|(value, _)| *value == state)
        .map_or(state, |(_, label)| label)
}

/// `row` as `reader` may see it: the Message-ID of a report that is not
/// public yet only for a signed-in reader ([`outbox::readable`]).
pub fn for_reader(mut row: RegressionRow, reader: Reader) -> RegressionRow {
    let readable = match row.report_state {
        Some(state) => outbox::readable(reader, state),
        None => outbox::sees_all(reader),
    };
    if !readable {
        row.report_message_id = None;
    }
    row
}

/// The triage state `text` names; a clear error for one that is none.
pub fn parse_state(text: &str) -> Result<TriageState> {
    TriageState::parse(text).ok_or_else(|| Error::BadRequest(format!("no triage state {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triage_state_is_parsed_once_with_a_clear_error() {
        assert_eq!(parse_state("wont_fix").ok(), Some(TriageState::WontFix));
        let err = parse_state("bogus").expect_err("no such state");
        assert_eq!(err.to_string(), "no triage state \"bogus\"");
        assert_eq!(err.code(), "bad_request");
    }
}
