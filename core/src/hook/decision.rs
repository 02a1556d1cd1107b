//! A hook's decision as Envoy's access log prints it: one line of
//! `key=value` fields the filter writes into the request's filter state
//! (`wasm.ankusa`), which `%FILTER_STATE(wasm.ankusa:PLAIN)%` prints.
//!
//! The fields, always all of them and in this order (`-`: not known for
//! this request):
//!
//! | field | what |
//! |---|---|
//! | `outcome` | how the hook was answered, as `ankusa_admissions_total` counts it |
//! | `shadow` | `true`: a refusal the tenant's shadow mode forwarded instead |
//! | `tenant`, `source` | the route's tenant and source |
//! | `key` | the event key the hook was deduplicated on |
//! | `hook` | the hook's id (`x-ankusa-hook-id` upstream) |
//! | `rate_scope`, `dedupe_scope` | `node` or `fleet`, from the configuration |
//! | `decided` | `store`: the store answered; `fallback`: answered on this node because the store call failed or the breaker is open; `node`: no store call was involved |
//! | `store_us` | µs from the hook's admission to the store's answer or failure (a wait for a shared call included) |
//! | `trace` | the sender's `traceparent`, when it is a valid one (normalized to version 00) |
//!
//! A value is printed bare when it is made of `[A-Za-z0-9_.:/@+-]`, else
//! quoted with `\"`, `\\`, the space and every byte outside printable ASCII
//! escaped (`\xNN`). So no value holds a space, and the decision is always the
//! line's last [`FIELDS`] space-separated words, in this order: an event key
//! is the sender's bytes, and must not break the log line or forge a field,
//! however the line is split. Every value is bounded: ids and scopes by the
//! configuration's rules, a tenant from the path by the route's (64
//! characters of `[A-Za-z0-9_-]`), an event key by 200 bytes (a longer one
//! is hashed; escaped, at most four bytes a byte), a trace by its 55
//! characters, so the whole decision is at most [`MAX_RENDERED`] bytes.

use crate::config::Scope;
use crate::hook::outcome::Outcome;
use std::fmt::Write;

/// The filter state the decision is written to (`wasm.` + this in Envoy).
pub const PROPERTY: &str = "ankusa";

/// The fields of a rendered decision, in order.
pub const FIELDS: [&str; 11] = [
    "outcome",
    "shadow",
    "tenant",
    "source",
    "key",
    "hook",
    "rate_scope",
    "dedupe_scope",
    "decided",
    "store_us",
    "trace",
];

/// The longest a rendered decision can be (bytes): the names, the
/// separators and every value at its longest (an event key of 200 bytes, each
/// escaped to 4, quoted; tenant and source ids of 64; a hook id of 36; a
/// trace of 55; `store_us` of 20 digits).
pub const MAX_RENDERED: usize = 1_200;

/// Where a hook's answer came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decided {
    /// No store call was involved: node scopes, or refused before any charge.
    #[default]
    Node,
    /// The store answered (the node may have charged its own buckets after).
    Store,
    /// The store call failed, or the breaker kept it from being made:
    /// answered from this node alone.
    Fallback,
}

impl Decided {
    pub fn as_str(self) -> &'static str {
        match self {
            Decided::Node => "node",
            Decided::Store => "store",
            Decided::Fallback => "fallback",
        }
    }
}

/// Everything the access log tells of one hook, gathered as the hook goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// None until the hook is answered or let through.
    pub outcome: Option<Outcome>,
    pub shadow: bool,
    pub tenant: Option<String>,
    pub source: Option<String>,
    pub event_key: Option<String>,
    pub hook_id: Option<String>,
    /// `rate_limits.scope` and `dedupe.scope`.
    pub scopes: (Scope, Scope),
    pub decided: Decided,
    /// µs waited for the store; None: no call.
    pub store_us: Option<u64>,
    /// The sender's valid `traceparent` (see [`crate::hook::trace_context`]).
    pub trace: Option<String>,
}

impl Decision {
    /// The access log's fields, in order (see the module docs).
    pub fn render(&self) -> String {
        let mut line = String::with_capacity(192);
        let mut field = |name: &str, value: Option<&str>| {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(name);
            line.push('=');
            match value {
                Some(value) => push_value(&mut line, value),
                None => line.push('-'),
            }
        };
        field("outcome", self.outcome.map(Outcome::as_str));
        field("shadow", Some(if self.shadow { "true" } else { "false" }));
        field("tenant", self.tenant.as_deref());
        field("source", self.source.as_deref());
        field("key", self.event_key.as_deref());
        field("hook", self.hook_id.as_deref());
        field("rate_scope", Some(self.scopes.0.as_str()));
        field("dedupe_scope", Some(self.scopes.1.as_str()));
        field("decided", Some(self.decided.as_str()));
        let waited = self.store_us.map(|us| us.to_string());
        field("store_us", waited.as_deref());
        field("trace", self.trace.as_deref());
        line
    }
}

/// Whether `b` may stand unquoted in a value.
fn is_bare(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'/' | b'@' | b'+' | b'-')
}

/// `value` bare, or quoted and escaped (see the module docs). An empty
/// value or a `-` is quoted, so a known value is never mistaken for `-`
/// (unknown).
fn push_value(line: &mut String, value: &str) {
    if !value.is_empty() && value != "-" && value.bytes().all(is_bare) {
        line.push_str(value);
        return;
    }
    line.push('"');
    for b in value.bytes() {
        match b {
            b'"' => line.push_str("\\\""),
            b'\\' => line.push_str("\\\\"),
            b'!'..=b'~' => line.push(char::from(b)),
            _ => {
                let _ = write!(line, "\\x{b:02x}");
            }
        }
    }
    line.push('"');
}

#[cfg(test)]
mod tests;
