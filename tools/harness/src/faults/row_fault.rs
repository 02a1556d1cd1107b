//! What the figures and the promise need to know of a row's fault, whether
//! it broke processes on loopback ([`super::Fault`]) or a Compose stack's
//! containers (`crate::compose::HostFault`).

pub trait RowFault {
    /// The row's name in the tables (`store-killed`).
    fn name(&self) -> &'static str;
    /// Why this fault may store an event twice, when it may.
    fn duplicates_reason(&self) -> &'static str;
    /// Whether the store's place is whole again the moment the fault heals:
    /// fleet answers must then resume within the breaker's open time plus a
    /// probe.
    fn heals_at_once(&self) -> bool;
    /// Whether Redis loses keys in this fault (buckets and claims), so a
    /// tenant's bucket may start full again.
    fn loses_redis_keys(&self) -> bool;
    /// How many edges' shares of a fleet quota the fleet may admit beyond
    /// it while this fault lasts, because edges answer some hooks alone
    /// (from their own buckets, each at its share) while the store answers
    /// the others from the fleet's (see [`super::metered::quota_and_shares`]):
    /// an edge cut off from the store while the others reach it, calls
    /// failing one by one while the rest get through.
    fn shares_beyond_quota(&self) -> u64 {
        0
    }
}
