//! The store's endpoints, listed once: each one's path, the methods it
//! answers, the role its caller needs, and whether its requests are counted
//! in `ankusa_store_requests_total`. The router reads every one of them here.

use crate::tokens::Role;
use ankusa_core::wire;
use hyper::Method;

/// The operators' listing of the claims a node made (see [`crate::claims`]).
pub const CLAIMS_PATH: &str = "/v1/claims";
/// The operators' release of claims that listing gave.
pub const CLAIMS_RELEASE_PATH: &str = "/v1/claims/release";
/// The operators' listing of the commits a node made unproven (see [`crate::commits`]).
pub const COMMITS_PATH: &str = "/v1/commits";
/// The operators' release of commits that listing gave.
pub const COMMITS_RELEASE_PATH: &str = "/v1/commits/release";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Hit,
    Hits,
    Settle,
    Reset,
    /// `GET /v1/overrides?since=V`: the changes an edge polls.
    Overrides,
    /// `/v1/overrides/<tenant>`: one tenant's override.
    Override,
    /// `GET /v1/claims?node=…`: the pending claims a node made.
    Claims,
    /// `POST /v1/claims/release`: release claims listed by `Claims`.
    ClaimsRelease,
    /// `GET /v1/commits?node=…`: the commits a node made without a verified receipt.
    Commits,
    /// `POST /v1/commits/release`: release commits listed by `Commits`.
    CommitsRelease,
    Metrics,
    Healthz,
    Readyz,
}

impl Endpoint {
    pub const ALL: [Endpoint; 13] = [
        Endpoint::Hit,
        Endpoint::Hits,
        Endpoint::Settle,
        Endpoint::Reset,
        Endpoint::Overrides,
        Endpoint::Override,
        Endpoint::Claims,
        Endpoint::ClaimsRelease,
        Endpoint::Commits,
        Endpoint::CommitsRelease,
        Endpoint::Metrics,
        Endpoint::Healthz,
        Endpoint::Readyz,
    ];

    /// The endpoint `path` reaches, if any.
    pub fn of(path: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| match e {
            Endpoint::Override => path.starts_with(wire::OVERRIDE_PREFIX),
            e => path == e.path(),
        })
    }

    /// Its path; `Override`'s is followed by `/<tenant>`.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Hit => wire::HIT_PATH,
            Endpoint::Hits => wire::HITS_PATH,
            Endpoint::Settle => wire::SETTLE_PATH,
            Endpoint::Reset => wire::RESET_PATH,
            Endpoint::Overrides | Endpoint::Override => wire::OVERRIDES_PATH,
            Endpoint::Claims => CLAIMS_PATH,
            Endpoint::ClaimsRelease => CLAIMS_RELEASE_PATH,
            Endpoint::Commits => COMMITS_PATH,
            Endpoint::CommitsRelease => COMMITS_RELEASE_PATH,
            Endpoint::Metrics => "/metrics",
            Endpoint::Healthz => "/healthz",
            Endpoint::Readyz => "/readyz",
        }
    }

    /// Its `endpoint` label in the metrics, and its name in the log.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Hit => "hit",
            Endpoint::Hits => "hits",
            Endpoint::Settle => "settle",
            Endpoint::Reset => "reset",
            Endpoint::Overrides => "overrides",
            Endpoint::Override => "override",
            Endpoint::Claims => "claims",
            Endpoint::ClaimsRelease => "claims_release",
            Endpoint::Commits => "commits",
            Endpoint::CommitsRelease => "commits_release",
            Endpoint::Metrics => "metrics",
            Endpoint::Healthz => "healthz",
            Endpoint::Readyz => "readyz",
        }
    }

    /// Whether it answers `method`: the calls that change or charge are
    /// POSTs, one override is read, put and deleted, the rest are read.
    pub fn allows(self, method: &Method) -> bool {
        match self {
            Endpoint::Hit
            | Endpoint::Hits
            | Endpoint::Settle
            | Endpoint::Reset
            | Endpoint::ClaimsRelease
            | Endpoint::CommitsRelease => method == Method::POST,
            Endpoint::Override => matches!(*method, Method::GET | Method::PUT | Method::DELETE),
            _ => method == Method::GET,
        }
    }

    /// The role a call with `method` needs (None: outside `/v1/`, no token
    /// asked): an edge hits, settles and reads overrides; changing an
    /// override and resetting a tenant's buckets are an operator's.
    pub fn role(self, method: &Method) -> Option<Role> {
        match self {
            Endpoint::Hit | Endpoint::Hits | Endpoint::Settle | Endpoint::Overrides => {
                Some(Role::Edge)
            }
            Endpoint::Override if method == Method::GET => Some(Role::Edge),
            Endpoint::Override
            | Endpoint::Reset
            | Endpoint::Claims
            | Endpoint::ClaimsRelease
            | Endpoint::Commits
            | Endpoint::CommitsRelease => Some(Role::Operator),
            Endpoint::Metrics | Endpoint::Healthz | Endpoint::Readyz => None,
        }
    }

    /// Whether its answers, failures included, are counted in
    /// `ankusa_store_requests_total`: the `/v1/` calls, not the scrape or the probes.
    pub fn counted(self) -> bool {
        self.path().starts_with("/v1/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_is_reached_by_its_own_path() {
        for e in Endpoint::ALL {
            let path = match e {
                Endpoint::Override => "/v1/overrides/acme".to_string(),
                e => e.path().to_string(),
            };
            assert_eq!(Endpoint::of(&path), Some(e), "{path}");
        }
        assert_eq!(Endpoint::of("/v1/hitz"), None);
        assert_eq!(Endpoint::of("/v1/overrides/"), Some(Endpoint::Override));
    }

    #[test]
    fn edges_hit_settle_and_read_overrides_operators_change_and_reset() {
        for e in [
            Endpoint::Hit,
            Endpoint::Hits,
            Endpoint::Settle,
            Endpoint::Overrides,
        ] {
            assert_eq!(e.role(&Method::POST), Some(Role::Edge), "{e:?}");
            assert_eq!(e.role(&Method::GET), Some(Role::Edge), "{e:?}");
        }
        let one = Endpoint::Override;
        assert_eq!(one.role(&Method::GET), Some(Role::Edge));
        assert_eq!(one.role(&Method::PUT), Some(Role::Operator));
        assert_eq!(one.role(&Method::DELETE), Some(Role::Operator));
        assert_eq!(Endpoint::Reset.role(&Method::POST), Some(Role::Operator));
        assert_eq!(Endpoint::Claims.role(&Method::GET), Some(Role::Operator));
        assert_eq!(
            Endpoint::ClaimsRelease.role(&Method::POST),
            Some(Role::Operator)
        );
        assert_eq!(Endpoint::Commits.role(&Method::GET), Some(Role::Operator));
        assert_eq!(
            Endpoint::CommitsRelease.role(&Method::POST),
            Some(Role::Operator)
        );
        assert_eq!(Endpoint::Metrics.role(&Method::GET), None);
    }

    #[test]
    fn the_api_calls_are_counted_and_the_scrape_and_probes_are_not() {
        let counted: Vec<&str> = Endpoint::ALL
            .into_iter()
            .filter(|e| e.counted())
            .map(Endpoint::name)
            .collect();
        assert_eq!(
            counted,
            [
                "hit",
                "hits",
                "settle",
                "reset",
                "overrides",
                "override",
                "claims",
                "claims_release",
                "commits",
                "commits_release"
            ]
        );
        assert!(Endpoint::Override.allows(&Method::DELETE));
        assert!(!Endpoint::Hit.allows(&Method::GET));
        assert!(!Endpoint::Readyz.allows(&Method::POST));
    }
}
