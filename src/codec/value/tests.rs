use super::*;
use crate::dict;

/// Building a dict of 100,000 keys (a peer's `kwargs`) used to compare
/// every new key with every earlier one.
#[test]
fn bulk_dict_building_is_linear() {
    let n = 100_000;
    key_comparisons::take();
    let d: Dict = (0..n)
        .map(|i| (format!("k{i}"), Value::Int(i)))
        .chain([("k5".to_string(), Value::Int(-5))])
        .collect();
    let mut e = Dict::new();
    e.extend(d.iter().map(|(k, v)| (k, v.clone())));
    let comparisons = key_comparisons::take();
    assert!(
        comparisons <= 1_000,
        "{comparisons} key comparisons to build two dicts of {n} keys"
    );
    assert_eq!(d.len(), n as usize);
    assert_eq!(
        d.get("k5"),
        Some(&Value::Int(-5)),
        "a repeated key replaces"
    );
    assert_eq!(d.keys().nth(5), Some("k5"), "in place");
    assert_eq!(d.keys().last(), Some(format!("k{}", n - 1).as_str()));
    assert!(d == e);
}

#[test]
fn integers_compare_by_value() {
    assert_eq!(Value::Int(5), Value::UInt(5));
    assert_eq!(Value::from(u64::MAX), Value::UInt(u64::MAX));
    assert_eq!(Value::from(7u64), Value::Int(7));
    assert_ne!(Value::Int(-1), Value::UInt(u64::MAX));
    assert_ne!(Value::Int(1), Value::Float(1.0));
    assert_eq!(Value::Float(f64::NAN), Value::Float(f64::NAN));
}

#[test]
fn dict_keeps_order_and_replaces_in_place() {
    let mut d = dict! { "b" => 1, "a" => 2 };
    d.insert("b", 3);
    assert_eq!(d.keys().collect::<Vec<_>>(), vec!["b", "a"]);
    assert_eq!(d.get("b"), Some(&Value::Int(3)));
    assert_eq!(d.remove("b"), Some(Value::Int(3)));
    assert_eq!(d.len(), 1);
}

#[test]
fn tuples_and_display() {
    let v = Value::from((1, 2.5, "x", (), true));
    assert_eq!(v.to_string(), "(1, 2.5, \"x\", None, True)");
    let one = Value::tuple([1]);
    assert_eq!(one.to_string(), "(1,)");
}

#[test]
fn object_array_checks_count() {
    assert!(ObjectArray::new(vec![2, 2], vec![Value::Null; 3]).is_err());
    assert!(ObjectArray::new(vec![2, 0], vec![]).is_ok());
    assert!(ObjectArray::new(vec![usize::MAX, 3], vec![]).is_err());
}

#[test]
fn truthiness() {
    assert_eq!(Value::Null.truthy(), Some(false));
    assert_eq!(Value::Dict(Dict::new()).truthy(), Some(false));
    assert_eq!(Value::from(NdArray::scalar(0.0f32)).truthy(), Some(false));
    assert_eq!(Value::from(NdArray::from_vec(vec![1, 2])).truthy(), None);
}

#[test]
fn floats_are_equal_when_they_encode_alike() {
    use crate::codec::encode::encode_header;
    let zero = Value::Float(0.0);
    let negative_zero = Value::Float(-0.0);
    assert_ne!(zero, negative_zero);
    assert_ne!(
        encode_header(&zero).ok(),
        encode_header(&negative_zero).ok()
    );
    assert_eq!(Value::Float(f64::NAN), Value::Float(-f64::NAN));
    assert_eq!(Value::Float(1.5), Value::Float(1.5));
    assert_ne!(
        Value::List(vec![Value::Float(0.0)]),
        Value::List(vec![Value::Float(-0.0)])
    );
}
