//! The request's headers as one snapshot: names and byte values in the
//! order the host holds them.

/// A request's header pairs (values as bytes: HTTP allows obs-text).
#[derive(Clone, Debug, Default)]
pub struct RequestHeaders {
    pairs: Vec<(String, Vec<u8>)>,
}

impl RequestHeaders {
    pub fn from_pairs(pairs: Vec<(String, Vec<u8>)>) -> RequestHeaders {
        RequestHeaders { pairs }
    }

    /// The first value of `name`, as Envoy's single-header lookup answers;
    /// None when absent or not UTF-8.
    pub fn get(&self, name: &str) -> Option<String> {
        self.pairs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| String::from_utf8(v.clone()).ok())
    }

    /// [`RequestHeaders::get`] without a copy.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.bytes(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The first value of `name` as the sender's bytes, UTF-8 or not (an
    /// event id is keyed on its bytes).
    pub fn bytes(&self, name: &str) -> Option<&[u8]> {
        self.pairs
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// Forgets every value of `name`; whether there was one (so the host's
    /// copy needs removing too).
    pub fn remove(&mut self, name: &str) -> bool {
        let before = self.pairs.len();
        self.pairs.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.pairs.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn headers(pairs: &[(&str, &[u8])]) -> RequestHeaders {
        RequestHeaders::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
        )
    }

    #[test]
    fn a_repeated_header_answers_its_first_value() {
        let h = headers(&[(":path", b"/webhooks/gh"), ("x-id", b"a"), ("x-id", b"b")]);
        assert_eq!(h.get("x-id").as_deref(), Some("a"));
        assert_eq!(h.get("X-Id").as_deref(), Some("a"));
        assert_eq!(h.get(":path").as_deref(), Some("/webhooks/gh"));
        assert_eq!(h.get("content-length"), None);
        assert_eq!(h.get_str("X-Id"), Some("a"));
        assert_eq!(h.get_str("content-length"), None);
    }

    #[test]
    fn a_value_that_is_not_utf8_reads_as_absent() {
        let h = headers(&[("x-id", &[0xff, 0x41])]);
        assert_eq!(h.get("x-id"), None);
        assert_eq!(h.get_str("x-id"), None);
        assert_eq!(h.bytes("X-Id"), Some(&[0xff, 0x41][..]));
        assert_eq!(h.bytes("x-other"), None);
    }

    #[test]
    fn removing_says_whether_the_name_was_there_and_drops_every_copy() {
        let mut h = headers(&[("x-ankusa-tenant", b"a"), ("x-ankusa-tenant", b"b")]);
        assert!(h.remove("x-ankusa-tenant"));
        assert_eq!(h.get("x-ankusa-tenant"), None);
        assert!(!h.remove("x-ankusa-tenant"));
        assert!(!h.remove("x-ankusa-source"));
    }
}
