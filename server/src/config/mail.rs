//! Mail settings: SMTP relay, the robot's identity and texts, recipients.
//! Loaded once from flags and `KBOT_MAIL_*` / `KBOT_SMTP_*` variables.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use kbot_core::report::{ReportConfig, DEFAULT_DISCLAIMER, DEFAULT_SIGNATURE};

/// A report's default wait for sibling findings: a bisection on another
/// tbox group of the same range usually ends within minutes of the first.
pub const DEFAULT_GATHER_SECS: u64 = 600;

/// Flags of `kbot-server serve` for reports and their delivery.
#[derive(Debug, Clone, clap::Args)]
pub struct MailArgs {
    /// Queue and send reports at all. Off: nothing is queued.
    #[arg(
        long = "mail-enabled",
        env = "KBOT_MAIL_ENABLED",
        default_value_t = false
    )]
    pub enabled: bool,
    /// SMTP relay host.
    #[arg(
        long = "smtp-host",
        env = "KBOT_SMTP_HOST",
        default_value = "127.0.0.1"
    )]
    pub smtp_host: String,
    #[arg(long = "smtp-port", env = "KBOT_SMTP_PORT", default_value_t = 25)]
    pub smtp_port: u16,
    /// Require STARTTLS before authenticating and sending.
    #[arg(
        long = "smtp-starttls",
        env = "KBOT_SMTP_STARTTLS",
        default_value_t = false
    )]
    pub smtp_starttls: bool,
    #[arg(long = "smtp-user", env = "KBOT_SMTP_USER", requires = "smtp_password")]
    pub smtp_user: Option<String>,
    #[arg(
        long = "smtp-password",
        env = "KBOT_SMTP_PASSWORD",
        hide_env_values = true,
        requires = "smtp_user"
    )]
    pub smtp_password: Option<String>,
    /// Display name of the robot (`From:`, `Reported-by:`, the opening line).
    #[arg(
        long = "mail-from-name",
        env = "KBOT_MAIL_FROM_NAME",
        default_value = "kernel test robot"
    )]
    pub from_name: String,
    #[arg(
        long = "mail-from",
        env = "KBOT_MAIL_FROM",
        default_value = "kbot@localhost"
    )]
    pub from_address: String,
    /// Prefix of the `Closes:` link (a list archive); the Message-ID is
    /// appended. Default: the public URL's `/reports`.
    #[arg(long = "mail-archive-url", env = "KBOT_MAIL_ARCHIVE_URL")]
    pub archive_url: Option<String>,
    /// This server's public URL; the reproduction link points into it.
    /// Default: `http://` and the bind address (the host name when bound to
    /// every interface).
    #[arg(long = "public-url", env = "KBOT_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Replaces kbot's default disclaimer.
    #[arg(long = "mail-disclaimer", env = "KBOT_MAIL_DISCLAIMER")]
    pub disclaimer: Option<String>,
    /// Replaces kbot's default signature.
    #[arg(long = "mail-signature", env = "KBOT_MAIL_SIGNATURE")]
    pub signature: Option<String>,
    /// Per-repo recipient lists: `repo=addr,addr;repo2=addr`.
    #[arg(long = "mail-repo-lists", env = "KBOT_MAIL_REPO_LISTS", default_value = "", value_parser = parse_repo_lists)]
    pub repo_lists: RepoLists,
    /// Copy the committer of the reported commit.
    #[arg(long = "mail-cc-committer", env = "KBOT_MAIL_CC_COMMITTER", default_value_t = true, action = clap::ArgAction::Set)]
    pub cc_committer: bool,
    /// Also report improvements (many developers find them noise).
    #[arg(
        long = "mail-report-improvements",
        env = "KBOT_MAIL_REPORT_IMPROVEMENTS",
        default_value_t = false
    )]
    pub report_improvements: bool,
    /// First retry delay; doubles per attempt up to the maximum.
    #[arg(
        long = "mail-retry-base-secs",
        env = "KBOT_MAIL_RETRY_BASE_SECS",
        default_value_t = 30
    )]
    pub retry_base_secs: u64,
    /// How long a report waits before it is sent, so that the same culprit
    /// found on other tbox groups and jobs joins it as a section of one mail
    /// (0-day's reports gather every test box that saw the commit).
    #[arg(
        long = "mail-gather-secs",
        env = "KBOT_MAIL_GATHER_SECS",
        default_value_t = DEFAULT_GATHER_SECS
    )]
    pub gather_secs: u64,
    #[arg(
        long = "mail-retry-max-secs",
        env = "KBOT_MAIL_RETRY_MAX_SECS",
        default_value_t = 3600
    )]
    pub retry_max_secs: u64,
    /// Most mails handed to the relay in any hour (reports and answers);
    /// over it a mail stays pending and goes later, never dropped.
    #[arg(
        long = "mail-max-per-hour",
        env = "KBOT_MAIL_MAX_PER_HOUR",
        default_value_t = DEFAULT_MAX_PER_HOUR
    )]
    pub max_per_hour: u32,
    /// Most answers handed to the relay per list thread in any hour.
    #[arg(
        long = "mail-max-per-thread-hour",
        env = "KBOT_MAIL_MAX_PER_THREAD_HOUR",
        default_value_t = DEFAULT_MAX_PER_THREAD_HOUR
    )]
    pub max_per_thread_hour: u32,
    /// Most recipients of an answer in a list thread (To and Cc).
    #[arg(
        long = "mail-max-recipients",
        env = "KBOT_MAIL_MAX_RECIPIENTS",
        default_value_t = DEFAULT_MAX_RECIPIENTS
    )]
    pub max_recipients: u32,
    /// `#kbot retest`s a stranger (no role, or no DKIM pass) may have acted
    /// on per regression in a day, counting everyone's retests.
    #[arg(
        long = "mail-stranger-retests-per-day",
        env = "KBOT_MAIL_STRANGER_RETESTS_PER_DAY",
        default_value_t = DEFAULT_STRANGER_RETESTS_PER_DAY
    )]
    pub stranger_retests_per_day: u32,
    /// DKIM keys pinned instead of looked up in DNS:
    /// `SELECTOR._domainkey.DOMAIN=TXT-RECORD;...` (a local archive whose
    /// signer has no public key in DNS; tests).
    #[arg(long = "mail-dkim-keys", env = "KBOT_MAIL_DKIM_KEYS", default_value = "", value_parser = parse_dkim_keys)]
    pub dkim_keys: DkimKeys,
}

/// syzbot's global limit: 60 mails an hour.
pub const DEFAULT_MAX_PER_HOUR: u32 = 60;
pub const DEFAULT_MAX_PER_THREAD_HOUR: u32 = 10;
pub const DEFAULT_MAX_RECIPIENTS: u32 = 20;
pub const DEFAULT_STRANGER_RETESTS_PER_DAY: u32 = 2;

/// DKIM key records by their DNS name (`SELECTOR._domainkey.DOMAIN`,
/// lowercase), consulted before DNS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DkimKeys(pub BTreeMap<String, String>);

/// `NAME=RECORD;NAME=RECORD` → map. A record has `;` of its own (`v=DKIM1;
/// k=rsa; p=...`), so a `;` starts a new entry only before a
/// `SELECTOR._domainkey.DOMAIN=`.
pub fn parse_dkim_keys(spec: &str) -> Result<DkimKeys, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for piece in spec.split(';') {
        let starts_entry = piece
            .split_once('=')
            .is_some_and(|(name, _)| name.trim().contains("._domainkey."));
        if starts_entry {
            if let Some((n, r)) = current.take() {
                out.insert(n, r);
            }
            let (name, record) = piece.split_once('=').unwrap_or_default();
            current = Some((name.trim().to_ascii_lowercase(), record.trim().to_owned()));
        } else if let Some((_, r)) = current.as_mut() {
            r.push(';');
            r.push_str(piece);
        } else if !piece.trim().is_empty() {
            return Err(format!(
                "DKIM key {piece:?} is not SELECTOR._domainkey.DOMAIN=RECORD"
            ));
        }
    }
    if let Some((n, r)) = current {
        out.insert(n, r.trim().trim_end_matches(';').to_owned());
    }
    Ok(DkimKeys(out))
}

/// The SMTP relay and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub starttls: bool,
    /// User and password, when the relay wants AUTH.
    pub credentials: Option<(String, String)>,
    /// Per SMTP command; a hung relay costs one attempt, not the sender task.
    pub timeout: Duration,
}

/// Everything about reports and their delivery.
#[derive(Debug, Clone)]
pub struct MailConfig {
    pub enabled: bool,
    pub smtp: SmtpSettings,
    pub report: ReportConfig,
    /// Repo name → addresses copied on every report of that repo.
    pub repo_lists: BTreeMap<String, Vec<String>>,
    pub cc_committer: bool,
    pub report_improvements: bool,
    pub retry_base: Duration,
    pub retry_max: Duration,
    /// How long a new report waits for other findings of its culprit.
    pub gather: Duration,
    /// How often an idle sender looks for due reports.
    pub poll_interval: Duration,
    /// How long a claimed report stays claimed; a sender that died loses it after this.
    pub claim_ttl: Duration,
    /// This server's public URL (`url:` lines point into its git).
    pub public_url: String,
    /// Most mails handed to the relay per hour; the rest wait.
    pub max_per_hour: u32,
    /// Most answers per list thread per hour; the rest wait.
    pub max_per_thread_hour: u32,
    /// Most recipients of an answer.
    pub max_recipients: u32,
    /// A stranger's `#kbot retest`s per regression and day.
    pub stranger_retests_per_day: u32,
    /// DKIM keys pinned instead of looked up in DNS.
    pub dkim_keys: DkimKeys,
}

impl MailConfig {
    /// The server's own git of repository `repo` (`/git/REPO.git`), where
    /// the series kbot applied can be fetched.
    pub fn git_url(&self, repo: &str) -> String {
        format!("{}/git/{repo}.git", self.public_url)
    }

    /// Mail off; every other setting at its default.
    pub fn disabled() -> MailConfig {
        MailConfig {
            enabled: false,
            smtp: SmtpSettings {
                host: "127.0.0.1".into(),
                port: 25,
                starttls: false,
                credentials: None,
                timeout: Duration::from_secs(60),
            },
            report: report_config(
                "kernel test robot",
                "kbot@localhost",
                "http://127.0.0.1:8080/reports",
                "http://127.0.0.1:8080",
            ),
            repo_lists: BTreeMap::new(),
            cc_committer: true,
            report_improvements: false,
            retry_base: Duration::from_secs(30),
            retry_max: Duration::from_secs(3600),
            gather: Duration::from_secs(DEFAULT_GATHER_SECS),
            poll_interval: Duration::from_secs(5),
            claim_ttl: Duration::from_secs(300),
            public_url: "http://127.0.0.1:8080".into(),
            max_per_hour: DEFAULT_MAX_PER_HOUR,
            max_per_thread_hour: DEFAULT_MAX_PER_THREAD_HOUR,
            max_recipients: DEFAULT_MAX_RECIPIENTS,
            stranger_retests_per_day: DEFAULT_STRANGER_RETESTS_PER_DAY,
            dkim_keys: DkimKeys::default(),
        }
    }

    /// Delay before attempt `attempts + 1`: base·2^(attempts−1), capped.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let factor = 1u32 << attempts.saturating_sub(1).min(20);
        self.retry_base.saturating_mul(factor).min(self.retry_max)
    }
}

fn report_config(name: &str, address: &str, archive_url: &str, public_url: &str) -> ReportConfig {
    ReportConfig {
        robot_name: name.into(),
        robot_address: address.into(),
        message_id_domain: address.into(),
        archive_url: archive_url.into(),
        materials_url: format!("{}/archive", public_url.trim_end_matches('/')),
        disclaimer: DEFAULT_DISCLAIMER.into(),
        signature: DEFAULT_SIGNATURE.into(),
    }
}

/// Repo name → addresses, as parsed from `KBOT_MAIL_REPO_LISTS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoLists(pub BTreeMap<String, Vec<String>>);

/// `repo=a@x,b@y;repo2=c@z` → map; blank entries are ignored.
pub fn parse_repo_lists(spec: &str) -> Result<RepoLists, String> {
    let mut out = BTreeMap::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (repo, addrs) = entry
            .split_once('=')
            .ok_or_else(|| format!("repo list {entry:?} is not repo=addr,addr"))?;
        let addrs: Vec<String> = addrs
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        if let Some(bad) = addrs.iter().find(|a| !a.contains('@')) {
            return Err(format!("{bad:?} in the list of {repo} is not an address"));
        }
        out.insert(repo.trim().to_owned(), addrs);
    }
    Ok(RepoLists(out))
}

/// The URL people reach a server bound to `bind` at.
pub fn default_public_url(bind: SocketAddr) -> String {
    if bind.ip().is_unspecified() {
        // Bound to every interface: the machine's name is what others use.
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        format!("http://{host}:{}", bind.port())
    } else {
        format!("http://{bind}")
    }
}

impl MailConfig {
    /// The settings from flags and variables; links default from the public
    /// URL, and the public URL from the address the server binds.
    pub fn from_args(a: MailArgs, bind: SocketAddr) -> MailConfig {
        let public_url = a.public_url.unwrap_or_else(|| default_public_url(bind));
        let archive_url = a
            .archive_url
            .unwrap_or_else(|| format!("{}/reports", public_url.trim_end_matches('/')));
        let mut report = report_config(&a.from_name, &a.from_address, &archive_url, &public_url);
        if let Some(d) = a.disclaimer {
            report.disclaimer = d;
        }
        if let Some(s) = a.signature {
            report.signature = s;
        }
        // clap makes user and password come together.
        let credentials = a.smtp_user.zip(a.smtp_password);
        let defaults = MailConfig::disabled();
        MailConfig {
            enabled: a.enabled,
            smtp: SmtpSettings {
                host: a.smtp_host,
                port: a.smtp_port,
                starttls: a.smtp_starttls,
                credentials,
                timeout: defaults.smtp.timeout,
            },
            report,
            repo_lists: a.repo_lists.0,
            cc_committer: a.cc_committer,
            report_improvements: a.report_improvements,
            retry_base: Duration::from_secs(a.retry_base_secs.max(1)),
            retry_max: Duration::from_secs(a.retry_max_secs.max(a.retry_base_secs).max(1)),
            gather: Duration::from_secs(a.gather_secs),
            public_url: public_url.trim_end_matches('/').to_owned(),
            max_per_hour: a.max_per_hour.max(1),
            max_per_thread_hour: a.max_per_thread_hour.max(1),
            max_recipients: a.max_recipients.max(1),
            stranger_retests_per_day: a.stranger_retests_per_day,
            dkim_keys: a.dkim_keys,
            ..defaults
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_lists_parse() {
        let m = parse_repo_lists("linux = a@x, b@y ; next=c@z;")
            .expect("valid")
            .0;
        assert_eq!(m["linux"], vec!["a@x", "b@y"]);
        assert_eq!(m["next"], vec!["c@z"]);
        assert!(parse_repo_lists("linux").is_err());
        assert!(parse_repo_lists("linux=nobody").is_err());
    }

    #[test]
    fn dkim_keys_parse_with_their_own_semicolons() {
        let k = parse_dkim_keys(
            "s1._domainkey.Example.org=v=DKIM1; k=rsa; p=AAAA;s2._domainkey.x.net=v=DKIM1; p=BB",
        )
        .expect("valid")
        .0;
        assert_eq!(k["s1._domainkey.example.org"], "v=DKIM1; k=rsa; p=AAAA");
        assert_eq!(k["s2._domainkey.x.net"], "v=DKIM1; p=BB");
        assert!(parse_dkim_keys("").expect("empty").0.is_empty());
        assert!(parse_dkim_keys("nonsense").is_err());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let c = MailConfig::disabled();
        assert_eq!(c.backoff(1), Duration::from_secs(30));
        assert_eq!(c.backoff(2), Duration::from_secs(60));
        assert_eq!(c.backoff(3), Duration::from_secs(120));
        assert_eq!(c.backoff(40), Duration::from_secs(3600));
    }

    #[derive(clap::Parser)]
    struct Args {
        #[command(flatten)]
        mail: MailArgs,
    }

    fn config(args: &[&str], bind: &str) -> MailConfig {
        use clap::Parser;
        let parsed = Args::try_parse_from(std::iter::once("kbot").chain(args.iter().copied()))
            .expect("flags parse");
        MailConfig::from_args(parsed.mail, bind.parse().expect("address"))
    }

    #[test]
    fn links_default_from_the_public_url_and_that_from_the_bind_address() {
        let c = config(&[], "127.0.0.1:8093");
        assert_eq!(c.report.archive_url, "http://127.0.0.1:8093/reports");
        assert_eq!(c.report.materials_url, "http://127.0.0.1:8093/archive");
        let c = config(
            &["--public-url", "https://kbot.example.org/"],
            "127.0.0.1:8093",
        );
        assert_eq!(c.report.archive_url, "https://kbot.example.org/reports");
        assert_eq!(c.report.materials_url, "https://kbot.example.org/archive");
        let c = config(
            &["--mail-archive-url", "https://lore.example.org/all"],
            "10.0.0.1:80",
        );
        assert_eq!(c.report.archive_url, "https://lore.example.org/all");
        assert_eq!(c.report.materials_url, "http://10.0.0.1:80/archive");
        assert!(!config(&[], "0.0.0.0:8080")
            .report
            .archive_url
            .contains("0.0.0.0"));
    }
}
