//! The sample intake as a real process: what it stores, what it answers for a
//! copy it already holds, and what survives a restart.

use ankusa_core::wire::receipt;
use ankusa_testkit::http::{self, Response};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::token::receipt_key;
use std::time::{Duration, Instant};

fn post(intake: &Intake, headers: &[(&str, &str)], body: &str) -> Response {
    http::request(
        "POST",
        &format!("{}/hook", intake.url()),
        headers,
        body.as_bytes(),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("POST to the intake failed: {e}\n{}", intake.proc.log_tail()))
}

fn hook_headers<'a>(id: &'a str, source: &'a str, key: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("x-ankusa-hook-id", id),
        ("x-ankusa-tenant", "acme"),
        ("x-ankusa-source", source),
        ("x-ankusa-event-key", key),
    ]
}

fn stored_ids(intake: &Intake) -> Vec<String> {
    intake
        .hooks()
        .iter()
        .map(|h| h["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn stores_a_hook_and_lists_it() {
    let intake = Intake::start();
    let answer = post(
        &intake,
        &hook_headers("h-1", "gh", "delivery-1"),
        r#"{"a":1}"#,
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(
        answer.json(),
        serde_json::json!({"status": "accepted", "id": "h-1"})
    );
    assert_eq!(
        intake.hooks(),
        vec![
            serde_json::json!({"id": "h-1", "tenant": "acme", "source": "gh", "event_key": "delivery-1"})
        ]
    );
    let journal =
        std::fs::read_to_string(intake.dir.join("data/hooks.jsonl")).expect("journal exists");
    assert!(
        journal.contains(r#""body":"{\"a\":1}""#),
        "body kept in the journal: {journal}"
    );
}

#[test]
fn a_hook_without_an_id_gets_a_fresh_uuid_v7() {
    let intake = Intake::start();
    let first = post(&intake, &[], "x").json();
    let second = post(&intake, &[], "x").json();
    let id = first["id"].as_str().expect("id in the answer").to_string();
    assert_eq!(
        (id.len(), id.as_bytes()[14]),
        (36, b'7'),
        "not a UUIDv7: {id}"
    );
    assert_ne!(
        first["id"], second["id"],
        "no key: both stored under their own ids"
    );
    assert_eq!(intake.hooks().len(), 2);
    assert_eq!(intake.hooks()[0]["event_key"], serde_json::Value::Null);
}

#[test]
fn a_second_copy_answers_the_first_id_and_is_not_stored() {
    let intake = Intake::start();
    assert_eq!(
        post(&intake, &hook_headers("h-1", "gh", "k"), "one").status,
        201
    );
    let again = post(&intake, &hook_headers("h-2", "gh", "k"), "two");
    assert_eq!(again.status, 201);
    assert_eq!(
        again.json(),
        serde_json::json!({"status": "accepted", "id": "h-1", "duplicate": true})
    );
    assert_eq!(again.header("x-ankusa-hook-id"), Some("h-1"));
    // The same key from another source is another event.
    let other_source = post(&intake, &hook_headers("h-3", "stripe", "k"), "three");
    assert_eq!(other_source.json()["id"], "h-3");
    assert_eq!(stored_ids(&intake), vec!["h-1", "h-3"]);
}

#[test]
fn copies_racing_in_together_are_stored_once() {
    let intake = Intake::start();
    let url = intake.url();
    let answers: Vec<Response> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let url = url.clone();
                s.spawn(move || {
                    let id = format!("race-{i}");
                    let headers = hook_headers(&id, "gh", "same-key");
                    http::request(
                        "POST",
                        &format!("{url}/h"),
                        &headers,
                        b"{}",
                        Duration::from_secs(10),
                    )
                    .expect("POST")
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|a| a.json()["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(answers.iter().all(|a| a.status == 201));
    assert_eq!(
        ids.len(),
        1,
        "every copy names the one stored hook: {ids:?}"
    );
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.json()["duplicate"] == true)
            .count(),
        15
    );
    assert_eq!(stored_ids(&intake).len(), 1);
    let stats = http::get(&format!("{url}/stats")).expect("GET /stats");
    assert_eq!(
        stats.json(),
        serde_json::json!({"hooks": 1, "duplicates_caught": 15}),
        "the intake counts the copies its index caught"
    );
}

#[test]
fn a_restart_keeps_the_hooks_and_the_dedupe_index() {
    let mut intake = Intake::start();
    for i in 0..5 {
        let (id, key) = (format!("h-{i}"), format!("k-{i}"));
        assert_eq!(
            post(&intake, &hook_headers(&id, "gh", &key), "{}").status,
            201
        );
    }
    let before = intake.hooks();
    intake.stop();
    // A write cut short by a crash leaves half a line; it was never acknowledged.
    let journal = intake.dir.join("data/hooks.jsonl");
    let mut text = std::fs::read(&journal).expect("journal");
    text.extend_from_slice(br#"{"id":"half-writ"#);
    std::fs::write(&journal, text).expect("write journal");

    let (port, dir) = (intake.port, intake.dir.clone());
    drop(intake);
    let intake = Intake::start_on(port, &dir, &[]);
    assert_eq!(intake.hooks(), before, "same hooks after the restart");
    let again = post(&intake, &hook_headers("h-new", "gh", "k-3"), "{}");
    assert_eq!(
        again.json(),
        serde_json::json!({"status": "accepted", "id": "h-3", "duplicate": true})
    );
    assert_eq!(
        post(&intake, &hook_headers("h-5", "gh", "k-5"), "{}").json()["id"],
        "h-5"
    );
    assert_eq!(
        stored_ids(&intake),
        vec!["h-0", "h-1", "h-2", "h-3", "h-4", "h-5"]
    );
}

#[test]
fn a_key_older_than_the_ttl_is_a_new_event() {
    let intake = Intake::start_on(
        ankusa_testkit::ports::free_port(),
        &ankusa_testkit::process::scratch_dir("intake-ttl"),
        &["--dedupe-ttl-ms", "200"],
    );
    assert_eq!(
        post(&intake, &hook_headers("h-1", "gh", "k"), "{}").json()["id"],
        "h-1"
    );
    std::thread::sleep(Duration::from_millis(300));
    let later = post(&intake, &hook_headers("h-2", "gh", "k"), "{}").json();
    assert_eq!(
        later,
        serde_json::json!({"status": "accepted", "id": "h-2"})
    );
    assert_eq!(stored_ids(&intake), vec!["h-1", "h-2"]);
}

/// The receipt of hook `id` of tenant acme under the run's key.
fn receipt_of(id: &str) -> String {
    receipt::receipt(receipt_key().as_bytes(), "acme", id)
}

#[test]
fn a_stored_hook_is_answered_with_its_receipt_and_a_copy_with_the_older_ones() {
    let intake = Intake::start_obeying();
    let first = post(&intake, &hook_headers("h-1", "gh", "k-1"), "{}");
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(
        first.header("x-ankusa-receipt"),
        Some(receipt_of("h-1").as_str())
    );
    // Its own duplicate: the receipt of the id it holds the hook under.
    let copy = post(&intake, &hook_headers("h-2", "gh", "k-1"), "{}");
    assert_eq!(copy.header("x-ankusa-hook-id"), Some("h-1"));
    assert_eq!(
        copy.header("x-ankusa-receipt"),
        Some(receipt_of("h-1").as_str())
    );
    // Nothing stored, nothing proven; a hook with no tenant names no tenant to prove it for.
    let mut failing = hook_headers("h-3", "gh", "k-3");
    failing.push(("x-intake-status", "503"));
    assert_eq!(
        post(&intake, &failing, "{}").header("x-ankusa-receipt"),
        None
    );
    let bare = post(&intake, &[("x-ankusa-hook-id", "h-4")], "{}");
    assert_eq!((bare.status, bare.header("x-ankusa-receipt")), (201, None));
    // A forced 2xx acknowledges the hook as a 2xx does.
    let mut forced = hook_headers("h-5", "gh", "k-5");
    forced.push(("x-intake-status", "201"));
    assert_eq!(
        post(&intake, &forced, "{}").header("x-ankusa-receipt"),
        Some(receipt_of("h-5").as_str())
    );
}

#[test]
fn test_headers_force_a_status_or_a_delay() {
    let intake = Intake::start_obeying();
    let mut headers = hook_headers("h-1", "gh", "k");
    headers.push(("x-intake-status", "503"));
    let forced = post(&intake, &headers, "{}");
    assert_eq!(forced.status, 503);
    assert!(intake.hooks().is_empty(), "a forced status stores nothing");

    let mut headers = hook_headers("h-1", "gh", "k");
    headers.push(("x-intake-delay-ms", "300"));
    let started = Instant::now();
    let delayed = post(&intake, &headers, "{}");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "answered before the requested delay"
    );
    assert_eq!(
        (delayed.status, stored_ids(&intake)),
        (201, vec!["h-1".to_string()])
    );
}

#[test]
fn without_the_test_flag_the_test_headers_are_ignored() {
    // They reach the intake from any sender through the edge: a sender must
    // not hold it for two minutes or have a hook answered and not stored.
    let intake = Intake::start();
    let mut headers = hook_headers("h-1", "gh", "k-1");
    headers.push(("x-intake-status", "503"));
    // Obeyed, this would outlast the client's 10 s and fail the POST.
    headers.push(("x-intake-delay-ms", "120000"));
    let answer = post(&intake, &headers, "{}");
    assert_eq!(
        answer.json(),
        serde_json::json!({"status": "accepted", "id": "h-1"})
    );
    // Not even read: a value the flag would refuse as 400 is ignored too.
    let mut headers = hook_headers("h-2", "gh", "k-2");
    headers.push(("x-intake-status", "abc"));
    assert_eq!(post(&intake, &headers, "{}").status, 201);
    assert_eq!(stored_ids(&intake), ["h-1", "h-2"]);
}

#[test]
fn bad_requests_get_a_4xx_naming_the_header() {
    let intake = Intake::start_obeying();
    let cases: [(&[(&str, &str)], &str); 6] = [
        // The edge removes every x-ankusa-* header a sender sets: one it
        // never sets came from elsewhere.
        (&[("x-ankusa-budget-ms", "7")], "x-ankusa-budget-ms"),
        (
            &[("x-ankusa-tenant", "acme"), ("x-ankusa-tenant", "other")],
            "x-ankusa-tenant",
        ),
        (&[("x-intake-status", "abc")], "x-intake-status"),
        (&[("x-intake-status", "700")], "x-intake-status"),
        (&[("x-intake-delay-ms", "-5")], "x-intake-delay-ms"),
        (
            &[(
                "x-ankusa-hook-id",
                "an-id-far-too-long-for-the-wire-an-id-far-too-long-for-the-wire-x",
            )],
            "x-ankusa-hook-id",
        ),
    ];
    for (headers, name) in cases {
        let answer = post(&intake, headers, "{}");
        assert_eq!(answer.status, 400, "{headers:?}: {}", answer.text());
        let message = answer.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message.contains(name) && message.contains(headers[0].1),
            "message names the header and value: {message}"
        );
    }
    let put = http::request(
        "PUT",
        &format!("{}/hooks", intake.url()),
        &[],
        b"",
        Duration::from_secs(5),
    )
    .expect("PUT");
    assert_eq!(put.status, 405);
    assert_eq!(
        http::get(&format!("{}/nope", intake.url()))
            .expect("GET")
            .status,
        404
    );
    assert_eq!(
        http::get(&format!("{}/healthz", intake.url()))
            .expect("GET")
            .status,
        200
    );
    assert!(intake.hooks().is_empty());
}
