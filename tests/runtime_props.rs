//! Properties over random valid workflows with random rule outcomes: every run ends
//! within `max_steps` steps, and a run saved and restored after any step ends exactly as
//! the uninterrupted run.

mod support;

use pactgraph::runtime::RunState;
use proptest::prelude::*;
use support::random_workflow::{input, workflow};
use support::runtime::{builder, graph, rt};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn runs_end_within_max_steps_and_resume_exactly(seed in any::<u64>(), k in 0usize..60) {
        let (doc, max_steps) = workflow(seed);
        let ex = builder(graph(doc)).build().unwrap();
        let rt = rt();
        let initial = input(seed);

        let mut whole = ex.start(initial.clone()).unwrap();
        let mut calls = 0u32;
        while whole.is_running() {
            rt.block_on(ex.step(&mut whole));
            calls += 1;
            prop_assert!(calls <= 4 * max_steps + 4, "the run does not end");
        }
        prop_assert!(whole.steps() <= max_steps);
        prop_assert!(whole.status().is_final());

        let mut part = ex.start(initial).unwrap();
        for _ in 0..k.min(calls as usize) {
            rt.block_on(ex.step(&mut part));
        }
        let saved = serde_json::to_string(&part).unwrap();
        let mut restored: RunState = serde_json::from_str(&saved).unwrap();
        prop_assert_eq!(&restored, &part);
        // Saved again, byte for byte (the trace's projection into the state included).
        prop_assert_eq!(serde_json::to_string(&restored).unwrap(), saved);
        rt.block_on(ex.run_in_place(&mut restored));
        prop_assert_eq!(&restored.state(), &whole.state());
        prop_assert_eq!(restored.status(), whole.status());
        prop_assert_eq!(restored.termination_reason(), whole.termination_reason());
        prop_assert_eq!(restored.trace().without_timing(), whole.trace().without_timing());
        prop_assert_eq!(&restored.uncommitted(), &whole.uncommitted());
    }
}

/// The generator is not tame: over many seeds its valid workflows end in every way the
/// budgets allow, so the property above is exercised on runs that loop until a guard
/// stops them, not only on runs that finish by themselves.
#[test]
fn generated_workflows_reach_every_kind_of_ending() {
    use pactgraph::runtime::TerminationReason as R;
    let rt = rt();
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..400u64 {
        let (doc, _) = workflow(seed);
        let ex = builder(graph(doc)).build().unwrap();
        let mut run = ex.start(input(seed)).unwrap();
        rt.block_on(ex.run_in_place(&mut run));
        seen.insert(format!("{:?}", run.termination_reason().unwrap()));
    }
    for want in [
        R::MaxStepsExceeded,
        R::CycleDetected,
        R::MaxDepthExceeded,
        R::StopGlobal,
        R::StopLocal,
        R::Terminal,
    ] {
        assert!(
            seen.contains(&format!("{want:?}")),
            "{want:?} never seen: {seen:?}"
        );
    }
}
