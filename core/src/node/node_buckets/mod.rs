//! Node-scope GCRA buckets in shared data, exact across every worker of a
//! node and bounded in memory whatever tenant names arrive.
//!
//! Shared-data keys can't be deleted, so a key per tenant name would let a
//! stream of made-up names grow the map forever. Instead a fixed ring of
//! `slots` keys holds the buckets; a tenant's home slot is the FNV-1a hash of
//! its name, and linear probing looks at up to [`PROBE_SLOTS`] slots from
//! there.
//!
//! A slot's value is one tenant's name with its hooks and bytes buckets, so a
//! hook costs one get and one compare-and-swap in the common case:
//!
//! ```text
//! [FORMAT][hooks: stamp, level, empty_at][bytes: stamp, level, empty_at][guests][tenant name bytes]
//! ```
//!
//! Every number is a u64 LE. A bucket is a [`gcra::Bucket`] (stamp µs, level
//! in micro-units) and the µs it will be empty at, so another tenant can tell
//! an idle slot without knowing this tenant's rate; all zero is "never
//! charged". `guests` is a 64-bit mask of tenants that shared the slot (one
//! bit per tenant hash), cleared once the slot's buckets go idle. The filter
//! charges only routed tenants (1 to 64 bytes of `[A-Za-z0-9_-]`), so a value
//! stays under 125 bytes and the ring under `slots × 125` bytes.
//! Placement, in probe order:
//!
//! 1. A slot holding the tenant is its bucket.
//! 2. An empty slot ends the search: it was never written, so no tenant was
//!    ever pushed past it.
//! 3. Otherwise the tenant takes the first free slot: empty, unreadable, or
//!    held by another tenant whose buckets are all empty (that tenant's
//!    bucket is idle, so forgetting it changes no verdict).
//! 4. If every probed slot is live, the hook is charged to the home slot,
//!    shared with its holder, and the tenant's guest bit is set. This
//!    over-counts both tenants, never under-counts: a guest that later takes
//!    a slot of its own starts from the home slot's buckets, which include
//!    every hook it charged there.
//!
//! Clock steps are [`gcra::check`]'s: a level above the capacity counts as
//! full, a stamp more than [`gcra::MAX_LEAD_US`] ahead restarts at now.
//!
//! Contention never refuses a hook: after [`cas::MAX_TRIES`] conflicts the
//! hook is admitted uncharged and the verdict says so.

use crate::limit::gcra::{self, Bucket, Priced};
use crate::limit::share::Share;
use crate::node::cas::{self, CasStore};
use crate::wire::{Charge, ChargeKind};
use slot::{decode, encode, guest_bit, Held, Pair, Slot};

mod slot;
pub use slot::fnv1a;

/// How many consecutive slots a tenant may occupy from its home slot. Four
/// keeps the worst case at four gets per hook while a ring a few times
/// larger than the tenant count almost never fills a whole run.
pub const PROBE_SLOTS: usize = 4;

/// What a charge did to a tenant's node bucket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NodeVerdict {
    /// Every charge was taken.
    Admit,
    /// A charge was denied; nothing was written. The same charges are
    /// admitted `retry_after_us` from now (if nothing else is charged meanwhile).
    RateLimited { retry_after_us: u64 },
    /// Admitted without a charge: every compare-and-swap attempt conflicted.
    /// The limiter fails open rather than refuse a hook for contention; count it.
    Contended,
}

/// Where a tenant's charge goes, found by one pass over its probe run.
struct Placement {
    key: String,
    version: u32,
    /// The name written back: the tenant's own, or the holder's when shared.
    holder: Vec<u8>,
    tats: Pair,
    guests: u64,
}

/// Node-scope GCRA over a [`CasStore`]; see the module docs for the layout.
pub struct NodeBuckets<'s, S: CasStore> {
    store: &'s S,
    prefix: &'s str,
    slots: usize,
}

impl<'s, S: CasStore> NodeBuckets<'s, S> {
    /// A ring of `slots` keys named `{prefix}{index}` (at least one).
    pub fn new(store: &'s S, prefix: &'s str, slots: usize) -> Self {
        NodeBuckets {
            store,
            prefix,
            slots: slots.max(1),
        }
    }

    /// Every key this ring may ever touch, for pre-creation in `on_configure`
    /// (see [`crate::node::cas::ensure_keys`]).
    pub fn keys(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.slots).map(move |i| self.key(i))
    }

    /// `{prefix}{index}`, built without `format!` (every hook builds one).
    fn key(&self, index: usize) -> String {
        let mut key = String::with_capacity(self.prefix.len() + 20);
        key.push_str(self.prefix);
        crate::limit::ratelimit_headers::push_u64(&mut key, index as u64);
        key
    }

    fn home(&self, tenant: &str) -> usize {
        // The remainder is below `slots`, which is a usize, so it fits.
        (fnv1a(tenant.as_bytes()) % self.slots as u64) as usize
    }

    /// The probe run from the tenant's home slot: at most [`PROBE_SLOTS`]
    /// distinct slots.
    fn run(&self, tenant: &str) -> impl Iterator<Item = usize> + '_ {
        let home = self.home(tenant);
        (0..PROBE_SLOTS.min(self.slots)).map(move |i| (home + i) % self.slots)
    }

    /// Reads the probe run and decides where this tenant's charge goes.
    fn place(&self, tenant: &str, now_us: u64) -> Placement {
        let name = tenant.as_bytes();
        // The home slot while another tenant holds it: where a hook is shared.
        let mut home: Option<Placement> = None;
        let mut free: Option<(String, u32)> = None;
        for (i, index) in self.run(tenant).enumerate() {
            let key = self.key(index);
            let (value, version) = self.store.get(&key);
            match decode(&value) {
                Slot::Held {
                    tenant: holder,
                    tats,
                    guests,
                } => {
                    if holder == name {
                        return Placement {
                            key,
                            version,
                            holder: name.to_vec(),
                            tats,
                            guests,
                        };
                    }
                    if free.is_none() && tats.idle_at(now_us) {
                        free = Some((key.clone(), version));
                    }
                    if i == 0 {
                        home = Some(Placement {
                            key,
                            version,
                            holder: holder.to_vec(),
                            tats,
                            guests,
                        });
                    }
                }
                Slot::Unreadable => free = free.or(Some((key, version))),
                Slot::Empty => {
                    free = free.or(Some((key, version)));
                    break;
                }
            }
        }
        let bit = guest_bit(name);
        match (free, home) {
            (Some((key, version)), home) => {
                // A former guest starts from the home buckets it charged.
                let tats = home
                    .filter(|h| h.guests & bit != 0)
                    .map(|h| h.tats)
                    .unwrap_or_default();
                Placement {
                    key,
                    version,
                    holder: name.to_vec(),
                    tats,
                    guests: 0,
                }
            }
            (None, Some(mut shared)) => {
                shared.guests |= bit;
                shared
            }
            // Unreachable: with no free slot every slot is held, the home one
            // too. Charging the home key fresh is still safe.
            (None, None) => Placement {
                key: self.key(self.home(tenant)),
                version: 0,
                holder: name.to_vec(),
                tats: Pair::default(),
                guests: 0,
            },
        }
    }

    /// Charges every bucket in `charges` for `tenant`, or none.
    ///
    /// Each charge's `kind` picks the bucket; its `tenant` field is ignored in
    /// favour of the argument. A kind given twice is checked twice against the
    /// same bucket and keeps the later-emptying result (wire requests never
    /// repeat one).
    pub fn charge(&self, tenant: &str, now_us: u64, charges: &[Charge]) -> NodeVerdict {
        self.charge_state(tenant, now_us, charges).0
    }

    /// [`NodeBuckets::charge`] with the tenant's buckets it leaves, one per
    /// charge in order: those it wrote on an admit, those it found on a
    /// denial; none when contended.
    pub fn charge_state(
        &self,
        tenant: &str,
        now_us: u64,
        charges: &[Charge],
    ) -> (NodeVerdict, Vec<Bucket>) {
        self.charge_share(tenant, now_us, charges, Share::WHOLE)
    }

    /// [`NodeBuckets::charge_state`] spending from `share` of each quota
    /// (a fleet quota answered node-local, see [`crate::limit::share`]).
    pub fn charge_share(
        &self,
        tenant: &str,
        now_us: u64,
        charges: &[Charge],
        share: Share,
    ) -> (NodeVerdict, Vec<Bucket>) {
        let priced: Vec<Priced> = charges.iter().map(|c| share.price(c)).collect();
        cas::retry(|| {
            let place = self.place(tenant, now_us);
            let buckets: Vec<Option<Bucket>> = charges
                .iter()
                .map(|c| Some(place.tats.get(c.kind).bucket))
                .collect();
            let new_buckets = match gcra::check_all_priced(&buckets, now_us, &priced) {
                Ok(new_buckets) => new_buckets,
                Err(denied) => {
                    self.restamp(&place, charges, &denied.restamps);
                    let found = buckets.iter().map(|b| b.unwrap_or_default()).collect();
                    let verdict = NodeVerdict::RateLimited {
                        retry_after_us: denied.retry_after_us,
                    };
                    return Some((verdict, found));
                }
            };
            let mut next = place.tats;
            for (c, bucket) in charges.iter().zip(new_buckets.iter().copied()) {
                let empty_at = bucket.empty_at(c.rate);
                next.raise(c.kind, Held { bucket, empty_at });
            }
            // Once the slot's buckets were idle, no guest's charge still counts.
            let guests = if place.tats.idle_at(now_us) {
                0
            } else {
                place.guests
            };
            let value = encode(&place.holder, next, guests);
            self.store
                .compare_and_set(&place.key, &value, place.version)
                .then_some((NodeVerdict::Admit, new_buckets))
        })
        .unwrap_or((NodeVerdict::Contended, Vec::new()))
    }

    /// Writes back the stale buckets of a denial, restamped (one try: a
    /// conflicting write has restamped or charged them already).
    fn restamp(&self, place: &Placement, charges: &[Charge], restamps: &[Option<Bucket>]) {
        let mut next = place.tats;
        let mut any = false;
        for (c, bucket) in charges.iter().zip(restamps) {
            if let Some(bucket) = *bucket {
                let held = Held {
                    bucket,
                    empty_at: bucket.empty_at(c.rate),
                };
                match c.kind {
                    ChargeKind::Hooks => next.hooks = held,
                    ChargeKind::Bytes => next.bytes = held,
                }
                any = true;
            }
        }
        if any {
            let value = encode(&place.holder, next, place.guests);
            self.store
                .compare_and_set(&place.key, &value, place.version);
        }
    }

    /// Forgets `tenant`'s buckets (its limit changed). The slot keeps the name
    /// with idle buckets, so it never turns empty again and probing stays
    /// correct; any tenant may take it over. A tenant sharing another's slot
    /// has nothing of its own to clear. Best effort under contention.
    pub fn reset(&self, tenant: &str) {
        let name = tenant.as_bytes();
        cas::retry(|| {
            let mut found = None;
            for index in self.run(tenant) {
                let key = self.key(index);
                let (value, version) = self.store.get(&key);
                match decode(&value) {
                    Slot::Held { tenant: holder, .. } if holder == name => {
                        found = Some((key, version));
                        break;
                    }
                    // equivalent mutant: without this arm the scan goes on past an empty slot and finds nothing more: placement stops at the first empty slot of a run, and a slot once held never turns empty again.
                    Slot::Empty => break,
                    _ => {}
                }
            }
            let Some((key, version)) = found else {
                return Some(());
            };
            self.store
                .compare_and_set(&key, &encode(name, Pair::default(), 0), version)
                .then_some(())
        });
    }
}

#[cfg(test)]
mod tests;
