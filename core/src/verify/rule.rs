//! What a source's `verify` says: the signing scheme, the environment
//! variables holding its secrets, and how old a signed timestamp may be.

/// Default timestamp tolerance (s) of the schemes that sign one: Stripe's and
/// Standard Webhooks' own default.
pub const DEFAULT_TOLERANCE_S: u64 = 300;
/// Most secrets one source may name (the current one and a few being rotated out).
pub const MAX_SECRETS: usize = 8;

/// How an HMAC is written in a header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Encoding {
    Hex,
    Base64,
}

/// Which headers a Standard Webhooks delivery uses: `webhook-*` or Svix's `svix-*`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Family {
    StandardWebhooks,
    Svix,
}

impl Family {
    /// The prefix of the id, timestamp and signature headers.
    pub fn prefix(self) -> &'static str {
        match self {
            Family::StandardWebhooks => "webhook-",
            Family::Svix => "svix-",
        }
    }
}

/// A signing scheme.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Scheme {
    /// One header holding `prefix` + the HMAC-SHA256 of the body: GitHub
    /// (`x-hub-signature-256`, `sha256=`, hex), Shopify
    /// (`x-shopify-hmac-sha256`, base64), or a generic rule.
    BodyMac {
        /// Lower-case header name.
        header: String,
        prefix: String,
        encoding: Encoding,
    },
    /// `Stripe-Signature: t=…,v1=…[,v1=…]` over `"{t}.{body}"`, hex.
    Stripe { tolerance_s: u64 },
    /// `{id, timestamp, signature}` headers, `v1,<base64>` signatures over
    /// `"{id}.{timestamp}.{body}"`, keyed by the base64 of a `whsec_` secret.
    StandardWebhooks { family: Family, tolerance_s: u64 },
}

/// The preset names, as the configuration spells them.
pub const PRESETS: [&str; 5] = ["github", "stripe", "shopify", "standard_webhooks", "svix"];
/// The generic rule's name.
pub const GENERIC: &str = "hmac_sha256";

impl Scheme {
    /// A preset by name, with `tolerance_s` for the schemes that sign a timestamp.
    pub fn preset(name: &str, tolerance_s: u64) -> Option<Scheme> {
        Some(match name {
            "github" => Scheme::BodyMac {
                header: "x-hub-signature-256".into(),
                prefix: "sha256=".into(),
                encoding: Encoding::Hex,
            },
            "shopify" => Scheme::BodyMac {
                header: "x-shopify-hmac-sha256".into(),
                prefix: String::new(),
                encoding: Encoding::Base64,
            },
            "stripe" => Scheme::Stripe { tolerance_s },
            "standard_webhooks" => Scheme::StandardWebhooks {
                family: Family::StandardWebhooks,
                tolerance_s,
            },
            "svix" => Scheme::StandardWebhooks {
                family: Family::Svix,
                tolerance_s,
            },
            _ => return None,
        })
    }

    /// Whether the scheme signs a timestamp (so `tolerance_s` means something).
    pub fn has_timestamp(name: &str) -> bool {
        matches!(name, "stripe" | "standard_webhooks" | "svix")
    }

    /// The signing key a secret's value stands for: the base64 after `whsec_`
    /// for Standard Webhooks and Svix, the value's bytes otherwise (Stripe
    /// keys its HMAC with the whole `whsec_…` string). The base64 may leave
    /// out its `=` padding, as those libraries allow. The error never shows
    /// the value.
    pub fn key(&self, value: &str) -> Result<Vec<u8>, String> {
        if value.is_empty() {
            return Err("is empty".into());
        }
        match self {
            Scheme::StandardWebhooks { .. } => {
                let encoded = value.strip_prefix("whsec_").unwrap_or(value);
                match super::encoding::base64_padding_optional(encoded.as_bytes()) {
                    Some(key) if !key.is_empty() => Ok(key),
                    _ => Err("is not a whsec_ secret (\"whsec_\" then base64)".into()),
                }
            }
            _ => Ok(value.as_bytes().to_vec()),
        }
    }
}

/// A source's `verify`: the scheme and the VM environment variables holding
/// its secrets, any of which may sign a delivery (so a secret can be rotated).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct VerifyRule {
    /// The preset name, or `hmac_sha256`.
    pub name: String,
    pub scheme: Scheme,
    /// 1 to [`MAX_SECRETS`] variable names, `[A-Za-z_][A-Za-z0-9_]*`.
    pub secret_env: Vec<String>,
}

/// An environment variable name as shells and Envoy accept it.
pub fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.len() <= 128
}
