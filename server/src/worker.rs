//! The one shape of the server's background loops (comparisons, bisection,
//! watches, the report sender): wait for shutdown, an event of the loop's
//! own (an upload, a wake-up) or its pace, then make one pass; end at
//! shutdown or when the event source closes.
//!
//! The first wait ends at once, so every loop makes a pass at start-up and
//! picks up the work a previous process left.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Interval;

/// Why a pass runs.
#[derive(Debug)]
pub enum Woken<E> {
    /// The pace: at start-up, then every period.
    Tick,
    /// The loop's own event.
    Event(E),
}

/// How often a loop makes a pass without an event.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// On a fixed schedule (`tokio::time::interval`): passes that overrun
    /// are followed at once by the next.
    Every(Duration),
    /// This long after the previous pass ended.
    After(Duration),
}

/// A background loop's events and passes. Its `event` future must be
/// cancel-safe: it is dropped whenever the pace or shutdown wins.
pub trait Worker: Send {
    type Event: Send;

    /// The next event; `None` when its source closed, which ends the loop.
    /// A loop without events waits forever ([`std::future::pending`]).
    fn event(&mut self) -> impl Future<Output = Option<Self::Event>> + Send;

    /// One pass; errors are the pass's to log.
    fn pass(&mut self, woken: Woken<Self::Event>) -> impl Future<Output = ()> + Send;
}

/// Runs `worker` until `shutdown` flips to true (or its sender is gone) or
/// the worker's event source closes.
pub async fn run<W: Worker>(mut worker: W, mut shutdown: watch::Receiver<bool>, pace: Pace) {
    let mut clock = Clock::new(pace);
    loop {
        let woken = tokio::select! {
            _ = shutdown.changed() => return,
            event = worker.event() => match event {
                Some(event) => Woken::Event(event),
                None => return,
            },
            _ = clock.tick() => Woken::Tick,
        };
        if *shutdown.borrow() {
            return;
        }
        worker.pass(woken).await;
        clock.passed();
    }
}

/// The pace's timer; its first tick is immediate.
enum Clock {
    Every(Interval),
    After { period: Duration, first: bool },
}

impl Clock {
    fn new(pace: Pace) -> Clock {
        match pace {
            Pace::Every(period) => Clock::Every(tokio::time::interval(period)),
            Pace::After(period) => Clock::After {
                period,
                first: true,
            },
        }
    }

    async fn tick(&mut self) {
        match self {
            Clock::Every(interval) => {
                interval.tick().await;
            }
            Clock::After { first: true, .. } => {}
            Clock::After { period, .. } => tokio::time::sleep(*period).await,
        }
    }

    fn passed(&mut self) {
        if let Clock::After { first, .. } = self {
            *first = false;
        }
    }
}
