//! WorldEnv: the worked example of the semantics document (§7) call by call,
//! and focused tests of every composer rule (§4).

use crate::support;

use support::{box1, Log, RecNode, RecWorld, Traced};
use unienv_remote::host::{
    find_node_mut, CombinedNode, Env, HostErrorKind, Phase, RenderModeArg, ResetArgs, Space,
    WorldEnv, RESERVED_PRIORITY,
};
use unienv_remote::{dict, DType, Dict, NdArray, Value};

/// Child `a` or `b` of the worked example (§7.1).
fn example_child(
    log: &Log,
    name: &str,
    variant_a: bool,
    termination: bool,
    truncation: bool,
) -> RecNode {
    let mut node = RecNode::new(log, name)
        .timesteps(Some(0.5), Some(0.25))
        .prio(Phase::Reset, &[1, 0])
        .prio(Phase::AfterReset, &[0])
        .prio(Phase::PreStep, &[2, 0])
        .prio(Phase::PostStep, &[0, -1])
        .context(box1(), format!("ctx_{name}"))
        .observation(box1(), format!("obs_{name}"))
        .action(box1())
        .reward(if name == "a" {
            Value::Float(1.5)
        } else {
            Value::Int(2)
        })
        .termination(termination)
        .truncation(truncation)
        .info(dict! { "who" => name })
        .render("rgb_array", format!("frame_{name}"));
    if variant_a {
        node = node
            .prio(Phase::Reload, &[1, 0])
            .prio(Phase::AfterReload, &[0]);
    }
    node
}

fn example_env(log: &Log, variant_a: bool) -> WorldEnv<RecWorld> {
    let a = example_child(log, "a", variant_a, false, true);
    let b = example_child(log, "b", variant_a, true, false);
    let root = CombinedNode::builder("root", vec![a.boxed(), b.boxed()])
        .direct_return(false)
        .build()
        .unwrap();
    let mut world = RecWorld::new(log, Some(0.125));
    world.step_dt = 0.125;
    WorldEnv::new(world, Box::new(Traced::new(log, "root", root))).unwrap()
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

const READ_RESET: &str = "
    root.get_context()
    a.get_context()
    b.get_context()
    root.get_observation()
    a.get_observation()
    b.get_observation()
    root.get_info()
    a.get_info()
    b.get_info()";

#[test]
fn worked_example_derived_values() {
    let log = Log::default();
    for variant_a in [true, false] {
        let env = example_env(&log, variant_a);
        assert_eq!(env.control_timestep(), Some(0.5));
        assert_eq!(env.update_dt(), Some(0.25));
        assert_eq!(env.n_update_substeps(), 2);
        assert_eq!(env.n_world_substeps(), 2);
        assert_eq!(env.render_fps(), Some(2));
        assert_eq!(env.render_mode().as_deref(), Some("dict"));
        assert_eq!(env.batch_size(), None);
        assert!(env.supports_reload());
        assert_eq!(
            env.metadata(),
            dict! { "render_modes" => Value::List(vec![]) }
        );
        let node = env.node();
        assert_eq!(node.control_timestep(), Some(0.5));
        assert_eq!(node.update_timestep(), Some(0.25));
        assert_eq!(
            node.supported_render_modes(),
            vec!["dict".to_owned(), "auto".to_owned()]
        );
        let (reload, after_reload): (Vec<i64>, Vec<i64>) = if variant_a {
            (vec![1, 0], vec![0, RESERVED_PRIORITY])
        } else {
            (vec![], vec![RESERVED_PRIORITY])
        };
        assert_eq!(node.priorities(Phase::Reload), reload);
        assert_eq!(node.priorities(Phase::AfterReload), after_reload);
        assert_eq!(node.priorities(Phase::Reset), vec![1, 0]);
        assert_eq!(
            node.priorities(Phase::AfterReset),
            vec![0, RESERVED_PRIORITY]
        );
        assert_eq!(node.priorities(Phase::PreStep), vec![2, 0]);
        assert_eq!(node.priorities(Phase::PostStep), vec![0, -1]);
        let dict_space = Space::dict([("a", box1()), ("b", box1())]);
        assert_eq!(env.action_space(), Some(dict_space.clone()));
        assert_eq!(env.observation_space(), Some(dict_space.clone()));
        assert_eq!(env.context_space(), Some(dict_space));
    }
    assert!(log.take().is_empty(), "construction makes no calls");
}

#[test]
fn worked_example_first_reset_variant_a() {
    let log = Log::default();
    let mut env = example_env(&log, true);
    let r = env.reset(ResetArgs::with_seed(7)).unwrap();
    let expected = lines(&format!(
        "
        world.reload(seed=7, mask=None)
        root.reload(priority=1, seed=7, mask=None)
        a.reload(priority=1, seed=7, mask=None)
        b.reload(priority=1, seed=7, mask=None)
        root.reload(priority=0, seed=7, mask=None)
        a.reload(priority=0, seed=7, mask=None)
        b.reload(priority=0, seed=7, mask=None)
        world.after_reload(seed=7, mask=None)
        root.after_reload(priority=0, mask=None)
        a.after_reload(priority=0, mask=None)
        b.after_reload(priority=0, mask=None)
        root.after_reload(priority=-1000000, mask=None)
        {READ_RESET}"
    ));
    assert_eq!(log.take(), expected);
    assert_eq!(
        r.context,
        Value::from(dict! { "a" => "ctx_a", "b" => "ctx_b" })
    );
    assert_eq!(
        r.observation,
        Value::from(dict! { "a" => "obs_a", "b" => "obs_b" })
    );
    assert_eq!(
        r.info,
        dict! { "a" => dict! { "who" => "a" }, "b" => dict! { "who" => "b" } }
    );
    assert!(!env.is_first_reset());
}

#[test]
fn worked_example_first_reset_variant_b() {
    let log = Log::default();
    let mut env = example_env(&log, false);
    env.reset(ResetArgs::with_seed(7)).unwrap();
    let expected = lines(&format!(
        "
        world.reload(seed=7, mask=None)
        world.after_reload(seed=7, mask=None)
        root.after_reload(priority=-1000000, mask=None)
        {READ_RESET}"
    ));
    assert_eq!(log.take(), expected);
}

#[test]
fn worked_example_later_reset_both_variants() {
    for variant_a in [true, false] {
        let log = Log::default();
        let mut env = example_env(&log, variant_a);
        env.reset(ResetArgs::with_seed(7)).unwrap();
        log.take();
        let r = env.reset(ResetArgs::with_seed(8)).unwrap();
        let expected = lines(&format!(
            "
            world.reset(seed=8, mask=None)
            root.reset(priority=1, seed=8, mask=None)
            a.reset(priority=1, seed=8, mask=None)
            b.reset(priority=1, seed=8, mask=None)
            root.reset(priority=0, seed=8, mask=None)
            a.reset(priority=0, seed=8, mask=None)
            b.reset(priority=0, seed=8, mask=None)
            world.after_reset(seed=8, mask=None)
            root.after_reset(priority=0, mask=None)
            a.after_reset(priority=0, mask=None)
            b.after_reset(priority=0, mask=None)
            root.after_reset(priority=-1000000, mask=None)
            {READ_RESET}"
        ));
        assert_eq!(log.take(), expected, "variant A: {variant_a}");
        assert_eq!(
            r.observation,
            Value::from(dict! { "a" => "obs_a", "b" => "obs_b" })
        );
    }
}

#[test]
fn worked_example_step_render_close_both_variants() {
    for variant_a in [true, false] {
        let log = Log::default();
        let mut env = example_env(&log, variant_a);
        env.reset(ResetArgs::with_seed(7)).unwrap();
        log.take();
        let s = env
            .step(Value::from(dict! { "a" => 1.0, "b" => 2.0 }))
            .unwrap();
        let substep = "
            root.pre_environment_step(0.25, priority=2)
            a.pre_environment_step(0.25, priority=2)
            b.pre_environment_step(0.25, priority=2)
            root.pre_environment_step(0.25, priority=0)
            a.pre_environment_step(0.25, priority=0)
            b.pre_environment_step(0.25, priority=0)
            world.step()
            world.step()
            root.post_environment_step(0.25, priority=0)
            a.post_environment_step(0.25, priority=0)
            b.post_environment_step(0.25, priority=0)
            root.post_environment_step(0.25, priority=-1)
            a.post_environment_step(0.25, priority=-1)
            b.post_environment_step(0.25, priority=-1)";
        // a: termination false, truncation true -> b's truncation is not read.
        let expected = lines(&format!(
            "
            root.set_next_action({{\"a\": 1.0, \"b\": 2.0}})
            a.set_next_action(1.0)
            b.set_next_action(2.0)
            {substep}
            {substep}
            root.get_observation()
            a.get_observation()
            b.get_observation()
            root.get_reward()
            a.get_reward()
            b.get_reward()
            root.get_termination()
            a.get_termination()
            b.get_termination()
            root.get_truncation()
            a.get_truncation()
            root.get_info()
            a.get_info()
            b.get_info()"
        ));
        assert_eq!(log.take(), expected, "variant A: {variant_a}");
        assert_eq!(
            s.observation,
            Value::from(dict! { "a" => "obs_a", "b" => "obs_b" })
        );
        assert!(matches!(s.reward, Value::Float(r) if r == 3.5));
        assert_eq!(s.terminated, Value::Bool(true));
        assert_eq!(s.truncated, Value::Bool(true));
        assert_eq!(
            s.info,
            dict! {
                "a" => dict! { "who" => "a" },
                "b" => dict! { "who" => "b" },
                "control_step_elapsed_time" => 0.5,
            }
        );

        let frame = env.render().unwrap();
        assert_eq!(
            frame,
            Value::from(dict! { "a" => "frame_a", "b" => "frame_b" })
        );
        assert_eq!(log.take(), lines("root.render()\na.render()\nb.render()"));
        env.close();
        assert_eq!(
            log.take(),
            lines("root.close()\na.close()\nb.close()\nworld.close()")
        );
    }
}

/// §7.5: child A (control 0.5, update 0.25) and B (control 1.0, update 0.5)
/// on a 0.125 world.
#[test]
fn multi_rate_illustration() {
    let log = Log::default();
    let child = |name: &str, control: f64, update: f64| {
        RecNode::new(&log, name)
            .timesteps(Some(control), Some(update))
            .prio(Phase::PreStep, &[0])
            .prio(Phase::PostStep, &[0])
            .action(box1())
            .boxed()
    };
    let mut world = RecWorld::new(&log, Some(0.125));
    world.step_dt = 0.125;
    let mut env = WorldEnv::from_nodes(
        world,
        vec![child("A", 0.5, 0.25), child("B", 1.0, 0.5)],
        "auto",
    )
    .unwrap();
    assert_eq!(env.n_update_substeps(), 2);
    assert_eq!(env.n_world_substeps(), 2);
    env.reset(ResetArgs::default()).unwrap();
    log.take();

    let step1 = "
        A.set_next_action(1)
        B.set_next_action(1)
        A.pre_environment_step(0.25, priority=0)
        B.pre_environment_step(0.5, priority=0)
        world.step()
        world.step()
        A.post_environment_step(0.25, priority=0)
        B.post_environment_step(0.5, priority=0)
        A.pre_environment_step(0.25, priority=0)
        world.step()
        world.step()
        A.post_environment_step(0.25, priority=0)
        A.get_info()
        B.get_info()";
    env.step(Value::from(dict! { "A" => 1, "B" => 1 })).unwrap();
    assert_eq!(log.take(), lines(step1));

    // Step 2 is B's off-tick: its new action is cached, delivered on step 3.
    env.step(Value::from(dict! { "A" => 2, "B" => 2 })).unwrap();
    let step2 = log.take();
    assert_eq!(step2[0], "A.set_next_action(2)");
    assert!(!step2.iter().any(|l| l.starts_with("B.set_next_action")));
    assert_eq!(step2.iter().filter(|l| l.starts_with("B.pre")).count(), 1);
    assert_eq!(step2.iter().filter(|l| l.starts_with("A.pre")).count(), 2);
    assert_eq!(step2.iter().filter(|l| *l == "world.step()").count(), 4);

    // Step 3: B's tick; only A is given an action, B gets its held action 2.
    env.step(Value::from(dict! { "A" => 3 })).unwrap();
    let step3 = log.take_matching(&["A.set", "B.set"]);
    assert_eq!(step3, lines("A.set_next_action(3)\nB.set_next_action(2)"));

    // After a reset the counters and the cache restart: B is on its tick but
    // has no action yet, so it is not called.
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    env.step(Value::from(dict! { "A" => 4 })).unwrap();
    assert_eq!(
        log.take_matching(&["A.set", "B.set"]),
        lines("A.set_next_action(4)")
    );
    env.step(Value::from(dict! { "B" => 5 })).unwrap();
    assert_eq!(
        log.take_matching(&["A.set", "B.set"]),
        lines("A.set_next_action(4)")
    );
    env.step(Value::from(dict! {})).unwrap();
    assert_eq!(
        log.take_matching(&["A.set", "B.set"]),
        lines("A.set_next_action(4)\nB.set_next_action(5)")
    );
}

#[test]
fn plain_root_node_uses_its_own_sorted_priorities() {
    let log = Log::default();
    let node = RecNode::new(&log, "solo")
        .prio(Phase::Reset, &[-3, 5, 0, 5])
        .prio(Phase::AfterReset, &[2])
        .prio(Phase::Reload, &[1])
        .observation(box1(), 1.0);
    let mut env = WorldEnv::new(RecWorld::new(&log, None), node.boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    // No reserved priority for a plain root, and after_reload is empty.
    assert_eq!(
        log.take(),
        lines(
            "world.reload(seed=None, mask=None)
             solo.reload(priority=1, seed=None, mask=None)
             world.after_reload(seed=None, mask=None)
             solo.get_observation()
             solo.get_info()"
        )
    );
    env.reset(ResetArgs::default()).unwrap();
    assert_eq!(
        log.take(),
        lines(
            "world.reset(seed=None, mask=None)
             solo.reset(priority=5, seed=None, mask=None)
             solo.reset(priority=0, seed=None, mask=None)
             solo.reset(priority=-3, seed=None, mask=None)
             world.after_reset(seed=None, mask=None)
             solo.after_reset(priority=2, mask=None)
             solo.get_observation()
             solo.get_info()"
        )
    );
}

#[test]
fn reload_keyword_takes_the_reload_path_without_being_forwarded() {
    let log = Log::default();
    let node = RecNode::new(&log, "n")
        .prio(Phase::Reload, &[0])
        .prio(Phase::Reset, &[0]);
    let mut env = WorldEnv::new(RecWorld::new(&log, None), node.boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    let args = ResetArgs {
        seed: Some(1),
        mask: None,
        kwargs: dict! { "reload" => true, "level" => 3 },
    };
    let r = env.reset(args).unwrap();
    assert_eq!(
        log.take(),
        lines(
            "world.reload(seed=1, mask=None, level=3)
             n.reload(priority=0, seed=1, mask=None, level=3)
             world.after_reload(seed=1, mask=None, level=3)
             n.get_info()"
        )
    );
    // No context or observation space: both None; a None info becomes {}.
    assert_eq!(r.context, Value::Null);
    assert_eq!(r.observation, Value::Null);
    assert_eq!(r.info, Dict::new());
    // A falsy reload flag is a plain reset.
    env.reset(ResetArgs {
        kwargs: dict! { "reload" => 0 },
        ..ResetArgs::default()
    })
    .unwrap();
    assert_eq!(log.take()[0], "world.reset(seed=None, mask=None)");
    // Env::reload always reloads.
    env.reload(ResetArgs::default()).unwrap();
    assert_eq!(log.take()[0], "world.reload(seed=None, mask=None)");
}

#[test]
fn first_reset_flag_is_cleared_only_by_a_successful_reload() {
    let log = Log::default();
    let mut world = RecWorld::new(&log, None);
    world.fail_after_reload = 1;
    let mut env = WorldEnv::new(world, RecNode::new(&log, "n").boxed()).unwrap();
    assert!(env.reset(ResetArgs::default()).is_err());
    assert!(env.is_first_reset());
    log.take();
    env.reset(ResetArgs::default()).unwrap();
    assert_eq!(log.take()[0], "world.reload(seed=None, mask=None)");
    assert!(!env.is_first_reset());
    env.reset(ResetArgs::default()).unwrap();
    assert_eq!(log.take()[0], "world.reset(seed=None, mask=None)");
}

#[test]
fn incompatible_timesteps_are_rejected() {
    let log = Log::default();
    // 0.3 % 0.1 != 0 in floating point.
    let node = RecNode::new(&log, "n").timesteps(Some(0.3), None);
    let err = WorldEnv::new(RecWorld::new(&log, Some(0.1)), node.boxed())
        .err()
        .unwrap();
    assert!(err.message().contains("Control timestep 0.3"), "{err}");
    // The control timestep fits but the update timestep does not.
    let node = RecNode::new(&log, "n").timesteps(Some(0.5), Some(0.2));
    let err = WorldEnv::new(RecWorld::new(&log, Some(0.125)), node.boxed())
        .err()
        .unwrap();
    assert!(err.message().contains("Update timestep 0.2"), "{err}");
    // 0.5 % 0.125 == 0 is fine; with no world timestep anything goes.
    let node = RecNode::new(&log, "n").timesteps(Some(0.5), None);
    assert!(WorldEnv::new(RecWorld::new(&log, Some(0.125)), node.boxed()).is_ok());
    let node = RecNode::new(&log, "n").timesteps(Some(0.3), None);
    assert!(WorldEnv::new(RecWorld::new(&log, None), node.boxed()).is_ok());
}

#[test]
fn n_update_substeps_can_be_zero() {
    let log = Log::default();
    // update 1.0 > control 0.5: round(0.5) == 0 (half to even).
    let node = RecNode::new(&log, "n")
        .timesteps(Some(0.5), Some(1.0))
        .prio(Phase::PreStep, &[0])
        .prio(Phase::PostStep, &[0]);
    let mut env = WorldEnv::new(RecWorld::new(&log, Some(0.5)), node.boxed()).unwrap();
    assert_eq!(env.n_update_substeps(), 0);
    assert_eq!(env.n_world_substeps(), 2);
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    let s = env.step(Value::Null).unwrap();
    assert_eq!(log.take(), lines("n.get_info()"));
    assert_eq!(s.info, dict! { "control_step_elapsed_time" => () });
    assert!(matches!(s.reward, Value::Float(r) if r == 0.0));
    assert_eq!(s.terminated, Value::Bool(false));
    assert_eq!(s.truncated, Value::Bool(false));
    // round(2.5) == 2 and round(1.5) == 2.
    let node = RecNode::new(&log, "n").timesteps(Some(1.25), Some(0.5));
    let env = WorldEnv::new(RecWorld::new(&log, Some(0.25)), node.boxed()).unwrap();
    assert_eq!((env.n_update_substeps(), env.n_world_substeps()), (2, 2));
    let node = RecNode::new(&log, "n").timesteps(Some(0.75), Some(0.5));
    let env = WorldEnv::new(RecWorld::new(&log, Some(0.25)), node.boxed()).unwrap();
    assert_eq!(env.n_update_substeps(), 2);
}

#[test]
fn python_falsy_timesteps() {
    let log = Log::default();
    // An update timestep of 0.0 counts as missing for update_dt / control_dt,
    // but it still makes round(0.0 / 0.125) == 0 world substeps.
    let node = RecNode::new(&log, "n")
        .timesteps(None, Some(0.0))
        .prio(Phase::PreStep, &[0]);
    let mut world = RecWorld::new(&log, Some(0.125));
    world.step_dt = 0.125;
    let mut env = WorldEnv::new(world, node.boxed()).unwrap();
    assert_eq!(env.update_dt(), Some(0.125));
    assert_eq!(env.control_timestep(), Some(0.125));
    assert_eq!(env.render_fps(), Some(8));
    assert_eq!((env.n_update_substeps(), env.n_world_substeps()), (1, 0));
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    env.step(Value::Null).unwrap();
    assert_eq!(
        log.take(),
        lines("n.pre_environment_step(0.125, priority=0)\nn.get_info()")
    );

    // A control timestep of 0.0 falls back to the update timestep.
    let node = RecNode::new(&log, "n").timesteps(Some(0.0), Some(0.25));
    let env = WorldEnv::new(RecWorld::new(&log, Some(0.125)), node.boxed()).unwrap();
    assert_eq!(env.control_timestep(), Some(0.25));
    assert_eq!(env.n_update_substeps(), 0);

    // No timesteps at all: no control timestep, no render fps.
    let env = WorldEnv::new(RecWorld::new(&log, None), RecNode::new(&log, "n").boxed()).unwrap();
    assert_eq!(env.control_timestep(), None);
    assert_eq!(env.render_fps(), None);
    assert_eq!((env.n_update_substeps(), env.n_world_substeps()), (1, 1));
}

#[test]
fn post_dt_falls_back_to_the_last_world_step_and_elapsed_sums() {
    let log = Log::default();
    // Node with only a control timestep; world asynchronous.
    let node = RecNode::new(&log, "n")
        .prio(Phase::PreStep, &[0])
        .prio(Phase::PostStep, &[0])
        .info(dict! { "control_step_elapsed_time" => "mine", "k" => 1 });
    let mut world = RecWorld::new(&log, None);
    world.step_dt = 0.3;
    let mut env = WorldEnv::new(world, node.boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    let s = env.step(Value::Null).unwrap();
    assert_eq!(
        log.take(),
        lines(
            "n.pre_environment_step(None, priority=0)
             world.step()
             n.post_environment_step(0.3, priority=0)
             n.get_info()"
        )
    );
    // The node's key keeps its position and is overwritten.
    assert_eq!(
        s.info,
        dict! { "control_step_elapsed_time" => 0.3, "k" => 1 }
    );

    // Elapsed time is the sum of every world step of the control step.
    let node = RecNode::new(&log, "n").timesteps(Some(0.75), Some(0.25));
    let mut world = RecWorld::new(&log, Some(0.125));
    world.step_dt = 0.1;
    let mut env = WorldEnv::new(world, node.boxed()).unwrap();
    assert_eq!((env.n_update_substeps(), env.n_world_substeps()), (3, 2));
    env.reset(ResetArgs::default()).unwrap();
    let s = env.step(Value::Null).unwrap();
    let expected = (0..6).fold(None, |acc: Option<f64>, _| {
        Some(acc.map_or(0.1, |e| e + 0.1))
    });
    assert_eq!(
        s.info.get("control_step_elapsed_time"),
        Some(&Value::from(expected))
    );
}

#[test]
fn action_is_ignored_without_an_action_space() {
    let log = Log::default();
    let mut env =
        WorldEnv::new(RecWorld::new(&log, None), RecNode::new(&log, "n").boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    env.step(Value::from(42)).unwrap();
    assert!(!log.take().iter().any(|l| l.contains("set_next_action")));

    let node = RecNode::new(&log, "n").action(box1());
    let mut env = WorldEnv::new(RecWorld::new(&log, None), node.boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    env.step(Value::from(42)).unwrap();
    assert_eq!(log.take()[0], "n.set_next_action(42)");
}

#[test]
fn batched_fallbacks_are_zero_arrays() {
    let log = Log::default();
    let mut world = RecWorld::new(&log, None);
    world.batch_size = Some(3);
    let mut env = WorldEnv::new(world, RecNode::new(&log, "n").boxed()).unwrap();
    assert_eq!(env.batch_size(), Some(3));
    env.reset(ResetArgs::default()).unwrap();
    let s = env.step(Value::Null).unwrap();
    assert_eq!(
        s.reward,
        Value::Array(NdArray::zeros(DType::F64, vec![3]).unwrap())
    );
    assert_eq!(
        s.terminated,
        Value::Array(NdArray::from_vec(vec![false; 3]))
    );
    assert_eq!(s.truncated, Value::Array(NdArray::from_vec(vec![false; 3])));
}

#[test]
fn node_flags_select_the_getters() {
    let log = Log::default();
    let node = RecNode::new(&log, "n")
        .reward(2)
        .termination(1)
        .truncation(Value::Null);
    let mut env = WorldEnv::new(RecWorld::new(&log, None), node.boxed()).unwrap();
    env.reset(ResetArgs::default()).unwrap();
    log.take();
    let s = env.step(Value::Null).unwrap();
    // The root's values are returned as they are (no conversion).
    assert_eq!(s.reward, Value::Int(2));
    assert_eq!(s.terminated, Value::Int(1));
    assert_eq!(s.truncated, Value::Null);
    assert_eq!(
        log.take(),
        lines(
            "world.step()\nn.get_reward()\nn.get_termination()\nn.get_truncation()\nn.get_info()"
        )
    );
}

#[test]
fn render_only_when_the_node_can_render() {
    let log = Log::default();
    let mut env =
        WorldEnv::new(RecWorld::new(&log, None), RecNode::new(&log, "n").boxed()).unwrap();
    assert_eq!(env.render().unwrap(), Value::Null);
    assert!(log.take().is_empty());
    let node = RecNode::new(&log, "n").render("rgb_array", "img");
    let mut env = WorldEnv::new(RecWorld::new(&log, None), node.boxed()).unwrap();
    assert_eq!(env.render_mode().as_deref(), Some("rgb_array"));
    assert_eq!(env.render().unwrap(), Value::from("img"));
}

#[test]
fn from_nodes_wraps_in_a_combined_node() {
    let log = Log::default();
    let a = RecNode::new(&log, "a")
        .render("rgb_array", "fa")
        .observation(box1(), 1.0);
    let b = RecNode::new(&log, "b").render("depth", "fb");
    let env = WorldEnv::from_nodes(
        RecWorld::new(&log, None),
        vec![a.boxed(), b.boxed()],
        "auto",
    )
    .unwrap();
    assert_eq!(env.node().name(), "combined");
    assert_eq!(env.render_mode().as_deref(), Some("dict"));
    // direct_return = true: the only observation passes through.
    assert_eq!(env.observation_space(), Some(box1()));
    let a = RecNode::new(&log, "a").render("rgb_array", "fa");
    let env = WorldEnv::from_nodes(
        RecWorld::new(&log, None),
        vec![a.boxed()],
        RenderModeArg::Custom(None),
    )
    .unwrap();
    assert_eq!(env.render_mode(), None);
    assert!(WorldEnv::from_nodes(RecWorld::new(&log, None), vec![], "auto").is_err());
}

#[test]
fn extra_keyword_arguments_reach_the_world_and_are_checked_by_the_combined_node() {
    let log = Log::default();
    let a = RecNode::new(&log, "a")
        .prio(Phase::Reset, &[0])
        .prio(Phase::Reload, &[0]);
    let b = RecNode::new(&log, "b").prio(Phase::Reset, &[0]);
    let mut env = WorldEnv::from_nodes(
        RecWorld::new(&log, None),
        vec![a.boxed(), b.boxed()],
        "auto",
    )
    .unwrap();
    let pernode = dict! { "pernode_kwargs" => dict! { "a" => dict! { "speed" => 2 } } };
    env.reset(ResetArgs {
        kwargs: pernode.clone(),
        ..ResetArgs::default()
    })
    .unwrap();
    assert_eq!(
        log.take_matching(&["world.reload", "a.re", "b.re"]),
        lines(
            "world.reload(seed=None, mask=None, pernode_kwargs={\"a\": {\"speed\": 2}})
             a.reload(priority=0, seed=None, mask=None, speed=2)"
        )
    );
    env.reset(ResetArgs {
        kwargs: pernode,
        ..ResetArgs::default()
    })
    .unwrap();
    assert_eq!(
        log.take_matching(&["world.reset", "world.after_reset", "a.re", "b.re"]),
        lines(
            "world.reset(seed=None, mask=None, pernode_kwargs={\"a\": {\"speed\": 2}})
             a.reset(priority=0, seed=None, mask=None, speed=2)
             b.reset(priority=0, seed=None, mask=None)
             world.after_reset(seed=None, mask=None, pernode_kwargs={\"a\": {\"speed\": 2}})"
        )
    );
    // Any other keyword reaches the world, then fails at the combined node.
    let err = env
        .reset(ResetArgs {
            kwargs: dict! { "level" => 1 },
            ..ResetArgs::default()
        })
        .unwrap_err();
    assert_eq!(err.kind(), HostErrorKind::InvalidArgument);
    assert!(
        err.message()
            .contains("unexpected keyword argument 'level'"),
        "{err}"
    );
    assert_eq!(
        log.take(),
        lines("world.reset(seed=None, mask=None, level=1)")
    );
}

#[test]
fn close_closes_the_tree_then_the_world() {
    let log = Log::default();
    let root = CombinedNode::builder(
        "root",
        vec![
            RecNode::new(&log, "a").boxed(),
            RecNode::new(&log, "b").boxed(),
        ],
    )
    .root_node(RecNode::new(&log, "r").boxed())
    .build()
    .unwrap();
    let mut env = WorldEnv::new(RecWorld::new(&log, None), Box::new(root)).unwrap();
    env.close();
    assert_eq!(
        log.take(),
        lines("a.close()\nb.close()\nr.close()\nworld.close()")
    );
}

#[test]
fn world_and_any_node_are_reachable_together() {
    let log = Log::default();
    let inner = CombinedNode::new("inner", vec![RecNode::new(&log, "leaf").boxed()]).unwrap();
    let root = CombinedNode::new(
        "root",
        vec![Box::new(inner), RecNode::new(&log, "b").boxed()],
    )
    .unwrap();
    let mut env = WorldEnv::new(RecWorld::new(&log, Some(0.1)), Box::new(root)).unwrap();
    assert_eq!(
        env.get_node(&["inner", "leaf"]).map(|n| n.name()),
        Some("leaf")
    );
    assert_eq!(env.get_node(&[]).map(|n| n.name()), Some("root"));
    assert!(env.get_node(&["b", "x"]).is_none());
    assert!(env.get_node(&["nope"]).is_none());
    let (world, root) = env.parts_mut();
    let leaf = find_node_mut(root, &["inner", "leaf"]).unwrap();
    leaf.pre_environment_step(world, Some(0.1), 7).unwrap();
    world.step_dt = 0.5;
    assert_eq!(
        log.take(),
        lines("leaf.pre_environment_step(0.1, priority=7)")
    );
    assert_eq!(env.world().step_dt, 0.5);
    env.world_mut().step_dt = 0.25;
    assert_eq!(env.node_mut().child_count(), 2);
}
