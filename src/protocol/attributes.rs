//! **Extension** of our own servers, not part of protocol v1 (SPEC.md,
//! "Extension: sub-env attributes"): Gymnasium's vector `call`, `get_attr`
//! and `set_attr` on the sub-envs of an env resource.
//!
//! It travels in v1's own `call` request, with a method name no v1 resource
//! exports ([`CALL`], [`SET_ATTR`]: not Python identifiers, so they never
//! name a hosted object's method), so a server without the extension (the
//! reference) answers `unsupported_operation` ("Method is not exported") and
//! nothing else changes. Our servers advertise it in the `hello` result's
//! `extensions` list ([`EXTENSION`]), a member v1 clients ignore.

use crate::codec::{Dict, Value};

/// The name our servers list in `hello`'s `extensions`.
pub const EXTENSION: &str = "env_attributes";
/// The `call` method that calls (or reads) an attribute of every sub-env:
/// kwargs `name`, `args` (a list), `kwargs` (a dict); the value is the list
/// of the sub-envs' results.
pub const CALL: &str = "ext:call";
/// The `call` method that sets an attribute of every sub-env: kwargs
/// `name`, `values` (a list, one per sub-env); the value is null.
pub const SET_ATTR: &str = "ext:set_attr";
/// Methods `ext:call` refuses: the lifecycle has its own requests, which
/// keep its revision, boundary and fault rules (Gymnasium's vector envs
/// refuse `reset`, `step` and `close` through `call` too).
pub const LIFECYCLE: [&str; 4] = ["reset", "step", "reload", "close"];

/// A request of the extension, read from a `call`'s method and kwargs.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeRequest {
    /// `ext:call`: call attribute `name` of each sub-env with `args` and
    /// `kwargs` when it is callable, else read it.
    Call {
        /// The attribute.
        name: String,
        /// Positional arguments.
        args: Vec<Value>,
        /// Keyword arguments.
        kwargs: Dict,
    },
    /// `ext:set_attr`: set attribute `name` of sub-env `i` to `values[i]`.
    Set {
        /// The attribute.
        name: String,
        /// One value per sub-env.
        values: Vec<Value>,
    },
}

impl AttributeRequest {
    /// Whether `method` is one of the extension's (the request is then read
    /// with [`AttributeRequest::parse`]).
    pub fn is_extension(method: &str) -> bool {
        method == CALL || method == SET_ATTR
    }

    /// Reads the request: `Err` is the reason it is invalid (a certain
    /// `invalid_request`).
    pub fn parse(
        method: &str,
        args: Option<&Value>,
        kwargs: Option<&Value>,
    ) -> Result<Self, String> {
        if args.and_then(Value::as_seq).is_some_and(|a| !a.is_empty()) {
            return Err(format!("{method} takes keyword arguments only"));
        }
        let empty = Dict::new();
        let kwargs = match kwargs {
            None | Some(Value::Null) => &empty,
            Some(Value::Dict(d)) => d,
            Some(_) => return Err("kwargs must be a dict".into()),
        };
        let name = match kwargs.get("name") {
            Some(Value::Str(s)) => s.to_string(),
            _ => return Err(format!("{method} needs name, a string")),
        };
        check_name(&name)?;
        let allowed: &[&str] = if method == CALL {
            &["name", "args", "kwargs"]
        } else {
            &["name", "values"]
        };
        if let Some((k, _)) = kwargs.iter().find(|(k, _)| !allowed.contains(k)) {
            return Err(format!("{method} got an unexpected argument '{k}'"));
        }
        if method == CALL {
            if LIFECYCLE.contains(&name.as_str()) {
                return Err(format!(
                    "'{name}' cannot be called through {CALL}: send it as its own request"
                ));
            }
            let args = match kwargs.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(v) => match v.as_seq() {
                    Some(s) => s.to_vec(),
                    None => return Err(format!("{CALL}'s args must be a list")),
                },
            };
            let call_kwargs = match kwargs.get("kwargs") {
                None | Some(Value::Null) => Dict::new(),
                Some(Value::Dict(d)) => d.clone(),
                Some(_) => return Err(format!("{CALL}'s kwargs must be a dict")),
            };
            Ok(AttributeRequest::Call {
                name,
                args,
                kwargs: call_kwargs,
            })
        } else {
            let values = match kwargs.get("values").and_then(Value::as_seq) {
                Some(s) => s.to_vec(),
                None => return Err(format!("{SET_ATTR} needs values, a list (one per sub-env)")),
            };
            Ok(AttributeRequest::Set { name, values })
        }
    }

    /// The attribute's name.
    pub fn name(&self) -> &str {
        match self {
            AttributeRequest::Call { name, .. } | AttributeRequest::Set { name, .. } => name,
        }
    }
}

/// Checks an attribute name: a Python identifier (ASCII letters, digits and
/// `_`, not starting with a digit) of at most 128 bytes, not starting with
/// `_`. **Choice**, a guard: private and special names (`_x`, `__class__`)
/// are refused, so the extension reaches what an env makes public and
/// nothing of the interpreter behind it.
pub fn check_name(name: &str) -> Result<(), String> {
    let first = name.chars().next();
    if name.is_empty() || name.len() > 128 {
        return Err(format!(
            "attribute name must be 1 to 128 characters, got {} bytes",
            name.len()
        ));
    }
    if first == Some('_') {
        return Err(format!(
            "attribute name '{name}' is private (starts with '_'): only public attributes are reached"
        ));
    }
    if first.is_some_and(|c| c.is_ascii_digit())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!(
            "attribute name {name:?} is not an identifier (letters, digits and '_')"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kwargs(pairs: &[(&str, Value)]) -> Value {
        let mut d = Dict::new();
        for (k, v) in pairs {
            d.insert(*k, v.clone());
        }
        Value::Dict(d)
    }

    #[test]
    fn names_are_public_identifiers() {
        assert!(check_name("max_count").is_ok());
        assert!(check_name("x1").is_ok());
        for bad in ["", "_x", "__class__", "1x", "a.b", "a b", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"a".repeat(129)).is_err());
    }

    #[test]
    fn requests_are_read_and_checked() {
        let call = AttributeRequest::parse(
            CALL,
            None,
            Some(&kwargs(&[
                ("name", Value::from("double")),
                ("args", Value::List(vec![Value::Int(2)])),
            ])),
        );
        assert_eq!(
            call,
            Ok(AttributeRequest::Call {
                name: "double".into(),
                args: vec![Value::Int(2)],
                kwargs: Dict::new()
            })
        );
        let set = AttributeRequest::parse(
            SET_ATTR,
            None,
            Some(&kwargs(&[
                ("name", Value::from("max_count")),
                ("values", Value::List(vec![Value::Int(2), Value::Int(3)])),
            ])),
        );
        assert_eq!(set.as_ref().map(AttributeRequest::name), Ok("max_count"));
        let refused = |method: &str, pairs: &[(&str, Value)]| {
            AttributeRequest::parse(method, None, Some(&kwargs(pairs))).unwrap_err()
        };
        assert!(refused(CALL, &[("name", Value::from("step"))]).contains("own request"));
        assert!(refused(CALL, &[("name", Value::from("_secret"))]).contains("private"));
        assert!(refused(SET_ATTR, &[("name", Value::from("x"))]).contains("values"));
        assert!(
            refused(CALL, &[("name", Value::from("x")), ("other", Value::Null)])
                .contains("unexpected")
        );
        assert!(
            AttributeRequest::parse(CALL, Some(&Value::List(vec![Value::Null])), None)
                .unwrap_err()
                .contains("keyword")
        );
    }
}
