//! Feeding a session's effect output (a model's reply, or its tool calls' results) to the
//! work waiting on it: what a tool's failure tells the model.

use crate::runtime::data::ToolCallStatus;
use crate::runtime::effects::{EffectOutput, Fault, Produced};
use crate::runtime::machine::step::SessionWork;

/// Feeds a session's effect output (a model's reply, or its tool calls' results) to
/// the work waiting on it.
pub(crate) fn resolve_session(work: &mut SessionWork, output: EffectOutput) {
    match work {
        SessionWork::Model {
            result,
            attempt,
            duration_us,
            failed,
            ..
        } => {
            *attempt = output.attempt;
            *duration_us = output.duration_us;
            *result = Some(match output.result {
                Ok(Produced::Reply(reply)) => Ok(*reply),
                Ok(Produced::ModelFailed(f)) => {
                    *failed = f.attempts;
                    Err(Fault::Permanent(f.message))
                }
                Ok(_) => Err(Fault::Failed(
                    "was given something other than a model's reply".into(),
                )),
                Err(f) => Err(f),
            });
        }
        SessionWork::Tools(outcomes) => match output.result {
            Ok(Produced::ToolResults(results)) => {
                for r in results {
                    let Some(o) = outcomes.get_mut(r.index) else {
                        continue;
                    };
                    o.duration_us = r.duration_us;
                    match r.result {
                        Ok(out) => {
                            o.usage = out.usage;
                            o.content = Some(serde_json::Value::Object(out.writes).to_string());
                        }
                        Err(fault) => {
                            o.cancelled = fault == Fault::Cancelled;
                            o.status = match fault {
                                Fault::Timeout(_) => ToolCallStatus::Timeout,
                                _ => ToolCallStatus::Failed,
                            };
                            let error = format!("tool `{}` {}", o.tool, fault_words(&fault));
                            o.content = Some(super::error_content(&error));
                            o.error = Some(error);
                        }
                    }
                }
            }
            Ok(_) | Err(_) => {
                for o in outcomes.iter_mut().filter(|o| o.content.is_none()) {
                    o.cancelled = true;
                }
            }
        },
        SessionWork::Failed(_) => {}
    }
}

/// A tool's failure as the model is told it.
fn fault_words(fault: &Fault) -> String {
    match fault {
        Fault::Failed(m) | Fault::Permanent(m) => format!("failed: {m}"),
        Fault::Timeout(m) | Fault::InvalidOutput(m) => m.clone(),
        Fault::Cancelled => "was cancelled".into(),
    }
}
