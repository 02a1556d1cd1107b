//! The local replies a hook can get instead of being forwarded.

use crate::verify::Refusal;

/// `Retry-After` in whole seconds, at least 1 (a 0 invites an instant retry storm).
pub use crate::limit::gcra::wait_secs as retry_after_secs;

/// A local reply: status, JSON body, extra headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalReply {
    pub status: u32,
    pub body: String,
    pub retry_after: Option<u64>,
    /// Rate-limit headers (`ratelimit-policy`, `ratelimit`, legacy `x-ratelimit-*`).
    pub headers: Vec<(&'static str, String)>,
}

impl LocalReply {
    fn json(status: u32, body: serde_json::Value) -> LocalReply {
        LocalReply {
            status,
            body: body.to_string(),
            retry_after: None,
            headers: Vec::new(),
        }
    }

    pub fn duplicate(original: &str) -> LocalReply {
        Self::json(
            201,
            serde_json::json!({"status": "accepted", "id": original, "duplicate": true}),
        )
    }

    pub fn pending(retry_after_ms: u64) -> LocalReply {
        LocalReply {
            retry_after: Some(retry_after_secs(retry_after_ms)),
            ..Self::json(409, serde_json::json!({"error": "dedupe_pending"}))
        }
    }

    pub fn rate_limited(retry_after_ms: u64) -> LocalReply {
        LocalReply {
            retry_after: Some(retry_after_secs(retry_after_ms)),
            ..Self::json(429, serde_json::json!({"error": "rate_limited"}))
        }
    }

    pub fn not_found(message: &str) -> LocalReply {
        Self::json(
            404,
            serde_json::json!({"error": "not_found", "message": message}),
        )
    }

    pub fn too_large(size: u64, limit: u64) -> LocalReply {
        Self::json(
            413,
            serde_json::json!({"error": "too_large",
                "message": format!("body of {size} bytes is over the limit of {limit}")}),
        )
    }

    pub fn bad_method(method: &str) -> LocalReply {
        Self::json(
            405,
            serde_json::json!({"error": "method_not_allowed",
                "message": format!("{method} is not accepted; webhooks are POSTed")}),
        )
    }
}

/// The 401 of a refused delivery: `{"error":"bad_signature"}` or `{"error":"stale_timestamp"}`.
pub fn unverified(refusal: Refusal) -> LocalReply {
    LocalReply {
        status: 401,
        body: serde_json::json!({"error": refusal.as_str()}).to_string(),
        retry_after: None,
        headers: Vec::new(),
    }
}

/// The 503 of a filter with no configuration: come back in a second.
pub fn not_configured() -> LocalReply {
    LocalReply {
        status: 503,
        body: r#"{"error":"not_configured"}"#.into(),
        retry_after: Some(1),
        headers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_refused_signature_is_a_401_naming_why() {
        let stale = unverified(Refusal::StaleTimestamp);
        assert_eq!(stale.status, 401);
        assert_eq!(stale.body, r#"{"error":"stale_timestamp"}"#);
        assert_eq!(
            unverified(Refusal::BadSignature).body,
            r#"{"error":"bad_signature"}"#
        );
    }

    #[test]
    fn an_unconfigured_filter_asks_to_come_back() {
        let reply = not_configured();
        assert_eq!((reply.status, reply.retry_after), (503, Some(1)));
        assert_eq!(reply.body, r#"{"error":"not_configured"}"#);
    }
}
