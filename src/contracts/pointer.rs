//! JSON Pointers into the workflow document: building them (escaping reference tokens)
//! and resolving them once parsed ([`ParsedPointer`]). The source map that turns them into
//! lines and columns is in `source_map.rs`.

/// Escapes one reference token (`~` -> `~0`, `/` -> `~1`).
pub fn escape(token: &str) -> String {
    if token.contains(['~', '/']) {
        token.replace('~', "~0").replace('/', "~1")
    } else {
        token.to_string()
    }
}

/// Appends `/token` (escaped) to a pointer being built, without allocating when the
/// token needs no escaping.
pub fn push_key(pointer: &mut String, token: &str) {
    pointer.push('/');
    if token.contains(['~', '/']) {
        pointer.push_str(&escape(token));
    } else {
        pointer.push_str(token);
    }
}

/// Appends `/index` to a pointer being built.
pub fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write;
    let _ = write!(pointer, "/{index}");
}

/// Joins reference tokens into a JSON Pointer (`["nodes", "a/b"]` -> `/nodes/a~1b`).
pub fn join<I, S>(tokens: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = String::new();
    for t in tokens {
        push_key(&mut out, t.as_ref());
    }
    out
}

/// One step of a pointer walk: the member `key` of an object, or the element `index` of
/// an array (`index` is `key` read as an array index, when it is one).
fn child<'v>(
    target: &'v serde_json::Value,
    key: &str,
    index: Option<usize>,
) -> Option<&'v serde_json::Value> {
    match target {
        serde_json::Value::Object(map) => super::lookup::get(map, key),
        serde_json::Value::Array(list) => index.and_then(|x| list.get(x)),
        _ => None,
    }
}

/// An array index as JSON Pointer allows it (no sign, no leading zero).
fn parse_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// A JSON Pointer parsed once: its reference tokens unescaped, and each token's array
/// index worked out, so resolving it repeatedly (a trigger on every decision) does no
/// string scanning. Resolves exactly as `serde_json::Value::pointer` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedPointer {
    tokens: Box<[(Box<str>, Option<usize>)]>,
}

impl ParsedPointer {
    /// Parses `pointer`; `None` when it is neither empty nor starts with `/`.
    pub fn parse(pointer: &str) -> Option<Self> {
        let tokens = match pointer.strip_prefix('/') {
            None if pointer.is_empty() => Box::default(),
            None => return None,
            Some(rest) => rest
                .split('/')
                .map(|t| {
                    let t = t.replace("~1", "/").replace("~0", "~");
                    let index = parse_index(&t);
                    (t.into_boxed_str(), index)
                })
                .collect(),
        };
        Some(Self { tokens })
    }

    /// The value the pointer names in `value`, if any.
    ///
    /// Complexity: one map or array look-up per token.
    pub fn resolve<'v>(&self, value: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        self.tokens
            .iter()
            .try_fold(value, |target, (key, index)| child(target, key, *index))
    }

    /// The value the pointer names in a state (an object of slices), if any: the first
    /// token names a slice. The empty pointer names no value here.
    ///
    /// Complexity: one map or array look-up per token.
    pub fn resolve_in<'v>(
        &self,
        state: &'v serde_json::Map<String, serde_json::Value>,
    ) -> Option<&'v serde_json::Value> {
        let ((first, _), rest) = self.tokens.split_first()?;
        rest.iter()
            .try_fold(super::lookup::get(state, first)?, |target, (key, index)| {
                child(target, key, *index)
            })
    }

    /// The first reference token (for a state path: the slice), if any.
    pub fn first(&self) -> Option<&str> {
        self.tokens.first().map(|(k, _)| &**k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_pointers_resolve_like_serde_json() {
        let v = serde_json::json!({"a": {"b/c": [1, {"d~e": 2}], "0": 3, "": 4}});
        for p in [
            "",
            "/a",
            "/a/b~1c/0",
            "/a/b~1c/1/d~0e",
            "/a/0",
            "/a/",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "x",
            "/zz",
            "/a/b~1c/9",
            "/a/~01",
        ] {
            let parsed = ParsedPointer::parse(p);
            assert_eq!(parsed.is_some(), p.is_empty() || p.starts_with('/'), "{p}");
            assert_eq!(
                parsed.as_ref().and_then(|q| q.resolve(&v)),
                v.pointer(p),
                "{p}"
            );
            if !p.is_empty() {
                let m = v.as_object().expect("an object");
                let got = parsed.and_then(|q| q.resolve_in(m));
                assert_eq!(got, v.pointer(p), "{p} in a state map");
            }
        }
        let w = serde_json::json!({"~1": 5});
        assert_eq!(
            ParsedPointer::parse("/~01").unwrap().resolve(&w),
            Some(&w["~1"])
        );
        assert_eq!(
            ParsedPointer::parse("/a~1b/c").unwrap().first(),
            Some("a/b")
        );
    }

    #[test]
    fn escapes_and_joins() {
        assert_eq!(join(["nodes", "a/b", "c~d"]), "/nodes/a~1b/c~0d");
        assert_eq!(join::<[&str; 0], &str>([]), "");
    }
}
