//! Rule 12c: an agent's `instructions` and `prompt` are MiniJinja templates that parse
//! (`PG1203`) and name only what the agent sees (`PG1204`): a node's read slices, a
//! supervisor's slices visible at its level and `allow`, and `input`. Each diagnostic
//! points into the template: its line and column are the place in the document's text.

use super::agent_sites::{AgentSite, agents, template_names};
use crate::contracts::template::{environment, on_template_stack, variables};
use crate::validator::{Code, Context, Diagnostic};

pub(crate) fn check(ctx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let sites = agents(ctx);
    if sites.is_empty() {
        return;
    }
    let found = on_template_stack(|| {
        let mut found = Vec::new();
        check_sites(ctx, &sites, &mut found);
        found
    });
    out.extend(found);
}

/// The findings of every template of `sites`.
fn check_sites(ctx: &Context<'_>, sites: &[AgentSite<'_>], out: &mut Vec<Diagnostic>) {
    let env = environment();
    for site in sites {
        let names = template_names(ctx, site);
        for (field, template) in [
            ("instructions", &site.spec.instructions),
            ("prompt", &site.spec.prompt),
        ] {
            let Some(template) = template else { continue };
            let pointer = site.field(field);
            match variables(&env, template) {
                Err(e) => {
                    let at = e.range.as_ref().map_or(0, |r| r.start);
                    out.push(located(
                        ctx,
                        Diagnostic::new(
                            Code::BAD_TEMPLATE,
                            pointer.clone(),
                            format!(
                                "the `{field}` template of {} does not parse ({}): {}",
                                site.who(),
                                place(template, at),
                                e.message
                            ),
                        )
                        .fix("fix the MiniJinja syntax at the place shown"),
                        &pointer,
                        at,
                    ));
                }
                Ok(used) => {
                    for (name, at) in used {
                        if names.contains(name.as_str()) {
                            continue;
                        }
                        out.push(located(
                            ctx,
                            unknown(ctx, site, field, &name, template, at, &pointer),
                            &pointer,
                            at,
                        ));
                    }
                }
            }
        }
    }
}

/// The diagnostic for `name`, used at byte `at` of the template, that the agent does not
/// see.
fn unknown(
    ctx: &Context<'_>,
    site: &AgentSite<'_>,
    field: &str,
    name: &str,
    template: &str,
    at: usize,
    pointer: &str,
) -> Diagnostic {
    let what = match site.owner {
        super::agent_sites::Owner::Node => "a slice the node reads",
        super::agent_sites::Owner::Supervisor => "a slice visible at its level, `allow`",
    };
    let fix = if ctx.slice_known(name) {
        match site.owner {
            super::agent_sites::Owner::Node => format!(
                "add `{name}` to the `reads` of node `{}`, or use `input`",
                site.id
            ),
            super::agent_sites::Owner::Supervisor => format!(
                "supervisor `{}` cannot see slice `{name}` at its level: widen the \
                 subgraph's boundary or drop it from the template",
                site.id
            ),
        }
    } else {
        format!("`{name}` is not a declared slice: use a slice's name or `input`")
    };
    Diagnostic::new(
        Code::TEMPLATE_UNKNOWN_VARIABLE,
        pointer,
        format!(
            "the `{field}` template of {} names `{name}` ({}), which is not {what} or `input`",
            site.who(),
            place(template, at)
        ),
    )
    .fix(fix)
}

/// `line L, column C of the template` for byte `at` of it.
fn place(template: &str, at: usize) -> String {
    let at = at.min(template.len());
    let before = template.get(..at).unwrap_or(template);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {column} of the template")
}

/// Sets the diagnostic's line and column to byte `at` of the template, when the document
/// came from text.
fn located(ctx: &Context<'_>, mut d: Diagnostic, pointer: &str, at: usize) -> Diagnostic {
    if let Some(span) = ctx
        .graph
        .source()
        .and_then(|m| m.locate_in_string(pointer, at))
    {
        d.line = Some(span.line);
        d.column = Some(span.column);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(feature = "yaml")]
    use crate::contracts::{DocumentFormat, WorkflowDocument};
    #[cfg(feature = "yaml")]
    use crate::graph::GraphBuilder;
    use crate::validator::Validator;
    use crate::validator::rules::testing::{agents, run};
    use serde_json::json;

    #[test]
    fn templates_over_read_slices_and_input_are_fine() {
        assert!(run(check, agents()).is_empty());
        let mut doc = agents();
        doc["supervisors"]["root"]["policy"] = json!({"agent": {
            "instructions": "Choose among {{ allow | join(', ') }}; {{ system.step_count }}",
            "prompt": "{{ request }} {{ answer }} {{ input }}"
        }});
        assert!(run(check, doc).is_empty());
    }

    #[test]
    fn a_template_that_does_not_parse_is_refused() {
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["prompt"] = json!("Hi {{ request.text ");
        assert_eq!(
            run(check, doc),
            vec![(Code::BAD_TEMPLATE, "/nodes/reply/run/agent/prompt".into())]
        );
    }

    /// Hostile nesting is a diagnostic, never a stack overflow (this test's thread has
    /// the default 2 MB stack).
    #[test]
    fn deep_templates_are_refused_not_overflowed() {
        for deep in [
            format!("{{{{ request{} }}}}", "[0]".repeat(30_000)),
            format!("{{{{ {}request }}}}", "-".repeat(30_000)),
            format!("{{{{ {}request{} }}}}", "(".repeat(200), ")".repeat(200)),
        ] {
            let mut doc = agents();
            doc["nodes"]["reply"]["run"]["agent"]["prompt"] = json!(deep);
            assert_eq!(
                run(check, doc),
                vec![(Code::BAD_TEMPLATE, "/nodes/reply/run/agent/prompt".into())]
            );
        }
    }

    #[test]
    fn names_outside_the_view_are_refused() {
        let mut doc = agents();
        doc["nodes"]["reply"]["run"]["agent"]["instructions"] =
            json!("{{ request.x }} {{ answer }} {{ nothing }}");
        doc["supervisors"]["root"]["policy"] =
            json!({"agent": {"prompt": "{{ allow }} {{ reads }}"}});
        assert_eq!(
            run(check, doc),
            vec![
                (
                    Code::TEMPLATE_UNKNOWN_VARIABLE,
                    "/nodes/reply/run/agent/instructions".into()
                ),
                (
                    Code::TEMPLATE_UNKNOWN_VARIABLE,
                    "/nodes/reply/run/agent/instructions".into()
                ),
                (
                    Code::TEMPLATE_UNKNOWN_VARIABLE,
                    "/supervisors/root/policy/agent/prompt".into()
                ),
            ]
        );
    }

    #[test]
    fn a_supervisor_in_a_subgraph_sees_its_boundary_only() {
        let mut doc = agents();
        doc["slices"]["inner"] = json!({});
        doc["supervisors"]["root"]["allow"] = json!(["reply", "sub"]);
        doc["supervisors"]["sub_sup"] = json!({"allow": ["work"],
            "policy": {"agent": {"prompt": "{{ inner }} {{ answer }}"}}});
        doc["subgraphs"] = json!({"sub": {"entrypoint": "sub_sup", "supervisors": ["sub_sup"],
            "reads": [], "writes": ["inner"]}});
        doc["nodes"]["work"] = json!({"supervisor": "sub_sup", "writes": ["inner"]});
        let g = crate::validator::rules::testing::graph(doc);
        let r = Validator::new().validate(&g);
        let found: Vec<&str> = r
            .with_code(Code::TEMPLATE_UNKNOWN_VARIABLE)
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("names `answer`"), "{found:?}");
    }

    /// The line and column are the variable's place in the document, in JSON and YAML.
    #[cfg(feature = "yaml")]
    #[test]
    fn diagnostics_point_into_the_template_in_the_text() {
        let yaml = "workflow: w
slices: {request: {}, answer: {}}
models: {default: {base_url: 'http://127.0.0.1:1/v1', model: m}}
entry: root
supervisors: {root: {allow: [reply], default: {stop_global: {}}}}
nodes:
  reply:
    supervisor: root
    reads: [request]
    writes: [answer]
    triggers: [{when: true}]
    terminal: true
    run:
      agent:
        prompt: |
          Hello.
          Answer {{ request.text }} for {{ customer }}.
";
        let json = serde_json::to_string_pretty(&serde_yaml_value(yaml)).expect("serializes");
        for (text, format, line, column) in [
            (yaml.to_string(), DocumentFormat::Yaml, 17, 44),
            (json, DocumentFormat::Json, 0, 0),
        ] {
            let (doc, map) = WorkflowDocument::parse(&text, format).expect("parses");
            let g = GraphBuilder::from_document(doc)
                .source_map(map)
                .build()
                .expect("builds");
            let r = Validator::new().validate(&g);
            let d = r
                .with_code(Code::TEMPLATE_UNKNOWN_VARIABLE)
                .next()
                .expect("reported");
            assert_eq!(d.pointer, "/nodes/reply/run/agent/prompt");
            assert!(
                d.message.contains("line 2, column 34 of the template"),
                "{}",
                d.message
            );
            let (l, c) = (d.line.expect("a line"), d.column.expect("a column"));
            let at_line = text.lines().nth(l - 1).expect("the line");
            let from: String = at_line.chars().skip(c - 1).take(8).collect();
            assert_eq!(from, "customer", "{text}");
            if line > 0 {
                assert_eq!((l, c), (line, column));
            }
        }
    }

    #[cfg(feature = "yaml")]
    fn serde_yaml_value(yaml: &str) -> serde_json::Value {
        crate::contracts::load::parse_value(yaml, DocumentFormat::Yaml)
            .expect("parses")
            .0
    }
}
