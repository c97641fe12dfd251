//! kbot-core: the code that the kbot server and agent share.
//!
//! Everything here is pure: no I/O, no clocks, no threads. Server and agent
//! depend on it for the job model, machine facts ([`machine::Hardware`]),
//! metric names, statistics and the typed errors ([`Error`]); the wire types
//! live in the `kbot-api` crate.

pub mod build_log;
pub mod conditions;
pub mod error;
pub mod guest;
pub mod job;
pub mod kcidb;
pub mod lkp;
pub mod machine;
pub mod metrics;
pub mod needs;
pub mod parsers;
pub mod profile;
pub mod programs;
pub mod report;
pub mod stats;
pub mod table;
pub mod text;
pub mod units;

pub use error::{Error, Result};
