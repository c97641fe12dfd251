//! A TCP relay between an agent and a server that can stop one result
//! upload in flight, so that a test can SIGKILL the server at that moment:
//! with the request's body half through, or after the server answered (it
//! stored the result) and before the answer reaches the agent.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Where to stop the next upload (`PUT .../result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trap {
    /// Forward the request's head and this many bytes, then nothing more.
    MidBody(usize),
    /// Forward the whole request; keep the server's answer from the agent.
    BeforeAnswer,
}

/// What the relay reports when a trap caught an upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caught {
    /// The server has the head and part of the body.
    MidBody,
    /// The server answered; the agent has not heard it.
    Answered,
}

pub struct Relay {
    pub port: u16,
    target: Arc<AtomicU16>,
    trap: Arc<Mutex<Option<Trap>>>,
    caught: mpsc::UnboundedReceiver<Caught>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Relays 127.0.0.1:`port` (a free one) to 127.0.0.1:`target`.
    pub async fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let port = listener.local_addr().expect("relay addr").port();
        let target = Arc::new(AtomicU16::new(target));
        let trap = Arc::new(Mutex::new(None));
        let (tx, caught) = mpsc::unbounded_channel();
        let (t, p) = (target.clone(), trap.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let port = t.load(Ordering::SeqCst);
                tokio::spawn(connection(client, port, p.clone(), tx.clone()));
            }
        });
        Relay {
            port,
            target,
            trap,
            caught,
            task,
        }
    }

    /// New connections go to the server restarted on `port`.
    pub fn retarget(&self, port: u16) {
        self.target.store(port, Ordering::SeqCst);
    }

    /// Stops the next upload as `trap` says.
    pub fn arm(&self, trap: Trap) {
        *self.trap.lock().expect("lock") = Some(trap);
    }

    /// Waits until an armed trap caught an upload.
    pub async fn caught(&mut self) -> Caught {
        self.caught.recv().await.expect("the relay runs")
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One client connection; it ends (both sockets dropped) when either side does.
async fn connection(
    client: TcpStream,
    port: u16,
    trap: Arc<Mutex<Option<Trap>>>,
    caught: mpsc::UnboundedSender<Caught>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", port)).await else {
        return; // the server is down: the client sees the connection close
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Set by the upstream half when it forwarded an upload with a
    // before-answer trap: the downstream half then keeps the answer.
    let hold_answer = Arc::new(Mutex::new(false));
    let mut up = tokio::spawn(upstream(
        client_read,
        server_write,
        trap,
        hold_answer.clone(),
        caught.clone(),
    ));
    let mut down = tokio::spawn(downstream(server_read, client_write, hold_answer, caught));
    tokio::select! {
        _ = &mut up => {}
        _ = &mut down => {}
    }
    up.abort();
    down.abort();
}

/// Agent to server, watching for uploads.
async fn upstream(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    trap: Arc<Mutex<Option<Trap>>>,
    hold_answer: Arc<Mutex<bool>>,
    caught: mpsc::UnboundedSender<Caught>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    // Bytes still allowed through before a mid-body trap holds the rest.
    let mut allowance: Option<usize> = None;
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if allowance.is_none() && is_upload(chunk) {
            match trap.lock().expect("lock").take() {
                Some(Trap::MidBody(bytes)) => allowance = Some(head_len(chunk) + bytes),
                Some(Trap::BeforeAnswer) => *hold_answer.lock().expect("lock") = true,
                None => {}
            }
        }
        let Some(left) = allowance else {
            if to.write_all(chunk).await.is_err() {
                return;
            }
            continue;
        };
        let pass = left.min(n);
        if to.write_all(&chunk[..pass]).await.is_err() {
            return;
        }
        allowance = Some(left - pass);
        if left - pass == 0 {
            let _ = caught.send(Caught::MidBody);
            // Hold the rest: the agent waits for a server that is being killed.
            std::future::pending::<()>().await;
        }
    }
}

/// Server to agent, keeping a trapped upload's answer.
async fn downstream(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    hold_answer: Arc<Mutex<bool>>,
    caught: mpsc::UnboundedSender<Caught>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if *hold_answer.lock().expect("lock") {
            let _ = caught.send(Caught::Answered);
            // Swallow the rest until the server goes: then the connection ends.
            while matches!(from.read(&mut buf).await, Ok(n) if n > 0) {}
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Whether `chunk` starts a result upload's request.
fn is_upload(chunk: &[u8]) -> bool {
    let line = chunk.split(|b| *b == b'\r').next().unwrap_or_default();
    line.starts_with(b"PUT /api/v1/jobs/") && line.windows(7).any(|w| w == b"/result")
}

/// The length of the request head in `chunk` (through the blank line).
fn head_len(chunk: &[u8]) -> usize {
    chunk
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(chunk.len(), |p| p + 4)
}
