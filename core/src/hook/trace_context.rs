//! W3C trace context (`traceparent`): the sender's trace a hook belongs to.
//!
//! The edge reads a hook's `traceparent` request header and carries it in
//! the hook's hit ([`crate::wire::HitRequest::traceparent`]), so the store
//! records its span for the hook under the sender's trace, one hit at a
//! time even when several hooks share a call. A header that is not a valid
//! traceparent is ignored, as the W3C recommendation says: the hook is
//! simply not traced. The store refuses a hit carrying an invalid one (an
//! edge never sends one).

/// The header, lower-cased as Envoy hands it over.
pub const TRACEPARENT: &str = "traceparent";

/// The length of a version-00 traceparent: `00-` 32 hex `-` 16 hex `-` 2 hex.
pub const LEN: usize = 55;

/// The trace context of a `traceparent` value as version 00, or None when
/// the value is not a valid one (W3C Trace Context level 1, §3.2): lower-case
/// hex, a trace id and a parent id that are not all zeros, a version other
/// than `ff`. A later version's value is read by its version-00 prefix, as
/// the recommendation asks, and carried as version 00.
pub fn parse(value: &str) -> Option<String> {
    let value = value.trim_matches([' ', '\t']);
    // ASCII only, so every slice below falls on a character boundary.
    let bytes = value.as_bytes();
    if !value.is_ascii() || bytes.len() < LEN {
        return None;
    }
    let version = &value[..2];
    if !is_hex(version) || version == "ff" {
        return None;
    }
    // Version 00 is exactly 55 characters; a later one may add fields after a dash.
    if bytes.len() > LEN && (version == "00" || bytes[LEN] != b'-') {
        return None;
    }
    if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let (trace_id, parent_id, flags) = (&value[3..35], &value[36..52], &value[53..55]);
    if !is_hex(trace_id) || !is_hex(parent_id) || !is_hex(flags) {
        return None;
    }
    if is_zero(trace_id) || is_zero(parent_id) {
        return None;
    }
    Some(format!("00-{trace_id}-{parent_id}-{flags}"))
}

/// The trace id (32 hex digits) of a traceparent [`parse`] accepted.
pub fn trace_id(traceparent: &str) -> Option<&str> {
    traceparent.get(3..35)
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_zero(s: &str) -> bool {
    s.bytes().all(|b| b == b'0')
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_kept_as_sent() {
        assert_eq!(parse(GOOD).as_deref(), Some(GOOD));
        assert_eq!(parse(&format!(" {GOOD}\t")).as_deref(), Some(GOOD));
        assert_eq!(
            trace_id(GOOD),
            Some("4bf92f3577b34da6a3ce929d0e0e4736"),
            "the trace id"
        );
    }

    #[test]
    fn a_later_version_is_read_by_its_version_00_prefix() {
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        assert_eq!(parse(later).as_deref(), Some(GOOD));
        let glued = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x";
        assert_eq!(parse(glued), None);
    }

    #[test]
    fn an_invalid_traceparent_is_ignored() {
        for bad in [
            "",
            "garbage",
            // Upper-case hex is not allowed.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            // All-zero ids are invalid.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // Version ff is forbidden; version 00 has nothing after the flags.
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",
            // Wrong separators, short fields.
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            // A multi-byte character where an ASCII one belongs.
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
