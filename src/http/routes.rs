//! The first path segments of the gateway's own routes, in one list ([`OWN`]): the router
//! (`crate::http::router`) mounts its routes under these, and `copilotkit.base_path` may
//! start with none of them (`crate::config`), so a CopilotKit mount never shadows a route.
//! Tests hold the list to the routes the OpenAPI description names and to the router (each
//! segment is routed).

/// Every first segment the router mounts a route under, the CopilotKit routes aside.
pub(crate) const OWN: [&str; 8] = [
    "agents",
    "threads",
    "healthz",
    "readyz",
    "metrics",
    "openapi.json",
    "console",
    "a2a",
];

/// Whether `path`'s first segment is one of the gateway's own ([`OWN`]).
pub(crate) fn is_own(path: &str) -> bool {
    OWN.contains(&first_segment(path))
}

/// `agents` of `/agents/{name}`.
fn first_segment(path: &str) -> &str {
    let path = path.strip_prefix('/').unwrap_or(path);
    path.split('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the OpenAPI description names starts with a segment of [`OWN`] or is a
    /// CopilotKit route (under its default base path), and each of [`OWN`] starts one.
    #[test]
    fn the_list_is_the_first_segments_of_the_described_routes() {
        let spec: serde_json::Value = serde_json::from_str(super::super::OPENAPI).unwrap();
        let paths: Vec<&String> = spec["paths"].as_object().unwrap().keys().collect();
        let base = crate::config::CopilotKitConfig::default().base_path;
        for path in &paths {
            assert!(
                is_own(path) || path.starts_with(&base),
                "{path} starts with no segment of routes::OWN"
            );
        }
        for segment in OWN {
            assert!(
                paths.iter().any(|p| first_segment(p) == segment),
                "no described route starts with /{segment}"
            );
        }
    }
}
