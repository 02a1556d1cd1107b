//! Store service tests against real Redis processes on free ports.

mod bad_input;
mod cli;
mod common;
mod outage;
mod parity;
mod protocols;
mod shutdown;
mod suite;
