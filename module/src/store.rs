//! The module's store calls: the request every call carries (method, path,
//! `:authority`, the budget header, the store token), and the answer of the
//! callout being handed over. The token is read by name from Envoy's own
//! environment (`ANKUSA_STORE_TOKEN`), never from the filter's
//! configuration, which Envoy's config dump shows.
#![deny(unsafe_code)]

use crate::abi::{Answer, Call};
use ankusa_core::config::{Config, FleetConfig};
use ankusa_core::fleet::token;
use ankusa_core::wire;
use std::cell::RefCell;

/// `Bearer <token>` from the environment (None: no token), or why the
/// token is refused (naming the variable, never the value).
pub fn authorization() -> Result<Option<String>, String> {
    token::edge_authorization(std::env::var(token::EDGE_TOKEN_ENV).ok().as_deref())
}

/// What to log when a configuration that calls the store finds no token.
pub fn missing_token(config: &Config) -> Option<String> {
    let name = token::EDGE_TOKEN_ENV;
    if config.uses_store() {
        Some(format!(
            "ankusa: {name} is not set in Envoy's environment: store calls carry no token; \
             a store that requires one answers 401 and hooks are answered from this node alone"
        ))
    } else if config.polls_overrides() {
        Some(format!(
            "ankusa: {name} is not set in Envoy's environment: override list polls carry no \
             token; a store that requires one answers 401 and the configuration's limits apply"
        ))
    } else {
        None
    }
}

/// A call to the store's `path` through the fleet cluster: a POST of
/// `body`, or a GET when None, with `timeout_ms` as both Envoy's timeout
/// and the budget the store is told. `budget` holds the header's text.
pub fn call<'a>(
    fleet: &'a FleetConfig,
    authorization: Option<&'a str>,
    path: &'a str,
    body: Option<&'a [u8]>,
    timeout_ms: u64,
    budget: &'a mut String,
) -> Call<'a> {
    *budget = timeout_ms.to_string();
    let mut headers = vec![
        (":method", if body.is_some() { "POST" } else { "GET" }),
        (":path", path),
        (":authority", fleet.authority.as_str()),
        (wire::BUDGET_HEADER, budget.as_str()),
    ];
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    if let Some(value) = authorization {
        headers.push(("authorization", value));
    }
    Call {
        cluster: &fleet.cluster,
        headers,
        body: body.unwrap_or_default(),
        timeout_ms,
    }
}

thread_local! {
    /// The answer of the callout being handed over on this thread.
    static ANSWER: RefCell<Answer> = RefCell::new(Answer::default());
}

/// Runs `f` with `answer` as the callout answer being handed over.
pub fn answering<R>(answer: Answer, f: impl FnOnce(usize) -> R) -> R {
    let len = answer.body.len();
    ANSWER.with(|a| *a.borrow_mut() = answer);
    let r = f(len);
    ANSWER.with(|a| *a.borrow_mut() = Answer::default());
    r
}

/// The answer being handed over: `:status` (None: a reset) and up to `body_size` bytes.
pub fn answer(body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
    ANSWER.with(|a| {
        let a = a.borrow();
        let mut body = a.body.clone();
        body.truncate(body_size);
        (a.status.clone(), a.status.as_ref().map(|_| body))
    })
}
