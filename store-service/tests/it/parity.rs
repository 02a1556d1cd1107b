//! The Lua GCRA must decide exactly as `ankusa_core::gcra::check` on the
//! same inputs: the store and the edges' local fallback share one algorithm.

use ankusa_core::gcra::{check, Verdict};
use ankusa_store::scripts::GCRA_LUA;
use ankusa_testkit::redis::Redis;

/// Runs `gcra_check` with a given clock: ARGV = tat ("" for none), now, increment, capacity.
const HARNESS: &str = r#"
local admitted, value = gcra_check(tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
return {admitted and 1 or 0, string.format('%.0f', value)}
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
}

fn cases() -> Vec<(Option<u64>, u64, u64, u64)> {
    let now = 1_796_000_000_000_000;
    let mut out = vec![
        (None, now, 1, 1),
        (Some(now), now, 10_000, 50_000),
        (Some(now + 40_000), now, 10_000, 50_000),
        (Some(now + 40_001), now, 10_000, 50_000),
        (Some(now + 50_000), now, 10_000, 50_000),
        (Some(now - 1), now, 10_000, 10_000),
        (Some(0), now, 1, 1),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let increment = 1 + rng.below(5_000_000);
        let capacity = increment + rng.below(50_000_000);
        let tat = match rng.below(4) {
            0 => None,
            1 => Some(now - rng.below(10_000_000)),
            _ => Some(now + rng.below(capacity + 2 * increment)),
        };
        out.push((tat, now + rng.below(1_000_000), increment, capacity));
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
    for (tat, now, inc, cap) in &cases {
        pipe.cmd("EVAL")
            .arg(format!("{GCRA_LUA}\n{HARNESS}"))
            .arg(0)
            .arg(tat.map(|t| t.to_string()).unwrap_or_default())
            .arg(now)
            .arg(inc)
            .arg(cap);
    }
    let replies: Vec<(u8, String)> = pipe.query_async(&mut conn).await.expect("EVAL pipeline");
    let mut admits = 0;
    for ((tat, now, inc, cap), (admitted, value)) in cases.iter().zip(replies) {
        let value: u64 = value.parse().expect("integer");
        let lua = if admitted == 1 {
            Verdict::Admit { new_tat: value }
        } else {
            Verdict::Deny {
                retry_after_us: value,
            }
        };
        assert_eq!(
            lua,
            check(*tat, *now, *inc, *cap),
            "tat {tat:?} now {now} increment {inc} capacity {cap}"
        );
        admits += usize::from(admitted == 1);
    }
    assert!(
        admits > 100 && admits < cases.len() - 100,
        "the cases exercise both verdicts ({admits} admits)"
    );
}
