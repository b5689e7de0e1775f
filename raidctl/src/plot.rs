//! Drawing shared by the wear plots (`simulate --plot`, `wear --plot`): a look per member that
//! stays tellable when members' lines coincide (the point of comparing RAID 5 members is that
//! they do), the note that says which coincide, and the legend under a chart.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// The chart type both plots draw on.
pub type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What a legend entry shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A member's line: its dash pattern and its marker.
    Member(usize),
    Dash,
    Cross,
    Circle,
    Triangle,
    /// A shaded band.
    Band,
}

/// A member's colour.
pub fn color(i: usize) -> RGBAColor {
    Palette99::pick(i).to_rgba()
}

/// Dash and gap lengths of member `i`'s line: solid for the first, then ever longer dashes,
/// so lines drawn over each other still show every colour.
fn dash(i: usize) -> Option<(u32, u32)> {
    (i > 0).then(|| (4 + 3 * (i as u32 % 6), 3 + (i as u32 % 3)))
}

/// Draws member `i`'s line (of `n`) with its colour and dashes, and a small marker of its own
/// at every `n`-th point from point `i` on (staggered: coinciding lines show each member's
/// markers side by side).
pub fn member_line(
    chart: &mut Chart,
    pts: &[(f64, f64)],
    i: usize,
    n: usize,
) -> Result<(), String> {
    let c = color(i);
    let style = c.stroke_width(2);
    match dash(i) {
        None => chart.draw_series(LineSeries::new(pts.iter().copied(), style)),
        Some((d, g)) => chart.draw_series(DashedLineSeries::new(pts.iter().copied(), d, g, style)),
    }
    .map_err(|e| e.to_string())?;
    // About a dozen markers per line, staggered by member.
    let step = (pts.len() / 12).max(1) * n.max(1);
    let offset = (pts.len() / 12).max(1) * i;
    chart
        .draw_series(
            pts.iter()
                .skip(offset % pts.len().max(1))
                .step_by(step)
                .map(|&p| Circle::new(p, 3, c.filled())),
        )
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Groups of members whose lines coincide: the same number of points, every value within
/// `tol` of the other's at the same point. Only groups of two or more.
pub fn coinciding(lines: &[(usize, Vec<(f64, f64)>)], tol: f64) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut seen = vec![false; lines.len()];
    for a in 0..lines.len() {
        if seen[a] {
            continue;
        }
        let mut g = vec![lines[a].0];
        for b in a + 1..lines.len() {
            let (pa, pb) = (&lines[a].1, &lines[b].1);
            if !seen[b]
                && pa.len() == pb.len()
                && pa
                    .iter()
                    .zip(pb)
                    .all(|(x, y)| (x.0 - y.0).abs() < 1e-9 && (x.1 - y.1).abs() <= tol)
            {
                seen[b] = true;
                g.push(lines[b].0);
            }
        }
        if g.len() > 1 {
            groups.push(g);
        }
    }
    groups
}

/// "members 0, 1 and 2 coincide ..." for each group, or None.
pub fn coincide_note(groups: &[Vec<usize>], tol: f64) -> Option<String> {
    if groups.is_empty() {
        return None;
    }
    let names: Vec<String> = groups
        .iter()
        .map(|g| {
            let mut s: Vec<String> = g.iter().map(|m| m.to_string()).collect();
            let last = s.pop().unwrap_or_default();
            format!("members {} and {last}", s.join(", "))
        })
        .collect();
    Some(format!(
        "{} coincide (within {tol} % of wear at every point): their lines lie on top of each other, told apart by dashes and staggered markers",
        names.join("; ")
    ))
}

/// The legend, five entries a row, under the chart (`area` is the strip below it).
pub fn legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[(String, RGBAColor, Mark)],
) -> Result<(), String> {
    let font = ("sans-serif", 14).into_font();
    for (i, (label, color, kind)) in entries.iter().enumerate() {
        let (x, y) = (20 + 188 * (i % 5) as i32, 16 + 22 * (i / 5) as i32);
        let style = color.stroke_width(2);
        let res = match *kind {
            Mark::Member(m) => {
                let line = match dash(m) {
                    None => area.draw(&PathElement::new(vec![(x, y), (x + 20, y)], style)),
                    Some(_) => area
                        .draw(&PathElement::new(vec![(x, y), (x + 8, y)], style))
                        .and_then(|_| {
                            area.draw(&PathElement::new(vec![(x + 12, y), (x + 20, y)], style))
                        }),
                };
                line.and_then(|_| area.draw(&Circle::new((x + 10, y), 3, color.filled())))
            }
            Mark::Dash => area
                .draw(&PathElement::new(vec![(x, y), (x + 6, y)], style))
                .and_then(|_| area.draw(&PathElement::new(vec![(x + 12, y), (x + 20, y)], style))),
            Mark::Cross => area.draw(&Cross::new((x + 10, y), 6, style)),
            Mark::Circle => area.draw(&Circle::new((x + 10, y), 5, style)),
            Mark::Triangle => area.draw(&TriangleMarker::new((x + 10, y), 6, color.filled())),
            Mark::Band => area.draw(&Rectangle::new(
                [(x, y - 6), (x + 20, y + 6)],
                color.filled(),
            )),
        };
        res.map_err(|e| e.to_string())?;
        area.draw(&Text::new(label.clone(), (x + 26, y - 7), font.clone()))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Height of the legend strip for `entries` entries.
pub fn legend_height(entries: usize) -> u32 {
    20 + 22 * entries.div_ceil(5) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_lines_are_found_and_named() {
        let a: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, x as f64 * 2.0)).collect();
        let b = a.clone();
        let c: Vec<(f64, f64)> = a.iter().map(|p| (p.0, p.1 + 5.0)).collect();
        let g = coinciding(&[(0, a.clone()), (1, c), (2, b), (3, a)], 0.5);
        assert_eq!(g, vec![vec![0, 2, 3]]);
        let note = coincide_note(&g, 0.5).unwrap();
        assert!(note.starts_with("members 0, 2 and 3 coincide"), "{note}");
        assert_eq!(coincide_note(&[], 0.5), None);
        // Every member past the first has its own dashes.
        assert_eq!(dash(0), None);
        assert_ne!(dash(1), dash(2));
    }
}
