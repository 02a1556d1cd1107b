//! Reading a wire message as the compatibility rule says ([`super::version`]):
//! a field this release doesn't know is skipped and reported, never refused.
//! A message whose known fields are wrong (a missing one, a wrong type, one
//! named twice) is still an error.

use serde::de::DeserializeOwned;

/// Reads `bytes` as a `T`, calling `unknown` with the path of every field it
/// skipped (as [`field_label`] spells it).
pub fn from_slice<T: DeserializeOwned>(
    bytes: &[u8],
    mut unknown: impl FnMut(String),
) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_ignored::deserialize(&mut de, |path| unknown(field_label(&path)))?;
    de.end()?;
    Ok(value)
}

/// [`from_slice`] over text.
pub fn from_str<T: DeserializeOwned>(
    text: &str,
    unknown: impl FnMut(String),
) -> serde_json::Result<T> {
    from_slice(text.as_bytes(), unknown)
}

/// Most characters of a reported field; a longer path is cut here.
pub const MAX_LABEL: usize = 64;

/// A skipped field's path as a metric label: map keys and struct fields
/// joined by `.`, sequence positions dropped (`hits.claim.receipt`, not
/// `hits[3].claim.receipt`), anything but `[A-Za-z0-9_.-]` as `_`, at most
/// [`MAX_LABEL`] characters. So one unknown field is one label however many
/// hits carry it, and no sender picks a label's bytes.
pub fn field_label(path: &serde_ignored::Path<'_>) -> String {
    let mut parts: Vec<String> = Vec::new();
    collect(path, &mut parts);
    let joined = parts.join(".");
    joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_LABEL)
        .collect()
}

fn collect(path: &serde_ignored::Path<'_>, parts: &mut Vec<String>) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, .. } => collect(parent, parts),
        Path::Map { parent, key } => {
            collect(parent, parts);
            parts.push(key.clone());
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => collect(parent, parts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::batch::HitsRequest;
    use crate::wire::{HitReply, SettleRequest};

    fn read<T: DeserializeOwned>(text: &str) -> (serde_json::Result<T>, Vec<String>) {
        let mut skipped = Vec::new();
        let value = from_str(text, |f| skipped.push(f));
        (value, skipped)
    }

    #[test]
    fn a_newer_edges_fields_are_skipped_and_named_in_a_batch_of_hits() {
        let text = r#"{"hits":[
            {"charges":[],"claim":{"tenant":"acme","source_id":"gh","key":"k1","hook_id":"h1","node":"edge-1","ttl_ms":60000,"pending_ttl_ms":30000,"receipt":"ab"},"future":1},
            {"charges":[{"kind":"hooks","tenant":"acme","units":1,"rate":5,"burst":10,"weight":2}],"claim":null}
        ],"settle":[{"op":"release","claim":{"tenant":"acme","source_id":"gh","key":"k0","hook_id":"h0","node":"edge-1","ttl_ms":60000,"pending_ttl_ms":30000},"why":"5xx"}],"wire":3}"#;
        let (hits, skipped) = read::<HitsRequest>(text);
        let hits = hits.expect("a batch with unknown fields is read");
        assert_eq!(hits.hits.len(), 2);
        assert_eq!(hits.settle.len(), 1);
        assert_eq!(
            skipped,
            [
                "hits.claim.receipt",
                "hits.future",
                "hits.charges.weight",
                "settle.why",
                "wire"
            ]
        );
    }

    #[test]
    fn known_fields_still_have_to_be_right() {
        // A field named twice, a missing one, a wrong type: errors, as before.
        let twice = r#"{"ops":[],"ops":[]}"#;
        assert!(read::<SettleRequest>(twice).0.is_err());
        assert!(read::<SettleRequest>(r#"{"opz":[]}"#).0.is_err());
        assert!(read::<SettleRequest>(r#"{"ops":{}}"#).0.is_err());
        assert!(read::<SettleRequest>(r#"{"ops":[]} trailing"#).0.is_err());
    }

    #[test]
    fn a_newer_stores_answer_is_read_and_its_extra_fields_named() {
        let (reply, skipped) =
            read::<HitReply>(r#"{"result":"ok","wire":3,"quota_left":{"hooks":4}}"#);
        let reply = reply.expect("an answer with unknown fields is read");
        assert_eq!(reply.wire, Some(3));
        assert_eq!(skipped, ["quota_left"]);
    }

    #[test]
    fn labels_are_bounded_and_plain() {
        let long = format!(r#"{{"ops":[],"{}":1,"a b\"c":2}}"#, "x".repeat(200));
        let (_, skipped) = read::<SettleRequest>(&long);
        assert_eq!(skipped[0].len(), MAX_LABEL);
        assert_eq!(skipped[1], "a_b_c");
    }
}
