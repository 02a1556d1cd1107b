//! Who may call `/v1/*`: the policy the store starts with (tokens by role,
//! or none behind `--insecure-no-auth`), the check of one request's bearer
//! token, and SIGHUP re-reading the token files. The tokens themselves are
//! [`crate::tokens`]; the role each endpoint needs is [`crate::endpoint`]'s.

use crate::config::Config;
use crate::tokens::{Caller, Role, RoleTokens, Tokens, OLD_TOKENS_ENV};
use ankusa_core::fleet::token::bearer_token;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;

/// The tokens of `config`: those given in code or by the environment
/// (`config.tokens`) and those of each role's token file. The single-role
/// `--token-file` of earlier versions is refused: its tokens did everything,
/// and the store won't guess which role they should now have.
fn gather(config: &Config) -> Result<RoleTokens, String> {
    if let Some(path) = &config.token_file {
        return Err(format!(
            "--token-file {}: the store now has two kinds of token; give the edges' tokens \
             with --edge-token-file (or {}) and the operators' with --operator-token-file \
             (or {})",
            path.display(),
            Role::Edge.env(),
            Role::Operator.env()
        ));
    }
    let mut tokens = config.tokens.clone();
    for role in [Role::Edge, Role::Operator] {
        if let Some(path) = config.token_file_of(role) {
            tokens.of_mut(role).extend(&Tokens::from_file(path, role)?);
        }
    }
    Ok(tokens)
}

/// The message refusing the single-role variable of earlier versions.
pub fn old_tokens_env_refused() -> String {
    format!(
        "{OLD_TOKENS_ENV} is set: the store now has two kinds of token; give the edges' tokens \
         in {} (or --edge-token-file) and the operators' in {} (or --operator-token-file)",
        Role::Edge.env(),
        Role::Operator.env()
    )
}

/// The policy as routes see it; the token files can be read again while
/// the store runs (SIGHUP), so it sits behind a lock.
pub type SharedAuth = Arc<RwLock<Auth>>;

/// Reads each role's token file again on every SIGHUP, so a token can be
/// added or removed without a restart. A file that can't be used
/// (unreadable, empty, a malformed token) is logged and that role's tokens
/// in force are kept; the other role's file is read all the same.
pub fn spawn_reload_on_sighup(config: Config, auth: SharedAuth) -> Option<JoinHandle<()>> {
    if config.edge_token_file.is_none() && config.operator_token_file.is_none() {
        return None;
    }
    let mut hangup = signal(SignalKind::hangup())
        .map_err(|e| tracing::warn!("SIGHUP will not reload the token files: {e}"))
        .ok()?;
    Some(tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            let mut tokens = match &*auth.read().unwrap_or_else(|p| p.into_inner()) {
                Auth::Required(tokens) => tokens.clone(),
                Auth::Off => continue,
            };
            for role in [Role::Edge, Role::Operator] {
                let Some(path) = config.token_file_of(role) else {
                    continue;
                };
                match Tokens::from_file(path, role) {
                    Ok(file) => {
                        let mut fresh = config.tokens.of(role).clone();
                        fresh.extend(&file);
                        tracing::info!(
                            "SIGHUP: {} read again ({} {} accepted)",
                            role.file_flag(),
                            fresh.len(),
                            role.as_str()
                        );
                        *tokens.of_mut(role) = fresh;
                        if role == Role::Edge {
                            warn_unscoped(&tokens.edge);
                        }
                    }
                    Err(e) => tracing::error!(
                        "SIGHUP: {e}; the {} tokens in force are kept",
                        role.as_str()
                    ),
                }
            }
            *auth.write().unwrap_or_else(|p| p.into_inner()) = Auth::Required(tokens);
        }
    }))
}

/// Warns of edge tokens whose line names no node (the 0.2.0 format): each
/// may speak for any name, up to its allowance of live names.
fn warn_unscoped(edge: &Tokens) {
    let unscoped = edge.unscoped();
    if unscoped > 0 {
        tracing::warn!(
            "{unscoped} edge token(s) name no node: each may speak for any node name, {} live \
             at once; give each edge its own token with `nodes=NAME` (or `nodes=PREFIX-* live=N`) \
             on its line (docs/tokens.md, \"Node names\")",
            crate::scope::UNSCOPED_LIVE
        );
    }
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
    /// Every `/v1/*` call must carry one of these tokens; its role decides
    /// what it may call.
    Required(RoleTokens),
    /// `--insecure-no-auth`: something in front (mTLS) authenticates callers.
    Off,
}

impl Auth {
    /// Gathers the tokens of `config` (its `tokens`, the token files) and
    /// decides the policy for a store listening on `listen`. With no token
    /// the store refuses to start unless `--insecure-no-auth` is given.
    pub fn from_config(config: &Config, listen: SocketAddr) -> Result<Auth, String> {
        let tokens = gather(config)?;
        match (tokens.is_empty(), config.insecure_no_auth) {
            (false, true) => Err(format!(
                "--insecure-no-auth and tokens ({}) were both given: drop one of them",
                tokens.summary()
            )),
            (false, false) => Ok(Auth::Required(tokens)),
            (true, true) => Ok(Auth::Off),
            (true, false) => Err(format!(
                "no store token: give --edge-token-file PATH and --operator-token-file PATH \
                 (one token per line), or {} and {} (comma separated), to listen on {listen}, \
                 or --insecure-no-auth when something in front of the store authenticates its \
                 callers",
                Role::Edge.env(),
                Role::Operator.env()
            )),
        }
    }

    /// The start-up log line: how many tokens of each role, or a loud warning.
    pub fn announce(&self, listen: SocketAddr) {
        match self {
            Auth::Required(tokens) => {
                tracing::info!(
                    "/v1/* calls need a bearer token ({} accepted)",
                    tokens.summary()
                );
                warn_unscoped(&tokens.edge);
                if tokens.operator.is_empty() {
                    tracing::info!(
                        "no operator token: overrides can't be changed nor tenants reset"
                    );
                }
            }
            Auth::Off => {
                let where_ = if listen.ip().is_loopback() {
                    "loopback"
                } else {
                    "a non-loopback address"
                };
                tracing::warn!(
                    "--insecure-no-auth: /v1/* calls on {where_} ({listen}) are NOT authenticated; \
                     anyone who reaches this port can change overrides and reset any tenant"
                );
            }
        }
    }

    /// Checks one request's `authorization` header value: the caller's role
    /// and, for an edge token, the node names it speaks for. With
    /// `--insecure-no-auth` every caller is an operator.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<Caller, Refusal> {
        let Auth::Required(tokens) = self else {
            return Ok(Caller::operator());
        };
        let presented = authorization
            .and_then(bearer_token)
            .ok_or(Refusal::Missing)?;
        tokens.caller_of(presented).ok_or(Refusal::Invalid)
    }
}

#[cfg(test)]
mod tests;
