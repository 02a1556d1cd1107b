//! A hook's receipt: the upstream's proof that it stored the hook, which
//! the store asks of every promote before it commits a claim.
//!
//! Without it, anyone holding an edge token could make a real delivery
//! vanish: claim its event key under a made-up hook id (`/v1/hit`), promote
//! that claim (`/v1/settle`), and the real, correctly signed delivery is then
//! answered "duplicate" and never stored. A receipt is
//! `hex(HMAC-SHA256(key, "ankusa-receipt-v1\n" + tenant + "\n" + hook_id))`
//! under a key only the upstream and the store hold: the upstream answers a
//! hook it holds with one ([`HEADER`]), for the id the hook is committed under
//! (the upstream's older id when it reports its own duplicate), and the edge
//! carries it in the promote. One receipt covers every claim of that hook:
//! its event key's and the replay guard's body claim.
//!
//! The receipt is a field of wire 2 ([`SINCE`]): a v0.1.0 store refuses any
//! field it doesn't know, so an edge sends it only to a store that named
//! wire 2 or more (see [`super::version`]).

use crate::verify::{encoding, mac};

/// The upstream's response header carrying the receipt. The edge never lets
/// it reach the sender: a sender holding a receipt and a leaked edge token
/// could commit any key under that hook's id.
pub const HEADER: &str = "x-ankusa-receipt";

/// The wire version that added a promote's `receipt`.
pub const SINCE: u32 = 2;

/// Most characters of a receipt on the wire: SHA-256's 64 hex digits, with
/// room for a longer MAC later.
pub const MAX_LEN: usize = 128;

/// Shortest receipt key accepted (bytes of its line).
pub const MIN_KEY_LEN: usize = 32;
/// Longest receipt key accepted (bytes of its line).
pub const MAX_KEY_LEN: usize = 512;

/// What the MAC is over, before the tenant and the hook id: names the
/// purpose and its version, so the key signs nothing else by accident.
const DOMAIN: &[u8] = b"ankusa-receipt-v1\n";

/// The receipt of hook `hook_id` of `tenant` under `key`: lower-case hex.
pub fn receipt(key: &[u8], tenant: &str, hook_id: &str) -> String {
    encoding::to_hex(&mac::sign(key, &parts(tenant, hook_id)))
}

fn parts<'a>(tenant: &'a str, hook_id: &'a str) -> [&'a [u8]; 4] {
    [DOMAIN, tenant.as_bytes(), b"\n", hook_id.as_bytes()]
}

/// Whether `presented` is the receipt of (`tenant`, `hook_id`) under any of
/// `keys`. The MACs are compared in constant time and every key is tried,
/// so the time says nothing about how close a forgery came.
pub fn verify(keys: &[Vec<u8>], tenant: &str, hook_id: &str, presented: &str) -> bool {
    if !is_well_formed(presented) {
        return false;
    }
    match encoding::hex(presented.as_bytes()) {
        Some(claimed) => mac::matches_any(keys, &parts(tenant, hook_id), &claimed),
        None => false,
    }
}

/// A receipt as the wire carries it: 2 to [`MAX_LEN`] lower-case hex
/// digits, an even count.
pub fn is_well_formed(receipt: &str) -> bool {
    (2..=MAX_LEN).contains(&receipt.len())
        && receipt.len().is_multiple_of(2)
        && receipt
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The receipt an upstream's header value carries, if it is one the store
/// could accept (surrounding spaces aside); anything else is dropped here,
/// so one odd header can't sink the settle batch its promote rides in.
pub fn from_header(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|r| is_well_formed(r))
        .map(str::to_string)
}

/// The keys of a receipt key file: each line that isn't blank or a `#`
/// comment, trimmed, as its bytes. The upstream signs with the first; the
/// store accepts every one, so a key is rotated without a gap (add the new
/// one below the old, switch the upstream, remove the old). `origin` names
/// the file in errors, which never show a key.
pub fn keys_of_file(text: &str, origin: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        check_key(line).map_err(|e| format!("{origin} line {}: the key {e}", n + 1))?;
        if !keys.iter().any(|k| k == line.as_bytes()) {
            keys.push(line.as_bytes().to_vec());
        }
    }
    if keys.is_empty() {
        return Err(format!("{origin}: holds no key"));
    }
    Ok(keys)
}

/// A key is [`MIN_KEY_LEN`] to [`MAX_KEY_LEN`] bytes of visible ASCII (it
/// is written in a file by hand or by `openssl rand -hex 32`). The message
/// never shows the key.
pub fn check_key(key: &str) -> Result<(), String> {
    if let Some(at) = key.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(format!(
            "has a byte outside visible ASCII at offset {at} (spaces and control characters are not allowed)"
        ));
    }
    if key.len() < MIN_KEY_LEN || key.len() > MAX_KEY_LEN {
        return Err(format!(
            "is {} bytes; {MIN_KEY_LEN} to {MAX_KEY_LEN} are accepted",
            key.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn a_receipt_is_the_hmac_of_its_tenant_and_hook_id() {
        // python3 -c 'import hmac,hashlib; print(hmac.new(b"0123456789abcdef0123456789abcdef",
        //   b"ankusa-receipt-v1\nacme\n01a22a58-b525-7a36-ac16-fe50dd6137bd", hashlib.sha256).hexdigest())'
        assert_eq!(
            receipt(KEY, "acme", "01a22a58-b525-7a36-ac16-fe50dd6137bd"),
            "39e292d3768189161203b8976590e7dbe34c66613080c8eed8064b7b911042e8"
        );
    }

    #[test]
    fn a_receipt_verifies_only_for_its_own_tenant_hook_and_key() {
        let keys = vec![KEY.to_vec()];
        let good = receipt(KEY, "acme", "h-1");
        assert!(verify(&keys, "acme", "h-1", &good));
        assert!(!verify(&keys, "acme", "h-2", &good), "another hook");
        assert!(!verify(&keys, "globex", "h-1", &good), "another tenant");
        // The separator is part of the MAC: ("acme\nh", "1") is not ("acme", "h\n1").
        assert!(!verify(&keys, "acm", "e\nh-1", &good));
        let other = vec![b"another key, also 32 bytes long..".to_vec()];
        assert!(!verify(&other, "acme", "h-1", &good), "another key");
        // Any of several keys, as during a rotation.
        let both = vec![other[0].clone(), KEY.to_vec()];
        assert!(verify(&both, "acme", "h-1", &good));
        // Cut short, upper-case, or not hex at all: never.
        assert!(!verify(&keys, "acme", "h-1", &good[..62]));
        assert!(!verify(&keys, "acme", "h-1", &good.to_uppercase()));
        assert!(!verify(&keys, "acme", "h-1", "zz"));
        assert!(!verify(&keys, "acme", "h-1", ""));
    }

    #[test]
    fn only_even_lower_case_hex_up_to_128_digits_is_a_receipt() {
        assert!(is_well_formed("ab"));
        assert!(is_well_formed(&"f".repeat(MAX_LEN)));
        assert!(!is_well_formed(&"f".repeat(MAX_LEN + 2)));
        assert!(!is_well_formed("abc"));
        assert!(!is_well_formed("AB"));
        assert!(!is_well_formed("a b "));
        assert!(!is_well_formed(""));
        assert_eq!(from_header(Some(" ab12 ")), Some("ab12".into()));
        assert_eq!(from_header(Some("not hex")), None);
        assert_eq!(from_header(None), None);
    }

    #[test]
    fn a_key_file_gives_every_key_line_and_names_a_bad_one_without_showing_it() {
        let text = format!(
            "# receipts\n\n  {}  \n{}\n",
            std::str::from_utf8(KEY).unwrap(),
            "k".repeat(40)
        );
        let keys = keys_of_file(&text, "--receipt-key-file f").unwrap();
        assert_eq!(keys, vec![KEY.to_vec(), b"k".repeat(40)]);
        let e = keys_of_file("# none yet\n", "--receipt-key-file f").unwrap_err();
        assert_eq!(e, "--receipt-key-file f: holds no key");
        let e = keys_of_file("short-secret\n", "--receipt-key-file f").unwrap_err();
        assert!(e.contains("line 1") && e.contains("is 12 bytes"), "{e}");
        assert!(!e.contains("short-secret"), "{e}");
        let e = check_key(&format!("{}\u{7}", "k".repeat(40))).unwrap_err();
        assert!(e.contains("offset 40"), "{e}");
    }
}
