//! The mock provider: delivers events the way GitHub, Stripe, Shopify or a
//! Standard-Webhooks sender does, then audits what the intake stored.
//!
//! - [`profile`]: each provider's ids, headers and signatures.
//! - [`options`]: what a run delivers: where, how many, how fast, how often again.
//! - [`run`]: rate, redeliveries across edges, retries with `Retry-After` and backoff:
//!   the deliveries laid out on a shared [`board`], senders (`send`) taking what is due.
//! - [`audit`]: lost (acknowledged, not stored) and stored-twice events.
//! - [`report`]: the progress line and the final table.

pub mod audit;
pub mod board;
pub mod options;
pub mod profile;
pub mod report;
pub mod run;
mod send;

pub use options::Options;
pub use profile::Profile;
pub use report::Summary;

/// Runs the whole thing: deliveries, then the audit when `intake` is given.
pub fn deliver_and_audit(options: &Options, intake: Option<&str>) -> Summary {
    let outcome = run::run(options);
    let mut summary = Summary {
        profile: options.profile.name(),
        tenant: options.tenant.clone(),
        source: options.source.clone(),
        edges: options.edges.clone(),
        rate: options.rate,
        tally: outcome.tally,
        elapsed_s: (outcome.elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
        stored: None,
        lost: None,
        stored_duplicates: None,
        lost_keys: Vec::new(),
        audit_error: None,
    };
    let Some(intake) = intake else {
        summary.audit_error = Some("no --intake given".into());
        return summary;
    };
    match audit::audit(
        intake,
        &options.tenant,
        &options.source,
        &outcome.events,
        &outcome.acknowledged,
    ) {
        Ok(a) => {
            summary.stored = Some(a.stored);
            summary.lost = Some(a.lost);
            summary.stored_duplicates = Some(a.stored_duplicates);
            summary.lost_keys = a.lost_keys;
        }
        Err(e) => summary.audit_error = Some(e),
    }
    summary
}
