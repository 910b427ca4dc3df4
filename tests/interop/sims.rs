//! The reference Python client drives our server's built-in simulators:
//! `pointmass` in env mode and through the reference `RemoteWorldEnv`
//! (components mode), checking spaces, shapes, dtypes, that rewards improve
//! when pushing towards the goal and that both modes give the same
//! trajectory; then the detached `gripper` and its fingers.

use crate::common;

#[test]
fn reference_client_drives_pointmass_and_gripper() {
    let Some(python) = common::ref_python() else {
        return;
    };
    let (rt, server, listener) = common::serve_on_runtime(unienv_remote::sims::register);
    let out = common::run_python(&python, "drive_sims.py", &[&listener.url()], None);
    let line = String::from_utf8_lossy(&out).trim().to_string();
    println!("{line}");
    assert!(line.starts_with("ok "), "{line}");
    rt.block_on(server.shutdown());
}
