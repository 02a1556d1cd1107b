//! Receipts: a promote commits a claim only with the upstream's proof that
//! it stored the hook ([`ankusa_core::wire::receipt`]).
//!
//! With a receipt key (`--receipt-key-file`), every promote is checked
//! before it reaches Redis, in `/v1/settle` and in the settles riding
//! `/v1/hits`, against its claim's tenant and the hook id it commits under:
//!
//! | receipt | `required` (the default) | `accept-missing` |
//! |---|---|---|
//! | valid | applied | applied |
//! | missing | not applied: the claim stays pending and expires after its pending TTL, so the sender's retry is admitted | applied (v0.1.0 edges send none) |
//! | invalid | not applied | not applied |
//!
//! A promote left unapplied is the store's answer to it, not a failure of
//! its batch: the batch is answered 200 and the edge does not send it again.
//! Releases need no receipt (a release only frees a claim its hook holds).
//! Each check is counted in `ankusa_store_receipts_total{result,applied}`.
//! Without a key receipts are off and every promote is applied, as before
//! receipts existed; the store says so at start.

use crate::metrics::Metrics;
use ankusa_core::wire::{receipt, SettleOp};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;

/// What a promote without a receipt does (`--receipts`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Not applied: only a proven promote commits a claim.
    Required,
    /// Applied, for the upgrade window while edges that send none (v0.1.0) still run.
    AcceptMissing,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Required => "required",
            Mode::AcceptMissing => "accept-missing",
        }
    }
}

/// The receipt keys. `Debug` shows how many, never which.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keys(Vec<Vec<u8>>);

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({} redacted)", self.0.len())
    }
}

impl Keys {
    /// Keys given in code (tests, embedders), each checked as a file's line is.
    pub fn new<S: AsRef<str>>(keys: &[S]) -> Result<Keys, String> {
        let text = keys
            .iter()
            .map(|k| k.as_ref().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        receipt::keys_of_file(&text, "receipt keys").map(Keys)
    }

    /// Every key line of `--receipt-key-file PATH` (see
    /// [`receipt::keys_of_file`]); errors name the file and the line, never a key.
    pub fn from_file(path: &Path) -> Result<Keys, String> {
        let origin = format!("--receipt-key-file {}", path.display());
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read it: {e}"))?;
        receipt::keys_of_file(&text, &origin).map(Keys)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The store's receipt policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receipts {
    /// No key: every promote is applied unproven.
    Off,
    On {
        mode: Mode,
        keys: Keys,
    },
}

/// The check of one promote's receipt (the `result` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Missing,
    Invalid,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Missing => "missing",
            Verdict::Invalid => "invalid",
        }
    }
}

impl Receipts {
    /// The policy of the keys given in code (`in_code`), those of the key
    /// file (`file`, `--receipt-key-file`) and `--receipts` (`mode`). A mode
    /// without a key is refused (it would check nothing while saying it does).
    pub fn new(
        in_code: &Keys,
        file: Option<&Path>,
        mode: Option<Mode>,
    ) -> Result<Receipts, String> {
        let mut keys = in_code.clone();
        if let Some(path) = file {
            for key in Keys::from_file(path)?.0 {
                if !keys.0.contains(&key) {
                    keys.0.push(key);
                }
            }
        }
        match (keys.is_empty(), mode) {
            (true, None) => Ok(Receipts::Off),
            (true, Some(mode)) => Err(format!(
                "--receipts {} needs a receipt key: give --receipt-key-file PATH \
                 (ANKUSA_STORE_RECEIPT_KEY_FILE), or drop --receipts to leave promotes unproven",
                mode.as_str()
            )),
            (false, mode) => Ok(Receipts::On {
                mode: mode.unwrap_or(Mode::Required),
                keys,
            }),
        }
    }

    /// The start-up log line: the policy, or a warning that commits are unproven.
    pub fn announce(&self) {
        match self {
            Receipts::On { mode, keys } => tracing::info!(
                "promotes need the upstream's receipt ({} key(s); --receipts {})",
                keys.len(),
                mode.as_str()
            ),
            Receipts::Off => tracing::warn!(
                "no --receipt-key-file: promotes are committed without the upstream's receipt, \
                 so anyone holding an edge token can make a delivery look like a duplicate \
                 (docs/tokens.md)"
            ),
        }
    }

    /// The check of `op` and whether it is applied; None for what is not
    /// checked (a release, or any op while receipts are off).
    pub fn judge(&self, op: &SettleOp) -> Option<(Verdict, bool)> {
        let Receipts::On { mode, keys } = self else {
            return None;
        };
        let SettleOp::Promote {
            claim,
            hook_id,
            receipt,
        } = op
        else {
            return None;
        };
        Some(match receipt {
            Some(r) if receipt::verify(&keys.0, &claim.tenant, hook_id, r) => {
                (Verdict::Valid, true)
            }
            Some(_) => (Verdict::Invalid, false),
            None => (Verdict::Missing, *mode == Mode::AcceptMissing),
        })
    }
}

/// The policy as routes see it; the key file can be read again while the
/// store runs (SIGHUP), so it sits behind a lock.
pub type SharedReceipts = Arc<RwLock<Receipts>>;

/// The settle operations of `ops` to apply, in order: each promote's
/// receipt checked and counted (`ankusa_store_receipts_total{result,applied}`).
/// A promote returned holds a receipt only when it was verified: one sent
/// to a store without a key is returned without it, so what is applied
/// unproven reads as such (and is indexed by node, see `commits`).
pub fn screen(receipts: &SharedReceipts, metrics: &Metrics, ops: Vec<SettleOp>) -> Vec<SettleOp> {
    let receipts = receipts.read().unwrap_or_else(|p| p.into_inner());
    if *receipts == Receipts::Off {
        return ops.into_iter().map(unproven).collect();
    }
    ops.into_iter()
        .filter(|op| match receipts.judge(op) {
            None => true,
            Some((verdict, applied)) => {
                metrics.receipt(verdict.as_str(), applied);
                applied
            }
        })
        .collect()
}

/// `op` as applied without a check: a promote's receipt dropped.
fn unproven(op: SettleOp) -> SettleOp {
    match op {
        SettleOp::Promote { claim, hook_id, .. } => SettleOp::Promote {
            claim,
            hook_id,
            receipt: None,
        },
        release => release,
    }
}

/// Reads the key file (`file`) again on every SIGHUP, beside the keys
/// given in code and the mode the store started with, so a key can be added
/// or removed without a restart (as the token files are). A file that can't
/// be used is logged and the keys in force are kept.
pub fn spawn_reload_on_sighup(
    in_code: Keys,
    file: PathBuf,
    mode: Option<Mode>,
    receipts: SharedReceipts,
) -> Option<JoinHandle<()>> {
    let mut hangup = signal(SignalKind::hangup())
        .map_err(|e| tracing::warn!("SIGHUP will not reload the receipt key file: {e}"))
        .ok()?;
    Some(tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            match Receipts::new(&in_code, Some(&file), mode) {
                Ok(fresh) => {
                    if let Receipts::On { keys, .. } = &fresh {
                        tracing::info!(
                            "SIGHUP: --receipt-key-file {} read again ({} key(s))",
                            file.display(),
                            keys.len()
                        );
                    }
                    *receipts.write().unwrap_or_else(|p| p.into_inner()) = fresh;
                }
                Err(e) => tracing::error!("SIGHUP: {e}; the receipt keys in force are kept"),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::wire::Claim;

    const KEY: &str = "receipt-key-0123456789abcdef0123456789";

    fn promote(hook_id: &str, receipt: Option<String>) -> SettleOp {
        SettleOp::Promote {
            claim: Claim {
                tenant: "acme".into(),
                source_id: "gh".into(),
                key: "k".into(),
                hook_id: "h-edge".into(),
                node: "edge-1".into(),
                ttl_ms: 60_000,
                pending_ttl_ms: 5_000,
            },
            hook_id: hook_id.into(),
            receipt,
        }
    }

    fn on(mode: Mode) -> Receipts {
        Receipts::On {
            mode,
            keys: Keys::new(&[KEY]).unwrap(),
        }
    }

    #[test]
    fn each_mode_judges_a_valid_missing_and_invalid_receipt() {
        let valid = promote("h-1", Some(receipt::receipt(KEY.as_bytes(), "acme", "h-1")));
        let missing = promote("h-1", None);
        // A receipt of another hook proves nothing about this one.
        let invalid = promote("h-2", Some(receipt::receipt(KEY.as_bytes(), "acme", "h-1")));
        let required = on(Mode::Required);
        assert_eq!(required.judge(&valid), Some((Verdict::Valid, true)));
        assert_eq!(required.judge(&missing), Some((Verdict::Missing, false)));
        assert_eq!(required.judge(&invalid), Some((Verdict::Invalid, false)));
        let upgrading = on(Mode::AcceptMissing);
        assert_eq!(upgrading.judge(&missing), Some((Verdict::Missing, true)));
        assert_eq!(upgrading.judge(&invalid), Some((Verdict::Invalid, false)));
        assert_eq!(Receipts::Off.judge(&missing), None);
        let SettleOp::Promote { claim, .. } = missing else {
            unreachable!()
        };
        assert_eq!(required.judge(&SettleOp::Release { claim }), None);
    }

    #[test]
    fn a_mode_needs_a_key_and_a_key_alone_means_required() {
        let none = Keys::default();
        assert_eq!(Receipts::new(&none, None, None), Ok(Receipts::Off));
        let e = Receipts::new(&none, None, Some(Mode::AcceptMissing)).unwrap_err();
        assert!(
            e.contains("--receipts accept-missing needs a receipt key"),
            "{e}"
        );
        let key = Keys::new(&[KEY]).unwrap();
        assert_eq!(Receipts::new(&key, None, None), Ok(on(Mode::Required)));
    }

    #[test]
    fn debug_output_never_shows_a_key() {
        let shown = format!("{:?}", on(Mode::Required));
        assert!(
            !shown.contains(KEY) && shown.contains("1 redacted"),
            "{shown}"
        );
    }
}
