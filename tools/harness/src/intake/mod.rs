//! The sample intake: the upstream "queue writer" behind the edges.
//!
//! Any `POST` stores the hook durably ([`journal`]) and answers
//! `201 {"status":"accepted","id":ID}`; a hook whose (tenant, source, event key)
//! it already holds answers `201 {"status":"accepted","id":OLD,"duplicate":true}`
//! with `x-ankusa-hook-id: OLD`. `GET /hooks` lists what is stored, `GET /stats`
//! counts it and the copies the index caught (`{"hooks":N,"duplicates_caught":N}`),
//! `GET /healthz` answers 200. A hook carrying an `x-ankusa-*` header other
//! than the four the edge sets is refused 400 (the edge removes a sender's).
//! Test headers, obeyed only when started with
//! `--obey-test-headers` (ignored otherwise: they reach it from any sender
//! through the edge): `x-intake-delay-ms: N` sleeps before answering,
//! `x-intake-status: CODE` answers CODE and stores nothing.
//!
//! With a receipt key (`--receipt-key-file`, the store's), every 2xx for a
//! hook it holds that came with `x-ankusa-tenant` carries
//! `x-ankusa-receipt: hex(HMAC-SHA256(key, "ankusa-receipt-v1\n" + tenant +
//! "\n" + id))` for the id it holds the hook under (the older one when it
//! reports a duplicate), the proof the store asks before it commits the
//! hook's claims (`ankusa_core::wire::receipt`). A forced 2xx carries one
//! too: it stands for an upstream that acknowledges the hook.

mod index;
pub mod journal;
mod server;

pub use journal::{Journal, Outcome, Record};
pub use server::{run, Config};

/// Default dedupe window: 72 h, Stripe's and Shopify's retry horizon.
pub const DEFAULT_DEDUPE_TTL_MS: u64 = 72 * 3600 * 1000;
