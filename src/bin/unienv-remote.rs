//! The `unienv-remote` command line tool.
use unienv_remote::server::{Server, ServerConfig};

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8765".into());
    let mut builder = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start();
    let listener = server.listen(addr.as_str()).await.expect("listen");
    println!("{}", listener.url());
    tokio::signal::ctrl_c().await.ok();
    server.shutdown().await;
}
