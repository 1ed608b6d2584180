//! Tests of node output: writes, usage and their checks.

use super::*;
use serde_json::json;

fn accept(o: NodeOutput, router: bool) -> Result<NodeOutput, String> {
    accept_as(o, if router { Role::Router } else { Role::Plain })
}

#[test]
fn team_roles_send_their_keys_only() {
    let o = accept_as(
        out(json!({"$broadcast": {"x": 1}, "$exit": true, "$usage": {"t": 1}})),
        Role::Member,
    )
    .expect("a member may");
    assert_eq!(o.broadcast, Some(json!({"x": 1})));
    assert!(o.exit && !o.is_final && o.writes.is_empty());
    let o = accept_as(out(json!({"a": 1, "$final": true})), Role::Lead).expect("lead");
    assert!(o.is_final && !o.exit);
    assert_eq!(Value::Object(o.writes), json!({"a": 1}));
    let e = accept_as(out(json!({"$final": true})), Role::Member).expect_err("member");
    assert!(
        e.contains("`$final` may be sent only by a team's lead"),
        "{e}"
    );
    let e = accept_as(out(json!({"$exit": true})), Role::Lead).expect_err("lead");
    assert!(
        e.contains("`$exit` may be sent only by a team member"),
        "{e}"
    );
    let e = accept_as(out(json!({"$exit": "yes"})), Role::Member).expect_err("bool");
    assert!(e.contains("`$exit` must be a boolean, not a string"), "{e}");
    let e = accept_as(NodeOutput::default().finalized(), Role::Plain).expect_err("typed");
    assert!(
        e.contains("`$final` may be sent only by a team's lead"),
        "{e}"
    );
    let e = accept_as(out(json!({"$route": "x"})), Role::Lead).expect_err("route");
    assert!(e.contains("may be sent only by a router node"), "{e}");
    let e = accept_as(out(json!({"$what": 1})), Role::Member).expect_err("unknown");
    assert!(e.contains("`$usage`, `$broadcast` and `$exit`"), "{e}");
}

fn out(v: Value) -> NodeOutput {
    match v {
        Value::Object(m) => NodeOutput::from(m),
        _ => panic!("test outputs are objects"),
    }
}

#[test]
fn plain_writes_pass_untouched() {
    let o = accept(out(json!({"a": 1, "b": {"$usage": 2}})), false).expect("valid");
    assert_eq!(Value::Object(o.writes), json!({"a": 1, "b": {"$usage": 2}}));
    assert_eq!(o.usage, None);
}

#[test]
fn usage_is_taken_out_of_the_writes() {
    let o = accept(
        out(json!({
            "a": 1, "$usage": {"input_tokens": 10, "cost_usd": 0.25, "calls": 1}
        })),
        false,
    )
    .expect("valid");
    assert_eq!(Value::Object(o.writes), json!({"a": 1}));
    let u = o.usage.expect("usage kept");
    assert_eq!(
        serde_json::to_value(&u).expect("plain data"),
        json!({"input_tokens": 10, "cost_usd": 0.25, "calls": 1})
    );
}

#[test]
fn usage_must_be_an_object_of_non_negative_numbers() {
    for (bad, says) in [
        (
            json!([1]),
            "must be an object of `name: number`, not an array",
        ),
        (json!({"t": "3"}), "`t` must be a number, not a string"),
        (json!({"t": null}), "`t` must be a number, not null"),
        (json!({"t": -1}), "`t` is -1; an amount cannot be negative"),
    ] {
        let e = accept(out(json!({"a": 1, "$usage": bad})), false).expect_err("invalid");
        assert!(e.starts_with("`$usage` "), "{e}");
        assert!(e.contains(says), "{e} should say {says}");
    }
}

#[test]
fn role_keys_name_their_role_and_others_are_unknown() {
    for (key, role) in [
        ("$route", "a router node"),
        ("$message", "a router node"),
        ("$broadcast", "a team member or a team's lead"),
        ("$exit", "a team member"),
        ("$final", "a team's lead"),
    ] {
        let e = accept(out(json!({"a": 1, key: true})), false).expect_err("refused");
        assert!(
            e.contains(&format!("`{key}` may be sent only by {role}")),
            "{e}"
        );
    }
    let e = accept(out(json!({"$cost": 1})), false).expect_err("unknown");
    assert!(
        e.starts_with("`$cost` is not a reserved key") && e.contains("`$usage`"),
        "{e}"
    );
}

#[test]
fn routers_may_send_route_and_message() {
    let o = accept(
        out(json!({"a": 1, "$route": "x", "$message": "hi", "$usage": {"t": 1}})),
        true,
    )
    .expect("a router may");
    assert_eq!(Value::Object(o.writes), json!({"a": 1}));
    assert_eq!(o.route, Some(json!("x")));
    assert_eq!(o.message, Some(json!("hi")));
    let o = accept(out(json!({"$route": null})), true).expect("null kept");
    assert_eq!(o.route, Some(Value::Null));
    let typed = NodeOutput::from(Map::new()).with_route("x");
    assert_eq!(accept(typed.clone(), true), Ok(typed.clone()));
    let e = accept(typed, false).expect_err("not a router");
    assert!(e.contains("may be sent only by a router node"), "{e}");
    let twice = out(json!({"$route": "y"})).with_route("x");
    let e = accept(twice, true).expect_err("twice");
    assert!(e.contains("given twice"), "{e}");
    let e = accept(out(json!({"$exit": true})), true).expect_err("not a team member");
    assert!(e.contains("may be sent only by a team member"), "{e}");
    let e = accept(out(json!({"$x": 1})), true).expect_err("unknown");
    assert!(e.contains("`$route` and `$message`"), "{e}");
}

#[test]
fn typed_usage_and_a_usage_key_are_not_both_accepted() {
    let typed = out(json!({"$usage": {"t": 1}})).with_usage(Usage::new().with("t", 1));
    let e = accept(typed, false).expect_err("twice");
    assert!(e.contains("given twice"), "{e}");
    let typed = out(json!({"a": 1})).with_usage(Usage::new().with("t", 1));
    assert_eq!(accept(typed.clone(), false), Ok(typed));
    let negative = out(json!({})).with_usage(Usage::new().with("t", -2));
    let e = accept(negative, false).expect_err("negative");
    assert!(e.contains("usage `t` is -2"), "{e}");
    let e = accept(out(json!({"$usage": {"wall_ms": 3}})), false).expect_err("measured");
    assert!(e.contains("`$usage` names `wall_ms`"), "{e}");
}

#[test]
fn sums_keep_integers_and_add_floats() {
    let f = |x: f64| Number::from_f64(x).expect("finite");
    let mut total = Usage::new().with("t", 2).with("usd", f(0.5));
    total.add_all(&Usage::new().with("usd", f(0.25)).with("t", 3).with("n", 1));
    assert_eq!(
        serde_json::to_value(&total).expect("plain data"),
        json!({"t": 5, "usd": 0.75, "n": 1})
    );
    let mut big = Usage::new().with("t", u64::MAX);
    big.add("t", Number::from(1u64));
    assert!(big.get("t").expect("kept").is_f64());
    let mut huge = Usage::new().with("x", Number::from_f64(f64::MAX).expect("finite"));
    huge.add("x", Number::from_f64(f64::MAX).expect("finite"));
    assert_eq!(huge.get("x").and_then(Number::as_f64), Some(f64::MAX));
}
