//! Prometheus text exposition of array and member health (`status --prometheus`,
//! `list --prometheus`), in the style of node_exporter's md collector: array state as one
//! series per state (1 for the current one), disks by state, disks required, sync progress;
//! plus per-member state, error counters, bytes written by kind and bad blocks. Labels come from
//! identities (array name and uuid, member uuid, slot), never from how a path was typed, so a
//! renamed device keeps its series. Wear metrics are `wear --prometheus`.

use std::fmt::Write;

use serde_json::Value;

/// A label value with `\`, `"` and newlines escaped as the text format requires.
pub fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

const ARRAY_STATES: [&str; 4] = ["clean", "degraded", "rebuilding", "failed"];
const MEMBER_STATES: [&str; 6] = [
    "active",
    "faulty",
    "missing",
    "rebuilding",
    "spare",
    "replacing",
];

/// Metric families with their HELP and TYPE lines, filled from any number of status reports
/// (one family block each, as the format wants every sample of a family together).
pub fn render(reports: &[Value]) -> String {
    let mut out = String::new();
    let arr = |r: &Value| {
        format!(
            "array=\"{}\",uuid=\"{}\"",
            escape(r["name"].as_str().unwrap_or("")),
            escape(r["uuid"].as_str().unwrap_or(""))
        )
    };
    let member = |r: &Value, m: &Value| {
        format!(
            "{},slot=\"{}\",member_uuid=\"{}\"",
            arr(r),
            m["slot"]
                .as_u64()
                .map(|s| s.to_string())
                .unwrap_or_else(|| "spare".into()),
            escape(m["uuid"].as_str().unwrap_or(""))
        )
    };
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let members = |r: &Value| r["members"].as_array().cloned().unwrap_or_default();

    family(
        &mut out,
        "raidctl_array_state",
        "gauge",
        "1 for the array's current state.",
    );
    for r in reports {
        for st in ARRAY_STATES {
            let v = u8::from(r["state"] == st);
            let _ = writeln!(out, "raidctl_array_state{{{},state=\"{st}\"}} {v}", arr(r));
        }
    }
    family(
        &mut out,
        "raidctl_array_info",
        "gauge",
        "Level and chunk size of the array.",
    );
    for r in reports {
        let _ = writeln!(
            out,
            "raidctl_array_info{{{},level=\"{}\",chunk_bytes=\"{}\"}} 1",
            arr(r),
            escape(r["level"].as_str().unwrap_or("")),
            r["chunk_bytes"]
        );
    }
    family(
        &mut out,
        "raidctl_array_size_bytes",
        "gauge",
        "Usable size of the array.",
    );
    for r in reports {
        let _ = writeln!(
            out,
            "raidctl_array_size_bytes{{{}}} {}",
            arr(r),
            r["size_bytes"]
        );
    }
    family(
        &mut out,
        "raidctl_array_disks",
        "gauge",
        "Members by state.",
    );
    for r in reports {
        let ms = members(r);
        for st in MEMBER_STATES {
            let n = ms.iter().filter(|m| m["state"] == st).count();
            let _ = writeln!(out, "raidctl_array_disks{{{},state=\"{st}\"}} {n}", arr(r));
        }
    }
    family(
        &mut out,
        "raidctl_array_disks_required",
        "gauge",
        "Members the layout has.",
    );
    for r in reports {
        let _ = writeln!(
            out,
            "raidctl_array_disks_required{{{}}} {}",
            arr(r),
            r["members_count"]
        );
    }
    family(
        &mut out,
        "raidctl_array_sync_progress",
        "gauge",
        "Fraction done of the pending rebuild or replace, and of an unfinished scrub (0..1).",
    );
    for r in reports {
        if let (Some(kind), Some(p)) = (r["job"]["kind"].as_str(), r["job"]["progress"].as_f64()) {
            let _ = writeln!(
                out,
                "raidctl_array_sync_progress{{{},kind=\"{kind}\",running=\"{}\"}} {p}",
                arr(r),
                r["job"]["state"] == "running"
            );
        }
        let sc = &r["scrub"];
        if let (Some(next), Some(rows)) = (sc["next_row"].as_u64(), sc["rows"].as_u64()) {
            let p = next as f64 / rows.max(1) as f64;
            let _ = writeln!(
                out,
                "raidctl_array_sync_progress{{{},kind=\"scrub\",running=\"{}\"}} {p}",
                arr(r),
                sc["state"] == "running"
            );
        }
    }
    family(
        &mut out,
        "raidctl_array_served",
        "gauge",
        "1 while `raidctl serve` runs the array.",
    );
    for r in reports {
        let v = u8::from(r["served_by"]["pid"].is_u64());
        let _ = writeln!(out, "raidctl_array_served{{{}}} {v}", arr(r));
    }
    // A member family: per member of every report, the samples `f` gives as (extra labels,
    // value).
    let member_family = |out: &mut String,
                         name: &str,
                         kind: &str,
                         help: &str,
                         f: &dyn Fn(&Value) -> Vec<(String, u64)>| {
        family(out, name, kind, help);
        for r in reports {
            for m in members(r) {
                for (labels, v) in f(&m) {
                    let sep = if labels.is_empty() { "" } else { "," };
                    let _ = writeln!(out, "{name}{{{}{sep}{labels}}} {v}", member(r, &m));
                }
            }
        }
    };
    member_family(
        &mut out,
        "raidctl_member_state",
        "gauge",
        "1 for each member's current state.",
        &|m| {
            MEMBER_STATES
                .iter()
                .map(|st| (format!("state=\"{st}\""), u64::from(m["state"] == *st)))
                .collect()
        },
    );
    member_family(
        &mut out,
        "raidctl_member_errors_total",
        "counter",
        "Errors seen on the member, by kind (read, write, checksum).",
        &|m| {
            [
                ("read", "read_errors"),
                ("write", "write_errors"),
                ("checksum", "checksum_errors"),
            ]
            .iter()
            .map(|(k, field)| (format!("kind=\"{k}\""), m[*field].as_u64().unwrap_or(0)))
            .collect()
        },
    );
    member_family(
        &mut out,
        "raidctl_member_bytes_written_total",
        "counter",
        "Bytes the array wrote to the member, by kind.",
        &|m| {
            ["data", "parity", "metadata", "rebuild"]
                .iter()
                .map(|k| {
                    let v = m["bytes_written_by_kind"][*k].as_u64().unwrap_or(0);
                    (format!("kind=\"{k}\""), v)
                })
                .collect()
        },
    );
    member_family(
        &mut out,
        "raidctl_member_bad_blocks",
        "gauge",
        "4 KiB data blocks of the member's slot on the bad-block list.",
        &|m| vec![(String::new(), m["bad_blocks"].as_u64().unwrap_or(0))],
    );
    out
}
