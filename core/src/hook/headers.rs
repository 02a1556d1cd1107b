//! The request's headers as one snapshot: names and byte values in the
//! order the host holds them.

/// The edge's own header namespace: every request header under it that a
/// sender set is removed before anything reads the request, so a sender
/// can't pick its hook's id or dedupe key, nor speak for the edge to the
/// upstream under a name the edge may use one day.
pub const OWN_PREFIX: &str = "x-ankusa-";

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

    /// Forgets every header whose name starts with `prefix` (ASCII case
    /// ignored): their names, each once, in the order first met (so the
    /// host's copies can be removed too).
    pub fn remove_prefixed(&mut self, prefix: &str) -> Vec<String> {
        let mut removed: Vec<String> = Vec::new();
        self.pairs.retain(|(k, _)| {
            let ours = k
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix));
            if ours && !removed.iter().any(|r| r.eq_ignore_ascii_case(k)) {
                removed.push(k.clone());
            }
            !ours
        });
        removed
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

    #[test]
    fn removing_a_prefix_names_each_header_once_and_keeps_the_others() {
        let mut h = headers(&[
            ("x-ankusa-foo", b"1"),
            ("x-github-delivery", b"d"),
            ("X-Ankusa-Budget-Ms", b"7"),
            ("x-ankusa-foo", b"2"),
            ("x-ankusa", b"not ours: no dash"),
            ("é", b"a name shorter than the prefix"),
        ]);
        assert_eq!(
            h.remove_prefixed("x-ankusa-"),
            ["x-ankusa-foo", "X-Ankusa-Budget-Ms"]
        );
        assert_eq!(h.get("x-ankusa-foo"), None);
        assert_eq!(h.get("x-github-delivery").as_deref(), Some("d"));
        assert_eq!(h.get("x-ankusa").as_deref(), Some("not ours: no dash"));
        assert!(h.remove_prefixed("x-ankusa-").is_empty());
    }
}
