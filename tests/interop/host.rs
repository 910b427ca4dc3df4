//! Interop with the reference (`unienv==0.0.1b14`): space documents, and the
//! same WorldEnv / CombinedWorldNode composition run in Python and in Rust.
//!
//! Values travel between the two through the reference codec, so types
//! (tuple vs list, int vs float, NumPy dtypes) are compared exactly.

use crate::common;

use bytes::Bytes;
use unienv_remote::host::space::{DynamicBoxSpace, GraphSpace, TextSpace};
use unienv_remote::host::Space;
use unienv_remote::{dict, Codec, DType, Dict, NdArray, Value};

fn decode(frame: Vec<u8>) -> Value {
    Codec::default()
        .decode(Bytes::from(frame))
        .expect("decode the reference's envelope")
}

fn encode(value: &Value) -> Vec<u8> {
    Codec::default().encode(value).expect("encode")
}

/// The spaces of `tests/py/host_spaces.py`, built with the Rust API.
fn rust_spaces() -> Vec<(&'static str, Space)> {
    let inf = f64::INFINITY;
    let box3 = Space::unbounded_f32(vec![3]);
    let f32s = |shape: Vec<usize>, v: Vec<f32>| NdArray::from_shape_vec(shape, v).unwrap();
    let text = |max: i64, charset: Option<&str>| {
        Space::Text(TextSpace {
            min_length: 0,
            max_length: max,
            charset: charset.map(String::from),
        })
    };
    vec![
        ("box_f32_unbounded", box3.clone()),
        (
            "box_f64_scalar_bounds_2x2",
            Space::boxed(DType::F64, vec![2, 2], -1.0, 1.0),
        ),
        (
            "box_f32_array_bounds",
            Space::box_with_bounds(
                DType::F32,
                vec![2, 3],
                f32s(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
                f32s(vec![2, 3], vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0]),
            )
            .unwrap(),
        ),
        (
            "box_f32_broadcast_bounds",
            Space::box_with_bounds(
                DType::F32,
                vec![2, 3],
                f32s(vec![2, 1], vec![0.0, 0.5]),
                f32s(vec![1, 3], vec![1.0, 2.0, 3.0]),
            )
            .unwrap(),
        ),
        (
            "box_i32_infinite",
            Space::boxed(DType::I32, vec![2], -inf, inf),
        ),
        (
            "box_i64_infinite",
            Space::boxed(DType::I64, vec![1], -inf, inf),
        ),
        (
            "box_u64_scalar_shape",
            Space::boxed(DType::U64, vec![], 0.0, inf),
        ),
        (
            "box_f32_scalar_shape",
            Space::boxed(DType::F32, vec![], 0.1, 0.5),
        ),
        (
            "box_f64_scalar_shape",
            Space::boxed(DType::F64, vec![], -2.5, 2.5),
        ),
        ("box_i8", Space::boxed(DType::I8, vec![4], -5.0, 5.0)),
        (
            "box_u8_image",
            Space::boxed(DType::U8, vec![2, 2, 3], 0.0, 255.0),
        ),
        (
            "box_u16_u32_i16",
            Space::tuple(vec![
                Space::boxed(DType::U16, vec![1], 0.0, 1000.0),
                Space::boxed(DType::U32, vec![1], 0.0, inf),
                Space::boxed(DType::I16, vec![2], -inf, 7.0),
            ]),
        ),
        ("binary", Space::binary(vec![2, 3])),
        ("binary_scalar", Space::binary(vec![])),
        (
            "dynamic_box",
            Space::DynamicBox(DynamicBoxSpace {
                low: f32s(vec![1, 1], vec![-1.0]),
                high: f32s(vec![1, 1], vec![1.0]),
                shape_low: vec![0, 3],
                shape_high: vec![10, 3],
                dtype: DType::F32,
                fill_value: Value::Int(0),
            }),
        ),
        (
            "dynamic_box_int",
            Space::DynamicBox(DynamicBoxSpace {
                low: NdArray::from_vec(vec![0i64]),
                high: NdArray::from_vec(vec![9i64]),
                shape_low: vec![1],
                shape_high: vec![5],
                dtype: DType::I64,
                fill_value: Value::Int(-1),
            }),
        ),
        (
            "tuple",
            Space::tuple(vec![box3.clone(), Space::binary(vec![1])]),
        ),
        ("tuple_empty", Space::tuple(vec![])),
        (
            "dict_nested",
            Space::dict([
                ("z", box3.clone()),
                ("", Space::binary(vec![2])),
                (
                    "a",
                    Space::dict([("y", text(4, None)), ("x", box3.clone())]),
                ),
            ]),
        ),
        (
            "text_charset",
            Space::Text(TextSpace {
                min_length: 1,
                max_length: 5,
                charset: Some("hello".into()),
            }),
        ),
        ("text_any", text(8, None)),
        (
            "graph",
            Space::Graph(Box::new(GraphSpace {
                max_nodes: Some(6),
                min_nodes: 2,
                max_edges: Some(9),
                min_edges: 1,
                is_edge: true,
                node_feature_space: Space::boxed(DType::F32, vec![2], -1.0, 1.0),
                edge_feature_space: Some(Space::boxed(DType::F64, vec![1], 0.0, 1.0)),
                batch_shape: vec![2],
            })),
        ),
        (
            "graph_no_edges",
            Space::Graph(Box::new(GraphSpace {
                max_nodes: Some(4),
                min_nodes: 1,
                max_edges: Some(1),
                min_edges: 1,
                is_edge: false,
                node_feature_space: box3.clone(),
                edge_feature_space: None,
                batch_shape: vec![],
            })),
        ),
        ("union", Space::Union(vec![box3.clone(), text(2, None)])),
        ("batched_box", Space::batched(box3, vec![4])),
        (
            "batched_text",
            Space::batched(text(3, Some("ba")), vec![2, 3]),
        ),
    ]
}

#[test]
fn space_documents_match_the_reference() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let spaces = rust_spaces();
    let docs: Dict = spaces
        .iter()
        .map(|(name, s)| (*name, s.to_value()))
        .collect();
    let out = decode(common::run_python(
        &python,
        "host_spaces.py",
        &[],
        Some(&encode(&Value::Dict(docs.clone()))),
    ));
    let reference = out.get("reference").and_then(Value::as_dict).unwrap();
    let roundtrip = out.get("roundtrip").and_then(Value::as_dict).unwrap();
    assert_eq!(
        reference.keys().collect::<Vec<_>>(),
        docs.keys().collect::<Vec<_>>(),
        "the same spaces on both sides"
    );
    for (name, space) in &spaces {
        let ours = docs.get(name).unwrap();
        assert_eq!(Some(ours), reference.get(name), "space_to_json of {name}");
        // Same bytes on the wire, too.
        assert_eq!(
            encode(ours),
            encode(reference.get(name).unwrap()),
            "{name} encodes identically"
        );
        assert_eq!(
            Some(ours),
            roundtrip.get(name),
            "json_to_space → space_to_json of {name}"
        );
        assert_eq!(
            &Space::from_value(ours).unwrap(),
            space,
            "Rust parses its own {name}"
        );
        assert_eq!(
            &Space::from_value(reference.get(name).unwrap()).unwrap(),
            space,
            "Rust parses the reference's {name}"
        );
    }
}

// ---------------------------------------------------------------------------
// The same compositions run by the reference and by this crate.
// ---------------------------------------------------------------------------

mod sim {
    //! Rust twins of `SimWorld` / `SimNode` in `tests/py/host_composition.py`.

    use unienv_remote::host::{
        CombinedNode, HostResult, Node, Phase, RenderModeArg, ResetArgs, Space, World, WorldEnv,
    };
    use unienv_remote::{DType, Dict, NdArray, Value};

    pub const PHASES: [(&str, Phase); 6] = [
        ("reset", Phase::Reset),
        ("reload", Phase::Reload),
        ("after_reset", Phase::AfterReset),
        ("after_reload", Phase::AfterReload),
        ("pre_step", Phase::PreStep),
        ("post_step", Phase::PostStep),
    ];

    fn f64_opt(v: &Value) -> Option<f64> {
        v.as_f64()
    }

    fn kw_names(kwargs: &Dict) -> String {
        kwargs.keys().collect::<Vec<_>>().join(",")
    }

    fn py_f(x: Option<f64>) -> String {
        x.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
    }

    fn py_seed(seed: Option<i64>) -> String {
        seed.map_or_else(|| "None".to_owned(), |s| s.to_string())
    }

    pub struct SimWorld {
        pub trace: Vec<String>,
        timestep: Option<f64>,
        batch_size: Option<usize>,
        step_dt: f64,
    }

    impl SimWorld {
        pub fn new(spec: &Value) -> SimWorld {
            SimWorld {
                trace: Vec::new(),
                timestep: f64_opt(spec.get("timestep").unwrap()),
                batch_size: spec.get("batch_size").unwrap().as_u64().map(|b| b as usize),
                step_dt: spec.get("step_dt").unwrap().as_f64().unwrap(),
            }
        }

        fn log(&mut self, call: String) {
            self.trace.push(call);
        }
    }

    impl World for SimWorld {
        fn step(&mut self) -> HostResult<f64> {
            self.log("world.step()".into());
            Ok(self.step_dt)
        }
        fn reset(&mut self, a: &ResetArgs) -> HostResult<()> {
            self.log(format!(
                "world.reset(seed={}, kwargs={})",
                py_seed(a.seed),
                kw_names(&a.kwargs)
            ));
            Ok(())
        }
        fn reload(&mut self, a: &ResetArgs) -> HostResult<()> {
            self.log(format!(
                "world.reload(seed={}, kwargs={})",
                py_seed(a.seed),
                kw_names(&a.kwargs)
            ));
            Ok(())
        }
        fn after_reset(&mut self, a: &ResetArgs) -> HostResult<()> {
            self.log(format!(
                "world.after_reset(seed={}, kwargs={})",
                py_seed(a.seed),
                kw_names(&a.kwargs)
            ));
            Ok(())
        }
        fn after_reload(&mut self, a: &ResetArgs) -> HostResult<()> {
            self.log(format!(
                "world.after_reload(seed={}, kwargs={})",
                py_seed(a.seed),
                kw_names(&a.kwargs)
            ));
            Ok(())
        }
        fn close(&mut self) {
            self.log("world.close()".into());
        }
        fn world_timestep(&self) -> Option<f64> {
            self.timestep
        }
        fn batch_size(&self) -> Option<usize> {
            self.batch_size
        }
    }

    pub struct SimNode {
        spec: Value,
        name: String,
        batch_size: Option<usize>,
        priorities: Vec<(Phase, Vec<i64>)>,
        obs_dim: usize,
        t: i64,
        time: f64,
        seed: Option<i64>,
        kw: Dict,
        last_action: Value,
    }

    impl SimNode {
        pub fn new(spec: &Value, batch_size: Option<usize>) -> SimNode {
            let prios = spec.get("priorities").and_then(Value::as_dict).unwrap();
            let priorities = PHASES
                .iter()
                .map(|(name, phase)| {
                    let set = prios
                        .get(name)
                        .and_then(Value::as_seq)
                        .map(|s| s.iter().map(|p| p.as_i64().unwrap()).collect())
                        .unwrap_or_default();
                    (*phase, set)
                })
                .collect();
            SimNode {
                spec: spec.clone(),
                name: spec.get("name").and_then(Value::as_str).unwrap().to_owned(),
                batch_size,
                priorities,
                obs_dim: spec.get("obs_dim").and_then(Value::as_u64).unwrap() as usize,
                t: 0,
                time: 0.0,
                seed: None,
                kw: Dict::new(),
                last_action: Value::Null,
            }
        }

        fn kind(&self, key: &str) -> Option<&str> {
            self.spec.get(key).and_then(Value::as_str)
        }

        fn int(&self, key: &str) -> Option<i64> {
            self.spec.get(key).and_then(Value::as_i64)
        }

        fn batch(&self, shape: &[usize]) -> Vec<usize> {
            self.batch_size
                .into_iter()
                .chain(shape.iter().copied())
                .collect()
        }

        fn log(&self, world: &mut SimWorld, call: String) {
            world.trace.push(format!("{}.{call}", self.name));
        }

        fn do_reset(
            &mut self,
            world: &mut SimWorld,
            method: &str,
            priority: i64,
            args: &ResetArgs,
        ) {
            self.log(
                world,
                format!(
                    "{method}(priority={priority}, seed={}, kwargs={})",
                    py_seed(args.seed),
                    kw_names(&args.kwargs)
                ),
            );
            self.seed = args.seed;
            self.kw = args.kwargs.clone();
            self.t = 0;
            self.time = 0.0;
        }

        fn signal(&self, after: i64) -> Value {
            match self.batch_size {
                None => Value::Bool(self.t >= after),
                Some(b) => {
                    let mut flags = vec![false; b];
                    flags[0] = self.t >= after;
                    Value::Array(NdArray::from_vec(flags))
                }
            }
        }
    }

    impl Node<SimWorld> for SimNode {
        fn name(&self) -> &str {
            &self.name
        }
        fn control_timestep(&self) -> Option<f64> {
            f64_opt(self.spec.get("control").unwrap())
        }
        fn update_timestep(&self) -> Option<f64> {
            f64_opt(self.spec.get("update").unwrap())
        }
        fn observation_space(&self) -> Option<Space> {
            match self.kind("obs")? {
                "box" => Some(Space::unbounded_f32(self.batch(&[self.obs_dim]))),
                _ => Some(Space::dict([("progress", Space::unbounded_f32(vec![]))])),
            }
        }
        fn context_space(&self) -> Option<Space> {
            match self.kind("ctx")? {
                "box" => Some(Space::boxed(DType::I64, self.batch(&[1]), 0.0, 1000.0)),
                _ => Some(Space::dict([("goal", Space::unbounded_f32(vec![2]))])),
            }
        }
        fn action_space(&self) -> Option<Space> {
            match self.kind("act")? {
                "box" => Some(Space::boxed(DType::F32, self.batch(&[2]), -1.0, 1.0)),
                "int" => Some(Space::boxed(DType::I64, self.batch(&[]), 0.0, 10.0)),
                _ => Some(Space::dict([(
                    "mode",
                    Space::boxed(DType::I64, vec![], 0.0, 3.0),
                )])),
            }
        }
        fn has_reward(&self) -> bool {
            self.kind("reward").is_some()
        }
        fn has_termination_signal(&self) -> bool {
            self.int("term_after").is_some()
        }
        fn has_truncation_signal(&self) -> bool {
            self.int("trunc_after").is_some()
        }
        fn render_mode(&self) -> Option<String> {
            self.kind("render").map(|_| "rgb_array".to_owned())
        }
        fn priorities(&self, phase: Phase) -> Vec<i64> {
            self.priorities
                .iter()
                .find(|(p, _)| *p == phase)
                .map(|(_, s)| s.clone())
                .unwrap_or_default()
        }
        fn set_next_action(&mut self, world: &mut SimWorld, action: Value) -> HostResult<()> {
            self.log(world, "set_next_action()".into());
            self.last_action = action;
            Ok(())
        }
        fn pre_environment_step(
            &mut self,
            world: &mut SimWorld,
            dt: Option<f64>,
            priority: i64,
        ) -> HostResult<()> {
            self.log(
                world,
                format!("pre_environment_step({}, priority={priority})", py_f(dt)),
            );
            if Some(priority) == self.priorities(Phase::PreStep).into_iter().max() {
                self.t += 1;
            }
            if let Some(dt) = dt {
                self.time += dt;
            }
            Ok(())
        }
        fn post_environment_step(
            &mut self,
            world: &mut SimWorld,
            dt: Option<f64>,
            priority: i64,
        ) -> HostResult<()> {
            self.log(
                world,
                format!("post_environment_step({}, priority={priority})", py_f(dt)),
            );
            Ok(())
        }
        fn reset(
            &mut self,
            world: &mut SimWorld,
            priority: i64,
            args: &ResetArgs,
        ) -> HostResult<()> {
            self.do_reset(world, "reset", priority, args);
            Ok(())
        }
        fn reload(
            &mut self,
            world: &mut SimWorld,
            priority: i64,
            args: &ResetArgs,
        ) -> HostResult<()> {
            self.do_reset(world, "reload", priority, args);
            Ok(())
        }
        fn after_reset(
            &mut self,
            world: &mut SimWorld,
            priority: i64,
            _: Option<&NdArray>,
        ) -> HostResult<()> {
            self.log(world, format!("after_reset(priority={priority})"));
            Ok(())
        }
        fn after_reload(
            &mut self,
            world: &mut SimWorld,
            priority: i64,
            _: Option<&NdArray>,
        ) -> HostResult<()> {
            self.log(world, format!("after_reload(priority={priority})"));
            if let Some(dim) = self.spec.get("grow_obs").and_then(Value::as_u64) {
                self.obs_dim = dim as usize;
            }
            Ok(())
        }
        fn get_context(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_context()".into());
            let seed = self.seed.unwrap_or(0);
            Ok(match self.kind("ctx") {
                Some("dict") => {
                    let goal = NdArray::from_vec(vec![seed as f32, self.t as f32]);
                    Value::from(Dict::new().with("goal", goal))
                }
                _ => {
                    let shape = self.batch(&[1]);
                    let n = shape.iter().product();
                    Value::Array(NdArray::from_shape_vec(shape, vec![seed; n])?)
                }
            })
        }
        fn get_observation(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_observation()".into());
            if self.kind("obs") == Some("dict") {
                return Ok(Value::from(
                    Dict::new().with("progress", NdArray::scalar(self.time as f32)),
                ));
            }
            let shape = self.batch(&[self.obs_dim]);
            let n: usize = shape.iter().product();
            let mut values = vec![self.t as f32; n];
            for row in values.chunks_mut(self.obs_dim) {
                row[0] = self.time as f32;
            }
            Ok(Value::Array(NdArray::from_shape_vec(shape, values)?))
        }
        fn get_reward(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_reward()".into());
            Ok(match self.kind("reward") {
                Some("float") => Value::Float(self.t as f64 * 0.5),
                Some("int") => Value::Int(self.t),
                _ => {
                    let shape = self.batch(&[]);
                    let n = shape.iter().product();
                    Value::Array(NdArray::from_shape_vec(
                        shape,
                        vec![self.t as f32 * 0.25; n],
                    )?)
                }
            })
        }
        fn get_termination(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_termination()".into());
            Ok(self.signal(self.int("term_after").unwrap_or(0)))
        }
        fn get_truncation(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_truncation()".into());
            Ok(self.signal(self.int("trunc_after").unwrap_or(0)))
        }
        fn get_info(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "get_info()".into());
            if self.spec.get("info") != Some(&Value::Bool(true)) {
                return Ok(Value::Null);
            }
            let mut info = Dict::new();
            info.insert("t", self.t);
            info.insert("time", self.time);
            info.insert("last_action", self.last_action.clone());
            info.insert("kw", self.kw.clone());
            info.insert("seed", self.seed);
            Ok(Value::Dict(info))
        }
        fn render(&mut self, world: &mut SimWorld) -> HostResult<Value> {
            self.log(world, "render()".into());
            let t = self.t as u8;
            Ok(match self.kind("render") {
                Some("rgb") => Value::Array(NdArray::from_shape_vec(vec![2, 2, 3], vec![t; 12])?),
                Some("dict") => {
                    let mut d = Dict::new();
                    d.insert("left", NdArray::from_vec(vec![t]));
                    d.insert("right", ());
                    Value::Dict(d)
                }
                _ => Value::Null,
            })
        }
        fn close(&mut self, world: &mut SimWorld) {
            self.log(world, "close()".into());
        }
    }

    pub fn build_node(spec: &Value, batch_size: Option<usize>) -> Box<dyn Node<SimWorld>> {
        if spec.get("kind").and_then(Value::as_str) != Some("combined") {
            return Box::new(SimNode::new(spec, batch_size));
        }
        let children = spec
            .get("children")
            .and_then(Value::as_seq)
            .unwrap()
            .iter()
            .map(|c| build_node(c, batch_size))
            .collect();
        let root = match spec.get("root_node") {
            Some(Value::Null) | None => None,
            Some(r) => Some(build_node(r, batch_size)),
        };
        Box::new(
            CombinedNode::with_options(
                spec.get("name").and_then(Value::as_str).unwrap(),
                children,
                spec.get("direct_return").and_then(Value::as_bool).unwrap(),
                RenderModeArg::from(spec.get("render_mode").and_then(Value::as_str)),
                root,
            )
            .unwrap(),
        )
    }

    pub fn build_env(scenario: &Value) -> WorldEnv<SimWorld> {
        let world = SimWorld::new(scenario.get("world").unwrap());
        let batch_size = world.batch_size;
        let root = scenario.get("root").unwrap();
        if root.get("kind").and_then(Value::as_str) == Some("nodes") {
            let nodes = root
                .get("children")
                .and_then(Value::as_seq)
                .unwrap()
                .iter()
                .map(|c| build_node(c, batch_size))
                .collect();
            let mode = RenderModeArg::from(root.get("render_mode").and_then(Value::as_str));
            return WorldEnv::from_nodes(world, nodes, mode).unwrap();
        }
        WorldEnv::new(world, build_node(root, batch_size)).unwrap()
    }
}

/// A node spec with UniEnv's defaults (see `SimNode` in the Python script).
fn node(name: &str) -> Dict {
    dict! {
        "name" => name,
        "control" => (),
        "update" => (),
        "priorities" => Dict::new(),
        "obs" => (),
        "obs_dim" => 1,
        "grow_obs" => (),
        "ctx" => (),
        "act" => (),
        "reward" => (),
        "term_after" => (),
        "trunc_after" => (),
        "info" => false,
        "render" => (),
    }
}

fn prios(entries: &[(&str, &[i64])]) -> Dict {
    entries
        .iter()
        .map(|(phase, set)| (*phase, Value::list(set.iter().copied())))
        .collect()
}

fn combined_spec(
    name: &str,
    children: Vec<Dict>,
    direct_return: bool,
    render_mode: Option<&str>,
) -> Dict {
    dict! {
        "kind" => "combined",
        "name" => name,
        "children" => Value::list(children),
        "root_node" => (),
        "direct_return" => direct_return,
        "render_mode" => render_mode,
    }
}

fn world_spec(timestep: Option<f64>, batch_size: Option<usize>, step_dt: f64) -> Dict {
    dict! { "timestep" => timestep, "batch_size" => batch_size, "step_dt" => step_dt }
}

fn reset(seed: Option<i64>, kwargs: Dict) -> Value {
    Value::list([
        Value::from("reset"),
        Value::from(dict! { "seed" => seed, "kwargs" => kwargs }),
    ])
}

fn op(name: &str, arg: impl Into<Value>) -> Value {
    Value::list([Value::from(name), arg.into()])
}

fn f32s(values: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(values.to_vec()))
}

/// Unbatched, multi-rate, with a root node merged at the top level.
fn scenario_root_node() -> Value {
    let arm = node("arm")
        .with("control", 0.25)
        .with("update", 0.125)
        .with(
            "priorities",
            prios(&[
                ("reset", &[0]),
                ("reload", &[0]),
                ("after_reset", &[0]),
                ("after_reload", &[0]),
                ("pre_step", &[10]),
                ("post_step", &[0]),
            ]),
        )
        .with("obs", "box")
        .with("obs_dim", 2)
        .with("act", "box")
        .with("reward", "float")
        .with("term_after", 5)
        .with("info", true)
        .with("render", "rgb");
    let cam = node("cam")
        .with("update", 0.25)
        .with(
            "priorities",
            prios(&[
                ("reload", &[1]),
                ("post_step", &[-50]),
                ("after_reload", &[-5]),
            ]),
        )
        .with("obs", "box")
        .with("grow_obs", 3)
        .with("trunc_after", 3)
        .with("render", "dict");
    let slow = node("slow")
        .with("control", 0.5)
        .with("update", 0.5)
        .with(
            "priorities",
            prios(&[("reset", &[0]), ("pre_step", &[10, 5]), ("post_step", &[0])]),
        )
        .with("act", "int")
        .with("reward", "int")
        .with("info", true);
    let task = node("task")
        .with("priorities", prios(&[("after_reset", &[3])]))
        .with("obs", "dict")
        .with("act", "dict")
        .with("ctx", "dict")
        .with("reward", "int")
        .with("info", true);
    let root =
        combined_spec("root", vec![arm, cam, slow], true, Some("auto")).with("root_node", task);
    let arm_act = |a: f32| f32s(&[a, -a]);
    let pernode = dict! { "pernode_kwargs" => dict! { "arm" => dict! { "level" => 3 }, "slow" => dict! { "level" => 4, "speed" => 1 } } };
    Value::from(dict! {
        "world" => world_spec(Some(0.125), None, 0.125),
        "root" => root,
        "ops" => Value::list([
            op("describe", ()),
            reset(Some(1), Dict::new()),
            op("describe", ()),
            op("step", dict! { "arm" => arm_act(0.5), "slow" => 3, "mode" => 1 }),
            op("step", dict! { "arm" => arm_act(0.25) }),
            op("step", dict! { "slow" => 7 }),
            op("step", Dict::new()),
            op("step", dict! { "arm" => arm_act(-1.0), "ghost" => 1, "cam" => 2 }),
            op("render", ()),
            reset(Some(2), pernode),
            op("step", dict! { "mode" => 2 }),
            op("step", dict! { "slow" => 9 }),
            reset(Some(3), dict! { "bogus" => 1 }),
            reset(Some(5), dict! { "reload" => true }),
            op("step", dict! { "arm" => arm_act(0.125), "slow" => 1 }),
            op("render", ()),
            op("close", ()),
        ]),
    })
}

/// Batched world, several nodes wrapped by `WorldEnv` itself.
fn scenario_batched() -> Value {
    let a = node("a")
        .with("control", 0.1)
        .with("update", 0.05)
        .with(
            "priorities",
            prios(&[
                ("reset", &[0]),
                ("reload", &[0]),
                ("pre_step", &[0]),
                ("post_step", &[0]),
            ]),
        )
        .with("obs", "box")
        .with("obs_dim", 2)
        .with("ctx", "box")
        .with("act", "box")
        .with("reward", "array")
        .with("term_after", 2)
        .with("trunc_after", 1)
        .with("info", true)
        .with("render", "rgb");
    let b = node("b")
        .with("control", 0.2)
        .with("update", 0.1)
        .with("priorities", prios(&[("pre_step", &[0])]))
        .with("act", "int")
        .with("reward", "float")
        .with("term_after", 3);
    let acts = |x: f32, k: i64| {
        dict! {
            "a" => Value::Array(NdArray::from_shape_vec(vec![2, 2], vec![x, -x, x, 0.0]).unwrap()),
            "b" => Value::Array(NdArray::from_vec(vec![k, k + 1])),
        }
    };
    Value::from(dict! {
        "world" => world_spec(Some(0.05), Some(2), 0.05),
        "root" => dict! { "kind" => "nodes", "children" => Value::list([a, b]), "render_mode" => "dict" },
        "ops" => Value::list([
            reset(Some(0), Dict::new()),
            op("describe", ()),
            op("step", acts(0.5, 1)),
            op("step", acts(0.25, 2)),
            op("step", acts(0.125, 3)),
            op("render", ()),
            reset(None, Dict::new()),
            op("step", acts(1.0, 4)),
            op("close", ()),
        ]),
    })
}

/// A plain root node; its update timestep exceeds its control timestep, so a
/// step runs no update substep at all.
fn scenario_plain_node() -> Value {
    let solo = node("solo")
        .with("control", 0.5)
        .with("update", 1.0)
        .with(
            "priorities",
            prios(&[
                ("reset", &[2, -1]),
                ("pre_step", &[0]),
                ("after_reload", &[4]),
            ]),
        )
        .with("obs", "box");
    Value::from(dict! {
        "world" => world_spec(Some(0.5), None, 0.5),
        "root" => solo,
        "ops" => Value::list([
            op("describe", ()),
            reset(Some(4), Dict::new()),
            op("step", 1),
            reset(Some(4), dict! { "anything" => 1 }),
            op("step", ()),
            op("render", ()),
            op("close", ()),
        ]),
    })
}

/// Nested combined nodes without direct return, an asynchronous world, and
/// nested `pernode_kwargs`.
fn scenario_nested() -> Value {
    let leaf = node("leaf")
        .with(
            "priorities",
            prios(&[("reload", &[0]), ("reset", &[0]), ("pre_step", &[1])]),
        )
        .with("obs", "box")
        .with("reward", "int")
        .with("info", true)
        .with("render", "none");
    let inner = combined_spec("inner", vec![leaf], true, Some("auto"));
    let other = node("other")
        .with("control", 0.6)
        .with(
            "priorities",
            prios(&[("reload", &[0]), ("pre_step", &[0]), ("post_step", &[0])]),
        )
        .with("obs", "box")
        .with("act", "box")
        .with("term_after", 1)
        .with("render", "rgb");
    let outer = combined_spec("outer", vec![inner, other], false, None);
    let nested = dict! {
        "pernode_kwargs" => dict! {
            "inner" => dict! { "pernode_kwargs" => dict! { "leaf" => dict! { "level" => 2 } } },
            "other" => dict! { "mode" => 1 },
        }
    };
    Value::from(dict! {
        "world" => world_spec(None, None, 0.3),
        "root" => outer,
        "ops" => Value::list([
            op("describe", ()),
            reset(Some(9), nested),
            op("step", dict! { "other" => f32s(&[0.5, 0.5]) }),
            op("step", dict! { "inner" => 1 }),
            op("render", ()),
            reset(None, Dict::new()),
            op("step", dict! {}),
            op("describe", ()),
            op("close", ()),
        ]),
    })
}

fn describe(env: &unienv_remote::host::WorldEnv<sim::SimWorld>) -> Value {
    use unienv_remote::host::Env;
    let node = env.node();
    let doc = |s: Option<Space>| s.map_or(Value::Null, |s| s.to_value());
    let priorities: Dict = sim::PHASES
        .iter()
        .map(|(name, phase)| {
            let mut set = node.priorities(*phase);
            set.sort_unstable_by(|a, b| b.cmp(a));
            set.dedup();
            (*name, Value::list(set))
        })
        .collect();
    Value::from(dict! {
        "action_space" => doc(env.action_space()),
        "observation_space" => doc(env.observation_space()),
        "context_space" => doc(env.context_space()),
        "render_mode" => env.render_mode(),
        "render_fps" => env.render_fps(),
        "control_timestep" => env.control_timestep(),
        "batch_size" => env.batch_size(),
        "node_control_timestep" => node.control_timestep(),
        "node_update_timestep" => node.update_timestep(),
        "flags" => (node.has_reward(), node.has_termination_signal(), node.has_truncation_signal()),
        "priorities" => priorities,
    })
}

/// Runs a scenario's ops on the Rust composition: `(trace, results)` in the
/// Python script's format.
fn run_rust(scenario: &Value) -> (Vec<String>, Vec<Value>) {
    use unienv_remote::host::{Env, HostErrorKind, ResetArgs};
    let mut env = sim::build_env(scenario);
    let mut results = Vec::new();
    for op in scenario.get("ops").and_then(Value::as_seq).unwrap() {
        let [name, arg] = op.as_seq().unwrap() else {
            panic!("bad op")
        };
        let name = name.as_str().unwrap();
        let outcome = match name {
            "reset" => {
                let args = ResetArgs {
                    seed: arg.get("seed").and_then(Value::as_i64),
                    mask: None,
                    kwargs: arg.get("kwargs").and_then(Value::as_dict).unwrap().clone(),
                };
                env.reset(args).map(|r| r.into_value())
            }
            "step" => env.step(arg.clone()).map(|r| r.into_value()),
            "render" => env.render(),
            "describe" => Ok(describe(&env)),
            "close" => {
                env.close();
                Ok(Value::Null)
            }
            other => panic!("unknown op {other}"),
        };
        results.push(match outcome {
            Ok(value) => Value::tuple([Value::from(name), value]),
            Err(e) if e.kind() == HostErrorKind::InvalidArgument => {
                env.world_mut().trace.push("error(TypeError)".into());
                Value::tuple(["error", "TypeError"])
            }
            Err(e) => panic!("{name} failed: {e}"),
        });
    }
    (std::mem::take(&mut env.world_mut().trace), results)
}

#[test]
fn compositions_match_the_reference() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let scenarios = [
        ("root_node", scenario_root_node()),
        ("batched", scenario_batched()),
        ("plain_node", scenario_plain_node()),
        ("nested", scenario_nested()),
    ];
    let input = Value::list(scenarios.iter().map(|(_, s)| s.clone()));
    let out = decode(common::run_python(
        &python,
        "host_composition.py",
        &[],
        Some(&encode(&input)),
    ));
    let outputs = out.as_seq().unwrap();
    assert_eq!(outputs.len(), scenarios.len());
    for ((label, scenario), reference) in scenarios.iter().zip(outputs) {
        let (trace, results) = run_rust(scenario);
        let ref_trace: Vec<&str> = reference
            .get("trace")
            .and_then(Value::as_seq)
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for (i, (ours, theirs)) in trace.iter().zip(&ref_trace).enumerate() {
            assert_eq!(
                ours, theirs,
                "{label}: call {i} differs (Rust left, reference right)"
            );
        }
        let common_len = trace.len().min(ref_trace.len());
        assert_eq!(
            trace.len(),
            ref_trace.len(),
            "{label}: number of calls; extra calls: Rust {:?}, reference {:?}",
            &trace[common_len..],
            &ref_trace[common_len..]
        );
        let ref_results = reference.get("results").and_then(Value::as_seq).unwrap();
        assert_eq!(
            results.len(),
            ref_results.len(),
            "{label}: number of results"
        );
        for (i, (ours, theirs)) in results.iter().zip(ref_results).enumerate() {
            assert_eq!(
                ours, theirs,
                "{label}: result {i} differs (Rust left, reference right)"
            );
            assert_eq!(
                encode(ours),
                encode(theirs),
                "{label}: result {i} encodes differently"
            );
        }
    }
}
