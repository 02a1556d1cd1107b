use super::*;

const A: &str = "token-a-0123456789";
const B: &str = "token-b-0123456789";
const OP: &str = "token-o-0123456789";

fn listen(addr: &str) -> SocketAddr {
    addr.parse().unwrap()
}

fn roles() -> RoleTokens {
    RoleTokens {
        edge: Tokens::new(&[A, B]).unwrap(),
        operator: Tokens::new(&[OP]).unwrap(),
    }
}

/// A and B are edge tokens, OP an operator's (with no node scope).
fn assert_the_three_roles(auth: &Auth) {
    let role = |t: &str| {
        auth.check(Some(format!("Bearer {t}").as_bytes()))
            .map(|c| c.role)
    };
    assert_eq!((role(A), role(B)), (Ok(Role::Edge), Ok(Role::Edge)));
    assert_eq!(
        auth.check(Some(format!("Bearer {OP}").as_bytes())),
        Ok(Caller::operator())
    );
}

#[test]
fn each_token_has_its_role_and_nothing_else_is_accepted() {
    let auth = Auth::Required(roles());
    assert_the_three_roles(&auth);
    assert_eq!(
        auth.check(Some(b"Bearer token-c-0123456789")),
        Err(Refusal::Invalid)
    );
    assert_eq!(auth.check(Some(A.as_bytes())), Err(Refusal::Missing));
    assert_eq!(auth.check(None), Err(Refusal::Missing));
    assert_eq!(Auth::Off.check(None), Ok(Caller::operator()));
}

#[test]
fn no_token_refuses_to_start_unless_the_opt_out_is_given() {
    let mut config = Config::for_redis("redis://127.0.0.1:1/");
    config.insecure_no_auth = false;
    for addr in ["127.0.0.1:7070", "0.0.0.0:7070"] {
        let err = Auth::from_config(&config, listen(addr)).unwrap_err();
        assert!(
            err.contains("--edge-token-file")
                && err.contains("--operator-token-file")
                && err.contains("--insecure-no-auth"),
            "{err}"
        );
    }
    config.insecure_no_auth = true;
    assert!(matches!(
        Auth::from_config(&config, listen("0.0.0.0:7070")),
        Ok(Auth::Off)
    ));
    config.tokens = roles();
    assert!(Auth::from_config(&config, listen("127.0.0.1:7070")).is_err());
    config.insecure_no_auth = false;
    assert!(matches!(
        Auth::from_config(&config, listen("0.0.0.0:7070")),
        Ok(Auth::Required(t)) if t.edge.len() == 2 && t.operator.len() == 1
    ));
}

#[test]
fn the_single_role_token_file_is_refused_naming_the_new_flags() {
    let mut config = Config::for_redis("redis://127.0.0.1:1/").with_tokens(roles());
    config.token_file = Some("/etc/ankusa/store.tokens".into());
    let err = Auth::from_config(&config, listen("127.0.0.1:7070")).unwrap_err();
    assert!(
        err.contains("--token-file /etc/ankusa/store.tokens")
            && err.contains("--edge-token-file")
            && err.contains("--operator-token-file"),
        "{err}"
    );
    let err = old_tokens_env_refused();
    assert!(
        err.contains("ANKUSA_STORE_TOKENS")
            && err.contains("ANKUSA_STORE_EDGE_TOKENS")
            && err.contains("ANKUSA_STORE_OPERATOR_TOKENS"),
        "{err}"
    );
}

#[test]
fn each_role_reads_its_own_file() {
    let dir = std::env::temp_dir().join(format!("ankusa-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (edge, operator) = (dir.join("edge"), dir.join("operator"));
    std::fs::write(&edge, format!("{A}\n")).unwrap();
    std::fs::write(&operator, format!("{OP}\n")).unwrap();
    let mut config = Config::for_redis("redis://127.0.0.1:1/");
    config.insecure_no_auth = false;
    config.edge_token_file = Some(edge);
    config.operator_token_file = Some(operator);
    config.tokens.edge = Tokens::new(&[B]).unwrap();
    let Ok(auth) = Auth::from_config(&config, listen("127.0.0.1:7070")) else {
        panic!("refused");
    };
    assert_the_three_roles(&auth);
    let _ = std::fs::remove_dir_all(&dir);
}
