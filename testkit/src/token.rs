//! The store token of one test run: fresh random bytes per process, handed to
//! the store (`ANKUSA_STORE_TOKENS`) and to every Envoy edge
//! (`ANKUSA_STORE_TOKEN`, read by the filter) through their environment, so
//! it shows in neither a command line nor a config file.

use std::io::Read;
use std::sync::OnceLock;

/// What the store reads its accepted tokens from (comma separated).
pub const STORE_TOKENS_ENV: &str = "ANKUSA_STORE_TOKENS";
/// What the filter reads its token from (through Envoy's environment).
pub const EDGE_TOKEN_ENV: &str = "ANKUSA_STORE_TOKEN";

/// This process's token: 32 hex digits from `/dev/urandom`.
pub fn run_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| fresh_token("run"))
}

/// A new random token, `ankusa-<label>-<32 hex digits>`.
pub fn fresh_token(label: &str) -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .unwrap_or_else(|e| panic!("cannot read /dev/urandom: {e}"));
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("ankusa-{label}-{hex}")
}

/// `authorization: Bearer <run token>`, for tests that call the store directly.
pub fn auth_header() -> (&'static str, String) {
    ("authorization", format!("Bearer {}", run_token()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_stable_within_a_run() {
        assert_eq!(run_token(), run_token());
        assert_ne!(fresh_token("a"), fresh_token("a"));
        assert!(run_token().len() >= 16);
    }
}
