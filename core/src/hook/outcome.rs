//! How a hook was answered, and which limiter a degraded gauge is about:
//! the labels of the filter's metrics.

/// How one hook was answered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Forwarded upstream.
    Admitted,
    /// Answered 201 with the original hook's id.
    Duplicate,
    /// 409: another copy is in flight.
    Pending,
    /// 429.
    RateLimited,
    /// 404: not a webhook path, unknown source, invalid tenant.
    NotFound,
    /// 413: body over `max_body_bytes` or the bytes burst.
    TooLarge,
    /// 405: not a POST.
    BadMethod,
    /// 401: a source with `verify` got no valid signature, or a stale one.
    Unverified,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Admitted,
        Outcome::Duplicate,
        Outcome::Pending,
        Outcome::RateLimited,
        Outcome::NotFound,
        Outcome::TooLarge,
        Outcome::BadMethod,
        Outcome::Unverified,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Admitted => "admitted",
            Outcome::Duplicate => "duplicate",
            Outcome::Pending => "pending",
            Outcome::RateLimited => "rate_limited",
            Outcome::NotFound => "not_found",
            Outcome::TooLarge => "too_large",
            Outcome::BadMethod => "bad_method",
            Outcome::Unverified => "unverified",
        }
    }
}

/// Which limiter a degraded gauge is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    RateLimit,
    Dedupe,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RateLimit => "rate_limit",
            Kind::Dedupe => "dedupe",
        }
    }
}
