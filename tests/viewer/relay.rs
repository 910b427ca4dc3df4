//! The viewer in front of a relay, in headless Chromium: the hosts page
//! links each host, and a host's page (`/hosts/NAME/`) opens its socket
//! beside it (`/hosts/NAME/ws`), lists the host's resources through the
//! relay and draws a panel of one.

use crate::support::{chromium, Browser};
use std::time::Duration;
use unienv_remote::relay::{Relay, RelayConfig};
use unienv_remote::server::DialOptions;
use unienv_remote::viewer::{Viewer, ViewerConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_behind_a_relay_is_listed_and_watched_in_chromium() {
    let Some(chrome) = chromium() else { return };
    let relay = Relay::start("127.0.0.1:0", RelayConfig::default())
        .await
        .expect("relay");
    let host = crate::common::fixture_server();
    let dial = host
        .dial(&relay.url(), DialOptions::new("sim1"))
        .expect("dial");
    assert!(dial.wait_registered(Duration::from_secs(60)).await);
    let mut config = ViewerConfig::new(relay.url());
    config.relay = true;
    let viewer = Viewer::start("127.0.0.1:0", config).await.expect("viewer");

    let mut browser = Browser::open(&chrome, &viewer.url()).await;
    browser
        .wait_for(
            "the host's link on the hosts page",
            "!!document.querySelector('a.host[href=\"/hosts/sim1/\"]')",
        )
        .await;
    drop(browser);

    let page = format!("{}hosts/sim1/?watch=counter", viewer.url());
    let mut browser = Browser::open(&chrome, &page).await;
    browser
        .wait_for(
            "counter in the host's resource tree",
            "!!document.querySelector('li[data-id=\"counter\"] .name')",
        )
        .await;
    browser
        .wait_for(
            "a panel of counter",
            "!!document.querySelector('.panel[data-resource=\"counter\"]')",
        )
        .await;
    drop(browser);
    viewer.stop();
    dial.stop();
    host.shutdown().await;
    relay.shutdown().await;
}
