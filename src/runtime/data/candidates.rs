//! `Candidates`: the entries a rule-based supervisor's triggers matched, as a trace item
//! records them. Split from `trace.rs`.

use std::ops::Deref;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The candidates of a decision: the `allow` entries whose triggers matched, best first.
/// Reads as a slice of ids (`&*item.candidates`); its JSON form is an array of strings.
///
/// Empty on every item but a rule-based supervisor's decision, and an empty list holds
/// nothing: no allocation and no reference count. (An empty `Arc<[T]>` is one shared
/// static whose count every copy changes with an atomic operation, twice a loop step:
/// ADR 0051.) A non-empty list is shared: the rule table builds a lone winner's list once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Candidates(Option<Arc<[Arc<str>]>>);

impl Candidates {
    /// No candidates.
    pub const fn none() -> Self {
        Self(None)
    }
}

impl Deref for Candidates {
    type Target = [Arc<str>];

    fn deref(&self) -> &[Arc<str>] {
        self.0.as_deref().unwrap_or(&[])
    }
}

impl From<Arc<[Arc<str>]>> for Candidates {
    fn from(list: Arc<[Arc<str>]>) -> Self {
        Self((!list.is_empty()).then_some(list))
    }
}

impl From<Vec<Arc<str>>> for Candidates {
    fn from(list: Vec<Arc<str>>) -> Self {
        Self((!list.is_empty()).then(|| list.into()))
    }
}

impl FromIterator<Arc<str>> for Candidates {
    fn from_iter<I: IntoIterator<Item = Arc<str>>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl Serialize for Candidates {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Candidates {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Arc<str>>::deserialize(d).map(Self::from)
    }
}

impl JsonSchema for Candidates {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Vec<String>>::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Vec<String>>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty list, however made, is the one empty value (equal, serialized `[]`), and
    /// a list reads back as the slice it was made from.
    #[test]
    fn empty_lists_are_one_value_and_lists_read_as_slices() {
        let made: [Candidates; 4] = [
            Candidates::none(),
            Candidates::default(),
            Arc::<[Arc<str>]>::from(Vec::new()).into(),
            Vec::new().into(),
        ];
        for c in &made {
            assert_eq!(*c, Candidates::none());
            assert!(c.is_empty());
            assert_eq!(serde_json::to_string(c).unwrap(), "[]");
        }
        let two: Candidates = ["b", "a"].into_iter().map(Arc::from).collect();
        assert_eq!(&*two, [Arc::from("b"), Arc::from("a")]);
        let json = serde_json::to_string(&two).unwrap();
        assert_eq!(json, r#"["b","a"]"#);
        let back: Candidates = serde_json::from_str(&json).unwrap();
        assert_eq!(back, two);
        let empty: Candidates = serde_json::from_str("[]").unwrap();
        assert_eq!(empty, Candidates::none());
    }
}
