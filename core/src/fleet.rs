//! What the edges of a fleet share through the store.
//!
//! - [`breaker`]: the node-wide fleet breaker (closed, open, probing) in one shared-data value.
//! - [`edges`]: the live edge count the store last reported, kept in the node's shared data.
//! - [`overrides`]: fleet overrides set at runtime, the merge with the configuration, and the
//!   node's polled copy of the list (poll lease, answer checks, staleness, size cap).
//! - [`token`]: the bearer token edges present to the store, and its constant-time check.

pub mod breaker;
pub mod edges;
pub mod overrides;
pub mod token;
