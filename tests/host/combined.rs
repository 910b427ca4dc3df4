//! CombinedNode: every aggregation and dispatch rule of the semantics
//! document (§5), tested on detached trees (`W = ()`) and recording worlds.

use crate::support;

use support::{box1, cell, Log, RecNode, RecWorld};
use unienv_remote::host::{
    CombinedNode, HostErrorKind, Node, Phase, RenderModeArg, ResetArgs, Space, RESERVED_PRIORITY,
};
use unienv_remote::{dict, DType, Dict, NdArray, Value};

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

fn combined(children: Vec<RecNode>) -> CombinedNode {
    CombinedNode::new("root", children.into_iter().map(RecNode::boxed).collect()).unwrap()
}

fn box_n(n: usize) -> Space {
    Space::unbounded_f32(vec![n])
}

#[test]
fn validation() {
    let log = Log::default();
    let err = CombinedNode::<()>::new("root", vec![]).err().unwrap();
    assert_eq!(err.kind(), HostErrorKind::InvalidArgument);
    let dup = vec![
        RecNode::new(&log, "a").boxed(),
        RecNode::new(&log, "a").boxed(),
    ];
    assert!(CombinedNode::<()>::new("root", dup)
        .err()
        .unwrap()
        .message()
        .contains("unique"));
    let unnamed = vec![RecNode::new(&log, "").boxed()];
    assert!(CombinedNode::<()>::new("root", unnamed).is_err());
    let root = CombinedNode::<()>::builder("root", vec![RecNode::new(&log, "a").boxed()])
        .root_node(RecNode::new(&log, "").boxed())
        .build();
    assert!(root.is_err());
    // Update timesteps must be integer multiples of the smallest (1e-9).
    let bad = vec![
        RecNode::new(&log, "a").timesteps(None, Some(0.2)).boxed(),
        RecNode::new(&log, "b").timesteps(None, Some(0.5)).boxed(),
    ];
    assert!(CombinedNode::<()>::new("root", bad)
        .err()
        .unwrap()
        .message()
        .contains("update_timestep"));
    let near = vec![
        RecNode::new(&log, "a").timesteps(None, Some(0.1)).boxed(),
        RecNode::new(&log, "b").timesteps(None, Some(0.3)).boxed(), // 0.3 / 0.1 = 2.9999999999999996
    ];
    assert!(CombinedNode::<()>::new("root", near).is_ok());
    // The largest control timestep must be a multiple of every other one.
    let bad = vec![
        RecNode::new(&log, "a")
            .timesteps(Some(0.4), Some(0.1))
            .boxed(),
        RecNode::new(&log, "b")
            .timesteps(Some(1.0), Some(0.1))
            .boxed(),
    ];
    assert!(CombinedNode::<()>::new("root", bad)
        .err()
        .unwrap()
        .message()
        .contains("Largest control"));
    assert!(log.take().is_empty());
}

#[test]
fn timesteps_ratios_and_defaults() {
    let log = Log::default();
    let node = combined(vec![
        RecNode::new(&log, "a").timesteps(Some(1.0), None),
        RecNode::new(&log, "b").timesteps(Some(0.5), Some(0.25)),
        RecNode::new(&log, "c"),
    ]);
    assert_eq!(node.control_timestep(), Some(0.5));
    assert_eq!(node.update_timestep(), Some(0.25));
    assert_eq!(node.effective_update_timestep(), Some(0.25));
    assert!(!node.has_reward() && !node.has_termination_signal() && !node.has_truncation_signal());
    assert_eq!(node.render_mode(), None);
    assert_eq!(node.context_space(), None);
    assert_eq!(node.child_count(), 3);
    assert_eq!(node.child(1).map(|c| c.name()), Some("b"));
    assert!(node.child(3).is_none());
    assert_eq!(node.priority_order(Phase::AfterReset), &[RESERVED_PRIORITY]);
    assert_eq!(node.priority_order(Phase::Reset), &[] as &[i64]);
    let none = combined(vec![RecNode::new(&log, "x")]);
    assert_eq!(
        (none.control_timestep(), none.update_timestep()),
        (None, None)
    );
}

#[test]
fn direct_return_applies_per_channel() {
    let log = Log::default();
    let make = || {
        vec![
            RecNode::new(&log, "b")
                .observation(box_n(2), "obs_b")
                .action(box_n(2)),
            RecNode::new(&log, "a")
                .action(box_n(1))
                .context(box_n(3), "ctx_a"),
        ]
    };
    let mut node = combined(make());
    // One observation and one context contributor: passed through unwrapped;
    // two action contributors: a dict space with sorted keys.
    assert_eq!(node.observation_space(), Some(box_n(2)));
    assert_eq!(node.context_space(), Some(box_n(3)));
    let action = node.action_space().unwrap();
    assert_eq!(action, Space::dict([("a", box_n(1)), ("b", box_n(2))]));
    let Space::Dict(d) = &action else { panic!() };
    assert_eq!(d.entries()[0].0, "a");
    assert_eq!(node.get_observation(&mut ()).unwrap(), Value::from("obs_b"));
    assert_eq!(node.get_context(&mut ()).unwrap(), Value::from("ctx_a"));

    let mut node =
        CombinedNode::<()>::builder("root", make().into_iter().map(RecNode::boxed).collect())
            .direct_return(false)
            .build()
            .unwrap();
    assert_eq!(
        node.observation_space(),
        Some(Space::dict([("b", box_n(2))]))
    );
    assert_eq!(node.context_space(), Some(Space::dict([("a", box_n(3))])));
    assert_eq!(
        node.get_observation(&mut ()).unwrap(),
        Value::from(dict! { "b" => "obs_b" })
    );
    // Data dicts keep constructor order, unlike the sorted space keys.
    let mut node = combined(vec![
        RecNode::new(&log, "z").observation(box1(), 1),
        RecNode::new(&log, "m").observation(box1(), 2),
    ]);
    let obs = node.get_observation(&mut ()).unwrap();
    assert_eq!(
        obs.as_dict().unwrap().keys().collect::<Vec<_>>(),
        vec!["z", "m"]
    );
    let Some(Space::Dict(d)) = node.observation_space() else {
        panic!()
    };
    assert_eq!(
        d.entries()
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        vec!["m", "z"]
    );
    // Getting a channel without a space is an error.
    assert!(node.get_context(&mut ()).is_err());
}

#[test]
fn root_node_merges_at_the_top_level() {
    let log = Log::default();
    let root_obs = Space::dict([("score", box1()), ("goal", box_n(2))]);
    let mut node = CombinedNode::<()>::builder(
        "task",
        vec![RecNode::new(&log, "arm")
            .observation(box_n(3), "arm_obs")
            .action(box_n(3))
            .info(1)
            .boxed()],
    )
    .root_node(
        RecNode::new(&log, "scorer")
            .observation(root_obs, dict! { "score" => 1.0, "goal" => "g" })
            .action(Space::dict([("mode", box1())]))
            .render("rgb_array", dict! { "top" => "t" })
            .info(2)
            .reward(1)
            .boxed(),
    )
    .build()
    .unwrap();
    assert_eq!(
        node.observation_space(),
        Some(Space::dict([
            ("arm", box_n(3)),
            ("goal", box_n(2)),
            ("score", box1())
        ]))
    );
    assert_eq!(
        node.action_space(),
        Some(Space::dict([("arm", box_n(3)), ("mode", box1())]))
    );
    assert!(node.has_reward());
    // The root node is not a public child and is never resolved by name.
    assert_eq!(node.child_count(), 1);
    assert!(node.get_node(&["scorer"]).is_none());
    assert_eq!(node.get_node(&["arm"]).map(|n| n.name()), Some("arm"));
    assert_eq!(node.root_node().map(|n| n.name()), Some("scorer"));
    assert!(node.root_node_mut().is_some());

    let obs = node.get_observation(&mut ()).unwrap();
    assert_eq!(
        obs,
        Value::from(dict! { "arm" => "arm_obs", "score" => 1.0, "goal" => "g" })
    );
    // Info and render use the root's real name.
    assert_eq!(
        node.get_info(&mut ()).unwrap(),
        Value::from(dict! { "arm" => 1, "scorer" => 2 })
    );
    // The only renderable member is the root: its frame is returned directly.
    assert_eq!(node.render_mode().as_deref(), Some("rgb_array"));
    assert_eq!(
        node.render(&mut ()).unwrap(),
        Value::from(dict! { "top" => "t" })
    );

    // Actions: child names route to children, every other key to the root.
    log.take();
    node.set_next_action(
        &mut (),
        Value::from(dict! { "arm" => 1, "mode" => 2, "extra" => 3 }),
    )
    .unwrap();
    assert_eq!(
        log.take(),
        lines("arm.set_next_action(1)\nscorer.set_next_action({\"mode\": 2, \"extra\": 3})")
    );
    // A child-only action re-delivers the root's held action.
    node.set_next_action(&mut (), Value::from(dict! { "arm" => 4 }))
        .unwrap();
    assert_eq!(
        log.take(),
        lines("arm.set_next_action(4)\nscorer.set_next_action({\"mode\": 2, \"extra\": 3})")
    );
    node.close(&mut ());
    assert_eq!(log.take(), lines("arm.close()\nscorer.close()"));
}

#[test]
fn root_node_as_sole_contributor() {
    let log = Log::default();
    let build = |direct: bool| {
        CombinedNode::<()>::builder("task", vec![RecNode::new(&log, "cam").boxed()])
            .direct_return(direct)
            .root_node(
                RecNode::new(&log, "r")
                    .observation(box1(), 5)
                    .action(box1())
                    .boxed(),
            )
            .build()
            .unwrap()
    };
    let mut node = build(true);
    assert_eq!(node.observation_space(), Some(box1()));
    assert_eq!(node.action_space(), Some(box1()));
    assert_eq!(node.get_observation(&mut ()).unwrap(), Value::Int(5));
    log.take();
    node.set_next_action(&mut (), Value::Int(9)).unwrap();
    assert_eq!(log.take(), lines("r.set_next_action(9)"));

    let mut node = build(false);
    assert_eq!(node.observation_space(), Some(Space::dict([("", box1())])));
    assert_eq!(
        node.get_observation(&mut ()).unwrap(),
        Value::from(dict! { "" => 5 })
    );
    log.take();
    node.set_next_action(&mut (), Value::from(dict! { "" => 7 }))
        .unwrap();
    assert_eq!(log.take(), lines("r.set_next_action(7)"));
    // Other keys go to the root as a dict, but an explicit "" entry wins.
    node.set_next_action(&mut (), Value::from(dict! { "x" => 1 }))
        .unwrap();
    assert_eq!(log.take(), lines("r.set_next_action({\"x\": 1})"));
    node.set_next_action(&mut (), Value::from(dict! { "x" => 1, "" => 8 }))
        .unwrap();
    assert_eq!(log.take(), lines("r.set_next_action(8)"));
}

#[test]
fn root_node_space_conflicts() {
    let log = Log::default();
    let not_dict = CombinedNode::<()>::builder(
        "t",
        vec![RecNode::new(&log, "a").observation(box1(), 1).boxed()],
    )
    .root_node(RecNode::new(&log, "r").observation(box1(), 2).boxed())
    .build();
    assert!(not_dict
        .err()
        .unwrap()
        .message()
        .contains("must expose a DictSpace observation space"));
    let colliding = CombinedNode::<()>::builder(
        "t",
        vec![RecNode::new(&log, "a").context(box1(), 1).boxed()],
    )
    .root_node(
        RecNode::new(&log, "r")
            .context(Space::dict([("a", box1())]), 2)
            .boxed(),
    )
    .build();
    let err = colliding.err().unwrap();
    assert_eq!(err.kind(), HostErrorKind::InvalidArgument);
    assert!(err.message().contains("Root context key 'a'"), "{err}");
    // Mixed data: the root must return a mapping.
    let mut node = CombinedNode::<()>::builder(
        "t",
        vec![RecNode::new(&log, "a").observation(box1(), 1).boxed()],
    )
    .root_node(
        RecNode::new(&log, "r")
            .observation(Space::dict([("k", box1())]), 3)
            .boxed(),
    )
    .build()
    .unwrap();
    assert!(node.get_observation(&mut ()).is_err());
}

#[test]
fn hold_last_actions_with_ratios_and_partial_mappings() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "fast")
            .timesteps(Some(0.1), None)
            .action(box1()),
        RecNode::new(&log, "slow")
            .timesteps(Some(0.3), None)
            .action(box1()),
        RecNode::new(&log, "passive").timesteps(Some(0.1), None),
    ]);
    let act = |node: &mut CombinedNode, v: Dict| {
        node.set_next_action(&mut (), Value::from(v)).unwrap();
        log.take()
    };
    // Unknown keys (and keys of children without actions) are ignored; missing keys are allowed.
    assert_eq!(
        act(
            &mut node,
            dict! { "fast" => 1, "ghost" => 0, "passive" => 0 }
        ),
        lines("fast.set_next_action(1)")
    );
    assert_eq!(
        act(&mut node, dict! { "slow" => 2 }),
        lines("fast.set_next_action(1)")
    );
    assert_eq!(act(&mut node, dict! {}), lines("fast.set_next_action(1)"));
    // Tick 4 = slow's tick (ratio 3): it receives its held action.
    assert_eq!(
        act(&mut node, dict! { "fast" => 3 }),
        lines("fast.set_next_action(3)\nslow.set_next_action(2)")
    );
    assert_eq!(
        act(&mut node, dict! { "slow" => 4 }),
        lines("fast.set_next_action(3)")
    );
    // after_reset at the top priority clears the cache and the counters.
    node.after_reset(&mut (), RESERVED_PRIORITY, None).unwrap();
    assert_eq!(
        act(&mut node, dict! { "slow" => 5 }),
        lines("slow.set_next_action(5)")
    );
    // Non-mappings are rejected when there is no direct action child.
    assert!(node.set_next_action(&mut (), Value::Int(1)).is_err());

    // Without an action space only None is accepted.
    let mut quiet = combined(vec![RecNode::new(&log, "q")]);
    assert!(quiet.set_next_action(&mut (), Value::Null).is_ok());
    assert!(quiet.set_next_action(&mut (), Value::Int(1)).is_err());
}

#[test]
fn step_dispatch_uses_each_childs_own_dt_and_one_shared_counter() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "a")
            .timesteps(None, Some(0.25))
            .prio(Phase::PreStep, &[1])
            .prio(Phase::PostStep, &[0]),
        RecNode::new(&log, "b")
            .timesteps(None, Some(0.5))
            .prio(Phase::PostStep, &[0]),
        RecNode::new(&log, "c").prio(Phase::PreStep, &[1]),
    ]);
    for _ in 0..2 {
        node.pre_environment_step(&mut (), Some(99.0), 1).unwrap();
        node.post_environment_step(&mut (), Some(99.0), 0).unwrap();
    }
    // c has no timestep: it receives None whatever dt the caller passed.
    assert_eq!(
        log.take(),
        lines(
            "a.pre_environment_step(0.25, priority=1)
             c.pre_environment_step(None, priority=1)
             a.post_environment_step(0.25, priority=0)
             b.post_environment_step(0.5, priority=0)
             a.pre_environment_step(0.25, priority=1)
             c.pre_environment_step(None, priority=1)
             a.post_environment_step(0.25, priority=0)"
        )
    );
    // A priority nobody registered dispatches nothing and does not count.
    node.pre_environment_step(&mut (), None, 5).unwrap();
    node.post_environment_step(&mut (), None, 0).unwrap();
    assert_eq!(
        log.take(),
        lines("a.post_environment_step(0.25, priority=0)")
    );

    // Without pre-step priorities the counter advances at the first post-step priority.
    let mut node = combined(vec![
        RecNode::new(&log, "a")
            .timesteps(None, Some(0.25))
            .prio(Phase::PostStep, &[3, 1]),
        RecNode::new(&log, "b")
            .timesteps(None, Some(0.5))
            .prio(Phase::PostStep, &[1]),
    ]);
    for _ in 0..2 {
        node.post_environment_step(&mut (), None, 3).unwrap();
        node.post_environment_step(&mut (), None, 1).unwrap();
    }
    assert_eq!(
        log.take(),
        lines(
            "a.post_environment_step(0.25, priority=3)
             a.post_environment_step(0.25, priority=1)
             b.post_environment_step(0.5, priority=1)
             a.post_environment_step(0.25, priority=3)
             a.post_environment_step(0.25, priority=1)"
        )
    );
}

#[test]
fn priority_sets_are_frozen_at_construction() {
    let log = Log::default();
    let a = RecNode::new(&log, "a")
        .prio(Phase::Reset, &[3])
        .prio(Phase::AfterReload, &[1]);
    let prios = a.priorities.clone();
    let mut node = combined(vec![
        a,
        RecNode::new(&log, "b").prio(Phase::Reset, &[3, -2]),
    ]);
    assert_eq!(node.priorities(Phase::Reset), vec![3, -2]);
    assert_eq!(
        node.priorities(Phase::AfterReload),
        vec![1, RESERVED_PRIORITY]
    );
    prios.borrow_mut().push((Phase::Reset, vec![7]));
    assert_eq!(node.priorities(Phase::Reset), vec![3, -2]);
    node.reset(&mut (), 7, &ResetArgs::default()).unwrap();
    node.reset(&mut (), -2, &ResetArgs::with_seed(4)).unwrap();
    assert_eq!(log.take(), lines("b.reset(priority=-2, seed=4, mask=None)"));
}

#[test]
fn spaces_are_reaggregated_only_at_the_lowest_after_reload_priority() {
    let log = Log::default();
    let a = RecNode::new(&log, "a")
        .observation(box_n(1), 1)
        .prio(Phase::AfterReload, &[0]);
    let b = RecNode::new(&log, "b");
    let (a_obs, b_obs, b_act) = (
        a.observation_space.clone(),
        b.observation_space.clone(),
        b.action_space.clone(),
    );
    let mut node = combined(vec![a, b]);
    assert_eq!(node.observation_space(), Some(box_n(1)));
    *a_obs.borrow_mut() = Some(box_n(4));
    *b_obs.borrow_mut() = Some(box_n(5));
    *b_act.borrow_mut() = Some(box_n(6));
    // after_reset never refreshes, nor does a non-final after_reload priority.
    node.after_reset(&mut (), RESERVED_PRIORITY, None).unwrap();
    node.after_reload(&mut (), 0, None).unwrap();
    assert_eq!(node.observation_space(), Some(box_n(1)));
    assert_eq!(node.action_space(), None);
    assert_eq!(node.get_observation(&mut ()).unwrap(), Value::Int(1));
    node.after_reload(&mut (), RESERVED_PRIORITY, None).unwrap();
    assert_eq!(
        node.observation_space(),
        Some(Space::dict([("a", box_n(4)), ("b", box_n(5))]))
    );
    assert_eq!(node.action_space(), Some(box_n(6)));
    // The contributor lists were rebuilt too: b now observes and acts directly.
    log.take();
    assert_eq!(
        node.get_observation(&mut ()).unwrap(),
        Value::from(dict! { "a" => 1, "b" => () })
    );
    node.set_next_action(&mut (), Value::Int(3)).unwrap();
    assert_eq!(
        log.take(),
        lines("a.get_observation()\nb.get_observation()\nb.set_next_action(3)")
    );
    // A space that disappears drops the channel.
    *a_obs.borrow_mut() = None;
    *b_obs.borrow_mut() = None;
    node.after_reload(&mut (), RESERVED_PRIORITY, None).unwrap();
    assert_eq!(node.observation_space(), None);
    let _ = cell(None);
}

#[test]
fn after_hooks_dispatch_and_reset_counters() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "a")
            .prio(Phase::AfterReset, &[2, 0])
            .prio(Phase::AfterReload, &[2]),
        RecNode::new(&log, "b").prio(Phase::AfterReset, &[0]),
    ]);
    assert_eq!(
        node.priority_order(Phase::AfterReset),
        &[2, 0, RESERVED_PRIORITY]
    );
    for p in [2, 0, RESERVED_PRIORITY] {
        node.after_reset(&mut (), p, None).unwrap();
    }
    let mask = NdArray::from_vec(vec![true, false]);
    node.after_reload(&mut (), 2, Some(&mask)).unwrap();
    assert_eq!(
        log.take(),
        lines(
            "a.after_reset(priority=2, mask=None)
             a.after_reset(priority=0, mask=None)
             b.after_reset(priority=0, mask=None)
             a.after_reload(priority=2, mask=[true, false])"
        )
    );
}

#[test]
fn rewards_sum_like_python() {
    let log = Log::default();
    let sum = |rewards: Vec<Value>| {
        let children = rewards
            .into_iter()
            .enumerate()
            .map(|(i, r)| RecNode::new(&log, &format!("n{i}")).reward(r))
            .collect();
        combined(children).get_reward(&mut ()).unwrap()
    };
    assert!(matches!(
        sum(vec![Value::Int(1), Value::Int(2)]),
        Value::Int(3)
    ));
    assert!(matches!(sum(vec![Value::Int(1), Value::Float(0.5)]), Value::Float(x) if x == 1.5));
    assert!(matches!(
        sum(vec![Value::Bool(true), Value::Int(2)]),
        Value::Int(3)
    ));
    assert!(matches!(sum(vec![Value::Float(0.25)]), Value::Float(x) if x == 0.25));
    assert_eq!(
        sum(vec![
            Value::Float(1.0),
            Value::Array(NdArray::from_vec(vec![1.0f32, 2.0]))
        ]),
        Value::Array(NdArray::from_vec(vec![2.0f64, 3.0]))
    );
    // Only reward contributors are asked.
    let mut node = combined(vec![
        RecNode::new(&log, "a").reward(1),
        RecNode::new(&log, "b"),
    ]);
    log.take();
    assert_eq!(node.get_reward(&mut ()).unwrap(), Value::Int(1));
    assert_eq!(log.take(), lines("a.get_reward()"));
    // No contributor: it is an error to ask.
    assert!(combined(vec![RecNode::new(&log, "a")])
        .get_reward(&mut ())
        .is_err());
    // A reward that is not a number cannot be summed.
    let mut node = combined(vec![RecNode::new(&log, "a").reward(Value::Null)]);
    assert!(node.get_reward(&mut ()).is_err());
}

#[test]
fn batched_rewards_and_signals() {
    let log = Log::default();
    let mut world = RecWorld::new(&log, None);
    world.batch_size = Some(3);
    let mut node = CombinedNode::<RecWorld>::new(
        "root",
        vec![
            RecNode::new(&log, "a")
                .reward(NdArray::from_vec(vec![1i32, 2, 3]))
                .termination(NdArray::from_vec(vec![false, true, false]))
                .truncation(false)
                .boxed(),
            RecNode::new(&log, "b")
                .reward(0.5)
                .termination(NdArray::from_vec(vec![true, true, false]))
                .truncation(NdArray::from_vec(vec![0.0f32, 0.0, 2.0]))
                .boxed(),
        ],
    )
    .unwrap();
    log.take();
    assert_eq!(
        node.get_reward(&mut world).unwrap(),
        Value::Array(NdArray::from_vec(vec![1.5f64, 2.5, 3.5]))
    );
    assert_eq!(
        node.get_termination(&mut world).unwrap(),
        Value::Array(NdArray::from_vec(vec![true, true, false]))
    );
    assert_eq!(
        node.get_truncation(&mut world).unwrap(),
        Value::Array(NdArray::from_vec(vec![false, false, true]))
    );
    // Batched signals never short-circuit.
    assert_eq!(log.take_matching(&["a.get_t", "b.get_t"]).len(), 4);
    let mut none = CombinedNode::<RecWorld>::new(
        "root",
        vec![RecNode::new(&log, "z").reward(Value::Int(0)).boxed()],
    )
    .unwrap();
    assert_eq!(
        none.get_reward(&mut world).unwrap(),
        Value::Array(NdArray::zeros(DType::F64, vec![3]).unwrap())
    );
    // A wrong batch length does not broadcast.
    let mut bad = CombinedNode::<RecWorld>::new(
        "root",
        vec![RecNode::new(&log, "z")
            .reward(NdArray::from_vec(vec![1.0f64, 2.0]))
            .boxed()],
    )
    .unwrap();
    assert!(bad.get_reward(&mut world).is_err());
}

#[test]
fn unbatched_signals_short_circuit() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "a")
            .termination(0)
            .truncation(Value::from("yes")),
        RecNode::new(&log, "b")
            .termination(NdArray::scalar(true))
            .truncation(true),
        RecNode::new(&log, "c").termination(true),
    ]);
    log.take();
    assert_eq!(node.get_termination(&mut ()).unwrap(), Value::Bool(true));
    assert_eq!(
        log.take(),
        lines("a.get_termination()\nb.get_termination()")
    );
    assert_eq!(node.get_truncation(&mut ()).unwrap(), Value::Bool(true));
    assert_eq!(log.take(), lines("a.get_truncation()"));
    let mut none = combined(vec![RecNode::new(&log, "a").termination(false)]);
    assert_eq!(none.get_termination(&mut ()).unwrap(), Value::Bool(false));
    assert!(none.get_truncation(&mut ()).is_err());
    // A multi-element array has no truth value.
    let mut amb = combined(vec![
        RecNode::new(&log, "a").termination(NdArray::from_vec(vec![true, false]))
    ]);
    assert!(amb.get_termination(&mut ()).is_err());
}

#[test]
fn info_from_every_member() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "a").info(dict! { "x" => 1 }),
        RecNode::new(&log, "b"),
        RecNode::new(&log, "c").info(Dict::new()),
    ]);
    assert_eq!(
        node.get_info(&mut ()).unwrap(),
        Value::from(dict! { "a" => dict! { "x" => 1 }, "c" => Dict::new() })
    );
    // Never a direct return, but None when nobody answered.
    let mut one = combined(vec![RecNode::new(&log, "a").info(5)]);
    assert_eq!(
        one.get_info(&mut ()).unwrap(),
        Value::from(dict! { "a" => 5 })
    );
    let mut nobody = combined(vec![RecNode::new(&log, "a"), RecNode::new(&log, "b")]);
    assert_eq!(nobody.get_info(&mut ()).unwrap(), Value::Null);
}

#[test]
fn render_modes_and_dict_naming() {
    let log = Log::default();
    let renderers = || {
        vec![
            RecNode::new(&log, "cam").render("rgb_array", dict! { "left" => 1, "right" => 2 }),
            RecNode::new(&log, "off").render("rgb_array", Value::Null),
            RecNode::new(&log, "depth").render("depth_array", 3),
            RecNode::new(&log, "blind"),
        ]
    };
    let mut node = combined(renderers());
    assert_eq!(node.render_mode().as_deref(), Some("dict"));
    assert_eq!(
        node.render(&mut ()).unwrap(),
        Value::from(dict! { "cam.left" => 1, "cam.right" => 2, "depth" => 3 })
    );
    // Only unrenderable results: None.
    let mut node = combined(vec![
        RecNode::new(&log, "off").render("rgb_array", Value::Null),
        RecNode::new(&log, "x").render("y", Value::Null),
    ]);
    assert_eq!(node.render(&mut ()).unwrap(), Value::Null);

    // A single renderable member: returned directly, its mode is the node's...
    let single = || {
        vec![
            RecNode::new(&log, "cam").render("rgb_array", dict! { "k" => 1 }),
            RecNode::new(&log, "b"),
        ]
    };
    let mut node = combined(single());
    assert_eq!(node.render_mode().as_deref(), Some("rgb_array"));
    assert_eq!(
        node.render(&mut ()).unwrap(),
        Value::from(dict! { "k" => 1 })
    );
    // ...unless "dict" was asked for.
    let mut node =
        CombinedNode::<()>::builder("r", single().into_iter().map(RecNode::boxed).collect())
            .render_mode("dict")
            .build()
            .unwrap();
    assert_eq!(node.render_mode().as_deref(), Some("dict"));
    assert_eq!(
        node.render(&mut ()).unwrap(),
        Value::from(dict! { "cam.k" => 1 })
    );
    // A custom mode is used as given; with a single member it renders directly.
    let mut node =
        CombinedNode::<()>::builder("r", single().into_iter().map(RecNode::boxed).collect())
            .render_mode("human")
            .build()
            .unwrap();
    assert_eq!(node.render_mode().as_deref(), Some("human"));
    assert_eq!(
        node.render(&mut ()).unwrap(),
        Value::from(dict! { "k" => 1 })
    );
    // A custom mode with nothing renderable: can render, but renders None.
    let mut node = CombinedNode::<()>::builder("r", vec![RecNode::new(&log, "b").boxed()])
        .render_mode(RenderModeArg::Custom(Some("human".into())))
        .build()
        .unwrap();
    assert_eq!(node.render_mode().as_deref(), Some("human"));
    assert_eq!(node.render(&mut ()).unwrap(), Value::Null);
    // "dict" or "auto" with nothing renderable: None, and render does nothing.
    for mode in [
        RenderModeArg::Dict,
        RenderModeArg::Auto,
        RenderModeArg::from(None::<&str>),
    ] {
        let mut node = CombinedNode::<()>::builder("r", vec![RecNode::new(&log, "b").boxed()])
            .render_mode(mode)
            .build()
            .unwrap();
        assert_eq!(node.render_mode(), None);
        log.take();
        assert_eq!(node.render(&mut ()).unwrap(), Value::Null);
        assert!(log.take().is_empty());
    }
    // The renderable set is frozen at construction (a member's later mode is not seen).
    assert_eq!(RenderModeArg::from("auto"), RenderModeArg::Auto);
    assert_eq!(
        RenderModeArg::from(Some("dict".to_owned())),
        RenderModeArg::Dict
    );
}

#[test]
fn pernode_kwargs_and_unknown_keywords() {
    let log = Log::default();
    let mut node = combined(vec![
        RecNode::new(&log, "a")
            .prio(Phase::Reset, &[0])
            .prio(Phase::Reload, &[0]),
        RecNode::new(&log, "b")
            .prio(Phase::Reset, &[0])
            .prio(Phase::Reload, &[0]),
    ]);
    let args = ResetArgs {
        seed: Some(3),
        mask: None,
        kwargs: dict! { "pernode_kwargs" => dict! { "b" => dict! { "level" => "hard", "n" => 2 }, "zz" => 1 } },
    };
    node.reset(&mut (), 0, &args).unwrap();
    node.reload(&mut (), 0, &args).unwrap();
    assert_eq!(
        log.take(),
        lines(
            "a.reset(priority=0, seed=3, mask=None)
             b.reset(priority=0, seed=3, mask=None, level=\"hard\", n=2)
             a.reload(priority=0, seed=3, mask=None)
             b.reload(priority=0, seed=3, mask=None, level=\"hard\", n=2)"
        )
    );
    let unknown = ResetArgs {
        kwargs: dict! { "difficulty" => 1 },
        ..ResetArgs::default()
    };
    for result in [
        node.reset(&mut (), 0, &unknown),
        node.reload(&mut (), 0, &unknown),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.kind(), HostErrorKind::InvalidArgument);
        assert!(
            err.message()
                .contains("unexpected keyword argument 'difficulty'"),
            "{err}"
        );
    }
    assert!(log.take().is_empty());
    // Per-node entries must be mappings and may not repeat the named arguments.
    let bad = ResetArgs {
        kwargs: dict! { "pernode_kwargs" => dict! { "a" => 1 } },
        ..ResetArgs::default()
    };
    assert_eq!(
        node.reset(&mut (), 0, &bad).unwrap_err().kind(),
        HostErrorKind::InvalidArgument
    );
    let dup = ResetArgs {
        kwargs: dict! { "pernode_kwargs" => dict! { "a" => dict! { "seed" => 1 } } },
        ..ResetArgs::default()
    };
    assert!(node
        .reset(&mut (), 0, &dup)
        .unwrap_err()
        .message()
        .contains("multiple values"));
    // Nested combined nodes receive their own pernode_kwargs.
    let inner = CombinedNode::new(
        "inner",
        vec![RecNode::new(&log, "leaf").prio(Phase::Reset, &[0]).boxed()],
    )
    .unwrap();
    let mut outer = CombinedNode::new("outer", vec![Box::new(inner) as Box<dyn Node>]).unwrap();
    let nested = ResetArgs {
        kwargs: dict! { "pernode_kwargs" => dict! { "inner" => dict! { "pernode_kwargs" => dict! { "leaf" => dict! { "k" => 1 } } } } },
        ..ResetArgs::default()
    };
    log.take();
    outer.reset(&mut (), 0, &nested).unwrap();
    assert_eq!(
        log.take(),
        lines("leaf.reset(priority=0, seed=None, mask=None, k=1)")
    );
}

#[test]
fn get_node_resolves_public_children_by_nested_names() {
    let log = Log::default();
    let inner = CombinedNode::new("inner", vec![RecNode::new(&log, "leaf").boxed()]).unwrap();
    let mut outer = CombinedNode::builder(
        "outer",
        vec![
            Box::new(inner) as Box<dyn Node>,
            RecNode::new(&log, "x").boxed(),
        ],
    )
    .root_node(RecNode::new(&log, "hidden").boxed())
    .build()
    .unwrap();
    assert_eq!(outer.get_node(&[]).map(|n| n.name()), Some("outer"));
    assert_eq!(outer.get_node(&["inner"]).map(|n| n.name()), Some("inner"));
    assert_eq!(
        outer.get_node(&["inner", "leaf"]).map(|n| n.name()),
        Some("leaf")
    );
    assert!(outer.get_node(&["inner", "nope"]).is_none());
    assert!(outer.get_node(&["x", "leaf"]).is_none());
    assert!(outer.get_node(&["hidden"]).is_none());
    assert!(outer.get_node(&[""]).is_none());
    let leaf = outer.get_node_mut(&["inner", "leaf"]).unwrap();
    leaf.close(&mut ());
    assert_eq!(log.take(), lines("leaf.close()"));
    assert_eq!(
        outer.children().map(|c| c.name()).collect::<Vec<_>>(),
        vec!["inner", "x"]
    );
    assert!(outer.direct_return());
    assert_eq!(outer.name(), "outer");
}
