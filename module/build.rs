//! Links the module with immediate binding (`-z now`): every Envoy callback
//! it calls is resolved when Envoy loads it, so an Envoy without one refuses
//! the module at start, naming the symbol, instead of failing on first use.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
}
