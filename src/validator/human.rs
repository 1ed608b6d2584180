//! The human report: each diagnostic with the offending line underlined
//! (annotate-snippets). Needs the `render` feature, which `cli` turns on.

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use super::{Diagnostic, Report, Severity, show_pointer};
use crate::contracts::SourceMap;

impl Report {
    /// Human-readable text: each diagnostic with its code, message and, when the source
    /// is given and the location known, the offending line with the token underlined;
    /// then the fix and a summary line. No colours. Needs the `render` feature (on with
    /// `cli`); [`Report::to_json`] is always there.
    pub fn render_human(&self, source: Option<&SourceMap>) -> String {
        let renderer = Renderer::plain();
        let mut out = String::new();
        for d in &self.diagnostics {
            out.push_str(&renderer.render(&[group(d, source)]).to_string());
            out.push_str("\n\n");
        }
        out.push_str(&self.summary());
        out.push('\n');
        out
    }
}

fn level(severity: Severity) -> Level<'static> {
    match severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
        Severity::Info => Level::INFO,
    }
}

fn group<'a>(d: &'a Diagnostic, source: Option<&'a SourceMap>) -> Group<'a> {
    let code = d.code.to_string();
    let title = level(d.severity).primary_title(d.message.as_str()).id(code);
    let span = source.and_then(|m| m.locate(&d.pointer).map(|s| (m, s)));
    let mut g = match span {
        Some((map, s)) if s.offset < map.text.len() || map.text.is_empty() => {
            let end = token_end(&map.text, s.offset, s.len);
            let start = s.offset.min(end);
            let mut snippet = Snippet::source(map.text.as_str())
                .line_start(1)
                .fold(true)
                .annotation(
                    AnnotationKind::Primary
                        .span(start..end)
                        .label(show_pointer(&d.pointer)),
                );
            if let Some(name) = &map.name {
                snippet = snippet.path(name.as_str());
            }
            title.element(snippet)
        }
        _ => title.element(Level::NOTE.message(format!("at {}", show_pointer(&d.pointer)))),
    };
    if let Some(fix) = &d.fix {
        g = g.element(Level::HELP.message(fix.as_str()));
    }
    g
}

/// End of the token at `offset`: a one-byte span on a string literal grows to the whole
/// literal, so the underline covers `"ghost"` rather than its opening quote.
fn token_end(text: &str, offset: usize, len: usize) -> usize {
    let end = offset.saturating_add(len).min(text.len());
    if len > 1 || text.as_bytes().get(offset) != Some(&b'"') {
        return end;
    }
    let mut escaped = false;
    for (i, c) in text.get(offset + 1..).unwrap_or("").char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return offset + 1 + i + 1,
            '\n' => return end,
            _ => escaped = false,
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::token_end;

    #[test]
    fn string_tokens_grow_to_their_closing_quote() {
        let t = r#"  "gh\"ost", 1"#;
        assert_eq!(&t[2..token_end(t, 2, 1)], r#""gh\"ost""#);
        assert_eq!(token_end(t, 12, 1), 13);
        assert_eq!(token_end("\"open\nx", 0, 1), 1);
    }
}
