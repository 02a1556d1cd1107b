//! Who may call `/v1/*`: the bearer tokens the store accepts, where they are
//! read from, and the start-up policy. Several tokens are accepted at once so
//! a token can be rotated without a gap: add the new one to the store, roll
//! the edges onto it, remove the old one.
//!
//! Tokens come from `--token-file` (one per line) and the
//! `ANKUSA_STORE_TOKENS` environment variable (comma separated), never from a
//! flag that `ps` would show. They are never logged nor echoed. SIGHUP reads
//! the token file again.

use crate::config::Config;
use ankusa_core::token::{bearer_token, check_token, matches_any};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, RwLock};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;

/// The environment variable holding accepted tokens, comma separated.
pub const TOKENS_ENV: &str = "ANKUSA_STORE_TOKENS";

/// Accepted tokens. `Debug` shows how many, never which.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Tokens(Vec<String>);

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} redacted)", self.0.len())
    }
}

impl Tokens {
    /// Tokens given in code (tests and embedders), each checked.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Result<Tokens, String> {
        let mut all = Tokens::default();
        for (i, t) in tokens.iter().enumerate() {
            all.push(t.as_ref().trim(), &format!("token {}", i + 1))?;
        }
        Ok(all)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn push(&mut self, token: &str, origin: &str) -> Result<(), String> {
        check_token(token).map_err(|e| format!("{origin}: the token {e}"))?;
        if !self.0.iter().any(|t| t == token) {
            self.0.push(token.to_string());
        }
        Ok(())
    }

    fn extend(&mut self, other: &Tokens) {
        for t in &other.0 {
            if !self.0.contains(t) {
                self.0.push(t.clone());
            }
        }
    }

    /// Reads `ANKUSA_STORE_TOKENS`-style text: comma separated, blanks skipped.
    pub fn from_list(text: &str) -> Result<Tokens, String> {
        let mut all = Tokens::default();
        for (i, t) in text.split(',').map(str::trim).enumerate() {
            if !t.is_empty() {
                all.push(t, &format!("{TOKENS_ENV} item {}", i + 1))?;
            }
        }
        Ok(all)
    }

    /// Reads a token file: one token per line; blank lines and `#` comments
    /// are skipped. A file with no token is refused: it would lock every
    /// edge out, or (with no other token) leave the store open.
    pub fn from_file(path: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--token-file {shown}: cannot read it: {e}"))?;
        let mut all = Tokens::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            all.push(line, &format!("--token-file {shown} line {}", n + 1))?;
        }
        if all.is_empty() {
            return Err(format!("--token-file {shown}: holds no token"));
        }
        Ok(all)
    }
}

/// The tokens of `config`: its `tokens` (from ANKUSA_STORE_TOKENS) and those
/// of `--token-file`.
fn gather(config: &Config) -> Result<Tokens, String> {
    let mut tokens = config.tokens.clone();
    if let Some(path) = &config.token_file {
        tokens.extend(&Tokens::from_file(path)?);
    }
    Ok(tokens)
}

/// The policy as routes see it; `--token-file` can be read again while the
/// store runs (SIGHUP), so it sits behind a lock.
pub type SharedAuth = Arc<RwLock<Auth>>;

/// Reads `--token-file` again on every SIGHUP, so a token can be added or
/// removed without a restart. A file that can't be used (unreadable, empty,
/// a malformed token) is logged and the tokens in force are kept.
pub fn spawn_reload_on_sighup(config: Config, auth: SharedAuth) -> Option<JoinHandle<()>> {
    config.token_file.as_ref()?;
    let mut hangup = signal(SignalKind::hangup())
        .map_err(|e| log::warn!("SIGHUP will not reload --token-file: {e}"))
        .ok()?;
    Some(tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            match gather(&config) {
                Ok(tokens) if !tokens.is_empty() => {
                    log::info!("SIGHUP: token file read again ({} accepted)", tokens.len());
                    *auth.write().unwrap_or_else(|p| p.into_inner()) = Auth::Required(tokens);
                }
                Ok(_) => log::error!("SIGHUP: no token read; the tokens in force are kept"),
                Err(e) => log::error!("SIGHUP: {e}; the tokens in force are kept"),
            }
        }
    }))
}

/// Why a `/v1/*` call was refused (the `reason` label of
/// `ankusa_store_unauthorized_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `authorization: Bearer …` header.
    Missing,
    /// A bearer token the store does not accept.
    Invalid,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Invalid => "invalid",
        }
    }
}

/// The store's policy, fixed at start.
#[derive(Clone, Debug)]
pub enum Auth {
    /// Every `/v1/*` call must carry one of these tokens.
    Required(Tokens),
    /// `--insecure-no-auth`: something in front (mTLS) authenticates callers.
    Off,
}

impl Auth {
    /// Gathers the tokens of `config` (its `tokens`, `--token-file`) and
    /// decides the policy for a store listening on `listen`. With no token
    /// the store refuses to start unless `--insecure-no-auth` is given.
    pub fn from_config(config: &Config, listen: SocketAddr) -> Result<Auth, String> {
        let tokens = gather(config)?;
        match (tokens.is_empty(), config.insecure_no_auth) {
            (false, true) => Err(format!(
                "--insecure-no-auth and {} token(s) were both given: drop one of them",
                tokens.len()
            )),
            (false, false) => Ok(Auth::Required(tokens)),
            (true, true) => Ok(Auth::Off),
            (true, false) => Err(format!(
                "no store token: give --token-file PATH (one token per line) or {TOKENS_ENV} \
                 (comma separated) to listen on {listen}, or --insecure-no-auth when something \
                 in front of the store authenticates its callers"
            )),
        }
    }

    /// The start-up log line: how many tokens, or a loud warning.
    pub fn announce(&self, listen: SocketAddr) {
        match self {
            Auth::Required(tokens) => {
                log::info!(
                    "/v1/* calls need a bearer token ({} accepted)",
                    tokens.len()
                )
            }
            Auth::Off => {
                let where_ = if listen.ip().is_loopback() {
                    "loopback"
                } else {
                    "a non-loopback address"
                };
                log::warn!(
                    "--insecure-no-auth: /v1/* calls on {where_} ({listen}) are NOT authenticated; \
                     anyone who reaches this port can settle claims and reset any tenant"
                );
            }
        }
    }

    /// Checks one request's `authorization` header value.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<(), Refusal> {
        let Auth::Required(tokens) = self else {
            return Ok(());
        };
        let presented = authorization
            .and_then(bearer_token)
            .ok_or(Refusal::Missing)?;
        if matches_any(presented, &tokens.0) {
            Ok(())
        } else {
            Err(Refusal::Invalid)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "token-a-0123456789";
    const B: &str = "token-b-0123456789";

    fn listen(addr: &str) -> SocketAddr {
        addr.parse().unwrap()
    }

    #[test]
    fn each_of_several_tokens_is_accepted_and_nothing_else() {
        let auth = Auth::Required(Tokens::new(&[A, B]).unwrap());
        assert_eq!(auth.check(Some(format!("Bearer {A}").as_bytes())), Ok(()));
        assert_eq!(auth.check(Some(format!("Bearer {B}").as_bytes())), Ok(()));
        assert_eq!(
            auth.check(Some(b"Bearer token-c-0123456789")),
            Err(Refusal::Invalid)
        );
        assert_eq!(auth.check(Some(A.as_bytes())), Err(Refusal::Missing));
        assert_eq!(auth.check(None), Err(Refusal::Missing));
        assert_eq!(Auth::Off.check(None), Ok(()));
    }

    #[test]
    fn a_token_file_holds_one_token_per_line() {
        let dir = std::env::temp_dir().join(format!("ankusa-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, format!("# rotation\n{A}\n\n  {B}  \n")).unwrap();
        assert_eq!(
            Tokens::from_file(&file).unwrap(),
            Tokens::new(&[A, B]).unwrap()
        );
        std::fs::write(&file, "# nothing yet\n\n").unwrap();
        let err = Tokens::from_file(&file).unwrap_err();
        assert!(
            err.contains("--token-file") && err.contains("holds no token"),
            "{err}"
        );
        std::fs::write(&file, format!("{A}\nshort\n")).unwrap();
        let err = Tokens::from_file(&file).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("at least 16"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_environment_list_is_comma_separated() {
        assert_eq!(
            Tokens::from_list(&format!(" {A}, ,{B},")).unwrap(),
            Tokens::new(&[A, B]).unwrap()
        );
        let err = Tokens::from_list("tiny").unwrap_err();
        assert!(err.contains(TOKENS_ENV) && !err.contains("tiny"), "{err}");
    }

    #[test]
    fn no_token_refuses_to_start_unless_the_opt_out_is_given() {
        let mut config = Config::for_redis("redis://127.0.0.1:1/");
        config.insecure_no_auth = false;
        for addr in ["127.0.0.1:7070", "0.0.0.0:7070"] {
            let err = Auth::from_config(&config, listen(addr)).unwrap_err();
            assert!(
                err.contains("--token-file") && err.contains("--insecure-no-auth"),
                "{err}"
            );
        }
        config.insecure_no_auth = true;
        assert!(matches!(
            Auth::from_config(&config, listen("0.0.0.0:7070")),
            Ok(Auth::Off)
        ));
        config.tokens = Tokens::new(&[A]).unwrap();
        assert!(Auth::from_config(&config, listen("127.0.0.1:7070")).is_err());
        config.insecure_no_auth = false;
        assert!(matches!(
            Auth::from_config(&config, listen("0.0.0.0:7070")),
            Ok(Auth::Required(t)) if t.len() == 1
        ));
    }

    #[test]
    fn debug_output_never_shows_a_token() {
        let shown = format!("{:?}", Tokens::new(&[A]).unwrap());
        assert!(!shown.contains(A), "{shown}");
    }
}
