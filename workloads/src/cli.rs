//! The command line (contract: workloads/README.md).

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::size::parse_size;

#[derive(Debug, Parser)]
#[command(
    name = "kbot-bench",
    version,
    about = "Pipe benchmarks with the semantics of lmbench, will-it-scale, UnixBench, \
             hackbench, perf bench and pipebench"
)]
pub struct Cli {
    /// Print one JSON object (metrics under LKP's names, time -v figures of the
    /// process tree, CPU placement, the upstream text) instead of the text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Metric prefix (the job's testcase); defaults to the upstream suite name.
    #[arg(long, global = true, value_name = "NAME")]
    pub prefix: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// lmbench3 bw_pipe: pipe bandwidth, median of N samples, MB = 10^6 bytes.
    #[command(name = "bw_pipe")]
    BwPipe(BwPipeArgs),
    /// lmbench3 lat_pipe: 1-byte round trip latency over two pipes.
    #[command(name = "lat_pipe")]
    LatPipe(LatPipeArgs),
    /// will-it-scale pipe1: each task writes and reads 1 byte on its own pipe.
    #[command(name = "pipe1")]
    Pipe1(WisArgs),
    /// will-it-scale context_switch1: each task ping-pongs 1 byte with a partner.
    #[command(name = "context_switch1")]
    ContextSwitch1(WisArgs),
    /// pipen (seed thread): writer and reader tasks on separate CPUs, blocking pipe.
    #[command(name = "pipen")]
    Pipen(PipenArgs),
    /// UnixBench "Pipe Throughput": 512-byte write+read loop, indexed against 12440 lps.
    #[command(name = "unixbench-pipe")]
    UnixbenchPipe(UnixbenchArgs),
    /// hackbench (rt-tests) / perf bench sched messaging.
    #[command(name = "messaging")]
    Messaging(MessagingArgs),
    /// perf bench sched pipe: ping-pong of an int over two pipes.
    #[command(name = "sched-pipe")]
    SchedPipe(SchedPipeArgs),
    /// pipebench: stdin to stdout meter with its summary line.
    #[command(name = "pipebench")]
    Pipebench(PipebenchArgs),
}

/// Explicit pinning of the writing and the reading side of a pair.
#[derive(Debug, Clone, Args)]
pub struct PairPinArgs {
    /// Pin every writer to this CPU.
    #[arg(long, value_name = "CPU")]
    pub writer_cpu: Option<usize>,
    /// Pin every reader to this CPU.
    #[arg(long, value_name = "CPU")]
    pub reader_cpu: Option<usize>,
    /// The seed thread's layout: writer on the first allowed CPU (CPU0),
    /// reader on the second (CPU1).
    #[arg(long, conflicts_with_all = ["writer_cpu", "reader_cpu"])]
    pub split_cpus: bool,
}

fn parse_bytes(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct LmbenchCommon {
    /// Parallelism: independent reader/writer pairs (-P).
    #[arg(short = 'P', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub parallel: u32,
    /// Warm-up before timing, in microseconds (-W).
    #[arg(short = 'W', default_value_t = 0)]
    pub warmup_us: u64,
    /// Repetitions: samples per phase, the median is reported (-N).
    #[arg(short = 'N', default_value_t = 11, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub repetitions: u32,
    /// LMBENCH_SCHED placement: DEFAULT, SINGLE, BALANCED, BALANCED_SPREAD,
    /// UNIQUE, UNIQUE_SPREAD, "CUSTOM ids", "CUSTOM_UNIQUE ids".
    #[arg(long, default_value = "DEFAULT", value_name = "MODE")]
    pub sched: String,
    /// Timing budget per sample in microseconds (lmbench's `enough`; default
    /// 2000000 for bw_pipe, 1000000 for lat_pipe). Not an lmbench option:
    /// lmbench can only raise it through ENOUGH.
    #[arg(long, value_name = "USECS", value_parser = clap::value_parser!(u64).range(1000..=100_000_000))]
    pub enough: Option<u64>,
    #[command(flatten)]
    pub pin: PairPinArgs,
}

#[derive(Debug, Args)]
pub struct BwPipeArgs {
    /// Bytes per write/read (k/m suffixes are binary).
    #[arg(short = 'm', default_value = "64k", value_parser = parse_bytes, value_name = "SIZE")]
    pub xfer: u64,
    /// Bytes per iteration (rounded up the way lmbench does).
    #[arg(short = 'M', default_value = "10m", value_parser = parse_bytes, value_name = "SIZE")]
    pub bytes: u64,
    #[command(flatten)]
    pub common: LmbenchCommon,
}

#[derive(Debug, Args)]
pub struct LatPipeArgs {
    #[command(flatten)]
    pub common: LmbenchCommon,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TaskMode {
    Process,
    Thread,
}

#[derive(Debug, Args)]
pub struct WisArgs {
    /// Number of tasks.
    #[arg(short = 't', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2048))]
    pub tasks: u32,
    /// Measured seconds (after the warm-up samples).
    #[arg(short = 's', default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=86400))]
    pub seconds: u32,
    /// Processes (fork) or threads (pthreads).
    #[arg(long, value_enum, default_value_t = TaskMode::Process)]
    pub mode: TaskMode,
    /// Do not pin tasks (will-it-scale -n).
    #[arg(short = 'n')]
    pub no_affinity: bool,
    /// Pin to SMT threads (PUs) instead of cores (will-it-scale -m).
    #[arg(short = 'm')]
    pub smt: bool,
    /// One-second samples discarded before measuring (will-it-scale: 6).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub warmup_samples: u32,
}

#[derive(Debug, Args)]
pub struct PipenArgs {
    /// Bytes per write and per read.
    #[arg(long, default_value = "32768", value_parser = parse_bytes, value_name = "BYTES")]
    pub size: u64,
    /// Measured seconds (will-it-scale -s).
    #[arg(short = 's', long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=86400))]
    pub duration: u32,
    /// Packet-mode pipes (pipe2 O_DIRECT), as stress-ng --pipe uses.
    #[arg(long)]
    pub packet: bool,
    /// Writer/reader pairs; task 2i writes, task 2i+1 reads (will-it-scale -t = 2 x pairs).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pairs: u32,
    #[arg(long, value_enum, default_value_t = TaskMode::Process)]
    pub mode: TaskMode,
    /// Do not pin tasks.
    #[arg(short = 'n')]
    pub no_affinity: bool,
    /// One-second samples discarded before measuring.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub warmup_samples: u32,
    #[command(flatten)]
    pub pin: PairPinArgs,
}

#[derive(Debug, Args)]
pub struct UnixbenchArgs {
    /// Seconds per pass (the Run script passes 10).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=86400))]
    pub duration: u32,
    /// Parallel copies per pass (Run -c).
    #[arg(short = 'c', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub copies: u32,
    /// Passes (Run -i; the pipe test is a "long" test: 10).
    #[arg(short = 'i', default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub iterations: u32,
    /// Seconds of `sync; sleep` before each pass (Run: sync; sleep 1; sync; sleep 2).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=60))]
    pub settle: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Ipc {
    Pipe,
    Socket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MessagingStyle {
    /// rt-tests hackbench output and metric names.
    Hackbench,
    /// perf bench sched messaging output and metric names.
    Perf,
}

#[derive(Debug, Args)]
pub struct MessagingArgs {
    /// Groups of senders and receivers.
    #[arg(short = 'g', default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub groups: u32,
    /// Senders and receivers per group (fixed at 20 in perf).
    #[arg(short = 'f', default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub fds: u32,
    /// Messages each sender sends to each receiver.
    #[arg(short = 'l', default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub loops: u32,
    /// Message size in bytes (fixed at 100 in perf).
    #[arg(short = 's', default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub datasize: u32,
    #[arg(long, value_enum, default_value_t = Ipc::Socket)]
    pub ipc: Ipc,
    #[arg(long, value_enum, default_value_t = TaskMode::Process)]
    pub mode: TaskMode,
    #[arg(long, value_enum, default_value_t = MessagingStyle::Hackbench)]
    pub style: MessagingStyle,
}

#[derive(Debug, Args)]
pub struct SchedPipeArgs {
    /// Round trips.
    #[arg(short = 'l', default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: u64,
    /// Threads instead of processes.
    #[arg(short = 'T')]
    pub threaded: bool,
    #[command(flatten)]
    pub pin: PairPinArgs,
}

#[derive(Debug, Args)]
pub struct PipebenchArgs {
    /// Buffer size in bytes.
    #[arg(short = 'b', default_value_t = 819_200, value_parser = clap::value_parser!(u32).range(1..))]
    pub bufsize: u32,
    /// No progress lines.
    #[arg(short = 'q')]
    pub quiet: bool,
    /// No progress and no summary.
    #[arg(short = 'Q')]
    pub very_quiet: bool,
    /// No summary.
    #[arg(short = 'o')]
    pub no_summary: bool,
    /// Raw bytes per second, one line per second, no summary.
    #[arg(short = 'r')]
    pub raw: bool,
    /// SI units (base 1000) instead of base 1024.
    #[arg(short = 'I')]
    pub si: bool,
    /// No unit prefixes.
    #[arg(short = 'u')]
    pub no_units: bool,
    /// Exit on errors.
    #[arg(short = 'e')]
    pub exit_on_error: bool,
    /// Status file (truncate), instead of stderr.
    #[arg(short = 's', value_name = "FILE", conflicts_with = "status_append")]
    pub status_file: Option<String>,
    /// Status file (append), instead of stderr.
    #[arg(short = 'S', value_name = "FILE")]
    pub status_append: Option<String>,
    /// kbot extension: feed SIZE bytes of zeros from an internal writer process
    /// instead of stdin, and discard the output (`dd if=/dev/zero | pipebench >
    /// /dev/null` without a shell).
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    pub feed: Option<u64>,
    /// Block size of the --feed writer (dd bs).
    #[arg(long, default_value = "80k", value_parser = parse_bytes, value_name = "SIZE", requires = "feed")]
    pub feed_bs: u64,
}
