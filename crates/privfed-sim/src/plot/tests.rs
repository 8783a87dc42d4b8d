//! Figures read back as XML: well-formed, the series and ticks present, bad input typed.

use super::table::{Table, TableSpec, figure_from_table};
use super::*;

/// Parses `svg` (fails the test if it is not well-formed XML) and hands the document on.
fn parsed<T>(svg: &str, f: impl FnOnce(&roxmltree::Document) -> T) -> T {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    f(&doc)
}

fn class_nodes<'a>(doc: &'a roxmltree::Document, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| {
            n.attribute("class")
                .is_some_and(|c| c.split(' ').any(|c| c == class))
        })
        .collect()
}

fn text_of(n: &roxmltree::Node) -> String {
    n.descendants()
        .filter(|d| d.is_text())
        .filter_map(|d| d.text())
        .collect()
}

fn curve(c: f64) -> Vec<Point> {
    (1..=6)
        .map(|e| {
            let y = c / f64::from(e);
            Point::with_interval(f64::from(e), y, 0.8 * y, 1.2 * y)
        })
        .collect()
}

fn two_panels() -> Figure {
    let panel = |title: &str, c: f64| Panel {
        title: title.into(),
        x: Axis::linear("ε"),
        y: Axis::log("MSE"),
        series: vec![
            Series::points("gaussian", curve(c), Style::default()),
            Series::points(
                "skellam <10 bits>",
                curve(3.0 * c),
                Style {
                    color: 1,
                    dash: 1,
                    errors: ErrorStyle::Bars,
                },
            ),
        ],
    };
    Figure::new(
        "DME & more",
        vec![panel("n = 100", 0.05), panel("n = 1000", 5e-4)],
    )
}

#[test]
fn figure_is_well_formed_with_every_series_and_one_legend_entry_each() {
    let svg = render_svg(&two_panels()).unwrap();
    parsed(&svg, |doc| {
        let series: Vec<_> = class_nodes(doc, "series")
            .iter()
            .map(|n| n.attribute("data-series").unwrap().to_string())
            .collect();
        assert_eq!(
            series,
            [
                "gaussian",
                "skellam <10 bits>",
                "gaussian",
                "skellam <10 bits>"
            ]
        );
        assert_eq!(class_nodes(doc, "panel").len(), 2);
        let legend: Vec<_> = class_nodes(doc, "legend-entry")
            .iter()
            .map(text_of)
            .collect();
        assert_eq!(legend, ["gaussian", "skellam <10 bits>"]);
        // Each points series: one line with six markers; bands for one, bars for the other.
        let first = &class_nodes(doc, "series")[0];
        assert_eq!(
            first
                .descendants()
                .filter(|n| n.has_tag_name("circle"))
                .count(),
            6
        );
        assert_eq!(class_nodes(doc, "band").len(), 2);
        assert_eq!(class_nodes(doc, "bar").len(), 12);
        let titles: Vec<_> = class_nodes(doc, "panel-title")
            .iter()
            .map(text_of)
            .collect();
        assert_eq!(titles, ["n = 100", "n = 1000"]);
        assert_eq!(text_of(&class_nodes(doc, "title")[0]), "DME & more");
    });
}

/// The y tick labels of panel `i`, as text (`10⁻³` for 10^-3).
fn y_labels(doc: &roxmltree::Document, i: usize) -> Vec<String> {
    let panel = class_nodes(doc, "panel")[i];
    let axis = panel
        .descendants()
        .find(|n| n.attribute("class") == Some("axis y-axis"))
        .unwrap();
    axis.descendants()
        .filter(|n| n.attribute("class") == Some("tick"))
        .map(|n| text_of(&n))
        .collect()
}

#[test]
fn log_axis_labels_are_the_decades_of_the_data_and_bands() {
    let svg = render_svg(&two_panels()).unwrap();
    parsed(&svg, |doc| {
        // Panel 1: y from 0.8·0.05/6 = 6.7e-3 to 1.2·0.15 = 0.18 → decades 10^-3 … 10^0.
        assert_eq!(y_labels(doc, 0), ["10⁻³", "10⁻²", "10⁻¹", "10⁰"]);
        // Panel 2: 6.7e-5 … 1.8e-3 → 10^-5 … 10^-2.
        assert_eq!(y_labels(doc, 1), ["10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²"]);
    });
    // The decade ticks sit at equal distances, increasing upwards.
    parsed(&svg, |doc| {
        let panel = class_nodes(doc, "panel")[0];
        let ys: Vec<f64> = panel
            .descendants()
            .filter(|n| n.attribute("class") == Some("tick") && text_of(n).starts_with("10"))
            .filter(|n| n.parent().unwrap().attribute("class") == Some("axis y-axis"))
            .map(|n| n.attribute("y").unwrap().parse().unwrap())
            .collect();
        let gaps: Vec<f64> = ys.windows(2).map(|w| w[0] - w[1]).collect();
        assert!(
            gaps.iter().all(|g| *g > 0.0 && (g - gaps[0]).abs() < 0.02),
            "{ys:?}"
        );
    });
}

#[test]
fn bad_input_is_a_typed_error() {
    let mut f = two_panels();
    if let SeriesData::Points(p) = &mut f.panels[1].series[0].data {
        p[2].y = f64::NAN;
    }
    assert!(matches!(
        render_svg(&f),
        Err(PlotError::NonFinite {
            field: "y",
            index: 2,
            ..
        })
    ));
    let mut f = two_panels();
    if let SeriesData::Points(p) = &mut f.panels[0].series[1].data {
        p[0].x = f64::INFINITY;
    }
    assert!(matches!(
        render_svg(&f),
        Err(PlotError::NonFinite { field: "x", .. })
    ));
    let mut f = two_panels();
    if let SeriesData::Points(p) = &mut f.panels[0].series[0].data {
        p[0].y = 0.0;
        p[0].interval = None;
    }
    assert!(matches!(
        render_svg(&f),
        Err(PlotError::NonPositiveOnLog { axis: "y", .. })
    ));
    let mut f = two_panels();
    if let SeriesData::Points(p) = &mut f.panels[0].series[0].data {
        p[0].interval = Some((0.5, 0.6));
    }
    assert!(matches!(render_svg(&f), Err(PlotError::BadInterval { .. })));
    let mut f = two_panels();
    f.panels[0].series[0].data = SeriesData::Points(vec![]);
    assert!(matches!(render_svg(&f), Err(PlotError::Empty(_))));
    assert!(matches!(
        render_svg(&Figure::new("", vec![])),
        Err(PlotError::Empty(_))
    ));
    let mut f = two_panels();
    f.panel_width = f64::NAN;
    assert!(matches!(render_svg(&f), Err(PlotError::Size { .. })));
}

const CSV: &str = "\
mechanism,clients,bits,epsilon,mse,lo,hi,note
gaussian,100,,1,0.1,0.09,0.11,
skellam,100,10,1,0.2,0.18,0.22,
skellam,100,12,1,0.15,0.14,0.16,
skellam,100,14,1,,,,\"infeasible, use more bits\"
gaussian,1000,,1,0.001,0.0009,0.0011,
skellam,1000,10,1,0.02,0.018,0.022,
skellam,1000,12,1,0.002,0.0018,0.0022,
skellam,1000,12,2,0.001,0.0009,0.0011,
";

fn spec() -> TableSpec {
    TableSpec {
        x: "bits".into(),
        y: "mse".into(),
        interval: Some(("lo".into(), "hi".into())),
        series: vec!["mechanism".into()],
        panels: vec!["clients".into()],
        filters: vec![("epsilon".into(), vec!["1.0".into()])],
        y_scale: Scale::Log,
        ..TableSpec::default()
    }
}

#[test]
fn csv_becomes_panels_series_and_a_reference_level() {
    let table = Table::parse(CSV).unwrap();
    let fig = figure_from_table(&table, &spec()).unwrap();
    assert_eq!(fig.panels.len(), 2);
    assert_eq!(fig.panels[0].title, "clients = 100");
    let p = &fig.panels[0];
    assert_eq!(p.series.len(), 2);
    assert!(matches!(p.series[0].data, SeriesData::Level { y: 0.1, .. }));
    // The infeasible row (empty y) is skipped; ε = 2 is filtered out ("1.0" matches "1").
    match &fig.panels[1].series[1].data {
        SeriesData::Points(pts) => {
            assert_eq!(pts.iter().map(|p| p.x).collect::<Vec<_>>(), [10.0, 12.0]);
        }
        other => panic!("{other:?}"),
    }
    // Several values for one column keep rows matching any of them.
    let mut s2 = spec();
    s2.filters = vec![("epsilon".into(), vec!["1".into(), "2".into()])];
    let fig2 = figure_from_table(&table, &s2).unwrap();
    match &fig2.panels[1].series[1].data {
        SeriesData::Points(pts) => assert_eq!(pts.len(), 3),
        other => panic!("{other:?}"),
    }
    // The same series has the same style in both panels.
    assert_eq!(fig.panels[0].series[1].style, fig.panels[1].series[1].style);
    assert_ne!(fig.panels[0].series[0].style, fig.panels[0].series[1].style);
    let svg = render_svg(&fig).unwrap();
    parsed(&svg, |doc| assert_eq!(class_nodes(doc, "series").len(), 4));
}

#[test]
fn csv_errors_name_the_problem() {
    let table = Table::parse(CSV).unwrap();
    let mut s = spec();
    s.x = "bitz".into();
    assert!(matches!(
        figure_from_table(&table, &s),
        Err(PlotError::MissingColumn { name, .. }) if name == "bitz"
    ));
    let mut s = spec();
    s.y = "note".into();
    assert!(matches!(
        figure_from_table(&table, &s),
        Err(PlotError::NotANumber { .. })
    ));
    let mut s = spec();
    s.filters = vec![("clients".into(), vec!["7".into(), "8".into()])];
    assert!(matches!(
        figure_from_table(&table, &s),
        Err(PlotError::Empty(_))
    ));
    // Two reference rows in one series are ambiguous.
    let mut s = spec();
    s.filters.clear();
    s.panels.clear();
    assert!(matches!(
        figure_from_table(&table, &s),
        Err(PlotError::Options(_))
    ));
}
