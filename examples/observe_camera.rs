//! Run: start a server (`unienv-remote serve`, after `cargo install --path .`), drive `pointmass` from another client (e.g. `unienv-remote bench ws://127.0.0.1:8765 pointmass --seconds 60`), then `cargo run --example observe_camera [URL] [FRAMES]` (default `ws://127.0.0.1:8765`, 50 frames).
//!
//! An observer: subscribes to the camera node `pointmass/node/camera` (no
//! control needed; latest wins, so a slow observer never slows the
//! controller) and prints statistics of each frame it receives: mean per
//! colour channel, how many pixels changed since the previous frame, where
//! the red body and the green goal are, and how many boundaries it skipped.

use std::time::Duration;
use unienv_remote::client::{blocking, ClientConfig, ClientError};

const CAMERA: &str = "pointmass/node/camera";

/// The centroid (column, row) of the pixels for which `is` holds.
fn centroid(pixels: &[u8], width: usize, is: impl Fn(&[u8]) -> bool) -> Option<(f64, f64)> {
    let (mut sx, mut sy, mut n) = (0.0, 0.0, 0.0);
    for (i, p) in pixels.chunks_exact(3).enumerate() {
        if is(p) {
            sx += (i % width) as f64;
            sy += (i / width) as f64;
            n += 1.0;
        }
    }
    (n > 0.0).then(|| (sx / n, sy / n))
}

/// Prints an error readably (`error: …`, not Rust's debug form) and exits 1.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "ws://127.0.0.1:8765".into());
    let frames: u64 = args.next().map(|n| n.parse()).transpose()?.unwrap_or(50);
    let client = blocking::Client::connect(&url, ClientConfig::default().with_discover(false))?;
    let mut subscription = client.subscribe(CAMERA, Some(&["observation"]))?;
    println!(
        "observing {CAMERA} on {url}; waiting for boundaries. An observer only watches: drive \
         pointmass beside it, e.g. `unienv-remote bench {url} pointmass --seconds 60`"
    );
    let mut last_sequence = None;
    let mut previous: Option<Vec<u8>> = None;
    let mut received = 0;
    while received < frames {
        let event = match subscription.next(Some(Duration::from_secs(30))) {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(ClientError::Timeout(_)) => {
                println!("no boundary for 30 s; still waiting");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        received += 1;
        let skipped = last_sequence.map_or(0, |last: u64| event.sequence.saturating_sub(last + 1));
        last_sequence = Some(event.sequence);
        let Some(image) = event.data.get("observation").and_then(|v| v.as_array()) else {
            println!("#{} {}: no observation", event.sequence, event.kind);
            continue;
        };
        let &[height, width, 3] = image.shape() else {
            println!(
                "#{}: unexpected image shape {:?}",
                event.sequence,
                image.shape()
            );
            continue;
        };
        let pixels = image.to_vec::<u8>()?;
        let mut sums = [0u64; 3];
        for p in pixels.chunks_exact(3) {
            for (s, &c) in sums.iter_mut().zip(p) {
                *s += u64::from(c);
            }
        }
        let changed = previous.as_ref().map(|before| {
            before
                .chunks_exact(3)
                .zip(pixels.chunks_exact(3))
                .filter(|(a, b)| a != b)
                .count()
        });
        let n = (width * height) as f64;
        let body = centroid(&pixels, width, |p| p[0] > 150 && p[1] < 100 && p[2] < 100);
        let goal = centroid(&pixels, width, |p| p[1] > 150 && p[0] < 100 && p[2] < 100);
        let at =
            |c: Option<(f64, f64)>| c.map_or("-".into(), |(x, y)| format!("({x:4.1}, {y:4.1})"));
        println!(
            "#{:<6} {:<6} {width}x{height}  mean RGB ({:5.1}, {:5.1}, {:5.1})  changed {:>5} px  body {}  goal {}{}",
            event.sequence,
            event.kind,
            sums[0] as f64 / n,
            sums[1] as f64 / n,
            sums[2] as f64 / n,
            changed.map_or("-".into(), |c| c.to_string()),
            at(body),
            at(goal),
            if skipped > 0 { format!("  (+{skipped} skipped)") } else { String::new() },
        );
        previous = Some(pixels);
    }
    subscription.unsubscribe()?;
    client.close();
    Ok(())
}
