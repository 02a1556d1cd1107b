//! The wire's compatibility corpus (`core/tests/wire-corpus/vX.Y.Z/`): every
//! message between edge and store as that release sends it, one JSON file a
//! message. Today's edge reads every answer of every release, and today's
//! store every request (store-service/tests/wire_corpus.rs); a change that
//! breaks an older sample fails here, and CHANGELOG.md must say so.
//!
//! The samples of the current release are written by this file's
//! `write_current_release` (run with `ANKUSA_WRITE_CORPUS=1`), from the same
//! functions the edge builds its bodies with; those of older releases are
//! never rewritten.

#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::fleet::overrides::page::OverridePage;
use ankusa_core::hook::batch::{split, with_settle};
use ankusa_core::hook::plan::parse_reply;
use ankusa_core::hook::settle::{request_body, Queued};
use ankusa_core::wire::batch::{HitResult, HitsAnswer};
use ankusa_core::wire::receipt;
use ankusa_core::wire::version::StoreWire;
use ankusa_core::wire::version::{FIRST, WIRE_VERSION};
use ankusa_core::wire::{
    Charge, ChargeKind, Claim, ErrorBody, HitAnswer, HitReply, HitRequest, Override, SettleAnswer,
    SettleOp, HITS_PATH, HIT_PATH,
};
use std::path::{Path, PathBuf};

/// The receipt key of the corpus's samples: a store checking receipts
/// against it (store-service/tests/it/wire_compat.rs) applies every
/// release's promote.
pub const CORPUS_RECEIPT_KEY: &[u8] = b"ankusa-wire-corpus-receipt-key-0123456789";

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wire-corpus")
}

/// Every release's folder, oldest first.
fn releases() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(corpus_root())
        .expect("read core/tests/wire-corpus")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_dir())
        .collect();
    all.sort();
    all
}

fn samples(release: &Path, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(release)
        .expect("read a release's corpus")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json"))
        })
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read a sample");
            (p.display().to_string(), bytes)
        })
        .collect();
    found.sort();
    found
}

fn claim(source: &str, key: &str, hook_id: &str) -> Claim {
    Claim {
        tenant: "acme".into(),
        source_id: source.into(),
        key: key.into(),
        hook_id: hook_id.into(),
        node: "edge-1".into(),
        ttl_ms: 259_200_000,
        pending_ttl_ms: 30_000,
    }
}

fn full_hit() -> HitRequest {
    HitRequest {
        charges: vec![
            Charge {
                kind: ChargeKind::Hooks,
                tenant: "acme".into(),
                units: 1,
                rate: 500,
                burst: 1000,
            },
            Charge {
                kind: ChargeKind::Bytes,
                tenant: "acme".into(),
                units: 2048,
                rate: 1_048_576,
                burst: 4_194_304,
            },
        ],
        claim: Some(claim(
            "gh",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "01a22a58-b525-7a36-ac16-fe50dd6137bd",
        )),
        replay: Some(claim(
            "replay.body",
            "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "01a22a58-b525-7a36-ac16-fe50dd6137bd",
        )),
        node: Some("edge-1".into()),
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
    }
}

fn quota_only_hit() -> HitRequest {
    HitRequest {
        charges: vec![Charge {
            kind: ChargeKind::Hooks,
            tenant: "acme".into(),
            units: 1,
            rate: 50,
            burst: 100,
        }],
        claim: None,
        replay: None,
        node: Some("edge-2".into()),
        traceparent: None,
    }
}

fn settle_ops() -> Vec<Queued> {
    let promote = SettleOp::Promote {
        claim: claim(
            "gh",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "01a22a58-b525-7a36-ac16-fe50dd6137bd",
        ),
        hook_id: "01a22a58-b525-7a36-ac16-fe50dd6137bd".into(),
        // Since wire 2: the intake's receipt for the hook (a v0.1.0 store,
        // wire 1, is sent the promote without it).
        receipt: (WIRE_VERSION >= receipt::SINCE).then(|| {
            receipt::receipt(
                CORPUS_RECEIPT_KEY,
                "acme",
                "01a22a58-b525-7a36-ac16-fe50dd6137bd",
            )
        }),
    };
    let release = SettleOp::Release {
        claim: claim(
            "stripe",
            "evt_1NG8Du2eZvKYlo2CUI79vXWy",
            "01a22a58-b695-77a4-9fb0-14a9c28f56f0",
        ),
    };
    [promote, release]
        .into_iter()
        .map(|op| Queued { retries: 0, op })
        .collect()
}

fn an_override() -> Override {
    Override {
        tenant: "acme".into(),
        rate: Some(200),
        burst: Some(400),
        bytes_rate: None,
        bytes_burst: None,
        shadow: None,
        expires_at_ms: Some(1_796_000_000_000),
        version: 1_795_000_000_123,
    }
}

/// The `wire` a store of this release names in its answers (wire 1, v0.1.0's, names none).
fn wire_of_answers() -> Option<u32> {
    (WIRE_VERSION > FIRST).then_some(WIRE_VERSION)
}

/// What this release sends, named as the tests read them: `edge-*` files
/// are requests (the store reads them), `store-*` files answers (the edge
/// reads them).
fn current_samples() -> Vec<(&'static str, Vec<u8>)> {
    let json = |v: &dyn erased::Ser| v.to_vec();
    let hit_body = serde_json::to_vec(&full_hit()).expect("hit JSON");
    let hits_body = {
        let list: Vec<Vec<u8>> = [full_hit(), quota_only_hit()]
            .iter()
            .map(|h| serde_json::to_vec(h).expect("hit JSON"))
            .collect();
        let mut body = b"{\"hits\":[".to_vec();
        body.extend_from_slice(&list.join(&b","[..]));
        body.extend_from_slice(b"]}");
        body
    };
    // Written for a store of this release's wire.
    let store = || {
        let mut wire = StoreWire::default();
        wire.heard(wire_of_answers());
        wire
    };
    let (_, riding) = with_settle(HITS_PATH, hits_body.clone(), &settle_ops(), store());
    let reply = |answer: HitAnswer, in_force: Option<Override>, levels: Vec<u64>| HitReply {
        answer,
        in_force,
        levels,
        edges: Some(2),
        wire: wire_of_answers(),
        unknown_fields: 0,
    };
    let hits_answer = HitsAnswer {
        results: vec![
            // A batch names the store's version once, not in each hit's reply.
            HitResult::Reply(HitReply {
                wire: None,
                ..reply(HitAnswer::Ok, None, vec![998_000_000, 4_192_256_000_000])
            }),
            HitResult::Refused(ErrorBody {
                error: "bad_request".into(),
                message: "hits[1].claim.key: \"\" is not 1 to 200 bytes".into(),
            }),
        ],
        settled: Some(2),
        wire: wire_of_answers(),
    };
    let page = OverridePage {
        epoch: "1795000000000-ab12".into(),
        version: 1_795_000_000_123,
        gap: false,
        more: false,
        overrides: vec![an_override()],
        deleted: vec!["globex".into()],
        ..OverridePage::default()
    };
    vec![
        ("edge-hit-full.json", hit_body),
        (
            "edge-hit-quota-only.json",
            serde_json::to_vec(&quota_only_hit()).expect("hit JSON"),
        ),
        ("edge-hits.json", hits_body),
        ("edge-hits-with-settle.json", riding),
        ("edge-settle.json", request_body(&settle_ops(), store())),
        (
            "store-hit-ok.json",
            json(&reply(
                HitAnswer::Ok,
                Some(an_override()),
                vec![998_000_000, 4_192_256_000_000],
            )),
        ),
        (
            "store-hit-duplicate.json",
            json(&reply(
                HitAnswer::Duplicate {
                    hook_id: "01a22a58-b525-7a36-ac16-fe50dd6137bd".into(),
                },
                None,
                Vec::new(),
            )),
        ),
        (
            "store-hit-pending.json",
            json(&reply(
                HitAnswer::Pending {
                    retry_after_ms: 28_750,
                },
                None,
                Vec::new(),
            )),
        ),
        (
            "store-hit-rate-limited.json",
            json(&reply(
                HitAnswer::RateLimited {
                    retry_after_ms: 1_200,
                },
                None,
                Vec::new(),
            )),
        ),
        ("store-hits.json", json(&hits_answer)),
        (
            "store-settle.json",
            json(&SettleAnswer {
                applied: 2,
                wire: wire_of_answers(),
            }),
        ),
        (
            "store-error.json",
            json(&ErrorBody {
                error: "bad_request".into(),
                message: "claim.ttl_ms: 0 is below 1000".into(),
            }),
        ),
        ("store-overrides.json", json(&page)),
    ]
}

/// Serializing the samples' different types through one closure.
mod erased {
    pub trait Ser {
        fn to_vec(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_vec(&self) -> Vec<u8> {
            serde_json::to_vec_pretty(self).expect("sample JSON")
        }
    }
}

/// `ANKUSA_WRITE_CORPUS=1 cargo test -p ankusa-core --test wire_corpus`:
/// (re)writes the current release's samples; without it, checks they are
/// what this code sends.
#[test]
fn current_release_samples_are_what_this_code_sends() {
    let release = corpus_root().join(format!("v{}", env!("CARGO_PKG_VERSION")));
    let write = std::env::var_os("ANKUSA_WRITE_CORPUS").is_some();
    if write {
        std::fs::create_dir_all(&release).expect("make the release's corpus folder");
    }
    for (name, bytes) in current_samples() {
        let path = release.join(name);
        if write {
            std::fs::write(&path, &bytes).expect("write a sample");
            continue;
        }
        let kept = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; write this release's samples with ANKUSA_WRITE_CORPUS=1",
                path.display()
            )
        });
        let (kept, now): (serde_json::Value, serde_json::Value) = (
            serde_json::from_slice(&kept).expect("a kept sample is JSON"),
            serde_json::from_slice(&bytes).expect("a sample is JSON"),
        );
        assert_eq!(
            kept,
            now,
            "{} is not what this release sends: the wire changed; write the samples again (ANKUSA_WRITE_CORPUS=1) and say so in CHANGELOG.md",
            path.display()
        );
    }
}

/// Every release's answers, read by today's edge exactly as it reads a
/// store's answer: each hit answer is an answer (never "unparsable"), a
/// batch gives each hook its own result, a settle answer is a success, an
/// override page is a page.
#[test]
fn todays_edge_reads_every_releases_answers() {
    let releases = releases();
    assert!(
        releases.len() >= 2,
        "the corpus holds the previous release and this one: {releases:?}"
    );
    for release in &releases {
        let hits = samples(release, "store-hit-");
        assert_eq!(hits.len(), 4, "{}: four hit answers", release.display());
        // v0.1.0's store names no wire version (wire 1); v0.2.0's names 2.
        let named = match release.file_name().and_then(|n| n.to_str()) {
            Some("v0.1.0") => Some(None),
            Some("v0.2.0") => Some(Some(2)),
            _ => None,
        };
        for (name, body) in hits {
            let reply = parse_reply(Some("200"), Some(&body));
            assert!(reply.is_ok(), "{name}: {reply:?}");
            let reply = reply.unwrap_or_else(|e| panic!("{name}: {e:?}"));
            if let Some(named) = named {
                assert_eq!(reply.wire, named, "{name}");
            }
            assert_eq!(reply.unknown_fields, 0, "{name}: every field known");
        }
        for (name, body) in samples(release, "store-hits.json") {
            let (shares, settled) = split(HITS_PATH, 2, Some("200"), Some(&body));
            assert!(shares[0].is_ok(), "{name}: the first hook's reply");
            assert!(shares[1].is_err(), "{name}: the second hook's refusal");
            assert_eq!(settled, Some(2), "{name}: the riding settle operations");
        }
        for (name, body) in samples(release, "store-settle.json") {
            let answer: SettleAnswer = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("{name}: not a settle answer: {e}"));
            assert_eq!(answer.applied, 2, "{name}");
        }
        for (name, body) in samples(release, "store-overrides.json") {
            let size = body.len();
            let page =
                ankusa_core::fleet::overrides::node_list::parse_page(Some("200"), size, || {
                    Some(body)
                })
                .unwrap_or_else(|e| panic!("{name}: not an override page: {e:?}"));
            assert_eq!(page.overrides.len(), 1, "{name}");
        }
        for (name, body) in samples(release, "store-error.json") {
            let error: ErrorBody = serde_json::from_slice(&body)
                .unwrap_or_else(|e| panic!("{name}: not an error body: {e}"));
            assert!(!error.error.is_empty(), "{name}");
        }
        // The single hit's path is the same reader.
        let _ = HIT_PATH;
    }
}
