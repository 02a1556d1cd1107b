//! The bearer tokens the store accepts, by role, and where they are read
//! from. Two roles: an *edge* token may call what an edge needs (`/v1/hit`,
//! `/v1/hits`, `/v1/settle`, and read `/v1/overrides`); an *operator* token
//! may also change overrides and reset a tenant's buckets. Several tokens of
//! each role are accepted at once, so a token can be rotated without a gap.
//!
//! Tokens come from `--edge-token-file` / `--operator-token-file` (one per
//! line) and the `ANKUSA_STORE_EDGE_TOKENS` / `ANKUSA_STORE_OPERATOR_TOKENS`
//! environment variables (comma separated), never from a flag that `ps`
//! would show. They are never logged nor echoed. This module reads no
//! configuration: `config` holds [`RoleTokens`], `auth` uses both.

use crate::scope::Scope;
use ankusa_core::fleet::token::{check_token, constant_time_eq};
use std::path::Path;
use std::sync::Arc;

/// The environment variable holding accepted edge tokens, comma separated.
pub const EDGE_TOKENS_ENV: &str = "ANKUSA_STORE_EDGE_TOKENS";
/// The environment variable holding accepted operator tokens, comma separated.
pub const OPERATOR_TOKENS_ENV: &str = "ANKUSA_STORE_OPERATOR_TOKENS";
/// The single-role variable of earlier versions, refused at start.
pub const OLD_TOKENS_ENV: &str = "ANKUSA_STORE_TOKENS";

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Hits, settles, and reading overrides: what an edge calls.
    Edge,
    /// Everything an edge may, and changing overrides and resetting buckets.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Edge => "edge",
            Role::Operator => "operator",
        }
    }

    /// The flag of this role's token file.
    pub fn file_flag(self) -> &'static str {
        match self {
            Role::Edge => "--edge-token-file",
            Role::Operator => "--operator-token-file",
        }
    }

    /// The environment variable of this role's token list.
    pub fn env(self) -> &'static str {
        match self {
            Role::Edge => EDGE_TOKENS_ENV,
            Role::Operator => OPERATOR_TOKENS_ENV,
        }
    }
}

/// One accepted token and, for an edge token, the node names it speaks
/// for (see [`crate::scope`]).
#[derive(Clone, PartialEq, Eq)]
struct Token {
    secret: String,
    scope: Arc<Scope>,
}

/// Accepted tokens of one role. `Debug` shows how many, never which.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Tokens(Vec<Token>);

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} redacted)", self.0.len())
    }
}

impl Tokens {
    /// Tokens given in code (tests and embedders), each a token line
    /// (`<token> [nodes=… live=…]`) checked as an edge token file's.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Result<Tokens, String> {
        let mut all = Tokens::default();
        for (i, t) in tokens.iter().enumerate() {
            all.push_line(t.as_ref(), Role::Edge, &format!("token {}", i + 1))?;
        }
        Ok(all)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `presented` is one of these tokens (constant time per token).
    pub fn accepts(&self, presented: &[u8]) -> bool {
        self.find(presented).is_some()
    }

    /// The scope of `presented`, if it is one of these tokens. Every token
    /// is compared, whichever matches, so the timing doesn't say which.
    pub fn find(&self, presented: &[u8]) -> Option<&Arc<Scope>> {
        self.0.iter().fold(None, |found, t| {
            let same = constant_time_eq(presented, t.secret.as_bytes());
            if same && found.is_none() {
                Some(&t.scope)
            } else {
                found
            }
        })
    }

    /// How many tokens speak for any name (no `nodes=` on their line).
    pub fn unscoped(&self) -> usize {
        self.0.iter().filter(|t| !t.scope.is_declared()).count()
    }

    /// Reads one line: the token, then (edge tokens only) its scope's
    /// fields. Errors name `origin` and the field, never the token.
    fn push_line(&mut self, line: &str, role: Role, origin: &str) -> Result<(), String> {
        let mut words = line.split_whitespace();
        let token = words.next().unwrap_or("");
        check_token(token).map_err(|e| format!("{origin}: the token {e}"))?;
        let scope = match role {
            Role::Edge => Scope::parse(words).map_err(|e| format!("{origin}: {e}"))?,
            Role::Operator if words.next().is_some() => {
                return Err(format!(
                    "{origin}: an operator token speaks for every node: nothing may follow it \
                     on its line (nodes= and live= are for edge tokens)"
                ))
            }
            Role::Operator => Scope::unscoped(),
        };
        match self.0.iter().find(|t| t.secret == token) {
            Some(t) if *t.scope != scope => Err(format!(
                "{origin}: this token is listed before with another scope ({}); list it once",
                t.scope.describe()
            )),
            Some(_) => Ok(()),
            None => {
                self.0.push(Token {
                    secret: token.to_string(),
                    scope: Arc::new(scope),
                });
                Ok(())
            }
        }
    }

    /// These tokens and those of `other`.
    pub fn extend(&mut self, other: &Tokens) {
        for t in &other.0 {
            if !self.0.iter().any(|mine| mine.secret == t.secret) {
                self.0.push(t.clone());
            }
        }
    }

    /// Reads a role's environment list: comma separated items, each a
    /// token line; blanks skipped; errors name the variable and the item,
    /// never the token.
    pub fn from_list(text: &str, role: Role) -> Result<Tokens, String> {
        let mut all = Tokens::default();
        for (i, t) in text.split(',').map(str::trim).enumerate() {
            if !t.is_empty() {
                all.push_line(t, role, &format!("{} item {}", role.env(), i + 1))?;
            }
        }
        Ok(all)
    }

    /// Reads a role's token file: one token per line (an edge token may be
    /// followed by its scope, `nodes=… live=…`); blank lines and `#`
    /// comments are skipped. A file with no token is refused: it would lock
    /// every caller of that role out.
    pub fn from_file(path: &Path, role: Role) -> Result<Tokens, String> {
        let flag = role.file_flag();
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{flag} {shown}: cannot read it: {e}"))?;
        let mut all = Tokens::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            all.push_line(line, role, &format!("{flag} {shown} line {}", n + 1))?;
        }
        if all.is_empty() {
            return Err(format!("{flag} {shown}: holds no token"));
        }
        Ok(all)
    }
}

/// Who a request's token says the caller is: its role, and for an edge
/// token the node names it speaks for (None: any, with no allowance; an
/// operator, or every caller under `--insecure-no-auth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub role: Role,
    pub scope: Option<Arc<Scope>>,
}

impl Caller {
    /// An operator: every call, any node name.
    pub fn operator() -> Caller {
        Caller {
            role: Role::Operator,
            scope: None,
        }
    }
}

/// The accepted tokens of both roles.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleTokens {
    pub edge: Tokens,
    pub operator: Tokens,
}

impl RoleTokens {
    pub fn is_empty(&self) -> bool {
        self.edge.is_empty() && self.operator.is_empty()
    }

    pub fn of(&self, role: Role) -> &Tokens {
        match role {
            Role::Edge => &self.edge,
            Role::Operator => &self.operator,
        }
    }

    pub fn of_mut(&mut self, role: Role) -> &mut Tokens {
        match role {
            Role::Edge => &mut self.edge,
            Role::Operator => &mut self.operator,
        }
    }

    /// The role `presented` holds; a token listed in both roles is an
    /// operator's. Every accepted token is compared, whatever matched.
    pub fn role_of(&self, presented: &[u8]) -> Option<Role> {
        self.caller_of(presented).map(|c| c.role)
    }

    /// The caller `presented` makes: its role and, for an edge token, its
    /// scope. Every accepted token is compared, whatever matched.
    pub fn caller_of(&self, presented: &[u8]) -> Option<Caller> {
        let operator = self.operator.accepts(presented);
        let edge = self.edge.find(presented);
        match (operator, edge) {
            (true, _) => Some(Caller::operator()),
            (false, Some(scope)) => Some(Caller {
                role: Role::Edge,
                scope: Some(Arc::clone(scope)),
            }),
            (false, None) => None,
        }
    }

    /// "2 edge, 1 operator": for log lines.
    pub fn summary(&self) -> String {
        format!("{} edge, {} operator", self.edge.len(), self.operator.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "token-a-0123456789";
    const B: &str = "token-b-0123456789";
    const C: &str = "token-c-0123456789";

    #[test]
    fn a_token_file_holds_one_token_per_line() {
        let dir = std::env::temp_dir().join(format!("ankusa-tokens-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("tokens");
        std::fs::write(&file, format!("# rotation\n{A}\n\n  {B}  \n")).unwrap();
        assert_eq!(
            Tokens::from_file(&file, Role::Edge).unwrap(),
            Tokens::new(&[A, B]).unwrap()
        );
        std::fs::write(&file, "# nothing yet\n\n").unwrap();
        let err = Tokens::from_file(&file, Role::Operator).unwrap_err();
        assert!(
            err.contains("--operator-token-file") && err.contains("holds no token"),
            "{err}"
        );
        std::fs::write(&file, format!("{A}\nshort\n")).unwrap();
        let err = Tokens::from_file(&file, Role::Edge).unwrap_err();
        assert!(
            err.contains("--edge-token-file")
                && err.contains("line 2")
                && err.contains("at least 16"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_edge_token_line_carries_its_scope_and_errors_never_show_the_token() {
        let dir = std::env::temp_dir().join(format!("ankusa-scopes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("edge.tokens");
        std::fs::write(
            &file,
            format!("{A} nodes=edge-a\n{B}   nodes=edge-* live=4\n{C}\n"),
        )
        .unwrap();
        let tokens = Tokens::from_file(&file, Role::Edge).unwrap();
        let scope = |t: &str| tokens.find(t.as_bytes()).map(|s| s.describe());
        assert_eq!(scope(A).as_deref(), Some("nodes=edge-a live=1"));
        assert_eq!(scope(B).as_deref(), Some("nodes=edge-* live=4"));
        assert!(scope(C).is_some_and(|s| s.contains("unscoped")));
        assert_eq!(tokens.unscoped(), 1);
        assert_eq!(scope("token-d-0123456789"), None);

        std::fs::write(
            &file,
            format!("{A} nodes=edge-a\n{B} nodes=edge-* live=lots\n"),
        )
        .unwrap();
        let err = Tokens::from_file(&file, Role::Edge).unwrap_err();
        assert!(
            err.contains("--edge-token-file")
                && err.contains("line 2")
                && err.contains("live=\"lots\"")
                && !err.contains(B),
            "{err}"
        );
        std::fs::write(&file, format!("{A} nodes=edge-a\n{A} nodes=edge-b\n")).unwrap();
        let err = Tokens::from_file(&file, Role::Edge).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("another scope") && !err.contains(A),
            "{err}"
        );
        std::fs::write(&file, format!("{A} nodes=edge-a\n")).unwrap();
        let err = Tokens::from_file(&file, Role::Operator).unwrap_err();
        assert!(
            err.contains("--operator-token-file") && err.contains("line 1") && !err.contains(A),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_edge_environment_list_carries_scopes_too() {
        let tokens = Tokens::from_list(
            &format!("{A} nodes=edge-a, {B} nodes=edge-* live=2"),
            Role::Edge,
        )
        .unwrap();
        let a = tokens.find(A.as_bytes()).unwrap();
        assert!(a.permits("edge-a") && !a.permits("edge-b"));
        assert_eq!(tokens.find(B.as_bytes()).map(|s| s.live()), Some(2));
        let err = Tokens::from_list(&format!("{A} nodes=edge-a,{B} nodes=edge/*"), Role::Edge)
            .unwrap_err();
        assert!(
            err.contains("ANKUSA_STORE_EDGE_TOKENS item 2")
                && err.contains("edge/*")
                && !err.contains(B),
            "{err}"
        );
    }

    #[test]
    fn an_edge_caller_carries_its_tokens_scope_and_an_operator_none() {
        let tokens = RoleTokens {
            edge: Tokens::new(&[format!("{A} nodes=edge-a")]).unwrap(),
            operator: Tokens::new(&[C]).unwrap(),
        };
        let edge = tokens.caller_of(A.as_bytes()).unwrap();
        assert_eq!(edge.role, Role::Edge);
        assert!(edge
            .scope
            .is_some_and(|s| s.permits("edge-a") && !s.permits("edge-b")));
        assert_eq!(tokens.caller_of(C.as_bytes()), Some(Caller::operator()));
    }

    #[test]
    fn the_environment_lists_are_comma_separated_and_named_by_role() {
        assert_eq!(
            Tokens::from_list(&format!(" {A}, ,{B},"), Role::Edge).unwrap(),
            Tokens::new(&[A, B]).unwrap()
        );
        let err = Tokens::from_list("tiny", Role::Operator).unwrap_err();
        assert!(
            err.contains("ANKUSA_STORE_OPERATOR_TOKENS item 1") && !err.contains("tiny"),
            "{err}"
        );
    }

    #[test]
    fn a_token_in_both_roles_is_an_operators() {
        let tokens = RoleTokens {
            edge: Tokens::new(&[A, B]).unwrap(),
            operator: Tokens::new(&[B, C]).unwrap(),
        };
        assert_eq!(tokens.role_of(A.as_bytes()), Some(Role::Edge));
        assert_eq!(tokens.role_of(B.as_bytes()), Some(Role::Operator));
        assert_eq!(tokens.role_of(C.as_bytes()), Some(Role::Operator));
        assert_eq!(tokens.role_of(b"token-d-0123456789"), None);
        assert_eq!(tokens.summary(), "2 edge, 2 operator");
    }

    #[test]
    fn debug_output_never_shows_a_token() {
        let tokens = RoleTokens {
            edge: Tokens::new(&[A]).unwrap(),
            operator: Tokens::new(&[B]).unwrap(),
        };
        let shown = format!("{tokens:?}");
        assert!(!shown.contains(A) && !shown.contains(B), "{shown}");
    }
}
