//! The human report: each diagnostic with the offending line underlined
//! (annotate-snippets). Needs the `render` feature, which `cli` turns on.

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};

use super::{Diagnostic, Report, Severity, show_pointer};
use crate::contracts::{SourceMap, Span};

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
    let span = source.and_then(|m| place(m, d).map(|s| (m, s)));
    let g = match span {
        Some((map, s)) if s.offset < map.text.len() || map.text.is_empty() => {
            let end = token_end(&map.text, s.offset, s.len);
            let start = s.offset.min(end);
            let Some((first, text)) = excerpt(&map.text, start, end) else {
                let place = match &map.name {
                    Some(name) => format!("{name}:{}:{}", s.line, s.column),
                    None => format!("line {}, column {}", s.line, s.column),
                };
                return with_fix(
                    title.element(Level::NOTE.message(format!(
                        "at {}, {place} (the line is too long to show)",
                        show_pointer(&d.pointer)
                    ))),
                    d,
                );
            };
            let (start, end) = (start - first, end - first);
            let mut snippet = Snippet::source(text)
                .line_start(s.line)
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
        _ => {
            let file = source.and_then(|m| m.name.as_deref());
            let at = match file {
                Some(name) => format!("at {} in {name}", show_pointer(&d.pointer)),
                None => format!("at {}", show_pointer(&d.pointer)),
            };
            title.element(Level::NOTE.message(at))
        }
    };
    with_fix(g, d)
}

/// Where to underline `d`: its pointer's span, or, when a rule placed the diagnostic
/// elsewhere (inside a template), the word at its line and column.
fn place(map: &SourceMap, d: &Diagnostic) -> Option<Span> {
    let at_pointer = map.locate(&d.pointer);
    let (Some(line), Some(column)) = (d.line, d.column) else {
        return at_pointer;
    };
    if at_pointer.is_some_and(|s| (s.line, s.column) == (line, column)) {
        return at_pointer;
    }
    let line_start = if line <= 1 {
        0
    } else {
        map.text
            .match_indices('\n')
            .nth(line - 2)
            .map(|(i, _)| i + 1)?
    };
    let rest = map.text.get(line_start..)?;
    let offset = line_start
        + rest
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(rest.len(), |(i, _)| i);
    let word = map.text.get(offset..)?;
    let len = word
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(word.len())
        .max(1);
    Some(Span {
        line,
        column,
        offset,
        len,
    })
}

fn with_fix<'a>(g: Group<'a>, d: &'a Diagnostic) -> Group<'a> {
    match &d.fix {
        Some(fix) => g.element(Level::HELP.message(fix.as_str())),
        None => g,
    }
}

/// The longest line shown under a diagnostic. The renderer measures every character of
/// the lines it is given, so a 50 MB one-line document would take seconds to render.
const MAX_SHOWN_LINE: usize = 16 * 1024;

/// The whole lines holding the bytes `start..end`: the offset where they begin and their
/// text, or `None` when they are longer than [`MAX_SHOWN_LINE`]. Giving the renderer these
/// lines only keeps a report on a large document as fast as one on a small one.
fn excerpt(text: &str, start: usize, end: usize) -> Option<(usize, &str)> {
    let bytes = text.as_bytes();
    let first = bytes[..start]
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    let last = bytes[end..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(text.len(), |i| end + i);
    // Both ends are at a newline or at an end of the text: character boundaries.
    (last - first <= MAX_SHOWN_LINE).then(|| (first, &text[first..last]))
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
