//! The node names a call carries, held against its edge token's scope (see
//! [`crate::scope`]): a name outside it is refused `403` and counted
//! (`ankusa_store_forbidden_total{endpoint,reason="node"}`), a new name past
//! its allowance of live names too (`reason="allowance"`, checked in Redis
//! by [`crate::edges::LiveEdges::admit`]). An operator's call (and every
//! call under `--insecure-no-auth`) may name any node.

use super::Shared;
use crate::errors::StoreError;
use crate::scope::NodeRefusal;
use crate::tokens::Caller;
use ankusa_core::wire::{HitRequest, SettleOp};
use std::time::Duration;

/// Refuses `node` unless the caller's token speaks for it.
pub fn check(
    shared: &Shared,
    caller: &Caller,
    endpoint: &str,
    node: &str,
) -> Result<(), StoreError> {
    match &caller.scope {
        Some(scope) if !scope.permits(node) => Err(counted(
            shared,
            endpoint,
            StoreError::NodeForbidden {
                node: node.to_string(),
                why: NodeRefusal::Outside {
                    nodes: scope.nodes().to_string(),
                },
            },
        )),
        _ => Ok(()),
    }
}

/// Every node a hit names: its own, and its claims'.
pub fn check_hit(
    shared: &Shared,
    caller: &Caller,
    endpoint: &str,
    hit: &HitRequest,
) -> Result<(), StoreError> {
    let claims = hit.claim.iter().chain(&hit.replay).map(|c| c.node.as_str());
    for node in hit.node.as_deref().into_iter().chain(claims) {
        check(shared, caller, endpoint, node)?;
    }
    Ok(())
}

/// Every node the settle operations' claims name.
pub fn check_settle(
    shared: &Shared,
    caller: &Caller,
    endpoint: &str,
    ops: &[SettleOp],
) -> Result<(), StoreError> {
    for op in ops {
        check(shared, caller, endpoint, &op.claim().node)?;
    }
    Ok(())
}

/// Admits the hit's own node name (the one counted among the live edges)
/// within the caller's allowance; the names were [`check`]ed first. Asking
/// Redis (a name this process hasn't seen admitted lately) takes at most
/// the caller's deadline.
pub async fn admit(
    shared: &Shared,
    caller: &Caller,
    endpoint: &str,
    node: &str,
    budget: Duration,
) -> Result<(), StoreError> {
    let admit = shared
        .edges
        .admit(&shared.backend, caller.scope.as_ref(), node);
    let admitted = tokio::time::timeout(super::deadline(budget), admit)
        .await
        .unwrap_or(Err(StoreError::Timeout {
            budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
        }));
    admitted.map_err(|e| counted(shared, endpoint, e))
}

/// Counts a refusal of a node name, by its reason; passes other errors on.
fn counted(shared: &Shared, endpoint: &str, e: StoreError) -> StoreError {
    if let StoreError::NodeForbidden { why, .. } = &e {
        shared
            .backend
            .metrics
            .forbidden
            .with_label_values(&[endpoint, why.label()])
            .inc();
    }
    e
}
