//! Arguments and results of hosted lifecycle methods, and the binding of the
//! protocol's positional/keyword arguments to them.

use super::error::{HostError, HostResult};
use crate::codec::{Dict, NdArray, ScalarKind, Value};

/// Keyword arguments of `reset` / `reload` (and the world's after-hooks):
/// `seed`, `mask`, and every other keyword argument, in arrival order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResetArgs {
    /// The `seed` keyword argument.
    pub seed: Option<i64>,
    /// The `mask` keyword argument (native byte order), for batched resets.
    pub mask: Option<NdArray>,
    /// Every other keyword argument.
    pub kwargs: Dict,
}

impl ResetArgs {
    /// Arguments with only a seed.
    pub fn with_seed(seed: i64) -> ResetArgs {
        ResetArgs {
            seed: Some(seed),
            ..ResetArgs::default()
        }
    }

    /// The arguments as protocol keyword arguments (`mask`, `seed`, then the
    /// rest), the way the reference client sends them.
    pub fn to_kwargs(&self) -> Dict {
        let mut d = Dict::with_capacity(2 + self.kwargs.len());
        d.insert("mask", self.mask.clone().map(Value::Array));
        d.insert("seed", self.seed);
        d.extend(self.kwargs.iter().map(|(k, v)| (k, v.clone())));
        d
    }

    /// Binds protocol arguments to `reset(*, seed=None, mask=None, **kwargs)`.
    pub fn bind(call: &mut CallArgs) -> HostResult<ResetArgs> {
        let seed = seed_arg(call.keyword("seed"))?;
        let mask = mask_arg(call.keyword("mask"))?;
        call.no_positional()?;
        Ok(ResetArgs {
            seed,
            mask,
            kwargs: call.rest(),
        })
    }
}

/// What `reset` / `reload` of an env returns: `(context, observation, info)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResetResult {
    /// The context (null when the env has no context space).
    pub context: Value,
    /// The observation.
    pub observation: Value,
    /// The info dictionary.
    pub info: Dict,
}

impl ResetResult {
    /// Builds a result from anything that converts into values.
    pub fn new(
        context: impl Into<Value>,
        observation: impl Into<Value>,
        info: Dict,
    ) -> ResetResult {
        ResetResult {
            context: context.into(),
            observation: observation.into(),
            info,
        }
    }

    /// The wire form: the tuple `(context, observation, info)`.
    pub fn into_value(self) -> Value {
        Value::Tuple(vec![self.context, self.observation, Value::Dict(self.info)])
    }

    /// Parses the wire form (a 3-tuple or list whose last item is a dict or null).
    pub fn from_value(value: Value) -> Result<ResetResult, String> {
        let mut items = into_items(value, 3, "reset result")?.into_iter();
        let (context, observation, info) = (next(&mut items), next(&mut items), next(&mut items));
        Ok(ResetResult {
            context,
            observation,
            info: into_info(info)?,
        })
    }
}

/// What `step` of an env returns: `(observation, reward, terminated,
/// truncated, info)`. Reward and signals are scalars, or arrays of shape
/// `(batch_size,)` for batched envs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepResult {
    /// The observation.
    pub observation: Value,
    /// The reward (a float, or an array when batched).
    pub reward: Value,
    /// Whether the episode terminated (a bool, or an array when batched).
    pub terminated: Value,
    /// Whether the episode was truncated (a bool, or an array when batched).
    pub truncated: Value,
    /// The info dictionary.
    pub info: Dict,
}

impl StepResult {
    /// Builds a result from anything that converts into values.
    pub fn new(
        observation: impl Into<Value>,
        reward: impl Into<Value>,
        terminated: impl Into<Value>,
        truncated: impl Into<Value>,
        info: Dict,
    ) -> StepResult {
        StepResult {
            observation: observation.into(),
            reward: reward.into(),
            terminated: terminated.into(),
            truncated: truncated.into(),
            info,
        }
    }

    /// The wire form: the 5-tuple.
    pub fn into_value(self) -> Value {
        Value::Tuple(vec![
            self.observation,
            self.reward,
            self.terminated,
            self.truncated,
            Value::Dict(self.info),
        ])
    }

    /// The reward as a number (`None` when it is not one number, e.g. a
    /// batched env's array: see [`StepResult::rewards`]).
    pub fn reward_f64(&self) -> Option<f64> {
        self.reward.as_scalar_f64()
    }

    /// Every reward as numbers: one for an unbatched env, one per
    /// sub-environment for a batched one (empty when not numeric).
    pub fn rewards(&self) -> Vec<f64> {
        numbers_of(&self.reward)
    }

    /// Whether the episode terminated (for a batched env: any
    /// sub-environment). A missing or non-boolean signal counts as `false`.
    pub fn is_terminated(&self) -> bool {
        numbers_of(&self.terminated).iter().any(|x| *x != 0.0)
    }

    /// Whether the episode was truncated (for a batched env: any
    /// sub-environment).
    pub fn is_truncated(&self) -> bool {
        numbers_of(&self.truncated).iter().any(|x| *x != 0.0)
    }

    /// Whether the episode ended, terminated or truncated: time to reset.
    ///
    /// ```
    /// use unienv_remote::host::StepResult;
    /// use unienv_remote::Dict;
    /// let step = StepResult::new(0.0, 1.0, false, true, Dict::new());
    /// assert_eq!(step.reward_f64(), Some(1.0));
    /// assert!(!step.is_terminated() && step.is_truncated() && step.is_done());
    /// ```
    pub fn is_done(&self) -> bool {
        self.is_terminated() || self.is_truncated()
    }

    /// Parses the wire form (a 5-tuple or list whose last item is a dict or null).
    pub fn from_value(value: Value) -> Result<StepResult, String> {
        let mut items = into_items(value, 5, "step result")?.into_iter();
        Ok(StepResult {
            observation: next(&mut items),
            reward: next(&mut items),
            terminated: next(&mut items),
            truncated: next(&mut items),
            info: into_info(next(&mut items))?,
        })
    }
}

/// A scalar (bool, number, one-element array) or a real array as numbers.
fn numbers_of(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) if a.dtype().kind() != crate::codec::ScalarKind::Complex => a.to_f64_vec(),
        other => other.as_scalar_f64().into_iter().collect(),
    }
}

fn next(items: &mut std::vec::IntoIter<Value>) -> Value {
    items.next().unwrap_or_default()
}

fn into_items(value: Value, n: usize, what: &str) -> Result<Vec<Value>, String> {
    match value {
        Value::Tuple(v) | Value::List(v) if v.len() == n => Ok(v),
        other => Err(format!(
            "{what} must be a {n}-tuple, got {}",
            other.type_name()
        )),
    }
}

fn into_info(value: Value) -> Result<Dict, String> {
    match value {
        Value::Dict(d) => Ok(d),
        Value::Null => Ok(Dict::new()),
        other => Err(format!("info must be a dict, got {}", other.type_name())),
    }
}

/// The positional and keyword arguments of one protocol `call`, consumed
/// parameter by parameter while binding them to a method signature.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallArgs {
    args: Vec<Option<Value>>,
    kwargs: Dict,
    method: &'static str,
    /// The positional parameters bound so far, by position.
    positional: Vec<String>,
}

impl CallArgs {
    /// Wraps a call's `args` and `kwargs` for the named method.
    pub fn new(method: &'static str, args: Vec<Value>, kwargs: Dict) -> CallArgs {
        CallArgs {
            args: args.into_iter().map(Some).collect(),
            kwargs,
            method,
            positional: Vec::new(),
        }
    }

    /// Takes a parameter that may be given by position or by keyword
    /// (Python's positional-or-keyword parameters); a value given both ways is
    /// an error.
    pub fn param(&mut self, name: &str, position: usize) -> HostResult<Option<Value>> {
        if self.positional.len() <= position {
            self.positional.resize(position + 1, String::new());
        }
        self.positional[position] = name.to_string();
        let positional = self.args.get_mut(position).and_then(Option::take);
        let keyword = self.kwargs.remove(name);
        match (positional, keyword) {
            (Some(_), Some(_)) => Err(HostError::invalid_argument(format!(
                "{}() got multiple values for argument '{name}'",
                self.method
            ))),
            (p, k) => Ok(p.or(k)),
        }
    }

    /// Takes a required positional-or-keyword parameter.
    pub fn required(&mut self, name: &str, position: usize) -> HostResult<Value> {
        self.param(name, position)?.ok_or_else(|| {
            HostError::invalid_argument(format!(
                "{}() missing 1 required positional argument: '{name}'",
                self.method
            ))
        })
    }

    /// Takes a keyword-only parameter.
    pub fn keyword(&mut self, name: &str) -> Option<Value> {
        self.kwargs.remove(name)
    }

    /// Fails if positional arguments remain unconsumed.
    pub fn no_positional(&self) -> HostResult<()> {
        if self.args.iter().all(Option::is_none) {
            return Ok(());
        }
        let given = self.args.len();
        let were = if given == 1 { "was" } else { "were" };
        let names: Vec<String> = self
            .positional
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| format!("'{n}'"))
            .collect();
        let takes = match names.len() {
            0 => "takes no positional arguments (pass them by keyword)".to_string(),
            1 => format!("takes 1 positional argument ({})", names[0]),
            n => format!("takes {n} positional arguments ({})", names.join(", ")),
        };
        Err(HostError::invalid_argument(format!(
            "{}() {takes} but {given} {were} given",
            self.method
        )))
    }

    /// Fails if any argument remains unconsumed.
    pub fn finish(self) -> HostResult<()> {
        self.no_positional()?;
        if let Some(k) = self.kwargs.keys().next() {
            return Err(HostError::invalid_argument(format!(
                "{}() got an unexpected keyword argument '{k}'",
                self.method
            )));
        }
        Ok(())
    }

    /// The remaining keyword arguments.
    pub fn rest(&mut self) -> Dict {
        std::mem::take(&mut self.kwargs)
    }
}

/// `seed`: null or an integer (a zero-dimensional integer array is accepted,
/// as NumPy integers travel that way).
pub fn seed_arg(value: Option<Value>) -> HostResult<Option<i64>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => integer(&v).map(Some).ok_or_else(|| {
            HostError::invalid_argument(format!(
                "seed must be an integer or None, got {}",
                v.type_name()
            ))
        }),
    }
}

/// `priority`: an integer, 0 when absent.
pub fn priority_arg(value: Option<Value>) -> HostResult<i64> {
    match value {
        None => Ok(0),
        Some(v) => integer(&v).ok_or_else(|| {
            HostError::invalid_argument(format!(
                "priority must be an integer, got {}",
                v.type_name()
            ))
        }),
    }
}

/// `mask`: null or an array (converted to native byte order).
pub fn mask_arg(value: Option<Value>) -> HostResult<Option<NdArray>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a.to_native())),
        Some(v) => Err(HostError::invalid_argument(format!(
            "mask must be an array or None, got {}",
            v.type_name()
        ))),
    }
}

/// `dt`: null, a number, or a one-element real array.
pub fn dt_arg(value: Value) -> HostResult<Option<f64>> {
    match value {
        Value::Null => Ok(None),
        v => v
            .as_scalar_f64()
            .filter(|_| !matches!(v, Value::Bool(_)))
            .map(Some)
            .ok_or_else(|| {
                HostError::invalid_argument(format!(
                    "dt must be a number or None, got {}",
                    v.type_name()
                ))
            }),
    }
}

fn integer(v: &Value) -> Option<i64> {
    match v {
        Value::Array(a)
            if a.len() == 1
                && a.ndim() == 0
                && matches!(a.dtype().kind(), ScalarKind::Int | ScalarKind::UInt) =>
        {
            let f = a.format_element(0)?;
            f.parse().ok()
        }
        other => other.as_i64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    #[test]
    fn binds_reset_arguments() {
        let mut call = CallArgs::new(
            "reset",
            vec![],
            dict! { "mask" => (), "seed" => 3, "extra" => "x" },
        );
        let args = ResetArgs::bind(&mut call).unwrap();
        assert_eq!(args.seed, Some(3));
        assert_eq!(args.mask, None);
        assert_eq!(args.kwargs, dict! { "extra" => "x" });
        let mut bad = CallArgs::new("reset", vec![Value::Int(1)], Dict::new());
        assert!(ResetArgs::bind(&mut bad).is_err());
        let mut bad_seed = CallArgs::new("reset", vec![], dict! { "seed" => 1.5 });
        assert!(ResetArgs::bind(&mut bad_seed).is_err());
        let mut np_seed = CallArgs::new("reset", vec![], dict! { "seed" => NdArray::scalar(9i64) });
        assert_eq!(ResetArgs::bind(&mut np_seed).unwrap().seed, Some(9));
    }

    #[test]
    fn positional_or_keyword() {
        let mut c = CallArgs::new("step", vec![Value::Int(1)], dict! { "action" => 2 });
        assert!(c.param("action", 0).is_err());
        let mut c = CallArgs::new("step", vec![], dict! { "action" => 2 });
        assert_eq!(c.required("action", 0).unwrap(), Value::Int(2));
        c.finish().unwrap();
        let mut c = CallArgs::new("step", vec![], Dict::new());
        assert!(c.required("action", 0).is_err());
        let c = CallArgs::new("render", vec![], dict! { "x" => 1 });
        assert!(c.finish().is_err());
    }

    #[test]
    fn argument_count_messages_count_what_was_given() {
        // `call pointmass step --args '[0.5, -0.5]'`: two given, one taken.
        let mut c = CallArgs::new(
            "step",
            vec![Value::Float(0.5), Value::Float(-0.5)],
            Dict::new(),
        );
        c.required("action", 0).unwrap();
        let e = c.finish().unwrap_err();
        assert_eq!(
            e.message(),
            "step() takes 1 positional argument ('action') but 2 were given"
        );
        let mut c = CallArgs::new("reset", vec![Value::Int(1)], Dict::new());
        let e = ResetArgs::bind(&mut c).unwrap_err();
        assert_eq!(
            e.message(),
            "reset() takes no positional arguments (pass them by keyword) but 1 was given"
        );
    }

    #[test]
    fn results_round_trip() {
        let r = StepResult::new(1.0, 2.0, false, true, dict! { "k" => 1 });
        assert_eq!(StepResult::from_value(r.clone().into_value()).unwrap(), r);
        let r = ResetResult::new((), 1, Dict::new());
        assert_eq!(ResetResult::from_value(r.clone().into_value()).unwrap(), r);
        assert!(StepResult::from_value(Value::Null).is_err());
    }
}
