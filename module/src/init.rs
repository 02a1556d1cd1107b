//! The module's load-time hook, exported by both builds (the module and the
//! benchmark's floors): the ABI version for Envoy's check. Its only
//! `unsafe` is the export itself (`#[no_mangle]`).

use crate::abi::{self, ABI_VERSION, LOG_ERROR};

/// The module's ABI version, for Envoy's check at load. A build whose panics
/// abort (the workspace's `release` profile, not `release-native`) could
/// not fail a hook closed: it refuses to load instead (null), saying why.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const u8 {
    if cfg!(panic = "abort") {
        abi::log(
            LOG_ERROR,
            "ankusa: this libankusa_module.so was built with panic = \"abort\"; build it with \
             `cargo build -p ankusa-module --profile release-native`",
        );
        return std::ptr::null();
    }
    ABI_VERSION.as_ptr()
}
