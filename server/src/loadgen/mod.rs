//! The load tool behind `kbot-load`: simulated agents against a running server.

pub mod seed;
