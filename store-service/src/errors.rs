//! Every way a request can fail, and the one mapping to an HTTP status and
//! [`ErrorBody`]. Redis's own messages are logged, never sent: callers get a
//! stable code they can act on.
//!
//! What a caller sent comes back bounded: a path, method or header value is
//! shown by [`echo`] or [`quote`] (at most [`MAX_ECHO`] characters,
//! escaped), and a whole message, whatever a parser put in it (serde names
//! the field it did not expect, a validation error the value it refused), is
//! cut to [`MAX_MESSAGE`] bytes. So a caller can't make the store write
//! megabytes back to it, or into its log.

use ankusa_core::wire::ErrorBody;
use hyper::StatusCode;
use std::fmt;

#[derive(Debug)]
pub enum StoreError {
    /// The caller's mistake; the message names the field and the value.
    BadRequest(String),
    /// The body is larger than the service reads.
    TooLarge {
        limit: usize,
    },
    /// The body did not arrive within `--body-read-timeout-ms`.
    BodyTimeout {
        ms: u64,
    },
    NotFound {
        path: String,
    },
    /// `GET /v1/overrides/<tenant>` of a tenant with no override in force:
    /// an answer rather than a failed request (the route counts it a `get`).
    NoOverride {
        tenant: String,
    },
    MethodNotAllowed {
        method: String,
        path: String,
    },
    /// No accepted bearer token on a `/v1/*` call.
    Unauthorized(crate::auth::Refusal),
    /// An accepted token whose role may not make this call.
    Forbidden {
        role: crate::tokens::Role,
        method: String,
        path: String,
    },
    /// An edge token naming a node it doesn't speak for, or a new node name
    /// past its allowance of live names (see [`crate::scope`]).
    NodeForbidden {
        node: String,
        why: crate::scope::NodeRefusal,
    },
    /// The settle queue is full; the caller retries later.
    Overloaded {
        queued_max: usize,
    },
    /// Redis did not answer within the caller's budget.
    Timeout {
        budget_ms: u64,
    },
    /// No connection to Redis (down, restarting, or not reached yet).
    RedisUnavailable(String),
    /// Redis answered with something the service did not expect.
    Internal(String),
}

impl StoreError {
    /// Sorts a redis-rs error: connection trouble is an outage, anything
    /// else is a bug or a misconfigured Redis.
    pub fn from_redis(e: &redis::RedisError) -> StoreError {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
            || e.is_unrecoverable_error()
            || matches!(
                e.kind(),
                redis::ErrorKind::BusyLoadingError
                    | redis::ErrorKind::ClusterDown
                    | redis::ErrorKind::TryAgain
                    // A slot that moved: the store re-reads the slot map.
                    | redis::ErrorKind::Moved
                    | redis::ErrorKind::Ask
            )
        {
            StoreError::RedisUnavailable(e.to_string())
        } else {
            StoreError::Internal(e.to_string())
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            StoreError::BadRequest(_) => StatusCode::BAD_REQUEST,
            StoreError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            StoreError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            StoreError::NotFound { .. } | StoreError::NoOverride { .. } => StatusCode::NOT_FOUND,
            StoreError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            StoreError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            StoreError::Forbidden { .. } | StoreError::NodeForbidden { .. } => {
                StatusCode::FORBIDDEN
            }
            StoreError::Overloaded { .. }
            | StoreError::Timeout { .. }
            | StoreError::RedisUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            StoreError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `error` code of the body, also the `cause` label of the metrics.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::BadRequest(_) | StoreError::TooLarge { .. } => "bad_request",
            StoreError::BodyTimeout { .. } => "body_timeout",
            StoreError::NotFound { .. } => "not_found",
            StoreError::NoOverride { .. } => "no_override",
            StoreError::MethodNotAllowed { .. } => "method_not_allowed",
            StoreError::Unauthorized(_) => "unauthorized",
            StoreError::Forbidden { .. } | StoreError::NodeForbidden { .. } => "forbidden",
            StoreError::Overloaded { .. } => "overloaded",
            StoreError::Timeout { .. } => "timeout",
            StoreError::RedisUnavailable(_) => "redis_unavailable",
            StoreError::Internal(_) => "internal",
        }
    }

    pub fn body(&self) -> ErrorBody {
        let message = match self {
            StoreError::BadRequest(m) => m.clone(),
            StoreError::TooLarge { limit } => format!("body is over {limit} bytes"),
            StoreError::BodyTimeout { ms } => {
                format!("the body did not arrive within {ms} ms")
            }
            StoreError::NotFound { path } => format!("no route {}", echo(path)),
            // A tenant the route checked: 1 to 64 characters of [A-Za-z0-9_-].
            StoreError::NoOverride { tenant } => {
                format!("tenant {tenant:?} has no override in force")
            }
            StoreError::MethodNotAllowed { method, path } => {
                format!("{} is not allowed on {}", echo(method), echo(path))
            }
            StoreError::Unauthorized(crate::auth::Refusal::Missing) => {
                "send `authorization: Bearer <token>` with a token the store accepts".into()
            }
            StoreError::Unauthorized(crate::auth::Refusal::Invalid) => {
                "the bearer token is not one the store accepts".into()
            }
            StoreError::Forbidden { role, method, path } => format!(
                "an {} token may not {} {}; it needs an operator token",
                role.as_str(),
                echo(method),
                echo(path)
            ),
            StoreError::NodeForbidden { node, why } => match why {
                crate::scope::NodeRefusal::Outside { nodes } => format!(
                    "this edge token speaks for nodes={nodes}, not for node {}",
                    echo(node)
                ),
                crate::scope::NodeRefusal::Allowance { live, ttl_ms } => format!(
                    "this edge token's {live} live node name(s) are taken: node {} is refused \
                     until one of them has been quiet for {ttl_ms} ms",
                    echo(node)
                ),
            },
            StoreError::Overloaded { queued_max } => {
                format!("the settle queue holds its {queued_max} operations; retry later")
            }
            StoreError::Timeout { budget_ms } => {
                format!("Redis did not answer within the {budget_ms} ms budget")
            }
            StoreError::RedisUnavailable(_) => "Redis is unreachable; retry later".into(),
            StoreError::Internal(_) => "the store failed; see its log".into(),
        };
        ErrorBody {
            error: self.code().into(),
            message: bounded(message),
        }
    }
}

/// The most characters of a caller's value an error message shows.
pub const MAX_ECHO: usize = 64;
/// The most bytes of an error message.
pub const MAX_MESSAGE: usize = 512;

/// `value` as an error message shows it: as it is when short and made of
/// `[A-Za-z0-9_.:/@+-]` (a path, a method, a number), else as [`quote`]
/// shows it.
pub fn echo(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_.:/@+-".contains(c);
    if !value.is_empty() && value.len() <= MAX_ECHO && value.chars().all(plain) {
        return value.to_string();
    }
    quote(value)
}

/// `value` quoted, control and non-ASCII characters escaped, cut to
/// [`MAX_ECHO`] characters (`…` and its length in bytes say it was).
pub fn quote(value: &str) -> String {
    let shown: String = value.chars().take(MAX_ECHO).collect();
    if shown.len() == value.len() {
        format!("{shown:?}")
    } else {
        format!("{shown:?}… ({} bytes)", value.len())
    }
}

/// `message` cut to [`MAX_MESSAGE`] bytes on a character boundary, `…`
/// marking the cut.
fn bounded(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    let mut end = MAX_MESSAGE - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push('…');
    message
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::RedisUnavailable(detail) | StoreError::Internal(detail) => {
                write!(f, "{}: {detail}", self.code())
            }
            other => write!(f, "{}: {}", other.code(), other.body().message),
        }
    }
}

impl std::error::Error for StoreError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internals_stay_in_the_log() {
        let e = StoreError::Internal("ERR user_script:3: secret detail".into());
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!e.body().message.contains("secret"));
        let e = StoreError::RedisUnavailable("Connection refused (os error 111)".into());
        assert_eq!(
            (e.status(), e.body().error.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "redis_unavailable")
        );
        assert!(!e.body().message.contains("os error"));
    }

    #[test]
    fn a_refused_caller_gets_401_with_a_stable_code() {
        use crate::auth::Refusal;
        for refusal in [Refusal::Missing, Refusal::Invalid] {
            let e = StoreError::Unauthorized(refusal);
            assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(e.body().error, "unauthorized");
        }
        let e = StoreError::Overloaded { queued_max: 10 };
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
        );
    }

    /// A path, method or tenant came back whole (a 60 KiB path: 60 KiB of
    /// message), and so did whatever a parser's message held.
    #[test]
    fn what_a_caller_sent_comes_back_cut_and_escaped() {
        let path = format!("/v1/{}", "p".repeat(70_000));
        let e = StoreError::NotFound { path: path.clone() };
        let message = e.body().message;
        assert!(message.len() < 120, "{message}");
        assert!(
            message.starts_with(r#"no route "/v1/ppp"#) && message.ends_with("… (70004 bytes)"),
            "{message}"
        );
        let e = StoreError::MethodNotAllowed {
            method: "GET\u{1b}[2J".into(),
            path: "/v1/hit".into(),
        };
        assert_eq!(
            e.body().message,
            r#""GET\u{1b}[2J" is not allowed on /v1/hit"#
        );
        let e = StoreError::BadRequest(format!("unknown field `{}`", "f".repeat(1 << 20)));
        let message = e.body().message;
        assert!(message.len() <= MAX_MESSAGE, "{}", message.len());
        assert!(message.starts_with("unknown field `fff") && message.ends_with('…'));
        let e = StoreError::BadRequest(format!("{}é", "x".repeat(MAX_MESSAGE - 4)));
        assert!(e.body().message.len() <= MAX_MESSAGE);
        assert_eq!(
            e.to_string().len(),
            "bad_request: ".len() + e.body().message.len()
        );
    }

    #[test]
    fn a_body_that_never_arrives_is_a_408() {
        let e = StoreError::BodyTimeout { ms: 10_000 };
        assert_eq!(e.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(
            (e.body().error.as_str(), e.body().message.as_str()),
            ("body_timeout", "the body did not arrive within 10000 ms")
        );
    }

    #[test]
    fn a_tenant_with_no_override_is_a_404_naming_it() {
        let e = StoreError::NoOverride {
            tenant: "acme".into(),
        };
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert_eq!(
            (e.body().error.as_str(), e.body().message.as_str()),
            ("no_override", "tenant \"acme\" has no override in force")
        );
    }
}
