//! Progress for long work: an indicatif bar with rate and ETA when stderr is a terminal, one JSON
//! object per line on stdout with `--json`, nothing otherwise.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    /// Drawn from the first update that knows the total (a bar of length 0 draws full).
    bar: Option<ProgressBar>,
    tty: bool,
    json: bool,
    label: &'static str,
    start: Instant,
    last_json: Option<Instant>,
    /// First `done` seen: a resumed job's rate counts only what this run did.
    first_done: Option<u64>,
}

impl Progress {
    /// `json`: emit `{"progress":...}` lines on stderr instead of a bar.
    pub fn new(label: &'static str, json: bool) -> Progress {
        Progress {
            bar: None,
            tty: !json && std::io::stderr().is_terminal(),
            json,
            label,
            start: Instant::now(),
            last_json: None,
            first_done: None,
        }
    }

    pub fn update(&mut self, done: u64, total: u64, phase: Option<&str>) {
        let first = *self.first_done.get_or_insert(done);
        if self.tty && self.bar.is_none() && total > 0 {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{msg:>8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            b.set_message(self.label);
            self.bar = Some(b);
        }
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
            if let Some(p) = phase {
                b.set_message(p.to_string());
            }
        } else if self.json {
            let now = Instant::now();
            let due = self
                .last_json
                .is_none_or(|t| now.duration_since(t).as_millis() >= 1000);
            if due || done == total {
                self.last_json = Some(now);
                let secs = self.start.elapsed().as_secs_f64().max(1e-3);
                println!(
                    "{}",
                    serde_json::json!({"progress": phase.unwrap_or(self.label), "bytes_done": done, "bytes_total": total,
                        "rate_bytes_per_sec": ((done - first.min(done)) as f64 / secs) as u64})
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
