//! Generates the C header from the crate's `extern "C"` items into
//! `OUT_DIR/unienv_remote.h`. The checked-in `include/unienv_remote.h` must
//! equal it: `cargo test -p unienv-remote-capi` fails otherwise, and
//! `UNIENV_BLESS_HEADER=1 cargo build -p unienv-remote-capi` (or
//! `make -C examples/c header`) rewrites it.

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("unienv_remote.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("capi/cbindgen.toml is readable");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=UNIENV_BLESS_HEADER");
    match cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(&out);
            if std::env::var_os("UNIENV_BLESS_HEADER").is_some() {
                let checked_in = crate_dir.join("../include/unienv_remote.h");
                bindings.write_to_file(checked_in);
            }
        }
        // A source that does not parse yet: rustc reports the real error.
        Err(e) => println!("cargo:warning=cbindgen could not generate the header: {e}"),
    }
}
