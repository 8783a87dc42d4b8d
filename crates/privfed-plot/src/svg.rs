//! The SVG writer: validation, layout and drawing.

use super::png::FONT_FAMILY;
use super::ticks::{TickLabel, Ticks, linear_ticks, log_ticks};
use super::{ErrorStyle, Figure, Panel, PlotError, Result, Scale, Series, SeriesData, Style};
use std::fmt::Write;

/// Ten distinguishable colours (the Tableau 10 palette).
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
/// Dash patterns: solid, dashed, dotted, dash-dot.
const DASHES: [&str; 4] = ["", "7 4", "2 3", "8 3 2 3"];

const MARGIN_LEFT: f64 = 68.0;
const MARGIN_RIGHT: f64 = 16.0;
const MARGIN_TOP: f64 = 28.0;
const MARGIN_BOTTOM: f64 = 48.0;
const FIGURE_TITLE: f64 = 30.0;
const FONT: f64 = 12.0;
/// Rough width of a character of a 12-pixel sans-serif font (no font metrics without a font).
const CHAR_WIDTH: f64 = 6.8;
/// Estimated width of one character of the figure title (bold, 15 px): `CHAR_WIDTH` scaled to the
/// larger size, plus a margin for bold glyphs.
const TITLE_CHAR_WIDTH: f64 = CHAR_WIDTH * 15.0 / FONT * 1.08;
/// Space kept between the title and the image's edges.
const TITLE_PAD: f64 = 6.0;

/// Escapes text for XML.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn color(style: &Style) -> &'static str {
    PALETTE[style.color % PALETTE.len()]
}

fn dash_attr(style: &Style) -> String {
    let d = DASHES[style.dash % DASHES.len()];
    if d.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{d}""#)
    }
}

fn check_finite(series: &str, index: usize, field: &'static str, value: f64) -> Result<()> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(PlotError::NonFinite {
            series: series.into(),
            index,
            field,
            value,
        })
    }
}

/// The data ranges of a panel after validation: `(x_min, x_max, y_min, y_max)`; x is `None`
/// when the panel has only levels.
struct Extent {
    x: Option<(f64, f64)>,
    y: (f64, f64),
}

fn widen(r: &mut Option<(f64, f64)>, v: f64) {
    *r = Some(match *r {
        None => (v, v),
        Some((a, b)) => (a.min(v), b.max(v)),
    });
}

/// Checks a panel's data and returns its extent. Interval ends count towards the range, except
/// non-positive lower ends on a log axis (those are clipped when drawn).
fn validate(panel: &Panel) -> Result<Extent> {
    if panel.series.is_empty() {
        return Err(PlotError::Empty(format!(
            "panel {:?} has no series",
            panel.title
        )));
    }
    let log_x = panel.x.scale == Scale::Log;
    let log_y = panel.y.scale == Scale::Log;
    let (mut xr, mut yr) = (None, None);
    let mut check_y = |s: &Series, i: usize, y: f64, iv: Option<(f64, f64)>| -> Result<()> {
        check_finite(&s.name, i, "y", y)?;
        if log_y && y <= 0.0 {
            return Err(PlotError::NonPositiveOnLog {
                series: s.name.clone(),
                axis: "y",
                value: y,
            });
        }
        widen(&mut yr, y);
        if let Some((lo, hi)) = iv {
            check_finite(&s.name, i, "lower", lo)?;
            check_finite(&s.name, i, "upper", hi)?;
            if !(lo <= y && y <= hi) {
                return Err(PlotError::BadInterval {
                    series: s.name.clone(),
                    index: i,
                    y,
                    lower: lo,
                    upper: hi,
                });
            }
            if !log_y || lo > 0.0 {
                widen(&mut yr, lo);
            }
            widen(&mut yr, hi);
        }
        Ok(())
    };
    for s in &panel.series {
        match &s.data {
            SeriesData::Points(points) => {
                if points.is_empty() {
                    return Err(PlotError::Empty(format!(
                        "series {:?} has no points",
                        s.name
                    )));
                }
                for (i, p) in points.iter().enumerate() {
                    check_finite(&s.name, i, "x", p.x)?;
                    if log_x && p.x <= 0.0 {
                        return Err(PlotError::NonPositiveOnLog {
                            series: s.name.clone(),
                            axis: "x",
                            value: p.x,
                        });
                    }
                    widen(&mut xr, p.x);
                    check_y(s, i, p.y, p.interval)?;
                }
            }
            SeriesData::Level { y, interval } => check_y(s, 0, *y, *interval)?,
        }
    }
    let y = yr.ok_or_else(|| PlotError::Empty(format!("panel {:?}", panel.title)))?;
    Ok(Extent { x: xr, y })
}

/// Maps data values to pixels along one axis.
struct Map {
    ticks: Ticks,
    log: bool,
    /// Pixel of the axis's lower end and of its upper end.
    from: f64,
    to: f64,
}

impl Map {
    fn new(scale: Scale, (min, max): (f64, f64), from: f64, to: f64) -> Self {
        let log = scale == Scale::Log;
        let ticks = if log {
            log_ticks(min, max)
        } else {
            linear_ticks(min, max)
        };
        Map {
            ticks,
            log,
            from,
            to,
        }
    }

    fn unit(&self, v: f64) -> f64 {
        if self.log {
            let v = v.max(self.ticks.lo * 1e-3);
            (v.log10() - self.ticks.lo.log10()) / (self.ticks.hi.log10() - self.ticks.lo.log10())
        } else {
            (v - self.ticks.lo) / (self.ticks.hi - self.ticks.lo)
        }
    }

    /// Pixel of `v`; values beyond the axis (clipped lower ends) stay a little outside it.
    fn px(&self, v: f64) -> f64 {
        let u = self.unit(v).clamp(-0.05, 1.05);
        self.from + u * (self.to - self.from)
    }
}

fn label_svg(label: &TickLabel) -> Option<String> {
    match label {
        TickLabel::Plain(s) => Some(esc(s)),
        // Superscript characters rather than a raised <tspan>: renderers disagree on how a
        // tspan shift combines with right-aligned text.
        TickLabel::Power(k) => Some(format!("10{}", superscript(*k))),
        TickLabel::None => None,
    }
}

/// `k` in Unicode superscript digits (`−3` → `⁻³`).
fn superscript(k: i32) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut out = String::new();
    if k < 0 {
        out.push('⁻');
    }
    for c in k.unsigned_abs().to_string().chars() {
        out.push(DIGITS[c.to_digit(10).unwrap_or(0) as usize]);
    }
    out
}

/// Draws one panel with its top-left corner at `(ox, oy)`.
fn panel_svg(
    out: &mut String,
    index: usize,
    panel: &Panel,
    ox: f64,
    oy: f64,
    w: f64,
    h: f64,
) -> Result<()> {
    let extent = validate(panel)?;
    let (left, top) = (ox + MARGIN_LEFT, oy + MARGIN_TOP);
    let (right, bottom) = (ox + w - MARGIN_RIGHT, oy + h - MARGIN_BOTTOM);
    // A panel of levels only gets a unit x range (the lines span it).
    let xrange = extent.x.unwrap_or(match panel.x.scale {
        Scale::Log => (1.0, 10.0),
        Scale::Linear => (0.0, 1.0),
    });
    let xm = Map::new(panel.x.scale, xrange, left, right);
    let ym = Map::new(panel.y.scale, extent.y, bottom, top);
    let _ = writeln!(out, r#"<g class="panel" data-panel="{index}">"#);
    let _ = writeln!(
        out,
        r#"<clipPath id="clip{index}"><rect x="{left:.2}" y="{top:.2}" width="{:.2}" height="{:.2}"/></clipPath>"#,
        right - left,
        bottom - top
    );
    // Grid and ticks.
    let _ = writeln!(
        out,
        r#"<g class="axis x-axis" data-scale="{:?}">"#,
        panel.x.scale
    );
    for t in &xm.ticks.ticks {
        let x = xm.px(t.value);
        if t.major {
            let _ = writeln!(
                out,
                r##"<line x1="{x:.2}" y1="{top:.2}" x2="{x:.2}" y2="{bottom:.2}" stroke="#e4e4e4"/>"##
            );
        }
        let len = if t.major { 5.0 } else { 3.0 };
        let _ = writeln!(
            out,
            r##"<line x1="{x:.2}" y1="{bottom:.2}" x2="{x:.2}" y2="{:.2}" stroke="#333"/>"##,
            bottom + len
        );
        if let Some(l) = label_svg(&t.label) {
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{x:.2}" y="{:.2}" text-anchor="middle">{l}</text>"#,
                bottom + 18.0
            );
        }
    }
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="{:.2}" y="{:.2}" text-anchor="middle">{}</text></g>"#,
        (left + right) / 2.0,
        bottom + 38.0,
        esc(&panel.x.label)
    );
    let _ = writeln!(
        out,
        r#"<g class="axis y-axis" data-scale="{:?}">"#,
        panel.y.scale
    );
    for t in &ym.ticks.ticks {
        let y = ym.px(t.value);
        if t.major {
            let _ = writeln!(
                out,
                r##"<line x1="{left:.2}" y1="{y:.2}" x2="{right:.2}" y2="{y:.2}" stroke="#e4e4e4"/>"##
            );
        }
        let len = if t.major { 5.0 } else { 3.0 };
        let _ = writeln!(
            out,
            r##"<line x1="{:.2}" y1="{y:.2}" x2="{left:.2}" y2="{y:.2}" stroke="#333"/>"##,
            left - len
        );
        if let Some(l) = label_svg(&t.label) {
            let _ = writeln!(
                out,
                r#"<text class="tick" x="{:.2}" y="{:.2}" text-anchor="end">{l}</text>"#,
                left - 8.0,
                y + 4.0
            );
        }
    }
    let (lx, ly) = (ox + 14.0, (top + bottom) / 2.0);
    let _ = writeln!(
        out,
        r#"<text class="axis-label" x="{lx:.2}" y="{ly:.2}" text-anchor="middle" transform="rotate(-90 {lx:.2} {ly:.2})">{}</text></g>"#,
        esc(&panel.y.label)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left:.2}" y="{top:.2}" width="{:.2}" height="{:.2}" fill="none" stroke="#333"/>"##,
        right - left,
        bottom - top
    );
    if !panel.title.is_empty() {
        let _ = writeln!(
            out,
            r#"<text class="panel-title" x="{:.2}" y="{:.2}" text-anchor="middle" font-weight="bold">{}</text>"#,
            (left + right) / 2.0,
            top - 9.0,
            esc(&panel.title)
        );
    }
    // Series, clipped to the plot area.
    let _ = writeln!(out, r#"<g clip-path="url(#clip{index})">"#);
    for s in &panel.series {
        series_svg(out, s, &xm, &ym);
    }
    out.push_str("</g>\n</g>\n");
    Ok(())
}

fn series_svg(out: &mut String, s: &Series, xm: &Map, ym: &Map) {
    let c = color(&s.style);
    let dash = dash_attr(&s.style);
    let _ = writeln!(out, r#"<g class="series" data-series="{}">"#, esc(&s.name));
    match &s.data {
        SeriesData::Points(points) => {
            let intervals: Vec<_> = points
                .iter()
                .filter_map(|p| p.interval.map(|iv| (p.x, iv)))
                .collect();
            match s.style.errors {
                ErrorStyle::Band if intervals.len() >= 2 => {
                    let mut d = String::new();
                    for (i, (x, (_, hi))) in intervals.iter().enumerate() {
                        let _ = write!(
                            d,
                            "{}{:.2},{:.2} ",
                            if i == 0 { "M" } else { "L" },
                            xm.px(*x),
                            ym.px(*hi)
                        );
                    }
                    for (x, (lo, _)) in intervals.iter().rev() {
                        let _ = write!(d, "L{:.2},{:.2} ", xm.px(*x), ym.px(*lo));
                    }
                    let _ = writeln!(
                        out,
                        r#"<path class="band" d="{}Z" fill="{c}" fill-opacity="0.18" stroke="none"/>"#,
                        d.trim_end()
                    );
                }
                _ => {
                    for (x, (lo, hi)) in &intervals {
                        let (px, a, b) = (xm.px(*x), ym.px(*lo), ym.px(*hi));
                        let _ = writeln!(
                            out,
                            r#"<path class="bar" d="M{px:.2},{a:.2}V{b:.2}M{:.2},{a:.2}H{:.2}M{:.2},{b:.2}H{:.2}" stroke="{c}" fill="none"/>"#,
                            px - 3.0,
                            px + 3.0,
                            px - 3.0,
                            px + 3.0
                        );
                    }
                }
            }
            let pts: Vec<String> = points
                .iter()
                .map(|p| format!("{:.2},{:.2}", xm.px(p.x), ym.px(p.y)))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline class="line" points="{}" fill="none" stroke="{c}" stroke-width="1.6"{dash}/>"#,
                pts.join(" ")
            );
            for p in points {
                let _ = writeln!(
                    out,
                    r#"<circle class="marker" cx="{:.2}" cy="{:.2}" r="2.4" fill="{c}"/>"#,
                    xm.px(p.x),
                    ym.px(p.y)
                );
            }
        }
        SeriesData::Level { y, interval } => {
            let (x0, x1) = (xm.from, xm.to);
            if let Some((lo, hi)) = interval {
                let (a, b) = (ym.px(*lo), ym.px(*hi));
                let _ = writeln!(
                    out,
                    r#"<rect class="band" x="{x0:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{c}" fill-opacity="0.18"/>"#,
                    a.min(b),
                    x1 - x0,
                    (a - b).abs()
                );
            }
            let py = ym.px(*y);
            let _ = writeln!(
                out,
                r#"<line class="line" x1="{x0:.2}" y1="{py:.2}" x2="{x1:.2}" y2="{py:.2}" stroke="{c}" stroke-width="1.6"{dash}/>"#
            );
        }
    }
    out.push_str("</g>\n");
}

/// Renders the figure as a standalone SVG document.
pub fn render_svg(figure: &Figure) -> Result<String> {
    let (w, h) = (figure.panel_width, figure.panel_height);
    if !(w.is_finite() && h.is_finite() && w >= 120.0 && h >= 100.0 && w <= 1e5 && h <= 1e5) {
        return Err(PlotError::Size {
            width: w,
            height: h,
        });
    }
    if figure.panels.is_empty() {
        return Err(PlotError::Empty("the figure has no panels".into()));
    }
    // One legend entry per (name, style), in order of first appearance.
    let mut legend: Vec<(&str, Style, bool)> = Vec::new();
    for s in figure.panels.iter().flat_map(|p| &p.series) {
        if !legend
            .iter()
            .any(|(n, st, _)| *n == s.name && *st == s.style)
        {
            legend.push((&s.name, s.style, matches!(s.data, SeriesData::Points(_))));
        }
    }
    let longest = legend
        .iter()
        .map(|(n, _, _)| n.chars().count())
        .chain(std::iter::once(figure.legend_title.chars().count()))
        .max()
        .unwrap_or(0);
    let legend_w = 48.0 + CHAR_WIDTH * longest as f64;
    let top = if figure.title.is_empty() {
        0.0
    } else {
        FIGURE_TITLE
    };
    let panels_w = w * figure.panels.len() as f64;
    // A title wider than the panels is centred further right, and the figure widened if needed,
    // so that it is never cut at either edge.
    let title_w = TITLE_CHAR_WIDTH * figure.title.chars().count() as f64;
    let width = (panels_w + legend_w).max(title_w + 2.0 * TITLE_PAD);
    let title_x = (panels_w / 2.0).max(title_w / 2.0 + TITLE_PAD);
    let legend_h = 24.0 + 18.0 * legend.len() as f64;
    let height = top + h.max(legend_h + MARGIN_TOP);
    let mut out = String::new();
    let _ = writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="{FONT_FAMILY}, DejaVu Sans, Helvetica, Arial, sans-serif" font-size="{FONT}">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    if !figure.title.is_empty() {
        let _ = writeln!(
            out,
            r#"<text class="title" x="{:.2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            title_x,
            esc(&figure.title)
        );
    }
    for (i, panel) in figure.panels.iter().enumerate() {
        panel_svg(&mut out, i, panel, w * i as f64, top, w, h)?;
    }
    // The legend, right of the panels.
    let lx = w * figure.panels.len() as f64 + 4.0;
    let mut ly = top + MARGIN_TOP + 4.0;
    let _ = writeln!(out, r#"<g class="legend">"#);
    if !figure.legend_title.is_empty() {
        let _ = writeln!(
            out,
            r#"<text class="legend-title" x="{lx:.2}" y="{ly:.2}" font-weight="bold">{}</text>"#,
            esc(&figure.legend_title)
        );
        ly += 18.0;
    }
    for (name, style, points) in &legend {
        let c = color(style);
        let dash = dash_attr(style);
        let _ = writeln!(
            out,
            r#"<line x1="{lx:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="{c}" stroke-width="1.6"{dash}/>"#,
            ly - 4.0,
            lx + 30.0,
            ly - 4.0
        );
        if *points {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.2}" cy="{:.2}" r="2.4" fill="{c}"/>"#,
                lx + 15.0,
                ly - 4.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text class="legend-entry" x="{:.2}" y="{ly:.2}">{}</text>"#,
            lx + 36.0,
            esc(name)
        );
        ly += 18.0;
    }
    out.push_str("</g>\n</svg>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Axis, Point};
    use super::*;

    fn panel(series: Vec<Series>) -> Panel {
        Panel {
            title: "p".into(),
            x: Axis::linear("x"),
            y: Axis::log("y"),
            series,
        }
    }

    #[test]
    fn escapes_markup_in_names() {
        assert_eq!(
            esc(r#"a<b & "c">'"#),
            "a&lt;b &amp; &quot;c&quot;&gt;&apos;"
        );
    }

    #[test]
    fn nonpositive_lower_end_on_log_axis_is_clipped_not_an_error() {
        let s = Series::points(
            "s",
            vec![
                Point::with_interval(1.0, 0.01, -0.02, 0.04),
                Point::with_interval(2.0, 0.02, 0.01, 0.03),
            ],
            Style::default(),
        );
        let svg = render_svg(&Figure::new("", vec![panel(vec![s])])).unwrap();
        assert!(svg.contains(r#"class="band""#));
    }

    #[test]
    fn a_panel_of_levels_only_is_drawn() {
        let s = Series::level("g", 0.5, Some((0.4, 0.6)), Style::default());
        let svg = render_svg(&Figure::new("", vec![panel(vec![s])])).unwrap();
        assert!(svg.contains(r#"<rect class="band""#));
    }
}
