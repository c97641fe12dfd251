//! Lists: the robot reads the kernel's mailing lists, puts the patch
//! series posted there together, tests them, and answers in their threads.
//!
//! The pure layers are here: a subject's bracket words ([`subject`]), one
//! raw message's fields, diff and robot commands ([`message`]), and series
//! from the messages' metadata ([`assemble`]).

pub mod assemble;
pub mod message;
pub mod subject;
