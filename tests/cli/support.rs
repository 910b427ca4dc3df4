//! Running the built `unienv-remote` binary, and our server in-process on
//! 127.0.0.1:0, for the command-line tests.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use unienv_remote::server::{Listener, RegisterError, Server, ServerBuilder, ServerConfig};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_unienv-remote");

/// How long any one command may run before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// What a finished command printed, and how it exited.
#[derive(Debug)]
pub struct Run {
    /// The exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Asserts success and returns standard output.
    pub fn ok(&self) -> &str {
        assert!(
            self.status.success(),
            "expected success, got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        &self.stdout
    }

    /// Asserts a non-zero exit whose standard error names `code` in the
    /// `error: CODE: …` form, and returns standard error.
    pub fn fails_with(&self, code: &str) -> &str {
        assert!(
            !self.status.success() && self.status.code().is_some(),
            "expected a failure exit, got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.contains(&format!("error: {code}: ")),
            "expected error code {code}, stderr:\n{}",
            self.stderr
        );
        &self.stderr
    }
}

/// Spawns the binary with `args`, output piped.
pub fn spawn(args: &[&str]) -> Child {
    spawn_env(args, &[])
}

/// Spawns the binary with `args` and the environment variables `env`
/// (UNIENV_TOKEN is never inherited from the test's own environment).
pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(BIN)
        .args(args)
        .env_remove("UNIENV_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start unienv-remote")
}

/// Waits for a spawned child (killing it and failing after `limit`) and
/// collects its output.
pub fn finish(mut child: Child, limit: Duration) -> Run {
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the command did not finish within {limit:?}; stderr so far:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Runs the binary with `args` to completion.
pub fn run(args: &[&str]) -> Run {
    finish(spawn(args), DEADLINE)
}

/// Runs the binary with `args` and the environment variables `env` to
/// completion.
pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    finish(spawn_env(args, env), DEADLINE)
}

/// Our server in this process, listening on 127.0.0.1:0; shut down on drop.
pub struct Ours {
    runtime: tokio::runtime::Runtime,
    server: Option<(Server, Listener)>,
    /// Its ws:// URL.
    pub url: String,
}

impl Ours {
    /// Registers with `register` (`sims::register` or `fixtures::register`)
    /// and listens.
    pub fn start(
        register: fn(&mut ServerBuilder) -> Result<(), RegisterError>,
        config: ServerConfig,
    ) -> Ours {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let mut builder = Server::builder(config);
        register(&mut builder).expect("register");
        let server = builder.start().expect("a valid server configuration");
        let listener = runtime
            .block_on(server.listen("127.0.0.1:0"))
            .expect("listen");
        Ours {
            url: listener.url(),
            runtime,
            server: Some((server, listener)),
        }
    }

    /// Stops listening and shuts the server down (sessions closed).
    pub fn stop(&mut self) {
        if let Some((server, listener)) = self.server.take() {
            self.runtime.block_on(async {
                listener.stop().await;
                server.shutdown().await;
            });
        }
    }
}

impl Drop for Ours {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The value of a `key  value` line of `describe` output.
pub fn field<'a>(describe: &'a str, key: &str) -> Option<&'a str> {
    describe.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?;
        rest.starts_with("  ").then(|| rest.trim())
    })
}

/// A running command whose standard output is read line by line as it
/// comes (for `watch` and `serve`).
pub struct Streaming {
    child: Child,
    /// Standard output lines, as they arrive.
    pub lines: std::sync::mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Streaming {
    /// Spawns the binary with `args`.
    pub fn spawn(args: &[&str]) -> Streaming {
        Streaming::spawn_env(args, &[])
    }

    /// Spawns the binary with `args` and the environment variables `env`.
    pub fn spawn_env(args: &[&str], env: &[(&str, &str)]) -> Streaming {
        use std::io::BufRead;
        let mut child = spawn_env(args, env);
        let out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Streaming {
            child,
            lines,
            stderr: Some(stderr),
        }
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line, waiting at most `limit`.
    pub fn next_line(&self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the exit (killing it and failing after `limit`); returns
    /// the status, the lines not yet taken, and standard error.
    pub fn wait(mut self, limit: Duration) -> (ExitStatus, Vec<String>, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default());
                panic!(
                    "the command did not finish within {limit:?}; stderr:\n{}",
                    stderr.unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stderr = self
            .stderr
            .take()
            .map(|t| t.join().expect("stderr reader"))
            .unwrap_or_default();
        // The reader thread ends at EOF; collect what it still holds.
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            rest.push(line);
        }
        (status, rest, stderr)
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
