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

use ankusa_core::fleet::token::{check_token, matches_any};
use std::path::Path;

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

/// Accepted tokens of one role. `Debug` shows how many, never which.
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

    /// Whether `presented` is one of these tokens (constant time per token).
    pub fn accepts(&self, presented: &[u8]) -> bool {
        matches_any(presented, &self.0)
    }

    fn push(&mut self, token: &str, origin: &str) -> Result<(), String> {
        check_token(token).map_err(|e| format!("{origin}: the token {e}"))?;
        if !self.0.iter().any(|t| t == token) {
            self.0.push(token.to_string());
        }
        Ok(())
    }

    /// These tokens and those of `other`.
    pub fn extend(&mut self, other: &Tokens) {
        for t in &other.0 {
            if !self.0.contains(t) {
                self.0.push(t.clone());
            }
        }
    }

    /// Reads a role's environment list: comma separated, blanks skipped;
    /// errors name the variable and the item, never the token.
    pub fn from_list(text: &str, role: Role) -> Result<Tokens, String> {
        let mut all = Tokens::default();
        for (i, t) in text.split(',').map(str::trim).enumerate() {
            if !t.is_empty() {
                all.push(t, &format!("{} item {}", role.env(), i + 1))?;
            }
        }
        Ok(all)
    }

    /// Reads a role's token file: one token per line; blank lines and `#`
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
            all.push(line, &format!("{flag} {shown} line {}", n + 1))?;
        }
        if all.is_empty() {
            return Err(format!("{flag} {shown}: holds no token"));
        }
        Ok(all)
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
        let operator = self.operator.accepts(presented);
        let edge = self.edge.accepts(presented);
        match (operator, edge) {
            (true, _) => Some(Role::Operator),
            (false, true) => Some(Role::Edge),
            (false, false) => None,
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
