//! The spans the store's work runs in: one per request, for the logs, and
//! one per hit, for the logs and the sender's trace.
//!
//! Both are `debug` level: at the default `info` they are never created, so
//! a request pays a level check for them and nothing more. With
//! `RUST_LOG=info,ankusa_store=debug` every request ends with an `answered`
//! line carrying its span's fields; with an OTLP endpoint
//! ([`crate::telemetry`]) each hit span is exported under the trace its
//! `traceparent` names.
//!
//! A span holds names, counts and results, never a token, a body or a key.

use ankusa_core::wire::HitRequest;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;
use std::time::Duration;
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every span here (the module's path).
pub const TARGET: &str = module_path!();
/// The name of a hit's span, the one span exported.
pub const HIT: &str = "hit";

/// A request's span: `endpoint` now; `tenant` (one-hit endpoints),
/// `result` (the metrics' `result` label, or the error code) and
/// `redis_us` (µs waiting for Redis) as they become known.
pub fn request(endpoint: &'static str) -> Span {
    tracing::debug_span!(
        "request",
        endpoint,
        tenant = Empty,
        result = Empty,
        redis_us = Empty
    )
}

/// A hit's span, a child of the current request's, and in the sender's
/// trace when the hit carries a `traceparent`: `tenant` and `source` now,
/// `result` and `redis_us` once answered.
pub fn hit(hit: &HitRequest) -> Span {
    let span = tracing::debug_span!(
        "hit",
        tenant = hit.tenant().unwrap_or_default(),
        source = hit.claim.as_ref().map_or("", |c| c.source_id.as_str()),
        result = Empty,
        redis_us = Empty
    );
    if let (Some(traceparent), false) = (&hit.traceparent, span.is_disabled()) {
        let carrier = HashMap::from([(
            ankusa_core::hook::trace_context::TRACEPARENT.to_string(),
            traceparent.clone(),
        )]);
        // Refused only for a span already started or without OpenTelemetry
        // data: this one is new, and has its data when traces are exported.
        let _ = span.set_parent(TraceContextPropagator::new().extract(&carrier));
    }
    span
}

/// Records how `span`'s work ended.
pub fn result(span: &Span, result: &str) {
    span.record("result", result);
}

/// Records the time `span`'s work waited for Redis.
pub fn redis(span: &Span, waited: Duration) {
    span.record(
        "redis_us",
        u64::try_from(waited.as_micros()).unwrap_or(u64::MAX),
    );
}

/// Records the tenant of the request `span` (a one-hit request).
pub fn tenant(span: &Span, tenant: &str) {
    span.record("tenant", tenant);
}
