//! This edge's name in claims, from Envoy's node id.

use crate::wire::MAX_NAME_LEN;

/// A node id (`--service-node`) as a wire name: characters outside
/// `[A-Za-z0-9_.-]` become `-`, at most 64 bytes, "edge" if there is none.
pub fn wire_name(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(MAX_NAME_LEN)
        .collect();
    if clean.is_empty() {
        "edge".to_string()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn envoy_node_ids_become_wire_names() {
        assert_eq!(wire_name("edge-1"), "edge-1");
        assert_eq!(wire_name("pod/edge 1"), "pod-edge-1");
        assert_eq!(wire_name(""), "edge");
        assert_eq!(wire_name(&"x".repeat(80)).len(), 64);
    }
}
