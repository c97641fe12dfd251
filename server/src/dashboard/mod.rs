//! The dashboard's pages that span features: the overview (`/`), the
//! machines and a job's log, the trends of watched branches, and a
//! submission's page with its neighbours in the features above it. Each
//! feature's own pages live in its `pages` module; all of them render
//! through [`crate::web`].

mod fleet;
pub mod machines;
pub mod neighbours;
pub mod overview;
pub mod profiles;
pub mod trends;
mod trends_data;
