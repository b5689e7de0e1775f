//! SMART ingestion: `smartctl -j` output to wear facts. NVMe health logs are standard; for
//! SATA the ACS device statistics (page 7 "Percentage Used Endurance Indicator", page 1
//! "Logical Sectors Written") come first, then the vendor attributes by the names smartctl's
//! drive database gives them. A drive smartctl does not know, or an attribute whose meaning is
//! unclear, yields "unknown": nothing is guessed.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};

/// Interface family of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Nvme,
    Ata,
    Other,
}

/// What one `smartctl -j` report says about wear.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmartWear {
    pub protocol: Protocol,
    pub model: Option<String>,
    pub serial: Option<String>,
    /// Percent of rated endurance used (may exceed 100), when known.
    pub percent_used: Option<f64>,
    /// Where `percent_used` came from ("nvme percentage_used", "device statistics", an
    /// attribute name), or why it is unknown.
    pub percent_used_source: String,
    /// Bytes the host wrote to the drive over its life, when known.
    pub host_bytes_written: Option<u64>,
    pub host_bytes_source: Option<String>,
    pub available_spare_pct: Option<f64>,
    pub available_spare_threshold_pct: Option<f64>,
    pub media_errors: Option<u64>,
    pub power_on_hours: Option<u64>,
    pub smart_passed: Option<bool>,
}

fn u(v: &Value) -> Option<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
}

fn f(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// One attribute of the ATA table by name: (normalized value, raw value).
fn attr(doc: &Value, name: &str) -> Option<(u64, u64)> {
    doc["ata_smart_attributes"]["table"]
        .as_array()?
        .iter()
        .find(|a| a["name"].as_str() == Some(name))
        .and_then(|a| Some((u(&a["value"])?, u(&a["raw"]["value"])?)))
}

/// A device statistics entry by page number and name.
fn devstat(doc: &Value, page: u64, name: &str) -> Option<u64> {
    doc["ata_device_statistics"]["pages"]
        .as_array()?
        .iter()
        .filter(|p| u(&p["number"]) == Some(page))
        .flat_map(|p| p["table"].as_array().into_iter().flatten())
        .find(|e| e["name"].as_str() == Some(name) && e["flags"]["valid"].as_bool() != Some(false))
        .and_then(|e| u(&e["value"]))
}

/// Parses one `smartctl -j` document.
pub fn parse(text: &str) -> Result<SmartWear> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("not smartctl JSON: {e}")))?;
    if doc.get("smartctl").is_none() {
        bail!(
            InvalidInput,
            "not smartctl JSON output (no \"smartctl\" section)"
        );
    }
    let protocol = match doc["device"]["protocol"].as_str() {
        Some("NVMe") => Protocol::Nvme,
        Some("ATA") => Protocol::Ata,
        _ if doc.get("nvme_smart_health_information_log").is_some() => Protocol::Nvme,
        _ if doc.get("ata_smart_attributes").is_some() => Protocol::Ata,
        _ => Protocol::Other,
    };
    let mut w = SmartWear {
        protocol,
        model: doc["model_name"].as_str().map(str::to_string),
        serial: doc["serial_number"].as_str().map(str::to_string),
        percent_used: None,
        percent_used_source: "unknown".into(),
        host_bytes_written: None,
        host_bytes_source: None,
        available_spare_pct: f(&doc["spare_available"]["current_percent"]),
        available_spare_threshold_pct: f(&doc["spare_available"]["threshold_percent"]),
        media_errors: None,
        power_on_hours: u(&doc["power_on_time"]["hours"]),
        smart_passed: doc["smart_status"]["passed"].as_bool(),
    };
    match protocol {
        Protocol::Nvme => {
            let log = &doc["nvme_smart_health_information_log"];
            if let Some(p) = f(&log["percentage_used"]) {
                w.percent_used = Some(p);
                w.percent_used_source = "nvme percentage_used".into();
            }
            if let Some(units) = u(&log["data_units_written"]) {
                w.host_bytes_written = Some(units.saturating_mul(512_000));
                w.host_bytes_source = Some("nvme data_units_written x 512000".into());
            }
            w.available_spare_pct = f(&log["available_spare"]).or(w.available_spare_pct);
            w.available_spare_threshold_pct =
                f(&log["available_spare_threshold"]).or(w.available_spare_threshold_pct);
            w.media_errors = u(&log["media_errors"]);
            w.power_on_hours = u(&log["power_on_hours"]).or(w.power_on_hours);
        }
        Protocol::Ata => ata(&doc, &mut w),
        Protocol::Other => {
            w.percent_used_source = "unknown: neither an NVMe nor an ATA report".into()
        }
    }
    // NVMe and ACS both define the figure as 0 to 255 (past 100 when the drive outlives its
    // rating); anything else is not a drive's report.
    if let Some(p) = w.percent_used {
        if !(0.0..=255.0).contains(&p) {
            bail!(
                InvalidInput,
                "percentage used {p} ({}) is not a SMART figure (0 to 255)",
                w.percent_used_source
            );
        }
    }
    Ok(w)
}

fn ata(doc: &Value, w: &mut SmartWear) {
    let sector = u(&doc["logical_block_size"]).unwrap_or(512);
    // Standard ACS device statistics: drive-independent, so trusted even for unknown drives.
    if let Some(p) = devstat(doc, 7, "Percentage Used Endurance Indicator") {
        w.percent_used = Some(p as f64);
        w.percent_used_source = "device statistics: Percentage Used Endurance Indicator".into();
    }
    if let Some(s) = devstat(doc, 1, "Logical Sectors Written") {
        w.host_bytes_written = Some(s.saturating_mul(sector));
        w.host_bytes_source = Some(format!(
            "device statistics: Logical Sectors Written x {sector}"
        ));
    }
    let known = doc["in_smartctl_database"].as_bool() == Some(true);
    if !known {
        if w.percent_used.is_none() {
            w.percent_used_source =
                "unknown: drive not in smartctl's database, so its attribute names are guesses"
                    .into();
        }
        return;
    }
    if w.percent_used.is_none() {
        if let Some(p) = f(&doc["endurance_used"]["current_percent"]) {
            w.percent_used = Some(p);
            w.percent_used_source = "smartctl endurance_used".into();
        }
    }
    if w.percent_used.is_none() {
        // Normalized values count remaining life down from 100 for these names (the raw value
        // of Perc_Rated_Life_Used is the percent used).
        let rules: [(&str, bool); 6] = [
            ("Perc_Rated_Life_Used", true),
            ("Percent_Lifetime_Remain", false),
            ("SSD_Life_Left", false),
            ("Media_Wearout_Indicator", false),
            ("Wear_Leveling_Count", false),
            ("Percent_Lifetime_Used", true),
        ];
        let family = doc["model_family"].as_str().unwrap_or("");
        for (name, raw_is_used) in rules {
            if let Some((value, raw)) = attr(doc, name) {
                // Phison-based drives keep SSD_Life_Left (percent left) in the raw value while
                // the normalized one may stay at 100 (smartmontools' drive database: "Phison
                // Driven SSDs", -v 231,raw48,SSD_Life_Left). A raw value that is not a
                // percentage there means the field is not understood: unknown.
                if name == "SSD_Life_Left" && family.contains("Phison") {
                    if raw <= 100 {
                        w.percent_used = Some(100.0 - raw as f64);
                        w.percent_used_source = format!(
                            "attribute {name}, raw value (percent left, as {family} keep it)"
                        );
                    } else {
                        w.percent_used_source = format!(
                            "unknown: attribute {name} raw value {raw} is not a percentage"
                        );
                    }
                    break;
                }
                let used = if raw_is_used {
                    raw as f64
                } else {
                    100.0 - value.min(100) as f64
                };
                w.percent_used = Some(used);
                w.percent_used_source = format!(
                    "attribute {name}, {} value",
                    if raw_is_used { "raw" } else { "normalized" }
                );
                break;
            }
        }
    }
    if w.host_bytes_written.is_none() {
        let rules: [(&str, u64); 6] = [
            ("Total_LBAs_Written", sector),
            ("Host_Writes_32MiB", 32 << 20),
            ("Lifetime_Writes_GiB", 1 << 30),
            ("Host_Writes_GiB", 1 << 30),
            ("Host_Writes_MiB", 1 << 20),
            ("Total_Host_Writes_GiB", 1 << 30),
        ];
        for (name, unit) in rules {
            if let Some((_, raw)) = attr(doc, name) {
                w.host_bytes_written = Some(raw.saturating_mul(unit));
                w.host_bytes_source = Some(format!("attribute {name} x {unit}"));
                break;
            }
        }
    }
    if w.available_spare_pct.is_none() {
        if let Some((value, _)) = attr(doc, "Available_Reservd_Space") {
            w.available_spare_pct = Some(value as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> SmartWear {
        let path = format!(
            "{}/../fixtures/smart/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        parse(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// (fixture, percent used, host bytes written, power-on hours), values from SOURCES.md.
    #[test]
    fn every_fixture_gives_the_documented_values() {
        let cases: &[(&str, Option<f64>, Option<u64>, u64)] = &[
            (
                "nvme-samsung-970evo",
                Some(3.0),
                Some(65_602_088 * 512_000),
                12798,
            ),
            (
                "nvme-intel-660p",
                Some(0.0),
                Some(7_773_431 * 512_000),
                2401,
            ),
            (
                "nvme-sabrent-rocket4",
                Some(4.0),
                Some(76_471_882 * 512_000),
                8733,
            ),
            (
                "nvme-peladn-512gb",
                Some(0.0),
                Some(16_040_567 * 512_000),
                4399,
            ),
            (
                "nvme-samsung-pm9a1",
                Some(16.0),
                Some(113_662_783 * 512_000),
                10423,
            ),
            (
                "nvme-intel-p4510",
                Some(73.0),
                Some(5_165_815_292 * 512_000),
                8843,
            ),
            (
                "nvme-crucial-p2",
                Some(0.0),
                Some(1_002_900 * 512_000),
                10147,
            ),
            // Device statistics (page 7: 19) agree with 100 - Wear_Leveling_Count 81.
            (
                "sata-samsung-860evo",
                Some(19.0),
                Some(64_777_770_148 * 512),
                14551,
            ),
            // Device statistics say 3, Perc_Rated_Life_Used says 2: the standard page wins.
            (
                "sata-crucial-m4",
                Some(3.0),
                Some(13_843_916_035 * 512),
                4179,
            ),
            (
                "sata-micron-5300",
                Some(1.0),
                Some(153_586_889_664 * 512),
                26409,
            ),
            ("sata-kingston-a400", Some(2.0), Some(398 << 30), 4994),
            (
                "sata-intel-s4500",
                Some(45.0),
                Some(4_149_381 * (32 << 20)),
                49466,
            ),
            // Not in smartctl's database and no device statistics: unknown, not guessed.
            ("sata-p3-2tb", None, None, 7344),
        ];
        let dir = format!("{}/../fixtures/smart", env!("CARGO_MANIFEST_DIR"));
        let count = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "json")
            })
            .count();
        assert_eq!(count, cases.len(), "every fixture has a case");
        for (name, pct, bytes, poh) in cases {
            let w = fixture(name);
            assert_eq!(w.percent_used, *pct, "{name}: {}", w.percent_used_source);
            assert_eq!(w.host_bytes_written, *bytes, "{name}");
            assert_eq!(w.power_on_hours, Some(*poh), "{name}");
        }
        let p3 = fixture("sata-p3-2tb");
        assert!(p3
            .percent_used_source
            .contains("not in smartctl's database"));
        let evo = fixture("nvme-samsung-970evo");
        assert_eq!(
            (
                evo.media_errors,
                evo.available_spare_pct,
                evo.available_spare_threshold_pct
            ),
            (Some(7), Some(99.0), Some(10.0))
        );
        let peladn = fixture("nvme-peladn-512gb");
        assert_eq!(peladn.available_spare_threshold_pct, Some(32.0));
        assert_eq!(
            fixture("sata-intel-s4500").percent_used_source,
            "attribute Media_Wearout_Indicator, normalized value"
        );
    }

    /// Issue #16 item 7: Phison-based drives keep SSD_Life_Left in the raw value while the
    /// normalized value can stay at 100; the normalized one read 0 % used for a worn drive.
    /// A raw value that is no percentage stays unknown.
    #[test]
    fn phison_life_left_is_read_from_the_raw_value() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/smart/sata-kingston-a400.json"
        ))
        .unwrap();
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        let set = |doc: &mut Value, value: u64, raw: u64| {
            for a in doc["ata_smart_attributes"]["table"].as_array_mut().unwrap() {
                if a["name"] == "SSD_Life_Left" {
                    a["value"] = value.into();
                    a["raw"]["value"] = raw.into();
                }
            }
        };
        set(&mut doc, 100, 87);
        let w = parse(&doc.to_string()).unwrap();
        assert_eq!(w.percent_used, Some(13.0), "{}", w.percent_used_source);
        assert!(
            w.percent_used_source.contains("raw value"),
            "{}",
            w.percent_used_source
        );
        set(&mut doc, 100, 4_000_000);
        let w = parse(&doc.to_string()).unwrap();
        assert_eq!(w.percent_used, None, "{}", w.percent_used_source);
        assert!(w.percent_used_source.starts_with("unknown"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse("{").is_err());
        assert!(parse("{\"a\":1}").is_err());
    }
}
