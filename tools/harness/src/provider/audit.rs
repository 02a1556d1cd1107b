//! Checking a run against what the intake stored: every acknowledged event
//! must be there (else it is lost), and none twice.

use super::profile::Event;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Hooks of this run's events in the intake, counting copies.
    pub stored: u64,
    pub lost: u64,
    pub stored_duplicates: u64,
    /// Up to 10 lost keys.
    pub lost_keys: Vec<String>,
}

/// Reads `GET {intake}/hooks` and compares it with the run's events.
pub fn audit(
    intake: &str,
    tenant: &str,
    source: &str,
    events: &[Event],
    acknowledged: &[bool],
) -> Result<Audit, String> {
    let url = format!("{}/hooks", intake.trim_end_matches('/'));
    let answer = ankusa_testkit::http::request("GET", &url, &[], b"", Duration::from_secs(60))
        .map_err(|e| format!("GET {url} failed: {e}"))?;
    if answer.status != 200 {
        return Err(format!(
            "GET {url} answered {}: {}",
            answer.status,
            answer.text()
        ));
    }
    let hooks: Vec<serde_json::Value> = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("GET {url} is not a JSON array ({e})"))?;
    Ok(compare(&hooks, tenant, source, events, acknowledged))
}

pub fn compare(
    hooks: &[serde_json::Value],
    tenant: &str,
    source: &str,
    events: &[Event],
    acknowledged: &[bool],
) -> Audit {
    let mut copies: HashMap<&str, u64> = events.iter().map(|e| (e.key.as_str(), 0)).collect();
    for hook in hooks {
        if hook["tenant"] != tenant || hook["source"] != source {
            continue;
        }
        if let Some(n) = hook["event_key"].as_str().and_then(|k| copies.get_mut(k)) {
            *n += 1;
        }
    }
    let mut audit = Audit::default();
    for (event, acked) in events.iter().zip(acknowledged) {
        let n = copies.get(event.key.as_str()).copied().unwrap_or(0);
        audit.stored += n;
        audit.stored_duplicates += u64::from(n > 1);
        if *acked && n == 0 {
            audit.lost += 1;
            if audit.lost_keys.len() < 10 {
                audit.lost_keys.push(event.key.clone());
            }
        }
    }
    audit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(key: &str) -> Event {
        Event {
            key: key.into(),
            headers: vec![],
            body: vec![],
        }
    }

    #[test]
    fn counts_lost_and_twice_stored_events_of_this_run_only() {
        let events = [event("a"), event("b"), event("c"), event("d")];
        let hook = |t: &str, s: &str, k: &str| serde_json::json!({"id": "x", "tenant": t, "source": s, "event_key": k});
        let hooks = [
            hook("acme", "gh", "a"),
            hook("acme", "gh", "b"),
            hook("acme", "gh", "b"),
            hook("acme", "other", "c"),
            hook("acme", "gh", "zz"),
        ];
        // c is acknowledged but stored only under another source: lost. d was never acknowledged.
        let audit = compare(&hooks, "acme", "gh", &events, &[true, true, true, false]);
        assert_eq!(
            audit,
            Audit {
                stored: 3,
                lost: 1,
                stored_duplicates: 1,
                lost_keys: vec!["c".into()]
            }
        );
    }
}
