//! kbot-server's integration tests, one binary: a module per area (run
//! one with `cargo test -p kbot-server --test it AREA::`). The harness is
//! `kbot-testkit`; `sim` is the simulated fleet the robot-loop tests share.
//!
//! One binary links the server and the harness once instead of once per
//! area. No test here changes process-wide state (environment, working
//! directory, signal dispositions, limits), so the areas share a process;
//! a test that must would get a binary of its own.

mod agent_protocol;
mod artifact_replicas;
mod bad_input;
mod bisection;
mod browser_session;
mod build_orders;
mod builds;
mod concurrent_leases;
mod culprit;
mod dashboard_browser;
mod dashboard_pages;
mod database_outage;
mod disk_full;
mod exposure;
mod float_binds;
mod fuzz;
mod git_mirror;
mod host_backend_honesty;
mod hostile_parameters;
mod kcidb;
mod layering;
mod lists;
mod mail_crash;
mod mail_delivery;
mod mail_regression;
mod migrations;
mod openapi;
mod profiles;
mod regressions;
mod repro;
mod scheduling;
mod schema_parity;
mod sim;
mod state_writes;
mod table_owners;
mod token_matrix;
mod user_api;
mod web_access;
