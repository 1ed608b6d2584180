//! The opening of a session: `instructions` (the system message) and `prompt` (the
//! first user message) rendered with MiniJinja over the node's read view (each read
//! slice by name, and `input` for the whole view). Without a `prompt`, the read view as
//! indented JSON.

use serde_json::Value;

use crate::model::ChatMessage;
use crate::runtime::data::Writes;
use crate::runtime::plan::agent::AgentPlan;

/// The messages a session of `agent` opens with, for `who` (`agent node `ID``, say)
/// reading `view`; the error names the template and what is wrong with it. `first` (an
/// advisors' primary's tagged blocks) comes before the view in the default prompt.
pub(crate) fn opening(
    who: &str,
    agent: &AgentPlan,
    view: Writes,
    first: Option<&str>,
) -> Result<Vec<ChatMessage>, String> {
    let mut context = view.clone();
    context.insert("input".into(), Value::Object(view.clone()));
    let context = Value::Object(context);
    let env = minijinja::Environment::new();
    let render = |field: &str, template: &str| {
        env.render_str(template, &context)
            .map_err(|e| format!("the `{field}` template of {who} cannot be rendered: {e}"))
    };
    let mut messages = Vec::with_capacity(2);
    if let Some(t) = &agent.spec.instructions {
        messages.push(ChatMessage::system(render("instructions", t)?));
    }
    let prompt = match &agent.spec.prompt {
        Some(t) => render("prompt", t)?,
        None => {
            let json = serde_json::to_string_pretty(&Value::Object(view))
                .map_err(|e| format!("the read view of {who} cannot be written: {e}"))?;
            match first {
                Some(tagged) => format!("{tagged}\n\n{json}"),
                None => json,
            }
        }
    };
    messages.push(ChatMessage::user(prompt));
    Ok(messages)
}
