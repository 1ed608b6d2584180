//! The MiniJinja templates of agents (`instructions`, `prompt`): the one environment they
//! are parsed (and rendered) in, and the names a template reads, for the validator.

use std::ops::Range;

use minijinja::Environment;

/// The environment agent templates use: MiniJinja's built-in filters, tests and globals
/// (`range`, `dict`, `namespace`, ...) and `tojson`; nothing registered besides.
pub(crate) fn environment() -> Environment<'static> {
    Environment::new()
}

/// A template that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TemplateError {
    /// What MiniJinja said, without its own location.
    pub message: String,
    /// The bytes of the template at fault, when MiniJinja knows them.
    pub range: Option<Range<usize>>,
}

/// The top-level names `source` reads that are not MiniJinja globals, each with the byte
/// offset of its first use in the template, in order of first use; or why it does not
/// parse.
pub(crate) fn variables(
    env: &Environment<'_>,
    source: &str,
) -> Result<Vec<(String, usize)>, TemplateError> {
    let template = env.template_from_str(source).map_err(|e| TemplateError {
        message: e
            .detail()
            .map_or_else(|| e.kind().to_string(), |d| format!("{}: {d}", e.kind())),
        range: e.range(),
    })?;
    let globals: Vec<&str> = env.globals().map(|(name, _)| name).collect();
    let mut names: Vec<(String, usize)> = template
        .undeclared_variables(false)
        .into_iter()
        .filter(|n| !globals.contains(&n.as_str()))
        .map(|n| {
            let at = first_use(source, &n).unwrap_or(0);
            (n, at)
        })
        .collect();
    names.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    Ok(names)
}

/// Byte offset of the first use of `name` as a whole identifier inside a `{{ }}` or
/// `{% %}` tag, not after a `.` (an attribute) and not inside a string literal.
fn first_use(source: &str, name: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while let Some(open) = find_tag(source, i) {
        let close_token = if &source[open..open + 2] == "{{" {
            "}}"
        } else {
            "%}"
        };
        let end = source[open + 2..]
            .find(close_token)
            .map_or(source.len(), |e| open + 2 + e);
        let mut quote: Option<u8> = None;
        let mut j = open + 2;
        while j < end {
            let b = bytes[j];
            match quote {
                Some(_) if b == b'\\' => j += 1,
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None if b == b'"' || b == b'\'' => quote = Some(b),
                None if source[j..].starts_with(name)
                    && (j == 0 || !ident(bytes[j - 1]) && bytes[j - 1] != b'.')
                    && bytes.get(j + name.len()).is_none_or(|b| !ident(*b)) =>
                {
                    return Some(j);
                }
                None => {}
            }
            j += 1;
        }
        i = end;
    }
    None
}

/// The offset of the next `{{` or `{%` at or after `from`.
fn find_tag(source: &str, from: usize) -> Option<usize> {
    let rest = source.get(from..)?;
    let at = [rest.find("{{"), rest.find("{%")]
        .into_iter()
        .flatten()
        .min()?;
    Some(from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_with_their_first_use_and_globals_are_left_out() {
        let env = environment();
        let src = "Hi {{ user.name }} {% for x in range(3) %}{{ x }}{{ 'input' }}{% endfor %} {{ input | tojson }} {{ loop_count }}";
        let names = variables(&env, src).expect("parses");
        let at = |n: &str| src.find(n).expect("present");
        assert_eq!(
            names,
            vec![
                ("user".to_string(), at("user")),
                ("input".to_string(), at("input |")),
                ("loop_count".to_string(), at("loop_count")),
            ]
        );
    }

    #[test]
    fn a_template_that_does_not_parse_says_where() {
        let env = environment();
        let e = variables(&env, "ok {{ request.text ").expect_err("unclosed");
        assert!(e.message.contains("syntax error"), "{}", e.message);
        let r = e.range.expect("a range");
        assert!(r.start >= 3, "{r:?}");
        let e = variables(&env, "{% if x %}never closed").expect_err("unclosed block");
        assert!(
            e.message.contains("endif") || e.message.contains("end"),
            "{}",
            e.message
        );
    }
}
