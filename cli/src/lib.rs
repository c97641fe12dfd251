//! The `kbot-server` command line: [`cli`] parses and runs it (serve,
//! migrate and the admin commands through the server library), [`user`]
//! holds the user commands that go through the REST API.

pub mod cli;
pub mod error;
mod output;
pub mod renamed;
pub mod user;
