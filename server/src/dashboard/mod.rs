//! The dashboard's pages that span features: the overview (`/`), the
//! machines and a job's log, and the trends of watched branches. Each
//! feature's own pages live in its `pages` module; all of them render
//! through [`crate::web`].

mod fleet;
pub mod machines;
pub mod overview;
pub mod trends;
mod trends_data;
