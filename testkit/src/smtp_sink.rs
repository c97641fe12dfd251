//! A minimal SMTP server (RFC 5321 subset) on loopback that can refuse on
//! purpose; shared by the mail tests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// Greet this many connections with `421` and hang up.
    pub refuse_connections: u32,
    /// Answer this many complete messages with `451` after DATA.
    pub defer_messages: u32,
    /// Answer every RCPT with `550`.
    pub reject_recipients: bool,
    /// Keep a complete message (it counts as received) but send no reply:
    /// the relay accepted it, and the client never hears so.
    pub hold_after_accept: bool,
    /// Send no reply to RCPT: the client stops before DATA.
    pub hold_at_rcpt: bool,
}

#[derive(Debug, Clone)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The message as sent, dot-unstuffed, CRLF line ends.
    pub data: String,
}

#[derive(Default)]
pub struct Shared {
    pub plan: Mutex<Plan>,
    pub received: Mutex<Vec<Received>>,
    pub connections: Mutex<u32>,
}

pub struct Sink {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    pub async fn start(plan: Plan) -> Sink {
        Sink::start_on("127.0.0.1:0".parse().expect("addr"), plan).await
    }

    pub async fn start_on(addr: SocketAddr, plan: Plan) -> Sink {
        let listener = TcpListener::bind(addr).await.expect("bind sink");
        let addr = listener.local_addr().expect("sink addr");
        let shared = Arc::new(Shared::default());
        *shared.plan.lock().expect("lock") = plan;
        let s = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let _ = session(stream, s).await;
                });
            }
        });
        Sink { addr, shared, task }
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn session(stream: TcpStream, s: Arc<Shared>) -> std::io::Result<()> {
    *s.connections.lock().expect("lock") += 1;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let refuse = {
        let mut plan = s.plan.lock().expect("lock");
        let refuse = plan.refuse_connections > 0;
        plan.refuse_connections = plan.refuse_connections.saturating_sub(1);
        refuse
    };
    if refuse {
        write
            .write_all(b"421 sink.test busy, try again later\r\n")
            .await?;
        return Ok(());
    }
    write.write_all(b"220 sink.test ESMTP\r\n").await?;
    let (mut from, mut rcpt) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let cmd = line.trim_end().to_owned();
        let upper = cmd.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            b"250-sink.test\r\n250 8BITMIME\r\n"
        } else if upper.starts_with("MAIL FROM:") {
            from = cmd[10..].trim().to_owned();
            rcpt.clear();
            b"250 ok\r\n"
        } else if upper.starts_with("RCPT TO:") {
            if s.plan.lock().expect("lock").hold_at_rcpt {
                return until_closed(&mut lines).await;
            }
            if s.plan.lock().expect("lock").reject_recipients {
                b"550 no such user\r\n"
            } else {
                rcpt.push(cmd[8..].trim().to_owned());
                b"250 ok\r\n"
            }
        } else if upper == "DATA" {
            write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
            let data = read_data(&mut lines).await?;
            let defer = {
                let mut plan = s.plan.lock().expect("lock");
                let defer = plan.defer_messages > 0;
                plan.defer_messages = plan.defer_messages.saturating_sub(1);
                defer
            };
            if defer {
                b"451 local problem, try again later\r\n"
            } else {
                s.received.lock().expect("lock").push(Received {
                    mail_from: from.clone(),
                    rcpt_to: rcpt.clone(),
                    data,
                });
                if s.plan.lock().expect("lock").hold_after_accept {
                    return until_closed(&mut lines).await;
                }
                b"250 queued\r\n"
            }
        } else if upper == "RSET" || upper == "NOOP" {
            b"250 ok\r\n"
        } else if upper == "QUIT" {
            write.write_all(b"221 bye\r\n").await?;
            return Ok(());
        } else {
            b"502 not implemented\r\n"
        };
        write.write_all(reply).await?;
    }
}

/// Reads and ignores whatever comes until the client hangs up.
async fn until_closed(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<()> {
    let mut line = String::new();
    while lines.read_line(&mut line).await? > 0 {
        line.clear();
    }
    Ok(())
}

async fn read_data(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<String> {
    let mut data = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(data);
        }
        if line == ".\r\n" {
            return Ok(data);
        }
        data.push_str(line.strip_prefix('.').unwrap_or(&line));
    }
}

/// Whether the header `name` of `mail` (To, Cc, From) lists `mailbox`
/// (`Name <address>` or a bare address), read as a mail reader reads it:
/// unfolded, unquoted, RFC 2047 words decoded.
pub fn addressed(mail: &str, name: &str, mailbox: &str) -> bool {
    let (want_name, want_address) = match mailbox.rsplit_once('<') {
        Some((n, a)) => (Some(n.trim()), a.trim_end_matches('>').trim()),
        None => (None, mailbox.trim()),
    };
    let Some(parsed) = mail_parser::MessageParser::default().parse(mail.as_bytes()) else {
        return false;
    };
    let list = match name.to_ascii_lowercase().as_str() {
        "to" => parsed.to(),
        "cc" => parsed.cc(),
        "from" => parsed.from(),
        other => panic!("addressed: {other} is not an address header"),
    };
    list.is_some_and(|l| {
        l.iter().any(|a| {
            a.address()
                .is_some_and(|x| x.eq_ignore_ascii_case(want_address))
                && want_name.is_none_or(|n| a.name() == Some(n))
        })
    })
}

/// A mail header's value, unfolded, `<>` stripped from around an id;
/// empty when the mail has none.
pub fn header(mail: &str, name: &str) -> String {
    let mut value = String::new();
    let mut inside = false;
    for line in mail.lines() {
        if line.is_empty() {
            break;
        }
        if inside && line.starts_with([' ', '\t']) {
            value.push(' ');
            value.push_str(line.trim());
            continue;
        }
        inside = line
            .split_once(':')
            .is_some_and(|(k, _)| k.eq_ignore_ascii_case(name));
        if inside {
            value = line
                .split_once(':')
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_default();
        }
    }
    value.trim_matches(['<', '>']).to_owned()
}
