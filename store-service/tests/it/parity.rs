//! The Lua GCRA must decide exactly as `ankusa_core::limit::gcra::check` on the
//! same inputs: the store and the edges' local fallback share one algorithm.

use ankusa_core::limit::gcra::{check, Bucket, Verdict, MICRO};
use ankusa_core::limit::limits;
use ankusa_store::scripts::GCRA_LUA;
use ankusa_testkit::redis::Redis;

/// Runs `gcra_check` with a given clock: ARGV = stamp and level ("" for a
/// bucket never charged), now, units, rate, burst.
const HARNESS: &str = r#"
local ok, a, b = gcra_check(tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
local third = ''
if b then third = string.format('%.0f', b) end
return {ok and 1 or 0, string.format('%.0f', a), third}
"#;

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Spread over orders of magnitude: 1 ..= max, often small.
    fn up_to(&mut self, max: u64) -> u64 {
        let digits = self.below(u64::from(max.ilog10()) + 2) as u32;
        (1 + self.below(10u64.saturating_pow(digits))).min(max)
    }
}

struct Case {
    bucket: Option<Bucket>,
    now: u64,
    units: u64,
    rate: u64,
    burst: u64,
}

fn cases() -> Vec<Case> {
    let now = 1_796_000_000_000_000;
    let full = |burst: u64| {
        Some(Bucket {
            stamp_us: now,
            level: burst * MICRO,
        })
    };
    let top = (limits::RATE.max, limits::BURST.max);
    let mut out = vec![
        Case {
            bucket: None,
            now,
            units: 1,
            rate: 1,
            burst: 1,
        },
        Case {
            bucket: full(5),
            now,
            units: 1,
            rate: 100,
            burst: 5,
        },
        Case {
            bucket: full(5),
            now: now + 9_999,
            units: 1,
            rate: 100,
            burst: 5,
        },
        Case {
            bucket: full(5),
            now: now + 10_000,
            units: 1,
            rate: 100,
            burst: 5,
        },
        // 600 000 B/s: one 100 000-byte body drains in 166 667 µs, not 100 000.
        Case {
            bucket: full(600_000),
            now: now + 166_666,
            units: 100_000,
            rate: 600_000,
            burst: 600_000,
        },
        Case {
            bucket: full(600_000),
            now: now + 166_667,
            units: 100_000,
            rate: 600_000,
            burst: 600_000,
        },
        // The largest values the core's limits allow.
        Case {
            bucket: full(top.1),
            now,
            units: top.1,
            rate: top.0,
            burst: top.1,
        },
        Case {
            bucket: full(top.1),
            now: now + 4_294_968,
            units: top.1,
            rate: top.0,
            burst: top.1,
        },
        Case {
            bucket: full(top.1),
            now: now + 1,
            units: 1,
            rate: 1,
            burst: top.1,
        },
        // A level above the capacity (a lowered limit) and stamps ahead of now.
        Case {
            bucket: Some(Bucket {
                stamp_us: now,
                level: 2 * top.1 * MICRO,
            }),
            now,
            units: 1,
            rate: 7,
            burst: 3,
        },
        Case {
            bucket: Some(Bucket {
                stamp_us: now + 1_000_000,
                level: 3 * MICRO,
            }),
            now,
            units: 1,
            rate: 7,
            burst: 3,
        },
        Case {
            bucket: Some(Bucket {
                stamp_us: now + 1_000_001,
                level: 3 * MICRO,
            }),
            now,
            units: 1,
            rate: 7,
            burst: 3,
        },
        Case {
            bucket: Some(Bucket {
                stamp_us: now + 3_600_000_000,
                level: MICRO,
            }),
            now,
            units: 1,
            rate: 7,
            burst: 3,
        },
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4000 {
        let rate = rng.up_to(limits::RATE.max);
        let burst = rng.up_to(limits::BURST.max);
        let units = 1 + rng.below(burst);
        let cap = burst * MICRO;
        let level = match rng.below(5) {
            0 => cap,
            1 => cap + rng.below(cap),
            _ => rng.below(cap + 1),
        };
        let drain = level.div_ceil(rate);
        let bucket = match rng.below(6) {
            0 => None,
            1 => Some(Bucket {
                stamp_us: now.saturating_sub(rng.below(drain + 2)),
                level,
            }),
            2 => Some(Bucket {
                stamp_us: now + rng.below(2_000_000),
                level,
            }),
            _ => Some(Bucket {
                stamp_us: now - rng.below(10_000_000),
                level,
            }),
        };
        out.push(Case {
            bucket,
            now,
            units,
            rate,
            burst,
        });
    }
    out
}

#[tokio::test]
async fn lua_gcra_matches_the_core_on_the_same_inputs() {
    let redis = Redis::start();
    let client = redis::Client::open(redis.url()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let cases = cases();
    let mut pipe = redis::pipe();
    for c in &cases {
        let text = |f: fn(&Bucket) -> u64| {
            c.bucket
                .as_ref()
                .map(|b| f(b).to_string())
                .unwrap_or_default()
        };
        pipe.cmd("EVAL")
            .arg(format!("{GCRA_LUA}\n{HARNESS}"))
            .arg(0)
            .arg(text(|b| b.stamp_us))
            .arg(text(|b| b.level))
            .arg(c.now)
            .arg(c.units)
            .arg(c.rate)
            .arg(c.burst);
    }
    let replies: Vec<(u8, String, String)> =
        pipe.query_async(&mut conn).await.expect("EVAL pipeline");
    let (mut admits, mut restamps) = (0, 0);
    for (c, (admitted, a, b)) in cases.iter().zip(replies) {
        let a: u64 = a.parse().expect("integer");
        let b: Option<u64> = (!b.is_empty()).then(|| b.parse().expect("integer"));
        let lua = if admitted == 1 {
            Verdict::Admit {
                bucket: Bucket {
                    stamp_us: a,
                    level: b.expect("an admit returns a level"),
                },
            }
        } else {
            Verdict::Deny {
                retry_after_us: a,
                restamp: b.map(|level| Bucket {
                    stamp_us: c.now,
                    level,
                }),
            }
        };
        assert_eq!(
            lua,
            check(c.bucket, c.now, c.units, c.rate, c.burst),
            "bucket {:?} now {} units {} rate {} burst {}",
            c.bucket,
            c.now,
            c.units,
            c.rate,
            c.burst
        );
        admits += usize::from(admitted == 1);
        restamps += usize::from(admitted == 0 && b.is_some());
    }
    assert!(
        admits > 100 && admits < cases.len() - 100,
        "the cases exercise both verdicts ({admits} admits)"
    );
    assert!(
        restamps > 10,
        "the cases exercise stale stamps ({restamps})"
    );
}
