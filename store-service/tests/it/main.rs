//! Store service tests against real Redis processes on free ports.

mod auth;
mod bad_input;
mod cli;
mod commits;
mod committed;
mod common;
mod connections;
mod edges;
mod guard;
mod hits;
mod logs;
mod outage;
mod overrides;
mod parity;
mod protocols;
mod receipts;
mod replay;
mod resharding;
mod roles;
mod scopes;
mod shutdown;
mod suite;
mod traces;
mod wire_compat;
