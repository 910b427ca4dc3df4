use super::*;
use crate::codec::{Dict, NdArray, Value};

#[test]
fn stack_and_unstack() {
    let a = Value::from(NdArray::from_vec(vec![1.0f32, 2.0]));
    let b = Value::from(NdArray::from_vec(vec![3.0f32, 4.0]));
    let s = stack(&[&a, &b]);
    let arr = s
        .as_array()
        .cloned()
        .unwrap_or_else(|| NdArray::from_vec(vec![0u8]));
    assert_eq!(arr.shape(), &[2, 2]);
    assert_eq!(arr.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(unstack(&s, 2), Ok(vec![a.clone(), b.clone()]));
    let d = Value::Dict(Dict::new().with("x", a.clone()).with("r", 1.5));
    let e = Value::Dict(Dict::new().with("x", b.clone()).with("r", Value::Int(2)));
    let s = stack(&[&d, &e]);
    assert_eq!(
        s.get("r")
            .and_then(Value::as_array)
            .map(NdArray::to_f64_vec),
        Some(vec![1.5, 2.0])
    );
    // Mismatched shapes are gathered, not stacked.
    let c = Value::from(NdArray::from_vec(vec![1.0f32]));
    assert_eq!(stack(&[&a, &c]), Value::List(vec![a.clone(), c]));
    // Missing entries are zeros.
    let s = stack_filled(&[None, Some(b.clone())]);
    assert_eq!(
        s.as_array().map(NdArray::to_f64_vec),
        Some(vec![0.0, 0.0, 3.0, 4.0])
    );
    assert_eq!(stack_filled(&[None, None]), Value::Null);
    assert!(unstack(&a, 3).is_err());
}

#[test]
fn autoreset_names() {
    for m in [
        AutoresetMode::NextStep,
        AutoresetMode::SameStep,
        AutoresetMode::Disabled,
    ] {
        assert_eq!(AutoresetMode::parse(m.as_str()), Some(m));
    }
    assert_eq!(
        AutoresetMode::parse("NEXT_STEP"),
        Some(AutoresetMode::NextStep)
    );
    assert_eq!(AutoresetMode::parse("sometimes"), None);
}
