//! The precedence graph of a key's holds, for fencing tokens.
//!
//! Nodes are holds. An edge A -> B says A came before B by one of two orders that a correct,
//! fenced lock keeps consistent: real time (A ended no later than B began) and token order
//! (A's token is lower). A cycle means the two orders disagree: some hold that ended before
//! another began got a token that is not lower (`token-order`). As in Elle, each cycle is
//! reported with its steps spelled out.
//!
//! Edges are kept few without losing reachability: real-time edges come only from the
//! "frontier" (ended holds not already known to precede another ended hold), and token edges
//! only join holds with adjacent token values.

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::VecDeque;

use super::holds::Hold;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The source ended no later than the target began.
    Realtime,
    /// The source's token is lower than the target's.
    Token,
}

/// One step of a cycle: `from` precedes `to` by `order`. Hold ids index `Holds::holds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub from: u32,
    pub to: u32,
    pub order: Order,
}

/// Builds the graph over `key_holds` (ids into `holds`, in begin order) and returns one
/// shortest cycle per strongly connected component that has one.
pub fn token_order_cycles(holds: &[Hold], key_holds: &[u32]) -> Vec<Vec<Step>> {
    let mut graph: DiGraph<u32, Order> =
        DiGraph::with_capacity(key_holds.len(), key_holds.len() * 2);
    let nodes: Vec<NodeIndex> = key_holds.iter().map(|&h| graph.add_node(h)).collect();
    add_realtime_edges(&mut graph, holds, key_holds, &nodes);
    add_token_edges(&mut graph, holds, key_holds, &nodes);

    let mut cycles = Vec::new();
    for component in tarjan_scc(&graph) {
        if component.len() < 2 {
            continue;
        }
        if let Some(cycle) = shortest_cycle(&graph, &component) {
            cycles.push(cycle);
        }
    }
    cycles.sort_by_key(|c| c.iter().map(|s| holds[s.from as usize].begin).min());
    cycles
}

fn add_realtime_edges(
    graph: &mut DiGraph<u32, Order>,
    holds: &[Hold],
    key_holds: &[u32],
    nodes: &[NodeIndex],
) {
    // Positions into key_holds, by end time (open holds never end).
    let mut by_end: Vec<usize> = (0..key_holds.len())
        .filter(|&i| holds[key_holds[i] as usize].end != super::holds::OPEN)
        .collect();
    by_end.sort_by_key(|&i| holds[key_holds[i] as usize].end);
    let mut frontier: Vec<usize> = Vec::new();
    let mut next_end = 0;
    for (i, &h) in key_holds.iter().enumerate() {
        let begin = holds[h as usize].begin;
        while next_end < by_end.len() && holds[key_holds[by_end[next_end]] as usize].end <= begin {
            let ended = by_end[next_end];
            let ended_begin = holds[key_holds[ended] as usize].begin;
            // Whatever ended before `ended` began already reaches it through an edge.
            frontier.retain(|&f| holds[key_holds[f] as usize].end > ended_begin);
            frontier.push(ended);
            next_end += 1;
        }
        for &f in &frontier {
            if f != i {
                graph.add_edge(nodes[f], nodes[i], Order::Realtime);
            }
        }
    }
}

fn add_token_edges(
    graph: &mut DiGraph<u32, Order>,
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
    // Groups of equal tokens; each group precedes the next.
    let groups: Vec<&[(i64, usize)]> = tokened.chunk_by(|a, b| a.0 == b.0).collect();
    for pair in groups.windows(2) {
        for &(_, from) in pair[0] {
            for &(_, to) in pair[1] {
                graph.add_edge(nodes[from], nodes[to], Order::Token);
            }
        }
    }
}

/// The shortest cycle through the component's first node, found by breadth-first search
/// inside the component.
fn shortest_cycle(graph: &DiGraph<u32, Order>, component: &[NodeIndex]) -> Option<Vec<Step>> {
    let inside: std::collections::HashSet<NodeIndex> = component.iter().copied().collect();
    let start = *component.iter().min_by_key(|n| graph[**n])?;
    let mut came_from: std::collections::HashMap<NodeIndex, (NodeIndex, Order)> =
        std::collections::HashMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for edge in graph.edges(node) {
            let next = edge.target();
            if !inside.contains(&next) || came_from.contains_key(&next) {
                continue;
            }
            came_from.insert(next, (node, *edge.weight()));
            if next == start {
                let mut steps = Vec::new();
                let mut at = start;
                loop {
                    let (prev, order) = came_from[&at];
                    steps.push(Step {
                        from: graph[prev],
                        to: graph[at],
                        order,
                    });
                    at = prev;
                    if at == start {
                        break;
                    }
                }
                steps.reverse();
                return Some(steps);
            }
            queue.push_back(next);
        }
    }
    None
}
