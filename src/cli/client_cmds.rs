//! `discover`, `describe` and `call`: one-shot requests to any UniEnv server.

use super::json_args::{convert_arguments, parse_json_arguments};
use super::pretty;
use super::shared::{run_client, space_summary, ClientArgs};
use crate::client::{ClientError, Descriptor, Mode, OperationKind};
use crate::codec::{header_json, Value};
use crate::host::Space;
use crate::protocol::ResourceKind;
use clap::Args;
use std::fmt::Write;
use std::process::ExitCode;

/// Options of `discover`.
#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// Connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// Print the descriptors as one plain JSON array (for scripts) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options of `describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// Connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The resource ID, e.g. `pointmass/node/camera`.
    pub id: String,
    /// Print the descriptor as the tagged JSON header the server sent.
    #[arg(long)]
    pub json: bool,
}

/// Options of `call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// Connection options.
    #[command(flatten)]
    pub client: ClientArgs,
    /// The resource ID.
    pub id: String,
    /// The method, e.g. `reset`, `step`, `get_observation`.
    pub method: String,
    /// Positional arguments: a JSON array (see below).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Keyword arguments: a JSON object (see below).
    #[arg(long, value_name = "JSON")]
    pub kwargs: Option<String>,
    /// Print the result as plain JSON (for scripts): arrays as nested lists,
    /// non-finite floats as "nan"/"inf"/"-inf", bytes as {"base64": …}.
    #[arg(long)]
    pub json: bool,
    /// Also save the result, as an envelope `inspect` reads, to FILE.
    #[arg(long, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
}

/// `discover`: a table of every resource the server hosts, in the server's
/// order; for a relay's URL, its connected hosts.
pub fn discover(args: DiscoverArgs) -> ExitCode {
    run_client(async move {
        let client = match args.client.connect(false).await {
            Ok(client) => client,
            Err(e) if super::shared::is_relay_root(&e) => {
                return Ok(super::relay::discover_hosts(&args.client, args.json).await)
            }
            Err(e) => return Err(e),
        };
        let outcome = client.discover().await;
        let info = client.server_info().clone();
        client.close().await;
        let descriptors = outcome?;
        if args.json {
            let list: Vec<serde_json::Value> = descriptors
                .iter()
                .map(|d| super::pretty::to_plain_json(&Value::Dict(d.raw().clone())))
                .collect();
            super::shared::write_out(format_args!("{}\n", serde_json::Value::Array(list)));
            return Ok(ExitCode::SUCCESS);
        }
        super::shared::write_out(format_args!(
            "{} {} at {}: {} resources\n",
            info.server,
            info.server_version,
            args.client.url,
            descriptors.len()
        ));
        super::shared::write_out(format_args!("{}", resource_table(&descriptors)));
        Ok(ExitCode::SUCCESS)
    })
}

/// The `discover` table: one row per descriptor.
fn resource_table(descriptors: &[std::sync::Arc<Descriptor>]) -> String {
    let header = ["ID", "KIND", "DOMAIN", "REV", "SEQ", "SPACES"];
    let rows: Vec<[String; 6]> = descriptors
        .iter()
        .map(|d| {
            let spaces: Vec<String> = [
                ("action", "action_space"),
                ("observation", "observation_space"),
                ("context", "context_space"),
            ]
            .iter()
            .filter_map(|(label, key)| space_summary(d, key).map(|s| format!("{label} {s}")))
            .collect();
            let spaces = match d.kind() {
                ResourceKind::World => {
                    let dt = d
                        .world_timestep()
                        .map_or_else(|| "-".to_string(), |t| t.to_string());
                    format!("world_timestep {dt}")
                }
                _ if spaces.is_empty() => "-".to_string(),
                _ => spaces.join("; "),
            };
            [
                d.id().to_string(),
                d.kind().as_str().to_string(),
                d.domain_id().to_string(),
                d.revision().to_string(),
                d.sequence().to_string(),
                spaces,
            ]
        })
        .collect();
    pretty::table(header, &rows, [false, false, false, true, true, false])
}

/// `describe`, and when the server answers `not_found` without naming the
/// closest resource ID (the reference's bare "Unknown resource ID"), the
/// closest of the IDs `discover` lists, as our server (and so our Python
/// client) names it: `Unknown resource ID 'cartpol'; did you mean
/// 'cartpole'? Valid: ...`.
pub(crate) async fn describe_suggesting(
    client: &crate::client::Client,
    id: &str,
) -> Result<std::sync::Arc<Descriptor>, ClientError> {
    match client.describe(id).await {
        Err(ClientError::Remote(mut e))
            if e.code == crate::protocol::ErrorCode::NotFound
                && !e.message.contains("did you mean") =>
        {
            if let Ok(all) = client.discover().await {
                let ids: Vec<&str> = all.iter().map(|d| d.id()).collect();
                let hint = crate::server::suggest::valid_list(id, &ids);
                if !hint.is_empty() {
                    e.message = format!("{} '{id}'{hint}", e.message.trim_end_matches('.'));
                }
            }
            Err(ClientError::Remote(e))
        }
        other => other,
    }
}

/// `describe`: one resource's descriptor, readably (spaces summarized,
/// containers indented) or, with `--json`, as the tagged JSON the protocol
/// carries.
pub fn describe(args: DescribeArgs) -> ExitCode {
    run_client(async move {
        let client = args.client.connect(false).await?;
        let outcome = describe_suggesting(&client, &args.id).await;
        client.close().await;
        let descriptor = outcome?;
        if args.json {
            let value = Value::Dict(descriptor.raw().clone());
            let text = header_json(&value).map_err(ClientError::Codec)?;
            super::shared::write_out(format_args!("{}\n", super::pretty::indent_json(&text)));
        } else {
            super::shared::write_out(format_args!("{}", readable_descriptor(&descriptor)));
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// A descriptor as `key  value` lines in the server's order.
fn readable_descriptor(d: &Descriptor) -> String {
    let width = d.raw().keys().map(str::len).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in d.raw().iter() {
        let shown = if key.ends_with("_space") {
            match space_summary(d, key) {
                Some(summary) => {
                    let bounds = match Space::from_value(value) {
                        Ok(Space::Box(b)) => uniform_bounds(&b.low, &b.high),
                        _ => String::new(),
                    };
                    format!("{summary}{bounds}")
                }
                None => "None".to_string(),
            }
        } else if key == "operations" {
            d.operations().join(", ")
        } else if key == "children" {
            if d.children().is_empty() {
                "{}".to_string()
            } else {
                d.children()
                    .iter()
                    .map(|(name, id)| format!("{name} → {id}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        } else if let Value::Str(text) = value {
            text.clone()
        } else {
            indent_continuation(&pretty(value), width + 2)
        };
        let _ = writeln!(out, "{key:<width$}  {shown}");
    }
    out
}

/// ` in [low, high]` when every bound element is the same, else the bounds
/// as lists.
fn uniform_bounds(low: &crate::NdArray, high: &crate::NdArray) -> String {
    let elements = |a: &crate::NdArray| -> Vec<String> {
        (0..a.len()).filter_map(|i| a.format_element(i)).collect()
    };
    let (lo, hi) = (elements(low), elements(high));
    let uniform = |v: &[String]| v.windows(2).all(|w| w[0] == w[1]);
    match (lo.first(), hi.first()) {
        (Some(l), Some(h)) if uniform(&lo) && uniform(&hi) => format!(" in [{l}, {h}]"),
        _ if lo.len() <= 8 => format!(" low [{}] high [{}]", lo.join(", "), hi.join(", ")),
        _ => String::new(),
    }
}

/// Indents every line after the first by `by` spaces.
fn indent_continuation(text: &str, by: usize) -> String {
    text.replace('\n', &format!("\n{}", " ".repeat(by)))
}

/// Which operation a call of `method` on a `kind` resource must run in:
/// `None` for env calls and component reads (and for names the kind does
/// not export, which the server refuses).
pub(crate) fn operation_for(kind: ResourceKind, method: &str) -> Option<OperationKind> {
    if kind == ResourceKind::Env || kind.is_mutation(method) != Some(true) {
        return None;
    }
    Some(match method {
        "reset" | "after_reset" => OperationKind::Reset,
        "reload" | "after_reload" => OperationKind::Reload,
        _ => OperationKind::Step,
    })
}

/// `call`: runs one method and prints its result. Component mutations run
/// inside an operation of the matching kind, in components mode.
pub fn call(args: CallArgs) -> ExitCode {
    let parsed = match parse_json_arguments(args.args.as_deref(), args.kwargs.as_deref()) {
        Ok(parsed) => parsed,
        Err(e) => return super::shared::fail(e),
    };
    let frames: std::sync::Arc<parking_lot::Mutex<Vec<bytes::Bytes>>> = Default::default();
    run_client(async move {
        let mut config = args
            .client
            .config(false)
            .map_err(ClientError::invalid_use)?;
        if args.save.is_some() {
            let frames = frames.clone();
            config.capture = Some(crate::client::Capture::new(move |frame| {
                frames.lock().push(frame.clone())
            }));
        }
        let client = crate::client::Client::connect(&args.client.url, config).await?;
        let before = std::sync::atomic::AtomicUsize::new(0);
        let outcome = async {
            let descriptor = describe_suggesting(&client, &args.id).await?;
            let action_space = descriptor.action_space();
            let call = convert_arguments(&args.method, &parsed, action_space.as_deref())
                .map_err(ClientError::invalid_use)?;
            let (id, method) = (args.id.as_str(), args.method.as_str());
            match operation_for(descriptor.kind(), method) {
                None => {
                    before.store(frames.lock().len(), std::sync::atomic::Ordering::Relaxed);
                    client.call(id, method, call.args, call.kwargs).await
                }
                Some(kind) => {
                    client.acquire(id, Some(Mode::Components)).await?;
                    let outcome = client
                        .with_operation(id, kind, async |op| {
                            eprintln!(
                                "(in a {} operation {} on {})",
                                kind.as_str(),
                                op.id(),
                                op.domain_id()
                            );
                            before.store(frames.lock().len(), std::sync::atomic::Ordering::Relaxed);
                            let result = client.call(id, method, call.args, call.kwargs).await;
                            // The call's own reply, not the completion's.
                            frames
                                .lock()
                                .truncate(before.load(std::sync::atomic::Ordering::Relaxed) + 1);
                            result
                        })
                        .await;
                    if let Err(e) = &outcome {
                        if e.code() == "invalid_operation" && kind.is_reset_family() {
                            eprintln!(
                                "hint: a {} operation completes only when the world's (or the \
                                 detached root's) {} ran in it",
                                kind.as_str(),
                                kind.as_str()
                            );
                        }
                    }
                    outcome
                }
            }
        }
        .await;
        client.close().await;
        if let Some(path) = &args.save {
            // The reply to the call (a response, or the error answering it).
            let start = before.load(std::sync::atomic::Ordering::Relaxed);
            let reply = frames.lock().get(start).cloned();
            match reply {
                Some(frame) => match std::fs::write(path, &frame) {
                    Ok(()) => eprintln!(
                        "saved the reply envelope ({} bytes) to {}; read it with: unienv-remote inspect {}",
                        frame.len(),
                        path.display(),
                        path.display()
                    ),
                    Err(e) => {
                        return Err(ClientError::invalid_use(format!(
                            "cannot write {}: {e}",
                            path.display()
                        )))
                    }
                },
                None => eprintln!("nothing saved: no reply to the call arrived"),
            }
        }
        let value = match outcome {
            Ok(value) => value,
            Err(e) => {
                if e.code() == "invalid_request"
                    && matches!(args.method.as_str(), "step" | "set_next_action")
                    && e.to_string().contains("positional argument")
                {
                    eprintln!(
                        "hint: --args lists the positional arguments; an array action is one argument: --args '[[0.5, -0.5]]'"
                    );
                }
                return Err(e);
            }
        };
        if args.json {
            super::shared::write_out(format_args!("{}\n", super::pretty::to_plain_json(&value)));
        } else {
            super::shared::write_out(format_args!("{}\n", pretty(&value)));
        }
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_by_method() {
        assert_eq!(operation_for(ResourceKind::Env, "reset"), None);
        assert_eq!(operation_for(ResourceKind::Node, "get_observation"), None);
        assert_eq!(operation_for(ResourceKind::Node, "frobnicate"), None);
        assert_eq!(
            operation_for(ResourceKind::Node, "after_reset"),
            Some(OperationKind::Reset)
        );
        assert_eq!(
            operation_for(ResourceKind::World, "reload"),
            Some(OperationKind::Reload)
        );
        assert_eq!(
            operation_for(ResourceKind::World, "step"),
            Some(OperationKind::Step)
        );
        assert_eq!(
            operation_for(ResourceKind::Node, "set_next_action"),
            Some(OperationKind::Step)
        );
    }

    #[test]
    fn bounds() {
        let low = crate::NdArray::from_vec(vec![0i64, 0]);
        let high = crate::NdArray::from_vec(vec![1i64, 1]);
        assert_eq!(uniform_bounds(&low, &high), " in [0, 1]");
        let high = crate::NdArray::from_vec(vec![1i64, 2]);
        assert_eq!(uniform_bounds(&low, &high), " low [0, 0] high [1, 2]");
    }
}
