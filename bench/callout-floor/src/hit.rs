//! The floor's real store call: a `POST /v1/hit` per request, with the edge
//! token, charging one hook to tenant `acme` and claiming a delivery no one
//! claimed before. What a store call costs Envoy when the store does a hit's
//! work (a script on Redis, a JSON answer), where `/healthz` answers at
//! once; still no decision around it: the answer is read and dropped.

use ankusa_core::config::{FleetConfig, DEFAULT_TTL_MS};
use ankusa_core::fleet::token::{edge_authorization, EDGE_TOKEN_ENV};
use ankusa_core::wire::{Charge, ChargeKind, Claim, HitRequest, BUDGET_HEADER, HIT_PATH};
use std::cell::Cell;

/// The tenant charged, and its quota: never refusing.
const TENANT: &str = "acme";
const QUOTA: u64 = 1_000_000;
/// How long the store may take (ms), as `x-ankusa-budget-ms`.
pub const BUDGET_MS: &str = "1000";

/// Whether the configured path asks for the real store call.
pub fn wanted(path: &str) -> bool {
    path == HIT_PATH
}

/// The hits one VM sends: each claims `{run}-{n}`, `n` counting from 1.
pub struct Hits {
    /// `Bearer <token>`, from the VM environment; None: no token set.
    pub authorization: Option<String>,
    /// How long a claim stays pending (ms): the filter's default.
    pending_ttl_ms: u64,
    run: u64,
    sent: Cell<u64>,
}

impl Hits {
    /// Reads the edge token from `env_value` (the VM's [`EDGE_TOKEN_ENV`]);
    /// `run` keeps this VM's claims apart from other VMs'.
    pub fn new(env_value: Option<&str>, run: u64) -> Result<Hits, String> {
        Ok(Hits {
            authorization: edge_authorization(env_value)?,
            pending_ttl_ms: FleetConfig::default().pending_ttl_ms,
            run,
            sent: Cell::new(0),
        })
    }

    /// From this VM's environment.
    pub fn from_env(run: u64) -> Result<Hits, String> {
        Hits::new(std::env::var(EDGE_TOKEN_ENV).ok().as_deref(), run)
    }

    /// The next hit's body: a delivery not claimed before.
    pub fn next_body(&self) -> Vec<u8> {
        let n = self.sent.get() + 1;
        self.sent.set(n);
        let id = format!("floor-{:016x}-{n}", self.run);
        let request = HitRequest {
            charges: vec![Charge {
                kind: ChargeKind::Hooks,
                tenant: TENANT.to_string(),
                units: 1,
                rate: QUOTA,
                burst: QUOTA,
            }],
            claim: Some(Claim {
                tenant: TENANT.to_string(),
                source_id: "gh".to_string(),
                key: id.clone(),
                hook_id: id,
                node: "bench-floor".to_string(),
                ttl_ms: DEFAULT_TTL_MS,
                pending_ttl_ms: self.pending_ttl_ms,
            }),
            replay: None,
            node: None,
            traceparent: None,
        };
        serde_json::to_vec(&request).unwrap_or_default()
    }

    /// The call's headers besides `:method`, `:path` and `:authority`.
    pub fn headers(&self) -> Vec<(&'static str, &str)> {
        let mut headers = vec![
            (BUDGET_HEADER, BUDGET_MS),
            ("content-type", "application/json"),
        ];
        if let Some(a) = &self.authorization {
            headers.push(("authorization", a.as_str()));
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_hit_claims_a_delivery_of_its_own_and_charges_one_hook() {
        let hits = Hits::new(None, 7).unwrap();
        let (a, b) = (hits.next_body(), hits.next_body());
        let a: HitRequest = serde_json::from_slice(&a).unwrap();
        let b: HitRequest = serde_json::from_slice(&b).unwrap();
        let (ca, cb) = (a.claim.clone().unwrap(), b.claim.unwrap());
        assert_eq!(ca.key, "floor-0000000000000007-1");
        assert_eq!(cb.key, "floor-0000000000000007-2");
        assert_ne!(Hits::new(None, 8).unwrap().next_body(), hits.next_body());
        assert_eq!(a.charges.len(), 1);
        let c = &a.charges[0];
        assert_eq!(
            (c.kind, c.units, c.tenant.as_str()),
            (ChargeKind::Hooks, 1, TENANT)
        );
        // The store checks what it is sent: a request it would refuse is no floor.
        a.validate().unwrap();
    }

    #[test]
    fn the_token_is_sent_as_the_filter_sends_it_and_a_bad_one_is_named() {
        let hits = Hits::new(Some(" s3cret-token-0123456789abcdef "), 1).unwrap();
        let headers = hits.headers();
        assert!(headers.contains(&("authorization", "Bearer s3cret-token-0123456789abcdef")));
        assert!(headers.contains(&(BUDGET_HEADER, BUDGET_MS)));
        assert!(!Hits::new(None, 1)
            .unwrap()
            .headers()
            .iter()
            .any(|(k, _)| *k == "authorization"));
        let err = Hits::new(Some("bad token"), 1).err().unwrap();
        assert!(err.contains(EDGE_TOKEN_ENV), "{err}");
    }

    #[test]
    fn only_the_hit_path_asks_for_the_real_call() {
        assert!(wanted("/v1/hit"));
        assert!(!wanted("/healthz"));
        assert!(!wanted("/v1/hits"));
    }
}
