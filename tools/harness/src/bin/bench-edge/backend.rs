//! The limiter and Redis behind one variant, its own (an `ankusa-store`, or
//! the peer's Limitador): so their CPU per hook belongs to that variant
//! alone, in both modes, and a variant's total CPU per hook (Envoy + limiter
//! + Redis) can be set beside another's loaded in the same seconds.

use super::cpu::cpu_seconds;
use super::peer::Limitador;
use ankusa_testkit::http;
use ankusa_testkit::metrics::metric_value;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use std::time::Duration;

/// What answers a variant's calls, on a Redis of its own.
pub enum Limiter {
    /// A release `ankusa-store`.
    Store(Store),
    /// The peer's `limitador-server`.
    Peer(Limitador),
}

pub struct Backend {
    pub redis: Redis,
    pub limiter: Limiter,
}

impl Backend {
    /// Starts a store and its Redis, and waits until the store reaches Redis.
    pub fn start() -> Result<Backend, String> {
        let redis = Redis::start();
        let store = Store::start(&redis.url());
        if !store.wait_ready(Duration::from_secs(10)) {
            return Err(format!(
                "ankusa-store never reached Redis:\n{}",
                store.proc.log_tail()
            ));
        }
        Ok(Backend {
            redis,
            limiter: Limiter::Store(store),
        })
    }

    /// Starts Limitador (`bin`) and its Redis.
    pub fn start_peer(bin: &std::path::Path) -> Result<Backend, String> {
        let redis = Redis::start();
        let peer = Limitador::start(bin, &redis.url())?;
        Ok(Backend {
            redis,
            limiter: Limiter::Peer(peer),
        })
    }

    /// The port an edge calls: the store's HTTP, or Limitador's gRPC.
    pub fn port(&self) -> u16 {
        match &self.limiter {
            Limiter::Store(s) => s.port,
            Limiter::Peer(p) => p.rls_port,
        }
    }

    fn limiter_pid(&self) -> u32 {
        match &self.limiter {
            Limiter::Store(s) => s.proc.pid(),
            Limiter::Peer(p) => p.proc.pid(),
        }
    }

    /// Its counters; read before [`Backend::cpu`] at a run's start and after
    /// it at the end, so rendering them is not counted.
    pub fn counts(&self) -> Counts {
        let store = match &self.limiter {
            Limiter::Store(store) => store,
            Limiter::Peer(peer) => {
                // Every allowed call is one hook's descriptor: a hit in one call.
                let authorized = peer.authorized();
                return Counts {
                    store_hits: authorized,
                    store_calls: authorized,
                    redis_cmds: self.redis.info_number("stats", "total_commands_processed"),
                    ..Counts::default()
                };
            }
        };
        let text = http::get(&store.url_of("/metrics"))
            .map(|r| r.text())
            .unwrap_or_default();
        Counts {
            store_hits: metric_value(&text, "ankusa_store_hits_per_call_sum"),
            store_calls: metric_value(&text, "ankusa_store_hits_per_call_count"),
            settle_calls: metric_value(
                &text,
                r#"ankusa_store_requests_total{endpoint="settle",result="ok"}"#,
            ),
            settle_ops: ["promote", "release"]
                .iter()
                .map(|op| {
                    metric_value(
                        &text,
                        &format!(r#"ankusa_store_settle_ops_total{{op="{op}"}}"#),
                    )
                })
                .sum(),
            redis_cmds: self.redis.info_number("stats", "total_commands_processed"),
            ..Counts::default()
        }
    }

    /// The limiter's and Redis's CPU seconds so far, into `c`.
    pub fn cpu(&self, c: &mut Counts, tick: f64) {
        c.store_cpu = cpu_seconds(self.limiter_pid(), tick);
        c.redis_cpu = cpu_seconds(self.redis.proc.pid(), tick);
    }
}

/// What one variant's limiter (the store, or the peer's Limitador) and Redis did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    /// Hits the store's hit calls carried (`ankusa_store_hits_per_call_sum`):
    /// one per hook that reached it, alone or in a batch; the calls
    /// Limitador allowed.
    pub store_hits: f64,
    /// Hit calls (`/v1/hit` or a batch on `/v1/hits`) the store answered.
    pub store_calls: f64,
    /// Settle calls of their own (`/v1/settle`) the store answered.
    pub settle_calls: f64,
    /// Settle operations the store applied (on settle calls or riding on hit calls).
    pub settle_ops: f64,
    /// Redis's `total_commands_processed` (the INFO call itself included).
    pub redis_cmds: f64,
    /// CPU seconds of the limiter and of Redis.
    pub store_cpu: f64,
    pub redis_cpu: f64,
}

impl Counts {
    pub fn since(self, before: Counts) -> Counts {
        Counts {
            store_hits: self.store_hits - before.store_hits,
            store_calls: self.store_calls - before.store_calls,
            settle_calls: self.settle_calls - before.settle_calls,
            settle_ops: self.settle_ops - before.settle_ops,
            redis_cmds: self.redis_cmds - before.redis_cmds,
            store_cpu: self.store_cpu - before.store_cpu,
            redis_cpu: self.redis_cpu - before.redis_cpu,
        }
    }

    pub fn add(&mut self, o: Counts) {
        self.store_hits += o.store_hits;
        self.store_calls += o.store_calls;
        self.settle_calls += o.settle_calls;
        self.settle_ops += o.settle_ops;
        self.redis_cmds += o.redis_cmds;
        self.store_cpu += o.store_cpu;
        self.redis_cpu += o.redis_cpu;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_subtract_and_sum_field_by_field() {
        let c = |n: f64| Counts {
            store_hits: n,
            store_calls: n / 2.0,
            settle_calls: n / 4.0,
            settle_ops: n,
            redis_cmds: n * 8.0,
            store_cpu: n / 100.0,
            redis_cpu: n / 50.0,
        };
        let mut sum = Counts::default();
        sum.add(c(30.0).since(c(10.0)));
        sum.add(c(10.0));
        assert_eq!(sum, c(30.0));
    }
}
