//! Accounting: what a run cost, summed from its trace.
//!
//! Every node run leaves one item in the trace that carries its usage record: the
//! `$usage` the node reported plus `wall_ms`, the node call's wall time (see
//! [`TraceItem::usage_record`]); so does each model call and tool call of a supervisor's
//! policy agent, recorded under the supervisor. [`Accounting::from_trace`] sums those records four ways:
//! in all, per node, per subgraph the node ran in (root-level runs have no entry there)
//! and per owner, the node that owns the final answer the run contributed to (see
//! [`rollup_of`]).
//!
//! Accounting is computed from the trace when an outcome is built, never per step: the
//! loop step pays nothing for it, and a run saved and resumed (whose trace is part of
//! its state) has exactly the accounting of a run never interrupted.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::decision_trace::DecisionTrace;
use super::output::{Usage, WALL_MS};
use super::trace::TraceItem;
use super::trace::{TraceKind, wall_ms};

/// A run's cost, summed from the usage records of its node runs: `{"total", "by_node",
/// "by_subgraph", "by_owner"}`, each a map of name to sum (`input_tokens`,
/// `output_tokens`, `cost_usd`, `wall_ms` and any other name a node reported).
///
/// ```
/// use pactgraph::runtime::{Accounting, DecisionTrace, TraceItem, TraceKind, Usage};
///
/// let mut item = TraceItem::new(TraceKind::Dispatch, 1, 0);
/// item.target = Some("draft".into());
/// item.duration_us = 2_000;
/// item.set_usage(Some(Usage::new().with("output_tokens", 12)));
/// let trace = DecisionTrace::from(vec![item]);
/// let acct = Accounting::from_trace(&trace);
/// assert_eq!(acct.total.get("output_tokens"), Some(&12.into()));
/// assert_eq!(acct.by_owner["draft"].get("wall_ms"), Some(&2.into()));
/// assert!(acct.by_subgraph.is_empty(), "root-level runs have no subgraph entry");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accounting {
    /// Every node run's usage record, summed.
    pub total: Usage,
    /// Per node id: that node's runs (an advisor's runs included).
    pub by_node: BTreeMap<String, Usage>,
    /// Per subgraph id: the runs of nodes inside it, at its own level (not nested
    /// subgraphs'). Runs at the root level appear in `total`, `by_node` and `by_owner`
    /// only.
    pub by_subgraph: BTreeMap<String, Usage>,
    /// Per owner: every run rolled up to the node owning the final answer it contributed
    /// to: a handoff or router stage to its chain's last stage, an advisor to its
    /// primary, team members and the lead to the team node; any other run owns itself.
    pub by_owner: BTreeMap<String, Usage>,
}

impl Accounting {
    /// Sums the usage records of `trace`'s node runs. The same trace always gives the
    /// same accounting (maps are ordered by id).
    pub fn from_trace(trace: &DecisionTrace) -> Self {
        let records = Records::collect(trace);
        let owners = records.owners();
        let mut total = Sum::default();
        let mut by_node = BTreeMap::new();
        let mut by_subgraph = BTreeMap::new();
        let mut by_owner = BTreeMap::new();
        for (rec, owner) in records.list.iter().zip(owners) {
            total.add(rec);
            add_to(&mut by_node, rec.node, rec);
            if let Some(sg) = rec.subgraph {
                add_to(&mut by_subgraph, sg, rec);
            }
            add_to(&mut by_owner, owner, rec);
        }
        let done = |m: BTreeMap<&str, Sum>| {
            m.into_iter()
                .map(|(k, v)| (k.to_string(), v.finish()))
                .collect()
        };
        Accounting {
            total: total.finish(),
            by_node: done(by_node),
            by_subgraph: done(by_subgraph),
            by_owner: done(by_owner),
        }
    }

    /// True when no node ran.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }
}

/// A sum in progress: the reported amounts, and the wall time in whole microseconds (so
/// wall times add up exactly; `wall_ms` is written at the end, last).
#[derive(Default)]
struct Sum {
    usage: Usage,
    wall_us: u64,
}

impl Sum {
    fn add(&mut self, rec: &Record<'_>) {
        if let Some(u) = rec.usage {
            self.usage.add_all(u);
        }
        self.wall_us = self.wall_us.saturating_add(rec.wall_us);
    }

    fn finish(self) -> Usage {
        let mut usage = self.usage;
        usage.add(WALL_MS, wall_ms(self.wall_us));
        usage
    }
}

fn add_to<'a>(map: &mut BTreeMap<&'a str, Sum>, key: &'a str, rec: &Record<'_>) {
    map.entry(key).or_default().add(rec);
}

/// Who a node run hands its cost to, as its trace item tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rollup<'a> {
    /// The node owns its own cost (a node outside any pattern).
    Itself,
    /// A stage of a handoff or router chain: owned by whatever owns the next stage of
    /// the same chain (so, in the end, by the chain's last stage).
    ChainStage {
        /// The chain's first node.
        root: &'a str,
        /// The stage's index (0 starts a new chain).
        stage: u32,
    },
    /// A participant working for another node that runs after it at the same level:
    /// owned by whatever owns that node's next run there (an advisor's primary; a team
    /// member's or lead's team node).
    Serves(&'a str),
}

/// The ownership rule of accounting: which node owns a node run's cost, by the pattern
/// the run played a part in.
///
/// - advisors roll up to their primary (the advisor item's `source`);
/// - handoff and router stages roll up to their chain's last stage (every stage is owned
///   by the next one of the same chain);
/// - team members and the lead roll up to the team node: their turn items must answer
///   [`Rollup::Serves`] with the team node, here, the one place the rule is written (the
///   team's turns are recorded before the team node's own item, as advisors are before
///   their primary's);
/// - nodes outside any pattern own themselves.
///
/// The rules compose: an advisor of a chain stage belongs to its primary, which belongs
/// to the chain's last stage.
pub(crate) fn rollup_of(item: &TraceItem) -> Rollup<'_> {
    let chain = item.chain().map(|c| (&*c.root, c.stage));
    match (item.kind, item.source(), chain) {
        (TraceKind::Advisor, Some(primary), _) => Rollup::Serves(primary),
        // A team member's or lead's turn (`source` the team node).
        (TraceKind::TeamTurn, Some(team), _) => Rollup::Serves(team),
        (_, _, Some((root, stage))) => Rollup::ChainStage { root, stage },
        _ => Rollup::Itself,
    }
}

/// Who owns one record, as far as known so far.
#[derive(Debug, Clone, Copy)]
enum Owner<'a> {
    /// This node, by id (itself, or a primary whose run never came).
    Named(&'a str),
    /// Whoever owns a later record.
    Record(usize),
}

/// One node run's usage record: what it reported, and its wall time.
struct Record<'a> {
    node: &'a str,
    subgraph: Option<&'a str>,
    usage: Option<&'a Usage>,
    wall_us: u64,
    owner: Owner<'a>,
}

/// The records of a trace, linked to their owners.
struct Records<'a> {
    list: Vec<Record<'a>>,
}

impl<'a> Records<'a> {
    /// Reads every node run's record and links each to its owner: a chain stage to the
    /// next stage of the same chain (same first node, same depth), a participant to the
    /// next run of the node it serves at its depth. Links always point forward.
    fn collect(trace: &'a DecisionTrace) -> Self {
        let mut list: Vec<Record<'a>> = Vec::new();
        let mut chains: HashMap<(&'a str, u16), usize> = HashMap::new();
        let mut serving: HashMap<(&'a str, u16), Vec<usize>> = HashMap::new();
        for item in trace.iter() {
            let Some(node) = item.ran_node() else {
                continue;
            };
            let idx = list.len();
            let rollup = rollup_of(item);
            if !matches!(rollup, Rollup::Serves(_))
                && let Some(waiting) = serving.remove(&(node, item.depth))
            {
                for w in waiting {
                    list[w].owner = Owner::Record(idx);
                }
            }
            let owner = match rollup {
                Rollup::Itself => Owner::Named(node),
                Rollup::Serves(whom) => {
                    serving.entry((whom, item.depth)).or_default().push(idx);
                    Owner::Named(whom)
                }
                Rollup::ChainStage { root, stage } => {
                    let key = (root, item.depth);
                    if stage > 0
                        && let Some(&prev) = chains.get(&key)
                    {
                        list[prev].owner = Owner::Record(idx);
                    }
                    chains.insert(key, idx);
                    Owner::Named(node)
                }
            };
            list.push(Record {
                node,
                subgraph: item.subgraph(),
                usage: item.usage(),
                wall_us: item.duration_us,
                owner,
            });
        }
        Self { list }
    }

    /// Each record's owner, by id. Links point forward, so walking backwards finds every
    /// link's target already resolved.
    fn owners(&self) -> Vec<&'a str> {
        let mut owners = vec![""; self.list.len()];
        for (i, rec) in self.list.iter().enumerate().rev() {
            owners[i] = match rec.owner {
                Owner::Named(n) => n,
                Owner::Record(j) => owners[j],
            };
        }
        owners
    }
}
