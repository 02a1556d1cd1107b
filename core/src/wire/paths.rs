//! The store's endpoints, spelled once for the filter, the store and the tests.

/// One hook's hit ([`super::HitRequest`] → [`super::HitReply`]).
pub const HIT_PATH: &str = "/v1/hit";
/// Several hooks' hits in one call (see [`crate::wire::batch`]).
pub const HITS_PATH: &str = "/v1/hits";
/// A batch of settle operations ([`super::SettleRequest`]).
pub const SETTLE_PATH: &str = "/v1/settle";
/// An operator's bucket reset ([`super::ResetRequest`]).
pub const RESET_PATH: &str = "/v1/reset";
/// The fleet override list (`GET`, paged).
pub const OVERRIDES_PATH: &str = "/v1/overrides";
/// One tenant's override: this prefix and the tenant (`PUT`, `DELETE`).
pub const OVERRIDE_PREFIX: &str = "/v1/overrides/";
