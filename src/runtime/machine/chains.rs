//! Routers (a node with a `router` field): planning the steps only a router leads to (a
//! retry after an invalid `$route`, the call of a destination subgraph) and, at commit,
//! judging the router's `$route` and following it.
//!
//! A router's run is an ordinary node step; what differs is where control goes after
//! it. Its output's `$route` is judged before any of its writes is checked: a rejected
//! route applies nothing (writes and `$message` are dropped; the usage still counts) and
//! the router runs again with the problem as `error` (up to `retries` more times), then
//! the run fails with `invalid_route`. An accepted route applies the writes, delivers
//! `$message`, and goes on to the destination: a node as the next chain stage (trigger
//! `router`), a subgraph as a call from the router's level. The router's own `handoff`
//! is *owed*: it runs when the destination's chain completes (or the subgraph returns).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

use super::commit::{RouterRun, Tx, attach_usage};
use super::planner::Planner;
use super::step::{
    Level, NodeTarget, RoutedCall, StageExtra, Step, Then, next_stage, ready, router_chain,
};
use crate::contracts::condition::json_kind;
use crate::contracts::{RouterSpec, StopLocal};
use crate::runtime::data::{
    ChainTrigger, Control, MESSAGE_KEY, Owed, Pending, ROUTE_KEY, RunState, TerminationReason,
    TraceKind,
};
use crate::runtime::plan::{NodePlan, SubgraphPlan, check};

impl<'e> Planner<'e> {
    /// Plans a [`Pending::Retry`] (the router again, with the error) or a
    /// [`Pending::Call`] (a destination subgraph entered).
    pub(crate) fn plan_routed(
        &self,
        run: &RunState,
        level: Level<'e>,
        pending: &Pending,
        step: &mut Step<'e>,
    ) {
        match pending {
            Pending::Retry {
                node,
                dispatcher,
                kind,
                source,
                chain,
                run: n,
                error,
                owed,
            } => {
                let Some(np) = self.plan.nodes.get(&**node) else {
                    let then = Then::Mismatch(self.unknown("node", node), Some(dispatcher.clone()));
                    return ready(step, level, None, then);
                };
                let target = NodeTarget {
                    np,
                    dispatcher: Cow::Owned(Arc::clone(dispatcher)),
                    kind: *kind,
                    source: source.clone().map(Cow::Owned),
                    chain: Some(chain.clone()),
                    extra: Some(Box::new(StageExtra {
                        run: *n,
                        error: Some(error.clone()),
                        owed: owed.clone(),
                    })),
                    // The router runs again, not its advisors: their advice stands.
                    advised: true,
                };
                self.plan_node(run, level, None, None, target, step);
            }
            Pending::Call {
                subgraph,
                caller,
                router,
                chain,
                owed,
            } => {
                let then = match self.plan.subgraphs.get(&**subgraph) {
                    Some(sg) => Then::Call {
                        caller: Arc::clone(caller),
                        sg,
                        routed: Some(Box::new(RoutedCall {
                            router: Arc::clone(router),
                            owed: Owed {
                                chain: chain.clone(),
                                routers: owed.clone(),
                            },
                        })),
                    },
                    None => {
                        Then::Mismatch(self.unknown("subgraph", subgraph), Some(Arc::clone(caller)))
                    }
                };
                ready(step, level, None, then);
            }
            // Planned in `planning.rs`.
            Pending::Decide { .. }
            | Pending::Handoff { .. }
            | Pending::Advised { .. }
            | Pending::Advising(_)
            | Pending::Team(_)
            | Pending::Session { .. }
            | Pending::Deciding { .. } => {}
        }
    }
}

/// Where an accepted route leads.
pub(crate) enum Destination<'e> {
    /// `$route: null` (or none) from a router that may answer: it ends its level.
    Answer,
    /// A node: the next chain stage.
    Node(&'e NodePlan),
    /// A subgraph: called from the router's level.
    Subgraph(&'e SubgraphPlan),
}

/// An accepted route: where to, and the `$message` to deliver (slice and value).
pub(crate) struct Verdict<'e> {
    pub(crate) to: Destination<'e>,
    pub(crate) message: Option<(String, Value)>,
}

/// Why a route is not followed.
pub(crate) enum Rejection {
    /// The router runs again (retries left) with this as its `error`, else the run fails
    /// with `invalid_route`.
    Retry(String),
    /// The run fails at once (the workflow does not have a destination it declares, or
    /// the message breaks its slice's schema).
    Fail(TerminationReason, String),
}

/// The router's destinations as a list for messages: `[a, b]`.
fn listed(spec: &RouterSpec) -> String {
    format!("[{}]", spec.destinations.join(", "))
}

impl Tx<'_> {
    /// Commits a router's run (its step counted, its output read): judges the route
    /// first, so a rejected one applies nothing; else checks and applies the writes as
    /// for any node, records the item, delivers `$message` and follows the route. Out of
    /// line: the common node commit stays small.
    #[cold]
    #[inline(never)]
    pub(crate) fn commit_router(
        &mut self,
        level: Level<'_>,
        r: RouterRun<'_>,
        writes: Cow<'_, Value>,
        routed: Option<(Option<Value>, Option<Value>)>,
    ) {
        let RouterRun {
            np,
            dispatcher,
            kind,
            source,
            extra,
            duration_us,
            usage,
        } = r;
        let verdict = match self.judge(np, routed) {
            Ok(v) => v,
            Err(Rejection::Fail(reason, msg)) => return self.fail(reason, msg, Some(dispatcher)),
            Err(Rejection::Retry(problem)) => {
                let it = self.record(kind, &dispatcher);
                it.set_source(&source);
                it.set_target(&np.id);
                it.duration_us = duration_us;
                if let Some(u) = usage {
                    attach_usage(it, u);
                }
                return self.reject_route(np, dispatcher, kind, source, extra, problem);
            }
        };
        if let Err((reason, msg)) = self.check_writes(level, np, &writes) {
            return self.fail_after_run(reason, msg, dispatcher, (&np.id, duration_us), usage);
        }
        self.note_writes(&writes, None);
        self.apply_writes(writes);
        let run = extra.as_deref().map_or(1, |x| x.run);
        let it = self.record(kind, &dispatcher);
        it.set_source(source);
        it.set_target(&np.id);
        it.duration_us = duration_us;
        it.set_reason(route_reason(&verdict.to, run));
        if let Some(u) = usage {
            attach_usage(it, u);
        }
        if let Some((slice, value)) = verdict.message {
            self.run.level_state_mut().insert(slice, value);
        }
        self.follow_route(level, np, dispatcher, verdict.to, extra);
    }

    /// The router's `$route` and `$message` (`None` when its output had none: a `set`
    /// router, or one without behaviour), judged against its contract.
    pub(crate) fn judge<'p>(
        &self,
        np: &'p NodePlan,
        routed: Option<(Option<Value>, Option<Value>)>,
    ) -> Result<Verdict<'p>, Rejection>
    where
        Self: 'p,
    {
        let plan = self.plan;
        let Some(spec) = np.contract(&plan.graph).router.as_ref() else {
            return Err(Rejection::Fail(
                TerminationReason::NodeFailed,
                format!("node `{}` was judged as a router but is not one", np.id),
            ));
        };
        let id = &np.id;
        let (route, message) = routed.unwrap_or((None, None));
        let text = match message {
            None => None,
            Some(Value::String(t)) => Some(t),
            Some(other) => {
                return Err(Rejection::Retry(format!(
                    "`{MESSAGE_KEY}` must be a string, not {}",
                    json_kind(&other)
                )));
            }
        };
        let to = match route {
            None | Some(Value::Null) if spec.may_answer => Destination::Answer,
            None => {
                return Err(Rejection::Retry(format!(
                    "no `{ROUTE_KEY}` was sent; router `{id}` must name one of {}",
                    listed(spec)
                )));
            }
            Some(Value::Null) => {
                return Err(Rejection::Retry(format!(
                    "`{ROUTE_KEY}` is null, but router `{id}` may not answer itself \
                     (may_answer is false); name one of {}",
                    listed(spec)
                )));
            }
            Some(Value::String(d)) if spec.allows(&d) => {
                if let Some(n) = plan.nodes.get(d.as_str()) {
                    Destination::Node(n)
                } else if let Some(sg) = plan.subgraphs.get(d.as_str()) {
                    Destination::Subgraph(sg)
                } else {
                    return Err(Rejection::Fail(
                        TerminationReason::NodeFailed,
                        format!(
                            "router `{id}` routed to `{d}`, one of its destinations, which \
                             workflow `{}` does not have",
                            plan.graph.workflow()
                        ),
                    ));
                }
            }
            Some(Value::String(d)) => {
                let what = if plan.nodes.contains_key(d.as_str()) {
                    "a node"
                } else if plan.subgraphs.contains_key(d.as_str()) {
                    "a subgraph"
                } else {
                    "no node or subgraph"
                };
                return Err(Rejection::Retry(format!(
                    "`{ROUTE_KEY}` is \"{d}\" ({what}), which is not one of the destinations \
                     of router `{id}`: {}",
                    listed(spec)
                )));
            }
            Some(other) => {
                return Err(Rejection::Retry(format!(
                    "`{ROUTE_KEY}` must be a destination id (a string){}, not {} {other}",
                    if spec.may_answer { " or null" } else { "" },
                    json_kind(&other)
                )));
            }
        };
        let message = match (text, &spec.message_slice) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Rejection::Retry(format!(
                    "`{MESSAGE_KEY}` was sent, but router `{id}` declares no message_slice \
                     to deliver it to"
                )));
            }
            (Some(t), Some(slice)) => {
                let value = json!({"router": &**id, "message": t});
                if let Some(schema) = plan.slice_schemas.get(slice)
                    && let Err(msg) = check(schema, &value)
                {
                    return Err(Rejection::Fail(
                        TerminationReason::NodeFailed,
                        format!(
                            "the `{MESSAGE_KEY}` of router `{id}` does not match the schema of \
                             its message slice `{slice}`: {msg}"
                        ),
                    ));
                }
                Some((slice.clone(), value))
            }
        };
        Ok(Verdict { to, message })
    }

    /// Notes a rejected router run on its item (the trace's last, nothing applied) and
    /// runs the router again, or fails the run with `invalid_route` when no retry is left.
    pub(crate) fn reject_route(
        &mut self,
        np: &NodePlan,
        dispatcher: Arc<str>,
        kind: TraceKind,
        source: Option<Arc<str>>,
        extra: Option<Box<StageExtra>>,
        problem: String,
    ) {
        let plan = self.plan;
        let retries = np
            .contract(&plan.graph)
            .router
            .as_ref()
            .map_or(0, |r| r.retries);
        let extra = extra.map(|x| *x).unwrap_or_default();
        let n = extra.run.max(1);
        if let Some(item) = self.run.trace.last_mut() {
            item.set_reason(format!("invalid route (router run {n}): {problem}"));
        }
        if n <= retries {
            let chain = self.chain.clone().unwrap_or_else(|| router_chain(&np.id));
            self.run.control = Control::Running(Pending::Retry {
                node: Arc::clone(&np.id),
                dispatcher,
                kind,
                source,
                chain,
                run: n + 1,
                error: problem,
                owed: extra.owed,
            });
            return;
        }
        let msg = format!(
            "router `{}` gave no valid route in {n} run{}; the last: {problem}",
            np.id,
            if n == 1 { "" } else { "s" }
        );
        self.fail(TerminationReason::InvalidRoute, msg, Some(dispatcher));
    }

    /// Goes on from a router whose route was accepted (its writes and message applied,
    /// its item recorded).
    pub(crate) fn follow_route(
        &mut self,
        level: Level<'_>,
        np: &NodePlan,
        dispatcher: Arc<str>,
        to: Destination<'_>,
        extra: Option<Box<StageExtra>>,
    ) {
        let plan = self.plan;
        let mut owed = extra.map(|x| x.owed).unwrap_or_default();
        let chain = next_stage(self.chain.as_ref(), &np.id, ChainTrigger::Router);
        if !matches!(to, Destination::Answer) && np.contract(&plan.graph).handoff.is_some() {
            owed.push(Arc::clone(&np.id));
        }
        match to {
            Destination::Answer => {
                if !owed.is_empty() {
                    return self.pay_owed(dispatcher, owed);
                }
                let stop = StopLocal {
                    reason: Some(format!("router `{}` answered", np.id)),
                    ..StopLocal::default()
                };
                self.end_level(level, dispatcher, stop, TerminationReason::Terminal);
            }
            Destination::Node(n) => {
                self.run.control = Control::Running(Pending::Handoff {
                    node: Arc::clone(&n.id),
                    dispatcher,
                    from: Arc::clone(&np.id),
                    chain,
                    owed,
                });
            }
            Destination::Subgraph(sg) => {
                self.run.control = Control::Running(Pending::Call {
                    subgraph: Arc::clone(&sg.id),
                    caller: dispatcher,
                    router: Arc::clone(&np.id),
                    chain,
                    owed,
                });
            }
        }
    }

    /// A routed chain completed (or a routed subgraph returned, `self.chain` then being
    /// its place in the chain): the innermost owed router's `handoff` runs next.
    #[cold]
    #[inline(never)]
    pub(crate) fn pay_owed(&mut self, dispatcher: Arc<str>, mut owed: Vec<Arc<str>>) {
        let plan = self.plan;
        let Some(router) = owed.pop() else {
            return;
        };
        let next = plan
            .nodes
            .get(&*router)
            .and_then(|r| r.contract(&plan.graph).handoff.as_deref())
            .and_then(|h| plan.nodes.get(h));
        let Some(next) = next else {
            let msg = format!(
                "router `{router}` owes a handoff this workflow does not have (was the run \
                 saved by another workflow?)"
            );
            return self.fail(TerminationReason::NodeFailed, msg, Some(dispatcher));
        };
        let chain = next_stage(self.chain.as_ref(), &router, ChainTrigger::Handoff);
        self.run.control = Control::Running(Pending::Handoff {
            node: Arc::clone(&next.id),
            dispatcher,
            from: router,
            chain,
            owed,
        });
    }
}

/// The `reason` of an accepted router run's item: where it routed.
pub(crate) fn route_reason(to: &Destination<'_>, run: u32) -> String {
    let what = match to {
        Destination::Answer => "answered ($route: null)".to_string(),
        Destination::Node(n) => format!("$route: {}", n.id),
        Destination::Subgraph(sg) => format!("$route: {}", sg.id),
    };
    if run > 1 {
        format!("{what} (router run {run})")
    } else {
        what
    }
}
