//! What each provider's deliveries look like on the wire: the id header (or
//! body field) the edge dedupes on, the event-type header, and the signature.

use crate::codec::{base64, hex, hmac_sha256};
use crate::ids::Rng;

/// The secret a profile signs with unless told otherwise: a `whsec_` secret
/// (base64 after the prefix), so it keys every scheme. GitHub, Shopify and
/// Stripe key their HMAC with the whole string, Standard Webhooks with the
/// decoded base64.
pub const DEFAULT_SECRET: &str = "whsec_YW5rdXNhIG1vY2sgcHJvdmlkZXIga2V5IDMyIGJ5dGU=";

/// How a forged delivery is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forgery {
    /// Signed with a secret the edge doesn't hold.
    WrongSecret,
    /// Signed with the right secret ten minutes ago (a replay); profiles that
    /// sign no timestamp (GitHub, Shopify) get a wrong secret instead.
    Stale,
    /// No signature header at all.
    Unsigned,
}

impl Forgery {
    pub const ALL: [Forgery; 3] = [Forgery::WrongSecret, Forgery::Stale, Forgery::Unsigned];
}

/// Headers carrying a signature or a signed timestamp, per profile.
const SIGNATURE_HEADERS: [&str; 5] = [
    "x-hub-signature-256",
    "stripe-signature",
    "x-shopify-hmac-sha256",
    "webhook-signature",
    "webhook-timestamp",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// `x-github-delivery` (the dedupe key) and `x-github-event`, `x-hub-signature-256`.
    Github,
    /// JSON body `{"id":"evt_…"}` (the dedupe key) and `Stripe-Signature`.
    Stripe,
    /// `x-shopify-webhook-id` (the dedupe key), `x-shopify-topic`, `x-shopify-hmac-sha256`.
    Shopify,
    /// `webhook-id` (the dedupe key), `webhook-timestamp`, `webhook-signature`.
    StandardWebhooks,
}

/// One event as the provider sends it — every delivery of it is byte-identical,
/// as a real provider's redeliveries are.
#[derive(Clone, Debug)]
pub struct Event {
    /// What the edge extracts as the event key for this profile.
    pub key: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Github => "github",
            Profile::Stripe => "stripe",
            Profile::Shopify => "shopify",
            Profile::StandardWebhooks => "standard_webhooks",
        }
    }

    /// Event number `seq` of a run, with ids drawn from `rng`, signed with [`DEFAULT_SECRET`].
    pub fn event(self, rng: &mut Rng, seq: usize, unix_s: u64) -> Event {
        self.event_signed(rng, seq, unix_s, DEFAULT_SECRET)
    }

    /// Event number `seq`, signed with `secret` at `unix_s`.
    pub fn event_signed(self, rng: &mut Rng, seq: usize, unix_s: u64, secret: &str) -> Event {
        let mut event = self.unsigned(rng, seq, unix_s);
        self.sign(&mut event, secret, unix_s);
        event
    }

    /// A forgery of `real`: its event id and body, with `how` for a signature.
    pub fn forge(self, real: &Event, secret: &str, unix_s: u64, how: Forgery) -> Event {
        let mut event = real.clone();
        event
            .headers
            .retain(|(k, _)| !SIGNATURE_HEADERS.contains(&k.as_str()));
        let timestamped = matches!(self, Profile::Stripe | Profile::StandardWebhooks);
        match how {
            Forgery::Unsigned => {}
            Forgery::Stale if timestamped => self.sign(&mut event, secret, unix_s - 600),
            Forgery::WrongSecret | Forgery::Stale => {
                self.sign(&mut event, "whsec_Zm9yZ2VkIHNlY3JldA==", unix_s)
            }
        }
        event
    }

    /// Adds the profile's signature headers for `secret` at `unix_s`.
    fn sign(self, event: &mut Event, secret: &str, unix_s: u64) {
        let raw = secret.as_bytes();
        let body = &event.body;
        let header = match self {
            Profile::Github => (
                "x-hub-signature-256",
                format!("sha256={}", hex(&hmac_sha256(raw, body))),
            ),
            Profile::Stripe => {
                let mut signed = format!("{unix_s}.").into_bytes();
                signed.extend_from_slice(body);
                (
                    "stripe-signature",
                    format!("t={unix_s},v1={}", hex(&hmac_sha256(raw, &signed))),
                )
            }
            Profile::Shopify => ("x-shopify-hmac-sha256", base64(&hmac_sha256(raw, body))),
            Profile::StandardWebhooks => {
                // The key is the base64 after `whsec_`.
                let key = ankusa_core::verify::Scheme::preset("standard_webhooks", 1)
                    .and_then(|s| s.key(secret).ok())
                    .unwrap_or_else(|| raw.to_vec());
                let mut signed = format!("{}.{unix_s}.", event.key).into_bytes();
                signed.extend_from_slice(body);
                event
                    .headers
                    .push(("webhook-timestamp".into(), unix_s.to_string()));
                (
                    "webhook-signature",
                    format!("v1,{}", base64(&hmac_sha256(&key, &signed))),
                )
            }
        };
        event.headers.push((header.0.to_string(), header.1));
    }

    /// The event without its signature headers.
    fn unsigned(self, rng: &mut Rng, seq: usize, unix_s: u64) -> Event {
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        let (key, body) = match self {
            Profile::Github => {
                let key = rng.uuid_v4();
                let body = serde_json::json!({
                    "ref": "refs/heads/main",
                    "after": crate::codec::hex(&rng.next_u64().to_be_bytes()),
                    "repository": {"full_name": "acme/widgets", "id": 1_296_269},
                    "pusher": {"name": "octocat"},
                    "sequence": seq,
                });
                let body = body.to_string().into_bytes();
                headers.push(("x-github-delivery".into(), key.clone()));
                headers.push(("x-github-event".into(), "push".into()));
                headers.push(("x-github-hook-id".into(), "292430182".into()));
                headers.push(("user-agent".into(), "GitHub-Hookshot/mock".into()));
                (key, body)
            }
            Profile::Stripe => {
                let key = format!("evt_{}", rng.alnum(24));
                let body = serde_json::json!({
                    "id": key,
                    "object": "event",
                    "api_version": "2024-06-20",
                    "created": unix_s,
                    "type": "payment_intent.succeeded",
                    "livemode": false,
                    "pending_webhooks": 1,
                    "data": {"object": {"id": format!("pi_{}", rng.alnum(24)), "object": "payment_intent",
                                        "amount": 1000 + seq % 9000, "currency": "eur"}},
                });
                let body = body.to_string().into_bytes();
                headers.push((
                    "user-agent".into(),
                    "Stripe/1.0 (+https://stripe.com/docs/webhooks)".into(),
                ));
                (key, body)
            }
            Profile::Shopify => {
                let key = rng.uuid_v4();
                let body = serde_json::json!({
                    "id": 820_982_911_946_154_508u64 + seq as u64,
                    "email": "jon@example.com",
                    "total_price": format!("{}.00", 10 + seq % 90),
                    "currency": "EUR",
                });
                let body = body.to_string().into_bytes();
                headers.push(("x-shopify-webhook-id".into(), key.clone()));
                headers.push(("x-shopify-topic".into(), "orders/create".into()));
                headers.push(("x-shopify-shop-domain".into(), "acme.myshopify.com".into()));
                headers.push(("x-shopify-api-version".into(), "2024-07".into()));
                (key, body)
            }
            Profile::StandardWebhooks => {
                let key = format!("msg_{}", rng.alnum(27));
                let body = serde_json::json!({
                    "type": "invoice.paid",
                    "timestamp": unix_s,
                    "data": {"invoice": format!("in_{}", rng.alnum(16)), "sequence": seq},
                });
                let body = body.to_string().into_bytes();
                headers.push(("webhook-id".into(), key.clone()));
                (key, body)
            }
        };
        Event { key, headers, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(event: &'a Event, name: &str) -> Option<&'a str> {
        event
            .headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn each_profile_carries_its_key_where_the_edge_looks() {
        let mut rng = Rng::new(1);
        let gh = Profile::Github.event(&mut rng, 0, 1_700_000_000);
        assert_eq!(header(&gh, "x-github-delivery"), Some(gh.key.as_str()));
        assert_eq!(header(&gh, "x-github-event"), Some("push"));
        let stripe = Profile::Stripe.event(&mut rng, 0, 1_700_000_000);
        let body: serde_json::Value = serde_json::from_slice(&stripe.body).expect("JSON body");
        assert_eq!(body["id"], stripe.key.as_str());
        assert!(stripe.key.starts_with("evt_"));
        assert!(
            header(&stripe, "stripe-signature").is_some_and(|s| s.starts_with("t=1700000000,v1="))
        );
        let shop = Profile::Shopify.event(&mut rng, 0, 1_700_000_000);
        assert_eq!(
            header(&shop, "x-shopify-webhook-id"),
            Some(shop.key.as_str())
        );
        let sw = Profile::StandardWebhooks.event(&mut rng, 0, 1_700_000_000);
        assert_eq!(header(&sw, "webhook-id"), Some(sw.key.as_str()));
        assert!(header(&sw, "webhook-signature").is_some_and(|s| s.starts_with("v1,")));
    }

    /// Each profile's signature and each forgery, checked by the core's verifier.
    #[test]
    fn real_deliveries_verify_and_every_forgery_is_refused() {
        use ankusa_core::verify::{verify, Refusal, Scheme};
        let mut rng = Rng::new(2);
        let now = 1_700_000_000;
        for (profile, scheme) in [
            (Profile::Github, "github"),
            (Profile::Stripe, "stripe"),
            (Profile::Shopify, "shopify"),
            (Profile::StandardWebhooks, "standard_webhooks"),
        ] {
            let scheme = Scheme::preset(scheme, 300).unwrap();
            let keys = vec![scheme.key(DEFAULT_SECRET).unwrap()];
            let check = |e: &Event| {
                let lookup = |name: &str| header(e, name).map(str::to_string);
                verify(&scheme, &keys, lookup, &e.body, now)
            };
            let real = profile.event(&mut rng, 0, now);
            assert_eq!(check(&real), Ok(()), "{profile:?}");
            for how in Forgery::ALL {
                let forged = profile.forge(&real, DEFAULT_SECRET, now, how);
                assert_eq!(forged.key, real.key);
                let refused = check(&forged);
                let expected = match (how, profile) {
                    (Forgery::Stale, Profile::Stripe | Profile::StandardWebhooks) => {
                        Refusal::StaleTimestamp
                    }
                    _ => Refusal::BadSignature,
                };
                assert_eq!(refused, Err(expected), "{profile:?} {how:?}");
            }
        }
    }
}
