//! One test per rule of the seed's execution rules (control, calls and
//! operations, failures), on the pure state machine: no threads, no hosts.

use super::*;
use crate::protocol::{ErrorCode, Method, Mode, Op, OperationKind, ResourceKind};
use std::sync::Arc;

type Session = Arc<&'static str>;

fn session(name: &'static str) -> Session {
    Arc::new(name)
}

fn world_domain() -> Control<Session> {
    let mut c = Control::new("pm");
    c.instantiated(
        Scope::World {
            world: "pm/world".into(),
            envs: vec!["pm".into()],
        },
        false,
    );
    c
}

const ENV: Target = Target {
    kind: ResourceKind::Env,
    detached_node: false,
    recovers: false,
};
const WORLD: Target = Target {
    kind: ResourceKind::World,
    detached_node: false,
    recovers: true,
};
const NODE: Target = Target {
    kind: ResourceKind::Node,
    detached_node: false,
    recovers: false,
};
const DETACHED_ROOT: Target = Target {
    kind: ResourceKind::Node,
    detached_node: true,
    recovers: true,
};
const DETACHED_CHILD: Target = Target {
    kind: ResourceKind::Node,
    detached_node: true,
    recovers: false,
};

fn code(c: &Control<Session>, r: Refusal) -> ErrorCode {
    c.error(&r).code
}

/// Runs an allowed call that succeeds.
fn ok_call(c: &mut Control<Session>, target: Target, method: Method, op: Option<&str>) {
    let policy = c.check_call(target, method, op).unwrap();
    c.call_succeeded(target, policy);
}

#[test]
fn the_first_control_call_claims_the_domain_for_its_session_and_mode() {
    let mut c = world_domain();
    let a = session("a");
    assert!(c.owner().is_none());
    assert_eq!(
        c.claim_for(&a, Op::Call, ResourceKind::Env),
        Ok(Claim::Acquired)
    );
    let (owner, mode) = c.owner().unwrap();
    assert!(owner.same(&a));
    assert_eq!(mode, Mode::Env);
    assert_eq!(
        c.claim_for(&a, Op::Call, ResourceKind::Env),
        Ok(Claim::Held)
    );
}

#[test]
fn component_ops_and_non_env_calls_claim_components_mode() {
    for (op, kind) in [
        (Op::Begin, ResourceKind::Env),
        (Op::Complete, ResourceKind::World),
        (Op::Abort, ResourceKind::Node),
        (Op::Call, ResourceKind::World),
        (Op::Call, ResourceKind::Node),
    ] {
        let mut c = world_domain();
        c.claim_for(&session("a"), op, kind).unwrap();
        assert_eq!(c.owner().unwrap().1, Mode::Components, "{op:?} on {kind:?}");
    }
}

#[test]
fn a_competing_session_gets_ownership_conflict() {
    let mut c = world_domain();
    let (a, b) = (session("a"), session("b"));
    c.acquire(&a, Some(Mode::Components), WORLD).unwrap();
    let refusal = c.claim(&b, Some(Mode::Components)).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::OtherOwner {
            held: Mode::Components
        }
    );
    let e = c.error(&refusal);
    assert_eq!(e.code, ErrorCode::OwnershipConflict);
    assert!(
        e.message
            .starts_with("world 'pm/world' is controlled by another session (components mode)"),
        "{}",
        e.message
    );
    assert!(!e.uncertain);
}

#[test]
fn the_owner_asking_another_mode_gets_ownership_conflict() {
    let mut c = world_domain();
    let a = session("a");
    c.acquire(&a, Some(Mode::Env), ENV).unwrap();
    let refusal = c.claim_for(&a, Op::Begin, ResourceKind::World).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::OtherMode {
            held: Mode::Env,
            asked: Mode::Components
        }
    );
    assert_eq!(code(&c, refusal), ErrorCode::OwnershipConflict);
}

#[test]
fn an_unknown_mode_is_an_invalid_request() {
    let mut c = world_domain();
    let refusal = c.acquire(&session("a"), None, WORLD).unwrap_err();
    assert_eq!(refusal, Refusal::UnknownMode);
    assert_eq!(code(&c, refusal), ErrorCode::InvalidRequest);
    assert!(c.owner().is_none());
}

#[test]
fn ownership_lasts_until_release_and_only_the_owner_releases() {
    let mut c = world_domain();
    let (a, b) = (session("a"), session("b"));
    c.acquire(&a, Some(Mode::Env), ENV).unwrap();
    ok_call(&mut c, ENV, Method::Reset, Some("op1"));
    assert!(c.is_owner(&a), "a completed request does not end control");
    assert!(!c.release(&b), "another session cannot release it");
    assert!(c.is_owner(&a));
    assert!(c.release(&a));
    assert!(c.owner().is_none());
    assert_eq!(c.claim(&b, Some(Mode::Components)), Ok(Claim::Acquired));
}

#[test]
fn detached_nodes_are_controlled_in_components_mode_only() {
    let mut c = Control::new("gripper");
    c.instantiated(Scope::Detached("gripper".into()), false);
    let a = session("a");
    let refusal = c.acquire(&a, Some(Mode::Env), DETACHED_ROOT).unwrap_err();
    assert_eq!(refusal, Refusal::DetachedEnvMode);
    assert_eq!(code(&c, refusal), ErrorCode::InvalidRequest);
    assert_eq!(
        c.acquire(&a, Some(Mode::Components), DETACHED_CHILD),
        Ok(Claim::Acquired)
    );
}

#[test]
fn env_calls_need_an_operation_id_but_env_reads_do_not() {
    let c = world_domain();
    for op in [None, Some("")] {
        let refusal = c.check_call(ENV, Method::Step, op).unwrap_err();
        assert_eq!(refusal, Refusal::EnvCallNeedsOperationId);
        assert_eq!(code(&c, refusal), ErrorCode::InvalidRequest);
    }
    let policy = c.check_call(ENV, Method::Render, None).unwrap();
    assert!(!policy.mutation && !policy.env_mutation);
    let policy = c.check_call(ENV, Method::Step, Some("op")).unwrap();
    assert!(policy.mutation && policy.env_mutation);
}

#[test]
fn component_mutations_need_a_matching_operation() {
    let mut c = world_domain();
    for (target, method) in [
        (WORLD, Method::Step),
        (NODE, Method::SetNextAction),
        (NODE, Method::Reset),
    ] {
        let refusal = c.check_call(target, method, Some("op1")).unwrap_err();
        assert_eq!(refusal, Refusal::NoMatchingOperation);
        assert_eq!(code(&c, refusal), ErrorCode::InvalidOperation);
    }
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    assert_eq!(
        c.check_call(WORLD, Method::Step, Some("op2")),
        Err(Refusal::NoMatchingOperation)
    );
    assert_eq!(
        c.check_call(WORLD, Method::Step, None),
        Err(Refusal::NoMatchingOperation)
    );
    let policy = c.check_call(WORLD, Method::Step, Some("op1")).unwrap();
    assert!(policy.mutation && !policy.env_mutation);
}

#[test]
fn component_reads_outside_operations_are_free_and_inside_carry_its_id() {
    let mut c = world_domain();
    assert!(c.check_call(NODE, Method::GetObservation, None).is_ok());
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    assert_eq!(
        c.check_call(NODE, Method::GetObservation, None),
        Err(Refusal::NoMatchingOperation)
    );
    assert!(c
        .check_call(NODE, Method::GetObservation, Some("op1"))
        .is_ok());
}

#[test]
fn one_operation_spans_world_and_node_calls() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    ok_call(&mut c, NODE, Method::SetNextAction, Some("op1"));
    ok_call(&mut c, NODE, Method::PreEnvironmentStep, Some("op1"));
    ok_call(&mut c, WORLD, Method::Step, Some("op1"));
    ok_call(&mut c, NODE, Method::PostEnvironmentStep, Some("op1"));
    let done = c.complete(Some("op1")).unwrap();
    assert_eq!(done.kind, OperationKind::Step);
    assert!(c.operation().is_none());
}

#[test]
fn reset_lifecycle_cannot_run_in_a_step_operation() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    for (target, method) in [
        (WORLD, Method::Reset),
        (WORLD, Method::Reload),
        (NODE, Method::AfterReset),
        (NODE, Method::AfterReload),
    ] {
        let refusal = c.check_call(target, method, Some("op1")).unwrap_err();
        assert_eq!(refusal, Refusal::ResetInStep, "{method}");
        assert_eq!(code(&c, refusal), ErrorCode::InvalidOperation);
    }
}

#[test]
fn step_lifecycle_cannot_run_in_a_reset_or_reload_operation() {
    for kind in [OperationKind::Reset, OperationKind::Reload] {
        let mut c = world_domain();
        c.begin(Some(kind), Some("op1")).unwrap();
        for (target, method) in [
            (WORLD, Method::Step),
            (NODE, Method::SetNextAction),
            (NODE, Method::PreEnvironmentStep),
            (NODE, Method::PostEnvironmentStep),
        ] {
            let refusal = c.check_call(target, method, Some("op1")).unwrap_err();
            assert_eq!(refusal, Refusal::StepInReset, "{method}");
            assert_eq!(code(&c, refusal), ErrorCode::InvalidOperation);
        }
    }
}

#[test]
fn begin_needs_a_kind_and_a_nonempty_id() {
    let mut c = world_domain();
    for (kind, id) in [
        (None, Some("op")),
        (Some(OperationKind::Step), None),
        (Some(OperationKind::Step), Some("")),
    ] {
        let refusal = c.begin(kind, id).unwrap_err();
        assert_eq!(refusal, Refusal::BeginNeedsKindAndId);
        assert_eq!(code(&c, refusal), ErrorCode::InvalidRequest);
    }
    assert!(c.operation().is_none());
}

#[test]
fn one_operation_at_a_time() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    let refusal = c
        .begin(Some(OperationKind::Reset), Some("op2"))
        .unwrap_err();
    assert_eq!(refusal, Refusal::InProgress);
    assert_eq!(code(&c, refusal), ErrorCode::OperationInProgress);
    assert_eq!(c.operation().unwrap().id, "op1");
}

#[test]
fn complete_and_abort_need_the_open_operation_id() {
    let mut c = world_domain();
    assert_eq!(c.complete(Some("op1")), Err(Refusal::NoMatchingOperation));
    assert_eq!(c.abort(Some("op1")), Err(Refusal::NoMatchingOperation));
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    assert_eq!(c.complete(Some("op2")), Err(Refusal::NoMatchingOperation));
    assert_eq!(c.abort(None), Err(Refusal::NoMatchingOperation));
    assert!(!c.is_faulted());
    assert!(c.complete(Some("op1")).is_ok());
}

#[test]
fn abort_faults_the_domain() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    c.abort(Some("op1")).unwrap();
    assert!(c.is_faulted());
    assert!(c.operation().is_none());
    assert_eq!(
        c.fault_cause(),
        Some("the step operation 'op1' was aborted")
    );
}

#[test]
fn releasing_or_disconnecting_mid_operation_faults_the_domain() {
    let mut c = world_domain();
    let a = session("a");
    c.claim_for(&a, Op::Begin, ResourceKind::World).unwrap();
    c.begin(Some(OperationKind::Step), Some("op1")).unwrap();
    assert!(c.release(&a));
    assert!(c.is_faulted());
    assert!(c.operation().is_none());
    assert!(c.owner().is_none());
    // Without an open operation, release does not fault.
    let mut c = world_domain();
    c.claim(&a, Some(Mode::Components)).unwrap();
    assert!(c.release(&a));
    assert!(!c.is_faulted());
}

#[test]
fn a_failed_mutation_faults_and_is_uncertain_a_failed_read_does_not() {
    let mut c = world_domain();
    let read = c.check_call(ENV, Method::Render, None).unwrap();
    assert!(!c.call_failed(read, || unreachable!("a read has no fault cause")));
    assert!(!c.is_faulted());
    let step = c.check_call(ENV, Method::Step, Some("op")).unwrap();
    assert!(c.call_failed(step, || "step() on 'pm' failed".into()));
    assert!(c.is_faulted());
    c.begin(Some(OperationKind::Reset), Some("op2")).unwrap();
    let after = c.check_call(NODE, Method::AfterReset, Some("op2")).unwrap();
    assert!(c.call_failed(after, || "after_reset failed".into()));
    assert!(c.operation().is_none(), "a fault closes the operation");
}

#[test]
fn a_faulted_domain_refuses_stepping_and_reads_until_reset_or_reload() {
    let mut c = world_domain();
    c.fault("a test".into());
    for (target, method) in [
        (ENV, Method::Step),
        (ENV, Method::Render),
        (NODE, Method::GetObservation),
    ] {
        let refusal = c.check_call(target, method, Some("op")).unwrap_err();
        assert_eq!(refusal, Refusal::Faulted, "{method}");
        let e = c.error(&refusal);
        assert_eq!(e.code, ErrorCode::Faulted);
        assert!(
            e.message.contains("World 'pm/world' is faulted: a test"),
            "{}",
            e.message
        );
        assert!(
            e.message.contains("call reset() on env 'pm' (env mode)"),
            "{}",
            e.message
        );
    }
    assert_eq!(
        c.begin(Some(OperationKind::Step), Some("op")),
        Err(Refusal::Faulted)
    );
    assert!(c.check_call(ENV, Method::Reset, Some("op")).is_ok());
    assert!(c.check_call(ENV, Method::Reload, Some("op")).is_ok());
    c.begin(Some(OperationKind::Reset), Some("op")).unwrap();
    // Inside a reset operation, the lifecycle's other calls run.
    assert!(c.check_call(NODE, Method::AfterReset, Some("op")).is_ok());
    assert!(c
        .check_call(NODE, Method::GetObservation, Some("op"))
        .is_ok());
}

#[test]
fn a_successful_env_reset_recovers_the_domain() {
    let mut c = world_domain();
    c.fault("a test".into());
    let policy = c.check_call(ENV, Method::Reset, Some("op")).unwrap();
    assert!(c.call_succeeded(ENV, policy));
    assert!(!c.is_faulted());
    assert!(c.check_call(ENV, Method::Step, Some("op")).is_ok());
}

#[test]
fn a_recovery_operation_must_reset_or_reload_the_world() {
    for recovering in [Method::Reset, Method::Reload] {
        let mut c = world_domain();
        c.fault("a test".into());
        c.begin(Some(OperationKind::Reset), Some("op")).unwrap();
        // Resetting only a node, or running only after-hooks, does not recover.
        ok_call(&mut c, NODE, Method::Reset, Some("op"));
        ok_call(&mut c, WORLD, Method::AfterReset, Some("op"));
        let refusal = c.complete(Some("op")).unwrap_err();
        assert_eq!(refusal, Refusal::NotRecovered);
        let e = c.error(&refusal);
        assert_eq!(e.code, ErrorCode::InvalidOperation);
        assert_eq!(
            e.message,
            "Recovery requires a successful world reset or reload"
        );
        assert!(c.is_faulted());
        ok_call(&mut c, WORLD, recovering, Some("op"));
        let done = c.complete(Some("op")).unwrap();
        assert!(done.recovered_fault);
        assert!(!c.is_faulted());
    }
}

#[test]
fn every_reset_or_reload_operation_must_recover_even_when_not_faulted() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Reload), Some("op")).unwrap();
    assert_eq!(c.complete(Some("op")), Err(Refusal::NotRecovered));
    ok_call(&mut c, WORLD, Method::Reload, Some("op"));
    let done = c.complete(Some("op")).unwrap();
    assert!(!done.recovered_fault);
}

#[test]
fn a_detached_domain_recovers_by_resetting_its_root_node() {
    let mut c = Control::new("gripper");
    c.instantiated(Scope::Detached("gripper".into()), false);
    c.fault("a test".into());
    let e = c.error(&Refusal::Faulted);
    assert!(
        e.message
            .starts_with("Detached node tree 'gripper' is faulted: a test"),
        "{}",
        e.message
    );
    c.begin(Some(OperationKind::Reset), Some("op")).unwrap();
    ok_call(&mut c, DETACHED_CHILD, Method::Reset, Some("op"));
    let refusal = c.complete(Some("op")).unwrap_err();
    assert_eq!(
        c.error(&refusal).message,
        "Recovery requires a successful detached-root node reset or reload"
    );
    ok_call(&mut c, DETACHED_ROOT, Method::Reset, Some("op"));
    assert!(c.complete(Some("op")).unwrap().recovered_fault);
}

#[test]
fn a_step_operation_completes_without_a_reset() {
    let mut c = world_domain();
    c.begin(Some(OperationKind::Step), Some("op")).unwrap();
    let done = c.complete(Some("op")).unwrap();
    assert_eq!((done.id.as_str(), done.kind), ("op", OperationKind::Step));
}

#[test]
fn the_revision_advances_at_each_reset_lifecycle_phase_and_on_revival() {
    let mut c = world_domain();
    assert_eq!(c.revision(), 0);
    ok_call(&mut c, ENV, Method::Step, Some("op"));
    assert_eq!(c.revision(), 0, "stepping keeps the revision");
    ok_call(&mut c, ENV, Method::Reset, Some("op"));
    assert_eq!(c.revision(), 1);
    c.begin(Some(OperationKind::Reset), Some("op")).unwrap();
    ok_call(&mut c, WORLD, Method::Reset, Some("op"));
    ok_call(&mut c, NODE, Method::AfterReset, Some("op"));
    assert_eq!(c.revision(), 3);
    c.complete(Some("op")).unwrap();
    c.instantiated(Scope::Env("pm".into()), true);
    assert_eq!(c.revision(), 4, "a revival advances the revision");
    c.instantiated(Scope::Env("pm".into()), false);
    assert_eq!(c.revision(), 4);
}

#[test]
fn instantiation_clears_a_fault() {
    let mut c = world_domain();
    c.fault("a test".into());
    c.instantiated(Scope::Env("pm".into()), true);
    assert!(!c.is_faulted());
}

#[test]
fn boundaries_count_from_one() {
    let mut c = world_domain();
    assert_eq!(c.sequence(), 0);
    assert_eq!(c.next_sequence(), 1);
    assert_eq!(c.publish(), 1);
    assert_eq!(c.publish(), 2);
    assert_eq!(c.sequence(), 2);
}

#[test]
fn faulted_messages_name_the_domain_by_its_kind() {
    let mut env = Control::<Session>::new("cartpole");
    env.instantiated(Scope::Env("cartpole".into()), false);
    env.fault("boom".into());
    assert_eq!(
        env.error(&Refusal::Faulted).message,
        "Env 'cartpole' is faulted: boom, so its state is unknown. Call reset() (or reload()) on 'cartpole' to recover"
    );
    let mut pending = Control::<Session>::new("lazy");
    pending.fault("boom".into());
    assert_eq!(
        pending.error(&Refusal::Faulted).message,
        "Faulted by boom: reset or reload to recover"
    );
    let mut bare = Control::<Session>::new("w");
    bare.instantiated(
        Scope::World {
            world: "w".into(),
            envs: vec![],
        },
        false,
    );
    bare.fault("boom".into());
    assert!(bare.error(&Refusal::Faulted).message.contains(
        "To recover, begin a reset (or reload) operation, reset (or reload) the world 'w'"
    ));
}
