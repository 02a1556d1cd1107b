//! What each provider's deliveries look like on the wire: the id header (or
//! body field) the edge dedupes on, the event-type header, and the signature.

use crate::codec::{base64, hex, hmac_sha256};
use crate::ids::Rng;

/// The secret every profile signs with; the edge doesn't check signatures, but
/// the headers should look the way the real senders' do.
const SECRET: &[u8] = b"whsec_ankusa_mock_provider_secret";

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

    /// Event number `seq` of a run, with ids drawn from `rng`.
    pub fn event(self, rng: &mut Rng, seq: usize, unix_s: u64) -> Event {
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
                headers.push((
                    "x-hub-signature-256".into(),
                    format!("sha256={}", hex(&hmac_sha256(SECRET, &body))),
                ));
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
                let mut signed = format!("{unix_s}.").into_bytes();
                signed.extend_from_slice(&body);
                let signature = format!("t={unix_s},v1={}", hex(&hmac_sha256(SECRET, &signed)));
                headers.push(("stripe-signature".into(), signature));
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
                headers.push((
                    "x-shopify-hmac-sha256".into(),
                    base64(&hmac_sha256(SECRET, &body)),
                ));
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
                let mut signed = format!("{key}.{unix_s}.").into_bytes();
                signed.extend_from_slice(&body);
                headers.push(("webhook-id".into(), key.clone()));
                headers.push(("webhook-timestamp".into(), unix_s.to_string()));
                headers.push((
                    "webhook-signature".into(),
                    format!("v1,{}", base64(&hmac_sha256(SECRET, &signed))),
                ));
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
}
