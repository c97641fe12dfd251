//! What a machine does for the lab (`--roles`, `KBOT_AGENT_ROLES`): build
//! kernels, test them, or both. The daemon leases build orders with the
//! build role and jobs with the test role; a machine without the build role
//! gets only jobs whose kernel a builder made.

/// The agent's roles (`--roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub build: bool,
    pub test: bool,
}

/// `build`, `test` or both, comma-separated.
pub fn parse_roles(s: &str) -> std::result::Result<Roles, String> {
    let mut roles = Roles {
        build: false,
        test: false,
    };
    for role in s.split(',').map(str::trim) {
        match role {
            "build" => roles.build = true,
            "test" => roles.test = true,
            other => return Err(format!("unknown role {other:?}: give build, test or both")),
        }
    }
    if roles.build || roles.test {
        Ok(roles)
    } else {
        Err("give at least one role: build, test".into())
    }
}
