//! `kbot-server` subcommands: `serve`, `migrate`, `enroll-token`, `user-token`,
//! and the user commands of [`crate::client`].

use clap::{Parser, Subcommand};

use crate::auth;
use crate::config::{Config, DbArgs, ServeArgs};
use crate::db::Db;
use crate::error::Result;
use crate::server::{shutdown_signal, Server};
use crate::telemetry;

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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (migrates the database first).
    // Boxed: with the mail settings it dwarfs the other variants.
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(DbArgs),
    /// Create a one-time enrolment token for a new agent and print it.
    EnrollToken {
        #[command(flatten)]
        db: DbArgs,
        /// What the token is for (kept with its hash).
        #[arg(long, default_value = "agent enrolment")]
        label: String,
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
    /// User commands, over the REST API (`submit`, `submissions`, `follow`, ...).
    #[command(flatten)]
    User(crate::client::UserCommand),
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    telemetry::init(cli.log_json);
    match cli.command {
        Command::User(cmd) => Ok(crate::client::run(cmd).await.map_err(anyhow::Error::from)?),
        Command::Serve(args) => {
            let server = Server::build(Config::from(*args)).await?;
            tracing::info!(addr = %server.local_addr()?, backend = server.state().db.backend().name(), "kbot-server listening");
            server.run_until(shutdown_signal()).await
        }
        Command::Migrate(db) => {
            let db = open(&db).await?;
            db.close().await;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::EnrollToken { db, label } => {
            let db = open(&db).await?;
            let token = auth::create_enrollment_token(&db, &label).await?;
            db.close().await;
            println!("{token}");
            Ok(())
        }
        Command::UserToken { db, name, email } => {
            let db = open(&db).await?;
            let (user_id, token) = auth::create_user_token(&db, &name, email.as_deref()).await?;
            db.close().await;
            eprintln!("user {name} (id {user_id})");
            println!("{token}");
            Ok(())
        }
    }
}

/// Connects and migrates, so admin commands work on a fresh database.
async fn open(args: &DbArgs) -> Result<Db> {
    let db = Db::connect(&args.resolve()).await?;
    db.migrate().await?;
    Ok(db)
}
