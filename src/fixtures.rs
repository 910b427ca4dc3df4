//! The conformance fixture registry: the same resource IDs and behaviour as
//! the Python host of `../shared/interop/ref_fixture_server.py`, so that the
//! same calls against both servers give identical results.
//!
//! Arrays are float32 unless said otherwise; `box(shape)` is a float32 box
//! from −∞ to ∞.

use crate::codec::{DType, Dict, NdArray, Value};
use crate::host::{
    CombinedNode, Env, HostError, HostResult, Node, Phase, ResetArgs, ResetResult, Space,
    StepResult, World, WorldEnv,
};
use crate::server::{Hosted, RegisterError, ServerBuilder};
use bytes::Bytes;
use std::time::Duration;

fn unbounded(shape: Vec<usize>) -> Space {
    Space::unbounded_f32(shape)
}

/// The elements of a numeric action (array, number or flat list of
/// numbers) as f64, with its shape.
fn numbers(v: &Value) -> HostResult<(Vec<f64>, Vec<usize>)> {
    match v {
        Value::Array(a) => Ok((a.to_f64_vec(), a.shape().to_vec())),
        Value::Bool(b) => Ok((vec![*b as u8 as f64], vec![])),
        // A flat list of numbers, as NumPy reads `[1.0, 1.0]` (the
        // reference's fixtures add it to an array).
        Value::List(items) | Value::Tuple(items) if items.iter().all(|i| i.as_f64().is_some()) => {
            Ok((
                items.iter().filter_map(Value::as_f64).collect(),
                vec![items.len()],
            ))
        }
        other => other.as_f64().map(|x| (vec![x], vec![])).ok_or_else(|| {
            HostError::new(format!(
                "expected a numeric array, got {}",
                other.type_name()
            ))
        }),
    }
}

/// `target += operand` with NumPy broadcasting of `operand` to `shape`.
fn add_broadcast(target: &mut [f32], shape: &[usize], operand: &Value) -> HostResult<()> {
    let (values, oshape) = numbers(operand)?;
    if oshape.len() > shape.len() {
        return Err(HostError::new(format!(
            "operands could not be broadcast together with shapes {shape:?} {oshape:?}"
        )));
    }
    let offset = shape.len() - oshape.len();
    for (i, &d) in oshape.iter().enumerate() {
        if d != 1 && d != shape[offset + i] {
            return Err(HostError::new(format!(
                "operands could not be broadcast together with shapes {shape:?} {oshape:?}"
            )));
        }
    }
    // Strides of the operand in the target's index space (0 where broadcast).
    let mut strides = vec![0usize; shape.len()];
    let mut acc = 1;
    for i in (0..oshape.len()).rev() {
        strides[offset + i] = if oshape[i] == 1 { 0 } else { acc };
        acc *= oshape[i];
    }
    let mut index = vec![0usize; shape.len()];
    for t in target.iter_mut() {
        let src: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        *t = (*t as f64 + values.get(src).copied().unwrap_or(0.0)) as f32;
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(())
}

fn all_equal_99(action: &Value) -> bool {
    numbers(action).is_ok_and(|(v, _)| v.iter().all(|&x| x == 99.0))
}

fn f32_array(shape: &[usize], values: Vec<f32>) -> Value {
    Value::Array(
        NdArray::from_shape_vec(shape.to_vec(), values)
            .unwrap_or_else(|_| NdArray::from_vec(Vec::<f32>::new())),
    )
}

/// `value or 0` for a seed.
fn seed_or_zero(args: &ResetArgs) -> f32 {
    args.seed.unwrap_or(0) as f32
}

/// What a [`CounterEnv`] variant does differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterVariant {
    /// `counter` / `counter3`.
    Plain,
    /// `broken_render`: render always fails.
    BrokenRender,
    /// `large_render`: render is uint8 zeros (256, 256, 3).
    LargeRender,
    /// `large_info`: step info also holds `large`: 200000 zero bytes.
    LargeInfo,
}

/// `counter`: action and context box(2), observation `{position: box(2)}`;
/// reset sets the value to the seed; step adds the action.
pub struct CounterEnv {
    batch_size: Option<usize>,
    shape: Vec<usize>,
    value: Vec<f32>,
    variant: CounterVariant,
}

impl CounterEnv {
    /// An unbatched (`None`) or batched counter.
    pub fn new(batch_size: Option<usize>, variant: CounterVariant) -> CounterEnv {
        let shape = match batch_size {
            None => vec![2],
            Some(b) => vec![b, 2],
        };
        let n = shape.iter().product();
        CounterEnv {
            batch_size,
            shape,
            value: vec![0.0; n],
            variant,
        }
    }

    fn rows(&self) -> usize {
        self.batch_size.unwrap_or(1)
    }
}

impl Env for CounterEnv {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let seed = seed_or_zero(&args);
        let value = match &args.mask {
            None => {
                self.value.iter_mut().for_each(|v| *v = seed);
                f32_array(&self.shape, self.value.clone())
            }
            Some(mask) => {
                let rows: Vec<bool> = mask.to_vec::<bool>().map_err(HostError::from)?;
                if rows.len() != self.rows() || self.batch_size.is_none() {
                    return Err(HostError::new(format!(
                        "boolean index did not match indexed array along axis 0; size of axis is {} but size of corresponding boolean axis is {}",
                        self.shape[0],
                        rows.len()
                    )));
                }
                let mut picked = Vec::new();
                for (r, keep) in rows.iter().enumerate() {
                    if *keep {
                        self.value[r * 2] = seed;
                        self.value[r * 2 + 1] = seed;
                        picked.extend_from_slice(&self.value[r * 2..r * 2 + 2]);
                    }
                }
                let k = picked.len() / 2;
                f32_array(&[k, 2], picked)
            }
        };
        let mut obs = Dict::new();
        obs.insert("position", value.clone());
        let mut info = Dict::new();
        info.insert("seed", args.seed);
        Ok(ResetResult::new(value, obs, info))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        if all_equal_99(&action) {
            std::thread::sleep(Duration::from_millis(1500));
        }
        add_broadcast(&mut self.value, &self.shape, &action)?;
        let value = f32_array(&self.shape, self.value.clone());
        let mut obs = Dict::new();
        obs.insert("position", value);
        let (reward, terminated, truncated) = match self.batch_size {
            None => {
                let sum: f32 = self.value.iter().sum();
                (
                    Value::Float(sum as f64),
                    Value::Bool(self.value.iter().all(|&v| v > 3.0)),
                    Value::Bool(false),
                )
            }
            Some(b) => {
                let rows: Vec<&[f32]> = self.value.chunks(2).collect();
                (
                    Value::from(NdArray::from_vec(
                        rows.iter().map(|r| r.iter().sum::<f32>()).collect(),
                    )),
                    Value::from(NdArray::from_vec(
                        rows.iter().map(|r| r.iter().all(|&v| v > 3.0)).collect(),
                    )),
                    Value::from(NdArray::from_vec(vec![false; b])),
                )
            }
        };
        let mut info = Dict::new();
        info.insert(
            "pair",
            Value::Tuple(vec![
                Value::bytes(Bytes::from_static(b"abc")),
                Value::List(vec![Value::Int(1), Value::Null]),
            ]),
        );
        if self.variant == CounterVariant::LargeInfo {
            info.insert("large", Value::bytes(vec![0u8; 200_000]));
        }
        Ok(StepResult::new(obs, reward, terminated, truncated, info))
    }

    fn render(&mut self) -> HostResult<Value> {
        match self.variant {
            CounterVariant::BrokenRender => Err(HostError::new("render is broken")),
            CounterVariant::LargeRender => {
                Ok(Value::Array(NdArray::zeros(DType::U8, vec![256, 256, 3])?))
            }
            _ => {
                let sum: f32 = self.value.iter().sum();
                let fill = sum.trunc();
                if !(0.0..=255.0).contains(&fill) {
                    return Err(HostError::new(format!(
                        "Python integer {fill} out of bounds for uint8"
                    )));
                }
                Ok(Value::Array(NdArray::from_shape_vec(
                    vec![3, 4, 3],
                    vec![fill as u8; 36],
                )?))
            }
        }
    }

    fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }
    fn action_space(&self) -> Option<Space> {
        Some(unbounded(self.shape.clone()))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::dict([("position", unbounded(self.shape.clone()))]))
    }
    fn context_space(&self) -> Option<Space> {
        Some(unbounded(self.shape.clone()))
    }
    fn render_mode(&self) -> Option<String> {
        Some("rgb_array".into())
    }
}

/// `arm`, `hand`, `devices`: a detached device node with optional children.
pub struct DeviceNode {
    name: String,
    value: Vec<f32>,
    action: Value,
    children: Vec<DeviceNode>,
}

impl DeviceNode {
    /// A device of width 1 with the given children.
    pub fn new(name: &str, children: Vec<DeviceNode>) -> DeviceNode {
        DeviceNode {
            name: name.to_string(),
            value: vec![0.0],
            action: f32_array(&[1], vec![0.0]),
            children,
        }
    }
}

// The world and priority are passed down to the children, as UniEnv does.
#[allow(clippy::only_used_in_recursion)]
impl Node<()> for DeviceNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn context_space(&self) -> Option<Space> {
        Some(unbounded(vec![self.value.len()]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(unbounded(vec![self.value.len()]))
    }
    fn action_space(&self) -> Option<Space> {
        Some(unbounded(vec![self.value.len()]))
    }
    fn has_reward(&self) -> bool {
        true
    }
    fn has_termination_signal(&self) -> bool {
        true
    }
    fn has_truncation_signal(&self) -> bool {
        true
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        match phase {
            Phase::PreStep => vec![],
            _ => vec![0],
        }
    }
    fn child_count(&self) -> usize {
        self.children.len()
    }
    fn child(&self, index: usize) -> Option<&dyn Node<()>> {
        self.children.get(index).map(|c| c as &dyn Node<()>)
    }
    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<()>> {
        self.children.get_mut(index).map(|c| c as &mut dyn Node<()>)
    }
    fn set_next_action(&mut self, _: &mut (), action: Value) -> HostResult<()> {
        if all_equal_99(&action) {
            std::thread::sleep(Duration::from_millis(1500));
        }
        self.action = action;
        Ok(())
    }
    fn post_environment_step(
        &mut self,
        _: &mut (),
        _dt: Option<f64>,
        _priority: i64,
    ) -> HostResult<()> {
        let shape = [self.value.len()];
        add_broadcast(&mut self.value, &shape, &self.action)
    }
    fn reset(&mut self, world: &mut (), priority: i64, args: &ResetArgs) -> HostResult<()> {
        let seed = seed_or_zero(args);
        self.value.iter_mut().for_each(|v| *v = seed);
        self.action = f32_array(&[self.value.len()], vec![0.0; self.value.len()]);
        for child in &mut self.children {
            child.reset(world, priority, args)?;
        }
        Ok(())
    }
    fn reload(&mut self, world: &mut (), priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.reset(world, priority, args)
    }
    fn after_reload(&mut self, _: &mut (), _: i64, _: Option<&NdArray>) -> HostResult<()> {
        Ok(())
    }
    fn get_observation(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(f32_array(&[self.value.len()], self.value.clone()))
    }
    fn get_context(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(f32_array(&[self.value.len()], vec![0.0; self.value.len()]))
    }
    fn get_reward(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(Value::Float(self.value.iter().sum::<f32>() as f64))
    }
    fn get_termination(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(Value::Bool(self.value.iter().all(|&v| v > 10.0)))
    }
    fn get_truncation(&mut self, _: &mut ()) -> HostResult<Value> {
        Ok(Value::Bool(false))
    }
    fn get_info(&mut self, _: &mut ()) -> HostResult<Value> {
        let mut d = Dict::new();
        d.insert("name", self.name.as_str());
        Ok(Value::Dict(d))
    }
    fn close(&mut self, world: &mut ()) {
        for child in &mut self.children {
            child.close(world);
        }
    }
}

/// `bench_state`, `bench_image`, `bench_batch64`: a 32-float state, an
/// optional constant uint8 image (flat element i is i mod 251), optionally
/// batched; step adds the 4-float action to the first four state elements.
pub struct BenchEnv {
    batch: Option<usize>,
    state: Vec<f32>,
    image: Option<(Vec<usize>, Bytes)>,
}

impl BenchEnv {
    /// A bench env with an optional batch size and image shape.
    pub fn new(batch: Option<usize>, image: Option<[usize; 3]>) -> BenchEnv {
        let lead: Vec<usize> = batch.into_iter().collect();
        let rows = batch.unwrap_or(1);
        let image = image.map(|shape| {
            let mut full = lead.clone();
            full.extend_from_slice(&shape);
            let n: usize = full.iter().product();
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            (full, Bytes::from(data))
        });
        BenchEnv {
            batch,
            state: vec![0.0; rows * 32],
            image,
        }
    }

    fn lead(&self, tail: usize) -> Vec<usize> {
        match self.batch {
            Some(b) => vec![b, tail],
            None => vec![tail],
        }
    }

    fn obs(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("state", f32_array(&self.lead(32), self.state.clone()));
        if let Some((shape, data)) = &self.image {
            if let Ok(a) = NdArray::from_bytes(DType::U8, shape.clone(), data.clone()) {
                d.insert("image", a);
            }
        }
        d
    }
}

impl Env for BenchEnv {
    fn reset(&mut self, _args: ResetArgs) -> HostResult<ResetResult> {
        self.state.iter_mut().for_each(|v| *v = 0.0);
        Ok(ResetResult::new((), self.obs(), Dict::new()))
    }

    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let (values, shape) = numbers(&action)?;
        let rows = self.batch.unwrap_or(1);
        let per_row = shape.last().copied().unwrap_or(1);
        if per_row != 4 && per_row != 1 {
            return Err(HostError::new(format!(
                "action of shape {shape:?} does not fit (…, 4)"
            )));
        }
        for r in 0..rows {
            for k in 0..4 {
                let a = match values.len() {
                    1 => values[0],
                    4 => values[k],
                    n if n == rows * 4 => values[r * 4 + k],
                    _ => {
                        return Err(HostError::new(format!(
                            "action of shape {shape:?} does not fit (…, 4)"
                        )))
                    }
                };
                let s = &mut self.state[r * 32 + k];
                *s = (*s as f64 + a) as f32;
            }
        }
        let obs = self.obs();
        Ok(match self.batch {
            None => StepResult::new(obs, 0.0, false, false, Dict::new()),
            Some(b) => StepResult::new(
                obs,
                NdArray::from_vec(vec![0.0f32; b]),
                NdArray::from_vec(vec![false; b]),
                NdArray::from_vec(vec![false; b]),
                Dict::new(),
            ),
        })
    }

    fn batch_size(&self) -> Option<usize> {
        self.batch
    }
    fn action_space(&self) -> Option<Space> {
        Some(unbounded(self.lead(4)))
    }
    fn observation_space(&self) -> Option<Space> {
        let mut entries = vec![("state".to_string(), unbounded(self.lead(32)))];
        if let Some((shape, _)) = &self.image {
            entries.push((
                "image".to_string(),
                Space::boxed(DType::U8, shape.clone(), 0.0, 255.0),
            ));
        }
        Some(Space::dict(entries))
    }
}

/// `TickWorld`: both timesteps 0.125; `tick` counts world steps (reset sets
/// it to the seed); each reload widens the observation of the tick nodes.
pub struct TickWorld {
    /// Steps since the last reset (or the seed).
    pub tick: i64,
    /// The observation width set at the next after_reload.
    pub width: usize,
}

impl World for TickWorld {
    fn step(&mut self) -> HostResult<f64> {
        self.tick += 1;
        Ok(0.125)
    }
    fn reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.tick = args.seed.unwrap_or(0);
        Ok(())
    }
    fn reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.width += 1;
        self.tick = args.seed.unwrap_or(0);
        Ok(())
    }
    fn world_timestep(&self) -> Option<f64> {
        Some(0.125)
    }
    fn world_subtimestep(&self) -> Option<f64> {
        Some(0.125)
    }
}

/// `TickNode`: reads the world's tick; control 0.5 s, update 0.25 s.
pub struct TickNode {
    name: String,
    observation: Space,
    action: Value,
}

impl TickNode {
    /// A tick node whose observation space starts as box((width,)).
    pub fn new(name: &str, width: usize) -> TickNode {
        TickNode {
            name: name.to_string(),
            observation: unbounded(vec![width]),
            action: f32_array(&[1], vec![0.0]),
        }
    }
}

impl Node<TickWorld> for TickNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn control_timestep(&self) -> Option<f64> {
        Some(0.5)
    }
    fn update_timestep(&self) -> Option<f64> {
        Some(0.25)
    }
    fn context_space(&self) -> Option<Space> {
        Some(unbounded(vec![1]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(self.observation.clone())
    }
    fn action_space(&self) -> Option<Space> {
        Some(unbounded(vec![1]))
    }
    fn has_reward(&self) -> bool {
        true
    }
    fn has_termination_signal(&self) -> bool {
        true
    }
    fn has_truncation_signal(&self) -> bool {
        true
    }
    fn render_mode(&self) -> Option<String> {
        Some("rgb_array".into())
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        match phase {
            Phase::Reset | Phase::Reload => vec![1, 0],
            Phase::AfterReset | Phase::AfterReload => vec![0],
            Phase::PreStep => vec![2, 0],
            Phase::PostStep => vec![0, -1],
        }
    }
    fn set_next_action(&mut self, _: &mut TickWorld, action: Value) -> HostResult<()> {
        self.action = action;
        Ok(())
    }
    fn reload(&mut self, _: &mut TickWorld, _: i64, _: &ResetArgs) -> HostResult<()> {
        Ok(())
    }
    fn after_reload(
        &mut self,
        world: &mut TickWorld,
        _: i64,
        _: Option<&NdArray>,
    ) -> HostResult<()> {
        self.observation = unbounded(vec![world.width]);
        Ok(())
    }
    fn get_observation(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        let shape = self.observation.shape().unwrap_or_default();
        let n = shape.iter().product();
        Ok(f32_array(&shape, vec![world.tick as f32; n]))
    }
    fn get_context(&mut self, _: &mut TickWorld) -> HostResult<Value> {
        Ok(f32_array(&[1], vec![7.0]))
    }
    fn get_info(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        let mut d = Dict::new();
        d.insert("tick", world.tick);
        Ok(Value::Dict(d))
    }
    fn get_reward(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        Ok(Value::Float(world.tick as f64))
    }
    fn get_termination(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        Ok(Value::Bool(world.tick > 7))
    }
    fn get_truncation(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        Ok(Value::Bool(world.tick > 12))
    }
    fn render(&mut self, world: &mut TickWorld) -> HostResult<Value> {
        let tick = u8::try_from(world.tick).map_err(|_| {
            HostError::new(format!(
                "Python integer {} out of bounds for uint8",
                world.tick
            ))
        })?;
        Ok(Value::Array(NdArray::from_shape_vec(
            vec![2, 2, 3],
            vec![tick; 12],
        )?))
    }
}

/// `composed`: a WorldEnv of a TickWorld and `CombinedNode("root", [TickNode
/// first, TickNode "b"], direct_return=false)`; the first node's observation
/// starts as box((first_width,)).
pub fn make_composed(first: &str, first_width: usize) -> HostResult<WorldEnv<TickWorld>> {
    let children: Vec<Box<dyn Node<TickWorld>>> = vec![
        Box::new(TickNode::new(first, first_width)),
        Box::new(TickNode::new("b", 1)),
    ];
    let root = CombinedNode::builder("root", children)
        .direct_return(false)
        .build()?;
    WorldEnv::new(TickWorld { tick: 0, width: 1 }, Box::new(root))
}

/// Registers the whole fixture registry, in the reference host's order.
pub fn register(builder: &mut ServerBuilder) -> Result<(), RegisterError> {
    builder.register_env("counter", CounterEnv::new(None, CounterVariant::Plain))?;
    builder.register_env("counter3", CounterEnv::new(Some(3), CounterVariant::Plain))?;
    builder.register_with("composed", || make_composed("a", 1).map(Hosted::env))?;
    builder.register_node("arm", DeviceNode::new("arm", vec![]))?;
    builder.register_node("hand", DeviceNode::new("hand", vec![]))?;
    builder.register_node(
        "devices",
        DeviceNode::new(
            "devices",
            vec![
                DeviceNode::new("arm/grip", vec![]),
                DeviceNode::new("hand", vec![]),
            ],
        ),
    )?;
    builder.register_env(
        "broken_render",
        CounterEnv::new(None, CounterVariant::BrokenRender),
    )?;
    builder.register_env(
        "large_render",
        CounterEnv::new(None, CounterVariant::LargeRender),
    )?;
    builder.register_env(
        "large_info",
        CounterEnv::new(None, CounterVariant::LargeInfo),
    )?;
    builder.register_factory("lazy", || {
        Ok(Hosted::env(CounterEnv::new(None, CounterVariant::Plain)))
    })?;
    // The first child's observation is box((n,)), n = how many times the
    // factory has run, this run included.
    let mut runs = 0;
    builder.register_factory("lazy_composed", move || {
        runs += 1;
        make_composed("a/b", runs).map(Hosted::env)
    })?;
    builder.register_env("bench_state", BenchEnv::new(None, None))?;
    builder.register_env("bench_image", BenchEnv::new(None, Some([84, 84, 3])))?;
    builder.register_env("bench_batch64", BenchEnv::new(Some(64), Some([84, 84, 3])))?;
    Ok(())
}
