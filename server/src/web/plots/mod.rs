//! Plots the dashboard draws on the server, as inline SVG: no JavaScript,
//! readable without colour (shapes and labels), every text escaped.

pub mod axis;
pub mod bisection;
pub mod samples;
pub mod strip;
pub mod svg;
pub mod trend;
