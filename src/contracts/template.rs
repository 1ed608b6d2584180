//! The MiniJinja templates of agents (`instructions`, `prompt`): the one environment they
//! are parsed (and rendered) in, and the names a template reads, for the validator.

use std::ops::Range;

use minijinja::Environment;

/// The environment agent templates use: MiniJinja's built-in filters, tests and globals
/// (`range`, `dict`, `namespace`, ...) and `tojson`; nothing registered besides.
pub(crate) fn environment() -> Environment<'static> {
    Environment::new()
}

/// The stack templates are analysed on: MiniJinja's parser and analysis recurse once per
/// level of an expression, and a debug build's frames are large (a tag of
/// [`MAX_TAG_OPERATORS`] parentheses needs about 4 MB there).
pub(crate) const TEMPLATE_STACK: usize = 16 << 20;

/// Runs `f` on a thread with a [`TEMPLATE_STACK`] stack (the memory is reserved, and
/// used only as deep as the work goes), or on this thread if none can be started.
pub(crate) fn on_template_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let work = std::sync::Mutex::new(Some(f));
    let take = || {
        work.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("pactgraph-templates".into())
            .stack_size(TEMPLATE_STACK)
            .spawn_scoped(scope, || take().map(|f| f()));
        let done = match spawned {
            Ok(handle) => match handle.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => None,
        };
        match done {
            Some(r) => r,
            // The thread did not start: the work is still there, done here.
            None => (take().expect("the work runs once: on the thread or here"))(),
        }
    })
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
    screen(source)?;
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

/// The most operators, brackets and keywords (`not`, `and`, `or`, `is`, `in`, `if`,
/// `else`) one tag may hold. MiniJinja bounds the nesting of blocks, but an expression
/// such as `x[0][0]...` or `-----x` thousands deep parses into a tree whose analysis and
/// drop recurse past a thread's stack. Real prompt templates use a handful per tag.
pub(crate) const MAX_TAG_OPERATORS: usize = 256;

/// Refuses a tag with more than [`MAX_TAG_OPERATORS`] operators (outside string literals),
/// in one pass over the text, before MiniJinja parses it.
fn screen(source: &str) -> Result<(), TemplateError> {
    let bytes = source.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while let Some(open) = find_tag(source, i) {
        let close_token = if source[open..].starts_with("{{") {
            "}}"
        } else {
            "%}"
        };
        let end = source[open + 2..]
            .find(close_token)
            .map_or(source.len(), |e| open + 2 + e);
        let (mut count, mut quote, mut j) = (0usize, None::<u8>, open + 2);
        while j < end {
            let b = bytes[j];
            match quote {
                Some(_) if b == b'\\' => j += 1,
                Some(q) if b == q => quote = None,
                Some(_) => {}
                None if b == b'"' || b == b'\'' => quote = Some(b),
                None if b"([.|-+*/%~!<>=".contains(&b) => count += 1,
                None if ident(b) && (j == 0 || !ident(bytes[j - 1])) => {
                    let word_end = source[j..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .map_or(end, |w| j + w);
                    if matches!(
                        &source[j..word_end],
                        "not" | "and" | "or" | "is" | "in" | "if" | "else"
                    ) {
                        count += 1;
                    }
                    j = word_end;
                    continue;
                }
                None => {}
            }
            if count > MAX_TAG_OPERATORS {
                return Err(TemplateError {
                    message: format!(
                        "a tag nests more than {MAX_TAG_OPERATORS} operators, brackets and \
                         keywords; split the expression (e.g. with `{{% set %}}`)"
                    ),
                    range: Some(open..end.min(source.len())),
                });
            }
            j += 1;
        }
        i = end;
    }
    Ok(())
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

    /// Expressions thousands deep are refused before MiniJinja parses them (they would
    /// overflow the stack), on a small thread stack as a server's.
    #[test]
    fn deep_expressions_are_refused_not_overflowed() {
        let deep = [
            format!("ok {{{{ x{} }}}}", "[0]".repeat(20_000)),
            format!("{{{{ {}x }}}}", "-".repeat(50_000)),
            format!("{{% if {}x %}}{{% endif %}}", "not ".repeat(20_000)),
            format!("{{{{ x{} }}}}", " ~ x".repeat(20_000)),
        ];
        let errors = on_template_stack(move || {
            let env = environment();
            // At the limit, every kind of nesting still parses on this stack.
            for t in [
                format!("{{{{ x{} }}}}", "[0]".repeat(128)),
                format!("{{{{ {}x }}}}", "-".repeat(256)),
                format!("{{{{ {}x{} }}}}", "(".repeat(256), ")".repeat(256)),
                format!("{{{{ {}x{} }}}}", "[".repeat(256), "]".repeat(256)),
                format!("{{{{ x{} }}}}", " | upper".repeat(256)),
            ] {
                let r = variables(&env, &t);
                // MiniJinja refuses deep brackets itself; nothing overflows.
                assert!(
                    r.is_ok() || t.contains("((") || t.contains("[["),
                    "{}: {r:?}",
                    &t[..20]
                );
            }
            deep.iter()
                .map(|t| variables(&env, t).expect_err("too deep"))
                .collect::<Vec<_>>()
        });
        for e in errors {
            assert!(e.message.contains("more than 256"), "{}", e.message);
        }
        let env = environment();
        let fine = format!("{{{{ x{} }}}} '{}'", "[0]".repeat(100), "(".repeat(1000));
        assert!(variables(&env, &fine).is_ok());
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
