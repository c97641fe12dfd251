//! The programs a job file may name, their options, and how an atomic job
//! becomes command lines.
//!
//! Program names and option names follow LKP (`programs/<name>/run` header
//! comments), restricted to what kbot can run: the pipe workloads. A job's
//! program key must be one of [`PROGRAMS`]; its options (inside the program
//! hash or at the top level of the job, as LKP allows) must be among that
//! program's [`OptionSpec`]s; `cpufreq_governor` is LKP's one setup program
//! with a scalar value that kbot honours ([`SETUP_PROGRAMS`]).
//!
//! [`kbot_bench_invocations`] maps an atomic job and its resolved parameters
//! (see [`crate::job::AtomicJob::resolve`]) to `kbot-bench` argv vectors as
//! `workloads/README.md` specifies; [`upstream_invocations`] gives the
//! upstream tool's command line (as LKP runs it) and the parser
//! ([`crate::parsers::Tool`]) that reads its output.
//!
//! `table.rs` holds the table, `argv.rs` the command lines.

pub(crate) mod argv;
pub(crate) mod table;

pub use argv::{
    guest_invocations, kbot_bench_invocations, upstream_invocations, Invocation, Repeat,
};
pub use table::{
    lookup, option_spec, program_names, OptionSpec, ProgramSpec, ValueKind, PROGRAMS,
    SETUP_PROGRAMS,
};
