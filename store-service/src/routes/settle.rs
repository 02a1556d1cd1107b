//! `POST /v1/settle`: promote or release claims, coalesced with every other
//! settle in flight (see `batcher`), each promote's receipt checked first
//! (see `receipts`).

use super::{budget, count, json, nodes, read_json, within, Reply, Shared};
use crate::errors::StoreError;
use crate::receipts;
use crate::tokens::Caller;
use ankusa_core::wire::version::WIRE_VERSION;
use ankusa_core::wire::{SettleAnswer, SettleRequest};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};

pub async fn settle(
    shared: &Shared,
    req: Request<Incoming>,
    caller: &Caller,
) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let settle: SettleRequest =
        read_json(shared, req, super::MAX_SETTLE_BODY_BYTES, "settle request").await?;
    settle
        .validate()
        .map_err(|e| StoreError::BadRequest(e.to_string()))?;
    nodes::check_settle(shared, caller, "settle", &settle.ops)?;
    // A promote the receipt check leaves out is answered, not failed:
    // `applied` counts what reached Redis.
    let ops = receipts::screen(&shared.receipts, &shared.backend.metrics, settle.ops);
    if ops.is_empty() {
        count(shared, "settle", "ok");
        return Ok(json(StatusCode::OK, &answer(0)));
    }
    shared.backend.conn()?;
    // Half the time left for Redis work may go on gathering, the rest on the flush.
    let flush_by = tokio::time::Instant::now() + super::deadline(budget) / 2;
    let done = shared.settler.submit(ops, flush_by)?;
    let applied = within(shared, "settle", budget, async move {
        done.await
            .unwrap_or_else(|_| Err(StoreError::Internal("settle flush was dropped".into())))
    })
    .await?;
    count(shared, "settle", "ok");
    Ok(json(StatusCode::OK, &answer(applied)))
}

fn answer(applied: usize) -> SettleAnswer {
    SettleAnswer {
        applied,
        wire: Some(WIRE_VERSION),
    }
}
