//! kbot-core's integration tests, one binary: a module per area (run one
//! with `cargo test -p kbot-core --test it AREA::`). `common` holds the
//! seed report's samples that two areas read; the fixtures and the LKP job
//! tree stay in `tests/fixtures` and `tests/lkp-jobs`.

mod common;
mod function_stats;
mod fuzz;
mod job_files;
mod lkp_corpus;
mod metric_names;
mod module_graph;
mod parsers;
mod report_seed;
mod seed_report;
mod stats_verdict;
