use super::*;

#[test]
fn histogram_buckets_are_monotonic_and_tight() {
    let mut last = 0;
    for v in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 65_535, 1 << 40] {
        let i = Histogram::index(v);
        assert!(i >= last, "{v}");
        last = i;
        let low = Histogram::lower_bound(i);
        assert!(low <= v && v - low <= v / 16, "{v}: bucket starts at {low}");
    }
    let mut h = Histogram::new();
    for v in 1..=1000 {
        h.record(v);
    }
    let p50 = h.percentile(50.0);
    assert!((500..=531).contains(&p50), "{p50}");
    assert_eq!(h.percentile(100.0), 1000);
}

#[test]
fn only_loopback_urls_are_loaded() {
    for ok in [
        "ws://127.0.0.1:8765",
        "ws://localhost:1",
        "ws://[::1]:9",
        "ws://127.1.2.3:5",
        // TLS to loopback is still loopback.
        "wss://127.0.0.1:1",
    ] {
        assert!(loopback_url(ok).is_ok(), "{ok}");
    }
    for bad in [
        "ws://10.0.0.1:8765",
        "ws://192.168.1.2:1",
        "ws://example.com:80",
        "wss://example.com:443",
        "http://127.0.0.1:1",
    ] {
        assert!(loopback_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn arguments_are_bounded() {
    let args = LoadArgs {
        seconds: 1.0,
        controllers: 1,
        observers: 0,
        pipeline: 4,
        url: None,
        envs: Vec::new(),
        token: None,
        token_file: None,
        max_rss_growth_mib: 64.0,
        max_rss_mib: None,
        hostile: 0,
        hostile_mib: 16,
        hostile_kinds: Vec::new(),
    };
    assert!(validate(&args).is_ok());
    for bad in [
        LoadArgs {
            hostile: 129,
            ..args.clone()
        },
        LoadArgs {
            hostile_mib: 0,
            ..args.clone()
        },
        LoadArgs {
            hostile_kinds: vec!["nope".into()],
            ..args.clone()
        },
        LoadArgs {
            seconds: 0.0,
            ..args.clone()
        },
        LoadArgs {
            seconds: f64::INFINITY,
            ..args.clone()
        },
        LoadArgs {
            controllers: 0,
            ..args.clone()
        },
        LoadArgs {
            controllers: MAX_CONTROLLERS + 1,
            ..args.clone()
        },
        LoadArgs {
            observers: MAX_OBSERVERS + 1,
            ..args.clone()
        },
        LoadArgs {
            pipeline: 65,
            ..args.clone()
        },
        LoadArgs {
            url: Some("ws://127.0.0.1:1".into()),
            ..args.clone()
        },
        LoadArgs {
            url: Some("ws://8.8.8.8:1".into()),
            envs: vec!["counter".into()],
            ..args.clone()
        },
    ] {
        assert!(validate(&bad).is_err(), "{bad:?}");
    }
}
