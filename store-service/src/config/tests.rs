use super::*;
use clap::CommandFactory;

/// The flags table of the store's README: (flag, env, default).
fn documented() -> Vec<(String, String, String)> {
    let cell = |c: &str| c.trim().trim_matches('`').to_string();
    include_str!("../../README.md")
        .lines()
        .filter(|l| l.starts_with("| `--"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            let flag = cell(cells[1]);
            let flag = flag
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            (flag, cell(cells[2]), cell(cells[3]))
        })
        .collect()
}

#[test]
fn every_flag_is_documented_with_its_env_and_default() {
    let documented = documented();
    let command = Config::command();
    let flags: Vec<_> = command
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| l != "help" && l != "version"))
        .collect();
    assert_eq!(documented.len(), flags.len(), "{documented:?}");
    for arg in flags {
        let flag = format!("--{}", arg.get_long().unwrap_or_default());
        let (_, env, default) = documented
            .iter()
            .find(|(f, _, _)| *f == flag)
            .unwrap_or_else(|| panic!("{flag} is not in the README's flags table"));
        let env_var = arg.get_env().and_then(|e| e.to_str()).unwrap_or_default();
        assert_eq!(env, env_var, "{flag}");
        let values: Vec<_> = arg
            .get_default_values()
            .iter()
            .filter_map(|v| v.to_str())
            .collect();
        match values.as_slice() {
            [] => assert!(default == "—" || default == "off", "{flag}: {default}"),
            ["false"] => assert_eq!(default, "off", "{flag}"),
            [value] => assert_eq!(default, value, "{flag}"),
            more => panic!("{flag}: {more:?}"),
        }
    }
}

#[test]
fn the_binary_and_an_in_process_server_share_their_timeouts() {
    let binary = Config::parse_from(["ankusa-store"]);
    let embedded = Config::for_redis("redis://127.0.0.1:6379/0");
    assert_eq!(
        binary.header_read_timeout_ms,
        embedded.header_read_timeout_ms
    );
    assert_eq!(binary.max_budget_ms, embedded.max_budget_ms);
    assert_eq!(binary.settle_window_ms, embedded.settle_window_ms);
    assert_eq!(binary.body_read_timeout_ms, embedded.body_read_timeout_ms);
    assert_eq!(binary.max_connections, embedded.max_connections);
}

#[test]
fn the_default_connection_limit_leaves_descriptors_for_redis_and_files() {
    assert_eq!(connections_for(Some(256)), 192);
    assert_eq!(connections_for(Some(1024)), 960);
    // Never so few that nothing gets in, never more than a store needs.
    assert_eq!(connections_for(Some(40)), 16);
    assert_eq!(connections_for(Some(1 << 20)), MAX_DEFAULT_CONNECTIONS);
    assert_eq!(connections_for(None), MAX_DEFAULT_CONNECTIONS);
    let mut config = Config::for_redis("redis://127.0.0.1:6379/0");
    config.max_connections = 7;
    assert_eq!(config.connection_limit(), 7);
}

#[test]
fn passwords_in_redis_urls_are_redacted() {
    assert_eq!(
        redact_url("redis://default:hunter2@h:6379/0"),
        "redis://default:***@h:6379/0"
    );
    assert_eq!(redact_url("redis://:hunter2@h:6379"), "redis://:***@h:6379");
    assert_eq!(redact_url("redis://hunter2@h"), "redis://***@h");
    assert_eq!(
        redact_url("redis+cluster://u:p@w:1,redis://:q@x:2/"),
        "redis+cluster://u:***@w:1,redis://:***@x:2/"
    );
    assert_eq!(redact_url("redis://h:1/0"), "redis://h:1/0");
    assert_eq!(
        redact_url("redis://:p@ss@h:1/0?x=a@b"),
        "redis://:***@h:1/0?x=a@b"
    );
}

#[test]
fn a_refused_url_is_shown_without_its_password() {
    let err = RedisTarget::parse("http://u:hunter2@a:1").unwrap_err();
    assert!(
        !err.contains("hunter2") && err.contains("u:***@a:1"),
        "{err}"
    );
}

#[test]
fn single_list_and_cluster_scheme_are_told_apart() {
    assert_eq!(
        RedisTarget::parse("redis://h:1/0"),
        Ok(RedisTarget::Single("redis://h:1/0".into()))
    );
    assert_eq!(
        RedisTarget::parse("redis://a:1/,redis://b:2/"),
        Ok(RedisTarget::Cluster(vec![
            "redis://a:1/".into(),
            "redis://b:2/".into()
        ]))
    );
    assert_eq!(
        RedisTarget::parse("redis+cluster://a:1,b:2"),
        Ok(RedisTarget::Cluster(vec![
            "redis://a:1/".into(),
            "redis://b:2/".into()
        ]))
    );
}

#[test]
fn unusable_urls_are_refused_naming_the_flag() {
    let err = RedisTarget::parse("http://a:1").unwrap_err();
    assert!(
        err.contains("--redis-url") && err.contains("http://a:1"),
        "{err}"
    );
    assert!(RedisTarget::parse("redis+cluster://").is_err());
}
