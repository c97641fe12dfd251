//! What a workload produces: the upstream tool's text, its metrics under LKP's
//! names, the process tree's `time -v` figures and the CPU placement.

use std::io::Write;

use serde_json::{json, Map, Value};

use crate::placement::PlacementReport;
use crate::sys;

/// Text sink: prints the upstream tool's lines as they happen (text mode) and
/// keeps a copy for the `--json` report.
#[derive(Debug, Default)]
pub struct Output {
    json: bool,
    stdout: String,
    stderr: String,
}

impl Output {
    pub fn new(json: bool) -> Self {
        Output {
            json,
            ..Default::default()
        }
    }

    /// Text the upstream tool writes to stdout.
    pub fn out(&mut self, text: &str) {
        self.stdout.push_str(text);
        if !self.json {
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(text.as_bytes());
            let _ = o.flush();
        }
    }

    /// Text the upstream tool writes to stderr.
    pub fn err(&mut self, text: &str) {
        self.stderr.push_str(text);
        if !self.json {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }
}

/// The result of one workload run.
#[derive(Debug)]
pub struct Report {
    pub tool: &'static str,
    /// Metric prefix (LKP testcase), e.g. "lmbench3".
    pub prefix: String,
    /// Metric names without the prefix, in output order.
    pub metrics: Vec<(String, f64)>,
    pub placement: PlacementReport,
    pub params: Vec<(String, String)>,
}

impl Report {
    pub fn new(tool: &'static str, prefix: &str) -> Self {
        Report {
            tool,
            prefix: prefix.to_string(),
            metrics: Vec::new(),
            placement: PlacementReport::default(),
            params: Vec::new(),
        }
    }

    pub fn metric(&mut self, name: &str, value: f64) {
        self.metrics.push((name.to_string(), value));
    }

    pub fn param(&mut self, name: &str, value: impl ToString) {
        self.params.push((name.to_string(), value.to_string()));
    }

    /// Looks a metric up by its unprefixed name.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }

    pub fn to_json(&self, output: &Output) -> Value {
        let mut metrics = Map::new();
        for (name, value) in &self.metrics {
            let v = if value.is_finite() {
                json!(value)
            } else {
                Value::Null
            };
            metrics.insert(format!("{}.{}", self.prefix, name), v);
        }
        let params: Map<String, Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        json!({
            "tool": self.tool,
            "metrics": metrics,
            "placement": self.placement.to_json(),
            "params": params,
            "output": {"stdout": output.stdout, "stderr": output.stderr},
        })
    }
}

/// Wall clock and rusage of the whole process tree, as GNU `time -v` reports
/// them. Call [`TreeClock::finish`] after every child has been reaped.
pub struct TreeClock {
    start_us: u64,
}

impl TreeClock {
    pub fn start() -> Self {
        TreeClock {
            start_us: sys::now_us(),
        }
    }

    /// Adds `time.*` metrics: RUSAGE_SELF (all threads) plus RUSAGE_CHILDREN
    /// (every reaped descendant).
    pub fn finish(&self, report: &mut Report) {
        sys::reap_all();
        let elapsed = (sys::now_us() - self.start_us) as f64 / 1e6;
        let me = sys::getrusage(libc::RUSAGE_SELF);
        let kids = sys::getrusage(libc::RUSAGE_CHILDREN);
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        let user = secs(me.ru_utime) + secs(kids.ru_utime);
        let system = secs(me.ru_stime) + secs(kids.ru_stime);
        let sum = |a: libc::c_long, b: libc::c_long| (a + b) as f64;
        report.metric("time.elapsed_time", elapsed);
        report.metric("time.elapsed_time.max", elapsed);
        report.metric("time.user_time", user);
        report.metric("time.system_time", system);
        let pct = if elapsed > 0.0 {
            ((user + system) / elapsed * 100.0).round()
        } else {
            0.0
        };
        report.metric("time.percent_of_cpu_this_job_got", pct);
        report.metric(
            "time.voluntary_context_switches",
            sum(me.ru_nvcsw, kids.ru_nvcsw),
        );
        report.metric(
            "time.involuntary_context_switches",
            sum(me.ru_nivcsw, kids.ru_nivcsw),
        );
        // time -v reports the largest single process, in KiB.
        report.metric(
            "time.maximum_resident_set_size",
            me.ru_maxrss.max(kids.ru_maxrss) as f64,
        );
        report.metric("time.minor_page_faults", sum(me.ru_minflt, kids.ru_minflt));
        report.metric("time.major_page_faults", sum(me.ru_majflt, kids.ru_majflt));
        report.metric(
            "time.file_system_inputs",
            sum(me.ru_inblock, kids.ru_inblock),
        );
        report.metric(
            "time.file_system_outputs",
            sum(me.ru_oublock, kids.ru_oublock),
        );
    }
}
