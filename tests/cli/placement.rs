//! `serve --cpus LIST`: every thread of the server process runs on the
//! CPUs given; an unusable list is refused at startup.

use crate::support::{run, Streaming};
use std::time::Duration;

/// Each thread of process `pid`: its name and `Cpus_allowed_list`.
#[cfg(target_os = "linux")]
fn threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc") {
        let dir = task.expect("task").path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue; // the thread ended meanwhile
        };
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_string();
        out.push((comm.trim().to_string(), allowed));
    }
    out
}

#[cfg(target_os = "linux")]
#[test]
fn serve_with_cpus_pins_every_thread() {
    let allowed = unienv_remote::server::current_thread_cpus().expect("sched_getaffinity");
    let cpu = allowed.last().expect("a CPU").to_string();
    let record = tempfile::tempdir().expect("tempdir");
    let serve = Streaming::spawn(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--cpus",
        &cpu,
        "--record",
        record.path().to_str().expect("utf-8 path"),
    ]);
    let line = serve
        .next_line(Duration::from_secs(30))
        .expect("the serve banner");
    assert!(line.contains("serving"), "{line}");
    // A new thread names itself once it first runs (Rust's std sets the
    // name from inside it), which on one pinned, busy CPU may come after the
    // banner: until then it shows the process's name. Read the threads
    // again until every kind has named itself (or 10 s have passed).
    let kinds = ["unienv-domain", "tokio-rt-worker", "unienv-recorder"];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut threads = self::threads(serve.pid());
    while std::time::Instant::now() < deadline
        && !kinds
            .iter()
            .all(|kind| threads.iter().any(|(name, _)| name.starts_with(kind)))
    {
        std::thread::sleep(Duration::from_millis(50));
        threads = self::threads(serve.pid());
    }
    for kind in kinds {
        assert!(
            threads.iter().any(|(name, _)| name.starts_with(kind)),
            "no {kind} thread: {threads:?}"
        );
    }
    for (name, cpus) in &threads {
        assert_eq!(cpus, &cpu, "thread {name} is not pinned: {threads:?}");
    }
}

#[test]
fn serve_refuses_an_unusable_cpu_list() {
    for (list, says) in [
        ("1023", "CPU 1023 does not exist"),
        ("", "the CPU list is empty"),
        ("0-x", "invalid CPU list"),
    ] {
        let r = run(&["serve", "--addr", "127.0.0.1:0", "--cpus", list]);
        assert!(!r.status.success(), "--cpus {list:?} started");
        assert!(r.stderr.contains(says), "--cpus {list:?}: {}", r.stderr);
    }
}
