//! The node's shared-data layout: every key the filter reads or writes.
//!
//! One Envoy process keeps one shared-data map per `vm_id`; every worker's
//! filter meets the others there. The filter pre-creates all of these (and
//! the node-bucket ring) in `on_configure`, so every compare-and-swap on them
//! carries a real version.

/// Node buckets live in a fixed ring of this many keys, whatever tenant names arrive.
pub const BUCKET_SLOTS: usize = 1024;
pub const BUCKET_PREFIX: &str = "ankusa:nb:";
pub const BREAKER_KEY: &str = "ankusa:breaker";
/// The last configuration's tenant limits (JSON), to spot a reload that changed one.
pub const LIMITS_KEY: &str = "ankusa:limits";
/// When the degraded warning was last logged (ms, u64 LE): once a minute node-wide.
pub const WARNED_KEY: &str = "ankusa:warned";
/// The settle shared queue's name (one per `vm_id`).
pub const SETTLE_QUEUE: &str = "ankusa_settle";
/// Settle operations queued and not yet drained, node-wide (u64 LE).
pub const DEPTH_KEY: &str = "ankusa:settle:depth";
/// The earliest ms the next settle batch may leave (u64 LE).
pub const LEASE_KEY: &str = "ankusa:settle:lease";

/// The node's copy of the fleet override list (JSON `{"overrides": [...]}`).
pub const LIST_KEY: &str = "ankusa:overrides:list";
/// When that list was fetched (ms, u64 LE) and how many it holds (u64 LE).
pub const LIST_STAMP_KEY: &str = "ankusa:overrides:stamp";
/// The earliest ms the next override poll may leave (u64 LE).
pub const LIST_LEASE_KEY: &str = "ankusa:overrides:lease";
/// Where the node is in the store's change log (JSON: epoch, version, and
/// whether a whole listing is under way).
pub const LIST_CURSOR_KEY: &str = "ankusa:overrides:cursor";
/// A whole listing's pages taken so far, kept apart until the last one
/// (JSON `{"overrides": [...]}`).
pub const LIST_STAGING_KEY: &str = "ankusa:overrides:staging";

/// The live edge count the store last reported (u64 LE; 0: never), see [`crate::fleet::edges`].
pub const EDGES_KEY: &str = "ankusa:fleet:edges";

/// The store's wire version as the node's workers last heard it (u64 LE;
/// 0: never), see [`crate::wire::version::StoreWire::of_node`]: settle
/// batches leave from any worker, so what they may carry is the node's.
pub const STORE_WIRE_KEY: &str = "ankusa:fleet:store_wire";

/// Every fixed key (the bucket ring aside).
pub const FIXED: [&str; 12] = [
    BREAKER_KEY,
    LIMITS_KEY,
    WARNED_KEY,
    DEPTH_KEY,
    LEASE_KEY,
    LIST_KEY,
    LIST_STAMP_KEY,
    LIST_LEASE_KEY,
    LIST_CURSOR_KEY,
    LIST_STAGING_KEY,
    EDGES_KEY,
    STORE_WIRE_KEY,
];
