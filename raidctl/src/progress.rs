//! Progress for long work: an indicatif bar with rate and ETA when stderr is a terminal, one JSON
//! object per line with `--json`, nothing otherwise.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    json: bool,
    label: &'static str,
    start: Instant,
    last_json: Option<Instant>,
}

impl Progress {
    /// `json`: emit `{"progress":...}` lines on stderr instead of a bar.
    pub fn new(label: &'static str, json: bool) -> Progress {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template(
                    "{msg:>8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            b.set_message(label);
            b
        });
        Progress {
            bar,
            json,
            label,
            start: Instant::now(),
            last_json: None,
        }
    }

    pub fn update(&mut self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
        } else if self.json {
            let now = Instant::now();
            let due = self
                .last_json
                .is_none_or(|t| now.duration_since(t).as_millis() >= 1000);
            if due || done == total {
                self.last_json = Some(now);
                let secs = self.start.elapsed().as_secs_f64().max(1e-3);
                eprintln!(
                    "{}",
                    serde_json::json!({"progress": self.label, "bytes_done": done, "bytes_total": total,
                        "rate_bytes_per_sec": (done as f64 / secs) as u64})
                );
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
