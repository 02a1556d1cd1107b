//! The Lua scripts, compiled into the binary. `redis::Script` sends EVALSHA
//! and falls back to loading the script on NOSCRIPT (a restarted Redis has an
//! empty script cache).

use redis::Script;

/// The GCRA function shared by the hit script and the parity tests.
pub const GCRA_LUA: &str = include_str!("scripts/gcra.lua");
const HIT_BODY: &str = include_str!("scripts/hit.lua");
const RELEASE_LUA: &str = include_str!("scripts/release.lua");

pub struct Scripts {
    pub hit: Script,
    /// The hit script's text, loaded ahead of each `/v1/hits` pipeline.
    pub hit_text: String,
    pub release: Script,
    /// The release script's text, for pipelines that must fall back to EVAL.
    pub release_text: &'static str,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            hit: Script::new(&hit_source()),
            hit_text: hit_source(),
            release: Script::new(RELEASE_LUA),
            release_text: RELEASE_LUA,
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
