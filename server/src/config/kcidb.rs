//! Where finished pairs go as KCIDB documents (`KBOT_KCIDB_*`), loaded once
//! with the rest of [`crate::config::Config`].

/// Flags of `kbot-server serve` for sending KCIDB documents.
#[derive(Debug, Clone, clap::Args)]
pub struct KcidbArgs {
    /// A KCIDB submission endpoint (kcidb-ng's REST `POST /submit`, e.g.
    /// `https://db.kernelci.org/submit`): every finished submission is sent
    /// there once as a KCIDB v5 document. Unset: documents are only served
    /// (`GET /api/v1/submissions/{id}/kcidb`).
    #[arg(long = "kcidb-url", env = "KBOT_KCIDB_URL")]
    pub url: Option<String>,
    /// The bearer token the KCIDB endpoint gave this origin.
    #[arg(long = "kcidb-token", env = "KBOT_KCIDB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Sending KCIDB documents.
#[derive(Clone, Default)]
pub struct KcidbConfig {
    /// The submission endpoint; `None`: nothing is sent.
    pub url: Option<String>,
    pub token: Option<String>,
}

// The token never reaches a log line.
impl std::fmt::Debug for KcidbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KcidbConfig")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl From<KcidbArgs> for KcidbConfig {
    fn from(args: KcidbArgs) -> KcidbConfig {
        KcidbConfig {
            url: args.url.filter(|u| !u.trim().is_empty()),
            token: args.token.filter(|t| !t.is_empty()),
        }
    }
}
