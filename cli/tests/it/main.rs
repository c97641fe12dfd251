//! kbot-cli's integration tests, one binary: each runs the real
//! `kbot-server` binary (run one area with `cargo test -p kbot-cli --test it
//! AREA::`). The harness is `kbot-testkit`.

mod configuration;
mod server_crash;
mod user_cli;
