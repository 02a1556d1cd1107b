//! The Lua scripts, compiled into the binary. `redis::Script` sends EVALSHA
//! and falls back to loading the script on NOSCRIPT (a restarted Redis has an
//! empty script cache).

use redis::{Cmd, Script};

/// The GCRA function shared by the hit script and the parity tests.
pub const GCRA_LUA: &str = include_str!("scripts/gcra.lua");
const HIT_BODY: &str = include_str!("scripts/hit.lua");
const SETTLE_LUA: &str = include_str!("scripts/settle.lua");
const CLAIMS_RELEASE_LUA: &str = include_str!("scripts/claims_release.lua");

pub struct Scripts {
    pub hit: Script,
    /// Promote and release: each moves a claim only while the caller's hook
    /// holds it pending.
    pub settle: Script,
    /// An operator's release of a claim a node left pending (see `claims`).
    pub claims_release: Script,
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
        Scripts {
            hit: Script::new(&hit),
            settle: Script::new(SETTLE_LUA),
            claims_release: Script::new(CLAIMS_RELEASE_LUA),
            loads: [load(&hit), load(SETTLE_LUA)],
        }
    }
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new()
    }
}

/// The hit script as Redis runs it: the GCRA function, then the body.
pub fn hit_source() -> String {
    format!("{GCRA_LUA}\n{HIT_BODY}")
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
}
