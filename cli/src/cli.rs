//! `kbot-server` subcommands: `serve`, `migrate`, `enroll-token`, `gc`, `user add`, `user-token`
//! through the server library, and the user commands of [`crate::user`].

use clap::{Parser, Subcommand};

use kbot_server::artifacts::ArtifactStore;
use kbot_server::config::{
    ArtifactStoreArgs, Config, DbArgs, RetentionArgs, RetentionConfig, ServeArgs,
};
use kbot_server::db::Db;
use kbot_server::error::Error as ServerError;
use kbot_server::server::{shutdown_signal, Server};
use kbot_server::state::AppState;
use kbot_server::telemetry;
use kbot_server::{access, auth, lists};

use crate::error::Result;
use crate::output;
use crate::renamed::Adopted;

#[derive(Debug, Parser)]
#[command(
    name = "kbot-server",
    version,
    about = "kbot: kernel performance regression robot (server)"
)]
pub struct Cli {
    /// Log JSON lines instead of text.
    #[arg(long, global = true, env = "KBOT_LOG_JSON")]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run; `list add`'s flags make one variant large.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (migrates the database first).
    // Boxed: with the mail settings it dwarfs the other variants.
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(DbArgs),
    /// Create a one-time enrolment token for an agent and print it. Bound to
    /// a name (`--name`), it enrols that name only, and may enrol it again
    /// (a reinstalled machine); unbound, it enrols a new name only.
    EnrollToken {
        #[command(flatten)]
        db: DbArgs,
        /// What the token is for (kept with its hash).
        #[arg(long, default_value = "agent enrolment")]
        label: String,
        /// The agent name the token enrols.
        #[arg(long)]
        name: Option<String>,
        /// The tbox group the token enrols into.
        #[arg(long)]
        group: Option<String>,
        /// The machine may run code posted to mailing lists even on the
        /// kexec backend (it is reinstalled at will and holds no secret).
        #[arg(long)]
        disposable: bool,
    },
    /// Run the retention pass once: delete the refs of finished series and
    /// old `#kbot test` patches, compact the mirrors, drop old raw replies.
    Gc {
        #[command(flatten)]
        db: DbArgs,
        /// Where the mirrors are (`<dir>/mirrors`), as for `serve`.
        #[arg(long, env = "KBOT_ARTIFACT_DIR", default_value = "./var/artifacts")]
        artifact_dir: std::path::PathBuf,
        /// The artifact store of built kernels, as for `serve`.
        #[command(flatten)]
        artifact_store: ArtifactStoreArgs,
        #[command(flatten)]
        retention: RetentionArgs,
    },
    /// Create a user (if new) and an API token for it, and print the token.
    UserToken {
        #[command(flatten)]
        db: DbArgs,
        /// User name, e.g. a login or e-mail local part.
        #[arg(long)]
        name: String,
        /// Where reports for this user's submissions go.
        #[arg(long)]
        email: Option<String>,
    },
    /// Dashboard users: `user add --name NAME [--email E]`.
    #[command(subcommand, name = "user")]
    Users(UsersCommand),
    /// User commands, over the REST API (`submit`, `submissions`, `follow`, ...).
    #[command(flatten)]
    User(crate::user::UserCommand),
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a user (or find it by name) and set its dashboard password,
    /// read from stdin (its first line) or, on a terminal, asked for twice.
    /// API tokens (`user-token`) keep working.
    Add {
        #[command(flatten)]
        db: DbArgs,
        /// User name, e.g. a login or e-mail local part.
        #[arg(long)]
        name: String,
        #[arg(long)]
        email: Option<String>,
    },
}

/// Runs the parsed command line; `renamed` are the old environment names
/// it was given (see [`crate::renamed`]), warned about once logging is up.
pub async fn run(cli: Cli, renamed: &[Adopted]) -> Result<()> {
    telemetry::init(cli.log_json);
    for r in renamed {
        tracing::warn!("{r}");
    }
    match cli.command {
        Command::User(cmd) => crate::user::run(cmd).await,
        Command::Serve(args) => {
            let server = Server::build(Config::from(*args)).await?;
            tracing::info!(addr = %server.local_addr()?, backend = server.state().db.backend().name(), "kbot-server listening");
            Ok(server.run_until(shutdown_signal()).await?)
        }
        Command::Migrate(db) => {
            let db = open(&db).await?;
            db.close().await;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::EnrollToken {
            db,
            label,
            name,
            group,
            disposable,
        } => {
            let db = open(&db).await?;
            let binding = auth::EnrolmentBinding {
                agent_name: name,
                tbox_group: group,
                disposable,
            };
            let token = auth::create_bound_enrollment_token(&db, &label, &binding).await?;
            db.close().await;
            output::line(&token)
        }
        Command::Gc {
            db,
            artifact_dir,
            artifact_store,
            retention,
        } => {
            let url = db.resolve();
            let db = open(&db).await?;
            let mut config = Config::new(url, artifact_dir);
            config.retention = RetentionConfig::from_args(&retention);
            config.artifact_store = artifact_store.into_settings();
            let (_stop, stopped) = tokio::sync::watch::channel(false);
            let artifacts = ArtifactStore::open(&config)?;
            let state = AppState::new(db.clone(), config, artifacts, stopped);
            let pruned = lists::retention::prune(&state, kbot_server::time::now_ms()).await;
            db.close().await;
            let pruned = pruned?;
            eprintln!(
                "deleted {} ref(s) and {} unused build(s), dropped the raw text of {} message(s)",
                pruned.refs, pruned.builds, pruned.raw_mails
            );
            Ok(())
        }
        Command::Users(UsersCommand::Add { db, name, email }) => {
            let password = read_password(&name)?;
            let db = open(&db).await?;
            let added = access::password::add_user(&db, &name, email.as_deref(), &password).await;
            db.close().await;
            eprintln!("user {name} (id {}) can sign in to the dashboard", added?);
            Ok(())
        }
        Command::UserToken { db, name, email } => {
            let db = open(&db).await?;
            let (user_id, token) = auth::create_user_token(&db, &name, email.as_deref()).await?;
            db.close().await;
            eprintln!("user {name} (id {user_id})");
            output::line(&token)
        }
    }
}

/// The new password: stdin's first line when it is not a terminal (scripts),
/// else typed twice at a prompt without echo.
fn read_password(name: &str) -> kbot_server::Result<String> {
    use std::io::IsTerminal;
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin.read_line(&mut line)?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_owned());
    }
    let first = prompt_hidden(&format!("Password for {name}: "))?;
    let second = prompt_hidden("Again: ")?;
    if first != second {
        return Err(ServerError::BadRequest("the two passwords differ".into()));
    }
    Ok(first)
}

/// Reads a line from the terminal with echo off, restoring it afterwards.
fn prompt_hidden(prompt: &str) -> kbot_server::Result<String> {
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
    let stdin = std::io::stdin();
    eprint!("{prompt}");
    let saved = tcgetattr(&stdin).map_err(std::io::Error::from)?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet).map_err(std::io::Error::from)?;
    let mut line = String::new();
    let read = stdin.read_line(&mut line);
    tcsetattr(&stdin, SetArg::TCSANOW, &saved).map_err(std::io::Error::from)?;
    eprintln!();
    read?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// Connects and migrates, so admin commands work on a fresh database.
async fn open(args: &DbArgs) -> kbot_server::Result<Db> {
    let db = Db::connect(&args.resolve()).await?;
    kbot_server::server::migrate(&db).await?;
    Ok(db)
}
