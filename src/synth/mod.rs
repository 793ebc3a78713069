//! Synthetic histories of a correct lock, and injectors of exactly one violation.
//!
//! `generate` simulates clients taking per-key locks from a lock that is correct by
//! construction (a FIFO-fair mutex per key with leases), with the faults of a real run:
//! clients killed while holding (their lock stays taken until its lease ends), operations
//! that end `info` (timeouts), renewals, reentrant acquires, holders slow enough to outlive
//! their lease (nobody tries the key meanwhile, so their failed renew / release is an
//! expected loss), and a shuffled merge of the processes' streams. The histories follow
//! docs/src/reference/history.md and the reader accepts every one of them; the checker must find no
//! anomaly in any of them. `generate_to` streams the same history as JSONL without keeping
//! it in memory (ten million events take a few seconds).
//!
//! The `inject_*` functions take such a history and add exactly one violation, returning the
//! indices the checker's anomaly must name (see `Injection`).
//!
//! How the simulated lock stays correct under the checker's rules:
//! - Every server-side effect happens at the operation's invoke (its linearization point),
//!   so a lease counted by the server ends exactly where the checker counts it
//!   (invoke + `lease_ms`).
//! - A holder invokes every operation of its hold while its lease still has room for that
//!   operation and one more, so it can always renew or release in time.
//! - A killed holder's lock stays taken until its lease ends (a renew cut short by the kill
//!   never reached the server); an `acquire` that ends `info` takes the lock for one lease if
//!   it was free (a ghost holder); a `release` that ends `info` leaves the lock to its lease.
//!   Without leases nothing is ever killed (the lock would never be freed: that is the
//!   `setnx-del` deadlock, an anomaly) and indeterminate operations never hold the lock.
//! - Waiters are served first come, first served and retry every few ms, so nobody waits
//!   longer than the holds queued before it (keep `processes × hold + lease` well under the
//!   starvation bound) and a free key is taken again within one retry interval.
//! - A nested (reentrant) acquire neither changes the token nor extends the lease.
//!
//! The parts: `generate` (the entry points), `config` (what to simulate), `simulator` (the
//! lock and its clients), `record` and `line_writer` (the compact events it emits, and their
//! JSON lines), `shuffle` (the out-of-order merge), `rng`; `view` (holds as the checker
//! derives them) and `inject` (one module per group of injectors).

mod config;
#[cfg(test)]
mod fixtures;
mod generate;
mod inject;
mod line_writer;
mod record;
mod rng;
mod shuffle;
mod simulator;
mod view;

pub use config::SynthConfig;
pub use generate::{generate, generate_to, key_name, write_jsonl};
pub use inject::{
    implied_by, inject, inject_bad_lease, inject_duplicate_token, inject_lost_lock,
    inject_lost_update, inject_overlap, inject_stale_write, inject_starvation, inject_token_order,
    inject_unavailable, inject_unfair, Injection, INJECTABLE,
};
