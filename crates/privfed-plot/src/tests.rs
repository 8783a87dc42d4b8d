//! Figures read back as XML: well-formed, the series and ticks present, bad input typed.

use super::table::{Table, TableSpec, Y_COLUMN, figure_from_table};
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

// ---- PNG ----

/// The SVG's width and height (its root attributes).
fn svg_size(svg: &str) -> (f64, f64) {
    parsed(svg, |doc| {
        let root = doc.root_element();
        let num = |a: &str| root.attribute(a).unwrap().parse::<f64>().unwrap();
        (num("width"), num("height"))
    })
}

/// Decodes a PNG with the rasterizer's own decoder.
fn decode(png: &[u8]) -> resvg::tiny_skia::Pixmap {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "PNG signature");
    resvg::tiny_skia::Pixmap::decode_png(png).expect("a decodable PNG")
}

/// The (demultiplied) RGB of the pixel at SVG coordinates `(x, y)` in an image of `scale`.
fn rgb_at(img: &resvg::tiny_skia::Pixmap, scale: f64, x: f64, y: f64) -> (u8, u8, u8) {
    let p = img
        .pixel((x * scale) as u32, (y * scale) as u32)
        .unwrap()
        .demultiply();
    (p.red(), p.green(), p.blue())
}

/// Pixels darker than mid-grey in the SVG-coordinate box `[x0, x1) × [y0, y1)`.
fn dark_pixels(
    img: &resvg::tiny_skia::Pixmap,
    scale: f64,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> usize {
    let mut n = 0;
    for py in (y0 * scale) as u32..(y1 * scale) as u32 {
        for px in (x0 * scale) as u32..(x1 * scale) as u32 {
            let c = img.pixel(px, py).unwrap().demultiply();
            if u32::from(c.red()) + u32::from(c.green()) + u32::from(c.blue()) < 3 * 128 {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn png_has_the_svg_size_times_the_scale() {
    let fig = two_panels();
    let (w, h) = svg_size(&render_svg(&fig).unwrap());
    for scale in [1.0, 2.0, 0.5] {
        let img = decode(&render_png(&fig, scale).unwrap());
        assert_eq!(
            (f64::from(img.width()), f64::from(img.height())),
            ((w * scale).ceil(), (h * scale).ceil()),
            "scale {scale}"
        );
    }
}

#[test]
fn png_shows_the_series_where_the_svg_draws_them_and_the_text() {
    let fig = two_panels();
    let svg = render_svg(&fig).unwrap();
    let (w, _) = svg_size(&svg);
    let scale = 2.0;
    let img = decode(&render_png(&fig, scale).unwrap());
    // The centre of every marker of the first series has the first palette colour (#1f77b4),
    // those of the second the second (#ff7f0e), up to anti-aliasing and crossing lines.
    parsed(&svg, |doc| {
        for (series, want) in [
            ("gaussian", (0x1f, 0x77, 0xb4)),
            ("skellam <10 bits>", (0xff, 0x7f, 0x0e)),
        ] {
            let groups: Vec<_> = class_nodes(doc, "series")
                .into_iter()
                .filter(|n| n.attribute("data-series") == Some(series))
                .collect();
            let mut checked = 0;
            for g in groups {
                for m in g
                    .descendants()
                    .filter(|n| n.attribute("class") == Some("marker"))
                {
                    let at = |a: &str| m.attribute(a).unwrap().parse::<f64>().unwrap();
                    let close = |a: u8, b: u8| a.abs_diff(b) <= 40;
                    // The centre, or just left or right of it for markers on the panel's
                    // frame (half of them is clipped away there).
                    let got: Vec<_> = [0.0, -1.2, 1.2]
                        .iter()
                        .map(|dx| rgb_at(&img, scale, at("cx") + dx, at("cy")))
                        .collect();
                    assert!(
                        got.iter().any(|g| close(g.0, want.0)
                            && close(g.1, want.1)
                            && close(g.2, want.2)),
                        "{series} marker at ({}, {}): {got:?}, want {want:?}",
                        at("cx"),
                        at("cy")
                    );
                    checked += 1;
                }
            }
            assert_eq!(checked, 12, "{series}: 6 markers in each of 2 panels");
        }
    });
    // The title band (y < 26, above the panels' titles) has glyphs: the font was found.
    let title = dark_pixels(&img, scale, (0.0, w), (2.0, 26.0));
    assert!(title > 200, "title pixels: {title}");
    // Without a title that band is white except for the panel titles' ascenders below it.
    let mut untitled = two_panels();
    untitled.title.clear();
    let img = decode(&render_png(&untitled, scale).unwrap());
    assert_eq!(dark_pixels(&img, scale, (0.0, w), (0.0, 8.0)), 0);
}

#[test]
fn every_character_the_figures_use_has_a_glyph() {
    // The characters of tick labels (superscript exponents, the minus sign) and of the labels
    // the experiments use: a character that neither compiled-in font maps would be drawn as
    // nothing (or a box) in the PNG.
    use skrifa::MetadataProvider;
    let text = "0123456789.,:;()[]/+−-=×·≤≥≈±√²³⁰¹²³⁴⁵⁶⁷⁸⁹⁻εδσγλμταβΔℓ‖—–'%& ABCxyz";
    let fonts = [
        epaint_default_fonts::UBUNTU_LIGHT,
        epaint_default_fonts::HACK_REGULAR,
    ]
    .map(|bytes| skrifa::FontRef::new(bytes).unwrap());
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        assert!(
            fonts.iter().any(|f| f.charmap().map(c).is_some()),
            "no glyph for {c:?} (U+{:04X})",
            c as u32
        );
    }
    // And the check can fail: a CJK character is in neither font.
    assert!(fonts.iter().all(|f| f.charmap().map('漢').is_none()));
}

#[test]
fn png_errors_are_typed() {
    let fig = two_panels();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 17.0] {
        assert!(
            matches!(render_png(&fig, bad), Err(PlotError::Options(_))),
            "{bad}"
        );
    }
    let mut big = two_panels();
    big.panel_width = 9000.0;
    assert!(matches!(
        render_png(&big, 1.0),
        Err(PlotError::Raster { .. })
    ));
    // Bad data is the SVG's error, before any rasterizing.
    let mut nan = two_panels();
    nan.panels[0].series[0] =
        Series::points("s", vec![Point::new(1.0, f64::NAN)], Style::default());
    assert!(matches!(
        render_png(&nan, 1.0),
        Err(PlotError::NonFinite { .. })
    ));
}

#[test]
fn write_figure_chooses_the_format_by_extension() {
    let dir = std::env::temp_dir().join(format!("privfed-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fig = two_panels();
    let svg = dir.join("f.svg");
    let png = dir.join("f.PNG");
    write_figure(&fig, &svg).unwrap();
    write_figure(&fig, &png).unwrap();
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let img = decode(&std::fs::read(&png).unwrap());
    let (w, _) = svg_size(&render_svg(&fig).unwrap());
    assert_eq!(f64::from(img.width()), (w * DEFAULT_PNG_SCALE).ceil());
    for bad in ["f.pdf", "f", "f.svg.txt"] {
        assert!(matches!(
            write_figure(&fig, &dir.join(bad)),
            Err(PlotError::Options(m)) if m.contains(".svg or .png")
        ));
        assert!(!dir.join(bad).exists());
    }
    assert!(matches!(
        write_figure(&fig, &dir.join("missing-dir").join("f.png")),
        Err(PlotError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- wide tables, standard errors, averages ----

const WIDE: &str = "\
bits,epsilon,ref,ours,grr,trial,mse,mse_se
3,1,1.0,0.98,3.3,0,0.5,0.1
3,3,0.07,0.068,0.11,1,0.7,0.1
4,1,0.98,0.978,9.9,0,0.4,0.2
4,3,,0.067,0.22,1,0.6,0.2
";

#[test]
fn several_y_columns_make_one_series_each() {
    let table = Table::parse(WIDE).unwrap();
    let spec = TableSpec {
        x: "epsilon".into(),
        y: "ref".into(),
        more_y: vec!["ours".into(), "grr".into()],
        panels: vec!["bits".into()],
        y_scale: Scale::Log,
        ..TableSpec::default()
    };
    let fig = figure_from_table(&table, &spec).unwrap();
    assert_eq!(fig.panels.len(), 2);
    let names: Vec<_> = fig.panels[1]
        .series
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["ref", "ours", "grr"]);
    // The empty reference cell at 4 bits, ε = 3 is skipped.
    match &fig.panels[1].series[0].data {
        SeriesData::Points(p) => assert_eq!(p.len(), 1),
        other => panic!("{other:?}"),
    }
    // One colour per y column, the same in both panels.
    let colors: Vec<_> = fig.panels[0].series.iter().map(|s| s.style.color).collect();
    assert_eq!(colors, [0, 1, 2]);
    assert_eq!(fig.panels[0].series[2].style, fig.panels[1].series[2].style);
    assert_eq!(fig.panels[0].y.label, "ref, ours, grr");
    // @y can choose the dash while a real column chooses the colour.
    let spec2 = TableSpec {
        series: vec!["bits".into()],
        dash_by: Some(Y_COLUMN.into()),
        panels: vec![],
        ..spec.clone()
    };
    let fig2 = figure_from_table(&table, &spec2).unwrap();
    let s = &fig2.panels[0].series;
    assert_eq!(s.len(), 6);
    assert_eq!(s[0].name, "3 ref");
    assert_eq!((s[0].style.color, s[0].style.dash), (0, 0));
    assert_eq!((s[1].style.color, s[1].style.dash), (0, 1));
    assert_eq!((s[3].style.color, s[3].style.dash), (1, 0));
    assert_eq!(fig2.legend_title, "bits");
    // @y without several y columns is an error.
    let spec3 = TableSpec {
        more_y: vec![],
        dash_by: Some(Y_COLUMN.into()),
        ..spec
    };
    assert!(matches!(
        figure_from_table(&table, &spec3),
        Err(PlotError::Options(_))
    ));
}

#[test]
fn standard_errors_and_averages_give_intervals() {
    let table = Table::parse(WIDE).unwrap();
    let spec = TableSpec {
        x: "bits".into(),
        y: "mse".into(),
        se: Some(("mse_se".into(), 2.0)),
        ..TableSpec::default()
    };
    let fig = figure_from_table(&table, &spec).unwrap();
    match &fig.panels[0].series[0].data {
        SeriesData::Points(p) => {
            assert_eq!(p.len(), 4);
            let (lo, hi) = p[0].interval.unwrap();
            assert!((lo - 0.3).abs() < 1e-12 && (hi - 0.7).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
    // Averaging the two rows of each bit width: mean 0.6 (3 bits), 0.5 (4 bits) with the
    // t-interval on 1 degree of freedom: 12.706 · sd/√2 = 12.706 · 0.1.
    let avg = TableSpec {
        se: None,
        average: true,
        ..spec.clone()
    };
    let fig = figure_from_table(&table, &avg).unwrap();
    match &fig.panels[0].series[0].data {
        SeriesData::Points(p) => {
            assert_eq!(p.iter().map(|p| p.x).collect::<Vec<_>>(), [3.0, 4.0]);
            assert!((p[0].y - 0.6).abs() < 1e-12 && (p[1].y - 0.5).abs() < 1e-12);
            let (lo, hi) = p[0].interval.unwrap();
            assert!((hi - 0.6 - 1.2706).abs() < 1e-9 && (0.6 - lo - 1.2706).abs() < 1e-9);
        }
        other => panic!("{other:?}"),
    }
    // One way to get an interval at a time; the factor must be positive.
    let both = TableSpec {
        average: true,
        ..spec.clone()
    };
    assert!(matches!(
        figure_from_table(&table, &both),
        Err(PlotError::Options(_))
    ));
    let zero = TableSpec {
        se: Some(("mse_se".into(), 0.0)),
        ..spec
    };
    assert!(matches!(
        figure_from_table(&table, &zero),
        Err(PlotError::Options(_))
    ));
}

#[test]
fn a_title_wider_than_the_panels_is_not_cut_at_the_left_edge() {
    // One panel and a title about twice its width (paper001-shakespeare's figure had its first
    // characters cut off): the title's ink must stay inside the image, with no dark pixel in the
    // leftmost columns of the title band, and it must still be drawn.
    let mut fig = two_panels();
    fig.panels.truncate(1);
    fig.title =
        "Paper 001 on Shakespeare (roles): distributed DP at ε = 6, δ = 1e-5, against bits, \
                 with a long tail"
            .into();
    let scale = 2.0;
    let img = decode(&render_png(&fig, scale).unwrap());
    let (w, _) = svg_size(&render_svg(&fig).unwrap());
    assert_eq!(dark_pixels(&img, scale, (0.0, 2.0), (0.0, 28.0)), 0);
    assert_eq!(dark_pixels(&img, scale, (w - 2.0, w), (0.0, 28.0)), 0);
    assert!(dark_pixels(&img, scale, (0.0, w), (0.0, 28.0)) > 200);
}
