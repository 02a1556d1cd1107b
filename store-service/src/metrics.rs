//! The service's Prometheus metrics, in their own registry.

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    /// `ankusa_store_requests_total{endpoint,result}`.
    pub requests: IntCounterVec,
    /// `ankusa_store_redis_seconds`: one observation per Redis round trip.
    pub redis_seconds: Histogram,
    /// `ankusa_store_settle_batch_ops`: operations per settle flush.
    pub settle_batch_ops: Histogram,
    /// `ankusa_store_hits_per_call`: hits carried by one hit call (1 for `/v1/hit`).
    pub hits_per_call: Histogram,
    /// `ankusa_store_pipeline_round_trips_total`: one per pipeline sent to a node.
    pub pipeline_round_trips: IntCounter,
    /// `ankusa_store_settle_ops_total{op}`.
    pub settle_ops: IntCounterVec,
    /// `ankusa_store_errors_total{cause}`.
    pub errors: IntCounterVec,
    /// `ankusa_store_redis_up`: 1 while Redis answers the health probe.
    pub redis_up: IntGauge,
    /// `ankusa_store_unauthorized_total{reason}`: `/v1/*` calls refused, `missing` or `invalid` token.
    pub unauthorized: IntCounterVec,
    /// `ankusa_store_forbidden_total{endpoint,reason}`: `/v1/*` calls refused 403: an accepted
    /// token outside its role (`role`), an edge token naming a node it doesn't speak for
    /// (`node`), or a new node name past its allowance of live names (`allowance`).
    pub forbidden: IntCounterVec,
    /// `ankusa_store_settle_skipped_total{op,why}`: settle operations that changed nothing because
    /// the key was not pending under the claim's hook (`free`, `committed`, `other_hook`).
    pub settle_skipped: IntCounterVec,
    /// `ankusa_store_late_total{endpoint}`: Redis work that completed after its caller's deadline.
    pub late: IntCounterVec,
    /// `ankusa_store_settle_queued_ops`: settle operations waiting for (or in) a flush.
    pub settle_queued_ops: IntGauge,
    /// `ankusa_store_live_edges`: edges heard from within the live-edge TTL.
    pub live_edges: IntGauge,
    /// `ankusa_store_cluster_redirects_total{reply}`: hits Redis did not run and
    /// the store sent again (`moved`, `ask`, `tryagain`; `noscript`: its script
    /// cache was empty).
    pub redirects: IntCounterVec,
    /// `ankusa_store_cluster_redirects_unfinished_total`: hits still redirected
    /// when their rounds or their caller's budget ran out (answered `redis_unavailable`).
    pub redirects_unfinished: IntCounter,
    /// `ankusa_store_receipts_total{result,applied}`: promotes whose receipt
    /// was checked, by `result` (`valid`, `missing`, `invalid`) and whether
    /// the check let it through to Redis (`applied`; see `crate::receipts`).
    receipts: IntCounterVec,
    /// `ankusa_store_wire_unknown_total{field}`: fields of edge messages the
    /// store skipped as unknown (a newer edge's; see `ankusa_core::wire::version`).
    wire_unknown: IntCounterVec,
    /// The `field` labels given so far: at most [`MAX_UNKNOWN_LABELS`].
    unknown_labels: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// `ankusa_store_connections{state}`: open connections, `authenticated`
    /// (one of their requests carried an accepted token) or `unauthenticated`.
    pub connections: IntGaugeVec,
    /// `ankusa_store_connections_closed_total{why}`: connections the store
    /// closed: for the limit (`limit_unauthenticated`, `limit_idle`; a new
    /// one refused: `limit_refused`) or idle past the timeout (`idle`).
    pub connections_closed: IntCounterVec,
}

/// Distinct `field` labels of `ankusa_store_wire_unknown_total`; later
/// fields are counted as `other`, so no caller grows the registry without bound.
pub const MAX_UNKNOWN_LABELS: usize = 32;

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "ankusa_store_requests_total",
                "Requests by endpoint and result.",
            ),
            &["endpoint", "result"],
        )
        .expect("static metric definition");
        let redis_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "ankusa_store_redis_seconds",
                "Latency of one Redis round trip.",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0,
            ]),
        )
        .expect("static metric definition");
        let settle_batch_ops = Histogram::with_opts(
            HistogramOpts::new(
                "ankusa_store_settle_batch_ops",
                "Settle operations per flush.",
            )
            .buckets(prometheus::exponential_buckets(1.0, 4.0, 8).expect("static buckets")),
        )
        .expect("static metric definition");
        let hits_per_call = Histogram::with_opts(
            HistogramOpts::new(
                "ankusa_store_hits_per_call",
                "Hits carried by one hit call: 1 for /v1/hit, the batch's size for /v1/hits.",
            )
            .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
        )
        .expect("static metric definition");
        let redirects = IntCounterVec::new(
            Opts::new(
                "ankusa_store_cluster_redirects_total",
                "Hits Redis did not run (MOVED, ASK, TRYAGAIN, NOSCRIPT), sent again, by reply.",
            ),
            &["reply"],
        )
        .expect("static metric definition");
        let redirects_unfinished = IntCounter::new(
            "ankusa_store_cluster_redirects_unfinished_total",
            "Hits still redirected when their rounds or their caller's budget ran out.",
        )
        .expect("static metric definition");
        let pipeline_round_trips = IntCounter::new(
            "ankusa_store_pipeline_round_trips_total",
            "Pipelines sent to Redis, one per node per flush or hit batch, and one per redirect round.",
        )
        .expect("static metric definition");
        let settle_ops = IntCounterVec::new(
            Opts::new(
                "ankusa_store_settle_ops_total",
                "Settle operations applied, by op.",
            ),
            &["op"],
        )
        .expect("static metric definition");
        let errors = IntCounterVec::new(
            Opts::new("ankusa_store_errors_total", "Failed requests by cause."),
            &["cause"],
        )
        .expect("static metric definition");
        let redis_up = IntGauge::new("ankusa_store_redis_up", "1 while Redis answers, else 0.")
            .expect("static metric definition");
        let unauthorized = IntCounterVec::new(
            Opts::new(
                "ankusa_store_unauthorized_total",
                "/v1/* calls refused for a missing or invalid bearer token.",
            ),
            &["reason"],
        )
        .expect("static metric definition");
        let forbidden = IntCounterVec::new(
            Opts::new(
                "ankusa_store_forbidden_total",
                "/v1/* calls (or hits of a batch) refused 403, by endpoint and reason: an accepted \
                 token outside its role (role), an edge token naming a node it doesn't speak for \
                 (node), a new node name past its token's allowance of live names (allowance).",
            ),
            &["endpoint", "reason"],
        )
        .expect("static metric definition");
        // Every refusal there is, at 0 from the start (as receipts below).
        for (endpoint, reason) in [
            ("hit", "node"),
            ("hit", "allowance"),
            ("hits", "node"),
            ("hits", "allowance"),
            ("settle", "node"),
            ("override", "role"),
            ("reset", "role"),
            ("claims", "role"),
            ("claims_release", "role"),
            ("commits", "role"),
            ("commits_release", "role"),
        ] {
            forbidden.with_label_values(&[endpoint, reason]);
        }
        let settle_skipped = IntCounterVec::new(
            Opts::new(
                "ankusa_store_settle_skipped_total",
                "Settle operations that changed nothing: the key was not pending under the claim's hook.",
            ),
            &["op", "why"],
        )
        .expect("static metric definition");
        let late = IntCounterVec::new(
            Opts::new(
                "ankusa_store_late_total",
                "Redis work that completed after the caller's deadline (already answered 503).",
            ),
            &["endpoint"],
        )
        .expect("static metric definition");
        let settle_queued_ops = IntGauge::new(
            "ankusa_store_settle_queued_ops",
            "Settle operations waiting for or in a flush.",
        )
        .expect("static metric definition");
        let live_edges = IntGauge::new(
            "ankusa_store_live_edges",
            "Edges heard from within the live-edge TTL, as last counted in Redis.",
        )
        .expect("static metric definition");
        let wire_unknown = IntCounterVec::new(
            Opts::new(
                "ankusa_store_wire_unknown_total",
                "Fields of edge messages skipped as unknown (sent by a newer edge), by field.",
            ),
            &["field"],
        )
        .expect("static metric definition");
        let receipts = IntCounterVec::new(
            Opts::new(
                "ankusa_store_receipts_total",
                "Promotes whose upstream receipt was checked, by result (valid, missing, invalid) \
                 and whether the check let them through to Redis (applied).",
            ),
            &["result", "applied"],
        )
        .expect("static metric definition");
        // Every outcome there is, at 0 from the start: an alert on a rate
        // sees the series before its first increment.
        for (result, applied) in [
            ("valid", "true"),
            ("missing", "true"),
            ("missing", "false"),
            ("invalid", "false"),
        ] {
            receipts.with_label_values(&[result, applied]);
        }
        let connections = IntGaugeVec::new(
            Opts::new(
                "ankusa_store_connections",
                "Open connections: authenticated (a request carried an accepted token) or not.",
            ),
            &["state"],
        )
        .expect("static metric definition");
        let connections_closed = IntCounterVec::new(
            Opts::new(
                "ankusa_store_connections_closed_total",
                "Connections the store closed: for the connection limit, or idle past the timeout.",
            ),
            &["why"],
        )
        .expect("static metric definition");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(receipts.clone()),
            Box::new(wire_unknown.clone()),
            Box::new(redis_seconds.clone()),
            Box::new(settle_batch_ops.clone()),
            Box::new(hits_per_call.clone()),
            Box::new(pipeline_round_trips.clone()),
            Box::new(settle_ops.clone()),
            Box::new(errors.clone()),
            Box::new(redis_up.clone()),
            Box::new(unauthorized.clone()),
            Box::new(forbidden.clone()),
            Box::new(settle_skipped.clone()),
            Box::new(late.clone()),
            Box::new(settle_queued_ops.clone()),
            Box::new(live_edges.clone()),
            Box::new(redirects.clone()),
            Box::new(redirects_unfinished.clone()),
            Box::new(connections.clone()),
            Box::new(connections_closed.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            registry,
            requests,
            redis_seconds,
            settle_batch_ops,
            hits_per_call,
            pipeline_round_trips,
            settle_ops,
            errors,
            redis_up,
            unauthorized,
            forbidden,
            settle_skipped,
            late,
            settle_queued_ops,
            live_edges,
            redirects,
            redirects_unfinished,
            receipts,
            wire_unknown,
            unknown_labels: Default::default(),
            connections,
            connections_closed,
        }
    }

    /// One promote's receipt checked: `result` and whether it is applied.
    pub fn receipt(&self, result: &str, applied: bool) {
        let applied = if applied { "true" } else { "false" };
        self.receipts.with_label_values(&[result, applied]).inc();
    }

    /// One field skipped as unknown, by its label (see
    /// `ankusa_core::wire::tolerant::field_label`).
    pub fn unknown_field(&self, field: &str) {
        let mut seen = self
            .unknown_labels
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let label = if seen.contains(field) {
            field
        } else if seen.len() < MAX_UNKNOWN_LABELS {
            seen.insert(field.to_string());
            field
        } else {
            "other"
        };
        self.wire_unknown.with_label_values(&[label]).inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Encoding into a Vec only fails on malformed metric families, which
        // the static definitions above rule out.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
