//! Store service tests against real Redis processes on free ports.

mod bad_input;
mod common;
mod outage;
mod parity;
mod shutdown;
mod suite;
