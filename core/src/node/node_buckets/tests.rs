use super::*;
use crate::node::cas::{ensure_keys, MapStore};
use std::cell::Cell;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const T: u64 = 10_000; // 100 hooks/s
const NOW: u64 = 1_000_000_000;

fn hooks(burst: u64) -> Charge {
    Charge {
        kind: ChargeKind::Hooks,
        tenant: String::new(),
        units: 1,
        rate: 100,
        burst,
    }
}

/// `n` bytes at 1 B/µs.
fn bytes(n: u64, burst: u64) -> Charge {
    Charge {
        kind: ChargeKind::Bytes,
        tenant: String::new(),
        units: n,
        rate: 1_000_000,
        burst,
    }
}

/// A hooks bucket (100/s) that is empty at `until` (≥ NOW).
fn busy(until: u64) -> Held {
    Held {
        bucket: Bucket {
            stamp_us: NOW,
            level: (until - NOW) * 100,
        },
        empty_at: until,
    }
}

fn ready(store: &MapStore, slots: usize) -> NodeBuckets<'_, MapStore> {
    let buckets = NodeBuckets::new(store, "rl:", slots);
    ensure_keys(store, buckets.keys());
    buckets
}

fn held(store: &MapStore, key: &str) -> (Vec<u8>, Pair, u64) {
    match decode(&store.get(key).0) {
        Slot::Held {
            tenant,
            tats,
            guests,
        } => (tenant.to_vec(), tats, guests),
        _ => panic!("{key} is not held by a tenant"),
    }
}

/// Counts calls and can make every compare-and-swap conflict.
#[derive(Default)]
struct Probe {
    inner: MapStore,
    gets: Cell<u32>,
    sets: Cell<u32>,
    conflict_always: bool,
}

impl CasStore for Probe {
    fn get(&self, key: &str) -> (Vec<u8>, u32) {
        self.gets.set(self.gets.get() + 1);
        self.inner.get(key)
    }
    fn compare_and_set(&self, key: &str, value: &[u8], version: u32) -> bool {
        self.sets.set(self.sets.get() + 1);
        !self.conflict_always && self.inner.compare_and_set(key, value, version)
    }
}

#[test]
fn idle_tenant_admits_a_burst_then_waits_exactly_one_interval() {
    let store = MapStore::new();
    let nb = ready(&store, 64);
    for _ in 0..5 {
        assert_eq!(nb.charge("acme", NOW, &[hooks(5)]), NodeVerdict::Admit);
    }
    assert_eq!(
        nb.charge("acme", NOW, &[hooks(5)]),
        NodeVerdict::RateLimited { retry_after_us: T }
    );
    assert_eq!(
        nb.charge("acme", NOW + T - 1, &[hooks(5)]),
        NodeVerdict::RateLimited { retry_after_us: 1 }
    );
    assert_eq!(nb.charge("acme", NOW + T, &[hooks(5)]), NodeVerdict::Admit);
}

#[test]
fn denied_charge_writes_nothing() {
    let store = MapStore::new();
    let nb = ready(&store, 16);
    nb.charge("acme", NOW, &[hooks(1), bytes(100, 1_000)]);
    let before = store.clone();
    // The hooks bucket is full; the bytes bucket alone would admit.
    let verdict = nb.charge("acme", NOW, &[hooks(1), bytes(100, 1_000)]);
    assert!(matches!(verdict, NodeVerdict::RateLimited { .. }));
    assert_eq!(store, before, "a denial changed a value or a version");
}

#[test]
fn hooks_and_bytes_cost_one_get_and_one_cas() {
    let store = Probe::default();
    let nb = NodeBuckets::new(&store, "rl:", 64);
    ensure_keys(&store.inner, nb.keys());
    assert_eq!(
        nb.charge("acme", NOW, &[hooks(10), bytes(500, 4_096)]),
        NodeVerdict::Admit
    );
    store.gets.set(0);
    store.sets.set(0);
    assert_eq!(
        nb.charge("acme", NOW, &[hooks(10), bytes(500, 4_096)]),
        NodeVerdict::Admit
    );
    assert_eq!((store.gets.get(), store.sets.get()), (1, 1));
}

#[test]
fn charges_are_all_or_nothing_with_the_longest_wait() {
    let store = MapStore::new();
    let nb = ready(&store, 16);
    assert_eq!(
        nb.charge("acme", NOW, &[hooks(10), bytes(1_000, 1_000)]),
        NodeVerdict::Admit
    );
    // Bytes are full for 1000 µs; hooks still have room and must not be spent.
    assert_eq!(
        nb.charge("acme", NOW, &[hooks(10), bytes(1_000, 1_000)]),
        NodeVerdict::RateLimited {
            retry_after_us: 1_000
        }
    );
    for _ in 0..9 {
        assert_eq!(nb.charge("acme", NOW, &[hooks(10)]), NodeVerdict::Admit);
    }
    assert!(matches!(
        nb.charge("acme", NOW, &[hooks(10)]),
        NodeVerdict::RateLimited { .. }
    ));
}

#[test]
fn ten_thousand_tenants_touch_only_ring_keys() {
    let store = MapStore::new();
    let nb = ready(&store, 64);
    let ring: Vec<String> = nb.keys().collect();
    for i in 0..10_000 {
        let verdict = nb.charge(&format!("tenant-{i}"), NOW + i, &[hooks(100)]);
        assert_ne!(verdict, NodeVerdict::Contended);
    }
    let mut expected = ring.clone();
    expected.sort();
    assert_eq!(store.keys(), expected, "a key outside the ring was written");
    assert_eq!(ring.len(), 64);
}

#[test]
fn ring_keys_are_the_prefix_and_the_index() {
    let store = MapStore::new();
    let nb = NodeBuckets::new(&store, "rl:", 1_000);
    let keys: Vec<String> = nb.keys().collect();
    assert_eq!(keys[..3], ["rl:0", "rl:1", "rl:2"]);
    assert_eq!(keys[999], "rl:999");
    assert_eq!(nb.key(usize::MAX), format!("rl:{}", usize::MAX));
}

#[test]
fn workers_agree_on_a_tenants_home_slot() {
    // Pinned values: a change here means running nodes would disagree
    // with upgraded ones about where a tenant lives.
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a(b"foobar"), 0x85944171f73967e8);
    let store = MapStore::new();
    let a = NodeBuckets::new(&store, "rl:", 1_000);
    let b = NodeBuckets::new(&store, "rl:", 1_000);
    assert_eq!(a.home("acme"), b.home("acme"));
    // The home is the tenant's hash modulo the ring, not any fixed slot.
    assert_eq!(a.home("a"), (0xaf63_dc4c_8601_ec8c_u64 % 1_000) as usize);
    assert_eq!(
        a.home("foobar"),
        (0x8594_4171_f739_67e8_u64 % 1_000) as usize
    );
}

#[test]
fn idle_slot_is_taken_over_by_another_tenant() {
    let store = MapStore::new();
    let nb = ready(&store, 1);
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Admit);
    // acme's bucket is empty at NOW + T: at that instant it is idle.
    assert_eq!(
        nb.charge("globex", NOW + T, &[hooks(1)]),
        NodeVerdict::Admit
    );
    let (tenant, tats, _) = held(&store, "rl:0");
    assert_eq!(
        (&tenant[..], tats.hooks.empty_at),
        (&b"globex"[..], NOW + 2 * T)
    );
}

#[test]
fn live_slots_are_shared_over_counting_never_under_counting() {
    let store = MapStore::new();
    let nb = ready(&store, 1);
    assert_eq!(nb.charge("acme", NOW, &[hooks(2)]), NodeVerdict::Admit);
    // globex shares acme's live slot and spends from the same bucket.
    assert_eq!(nb.charge("globex", NOW, &[hooks(2)]), NodeVerdict::Admit);
    assert!(matches!(
        nb.charge("acme", NOW, &[hooks(2)]),
        NodeVerdict::RateLimited { .. }
    ));
    assert!(matches!(
        nb.charge("globex", NOW, &[hooks(2)]),
        NodeVerdict::RateLimited { .. }
    ));
    let (tenant, _, _) = held(&store, "rl:0");
    assert_eq!(tenant, b"acme", "sharing must not evict the holder");
}

#[test]
fn tenant_leaving_a_shared_slot_keeps_what_it_charged_there() {
    // Regression: a tenant that shared its home slot and then took a free
    // slot used to start fresh there and get a second burst.
    let store = MapStore::new();
    let nb = ready(&store, 8);
    let home = nb.home("globex");
    let run: Vec<usize> = nb.run("globex").collect();
    // Fill globex's whole run with holders live at NOW.
    for (i, &index) in run.iter().enumerate() {
        let tats = Pair {
            hooks: busy(NOW + 1 + i as u64),
            bytes: Held::default(),
        };
        store.compare_and_set(
            &nb.key(index),
            &encode(format!("h{i}").as_bytes(), tats, 0),
            0,
        );
    }
    assert_eq!(nb.charge("globex", NOW, &[hooks(2)]), NodeVerdict::Admit);
    let (_, _, guests) = held(&store, &nb.key(home));
    assert_eq!(guests, guest_bit(b"globex"));
    // A later slot frees up; globex moves there but inherits the home bucket
    // (NOW + 1 + T), so its second hook within 2T is still denied.
    let last = *run.last().unwrap_or(&home);
    store.compare_and_set(&nb.key(last), &encode(b"h3", Pair::default(), 0), 0);
    assert_eq!(
        nb.charge("globex", NOW, &[hooks(2)]),
        NodeVerdict::RateLimited { retry_after_us: 1 }
    );
}

#[test]
fn tenant_past_an_idle_home_slot_keeps_its_bucket() {
    let store = MapStore::new();
    let nb = ready(&store, 8);
    let run: Vec<usize> = nb.run("acme").collect();
    // The home slot is held by a tenant whose bucket will go idle first.
    store.compare_and_set(
        &nb.key(run[0]),
        &encode(
            b"other",
            Pair {
                hooks: busy(NOW + 1),
                bytes: Held::default(),
            },
            0,
        ),
        0,
    );
    // acme never shared it, so it starts fresh in the next slot.
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Admit);
    // Later the home slot is idle, but acme's bucket sits past it and is full.
    assert_eq!(
        nb.charge("acme", NOW + 2, &[hooks(1)]),
        NodeVerdict::RateLimited {
            retry_after_us: T - 2
        }
    );
}

#[test]
fn a_backward_clock_step_does_not_refuse_a_tenant_for_its_length() {
    let store = MapStore::new();
    let nb = ready(&store, 16);
    for _ in 0..5 {
        assert_eq!(nb.charge("acme", NOW, &[hooks(5)]), NodeVerdict::Admit);
    }
    // The node's clock steps back ten minutes: the full bucket drains from
    // the new now, so the next hook waits one interval, not ten minutes.
    let back = NOW - 600_000_000;
    assert_eq!(
        nb.charge("acme", back, &[hooks(5)]),
        NodeVerdict::RateLimited { retry_after_us: T }
    );
    assert_eq!(
        nb.charge("acme", back + T - 1, &[hooks(5)]),
        NodeVerdict::RateLimited { retry_after_us: 1 }
    );
    assert_eq!(nb.charge("acme", back + T, &[hooks(5)]), NodeVerdict::Admit);
    // And the level was kept: no second burst.
    assert!(matches!(
        nb.charge("acme", back + T, &[hooks(5)]),
        NodeVerdict::RateLimited { .. }
    ));
}

#[test]
fn a_forward_clock_step_drains_the_bucket_and_frees_the_slot() {
    let store = MapStore::new();
    let nb = ready(&store, 1);
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Admit);
    let later = NOW + 600_000_000;
    assert_eq!(nb.charge("globex", later, &[hooks(1)]), NodeVerdict::Admit);
    assert_eq!(held(&store, "rl:0").0, b"globex");
}

#[test]
fn reset_clears_only_that_tenant() {
    let store = MapStore::new();
    let nb = ready(&store, 1);
    nb.charge("acme", NOW, &[hooks(1)]);
    nb.reset("acme");
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Admit);
    let store = MapStore::new();
    let nb = ready(&store, 1);
    nb.charge("acme", NOW, &[hooks(1)]);
    let before = store.clone();
    nb.reset("globex");
    assert_eq!(
        store, before,
        "resetting a tenant with no slot wrote something"
    );
    assert!(matches!(
        nb.charge("acme", NOW, &[hooks(1)]),
        NodeVerdict::RateLimited { .. }
    ));
}

#[test]
fn endless_conflicts_admit_uncharged_and_say_so() {
    let store = Probe {
        conflict_always: true,
        ..Probe::default()
    };
    let nb = NodeBuckets::new(&store, "rl:", 4);
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Contended);
    assert_eq!(store.sets.get(), crate::node::cas::MAX_TRIES);
    assert!(store.inner.is_empty());
}

#[test]
fn unreadable_slot_is_treated_as_free() {
    let store = MapStore::new();
    let nb = ready(&store, 1);
    store.compare_and_set("rl:0", b"\x09garbage", 0);
    assert_eq!(nb.charge("acme", NOW, &[hooks(1)]), NodeVerdict::Admit);
    assert_eq!(held(&store, "rl:0").0, b"acme");
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn concurrent_threads_admit_exactly_burst() {
    const BURST: u64 = 100;
    let store = MapStore::new();
    let nb = ready(&store, 64);
    let admitted = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..60 {
                    // Four threads in a tight loop on two loaded cores can
                    // lose crate::node::cas::MAX_TRIES races in a row (a Contended
                    // admit, tested above); what this test pins is that
                    // no write is lost, so it asks again.
                    // Bounded: a charge that is always contended fails here.
                    for tries in 0.. {
                        assert!(tries < 10_000, "contended {tries} times in a row");
                        match nb.charge("acme", NOW, &[hooks(BURST)]) {
                            NodeVerdict::Admit => {
                                admitted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            NodeVerdict::RateLimited { .. } => {}
                            NodeVerdict::Contended => continue,
                        }
                        break;
                    }
                }
            });
        }
    });
    assert_eq!(admitted.into_inner(), BURST);
}

#[test]
fn a_slot_value_reads_back_only_in_its_own_format() {
    // The shortest value in the format: the header and an empty name.
    let bare = encode(b"", Pair::default(), 0);
    assert!(matches!(decode(&bare), Slot::Held { tenant: b"", .. }));
    let acme = encode(b"acme", Pair::default(), 5);
    assert!(matches!(
        decode(&acme),
        Slot::Held {
            tenant: b"acme",
            guests: 5,
            ..
        }
    ));
    // Cut short, or another format's byte first: unreadable, never a tenant.
    assert!(matches!(decode(&acme[..10]), Slot::Unreadable));
    assert!(matches!(decode(&bare[..bare.len() - 1]), Slot::Unreadable));
    let mut other = acme.clone();
    other[0] = other[0].wrapping_add(1);
    assert!(matches!(decode(&other), Slot::Unreadable));
    assert!(matches!(decode(b""), Slot::Empty));
}

#[test]
fn a_guest_bit_is_picked_by_the_top_six_bits_of_the_hash() {
    assert_eq!(guest_bit(b"a"), 1 << (0xaf63_dc4c_8601_ec8c_u64 >> 58));
    assert_eq!(guest_bit(b"foobar"), 1 << (0x8594_4171_f739_67e8_u64 >> 58));
    assert_ne!(guest_bit(b"a"), guest_bit(b"foobar"));
}
