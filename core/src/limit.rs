//! How much a tenant may send, and how that is told.
//!
//! - [`gcra`]: the rate-limit arithmetic.
//! - [`limits`]: every numeric bound, shared by config and wire validation.
//! - [`share`]: a node's share of a fleet quota while it answers alone, priced exactly.
//! - [`ratelimit_headers`]: `RateLimit-Policy`/`RateLimit` (and legacy) header values from GCRA state.

pub mod gcra;
pub mod limits;
pub mod ratelimit_headers;
pub mod share;
