//! Settings of the web sign-in (`KBOT_*`), loaded once with the rest of
//! [`crate::config::Config`].

use std::time::Duration;

use ipnet::IpNet;

use super::proxy::{parse_proxy, TrustedProxies};

/// Flags of `kbot-server serve` for dashboard sign-in.
#[derive(Debug, Clone, clap::Args)]
pub struct AccessArgs {
    /// Reading needs sign-in too: every page and every API read (a session
    /// or a user token). Off: reading is open, changing needs sign-in.
    #[arg(
        long = "read-requires-sign-in",
        env = "KBOT_READ_REQUIRES_SIGN_IN",
        default_value_t = false
    )]
    pub read_requires_sign_in: bool,
    /// Anyone may fetch the mirrors over `/git/` (git's dumb HTTP). Off: an
    /// agent token, a user token (both as `Authorization: Bearer`) or a
    /// session is needed, whether or not reading needs sign-in.
    #[arg(long = "git-public", env = "KBOT_GIT_PUBLIC", default_value_t = false)]
    pub git_public: bool,
    /// Mark the session cookie `Secure` (browsers then send it over HTTPS
    /// only). Default: on when `KBOT_PUBLIC_URL` starts with `https://`.
    #[arg(long = "secure-cookies", env = "KBOT_SECURE_COOKIES")]
    pub secure_cookies: Option<bool>,
    /// How long a web session lasts after sign-in.
    #[arg(
        long = "session-hours",
        env = "KBOT_SESSION_HOURS",
        default_value_t = 168
    )]
    pub session_hours: u32,
    /// Failed sign-ins allowed per client address, and per user name, within
    /// the window; further attempts get 429 until the window has passed.
    #[arg(
        long = "sign-in-attempts",
        env = "KBOT_SIGN_IN_ATTEMPTS",
        default_value_t = 10
    )]
    pub sign_in_attempts: u32,
    #[arg(
        long = "sign-in-window-secs",
        env = "KBOT_SIGN_IN_WINDOW_SECS",
        default_value_t = 900
    )]
    pub sign_in_window_secs: u32,
    /// Where the submit page finds its example job files.
    #[arg(long = "jobs-dir", env = "KBOT_JOBS_DIR", default_value = "./jobs")]
    pub jobs_dir: std::path::PathBuf,
    /// Reverse proxies (addresses or CIDR networks, comma-separated) whose
    /// X-Forwarded-For names the client, for the per-address sign-in limit.
    /// None by default: the header is then never believed.
    #[arg(
        long = "trusted-proxies",
        env = "KBOT_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_proxy
    )]
    pub trusted_proxies: Vec<IpNet>,
}

/// The sign-in settings the server runs with.
#[derive(Debug, Clone)]
pub struct AccessConfig {
    pub read_requires_sign_in: bool,
    pub git_public: bool,
    pub secure_cookies: bool,
    pub session_ttl: Duration,
    pub sign_in_attempts: u32,
    pub sign_in_window: Duration,
    pub jobs_dir: std::path::PathBuf,
    pub trusted_proxies: TrustedProxies,
}

impl AccessConfig {
    /// Reading open, `/git/` closed to the anonymous, plain-HTTP cookies, a week's sessions, 10 failures per
    /// 15 minutes, examples from `./jobs`.
    pub fn open() -> AccessConfig {
        AccessConfig {
            read_requires_sign_in: false,
            git_public: false,
            secure_cookies: false,
            session_ttl: Duration::from_secs(168 * 3600),
            sign_in_attempts: 10,
            sign_in_window: Duration::from_secs(900),
            jobs_dir: "./jobs".into(),
            trusted_proxies: TrustedProxies::default(),
        }
    }

    /// `public_url` is `KBOT_PUBLIC_URL`: behind TLS, cookies are `Secure`
    /// unless the operator says otherwise.
    pub fn from_args(a: AccessArgs, public_url: Option<&str>) -> AccessConfig {
        let behind_tls = public_url.is_some_and(|u| u.trim().starts_with("https://"));
        AccessConfig {
            read_requires_sign_in: a.read_requires_sign_in,
            git_public: a.git_public,
            secure_cookies: a.secure_cookies.unwrap_or(behind_tls),
            session_ttl: Duration::from_secs(u64::from(a.session_hours.max(1)) * 3600),
            sign_in_attempts: a.sign_in_attempts.max(1),
            sign_in_window: Duration::from_secs(u64::from(a.sign_in_window_secs.max(1))),
            jobs_dir: a.jobs_dir,
            trusted_proxies: TrustedProxies(a.trusted_proxies),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        access: AccessArgs,
    }

    fn parse(args: &[&str], public_url: Option<&str>) -> AccessConfig {
        let cli = Cli::try_parse_from(std::iter::once("kbot").chain(args.iter().copied()))
            .expect("flags parse");
        AccessConfig::from_args(cli.access, public_url)
    }

    #[test]
    fn cookies_are_secure_behind_tls_unless_told_otherwise() {
        assert!(!parse(&[], None).secure_cookies);
        assert!(!parse(&[], Some("http://kbot:8080")).secure_cookies);
        assert!(parse(&[], Some("https://kbot.example.org")).secure_cookies);
        let explicit = parse(&["--secure-cookies", "false"], Some("https://kbot"));
        assert!(!explicit.secure_cookies);
        assert!(parse(&["--secure-cookies", "true"], None).secure_cookies);
    }

    #[test]
    fn no_proxy_is_trusted_unless_listed() {
        assert_eq!(parse(&[], None).trusted_proxies, TrustedProxies::default());
        let listed = parse(&["--trusted-proxies", "10.0.0.1,fd00::/8"], None);
        let nets: Vec<String> = listed
            .trusted_proxies
            .0
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(nets, ["10.0.0.1/32", "fd00::/8"]);
        let cli = Cli::try_parse_from(["kbot", "--trusted-proxies", "proxy.example"]);
        assert!(cli.is_err(), "a name is refused at start-up");
    }

    #[test]
    fn reading_is_open_by_default_and_git_is_not() {
        assert!(!parse(&[], None).read_requires_sign_in);
        assert!(!parse(&[], None).git_public);
        assert!(parse(&["--git-public"], None).git_public);
        assert!(parse(&["--read-requires-sign-in"], None).read_requires_sign_in);
    }
}
