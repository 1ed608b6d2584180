//! `${VAR}` and `${VAR:-default}` in a model's `base_url` and `model`, expanded from the
//! environment where the run executes.

/// Expands `${VAR}` (VAR must be set) and `${VAR:-default}` (default when VAR is unset or
/// empty) in `text`, reading variables through `get`. A `$` not followed by `{` is kept.
/// `field` names the setting in errors.
pub fn expand(
    text: &str,
    field: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| {
            format!(
                "{field}: `${{` at byte {} is not closed by `}}`",
                text.len() - rest.len() + at
            )
        })?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{field}: `${{{inner}}}` does not name an environment variable (letters, digits, `_`)"
            ));
        }
        match (get(name), default) {
            (Some(v), None) => out.push_str(&v),
            (Some(v), Some(_)) if !v.is_empty() => out.push_str(&v),
            (_, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "{field}: the environment variable `{name}` is not set (write `${{{name}:-DEFAULT}}` for a default)"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::expand;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("h:1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_and_defaults() {
        assert_eq!(
            expand("http://${HOST}/v1", "base_url", env).unwrap(),
            "http://h:1/v1"
        );
        assert_eq!(
            expand("${NOPE:-http://x}/v1", "f", env).unwrap(),
            "http://x/v1"
        );
        assert_eq!(expand("${EMPTY:-d}", "f", env).unwrap(), "d");
        assert_eq!(expand("${EMPTY}", "f", env).unwrap(), "");
        assert_eq!(expand("a$b ${HOST:-z}", "f", env).unwrap(), "a$b h:1");
        let e = expand("x${NOPE}", "model", env).unwrap_err();
        assert!(e.contains("model") && e.contains("NOPE"), "{e}");
        assert!(
            expand("${HOST", "f", env)
                .unwrap_err()
                .contains("not closed")
        );
        assert!(
            expand("${a b}", "f", env)
                .unwrap_err()
                .contains("environment variable")
        );
    }
}
