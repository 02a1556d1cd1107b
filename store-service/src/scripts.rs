//! The Lua scripts, compiled into the binary. `redis::Script` sends EVALSHA
//! and falls back to loading the script on NOSCRIPT (a restarted Redis has an
//! empty script cache).

use redis::Script;

/// The GCRA function shared by the hit script and the parity tests.
pub const GCRA_LUA: &str = include_str!("scripts/gcra.lua");
const HIT_BODY: &str = include_str!("scripts/hit.lua");
const SETTLE_LUA: &str = include_str!("scripts/settle.lua");

pub struct Scripts {
    pub hit: Script,
    /// The hit script's text, loaded ahead of each `/v1/hits` pipeline.
    pub hit_text: String,
    /// Promote and release: each moves a claim only while the caller's hook
    /// holds it pending.
    pub settle: Script,
    /// The settle script's text, loaded ahead of each pipeline that settles.
    pub settle_text: &'static str,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            hit: Script::new(&hit_source()),
            hit_text: hit_source(),
            settle: Script::new(SETTLE_LUA),
            settle_text: SETTLE_LUA,
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
