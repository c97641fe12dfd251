//! Regression reports by e-mail (configured by [`crate::config::mail`]): composing and
//! queueing a report in the transaction that records the regression
//! ([`compose`]), the outbox table ([`outbox`]), SMTP delivery ([`smtp`]),
//! the sender task with retries and backoff ([`sender`]), the dashboard
//! pages and mbox download ([`pages`]), the reproduction materials
//! ([`materials`]), answers in a mailing-list thread ([`thread`]), one
//! mail per culprit across tbox groups and jobs ([`culprit`]), and the
//! answer in a report's thread when its patch lands in a tree ([`landed`]);
//! the recipient columns are typed in [`recipients`].
//!
//! An SMTP outage delays mail but loses none: the outbox row stays until the
//! relay accepts it. A report is never queued twice (its Message-ID derives
//! from the regression and is UNIQUE) nor sent twice by concurrent senders
//! (claims; see [`outbox`]).

pub mod compose;
pub mod culprit;
pub mod followers;
pub mod landed;
pub mod materials;
pub mod outbox;
pub mod pages;
pub mod recipients;
pub mod sender;
pub mod smtp;
pub mod thread;

pub use crate::config::mail as config;
pub use crate::config::{MailArgs, MailConfig, SmtpSettings};
pub use compose::{enqueue_bisection_report, enqueue_pair_report, Blame};
pub use sender::Sender;
