//! Fencing tokens that go wrong: `duplicate-token`, `token-order`.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::history::Event;
use crate::report::AnomalyKind;
use crate::synth::rng::Rng;
use crate::synth::view::{view, HoldView, View};

use super::edit::{pick, renumber};
use super::injection::{done, Injection};

/// Consecutive holds of a key that both carry tokens: (earlier, later).
fn token_pairs(v: &View) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (h, hold) in v.holds.iter().enumerate() {
        if let Some(&prev) = last.get(hold.key.as_str()) {
            if v.holds[prev].token.is_some() && hold.token.is_some() {
                pairs.push((prev, h));
            }
        }
        last.insert(hold.key.as_str(), h);
    }
    pairs
}

fn set_token(events: &mut [Event], hold: &HoldView, token: i64) {
    let writes = hold.writes.iter().flat_map(|&(i, o)| [i, o]);
    for pos in hold.oks.iter().copied().chain(writes) {
        if let Some(Value::Object(map)) = events[pos].value.as_mut() {
            map.insert("token".into(), json!(token));
        }
    }
}

/// The later of two consecutive holds gets the earlier one's token (its writes too).
/// Implies token-order (an equal token is not lower). Names both acquire oks.
pub fn inject_duplicate_token(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let (a, b) = pick(&mut rng, &token_pairs(&v))?;
    let token = v.holds[a].token?;
    set_token(events, &v.holds[b], token);
    renumber(events);
    let key = v.holds[a].key.clone();
    done(
        AnomalyKind::DuplicateToken,
        &key,
        vec![v.holds[a].begin() as u64, v.holds[b].begin() as u64],
    )
}

/// Two consecutive holds swap tokens, so the earlier (ended before the later began) has the
/// higher one. Names both acquire oks.
pub fn inject_token_order(events: &mut [Event], seed: u64) -> Option<Injection> {
    let mut rng = Rng::new(seed);
    let v = view(events);
    let (a, b) = pick(&mut rng, &token_pairs(&v))?;
    let (ta, tb) = (v.holds[a].token?, v.holds[b].token?);
    set_token(events, &v.holds[a], tb);
    set_token(events, &v.holds[b], ta);
    renumber(events);
    let key = v.holds[a].key.clone();
    done(
        AnomalyKind::TokenOrder,
        &key,
        vec![v.holds[a].begin() as u64, v.holds[b].begin() as u64],
    )
}
