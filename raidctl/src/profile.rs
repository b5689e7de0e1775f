//! Over-provisioning profiles: the SNIA steady-state test over rounds, the recommendation drawn
//! from a measured curve of IOPS against over-provisioning, the identity of a device, and the
//! store (STATE_DIR/profiles) where `create --overprovision auto` finds a saved profile.

use std::path::{Path, PathBuf};

use raidcore::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

/// Rounds in the SNIA measurement window.
pub const WINDOW: usize = 5;
/// Largest range of the window's values, as a fraction of their mean (SNIA PTS: 20 %).
pub const MAX_RANGE: f64 = 0.20;
/// Largest excursion of the window's least-squares line, as a fraction of the mean (10 %).
pub const MAX_SLOPE_EXCURSION: f64 = 0.10;
/// A curve whose levels all lie within this fraction of its best is flat.
pub const FLAT: f64 = 0.10;
/// How far (in normalised units) the knee must rise above the chord from the first to the last
/// level; below it the curve is about straight, and noise would pick the knee.
pub const KNEE_MIN: f64 = 0.15;
/// A knee must reach this share of the best level: a curve that rises a little early and a lot
/// later has its knee late, where the early bend would leave most of the gain unbought.
pub const KNEE_SHARE: f64 = 0.75;

/// The SNIA steady-state check of the last [`WINDOW`] rounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Mean of the window's values.
    pub mean: f64,
    /// max - min over the window, as a fraction of the mean.
    pub range: f64,
    /// |slope| x (window width - 1) of the least-squares line, as a fraction of the mean.
    pub slope_excursion: f64,
    pub steady: bool,
}

/// Checks the last [`WINDOW`] values of `rounds`; None until there are that many.
pub fn window(rounds: &[f64]) -> Option<Window> {
    if rounds.len() < WINDOW {
        return None;
    }
    let w = &rounds[rounds.len() - WINDOW..];
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    let (lo, hi) = w
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let xm = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, &y) in w.iter().enumerate() {
        let dx = i as f64 - xm;
        sxy += dx * (y - mean);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    if mean <= 0.0 {
        return Some(Window {
            mean,
            range: f64::INFINITY,
            slope_excursion: f64::INFINITY,
            steady: false,
        });
    }
    let range = (hi - lo) / mean;
    let slope_excursion = (slope * (n - 1.0)).abs() / mean;
    Some(Window {
        mean,
        range,
        slope_excursion,
        steady: range <= MAX_RANGE && slope_excursion <= MAX_SLOPE_EXCURSION,
    })
}

/// What a level's figure is: the window's mean when steady, else the mean of the last rounds
/// measured (up to a window's worth).
pub fn level_figure(rounds: &[f64]) -> f64 {
    let tail = &rounds[rounds.len().saturating_sub(WINDOW)..];
    if tail.is_empty() {
        0.0
    } else {
        tail.iter().sum::<f64>() / tail.len() as f64
    }
}

/// How a recommendation was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// The smallest level that reaches the target.
    Target,
    /// No level reaches the target: the level with the most IOPS.
    TargetMissed,
    /// The knee of the curve (Kneedle on the curve made non-decreasing).
    Knee,
    /// No knee (the curve rises about evenly): the smallest level within 10 % of the best.
    NearBest,
    /// Every level within 10 % of the best: over-provisioning buys nothing measurable.
    Flat,
    /// A file, loop device, RAM disk or rotational disk: no flash translation layer, so
    /// over-provisioning buys nothing whatever the curve shows.
    NoFlash,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub overprovision_pct: f64,
    /// The level's figure; none when the level was not measured (no flash: 0 %).
    pub iops: Option<f64>,
    pub basis: Basis,
    pub reason: String,
}

/// Makes `y` non-decreasing by pooling adjacent violators (isotonic regression): a level that
/// measured below a smaller one is taken as noise around their common mean.
fn non_decreasing(y: &[f64]) -> Vec<f64> {
    // Blocks of (sum, count).
    let mut blocks: Vec<(f64, usize)> = Vec::new();
    for &v in y {
        blocks.push((v, 1));
        while blocks.len() > 1 {
            let (s2, c2) = blocks[blocks.len() - 1];
            let (s1, c1) = blocks[blocks.len() - 2];
            if s1 / c1 as f64 <= s2 / c2 as f64 {
                break;
            }
            blocks.pop();
            *blocks.last_mut().expect("two blocks") = (s1 + s2, c1 + c2);
        }
    }
    blocks
        .iter()
        .flat_map(|&(s, c)| std::iter::repeat_n(s / c as f64, c))
        .collect()
}

/// Recommends a level from `points` (over-provisioning percent, IOPS), sorted by percent.
pub fn recommend(points: &[(f64, f64)], target_iops: Option<f64>) -> Option<Recommendation> {
    let first = points.first()?;
    let best = points
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("non-empty");
    let rec = |p: (f64, f64), basis, reason: String| Recommendation {
        overprovision_pct: p.0,
        iops: Some(p.1),
        basis,
        reason,
    };
    if let Some(t) = target_iops {
        return Some(match points.iter().find(|p| p.1 >= t) {
            Some(&p) => rec(
                p,
                Basis::Target,
                format!(
                    "the smallest level measured at or above the target of {t:.0} IOPS"
                ),
            ),
            None => rec(
                best,
                Basis::TargetMissed,
                format!(
                    "no level reaches the target of {t:.0} IOPS; {:.0} % gave the most ({:.0} IOPS)",
                    best.0, best.1
                ),
            ),
        });
    }
    if best.1 <= 0.0 || points.iter().all(|p| p.1 >= best.1 * (1.0 - FLAT)) {
        return Some(rec(
            *first,
            Basis::Flat,
            format!(
                "every level is within {:.0} % of the best: over-provisioning buys no measurable random-write speed here",
                FLAT * 100.0
            ),
        ));
    }
    let y = non_decreasing(&points.iter().map(|p| p.1).collect::<Vec<_>>());
    let last = points.len() - 1;
    let (x0, x1) = (points[0].0, points[last].0);
    let (y0, y1) = (y[0], y[last]);
    if x1 > x0 && y1 > y0 {
        // Kneedle: the point of a concave rising curve farthest above the chord, in
        // normalised coordinates.
        let (k, d) = (0..points.len())
            .map(|i| {
                let xn = (points[i].0 - x0) / (x1 - x0);
                let yn = (y[i] - y0) / (y1 - y0);
                (i, yn - xn)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .expect("non-empty");
        if d >= KNEE_MIN && y[k] >= KNEE_SHARE * y1 {
            return Some(rec(
                points[k],
                Basis::Knee,
                "the knee of the curve: more over-provisioning beyond it buys much less".into(),
            ));
        }
    }
    let near = points
        .iter()
        .copied()
        .find(|p| p.1 >= best.1 * (1.0 - FLAT))
        .expect("best is within 10 % of itself");
    Some(rec(
        near,
        Basis::NearBest,
        format!(
            "the curve has no knee; the smallest level within {:.0} % of the best",
            FLAT * 100.0
        ),
    ))
}

/// The recommendation for a device without a flash translation layer: none (0 %), whatever
/// was measured.
pub fn no_flash(points: &[(f64, f64)]) -> Option<Recommendation> {
    points.first()?;
    Some(Recommendation {
        overprovision_pct: 0.0,
        iops: points.iter().find(|p| p.0 == 0.0).map(|p| p.1),
        basis: Basis::NoFlash,
        reason: "no flash translation layer: over-provisioning cannot help this device, whatever page cache and file system made of the curve".into(),
    })
}

/// What a saved profile belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// What is compared: "MODEL:SERIAL" for drives, "file:PATH" for files and loop devices
    /// (the loop device's backing file).
    pub key: String,
    pub model: Option<String>,
    pub serial: Option<String>,
    /// Where model and serial came from (smartctl, sysfs), or what the key names.
    pub source: String,
}

fn sysfs_attr(dir: &Path, name: &str) -> Option<String> {
    let v = std::fs::read_to_string(dir.join(name)).ok()?;
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// The identity of a device: a drive by model and serial (smartctl, else sysfs), a loop device
/// by its backing file, a file by its canonical path.
pub fn identity(path: &Path) -> Result<Identity> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::io(e, "stat", &path.display().to_string(), 0))?;
    let file_key = |p: &Path, source: &str| -> Result<Identity> {
        let c = std::fs::canonicalize(p)
            .map_err(|e| Error::io(e, "canonicalize", &p.display().to_string(), 0))?;
        Ok(Identity {
            key: format!("file:{}", c.display()),
            model: None,
            serial: None,
            source: source.into(),
        })
    };
    if !meta.file_type().is_block_device() {
        return file_key(path, "file path");
    }
    if let Some(b) = raidcore::device::probe::loop_backing_file(path) {
        return file_key(&b, "loop device backing file");
    }
    let rdev = meta.rdev();
    let dev = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        libc::major(rdev),
        libc::minor(rdev)
    ));
    // A partition is its drive's identity plus where it lies on the drive; an NVMe namespace
    // its controller's plus the namespace's own id (smartctl and the controller's serial are
    // the same for every namespace and partition of a drive).
    let (disk, part) = if dev.join("partition").exists() {
        let sectors = |n: &str| sysfs_attr(&dev, n).unwrap_or_default();
        (
            dev.join(".."),
            format!(":part{}+{}", sectors("start"), sectors("size")),
        )
    } else {
        (dev.clone(), String::new())
    };
    let disk_name = std::fs::canonicalize(&disk)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_default();
    let ns = if disk_name.starts_with("nvme") {
        sysfs_attr(&disk, "wwid")
            .or_else(|| sysfs_attr(&disk, "nsid"))
            .map(|w| format!(":ns:{w}"))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let d = disk.join("device");
    let from_smart = std::process::Command::new("smartctl")
        .args(["-j", "-i"])
        .arg(path)
        .output()
        .ok()
        .and_then(|o| raidcore::wear::smart::parse(&String::from_utf8_lossy(&o.stdout)).ok())
        .and_then(|s| Some((s.model?, s.serial?)));
    let (model, serial, source) = match from_smart {
        Some((m, sn)) => (Some(m), Some(sn), "smartctl"),
        None => (
            sysfs_attr(&d, "model"),
            sysfs_attr(&d, "serial")
                .or_else(|| sysfs_attr(&disk, "wwid"))
                .or_else(|| sysfs_attr(&d, "wwid")),
            "sysfs",
        ),
    };
    match (model, serial) {
        (Some(m), Some(sn)) => Ok(Identity {
            key: format!("{m}:{sn}{ns}{part}"),
            model: Some(m),
            serial: Some(sn),
            source: source.into(),
        }),
        (m, _) => Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{}: no serial number to name a saved profile by (model {}; neither smartctl nor sysfs gives one): profile it with --no-save",
                path.display(),
                m.as_deref().unwrap_or("unknown")
            ),
        )),
    }
}

/// FNV-1a of a string: a short stable tag for file names.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Where profiles are saved.
pub fn dir() -> PathBuf {
    crate::events::state_dir().join("profiles")
}

/// Saves a profile document (it carries `identity`, `date` and `complete`) and returns its path.
pub fn save(doc: &serde_json::Value) -> Result<PathBuf> {
    let d = dir();
    std::fs::create_dir_all(&d)
        .map_err(|e| Error::io(e, "create directory", &d.display().to_string(), 0))?;
    let key = doc["identity"]["key"].as_str().unwrap_or("device");
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tail = &safe[safe.len().saturating_sub(80)..];
    let p = d.join(format!(
        "{}-{tail}-{:016x}.json",
        doc["date"].as_u64().unwrap_or(0),
        fnv(key)
    ));
    let tmp = p.with_extension(format!("{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(doc).expect("JSON value");
    std::fs::write(&tmp, text + "\n")
        .and_then(|()| std::fs::rename(&tmp, &p))
        .map_err(|e| Error::io(e, "write", &p.display().to_string(), 0))?;
    Ok(p)
}

/// The newest complete saved profile of `id` (the newest interrupted one when there is no
/// complete one), with its path; file names are only a hint, the identity inside is what is
/// matched.
pub fn find(id: &Identity) -> Option<(PathBuf, serde_json::Value)> {
    let mut best: Option<((bool, u64), PathBuf, serde_json::Value)> = None;
    for e in std::fs::read_dir(dir()).ok()?.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if doc["identity"]["key"].as_str() != Some(id.key.as_str()) {
            continue;
        }
        let rank = (
            doc["complete"].as_bool() == Some(true),
            doc["date"].as_u64().unwrap_or(0),
        );
        if best.as_ref().is_none_or(|b| rank >= b.0) {
            best = Some((rank, p, doc));
        }
    }
    best.map(|(_, p, d)| (p, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_series_is_steady_at_the_fifth_round() {
        let r = [1000.0, 1010.0, 990.0, 1005.0];
        assert!(window(&r).is_none(), "four rounds are not a window");
        let r = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
        let w = window(&r).unwrap();
        assert!(w.steady, "{w:?}");
        assert!((w.mean - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_falling_series_is_not_steady_until_it_levels_off() {
        // An SSD falling off its fresh-out-of-box speed, then settling at 1000.
        let mut r: Vec<f64> = (0..8).map(|i| 4000.0 * 0.8f64.powi(i)).collect();
        assert!(!window(&r).unwrap().steady);
        let first_steady = {
            let mut at = None;
            for k in 0..10 {
                r.push(1000.0 + if k % 2 == 0 { 30.0 } else { -30.0 });
                if window(&r).unwrap().steady {
                    at = Some(r.len());
                    break;
                }
            }
            at
        };
        assert!(first_steady.is_some(), "{r:?}");
        // The window must no longer reach back into the fall.
        assert!(first_steady.unwrap() >= 8 + 3, "{first_steady:?}");
    }

    #[test]
    fn a_steady_slope_within_range_fails_the_slope_rule() {
        // Within 20 % of the mean, but falling 4 % per round: slope excursion 16 % > 10 %.
        let r = [1080.0, 1040.0, 1000.0, 960.0, 920.0];
        let w = window(&r).unwrap();
        assert!(w.range <= MAX_RANGE, "{w:?}");
        assert!(w.slope_excursion > MAX_SLOPE_EXCURSION, "{w:?}");
        assert!(!w.steady);
    }

    #[test]
    fn noise_beyond_the_range_is_never_steady() {
        let r: Vec<f64> = (0..25)
            .map(|i| if i % 2 == 0 { 1300.0 } else { 800.0 })
            .collect();
        for k in WINDOW..=r.len() {
            assert!(!window(&r[..k]).unwrap().steady, "round {k}");
        }
        assert!((level_figure(&r) - (1300.0 * 3.0 + 800.0 * 2.0) / 5.0).abs() < 1e-9);
    }

    #[test]
    fn a_zero_series_is_not_steady() {
        assert!(!window(&[0.0; 5]).unwrap().steady);
    }

    fn curve(ys: &[f64]) -> Vec<(f64, f64)> {
        [0.0, 7.0, 10.0, 20.0, 30.0, 50.0]
            .iter()
            .copied()
            .zip(ys.iter().copied())
            .collect()
    }

    #[test]
    fn a_flat_curve_recommends_no_overprovisioning() {
        let r = recommend(&curve(&[50e3, 51e3, 49.5e3, 50.5e3, 52e3, 51e3]), None).unwrap();
        assert_eq!(r.basis, Basis::Flat);
        assert_eq!(r.overprovision_pct, 0.0);
    }

    #[test]
    fn a_knee_is_found_where_the_curve_levels_off() {
        // Typical of a consumer TLC drive: steep to 20 %, then little.
        let r = recommend(&curve(&[8e3, 15e3, 20e3, 38e3, 40e3, 42e3]), None).unwrap();
        assert_eq!(r.basis, Basis::Knee, "{r:?}");
        assert_eq!(r.overprovision_pct, 20.0);
    }

    #[test]
    fn a_level_measured_below_a_smaller_one_is_pooled_with_it() {
        // 20 % measured below 10 % (noise): pooled, both are 35k, and the curve levels off
        // from 10 % on, where the knee is.
        let r = recommend(&curve(&[8e3, 12e3, 36e3, 34e3, 39e3, 40e3]), None).unwrap();
        assert_eq!(r.basis, Basis::Knee, "{r:?}");
        assert_eq!(r.overprovision_pct, 10.0, "{r:?}");
        assert_eq!(
            non_decreasing(&[8.0, 12.0, 36.0, 34.0, 39.0]),
            vec![8.0, 12.0, 35.0, 35.0, 39.0]
        );
    }

    #[test]
    fn a_straight_curve_has_no_knee_and_takes_the_level_near_the_best() {
        let xs = [0.0, 10.0, 20.0, 30.0, 40.0, 50.0];
        let pts: Vec<(f64, f64)> = xs.iter().map(|&x| (x, 10e3 + 400.0 * x)).collect();
        let r = recommend(&pts, None).unwrap();
        assert_eq!(r.basis, Basis::NearBest, "{r:?}");
        // Best 30k at 50 %; 40 % gives 26k, below 90 % of it, so 50 % is the first within 10 %.
        assert_eq!(r.overprovision_pct, 50.0);
    }

    #[test]
    fn an_early_bend_is_no_knee_when_a_later_level_buys_much_more() {
        // Bends at 7 %, but 50 % doubles it: the early bend reaches half of the best.
        let r = recommend(&curve(&[10e3, 30e3, 31e3, 32e3, 33e3, 60e3]), None).unwrap();
        assert_eq!(
            (r.basis, r.overprovision_pct),
            (Basis::NearBest, 50.0),
            "{r:?}"
        );
        let r = recommend(&curve(&[5e3, 25e3, 26e3, 27e3, 40e3, 41e3]), None).unwrap();
        assert_eq!(r.overprovision_pct, 30.0, "{r:?}");
    }

    #[test]
    fn no_flash_recommends_zero_even_when_zero_was_not_measured() {
        let r = no_flash(&[(10.0, 5e3), (20.0, 6e3)]).unwrap();
        assert_eq!(
            (r.basis, r.overprovision_pct, r.iops),
            (Basis::NoFlash, 0.0, None)
        );
        let r = no_flash(&[(0.0, 5e3), (20.0, 6e3)]).unwrap();
        assert_eq!(r.iops, Some(5e3));
    }

    #[test]
    fn a_noisy_straight_curve_has_no_knee() {
        // Straight within 5 % noise: Kneedle finds a bump of about 0.1, not a knee.
        let r = recommend(&curve(&[80e3, 86e3, 88e3, 101e3, 108e3, 122e3]), None).unwrap();
        assert_eq!(r.basis, Basis::NearBest, "{r:?}");
        assert_eq!(r.overprovision_pct, 50.0);
    }

    #[test]
    fn a_target_takes_the_smallest_level_that_reaches_it() {
        let pts = curve(&[8e3, 15e3, 20e3, 38e3, 40e3, 42e3]);
        let r = recommend(&pts, Some(30e3)).unwrap();
        assert_eq!((r.basis, r.overprovision_pct), (Basis::Target, 20.0));
        let r = recommend(&pts, Some(50e3)).unwrap();
        assert_eq!((r.basis, r.overprovision_pct), (Basis::TargetMissed, 50.0));
        assert!(r.reason.contains("no level reaches"), "{}", r.reason);
        assert!(recommend(&[], None).is_none());
    }
}
