//! The edges the store heard from lately, counted for every replica alike.
//!
//! Every hit names its edge (`node`). A name sent with an edge token is
//! admitted only within that token's scope and allowance of live names (see
//! [`crate::scope`]), checked in Redis the first time this process hears it
//! (and after it has been quiet for the TTL), so a leaked token can add at
//! most its allowance to the count. The store keeps the names it heard in
//! memory (no Redis work on the hot path) and, about once a second, a
//! background task hands them to one script (`edges.lua`) that checks each
//! scoped name against its scope's allowance again, adds them to a sorted
//! set scored by Redis's clock, drops the names older than the TTL, and
//! returns the count. Every answer carries the last count (`edges`), so an
//! edge always knows by how many live edges to divide a fleet quota when it
//! has to answer alone (see `ankusa_core::limit::share`). Store replicas share the
//! set, so they agree; the key has its own hash tag, so it works on Redis
//! Cluster.

use crate::backend::Backend;
use crate::errors::StoreError;
use crate::keys;
use crate::live_names::LiveNames;
use crate::scope::{NodeRefusal, Scope};
use redis::{Script, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `ankusa:{edges}:live`: sorted set of edge names, scored by when each was
/// last heard (unix ms on Redis's clock).
pub const KEY: &str = keys::LIVE_EDGES;

/// Most distinct names kept between two refreshes; further names wait for
/// the next one (edges are authenticated callers, so this is never reached
/// by a real fleet; it bounds memory whatever arrives).
pub const MAX_HEARD: usize = 10_000;

const SCRIPT: &str = include_str!("scripts/edges.lua");

/// What `edges.lua` answers: the fleet's count, and the names it refused, by scope.
type Ran = (u64, Vec<(Arc<Scope>, String)>);

/// The names heard since the last refresh: those of callers with no scope
/// (operators), and those of each edge-token scope.
#[derive(Default)]
struct Heard {
    free: HashSet<String>,
    scoped: HashMap<Arc<Scope>, HashSet<String>>,
    total: usize,
}

impl Heard {
    fn note(&mut self, scope: Option<&Arc<Scope>>, node: &str) {
        if self.total >= MAX_HEARD {
            return;
        }
        let names = match scope {
            None => &mut self.free,
            Some(scope) if !self.scoped.contains_key(scope) => {
                self.scoped.entry(Arc::clone(scope)).or_default()
            }
            Some(scope) => match self.scoped.get_mut(scope) {
                Some(names) => names,
                None => return,
            },
        };
        // Most hits come from a name already heard: no allocation then.
        if !names.contains(node) {
            names.insert(node.to_string());
            self.total += 1;
        }
    }
}

pub struct LiveEdges {
    heard: Mutex<Heard>,
    /// The names Redis admitted for each scope lately.
    names: LiveNames,
    /// The last count the script returned (0: none yet).
    count: AtomicU64,
    ttl: Duration,
    script: Script,
}

impl LiveEdges {
    pub fn new(ttl: Duration) -> LiveEdges {
        LiveEdges {
            heard: Mutex::new(Heard::default()),
            names: LiveNames::new(ttl),
            count: AtomicU64::new(0),
            ttl,
            script: Script::new(SCRIPT),
        }
    }

    /// A hit from `node`, sent with a token of `scope` (None: an operator's):
    /// counted at the next refresh.
    pub fn note(&self, scope: Option<&Arc<Scope>>, node: &str) {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        heard.note(scope, node);
    }

    /// Admits `node` for a token of `scope` (None: any name): at once when
    /// Redis admitted it lately, else by asking Redis, which admits a new
    /// name only within the scope's allowance of live names. The name is
    /// then noted for the next refresh.
    pub async fn admit(
        &self,
        backend: &Backend,
        scope: Option<&Arc<Scope>>,
        node: &str,
    ) -> Result<(), StoreError> {
        if let Some(scope) = scope {
            if !self.names.is_live(scope, node) {
                let one = [(Arc::clone(scope), vec![node.to_string()])];
                let (count, refused) = self.run(backend, &[], &one).await?;
                self.store_count(backend, count);
                if !refused.is_empty() {
                    return Err(StoreError::NodeForbidden {
                        node: node.to_string(),
                        why: NodeRefusal::Allowance {
                            live: scope.live(),
                            ttl_ms: self.ttl_ms(),
                        },
                    });
                }
                self.names.confirm(scope, node);
            }
        }
        self.note(scope, node);
        Ok(())
    }

    /// What answers carry: the last count, None before the first.
    pub fn count(&self) -> Option<u64> {
        Some(self.count.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    fn store_count(&self, backend: &Backend, count: u64) {
        self.count.store(count, Ordering::Relaxed);
        let shown = i64::try_from(count).unwrap_or(i64::MAX);
        backend.metrics.live_edges.set(shown);
    }

    /// Runs `edges.lua` over `free` names and each scope's names: the
    /// fleet's count, and the names refused, by scope.
    async fn run(
        &self,
        backend: &Backend,
        free: &[String],
        scoped: &[(Arc<Scope>, Vec<String>)],
    ) -> Result<Ran, StoreError> {
        let mut conn = backend.conn()?;
        let mut call = self.script.key(KEY);
        call.arg(self.ttl_ms()).arg(free.len());
        for name in free {
            call.arg(name);
        }
        for (scope, names) in scoped {
            call.key(keys::live_names(scope.nodes()));
            call.arg(scope.live()).arg(names.len());
            for name in names {
                call.arg(name);
            }
        }
        let reply = call
            .invoke_async::<Vec<Value>>(&mut conn)
            .await
            .map_err(|e| StoreError::from_redis(&e))?;
        parse_reply(&reply, scoped)
    }

    /// Sends the names heard since the last refresh and reads the count; the
    /// names Redis refused are forgotten (their next hit is asked again, and
    /// refused). On a failure the names are kept for the next try.
    pub async fn refresh(&self, backend: &Backend) -> Result<u64, StoreError> {
        let heard = {
            let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *heard)
        };
        let free: Vec<String> = heard.free.iter().cloned().collect();
        let scoped: Vec<(Arc<Scope>, Vec<String>)> = heard
            .scoped
            .iter()
            .map(|(scope, names)| (Arc::clone(scope), names.iter().cloned().collect()))
            .collect();
        match self.run(backend, &free, &scoped).await {
            Ok((count, refused)) => {
                self.store_count(backend, count);
                for (scope, names) in &scoped {
                    for name in names {
                        self.names.confirm(scope, name);
                    }
                }
                for (scope, name) in &refused {
                    self.names.forget(scope, name);
                }
                Ok(count)
            }
            Err(e) => {
                let mut now = self.heard.lock().unwrap_or_else(|p| p.into_inner());
                for name in &heard.free {
                    now.note(None, name);
                }
                for (scope, names) in &heard.scoped {
                    for name in names {
                        now.note(Some(scope), name);
                    }
                }
                Err(e)
            }
        }
    }

    /// Refreshes every `every` until the task is aborted.
    pub fn spawn(
        self: &Arc<Self>,
        backend: Arc<Backend>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let edges = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = edges.refresh(&backend).await {
                    tracing::debug!("live edges: {e}");
                }
            }
        })
    }
}

/// `edges.lua`'s reply: the count, then (scope index, name) pairs refused.
fn parse_reply(reply: &[Value], scoped: &[(Arc<Scope>, Vec<String>)]) -> Result<Ran, StoreError> {
    let unexpected = || StoreError::Internal(format!("unexpected edges script reply {reply:?}"));
    let Some(Value::Int(count)) = reply.first() else {
        return Err(unexpected());
    };
    let mut refused = Vec::new();
    for pair in reply[1..].chunks(2) {
        let (Some(Value::Int(k)), Some(Value::BulkString(name))) = (pair.first(), pair.get(1))
        else {
            return Err(unexpected());
        };
        let scope = usize::try_from(*k)
            .ok()
            .and_then(|k| k.checked_sub(1))
            .and_then(|k| scoped.get(k))
            .ok_or_else(unexpected)?;
        refused.push((
            Arc::clone(&scope.0),
            String::from_utf8_lossy(name).into_owned(),
        ));
    }
    Ok((u64::try_from(*count).unwrap_or(0), refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(text: &str) -> Arc<Scope> {
        Arc::new(Scope::parse(text.split_whitespace()).unwrap())
    }

    #[test]
    fn the_reply_gives_the_count_and_each_refused_name_by_its_scope() {
        let (a, b) = (scope("nodes=edge-a"), scope("nodes=x-* live=2"));
        let scoped = vec![
            (a, vec!["edge-a".into()]),
            (Arc::clone(&b), vec!["x-1".into()]),
        ];
        let name = |n: &str| Value::BulkString(n.as_bytes().to_vec());
        let (count, refused) =
            parse_reply(&[Value::Int(3), Value::Int(2), name("x-9")], &scoped).unwrap();
        assert_eq!(count, 3);
        assert_eq!(refused, vec![(b, "x-9".to_string())]);
        assert_eq!(parse_reply(&[Value::Int(0)], &scoped).unwrap().1, vec![]);
        for bad in [
            vec![],
            vec![Value::Int(1), Value::Int(3), name("x")],
            vec![Value::Int(1), Value::Int(0), name("x")],
            vec![Value::Int(1), Value::Int(1)],
        ] {
            assert!(
                matches!(parse_reply(&bad, &scoped), Err(StoreError::Internal(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn names_heard_are_kept_once_and_bounded() {
        let mut heard = Heard::default();
        let a = scope("nodes=edge-a");
        for _ in 0..3 {
            heard.note(Some(&a), "edge-a");
            heard.note(None, "op");
        }
        assert_eq!(heard.total, 2);
        for i in 0..MAX_HEARD + 10 {
            heard.note(None, &format!("n{i}"));
        }
        assert_eq!(heard.total, MAX_HEARD);
    }
}
