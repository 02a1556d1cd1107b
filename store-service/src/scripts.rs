//! The Lua scripts, compiled into the binary. `redis::Script` sends EVALSHA
//! and falls back to loading the script on NOSCRIPT (a restarted Redis has an
//! empty script cache).

use redis::{Cmd, Script};

/// The GCRA function shared by the hit script and the parity tests.
pub const GCRA_LUA: &str = include_str!("scripts/gcra.lua");
/// The claim functions (both layouts) the hit and settle scripts share.
pub const CLAIMS_LUA: &str = include_str!("scripts/claims.lua");
const HIT_BODY: &str = include_str!("scripts/hit.lua");
const SETTLE_BODY: &str = include_str!("scripts/settle_batch.lua");
const CLAIMS_RELEASE_LUA: &str = include_str!("scripts/claims_release.lua");
const COMMITS_RELEASE_BODY: &str = include_str!("scripts/commits_release.lua");

pub struct Scripts {
    pub hit: Script,
    /// Promotes and releases of one tenant, a batch per call: each moves a
    /// claim only while the caller's hook holds it pending.
    pub settle: Script,
    /// An operator's release of a claim a node left pending (see `claims`).
    pub claims_release: Script,
    /// An operator's removal of a commit a node made unproven (see `commits`).
    pub commits_release: Script,
    /// `SCRIPT LOAD` of the hit script, then of the settle script: what a
    /// pipeline of hits (`..1`) or of hits and settles (`..`) sends first
    /// after a `NOSCRIPT` or a redirect, and a settle flush (`[1]`) every
    /// time. Built once: each holds a script's text.
    pub loads: [Cmd; 2],
}

impl Scripts {
    pub fn new() -> Scripts {
        let load = |text: &str| {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(text);
            load
        };
        let hit = hit_source();
        let settle = settle_source();
        Scripts {
            hit: Script::new(&hit),
            settle: Script::new(&settle),
            claims_release: Script::new(CLAIMS_RELEASE_LUA),
            commits_release: Script::new(&format!("{CLAIMS_LUA}\n{COMMITS_RELEASE_BODY}")),
            loads: [load(&hit), load(&settle)],
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new()
    }
}

/// The hit script as Redis runs it: the GCRA function, the claim functions, then the body.
pub fn hit_source() -> String {
    format!("{GCRA_LUA}\n{CLAIMS_LUA}\n{HIT_BODY}")
}

/// The settle script as Redis runs it: the claim functions, then the body.
pub fn settle_source() -> String {
    format!("{CLAIMS_LUA}\n{SETTLE_BODY}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_is_kept_no_longer_than_the_longest_claim() {
        let line = HIT_BODY
            .lines()
            .find_map(|l| l.strip_prefix("local MAX_BUCKET_TTL_MS = "))
            .expect("hit.lua names its bucket TTL cap");
        let cap: u64 = line.trim().parse().expect("a whole number of ms");
        assert_eq!(cap, ankusa_core::limit::limits::TTL_MS.max);
    }

    #[test]
    fn the_scripts_and_the_store_agree_on_the_compact_layout() {
        let constant = |name: &str| -> u64 {
            let line = CLAIMS_LUA
                .lines()
                .find_map(|l| l.strip_prefix(&format!("local {name} = ")))
                .expect("claims.lua names it");
            line.trim().parse().expect("a whole number")
        };
        assert_eq!(constant("COMMITTED_FILL"), crate::committed::BUCKET_FILL);
        assert_eq!(constant("DIGEST_LEN"), crate::committed::DIGEST_LEN as u64);
    }
}
