//! Axis ranges and ticks: 1–2–5 steps on linear axes, decades on log axes.

/// A tick label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickLabel {
    /// Plain text, e.g. `0.25`.
    Plain(String),
    /// `10^k`, drawn with a superscript.
    Power(i32),
    /// No label (a minor tick).
    None,
}

/// One tick of an axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// Its value (in data units, not log units).
    pub value: f64,
    /// Its label.
    pub label: TickLabel,
    /// A major tick (gets a grid line).
    pub major: bool,
}

/// The range of an axis and its ticks. For a log axis `lo` and `hi` are in data units too.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    /// Lower end of the axis.
    pub lo: f64,
    /// Upper end of the axis.
    pub hi: f64,
    /// The ticks, increasing.
    pub ticks: Vec<Tick>,
}

/// A 1–2–5 step of at least `range / 6` (3 to 8 ticks).
fn nice_step(range: f64) -> f64 {
    let raw = range / 6.0;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let m = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * p
}

/// Formats `v` for a linear axis whose ticks are `step` apart.
fn format_linear(v: f64, step: f64, max_abs: f64) -> String {
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if max_abs >= 1e6 || step < 1e-4 {
        let s = format!("{v:.1e}");
        return s.replace(".0e", "e");
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// Ticks of a linear axis covering `[min, max]` (finite, `min ≤ max`), extended to whole steps.
/// A single value gets a range around it.
pub fn linear_ticks(min: f64, max: f64) -> Ticks {
    let (min, max) = if max > min {
        (min, max)
    } else if min == 0.0 {
        (-1.0, 1.0)
    } else {
        (min - 0.1 * min.abs(), max + 0.1 * max.abs())
    };
    let step = nice_step(max - min);
    let first = (min / step).floor() as i64;
    let last = (max / step).ceil() as i64;
    let max_abs = min.abs().max(max.abs());
    let ticks = (first..=last)
        .map(|i| {
            let v = i as f64 * step;
            Tick {
                value: v,
                label: TickLabel::Plain(format_linear(v, step, max_abs)),
                major: true,
            }
        })
        .collect();
    Ticks {
        lo: first as f64 * step,
        hi: last as f64 * step,
        ticks,
    }
}

/// Ticks of a log axis covering `[min, max]` (`0 < min ≤ max`, finite): the axis runs over
/// whole decades, majors at `10^k` (every decade, or every second/third when there are many),
/// minors at `m·10^k`, `m = 2..9` (labelled 2 and 5 when the axis spans at most two decades).
pub fn log_ticks(min: f64, max: f64) -> Ticks {
    // Tolerate values a rounding error off a decade (1e-3 computed as 0.0009999…).
    let lo = (min.log10() + 1e-9).floor() as i32;
    let mut hi = (max.log10() - 1e-9).ceil() as i32;
    if hi <= lo {
        hi = lo + 1;
    }
    let decades = hi - lo;
    let stride = ((decades as f64) / 8.0).ceil().max(1.0) as i32;
    let label_minors = decades <= 2;
    let mut ticks = Vec::new();
    for k in lo..=hi {
        let labelled = (k - lo) % stride == 0;
        ticks.push(Tick {
            value: 10f64.powi(k),
            label: if labelled {
                TickLabel::Power(k)
            } else {
                TickLabel::None
            },
            major: true,
        });
        if k < hi && decades <= 6 {
            for m in 2..=9 {
                let value = m as f64 * 10f64.powi(k);
                let label = if label_minors && (m == 2 || m == 5) {
                    TickLabel::Plain(format_minor(m, k))
                } else {
                    TickLabel::None
                };
                ticks.push(Tick {
                    value,
                    label,
                    major: false,
                });
            }
        }
    }
    Ticks {
        lo: 10f64.powi(lo),
        hi: 10f64.powi(hi),
        ticks,
    }
}

/// `m·10^k` as a short decimal (`0.002`, `50`) or `2e-7` when that would be long.
fn format_minor(m: u32, k: i32) -> String {
    if (-4..=5).contains(&k) {
        let v = m as f64 * 10f64.powi(k);
        let decimals = (-k).max(0) as usize;
        format!("{v:.decimals$}")
    } else {
        format!("{m}e{k}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn powers(t: &Ticks) -> Vec<i32> {
        t.ticks
            .iter()
            .filter_map(|t| match t.label {
                TickLabel::Power(k) => Some(k),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn log_axis_runs_over_whole_decades() {
        let t = log_ticks(3.2e-5, 0.41);
        assert_eq!((t.lo, t.hi), (1e-5, 1.0));
        assert_eq!(powers(&t), vec![-5, -4, -3, -2, -1, 0]);
        // 8 minors per decade, none labelled over five decades.
        let minors: Vec<_> = t.ticks.iter().filter(|t| !t.major).collect();
        assert_eq!(minors.len(), 5 * 8);
        assert!(minors.iter().all(|t| t.label == TickLabel::None));
        // Exact decades stay on their decade (no extra empty decade).
        let t = log_ticks(1e-3, 1.0);
        assert_eq!(powers(&t), vec![-3, -2, -1, 0]);
        let t = log_ticks(0.0009999999999999998, 1.0000000000000002);
        assert_eq!(powers(&t), vec![-3, -2, -1, 0]);
    }

    #[test]
    fn log_axis_within_a_decade_gets_one_decade_and_labelled_minors() {
        let t = log_ticks(2.5, 7.0);
        assert_eq!((t.lo, t.hi), (1.0, 10.0));
        let labels: Vec<_> = t
            .ticks
            .iter()
            .filter_map(|t| match &t.label {
                TickLabel::Plain(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(labels, vec!["2", "5"]);
        let t = log_ticks(0.003, 0.03);
        assert!(
            t.ticks
                .iter()
                .any(|t| t.label == TickLabel::Plain("0.002".into()))
        );
    }

    #[test]
    fn many_decades_thin_the_labels() {
        let t = log_ticks(1e-12, 1e6);
        assert_eq!(powers(&t), vec![-12, -9, -6, -3, 0, 3, 6]);
        assert!(t.ticks.iter().all(|t| t.major), "no minors over 18 decades");
    }

    #[test]
    fn linear_ticks_are_nice_and_cover_the_data() {
        let t = linear_ticks(0.75, 6.0);
        let v: Vec<f64> = t.ticks.iter().map(|t| t.value).collect();
        assert_eq!(v, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let t = linear_ticks(10.0, 16.0);
        let labels: Vec<_> = t.ticks.iter().map(|t| t.label.clone()).collect();
        assert_eq!(
            labels,
            ["10", "11", "12", "13", "14", "15", "16"]
                .map(|s| TickLabel::Plain(s.into()))
                .to_vec()
        );
        let t = linear_ticks(-0.3, 0.7);
        assert!(t.lo <= -0.3 && t.hi >= 0.7);
        assert!(
            t.ticks
                .iter()
                .any(|t| t.label == TickLabel::Plain("0.0".into()))
        );
        // One value: a range around it.
        let t = linear_ticks(5.0, 5.0);
        assert!(t.lo < 5.0 && t.hi > 5.0);
        let t = linear_ticks(0.0, 0.0);
        assert_eq!((t.lo, t.hi), (-1.0, 1.0));
    }
}
