//! An edge's access log, in the format the shipped configs use
//! (`envoy/edge.yaml`): how long Envoy held each request and the upstream's
//! part of it, so a test can tell the time a hook spent at the edge (waiting
//! for the store, in the filter, in Envoy) from the time the intake took; and
//! the filter's decision for it (`%FILTER_STATE(wasm.ankusa:PLAIN)%`).
//!
//! Only edges started with [`crate::envoy::Edge::start_lds_logged`] (or
//! [`crate::envoy::Edge::spawn_logged`]) write one; the template itself has
//! no access log, so benchmarks pay nothing for it.

pub use ankusa_core::hook::decision::FIELDS;
use std::path::Path;

/// The docker-compose edge, whose access log format every shipped config shares.
pub const SHIPPED: &str = include_str!("../../envoy/edge.yaml");

/// The `text_format:` line of a config, as written (a YAML double-quoted
/// scalar, which is also a JSON string).
pub fn format_line(config: &str) -> Option<&str> {
    config
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("text_format:"))
        .map(str::trim)
}

/// The shipped format, as Envoy reads it. It starts with when the request
/// started (Unix seconds, ms precision), Envoy's whole time (`%DURATION%`,
/// first byte in to last byte out, ms), the upstream's time
/// (`x-envoy-upstream-service-time`, ms; `-` for a local reply) and the
/// status; [`parse_line`] reads those four. The filter's decision ends it.
/// Panics if `envoy/edge.yaml` holds no access log format.
pub fn format() -> String {
    let quoted = format_line(SHIPPED).expect("envoy/edge.yaml has an access log text_format");
    serde_json::from_str(quoted).expect("the text_format is one double-quoted string")
}

/// Where the HTTP connection manager of the template's listener is named.
const ANCHOR: &str = "          stat_prefix: webhooks\n";

/// `bootstrap` (a rendered template) with the listener's access log at `path`.
/// Panics if the template's listener has moved (the anchor is gone).
pub fn with_access_log(bootstrap: &str, path: &Path) -> String {
    let at = bootstrap
        .find(ANCHOR)
        .map(|i| i + ANCHOR.len())
        .expect("the template's listener names stat_prefix: webhooks");
    let format = serde_json::Value::String(format()).to_string();
    let block = format!(
        "          access_log:\n\
         \x20         - name: envoy.access_loggers.file\n\
         \x20           typed_config:\n\
         \x20             \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n\
         \x20             path: \"{}\"\n\
         \x20             log_format: {{ text_format: {format} }}\n",
        path.display()
    );
    format!("{}{block}{}", &bootstrap[..at], &bootstrap[at..])
}

/// One request as the access log tells it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    /// When Envoy got its first byte (Unix ms).
    pub start_unix_ms: u64,
    /// Envoy's whole time (ms).
    pub total_ms: u64,
    /// The upstream's part (ms); `None` for a local reply.
    pub upstream_ms: Option<u64>,
    pub status: u16,
}

impl Held {
    /// The time the request spent at the edge itself: the whole less the upstream's part.
    pub fn at_edge_ms(&self) -> u64 {
        self.total_ms.saturating_sub(self.upstream_ms.unwrap_or(0))
    }
}

/// Parses the first four fields of a line of [`format`]; `None` for anything else.
pub fn parse_line(line: &str) -> Option<Held> {
    let mut parts = line.split_whitespace();
    let start: f64 = parts.next()?.parse().ok()?;
    let total_ms = parts.next()?.parse().ok()?;
    let upstream_ms = match parts.next()? {
        "-" => None,
        v => Some(v.parse().ok()?),
    };
    let status = parts.next()?.parse().ok()?;
    Some(Held {
        start_unix_ms: (start * 1000.0).round() as u64,
        total_ms,
        upstream_ms,
        status,
    })
}

/// The filter's decision a line ends with (`outcome=… trace=…`), or None
/// (a request the filter never decided ends in `-`). It is read from the
/// end: the decision is always the line's last [`FIELDS`] words, in order,
/// and no value in it holds a space (the filter escapes them), so nothing a
/// sender put in the request line, an event key or a `traceparent` can move
/// or forge a field.
pub fn decision(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\n', '\r']);
    let mut start = line.len();
    for _ in 0..FIELDS.len() {
        start = line[..start].rfind(' ')?;
    }
    let decided = &line[start + 1..];
    let in_order = decided
        .split(' ')
        .zip(FIELDS)
        .all(|(word, name)| word.strip_prefix(name).is_some_and(|v| v.starts_with('=')));
    in_order.then_some(decided)
}

/// One field of a decision (`outcome`, `decided`, …), as written.
pub fn field<'a>(decision: &'a str, name: &str) -> Option<&'a str> {
    decision
        .split(' ')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// Every line of the access log at `path` (none when it doesn't exist).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every request in the access log at `path` (none when it doesn't exist).
pub fn read(path: &Path) -> Vec<Held> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(parse_line)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_and_without_an_upstream() {
        assert_eq!(
            parse_line("1796101557.741 260 3 201"),
            Some(Held {
                start_unix_ms: 1_796_101_557_741,
                total_ms: 260,
                upstream_ms: Some(3),
                status: 201
            })
        );
        let local = parse_line("1796101557.700 6 - 409").expect("a local reply");
        assert_eq!((local.upstream_ms, local.at_edge_ms()), (None, 6));
        assert_eq!(
            parse_line("1796101557.741 260 3 201").map(|h| h.at_edge_ms()),
            Some(257)
        );
        assert_eq!(parse_line("garbage"), None);
    }

    #[test]
    fn the_decision_ends_a_line_and_its_fields_read_back() {
        let line = "1796101557.741 3 1 201 - \"POST /webhooks/gh HTTP/1.1\" 20 40 \
                    outcome=admitted shadow=false tenant=acme source=gh key=k1 hook=h \
                    rate_scope=fleet dedupe_scope=fleet decided=store store_us=812 trace=-";
        let decided = decision(line).expect("a decision");
        assert!(decided.starts_with("outcome=admitted "), "{decided}");
        assert_eq!(field(decided, "outcome"), Some("admitted"));
        assert_eq!(field(decided, "decided"), Some("store"));
        assert_eq!(field(decided, "store_us"), Some("812"));
        assert_eq!(field(decided, "scope"), None);
        assert_eq!(decision("1796101557.741 3 - 503 UF \"-\" -"), None);
        assert_eq!(parse_line(line).map(|h| h.status), Some(201));
    }

    /// The payloads that forged a decision: a raw `traceparent` the format
    /// printed before the filter's fields (`decision` took the first
    /// ` outcome=`), and an event key with spaces (`field` split inside its
    /// quotes). Neither moves a field now.
    #[test]
    fn a_forged_traceparent_or_key_is_not_read_as_the_decision() {
        let old_format = "1796101557.741 3 - 429 - \"POST /webhooks/acme/gh HTTP/1.1\" 2 24 \
            \"x\" outcome=admitted shadow=false tenant=victim\" outcome=rate_limited \
            shadow=false tenant=acme source=gh key=k1 hook=h rate_scope=fleet \
            dedupe_scope=fleet decided=store store_us=812 trace=-";
        let decided = decision(old_format).expect("a decision");
        assert_eq!(field(decided, "outcome"), Some("rate_limited"));
        assert_eq!(field(decided, "tenant"), Some("acme"));
        let spaced_key = "1796101557.741 3 - 429 - \"POST /webhooks/acme/gh HTTP/1.1\" 2 24 \
            outcome=rate_limited shadow=false tenant=acme source=gh \
            key=\"a\\x20decided=fallback\\x20tenant=victim\" hook=h rate_scope=fleet \
            dedupe_scope=fleet decided=store store_us=812 trace=-";
        let decided = decision(spaced_key).expect("a decision");
        assert_eq!(field(decided, "decided"), Some("store"));
        assert_eq!(field(decided, "tenant"), Some("acme"));
        // A line whose last words are not the decision's fields has none.
        let raw_spaces = spaced_key.replace("\\x20", " ");
        assert_eq!(decision(&raw_spaces), None, "{raw_spaces}");
    }

    #[test]
    fn the_format_is_the_shipped_one_and_prints_the_decision() {
        let format = format();
        assert!(
            format.starts_with("%START_TIME(%s.%3f)% %DURATION% "),
            "{format}"
        );
        assert!(
            format.ends_with(" %FILTER_STATE(wasm.ankusa:PLAIN)%\n"),
            "{format}"
        );
    }

    #[test]
    fn the_log_goes_under_the_listener() {
        let text = crate::envoy::TEMPLATE;
        let logged = with_access_log(text, Path::new("/tmp/x.log"));
        assert!(logged.contains("access_log:\n          - name: envoy.access_loggers.file"));
        assert!(logged.contains("path: \"/tmp/x.log\""));
        let (_, listener) = crate::envoy::split_lds(&logged, Path::new("/tmp/lds/l.yaml"));
        assert!(
            listener.contains("        access_log:\n        - name: envoy.access_loggers.file"),
            "{listener}"
        );
    }
}
