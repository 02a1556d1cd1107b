//! The store tokens of one test run, fresh random bytes per process: an edge
//! token, handed to the store (`ANKUSA_STORE_EDGE_TOKENS`) and to every Envoy
//! edge (`ANKUSA_STORE_TOKEN`, read by the filter), and an operator token,
//! handed only to the store (`ANKUSA_STORE_OPERATOR_TOKENS`) and used by tests
//! that change overrides. Both go through the environment, so they show in
//! neither a command line nor a config file.
//!
//! And the run's receipt key, in a file (0600) only the store
//! (`ANKUSA_STORE_RECEIPT_KEY_FILE`) and the intake (`--receipt-key-file`)
//! read, never an edge: every fleet a test starts has receipts on.

use std::io::Read;
use std::sync::OnceLock;

/// What the store reads its accepted edge tokens from (comma separated).
pub const EDGE_TOKENS_ENV: &str = "ANKUSA_STORE_EDGE_TOKENS";
/// What the store reads its accepted operator tokens from (comma separated).
pub const OPERATOR_TOKENS_ENV: &str = "ANKUSA_STORE_OPERATOR_TOKENS";
/// Every variable the store reads tokens or token files from, the refused
/// single-role ones of earlier versions included: a child store starts
/// with none of them unless a test hands it one.
pub const STORE_TOKEN_VARS: [&str; 5] = [
    EDGE_TOKENS_ENV,
    OPERATOR_TOKENS_ENV,
    "ANKUSA_STORE_EDGE_TOKEN_FILE",
    "ANKUSA_STORE_OPERATOR_TOKEN_FILE",
    "ANKUSA_STORE_TOKEN_FILE",
];
/// The single-role variable of earlier versions; the store refuses it.
pub const OLD_STORE_TOKENS_ENV: &str = "ANKUSA_STORE_TOKENS";
/// What the filter reads its token from (through Envoy's environment).
pub const EDGE_TOKEN_ENV: &str = "ANKUSA_STORE_TOKEN";
/// What the store reads its receipt key file's path from.
pub const RECEIPT_KEY_FILE_ENV: &str = "ANKUSA_STORE_RECEIPT_KEY_FILE";
/// The store's receipt mode (`required`, `accept-missing`).
pub const RECEIPTS_ENV: &str = "ANKUSA_STORE_RECEIPTS";
/// The intake's flag and variable for the same file.
pub const INTAKE_RECEIPT_KEY_FLAG: &str = "--receipt-key-file";
pub const INTAKE_RECEIPT_KEY_ENV: &str = "INTAKE_RECEIPT_KEY_FILE";

/// This process's edge token: 32 hex digits from `/dev/urandom`.
pub fn run_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| fresh_token("run"))
}

/// This process's operator token (overrides, resets), never given to an edge.
pub fn operator_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| fresh_token("operator"))
}

/// This process's receipt key: 64 hex digits from `/dev/urandom`.
pub fn receipt_key() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .unwrap_or_else(|e| panic!("cannot read /dev/urandom: {e}"));
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// The file holding [`receipt_key`] (mode 0600, written once per process):
/// what the store and the intake are given.
pub fn receipt_key_file() -> &'static str {
    static FILE: OnceLock<String> = OnceLock::new();
    FILE.get_or_init(|| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = crate::process::scratch_dir("receipt-key").join("receipt.key");
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{}\n", receipt_key()).as_bytes()))
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path.display().to_string()
    })
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

/// `authorization: Bearer <run token>`, for tests that call the store directly
/// as an edge does.
pub fn auth_header() -> (&'static str, String) {
    ("authorization", format!("Bearer {}", run_token()))
}

/// `authorization: Bearer <operator token>`, for tests that change overrides
/// or reset a tenant.
pub fn operator_auth_header() -> (&'static str, String) {
    ("authorization", format!("Bearer {}", operator_token()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_stable_within_a_run() {
        assert_eq!(run_token(), run_token());
        assert_ne!(run_token(), operator_token());
        assert_ne!(fresh_token("a"), fresh_token("a"));
        assert!(run_token().len() >= 16);
    }

    #[test]
    fn the_receipt_key_is_one_file_per_run_only_its_owner_reads() {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(receipt_key_file(), receipt_key_file());
        let text = std::fs::read_to_string(receipt_key_file()).unwrap();
        assert_eq!(text.trim(), receipt_key());
        assert_eq!(receipt_key().len(), 64);
        let mode = std::fs::metadata(receipt_key_file())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
