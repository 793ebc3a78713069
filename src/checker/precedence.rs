//! The precedence graph of a key's holds, for fencing tokens.
//!
//! An edge path from hold A to hold B says A came before B by one of two orders that a
//! correct, fenced lock keeps consistent: real time (A ended no later than B began) and token
//! order (A's token is lower). A cycle means the two orders disagree: some hold that ended
//! before another began got a token that is not lower (`token-order`). As in Elle, each cycle
//! is reported with its steps spelled out.
//!
//! The graph stays linear in the number of holds, whatever the history, by routing both
//! orders through virtual nodes instead of joining every ordered pair:
//!
//! - time points: each hold's end is a point on a chain `T0 -> T1 -> ...` in end order; a hold
//!   has an edge to its own point, and the latest point at or before its begin has an edge to
//!   it. So A reaches B through the chain exactly when A ended no later than B began, unless
//!   both are holds of zero length at that instant: those are simultaneous, neither precedes
//!   the other (so a hold never precedes itself, real time alone never makes a cycle, and
//!   the file order of one instant's events changes nothing).
//! - token groups: holds with equal tokens form a group; a virtual node between each pair of
//!   adjacent groups takes edges from every hold of the lower and gives edges to every hold
//!   of the higher. A group of two or more also has a tie node with edges to and from each of
//!   its holds: equal tokens are "not lower" either way.
//!
//! Token edges alone rise, or circle inside a tie; so a strongly connected component is a
//! violation exactly when it holds a real-time edge: along any cycle through it tokens never
//! fall, and the real-time step says one of them should have risen.

use std::collections::VecDeque;

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use rustc_hash::{FxHashMap, FxHashSet};

use super::holds::{Hold, HoldEnd};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The source ended no later than the target began.
    Realtime,
    /// The source's token is lower than the target's.
    Token,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Hold(u32),
    TimePoint,
    TokenStep,
    TokenTie,
}

/// One step of a cycle: hold `from` precedes hold `to` by `order`. Ids index `Holds::holds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub from: u32,
    pub to: u32,
    pub order: Order,
}

/// Builds the graph over `key_holds` (ids into `holds`, in begin order) and returns, for each
/// strongly connected component with a real-time edge, one shortest cycle through such an
/// edge, as steps between holds.
pub fn token_order_cycles(holds: &[Hold], key_holds: &[u32]) -> Vec<Vec<Step>> {
    // A cycle needs two holds; most keys of a history with a million of them have one.
    if key_holds.len() < 2 {
        return Vec::new();
    }
    let mut graph: DiGraph<Node, Order> =
        DiGraph::with_capacity(key_holds.len() * 3, key_holds.len() * 4);
    let nodes: Vec<NodeIndex> = key_holds
        .iter()
        .map(|&h| graph.add_node(Node::Hold(h)))
        .collect();
    add_realtime_edges(&mut graph, holds, key_holds, &nodes);
    add_token_edges(&mut graph, holds, key_holds, &nodes);

    let mut cycles = Vec::new();
    // Kosaraju walks with explicit stacks: Tarjan's recursion overflows the stack on a key
    // with a million holds.
    for component in kosaraju_scc(&graph) {
        if component.len() < 2 {
            continue;
        }
        if let Some(cycle) = shortest_violating_cycle(&graph, &component) {
            cycles.push(cycle);
        }
    }
    cycles.sort_by_key(|c| c.iter().map(|s| holds[s.from as usize].begin).min());
    cycles
}

fn add_realtime_edges(
    graph: &mut DiGraph<Node, Order>,
    holds: &[Hold],
    key_holds: &[u32],
    nodes: &[NodeIndex],
) {
    let hold = |i: usize| &holds[key_holds[i] as usize];
    let zero_length = |i: usize| hold(i).end_cause != HoldEnd::Open && hold(i).end == hold(i).begin;
    // The ends on one chain, in time order; at one instant the ends of holds that began
    // earlier come before those of holds of zero length.
    let mut by_end: Vec<(i64, bool, usize)> = (0..key_holds.len())
        .filter(|&i| hold(i).end_cause != HoldEnd::Open)
        .map(|i| (hold(i).end, zero_length(i), i))
        .collect();
    by_end.sort_unstable();
    let points: Vec<NodeIndex> = by_end
        .iter()
        .map(|&(_, _, i)| {
            let point = graph.add_node(Node::TimePoint);
            graph.add_edge(nodes[i], point, Order::Realtime);
            point
        })
        .collect();
    for pair in points.windows(2) {
        graph.add_edge(pair[0], pair[1], Order::Realtime);
    }
    // Every hold that ended no later than hold `i` began precedes it, except that two holds
    // of zero length at one instant are simultaneous: each ended when the other began, so
    // neither precedes the other (nor does one precede itself). This leaves out the ends of
    // zero-length holds at the very instant a zero-length hold begins, and nothing else,
    // whatever the file order of that instant's events.
    for (i, &node) in nodes.iter().enumerate().take(key_holds.len()) {
        let begin = hold(i).begin;
        let before = if zero_length(i) {
            by_end.partition_point(|&(end, zero, _)| end < begin || (end == begin && !zero))
        } else {
            by_end.partition_point(|&(end, _, _)| end <= begin)
        };
        if before > 0 {
            graph.add_edge(points[before - 1], node, Order::Realtime);
        }
    }
}

fn add_token_edges(
    graph: &mut DiGraph<Node, Order>,
    holds: &[Hold],
    key_holds: &[u32],
    nodes: &[NodeIndex],
) {
    let mut tokened: Vec<(i64, usize)> = key_holds
        .iter()
        .enumerate()
        .filter_map(|(i, &h)| holds[h as usize].token.map(|t| (t, i)))
        .collect();
    tokened.sort_unstable();
    let groups: Vec<&[(i64, usize)]> = tokened.chunk_by(|a, b| a.0 == b.0).collect();
    for group in groups.iter().filter(|g| g.len() > 1) {
        let tie = graph.add_node(Node::TokenTie);
        for &(_, member) in group.iter() {
            graph.add_edge(nodes[member], tie, Order::Token);
            graph.add_edge(tie, nodes[member], Order::Token);
        }
    }
    for pair in groups.windows(2) {
        let step = graph.add_node(Node::TokenStep);
        for &(_, from) in pair[0] {
            graph.add_edge(nodes[from], step, Order::Token);
        }
        for &(_, to) in pair[1] {
            graph.add_edge(step, nodes[to], Order::Token);
        }
    }
}

/// The shortest cycle through the component's first real-time edge (None: it has none, so
/// it is only a tie of equal tokens), found by breadth-first search inside the component, as
/// steps between holds (virtual nodes folded away).
fn shortest_violating_cycle(
    graph: &DiGraph<Node, Order>,
    component: &[NodeIndex],
) -> Option<Vec<Step>> {
    let inside: FxHashSet<NodeIndex> = component.iter().copied().collect();
    let mut sorted = component.to_vec();
    sorted.sort_unstable();
    let (from, to) = sorted.iter().find_map(|&n| {
        graph
            .edges(n)
            .find(|e| *e.weight() == Order::Realtime && inside.contains(&e.target()))
            .map(|e| (n, e.target()))
    })?;
    // Breadth-first from `to` back to `from`; the edge from -> to closes the cycle.
    let mut came_from: FxHashMap<NodeIndex, NodeIndex> = FxHashMap::default();
    let mut queue = VecDeque::from([to]);
    while let Some(node) = queue.pop_front() {
        if node == from {
            break;
        }
        for edge in graph.edges(node) {
            let next = edge.target();
            if inside.contains(&next) && next != to && !came_from.contains_key(&next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    let mut path = vec![from];
    let mut at = from;
    while at != to {
        at = *came_from.get(&at)?;
        path.push(at);
    }
    path.reverse(); // to ... from; the cycle closes with from -> to
    Some(fold_cycle(graph, &path))
}

/// Folds a cycle of nodes (the last has an edge back to the first) into steps between holds:
/// each run of virtual nodes between two holds is one step, of the order of its edges (a run
/// of time points is all real time, a run of token nodes all token order).
fn fold_cycle(graph: &DiGraph<Node, Order>, cycle: &[NodeIndex]) -> Vec<Step> {
    let hold_of = |n: NodeIndex| match graph[n] {
        Node::Hold(h) => Some(h),
        _ => None,
    };
    let order_of = |a: NodeIndex, b: NodeIndex| {
        graph
            .edges_connecting(a, b)
            .next()
            .map_or(Order::Token, |e| *e.weight())
    };
    let n = cycle.len();
    let first = (0..n).find(|&i| hold_of(cycle[i]).is_some()).unwrap_or(0);
    let mut steps = Vec::new();
    let mut from = first;
    for offset in 1..=n {
        let at = (first + offset) % n;
        if let Some(to) = hold_of(cycle[at]) {
            steps.push(Step {
                from: hold_of(cycle[from]).unwrap_or(to),
                to,
                order: order_of(cycle[from], cycle[(from + 1) % n]),
            });
            from = at;
        }
    }
    // Start the cycle at its lowest hold, so that the same cycle always reads the same.
    if let Some(lowest) = (0..steps.len()).min_by_key(|&i| steps[i].from) {
        steps.rotate_left(lowest);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::holds::{HoldEnd, ReleaseOutcome};

    fn hold(begin: i64, end: i64, token: i64) -> Hold {
        Hold {
            key: 0,
            process: 0,
            acquire_invoke: begin,
            acquire_invoke_index: 0,
            begin,
            begin_index: 0,
            end,
            end_index: None,
            end_cause: HoldEnd::Released,
            release: ReleaseOutcome::None,
            token: Some(token),
            lease_ms: None,
            initial_lease_end: None,
            lease_end: None,
            lease_end_possible: None,
            lease_set_index: 0,
            dead_grant: false,
            shared: false,
        }
    }

    fn cycles(holds: &[Hold]) -> Vec<Vec<Step>> {
        let ids: Vec<u32> = (0..holds.len() as u32).collect();
        token_order_cycles(holds, &ids)
    }

    #[test]
    fn tokens_rising_in_real_time_make_no_cycle() {
        let holds = [hold(0, 10, 1), hold(10, 20, 2), hold(25, 30, 3)];
        assert!(cycles(&holds).is_empty());
    }

    #[test]
    fn a_lower_token_after_a_higher_one_is_a_two_step_cycle() {
        let holds = [hold(0, 10, 5), hold(20, 30, 3)];
        let found = cycles(&holds);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0],
            vec![
                Step {
                    from: 0,
                    to: 1,
                    order: Order::Realtime
                },
                Step {
                    from: 1,
                    to: 0,
                    order: Order::Token
                },
            ]
        );
    }

    #[test]
    fn a_hold_of_zero_length_is_no_cycle_with_itself() {
        let holds = [
            hold(0, 10, 1),
            hold(10, 10, 2),
            hold(10, 10, 3),
            hold(10, 20, 4),
        ];
        assert!(cycles(&holds).is_empty());
    }

    #[test]
    fn equal_tokens_one_after_the_other_are_a_cycle_but_side_by_side_are_not() {
        let consecutive = [hold(0, 10, 7), hold(10, 20, 7)];
        let found = cycles(&consecutive);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].iter().map(|s| s.order).collect::<Vec<_>>(),
            [Order::Realtime, Order::Token]
        );
        let concurrent = [hold(0, 20, 7), hold(10, 30, 7)];
        assert!(cycles(&concurrent).is_empty());
    }

    #[test]
    fn overlapping_holds_imply_no_real_time_order() {
        let holds = [hold(0, 20, 5), hold(10, 30, 3)];
        assert!(cycles(&holds).is_empty());
    }

    #[test]
    fn a_long_chain_of_holds_does_not_overflow_the_stack() {
        // 200k holds one after another: a path of 400k nodes, walked on a test thread's
        // small stack.
        let holds: Vec<Hold> = (0..200_000).map(|i| hold(i * 10, i * 10 + 5, i)).collect();
        assert!(cycles(&holds).is_empty());
    }

    #[test]
    fn many_holds_sharing_tokens_stay_linear_and_are_found() {
        // Two alternating token values over sequential holds: every 2 -> 1 step is a cycle,
        // all in one component; the graph has O(n) edges, not O(n^2).
        let holds: Vec<Hold> = (0..2000)
            .map(|i| hold(i * 10, i * 10 + 5, 1 + (i % 2)))
            .collect();
        let found = cycles(&holds);
        assert_eq!(found.len(), 1);
        assert!(found[0].len() >= 2);
    }
}
