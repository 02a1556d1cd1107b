//! Where each part of a fleet listens: the documented layout from a base
//! port, or free ports.

use ankusa_testkit::ports::{free_port, is_listening};

/// Most edges one fleet starts (ports P+10 … P+10·N+1 must fit).
pub const MAX_EDGES: usize = 64;

/// Where each part listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ports {
    pub redis: u16,
    pub store: u16,
    pub intake: u16,
    /// (listener, admin) per edge, edge-1 first.
    pub edges: Vec<(u16, u16)>,
}

impl Ports {
    /// The documented layout from `base` (see the module docs).
    pub fn from_base(base: u16, edges: usize) -> Result<Ports, String> {
        if edges == 0 || edges > MAX_EDGES {
            return Err(format!("--edges must be in 1..={MAX_EDGES}, got {edges}"));
        }
        let top = u32::from(base) + 10 * edges as u32 + 1;
        if base < 1024 || top > 65_535 {
            return Err(format!(
                "--base-port {base} with {edges} edges needs ports {base}..={top}: keep them in 1024..=65535"
            ));
        }
        Ok(Ports {
            redis: base,
            store: base + 1,
            intake: base + 2,
            edges: (1..=edges as u16)
                .map(|i| (base + 10 * i, base + 10 * i + 1))
                .collect(),
        })
    }

    pub fn free(edges: usize) -> Ports {
        Ports {
            redis: free_port(),
            store: free_port(),
            intake: free_port(),
            edges: (0..edges).map(|_| (free_port(), free_port())).collect(),
        }
    }

    /// Every port with what it is for, in start order.
    pub fn named(&self) -> Vec<(String, u16)> {
        let mut all = vec![
            ("redis".to_string(), self.redis),
            ("store".into(), self.store),
            ("intake".into(), self.intake),
        ];
        for (i, (listen, admin)) in self.edges.iter().enumerate() {
            all.push((format!("edge-{} listener", i + 1), *listen));
            all.push((format!("edge-{} admin", i + 1), *admin));
        }
        all
    }

    /// Err naming the first port something already listens on.
    pub fn check_free(&self) -> Result<(), String> {
        match self
            .named()
            .into_iter()
            .find(|(_, port)| is_listening(*port))
        {
            Some((what, port)) => Err(format!("port {port} ({what}) is already in use")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_the_documented_layout() {
        let ports = Ports::from_base(20_000, 2).expect("valid");
        assert_eq!(
            ports,
            Ports {
                redis: 20_000,
                store: 20_001,
                intake: 20_002,
                edges: vec![(20_010, 20_011), (20_020, 20_021)]
            }
        );
        let err = Ports::from_base(65_500, 4).expect_err("past 65535");
        assert!(err.contains("65500") && err.contains("65541"), "{err}");
        assert!(Ports::from_base(20_000, 0)
            .expect_err("no edges")
            .contains("--edges"));
    }
}
