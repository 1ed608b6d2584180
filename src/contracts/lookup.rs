//! Reading JSON objects on the hot path: a key looked up by scanning a small object
//! ([`get`]), and two values compared in key order first ([`same`]).
//!
//! serde_json's object (`preserve_order`) hashes every key it looks up with SipHash, about
//! 150 instructions for a short key. A state has a handful of slices and most slice
//! values a handful of keys, so a look-up in an object of up to [`SCAN_MAX`] entries
//! compares the keys in place instead (a length compare each, a byte compare for a key
//! of the same length). Larger objects are hashed as before.

use serde_json::{Map, Value};

/// The most entries an object is scanned at; a larger one is hashed.
pub(crate) const SCAN_MAX: usize = 8;

/// The value of `key` in `map`, if any: what `map.get(key)` gives, found by scanning
/// when the map is small.
#[inline]
pub(crate) fn get<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    if map.len() <= SCAN_MAX {
        map.iter().find_map(|(k, v)| (k == key).then_some(v))
    } else {
        map.get(key)
    }
}

/// `a == b` (objects equal whatever their key order), answered without hashing when the
/// objects on both sides list their keys in the same order (a value compared with the
/// copy it was written from, say); objects in another order fall back to `==`.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    if let Some(equal) = same_leaf(a, b) {
        return equal;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && (x.iter().zip(y).all(|((kx, vx), (ky, vy))| {
                    // A leaf member compared here, not in a call of its own.
                    kx == ky && same_leaf(vx, vy).unwrap_or_else(|| same(vx, vy))
                }) || x == y)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(a, b)| same_leaf(a, b).unwrap_or_else(|| same(a, b)))
        }
        _ => a == b,
    }
}

/// `a == b` when `a` is a leaf (null, a boolean, a number, a string), compared in place
/// without a call to `Value`'s `==`; `None` when `a` is an array or an object. Numbers
/// compare as `Value`'s `==` compares them (by representation); values of two kinds
/// differ.
#[inline(always)]
fn same_leaf(a: &Value, b: &Value) -> Option<bool> {
    Some(match (a, b) {
        (Value::Array(_) | Value::Object(_), _) => return None,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Number(x), Value::Number(y)) => x == y,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// JSON values with small and large objects (past [`SCAN_MAX`]), nested.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0i64..4).prop_map(|n| json!(n)),
            "[a-c]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 40, 12, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-l]{1,2}", inner), 0..12)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// The same object with its keys in reverse order.
    fn reversed(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), reversed(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest! {
        /// For all objects and keys, `get` finds what serde_json's own look-up finds,
        /// small objects (scanned) and large ones (hashed) alike.
        #[test]
        fn get_finds_what_the_map_finds(v in value(), key in "[a-l]{1,2}") {
            if let Value::Object(m) = &v {
                prop_assert_eq!(get(m, &key), m.get(&key));
            }
        }

        /// For all pairs of values, `same` is `==`: on unrelated values, on a value and
        /// its copy, and on a value and its copy with every object's keys reversed
        /// (equal for `==`, not in order).
        #[test]
        fn same_is_json_equality(a in value(), b in value()) {
            prop_assert_eq!(same(&a, &b), a == b);
            prop_assert!(same(&a, &a.clone()));
            let r = reversed(&a);
            prop_assert_eq!(same(&a, &r), a == r);
            prop_assert!(same(&a, &r));
        }
    }

    #[test]
    fn a_key_is_found_in_small_and_large_objects_and_only_there() {
        let small = json!({"a": 1, "bb": 2, "b": 3});
        let large: Map<String, Value> = (0..20).map(|i| (format!("k{i}"), json!(i))).collect();
        let small = small.as_object().expect("an object");
        assert_eq!(get(small, "b"), Some(&json!(3)));
        assert_eq!(get(small, "c"), None);
        assert_eq!(get(&large, "k17"), Some(&json!(17)));
        assert_eq!(get(&large, "k20"), None);
    }
}
