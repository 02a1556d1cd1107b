//! The bearer token edges present to the store: what a well-formed one is,
//! the `authorization` value that carries it, and the comparison the store
//! makes. The token itself is never part of an error message.

/// Shortest token accepted (bytes): a guessable one is no credential.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest token accepted (bytes).
pub const MAX_TOKEN_LEN: usize = 512;
/// The VM environment variable an edge reads its token from.
pub const EDGE_TOKEN_ENV: &str = "ANKUSA_STORE_TOKEN";
/// The scheme of the `authorization` header.
pub const SCHEME: &str = "Bearer ";

/// Why a token was refused; the messages never contain the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    Empty,
    TooShort {
        len: usize,
    },
    TooLong {
        len: usize,
    },
    /// A byte outside visible ASCII (a space, a control character, UTF-8).
    BadByte {
        at: usize,
    },
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Empty => write!(f, "is empty"),
            TokenError::TooShort { len } => {
                write!(f, "is {len} bytes; at least {MIN_TOKEN_LEN} are needed")
            }
            TokenError::TooLong { len } => {
                write!(f, "is {len} bytes; at most {MAX_TOKEN_LEN} are accepted")
            }
            TokenError::BadByte { at } => write!(
                f,
                "has a byte outside visible ASCII at offset {at} (spaces and control characters are not allowed)"
            ),
        }
    }
}

/// Checks that `token` can be sent as `Bearer <token>` unchanged.
pub fn check_token(token: &str) -> Result<(), TokenError> {
    let len = token.len();
    if len == 0 {
        return Err(TokenError::Empty);
    }
    if let Some(at) = token.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(TokenError::BadByte { at });
    }
    if len < MIN_TOKEN_LEN {
        return Err(TokenError::TooShort { len });
    }
    if len > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong { len });
    }
    Ok(())
}

/// The `authorization` header value carrying `token`.
pub fn bearer(token: &str) -> String {
    format!("{SCHEME}{token}")
}

/// The `authorization` value an edge sends, from the value of
/// [`EDGE_TOKEN_ENV`] (`None` when unset or blank: calls carry no credential).
/// A malformed token is refused naming the variable, never showing the token.
pub fn edge_authorization(env_value: Option<&str>) -> Result<Option<String>, String> {
    let Some(token) = env_value.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    check_token(token).map_err(|e| format!("{EDGE_TOKEN_ENV}: the token {e}"))?;
    Ok(Some(bearer(token)))
}

/// The token of an `authorization` value, if it uses the Bearer scheme
/// (the scheme's case is not significant, RFC 7235).
pub fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let scheme = SCHEME.as_bytes();
    if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return None;
    }
    let token = value[scheme.len()..].trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Compares two byte strings in time that depends only on their lengths, so
/// a caller can't find a token byte by byte by timing the answers.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}

/// Whether `presented` equals any of `accepted`; every accepted token is
/// compared, whichever matches, so the answer's timing doesn't say which.
pub fn matches_any<T: AsRef<[u8]>>(presented: &[u8], accepted: &[T]) -> bool {
    accepted.iter().fold(false, |found, t| {
        constant_time_eq(presented, t.as_ref()) | found
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_token_must_be_long_and_visible_ascii() {
        assert_eq!(check_token(""), Err(TokenError::Empty));
        assert_eq!(check_token("short"), Err(TokenError::TooShort { len: 5 }));
        assert_eq!(
            check_token("0123456789abcdef 1"),
            Err(TokenError::BadByte { at: 16 })
        );
        assert_eq!(
            check_token(&"x".repeat(513)),
            Err(TokenError::TooLong { len: 513 })
        );
        assert_eq!(check_token("0123456789abcdef"), Ok(()));
    }

    #[test]
    fn a_refusal_never_repeats_the_token() {
        let token = "s3cr3t-with-a space-inside";
        let message = check_token(token).unwrap_err().to_string();
        assert!(!message.contains("s3cr3t"), "{message}");
    }

    #[test]
    fn bearer_values_round_trip_and_other_schemes_are_refused() {
        let value = bearer("0123456789abcdef");
        assert_eq!(
            bearer_token(value.as_bytes()),
            Some(&b"0123456789abcdef"[..])
        );
        assert_eq!(bearer_token(b"bearer  tok "), Some(&b"tok"[..]));
        assert_eq!(bearer_token(b"Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }

    #[test]
    fn an_edge_sends_its_trimmed_token_or_nothing() {
        assert_eq!(edge_authorization(None), Ok(None));
        assert_eq!(edge_authorization(Some("  \n")), Ok(None));
        assert_eq!(
            edge_authorization(Some("0123456789abcdef\n")),
            Ok(Some("Bearer 0123456789abcdef".into()))
        );
        let err = edge_authorization(Some("tooshort")).unwrap_err();
        assert!(
            err.starts_with("ANKUSA_STORE_TOKEN: the token is 8 bytes")
                && !err.contains("tooshort"),
            "{err}"
        );
    }

    #[test]
    fn comparison_needs_every_byte_and_the_length() {
        assert!(constant_time_eq(b"abcdef", b"abcdef"));
        assert!(!constant_time_eq(b"abcdef", b"abcdeg"));
        assert!(!constant_time_eq(b"abcdef", b"abcde"));
        assert!(!constant_time_eq(b"abcde", b"abcdef"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn any_of_several_tokens_is_accepted() {
        let accepted = ["old-token-0123456789", "new-token-0123456789"];
        assert!(matches_any(b"old-token-0123456789", &accepted));
        assert!(matches_any(b"new-token-0123456789", &accepted));
        assert!(!matches_any(b"other-token-0123456", &accepted));
        assert!(!matches_any(b"old-token-0123456789", &[] as &[&str]));
    }
}
